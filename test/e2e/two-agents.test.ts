// Two relsync agents (different agentNames, different platforms) on one
// service cluster with overlapping types: neither writes, adopts or deletes
// what the other made — not by their reconciles, not by their sweeps — also
// when their platform clusters are given the same name in their configs, so
// that both compute the same copy namespace and the same copy names (what
// api-syncagent users running several agents ask for). The other agent's
// refusal is proven by the Event it puts on its own primary before anything
// is checked as not written.
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startClusters, type Clusters } from '../harness/clusters.js';
import { eventually } from '../harness/kube.js';
import { runCli, startRelsync, writeConfig, type RelsyncProcess } from '../harness/relsync-process.js';
import { decode, defaultCopyNamespace, GROUP, PLURAL, type ClusterClient } from '../harness/tenant.js';

describe('two agents on one service cluster', () => {
  let clusters: Clusters<'tenant-a' | 'tenant-b' | 'service'>;
  let a: ClusterClient;
  let b: ClusterClient;
  let svc: ClusterClient;
  let dir: string;
  const running: RelsyncProcess[] = [];

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'relsync-e2e-two-agents-'));
    clusters = await startClusters('tenant-a', 'tenant-b', 'service');
    ({ 'tenant-a': a, 'tenant-b': b, service: svc } = clusters.client);
  });

  after(async () => {
    for (const r of running) await r.stop();
    await clusters?.stop();
  });

  /** An agent syncing one platform, which its config calls `platformName`: a reference rule and a service-origin rule. */
  function agentConfig(agent: string, platform: 'tenant-a' | 'tenant-b', platformName: string): string {
    const file = `${agent}-${platformName}`;
    return writeConfig(dir, {
      agentName: agent,
      platformClusters: [{ name: platformName, kubeconfig: clusters.plane[platform].kubeconfigPath }],
      serviceCluster: { name: 'service', kubeconfig: clusters.plane.service.kubeconfigPath },
      store: { path: join(dir, `${file}.db`) },
      resync: { schedule: '0 0 1 1 *', onStartup: true },
      leaderElection: { enabled: false },
      resources: [{ group: GROUP, resource: PLURAL, related: [
        { id: 'config', origin: 'platform', resource: 'configmaps', reference: { path: '.spec.configMapName' } },
        { id: 'creds', origin: 'service', resource: 'secrets', template: { name: '{{ name }}-creds' } },
      ] }],
    }, `${file}.yaml`);
  }

  async function sweep(config: string): Promise<{ copiesRemoved: number; copiesRepaired: number; errors: number }> {
    const out = await runCli(['sweep', '--config', config, '-o', 'json', '--log-level', 'error']);
    assert.equal(out.code, 0, `relsync sweep: ${out.stdout} ${out.stderr}`);
    return JSON.parse(out.stdout) as { copiesRemoved: number; copiesRepaired: number; errors: number };
  }

  const uidOf = async (kind: 'database' | 'configMap' | 'secret', ns: string, name: string) => (await svc[kind](ns, name))?.metadata?.uid;

  it('keep apart when their platforms have different names: each converges, sweeps delete nothing of the other', async () => {
    const configA = agentConfig('alpha', 'tenant-a', 'plat-a');
    const configB = agentConfig('beta', 'tenant-b', 'plat-b');
    for (const [t, v] of [[a, 'a'], [b, 'b']] as const) {
      await t.ensureNamespace('apart');
      await t.putConfigMap('apart', 'cfg', { v });
      await t.createDatabase('apart', 'db', { configMapName: 'cfg' });
    }
    running.push(await startRelsync(configA, join(dir, 'alpha-apart.log')), await startRelsync(configB, join(dir, 'beta-apart.log')));
    const nsA = defaultCopyNamespace('plat-a', 'apart');
    const nsB = defaultCopyNamespace('plat-b', 'apart');
    await eventually("alpha's copies", async () => (await svc.configMap(nsA, 'cfg'))?.data?.v === 'a' && (await svc.database(nsA, 'db')), 30_000);
    await eventually("beta's copies", async () => (await svc.configMap(nsB, 'cfg'))?.data?.v === 'b' && (await svc.database(nsB, 'db')), 30_000);
    // The operator's answer, on each side: each reaches its own tenant only.
    await svc.putSecret(nsA, 'db-creds', { p: 'for a' }, undefined, await svc.copyOf(nsA, 'db'));
    await svc.putSecret(nsB, 'db-creds', { p: 'for b' }, undefined, await svc.copyOf(nsB, 'db'));
    assert.equal(decode(await eventually('tenant a gets its credentials', () => a.secret('apart', 'db-creds'), 30_000), 'p'), 'for a');
    assert.equal(decode(await eventually('tenant b gets its credentials', () => b.secret('apart', 'db-creds'), 30_000), 'p'), 'for b');
    const uids = { a: await uidOf('configMap', nsA, 'cfg'), b: await uidOf('configMap', nsB, 'cfg'), dbA: await uidOf('database', nsA, 'db'), dbB: await uidOf('database', nsB, 'db') };
    for (const r of running.splice(0)) await r.stop();

    // Each agent's sweep, while the other's copies look like orphans to anyone who ignores marks.
    for (const config of [configA, configB]) {
      const swept = await sweep(config);
      assert.deepEqual({ removed: swept.copiesRemoved, errors: swept.errors }, { removed: 0, errors: 0 }, config);
    }
    assert.deepEqual({ a: await uidOf('configMap', nsA, 'cfg'), b: await uidOf('configMap', nsB, 'cfg'), dbA: await uidOf('database', nsA, 'db'), dbB: await uidOf('database', nsB, 'db') }, uids, 'the same copies, with the same uids');
    assert.equal(decode(await b.secret('apart', 'db-creds'), 'p'), 'for b');
  });

  it('keep apart when their platforms have the same name: the second agent copies nothing into the first one\'s namespace', async () => {
    const configA = agentConfig('alpha', 'tenant-a', 'shared');
    const configB = agentConfig('beta', 'tenant-b', 'shared');
    const ns = defaultCopyNamespace('shared', 'same');
    await a.ensureNamespace('same');
    await a.putConfigMap('same', 'cfg', { v: 'a' });
    await a.createDatabase('same', 'db', { configMapName: 'cfg' });
    const alpha = await startRelsync(configA, join(dir, 'alpha-same.log'));
    running.push(alpha);
    await eventually("alpha's copies", async () => (await svc.configMap(ns, 'cfg'))?.data?.v === 'a' && (await svc.database(ns, 'db')), 30_000);
    const before = { cfg: await uidOf('configMap', ns, 'cfg'), db: await uidOf('database', ns, 'db') };

    // Tenant b: the same namespace and primary name, and a related object alpha's tenant does not have.
    await b.ensureNamespace('same');
    await b.putConfigMap('same', 'cfg', { v: 'b' });
    await b.putConfigMap('same', 'only-b', { v: 'b' });
    await b.createDatabase('same', 'db', { configMapName: 'only-b' });
    await b.createDatabase('same', 'db2', { configMapName: 'cfg' });
    const beta = await startRelsync(configB, join(dir, 'beta-same.log'));
    running.push(beta);
    for (const name of ['db', 'db2']) {
      await eventually(`a CopyConflict Event on tenant b's ${name}`, async () => (await b.events('same', name)).some((e) => e.reason === 'CopyConflict' && e.message?.includes(`the copy namespace ${ns} belongs to another relsync agent`) && !e.message.includes('alpha')), 30_000);
    }
    assert.equal(await svc.configMap(ns, 'only-b'), undefined, "tenant b's object is not copied into tenant a's namespace");
    assert.equal(await svc.database(ns, 'db2'), undefined, "tenant b's primary is not copied into tenant a's namespace");
    assert.equal((await svc.configMap(ns, 'cfg'))?.data?.v, 'a', "tenant a's copy is not overwritten");
    assert.deepEqual({ cfg: await uidOf('configMap', ns, 'cfg'), db: await uidOf('database', ns, 'db') }, before);
    assert.equal((await svc.database(ns, 'db'))?.metadata?.labels?.['relsync.dev/agent'], 'alpha');
    // The operator's answer for tenant a's primary reaches tenant a only.
    await svc.putSecret(ns, 'db-creds', { p: 'for a' }, undefined, await svc.copyOf(ns, 'db'));
    assert.equal(decode(await eventually('tenant a gets its credentials', () => a.secret('same', 'db-creds'), 30_000), 'p'), 'for a');
    await a.putConfigMap('same', 'cfg', { v: 'a2' });
    await eventually("alpha still syncs its tenant's changes", async () => (await svc.configMap(ns, 'cfg'))?.data?.v === 'a2', 30_000);
    assert.equal(await b.secret('same', 'db-creds'), undefined, "tenant a's credentials never reach tenant b");

    for (const r of running.splice(0)) await r.stop();
    // A sweep run by hand (no POD_NAMESPACE: it knows no installation) reconciles a new primary of tenant b.
    await b.createDatabase('same', 'db3', { configMapName: 'only-b' });
    const swept = await sweep(configB);
    assert.equal(swept.copiesRemoved, 0, "beta's sweep deletes nothing of alpha's");
    await eventually("a CopyConflict Event on tenant b's db3", async () => (await b.events('same', 'db3')).some((e) => e.reason === 'CopyConflict' && e.message?.includes('belongs to another relsync agent') && !e.message.includes('alpha')), 30_000);
    assert.equal(await svc.database(ns, 'db3'), undefined, "the hand-run sweep copies nothing into alpha's namespace either");
    assert.deepEqual({ cfg: await uidOf('configMap', ns, 'cfg'), db: await uidOf('database', ns, 'db') }, before);
    assert.equal(await svc.configMap(ns, 'only-b'), undefined);
  });
});
