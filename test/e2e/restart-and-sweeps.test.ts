// No change missed: resumable watches, relist on expiry, API server restarts,
// sweeps, and a bounded store. relsync runs as a real process; the startup
// sweep is off (resync.onStartup: false) so that these tests prove the
// watches and checkpoints themselves, and sweeps are tested on their own.
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import { startClusters, type Clusters } from '../harness/clusters.js';
import { compactEtcd, type ControlPlane } from '../harness/control-plane.js';
import { eventually } from '../harness/kube.js';
import { runCli, startRelsync, writeConfig, type RelsyncProcess } from '../harness/relsync-process.js';
import { defaultCopyNamespace, type ClusterClient } from '../harness/tenant.js';

/** How long convergence after a restart may take, at most. */
const CONVERGE_MS = 15_000;

describe('restart, relist and sweeps', () => {
  let clusters: Clusters<'tenant-a' | 'service'> | undefined;
  let platform: ControlPlane;
  let a: ClusterClient;
  let svc: ClusterClient;
  let dir: string;
  let configPath: string;
  let storePath: string;
  let relsync: RelsyncProcess | undefined;
  let runs = 0;
  const start = async () => {
    relsync = await startRelsync(configPath, join(dir, `relsync-${++runs}.log`));
    return relsync;
  };
  const store = () => new BetterSqlite3(storePath, { readonly: true });

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'relsync-e2e-restart-'));
    clusters = await startClusters('tenant-a', 'service');
    const { 'tenant-a': pa, service: ps } = clusters.plane;
    ({ 'tenant-a': a, service: svc } = clusters.client);
    platform = pa;
    storePath = join(dir, 'relsync.db');
    configPath = writeConfig(dir, {
      agentName: 'e2e',
      platformClusters: [{ name: 'tenant-a', kubeconfig: pa.kubeconfigPath }],
      serviceCluster: { name: 'service', kubeconfig: ps.kubeconfigPath },
      store: { path: storePath },
      resync: { schedule: '0 0 1 1 *', onStartup: false },
      // After SIGKILL the dead process still holds the lease: a restart waits for it to expire.
      leaderElection: { leaseDurationSeconds: 3, renewDeadlineSeconds: 2, retryPeriodSeconds: 1 },
      resources: [
        {
          group: 'demo.relsync.dev',
          resource: 'databases',
          related: [
            { id: 'config', origin: 'platform', resource: 'configmaps', reference: { path: '.spec.configMapName' } },
            { id: 'tls', origin: 'platform', resource: 'secrets', reference: { path: '.spec.secretName' } },
            { id: 'extra', origin: 'platform', resource: 'configmaps', selector: { matchLabels: { app: '{{ name }}' } } },
          ],
        },
      ],
    });
    await start();
  });

  after(async () => {
    await relsync?.stop();
    await clusters?.stop();
  });

  /** Builds a namespace with two primaries and their related objects, synced. */
  async function scenario(namespace: string) {
    await a.ensureNamespace(namespace);
    const ns = defaultCopyNamespace('tenant-a', namespace);
    await a.putConfigMap(namespace, 'kept-config', { v: '1' });
    await a.putSecret(namespace, 'kept-secret', { k: 'v' });
    await a.putConfigMap(namespace, 'gone-config', { v: '1' });
    await a.createDatabase(namespace, 'kept', { configMapName: 'kept-config', secretName: 'kept-secret', size: 'small' });
    await a.createDatabase(namespace, 'gone', { configMapName: 'gone-config' });
    await eventually('scenario synced', async () => (await svc.configMap(ns, 'kept-config')) && (await svc.secret(ns, 'kept-secret')) && (await svc.configMap(ns, 'gone-config')) && true);
    return ns;
  }

  /** Changes made while relsync is down, of every kind the issue names. */
  async function changeWhileDown(namespace: string, ns: string) {
    await a.putConfigMap(namespace, 'kept-config', { v: '2' }); // related object changed
    await a.deleteSecret(namespace, 'kept-secret'); // related source deleted
    await a.putConfigMap(namespace, 'new-match', { m: '1' }, { app: 'kept' }); // new selector match
    await a.updateDatabase(namespace, 'gone', (db) => (db.metadata.finalizers = []));
    await a.deleteDatabase(namespace, 'gone'); // primary deleted (and gone, finalizer removed by hand)
    await svc.updateDatabase(ns, 'kept', (db) => (db.spec = { ...db.spec, size: 'tampered' })); // copy edited by hand
  }

  async function converged(namespace: string, ns: string): Promise<number> {
    const startedAt = Date.now();
    await eventually('changed related object synced', async () => (await svc.configMap(ns, 'kept-config'))?.data?.v === '2', CONVERGE_MS);
    await eventually('copy of the deleted source removed', async () => (await svc.secret(ns, 'kept-secret')) === undefined, CONVERGE_MS);
    await eventually('new selector match copied', () => svc.configMap(ns, 'new-match'), CONVERGE_MS);
    await eventually('deleted primary cleaned up', async () => (await svc.database(ns, 'gone')) === undefined && (await svc.configMap(ns, 'gone-config')) === undefined, CONVERGE_MS);
    await eventually('hand edit of the copy repaired', async () => (await svc.database(ns, 'kept'))?.spec?.size === 'small', CONVERGE_MS);
    const total = Date.now() - startedAt;
    assert.ok(total < CONVERGE_MS, `every change converged within ${CONVERGE_MS} ms in all (took ${total} ms)`);
    return total;
  }

  it('catches up on every kind of change made while it was stopped with SIGTERM', async () => {
    const ns = await scenario('r1');
    assert.equal(await relsync!.stop(), 0);
    await changeWhileDown('r1', ns);
    const started = Date.now();
    const process = await start();
    await converged('r1', ns);
    console.log(`converged ${Date.now() - started} ms after a restart following SIGTERM`);
    assert.match(process.log(), /"resumed":[1-9]/, 'the watches resumed from their checkpoints');
  });

  it('catches up after SIGKILL, with work that was queued but not done', async () => {
    const ns = await scenario('r2');
    await relsync!.kill();
    await changeWhileDown('r2', ns);
    const started = Date.now();
    await start();
    await converged('r2', ns);
    console.log(`converged ${Date.now() - started} ms after a restart following SIGKILL`);
  });

  it('relists when its stored resourceVersion has expired', async () => {
    const ns = await scenario('r3');
    assert.equal(await relsync!.stop(), 0);
    await changeWhileDown('r3', ns);
    // Expire every stored version: compact etcd, and restart the API server so its watch cache starts anew.
    await compactEtcd(platform);
    await platform.restartApiServer();
    const started = Date.now();
    const process = await start();
    await converged('r3', ns);
    console.log(`converged ${Date.now() - started} ms after a restart with expired resourceVersions`);
    assert.match(process.log(), /resourceVersion expired \(410 Gone\); relisting/);
  });

  it('survives an API server restart while it keeps running', async () => {
    const ns = await scenario('r4');
    await platform.restartApiServer();
    await a.putConfigMap('r4', 'kept-config', { v: 'after-restart' });
    await eventually('change after the API server restart synced', async () => (await svc.configMap(ns, 'kept-config'))?.data?.v === 'after-restart', 60_000);
    await eventually('/readyz is 200 again', async () => (await fetch(`http://127.0.0.1:${relsync!.httpPort}/readyz`)).status === 200, 30_000);
  });

  it('sweeps repair what no watch saw, remove orphans, and record what they did', async () => {
    const ns = await scenario('r5');
    assert.equal(await relsync!.stop(), 0);
    // While nothing runs: drift in a copy, and an orphan copy nothing accounts for.
    await svc.putConfigMap(ns, 'kept-config', { v: 'drift' });
    await svc.core.createNamespacedConfigMap({
      namespace: ns,
      body: {
        metadata: {
          name: 'orphan',
          labels: { 'relsync.dev/agent': 'e2e' },
          annotations: { 'relsync.dev/source-cluster': 'tenant-a', 'relsync.dev/source-group': '', 'relsync.dev/source-resource': 'configmaps', 'relsync.dev/source-namespace': 'r5', 'relsync.dev/source-name': 'orphan' },
        },
        data: { v: 'x' },
      },
    });
    const out = await runCli(['sweep', '--config', configPath, '-o', 'json']);
    assert.equal(out.code, 0, out.stderr);
    const summary = JSON.parse(out.stdout) as { status: string; copiesRepaired: number; copiesRemoved: number; primariesSeen: number; errors: number };
    console.log(`sweep summary: ${out.stdout.trim()}`);
    assert.equal(summary.status, 'done');
    assert.ok(summary.copiesRepaired >= 1 && summary.copiesRemoved >= 1, out.stdout);
    assert.equal((await svc.configMap(ns, 'kept-config'))?.data?.v, '1', 'drift repaired by the sweep');
    assert.equal(await svc.configMap(ns, 'orphan'), undefined, 'orphan removed by the sweep');
    const db = store();
    const row = db.prepare("select * from sweeps_view where trigger = 'cli' order by id desc limit 1").get() as { status: string; copies_repaired: number; duration_ms: number };
    db.close();
    assert.equal(row.status, 'done');
    assert.ok(row.copies_repaired >= 1);
    await start();
  });

  it('holds exactly the live relationships after many create/delete cycles and one sweep', async () => {
    await a.ensureNamespace('cycles');
    const ns = defaultCopyNamespace('tenant-a', 'cycles');
    for (let cycle = 0; cycle < 8; cycle++) {
      const names = Array.from({ length: 5 }, (_, i) => `c${cycle}-${i}`);
      await Promise.all(names.map(async (n) => {
        await a.putConfigMap('cycles', `${n}-cfg`, { n }, { app: n });
        await a.createDatabase('cycles', n, { configMapName: `${n}-cfg`, secretName: `${n}-missing` });
      }));
      await eventually(`cycle ${cycle} synced`, async () => (await Promise.all(names.map((n) => svc.configMap(ns, `${n}-cfg`)))).every(Boolean), 30_000);
      if (cycle < 7) {
        await Promise.all(names.map((n) => a.deleteDatabase('cycles', n)));
        await eventually(`cycle ${cycle} cleaned up`, async () => (await Promise.all(names.map((n) => svc.configMap(ns, `${n}-cfg`)))).every((c) => c === undefined), 30_000);
      }
    }
    const out = await runCli(['sweep', '--config', configPath, '-o', 'json', '--force']);
    assert.equal(out.code, 0, out.stderr);
    const db = store();
    const count = (sql: string) => (db.prepare(sql).get() as { n: number }).n;
    const livePrimaries = ((await a.objects.listClusterCustomObject({ group: 'demo.relsync.dev', version: 'v1alpha1', plural: 'databases' })) as { items: unknown[] }).items.length;
    assert.equal(count('select count(*) as n from primaries'), livePrimaries, 'one row per live primary');
    // Each live primary of the "cycles" namespace has exactly: config (synced), tls (pending), extra (its own ConfigMap, matched by app=<name>).
    assert.equal(count("select count(*) as n from relations where primary_namespace = 'cycles'"), 5 * 3);
    assert.equal(count("select count(*) as n from relations where primary_namespace = 'cycles' and state = 'pending'"), 5, 'the missing Secrets stay pending references');
    assert.equal(count("select count(*) as n from relations r where not exists (select 1 from primaries p where p.cluster = r.primary_cluster and p.namespace = r.primary_namespace and p.name = r.primary_name)"), 0);
    assert.equal(count("select count(*) as n from selectors where primary_namespace = 'cycles'"), 5, 'one selector per live primary');
    db.close();
    // The running relsync records done work in batches (its checkpointer): wait for the flush.
    await eventually('no work left pending', async () => {
      const check = store();
      try {
        return (check.prepare('select count(*) as n from pending_primaries').get() as { n: number }).n === 0;
      } finally {
        check.close();
      }
    }, 10_000);
  });
});
