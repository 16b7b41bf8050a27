// Answers too costly to parse (issue #36 point 9), met by relsync as deploy/ runs it (a 256 MB
// heap) against a real kube-apiserver:
//
// - a real custom resource of 1.75 MiB of empty arrays (the example CRD keeps unknown fields),
//   stored because the platform's etcd takes requests up to 4 MiB (k3s's kine and some
//   installations raise etcd's 1.5 MiB; kube-apiserver's own etcd client then sends at most
//   2 MiB): its text says ~76 MiB once parsed, over the 72 MiB cap;
// - a tenant's own API server (the fault proxy) that answers one object, in every LIST and GET,
//   with 7 MiB of empty objects (~306 MiB once parsed).
//
// Each is refused alone, by name, in LISTs, GETs and watch events alike: its neighbours of the
// same type, and the ConfigMaps they relate (another type), are synced, and a change made after
// the refusals were logged still arrives. A change of the costly object comes as a costly watch
// event: refused by name too, and the watch goes on without being dropped. Before, the 7 MiB
// object failed the LIST at every page size down to one, so the type's watch never listed past
// it for any tenant of the cluster (tried: z-last was never copied); and the 1.75 MiB object was
// parsed in GETs and watch events (a text under 72 MiB / 32 was not scanned) while pages that
// held it beside others were refused.
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startControlPlanes, startControlPlane, type ControlPlane } from '../harness/control-plane.js';
import { startFaultProxy, type FaultProxy } from '../harness/fault-proxy.js';
import { eventually, installCrd } from '../harness/kube.js';
import { asDeployed, metricTotal, startRelsync, writeConfig, type RelsyncProcess } from '../harness/relsync-process.js';
import { ClusterClient, defaultCopyNamespace, GROUP, PLURAL } from '../harness/tenant.js';

const NS = 'shop';
/** 1.75 MiB of `[],`: stored by an etcd that takes 4 MiB requests; says ~76 MiB once parsed. */
const COSTLY_ARRAYS = 611_000;
/** 7 MiB of `{},`, which the tenant's own API server puts in one object. */
const HEAVY_OBJECTS = (7 * 1024 * 1024) / 3;
const DEPLOYED = asDeployed();

