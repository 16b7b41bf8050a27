// A sweep skips the primaries whose last complete sync acted on what its
// LISTs show (controller/sweep-skip.ts), and nothing else: every kind of
// change made while relsync was stopped — to a source, a copy, a primary's
// copy, a new selector or inverse match on either side, a source that appears
// for a reference that waited for it, a label that stops a match — makes its
// primary reconciled by the one-shot sweep, with three rules and a
// service-origin rule sharing one type; a changed config reconciles them all.
// The sweep is a one-shot CLI run with no relsync running: what it did is done
// when it returns, so every claim is checked right after, without waiting.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startClusters, type Clusters } from '../harness/clusters.js';
import { eventually } from '../harness/kube.js';
import { runCli, startRelsync, writeConfig, type RelsyncProcess } from '../harness/relsync-process.js';
import { defaultCopyNamespace, type ClusterClient } from '../harness/tenant.js';

const OWNER = 'skip.relsync.dev/owner';
const NS = 'sk';
const PRIMARIES = ['p0', 'p1', 'p2', 'p3', 'p4', 'p5', 'p6', 'p7', 'p8', 'p9'];

interface SweepSummary {
  status: string;
  primariesSeen: number;
  errors: number;
  phases: { skipped: number };
}

describe('sweeps skip only what did not change', () => {
  let clusters: Clusters<'tenant-a' | 'service'> | undefined;
  let a: ClusterClient;
  let svc: ClusterClient;
  let dir: string;
  let configPath: string;
  let relsync: RelsyncProcess | undefined;
  let config: Record<string, unknown>;
  const ns = defaultCopyNamespace('tenant-a', NS);

  const sweep = async (): Promise<SweepSummary> => {
    const out = await runCli(['sweep', '--config', configPath, '-o', 'json']);
    assert.equal(out.code, 0, out.stderr);
    const summary = JSON.parse(out.stdout) as SweepSummary;
    assert.equal(summary.status, 'done', out.stdout);
    assert.equal(summary.errors, 0, out.stdout);
    console.log(`sweep: ${out.stdout.trim()}`);
    return summary;
  };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'relsync-e2e-sweep-skip-'));
    clusters = await startClusters('tenant-a', 'service');
    const { 'tenant-a': pa, service: ps } = clusters.plane;
    ({ 'tenant-a': a, service: svc } = clusters.client);
    config = {
      agentName: 'e2e',
      platformClusters: [{ name: 'tenant-a', kubeconfig: pa.kubeconfigPath }],
      serviceCluster: { name: 'service', kubeconfig: ps.kubeconfigPath },
      store: { path: join(dir, 'relsync.db') },
      resync: { schedule: '0 0 1 1 *', onStartup: false },
      resources: [
        {
          group: 'demo.relsync.dev',
          resource: 'databases',
          // Three platform rules and a service-origin rule, all of ConfigMaps.
          related: [
            { id: 'config', origin: 'platform', resource: 'configmaps', reference: { path: '.spec.configMapName' } },
            { id: 'extra', origin: 'platform', resource: 'configmaps', selector: { matchLabels: { app: '{{ name }}' } } },
            { id: 'inv', origin: 'platform', resource: 'configmaps', inverse: { label: OWNER } },
            { id: 'inv-s', origin: 'service', resource: 'configmaps', inverse: { label: OWNER } },
          ],
        },
      ],
    };
    configPath = writeConfig(dir, config);
    relsync = await startRelsync(configPath, join(dir, 'relsync.log'));

    await a.ensureNamespace(NS);
    for (const p of PRIMARIES) {
      // p6 names a ConfigMap that does not exist yet: its relation waits for it.
      if (p !== 'p6') await a.putConfigMap(NS, `${p}-config`, { v: '1' });
      await a.putConfigMap(NS, `${p}-extra`, { v: '1' }, { app: p });
      await a.putConfigMap(NS, `${p}-inv`, { v: '1' }, { [OWNER]: p });
      await a.createDatabase(NS, p, { configMapName: `${p}-config` });
    }
    for (const p of PRIMARIES) {
      await eventually(`${p} synced`, async () => (p === 'p6' || (await svc.configMap(ns, `${p}-config`))) && (await svc.configMap(ns, `${p}-extra`)) && (await svc.configMap(ns, `${p}-inv`)) && true);
    }
    // Settled: every reconcile queued by the writes above has run (nothing relsync does is left to change the versions).
    await eventually('p9 copy in place', () => svc.database(ns, 'p9'));
    assert.equal(await relsync.stop(), 0);
    relsync = undefined;
  });

  after(async () => {
    await relsync?.stop();
    await clusters?.stop();
  });

  it('skips every primary when nothing changed', async () => {
    const first = await sweep();
    // A sweep right after the running relsync stopped: the versions it stored are what the LISTs show.
    assert.equal(first.primariesSeen, PRIMARIES.length);
    assert.equal(first.phases.skipped, PRIMARIES.length, 'nothing changed: nothing to reconcile');
  });

  it('reconciles every primary whose objects changed while relsync was stopped, and only those', async () => {
    await a.putConfigMap(NS, 'p0-config', { v: '2' }); // a referenced source changed
    await a.putConfigMap(NS, 'p1-extra2', { v: 'new' }, { app: 'p1' }); // a new selector match
    await a.putConfigMap(NS, 'p2-inv2', { v: 'new' }, { [OWNER]: 'p2' }); // a new inverse match
    await svc.deleteConfigMap(ns, 'p3-config'); // a related copy deleted by hand
    await svc.updateDatabase(ns, 'p4', (db) => (db.spec = { ...db.spec, configMapName: 'tampered' })); // a primary's copy edited by hand
    await a.putConfigMap(NS, 'p6-config', { v: 'late' }); // the source a reference waited for
    const copy7 = await svc.copyOf(ns, 'p7');
    await svc.putConfigMap(ns, 'p7-svc', { v: 'from-service' }, { [OWNER]: 'p7' }, copy7); // a new service-side inverse match
    await a.putConfigMap(NS, 'p8-extra', { v: '1' }, {}); // a label that no longer matches
    await a.putConfigMap(NS, 'unrelated', { v: 'x' }, { app: 'nobody' }); // matches nothing: costs no primary its skip

    const summary = await sweep();
    assert.equal(summary.phases.skipped, 2, 'p5 and p9 changed in nothing; every other primary is reconciled');
    assert.equal((await svc.configMap(ns, 'p0-config'))?.data?.v, '2', 'changed source copied');
    assert.ok(await svc.configMap(ns, 'p1-extra2'), 'new selector match copied');
    assert.ok(await svc.configMap(ns, 'p2-inv2'), 'new inverse match copied');
    assert.ok(await svc.configMap(ns, 'p3-config'), 'deleted related copy written again');
    assert.equal((await svc.database(ns, 'p4'))?.spec?.configMapName, 'p4-config', "hand edit of the primary's copy repaired");
    assert.equal((await svc.configMap(ns, 'p6-config'))?.data?.v, 'late', 'the source that appeared is copied');
    assert.equal((await a.configMap(NS, 'p7-svc'))?.data?.v, 'from-service', 'new service-side match copied to the platform');
    assert.equal(await svc.configMap(ns, 'p8-extra'), undefined, 'the copy of what no longer matches is removed');
    assert.equal(await svc.configMap(ns, 'unrelated'), undefined, 'nothing selects it');

    const again = await sweep();
    assert.equal(again.phases.skipped, PRIMARIES.length, 'what the sweep synced is stored: the next sweep skips everything');
  });

  it('reconciles every primary once the config changed', async () => {
    writeFileSync(configPath, JSON.stringify({ ...config, limits: { relatedPerPrimary: 400 } }));
    const changed = await sweep();
    assert.equal(changed.phases.skipped, 0, 'a config the stored syncs were not made with vouches for nothing');
    assert.equal((await sweep()).phases.skipped, PRIMARIES.length);
  });
});
