// Correct with any store (issue #35): whatever the store holds — nothing, an
// older copy — relsync never deletes a copy that is still wanted and never
// loses a change. Each case loses or ages the store while relsync is down (or
// kills it at the worst moment), with real API servers behind fault proxies,
// and checks copies by uid: a copy deleted and written again is a failure even
// when it ends up with the right data.
import assert from 'node:assert/strict';
import { copyFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import { startClusters, type Clusters } from '../harness/clusters.js';
import { startFaultProxy, type FaultProxy } from '../harness/fault-proxy.js';
import { eventually } from '../harness/kube.js';
import { startRelsync, writeConfig, type RelsyncProcess } from '../harness/relsync-process.js';
import { defaultCopyNamespace, GROUP, type ClusterClient } from '../harness/tenant.js';

type Names = 'tenant-a' | 'service';

/** A LIST (not a watch) of Databases, cluster-wide or in a namespace. */
const DATABASE_LIST = { method: 'GET', path: new RegExp(`^/apis/${GROUP}/v1alpha1/(namespaces/[^/]+/)?databases$`), query: /^(?!.*watch=(true|1))/ } as const;

describe('correct with any store', () => {
  let clusters: Clusters<Names>;
  let a: ClusterClient;
  let svc: ClusterClient;
  /** Between relsync and the tenant's API server, and between relsync and the service cluster. */
  let tenantProxy: FaultProxy;
  let serviceProxy: FaultProxy;
  let dir: string;
  const running = new Set<RelsyncProcess>();

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'relsync-e2e-store-loss-'));
    clusters = await startClusters('tenant-a', 'service');
    ({ 'tenant-a': a, service: svc } = clusters.client);
    tenantProxy = await startFaultProxy(clusters.plane['tenant-a'], 'tenant-proxy');
    serviceProxy = await startFaultProxy(clusters.plane.service, 'service-proxy');
  });

  after(async () => {
    for (const p of running) await p.stop();
    await tenantProxy?.close();
    await serviceProxy?.close();
    await clusters?.stop();
  });

  /**
   * One agent of its own (primaries labelled `suite: <agent>`, so that the cases never see each
   * other's), its store in `<dir>/<agent>.db`.
   */
  function agent(name: string, extra: Record<string, unknown> = {}) {
    const store = join(dir, `${name}.db`);
    const config = writeConfig(dir, {
      agentName: name,
      platformClusters: [{ name: 'tenant-a', kubeconfig: tenantProxy.kubeconfigPath }],
      serviceCluster: { name: 'service', kubeconfig: serviceProxy.kubeconfigPath },
      store: { path: store },
      leaderElection: { enabled: false },
      resync: { schedule: '0 0 1 1 *', onStartup: true },
      ...extra,
      resources: [
        {
          group: GROUP,
          resource: 'databases',
          selector: { matchLabels: { suite: name } },
          related: [
            { id: 'config', origin: 'platform', resource: 'configmaps', reference: { path: '.spec.configMapName' } },
            { id: 'extra', origin: 'platform', resource: 'configmaps', selector: { matchLabels: { app: '{{ name }}' } } },
          ],
        },
      ],
    }, `${name}.yaml`);
    let runs = 0;
    return {
      store,
      start: async () => {
        const p = await startRelsync(config, join(dir, `${name}-${++runs}.log`));
        running.add(p);
        return p;
      },
      stop: async (p: RelsyncProcess) => {
        running.delete(p);
        await p.stop();
      },
      kill: async (p: RelsyncProcess) => {
        running.delete(p);
        await p.kill();
      },
      /** The store as if it were lost (a new pod with an emptyDir). */
      lose: () => {
        for (const suffix of ['', '-wal', '-shm']) rmSync(store + suffix, { force: true });
      },
    };
  }

  /** Synced relations (claims) on a destination of that name, read from the store file as people read it. */
  const claimsOn = (store: string, name: string) => {
    const db = new BetterSqlite3(store, { readonly: true });
    try {
      return (db.prepare("select count(*) as n from relations where dest_name = ? and state = 'synced'").get(name) as { n: number }).n;
    } finally {
      db.close();
    }
  };
  const uidOf = async (ns: string, name: string) => (await svc.configMap(ns, name))?.metadata?.uid;

  it('a fresh store and a LIST of primaries that fails: the startup sweep deletes no related copy', async () => {
    const sut = agent('list-fails');
    const ns = 'list-fails';
    const copyNs = defaultCopyNamespace('tenant-a', ns);
    await a.ensureNamespace(ns);
    await a.putConfigMap(ns, 'ref-cfg', { v: '1' });
    await a.putConfigMap(ns, 'sel-cfg', { v: '1' }, { app: 'db' });
    await a.createDatabase(ns, 'db', { configMapName: 'ref-cfg' }, { suite: 'list-fails' });
    let relsync = await sut.start();
    await eventually('both related copies written', async () => (await uidOf(copyNs, 'ref-cfg')) && (await uidOf(copyNs, 'sel-cfg')), 30_000);
    const uids = { ref: await uidOf(copyNs, 'ref-cfg'), sel: await uidOf(copyNs, 'sel-cfg') };
    await sut.stop(relsync);

    sut.lose();
    // Every LIST of the primary type answers 503 (the watches' first LIST and the sweep's) until removed.
    const remove = tenantProxy.inject({ ...DATABASE_LIST, action: { kind: 'status', status: 503 } });
    try {
      relsync = await sut.start();
      await relsync.waitForLog('the startup sweep', (l) => l.includes('"msg":"sweep finished"'), 60_000);
      assert.match(relsync.log(), /sweep could not list a type.*databases|databases.*sweep could not list a type/, 'the fault hit the sweep\'s LIST of Databases');
      assert.deepEqual({ ref: await uidOf(copyNs, 'ref-cfg'), sel: await uidOf(copyNs, 'sel-cfg') }, uids, 'both related copies kept (same uids)');
      assert.doesNotMatch(relsync.log(), /sweep deleted a copy/);
    } finally {
      remove();
    }
    // A marker: once the LISTs work, a change arrives, into the same copy.
    const changedAt = Date.now();
    await a.putConfigMap(ns, 'ref-cfg', { v: '2' });
    await eventually('the change reached the copy', async () => (await svc.configMap(copyNs, 'ref-cfg'))?.data?.v === '2', 30_000);
    console.log(`fresh store, LISTs of primaries answered 503: ${relsync.log().split('\n').filter((l) => l.includes('sweep could not list a type')).length} failed sweep LIST(s), 0 copies deleted; a change after the fault arrived in ${Date.now() - changedAt} ms`);
    assert.deepEqual({ ref: await uidOf(copyNs, 'ref-cfg'), sel: await uidOf(copyNs, 'sel-cfg') }, uids, 'still the same copies');
    await sut.stop(relsync);
  });

  it('a fresh store admits primaries over the limit in another order: the refused one keeps its related copies', async () => {
    const sut = agent('limit-order', { workers: 1, limits: { primariesPerCluster: 1 } });
    const ns = 'limit-order';
    const copyNs = defaultCopyNamespace('tenant-a', ns);
    await a.ensureNamespace(ns);
    await a.putConfigMap(ns, 'first-cfg', { v: '1' });
    await a.putConfigMap(ns, 'second-cfg', { v: '1' });
    let relsync = await sut.start();
    // "z-first" is admitted while it is alone; "a-second" is refused by the limit.
    await a.createDatabase(ns, 'z-first', { configMapName: 'first-cfg' }, { suite: 'limit-order' });
    await eventually('the first primary\'s related copy written', () => uidOf(copyNs, 'first-cfg'), 30_000);
    await a.createDatabase(ns, 'a-second', { configMapName: 'second-cfg' }, { suite: 'limit-order' });
    await relsync.waitForLog('the second primary refused', (l) => l.includes('limits.primariesPerCluster') && l.includes('a-second'), 30_000);
    const uid = await uidOf(copyNs, 'first-cfg');
    await sut.stop(relsync);

    // With a fresh store the other one is admitted: the tenant's LIST queues "a-second" first when
    // the service cluster's LIST (whose copy of "z-first" would queue it first) comes late.
    sut.lose();
    serviceProxy.inject({ ...DATABASE_LIST, times: 2, action: { kind: 'delay', ms: 3000 } });
    relsync = await sut.start();
    await relsync.waitForLog('the startup sweep', (l) => l.includes('"msg":"sweep finished"'), 60_000);
    await relsync.waitForLog('z-first refused this time', (l) => l.includes('limits.primariesPerCluster') && l.includes('z-first'), 30_000);
    assert.equal(await uidOf(copyNs, 'first-cfg'), uid, 'the refused primary\'s related copy is kept (same uid)');
    assert.doesNotMatch(relsync.log(), /sweep deleted a copy/);
    await sut.stop(relsync);
  });

  it('a change that arrives while its primary is reconciled survives a SIGKILL before the run after', async () => {
    // No sweep at start: only the pending work and the watches' checkpoints can bring the change.
    const sut = agent('mid-run', { resync: { schedule: '0 0 1 1 *', onStartup: false } });
    const ns = 'mid-run';
    const copyNs = defaultCopyNamespace('tenant-a', ns);
    await a.ensureNamespace(ns);
    await a.putConfigMap(ns, 'busy-cfg', { v: '1' });
    let relsync = await sut.start();
    await relsync.waitForLog('the first LISTs', (l) => l.includes('every watch its primaries read has listed once'), 30_000);
    // The related copy's first write is held 3 s (the run the change arrives during), the second
    // one (the run after, which carries the change) until relsync is killed.
    const copyPath = new RegExp(`^/api/v1/namespaces/${copyNs}/configmaps/busy-cfg$`);
    const removes = [
      serviceProxy.inject({ method: 'PATCH', path: copyPath, times: 1, action: { kind: 'delay', ms: 3000 } }),
      serviceProxy.inject({ method: 'PATCH', path: copyPath, times: 1, action: { kind: 'delay', ms: 120_000 } }),
    ];
    const held = () => serviceProxy.requests.filter((r) => r.method === 'PATCH' && copyPath.test(r.path) && r.fault === 'delay');
    try {
      await a.createDatabase(ns, 'busy', { configMapName: 'busy-cfg' }, { suite: 'mid-run' });
      await eventually('the first write of the copy is held', async () => held().length === 1, 30_000);
      await a.putConfigMap(ns, 'busy-cfg', { v: '2' });
      await eventually('the run after is held too', async () => held().length === 2, 30_000);
      assert.equal((await svc.configMap(copyNs, 'busy-cfg'))?.data?.v, '1', 'the first run wrote the old data');
      // Checkpoints are written every second: the event's resourceVersion is stored by now.
      await new Promise((r) => setTimeout(r, 2500));
      await sut.kill(relsync);
    } finally {
      for (const remove of removes) remove();
    }
    const restartedAt = Date.now();
    relsync = await sut.start();
    await eventually('the change reached the copy after the restart', async () => (await svc.configMap(copyNs, 'busy-cfg'))?.data?.v === '2', 20_000);
    console.log(`a change that arrived during its primary's run, then SIGKILL: it reached the copy ${Date.now() - restartedAt} ms after the restart (no sweep)`);
    assert.doesNotMatch(relsync.log(), /"msg":"sweep started"/, 'no sweep brought it');
    await sut.stop(relsync);
  });

  it('a primary deleted while the store was lost is released only once its copy is gone', async () => {
    const sut = agent('gone-while-lost');
    const ns = 'gone-while-lost';
    const copyNs = defaultCopyNamespace('tenant-a', ns);
    await a.ensureNamespace(ns);
    await a.putConfigMap(ns, 'doomed-cfg', { v: '1' });
    await a.createDatabase(ns, 'doomed', { configMapName: 'doomed-cfg' }, { suite: 'gone-while-lost' });
    let relsync = await sut.start();
    await svc.copyOf(copyNs, 'doomed');
    await eventually('the related copy', () => svc.configMap(copyNs, 'doomed-cfg'), 30_000);
    // The operator holds the copy until it has deprovisioned.
    await svc.updateDatabase(copyNs, 'doomed', (db) => (db.metadata.finalizers = ['operator.example/deprovision']));
    await sut.stop(relsync);

    sut.lose();
    await a.deleteDatabase(ns, 'doomed'); // held by relsync's finalizer
    relsync = await sut.start();
    await eventually('the copy is being deleted', async () => (await svc.database(copyNs, 'doomed'))?.metadata.deletionTimestamp, 30_000);
    await relsync.waitForLog('the startup sweep', (l) => l.includes('"msg":"sweep finished"'), 60_000);
    // A marker: a primary created after the sweep is synced, so the deleted one was looked at since.
    await a.createDatabase(ns, 'marker', {}, { suite: 'gone-while-lost' });
    await svc.copyOf(copyNs, 'marker');
    assert.ok(await a.database(ns, 'doomed'), 'the primary waits while its copy is held by the operator');
    const heldUntil = Date.now();
    await svc.updateDatabase(copyNs, 'doomed', (db) => (db.metadata.finalizers = []));
    await eventually('the primary is released once its copy is gone', async () => (await a.database(ns, 'doomed')) === undefined, 30_000);
    // Its related copy is found without a record too: the sweep that completed the cluster's claims
    // (the startup sweep, forced on a lost store) saw it claimed by no primary it reconciled.
    assert.equal(await svc.configMap(copyNs, 'doomed-cfg'), undefined, 'the related copy of a primary deleted while the store was lost is gone by its release');
    console.log(`a primary deleted while the store was lost: held while its copy was, released ${Date.now() - heldUntil} ms after the operator let the copy go`);
    await sut.stop(relsync);
  });

  it('a fresh store whose startup sweep meets a failing reconcile: a claim that ends after it is decided by a follow-up sweep', async () => {
    // The crash-loop run that found it: a primary deleted during the startup sweep (its reconcile
    // failed with a 404) left the cluster's claims unknown, and the related copies of primaries
    // deleted after the sweep stayed in place until the next scheduled sweep.
    const sut = agent('follow-up-claims');
    const ns = 'follow-up-claims';
    const copyNs = defaultCopyNamespace('tenant-a', ns);
    await a.ensureNamespace(ns);
    for (const name of ['stays', 'leaves']) {
      await a.putConfigMap(ns, `${name}-cfg`, { v: '1' });
      await a.createDatabase(ns, name, { configMapName: `${name}-cfg` }, { suite: 'follow-up-claims' });
    }
    // One without related objects: its failure leaves no copy unaccounted for at the sweep's end.
    await a.createDatabase(ns, 'fails', { size: 'small' }, { suite: 'follow-up-claims' });
    let relsync = await sut.start();
    await eventually('both related copies written', async () => (await uidOf(copyNs, 'stays-cfg')) && (await uidOf(copyNs, 'leaves-cfg')), 30_000);
    await svc.copyOf(copyNs, 'fails');
    await sut.stop(relsync);

    sut.lose();
    // "fails" changes while relsync is down, and its copy's write fails all through the startup sweep.
    await a.updateDatabase(ns, 'fails', (db) => (db.spec = { ...db.spec, size: 'large' }));
    const failsCopy = new RegExp(`^/apis/${GROUP}/v1alpha1/namespaces/${copyNs}/databases/fails$`);
    const remove = serviceProxy.inject({ method: 'PATCH', path: failsCopy, action: { kind: 'status', status: 500 } });
    try {
      relsync = await sut.start();
      const finished = await relsync.waitForLog('the startup sweep', (l) => l.includes('"msg":"sweep finished"') && l.endsWith('}'), 60_000);
      const { errors, phases } = JSON.parse(finished) as { errors: number; phases: { unsure: number } };
      assert.ok(errors >= 1, `the startup sweep counted the failing reconcile (${finished})`);
      assert.equal(phases.unsure, 0, 'and kept no copy unsure: nothing of it calls for a follow-up');
    } finally {
      remove();
    }
    await eventually('"fails" written once its copy\'s writes work', async () => (await svc.database(copyNs, 'fails'))?.spec?.size === 'large', 30_000);
    // The claims are not known yet: the ended claim's copy is left in place, and a sweep decides it.
    const deletedAt = Date.now();
    await a.deleteDatabase(ns, 'leaves');
    await eventually('"leaves" released', async () => (await a.database(ns, 'leaves')) === undefined, 30_000);
    await relsync.waitForLog('its copy left for a sweep to decide', (l) => /leaves-cfg.*left a related copy in place whose last known claim ended/.test(l), 10_000);
    // The next scheduled sweep is a year away: a follow-up sweep (30 s after the copy was left) decides it.
    await eventually('the copy of the ended claim deleted by a follow-up sweep', async () => (await uidOf(copyNs, 'leaves-cfg')) === undefined, 90_000);
    await relsync.waitForLog('the follow-up sweep', (l) => /"trigger":"followup".*"msg":"sweep finished"/.test(l), 10_000);
    assert.ok(await uidOf(copyNs, 'stays-cfg'), 'the copy still claimed stays');
    console.log(`a claim ended while the claims were unknown (the startup sweep had a failing reconcile): its copy deleted ${Date.now() - deletedAt} ms after its primary was, by a follow-up sweep`);
    await sut.stop(relsync);
  });

  it('an older store that knows one of two claimants: the shared copy outlives the claim the store knew', async () => {
    const sut = agent('shared-claim');
    const ns = 'shared-claim';
    const copyNs = defaultCopyNamespace('tenant-a', ns);
    await a.ensureNamespace(ns);
    await a.putConfigMap(ns, 'shared-cfg', { v: '1' });
    await a.putConfigMap(ns, 'other-cfg', { v: '1' });
    let relsync = await sut.start();
    await a.createDatabase(ns, 'one', { configMapName: 'shared-cfg', size: 'small' }, { suite: 'shared-claim' });
    await eventually('the shared copy written', () => uidOf(copyNs, 'shared-cfg'), 30_000);
    await sut.stop(relsync);
    const backup = `${sut.store}.backup`;
    copyFileSync(sut.store, backup); // knows "one" only

    relsync = await sut.start();
    await a.createDatabase(ns, 'two', { configMapName: 'shared-cfg', size: 'small' }, { suite: 'shared-claim' });
    await svc.copyOf(copyNs, 'two');
    await eventually('both claims on the shared copy stored', async () => claimsOn(sut.store, 'shared-cfg') === 2, 30_000);
    const uid = await uidOf(copyNs, 'shared-cfg');
    await sut.stop(relsync);

    // The backup comes back; meanwhile "one" stopped referencing the shared ConfigMap, and "two"
    // changed too (its copy's write, held 5 s, keeps "two" from claiming until after "one" ended its claim).
    sut.lose();
    copyFileSync(backup, sut.store);
    await a.updateDatabase(ns, 'one', (db) => (db.spec = { ...db.spec, configMapName: 'other-cfg' }));
    await a.updateDatabase(ns, 'two', (db) => (db.spec = { ...db.spec, size: 'large' }));
    const twoCopy = new RegExp(`^/apis/${GROUP}/v1alpha1/namespaces/${copyNs}/databases/two$`);
    const remove = serviceProxy.inject({ method: 'PATCH', path: twoCopy, times: 1, action: { kind: 'delay', ms: 5000 } });
    try {
      relsync = await sut.start();
      await eventually('"one" moved to the other ConfigMap', () => uidOf(copyNs, 'other-cfg'), 30_000);
      await eventually('"two" written after its hold', async () => (await svc.database(copyNs, 'two'))?.spec?.size === 'large', 30_000);
      await relsync.waitForLog('the startup sweep', (l) => l.includes('"msg":"sweep finished"'), 60_000);
    } finally {
      remove();
    }
    assert.equal(await uidOf(copyNs, 'shared-cfg'), uid, 'the shared copy was never deleted (same uid)');
    assert.doesNotMatch(relsync.log(), /deleted a related copy that no primary owns any more.*shared-cfg/);
    // Once the claims are known, a claim that really was the last one ends the copy at once.
    await a.updateDatabase(ns, 'two', (db) => (db.spec = { ...db.spec, configMapName: 'other-cfg' }));
    await eventually('the shared copy goes with its last claim', async () => (await uidOf(copyNs, 'shared-cfg')) === undefined, 30_000);
    await sut.stop(relsync);
  });

  it('an older store (a backup restored) keeps every copy and catches up', async () => {
    const sut = agent('older-store');
    const ns = 'older-store';
    const copyNs = defaultCopyNamespace('tenant-a', ns);
    await a.ensureNamespace(ns);
    await a.putConfigMap(ns, 'old-cfg', { v: '1' });
    await a.createDatabase(ns, 'old', { configMapName: 'old-cfg' }, { suite: 'older-store' });
    let relsync = await sut.start();
    await eventually('the first primary synced', () => uidOf(copyNs, 'old-cfg'), 30_000);
    await sut.stop(relsync);
    const backup = `${sut.store}.backup`;
    assert.ok(existsSync(sut.store));
    copyFileSync(sut.store, backup);

    relsync = await sut.start();
    await a.putConfigMap(ns, 'new-cfg', { v: '1' });
    await a.createDatabase(ns, 'new', { configMapName: 'new-cfg' }, { suite: 'older-store' });
    await eventually('the second primary synced', () => uidOf(copyNs, 'new-cfg'), 30_000);
    const uids = { old: await uidOf(copyNs, 'old-cfg'), new: await uidOf(copyNs, 'new-cfg') };
    await sut.stop(relsync);

    // The backup knows nothing of "new"; changes made while down must arrive too.
    sut.lose();
    copyFileSync(backup, sut.store);
    await a.putConfigMap(ns, 'new-cfg', { v: '2' });
    await a.putConfigMap(ns, 'old-cfg', { v: '2' });
    const startedAt = Date.now();
    relsync = await sut.start();
    await eventually('both changes arrived', async () => (await svc.configMap(copyNs, 'new-cfg'))?.data?.v === '2' && (await svc.configMap(copyNs, 'old-cfg'))?.data?.v === '2', 30_000);
    await relsync.waitForLog('the startup sweep', (l) => l.includes('"msg":"sweep finished"'), 60_000);
    assert.deepEqual({ old: await uidOf(copyNs, 'old-cfg'), new: await uidOf(copyNs, 'new-cfg') }, uids, 'the same copies (uids)');
    console.log(`an older store (a backup without the newer primary): both changes made while down arrived ${Date.now() - startedAt} ms after the start (startup sweep included), copies kept`);
    await sut.stop(relsync);
  });
});