describe('answers too costly to parse', () => {
  let platform: ControlPlane;
  let service: ControlPlane;
  let proxy: FaultProxy;
  let a: ClusterClient;
  let svc: ClusterClient;
  let relsync: RelsyncProcess;
  const copyNs = defaultCopyNamespace('tenant-a', NS);

  before(async () => {
    [platform, service] = await Promise.all([
      startControlPlane('tenant-a', { etcdMaxRequestBytes: 4 * 1024 * 1024 }),
      startControlPlanes('service').then(([s]) => s!),
    ]);
    await Promise.all([installCrd(platform.kubeConfig), installCrd(service.kubeConfig)]);
    a = new ClusterClient('tenant-a', platform.kubeConfig);
    svc = new ClusterClient('service', service.kubeConfig);
    await a.ensureNamespace(NS);
    // Names in the LIST's order (etcd's keys): the costly ones between their neighbours.
    for (const name of ['a-first', 'costly', 'heavy', 'z-last']) await a.putConfigMap(NS, `${name}-cfg`, { v: '1' });
    await a.createDatabase(NS, 'a-first', { configMapName: 'a-first-cfg' });
    await a.createDatabase(NS, 'costly', { configMapName: 'costly-cfg', junk: Array.from({ length: COSTLY_ARRAYS }, () => []) });
    await a.createDatabase(NS, 'heavy', { configMapName: 'heavy-cfg' });
    await a.createDatabase(NS, 'z-last', { configMapName: 'z-last-cfg' });

    // The platform's API server as a tenant who runs it could make it: "heavy" is always 7 MiB of
    // empty objects, but for its metadata (a PartialObjectMetadata, which a real server keeps small).
    proxy = await startFaultProxy(platform, 'tenant-server');
    const junk = Array.from({ length: HEAVY_OBJECTS }, () => ({}));
    proxy.inject({
      method: 'GET',
      path: /\/databases(\/heavy)?$/,
      action: {
        kind: 'rewrite',
        object: (o) => ((o.metadata as { name?: string } | undefined)?.name === 'heavy' && o.kind !== 'PartialObjectMetadata' ? { ...o, spec: { ...(o.spec as object), junk } } : o),
      },
    });

    const dir = mkdtempSync(join(tmpdir(), 'relsync-e2e-parse-cap-'));
    const config = writeConfig(dir, {
      agentName: 'e2e',
      platformClusters: [{ name: 'tenant-a', kubeconfig: proxy.kubeconfigPath }],
      serviceCluster: { name: 'service', kubeconfig: service.kubeconfigPath },
      store: { path: join(dir, 'relsync.db') },
      leaderElection: { enabled: false },
      resync: { schedule: '0 0 1 1 *', onStartup: true },
      resources: [{ group: GROUP, resource: PLURAL, related: [{ id: 'config', origin: 'platform', resource: 'configmaps', reference: { path: '.spec.configMapName' } }] }],
    });
    relsync = await startRelsync(config, join(dir, 'relsync.log'), ['--log-level', 'info'], DEPLOYED);
  });

  after(async () => {
    if (relsync?.child.exitCode === null) await relsync.stop();
    await proxy?.close();
    await Promise.all([platform?.stop(), service?.stop()]);
  });

  const alive = () => {
    const { exitCode, signalCode } = relsync.child;
    if (exitCode !== null || signalCode !== null) throw new Error(`relsync exited (${exitCode ?? signalCode}):\n${relsync.log().slice(-3000)}`);
  };
  const refusal = (name: string, change: string) => (l: string) => l.includes('too costly to read') && l.includes(`"object":"${NS}/${name}"`) && l.includes(`"change":"${change}"`);

  it('refuses each costly object alone, by name, and syncs its neighbours and their ConfigMaps', async (t) => {
    // The most heap relsync said it used while it met them (a figure for docs/guarantees.md).
    let heapPeak = 0;
    const sampler = setInterval(() => {
      fetch(`http://127.0.0.1:${relsync.httpPort}/metrics`).then((r) => r.text()).then((text) => {
        const used = Number(/^nodejs_heap_size_used_bytes (\d+)/m.exec(text)?.[1] ?? 0);
        heapPeak = Math.max(heapPeak, used);
      }, () => undefined);
    }, 500);
    t.after(() => {
      clearInterval(sampler);
      t.diagnostic(`relsync's heap at most ${Math.round(heapPeak / 1024 / 1024)} MiB (sampled every 0.5 s)`);
    });
    for (const name of ['a-first', 'z-last']) {
      await eventually(`${name} and its ConfigMap copied`, async () => (alive(), (await svc.database(copyNs, name)) && (await svc.configMap(copyNs, `${name}-cfg`))), 120_000);
    }
    // The watch's LIST met both: each refused alone (its page asked for again as metadata only).
    const costly = await relsync.waitForLog('the LIST refuses the real costly object', refusal('costly', 'LIST'));
    assert.match(costly, /would take about 7\d MiB of memory once parsed, more than 72 MiB \(limits\.parsedBytes\)/);
    const heavy = await relsync.waitForLog('the LIST refuses the tenant server\'s 7 MiB object', refusal('heavy', 'LIST'));
    assert.match(heavy, /would take about \d{3} MiB of memory once parsed/);
    // Their own reconciles read them live and meet the same refusal: no copy, an error that names them.
    for (const name of ['costly', 'heavy']) {
      await relsync.waitForLog(`${name}'s reconcile fails with the refusal`, (l) => l.includes('reconcile failed') && l.includes(`/databases/${name}:`) && l.includes('limits.parsedBytes'), 60_000);
      assert.equal(await svc.database(copyNs, name), undefined, `${name} is not copied`);
    }
    assert.ok((await metricTotal(relsync.httpPort, 'relsync_objects_refused_total')) >= 2);
    // A change made now, after the refusals were logged, arrives: the type's watch runs.
    await a.putConfigMap(NS, 'z-last-cfg', { v: '2' });
    await a.updateDatabase(NS, 'a-first', (db) => void (db.spec = { ...db.spec, size: 'large' }));
    await eventually('the changes made after the refusals', async () => {
      alive();
      const [cfg, db] = [await svc.configMap(copyNs, 'z-last-cfg'), await svc.database(copyNs, 'a-first')];
      return (cfg?.data?.v === '2' && (db?.spec as { size?: string } | undefined)?.size === 'large') || undefined;
    }, 60_000);
  });

  it('refuses a costly watch event by name and watches on, without dropping the watch', async () => {
    // The watch dropped after an error (and then listed again): what the loop did with such a line before.
    const reconnects = () => metricTotal(relsync.httpPort, 'relsync_watch_reconnects_total', (l) => l.includes(PLURAL) && l.includes('reason="error"'));
    const reconnectsBefore = await reconnects();
    await a.updateDatabase(NS, 'costly', (db) => void (db.metadata.labels = { ...db.metadata.labels, touched: 'yes' }));
    await relsync.waitForLog('the watch refuses the costly event', refusal('costly', 'MODIFIED'), 30_000);
    // Proof that the same watch went on: a change of another primary after it arrives, through it.
    const relists = () => metricTotal(relsync.httpPort, 'relsync_watch_relists_total', (l) => l.includes(PLURAL));
    const relistsBefore = await relists();
    await a.updateDatabase(NS, 'a-first', (db) => void (db.spec = { ...db.spec, marker: 'after-the-event' }));
    await eventually('the primary changed after the costly event', async () => (alive(), (await svc.database(copyNs, 'a-first'))?.spec?.marker === 'after-the-event' || undefined), 60_000);
    assert.equal(await reconnects(), reconnectsBefore, 'the watch was not dropped');
    assert.equal(await relists(), relistsBefore, 'nor listed again');
    alive();
  });

  // Before, a watch that ended normally reset the backoff and was opened again at once: the same
  // server made relsync ask in a loop (no client-side rate limit), hundreds of requests a second.
  for (const [what, text, said] of [['ends every watch at once, without a line', '', 'the watch ended at once without a line'], ['answers every watch with a line that does not parse', '{"type":"ADDED","object":\n', 'the watch sent a line that does not parse']] as const) {
    it(`a server that ${what} is asked again with a backoff, not in a loop, and watched again once it answers`, async () => {
      const watches = /\/apis\/demo\.relsync\.dev\/v1alpha1\/databases$/;
      const fault = proxy.inject({ method: 'GET', path: watches, query: /watch=true/, action: { kind: 'status', status: 200, text } });
      const faulted = (r: (typeof proxy.requests)[number]) => watches.test(r.path) && /watch=true/.test(r.query) && r.fault === 'status';
      const before = proxy.requests.length;
      let since = 0;
      try {
        proxy.cut(watches);
        since = (await eventually('the first watch the server ends', async () => proxy.requests.slice(before).find(faulted), 60_000)).at;
        // A window of 10 s from it, counted on the proxy: the backoff's steps (0.25–0.5 s, doubling) allow at most 6.
        await new Promise((resolve) => setTimeout(resolve, 10_000));
      } finally {
        fault();
      }
      const asked = proxy.requests.slice(before).filter((r) => faulted(r) && r.at < since + 10_000).length;
      // (At least the first; the backoff may have grown in the case before.)
      console.log(`a server that ${what}: ${asked} watch requests in 10 s`);
      assert.ok(asked <= 8, `${asked} watch requests in 10 s`);
      assert.match(relsync.log(), new RegExp(said), 'the log says why it waits');
      alive();
      // The server answers again: a change arrives through the watch once its backoff (at most 30 s) is over.
      const marker = `after-${text === '' ? 'empty' : 'garbage'}`;
      await a.updateDatabase(NS, 'a-first', (db) => void (db.spec = { ...db.spec, marker }));
      await eventually('a change after the server answers again', async () => (alive(), (await svc.database(copyNs, 'a-first'))?.spec?.marker === marker || undefined), 60_000);
    });
  }
});
