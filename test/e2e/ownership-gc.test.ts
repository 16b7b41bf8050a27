// Ownership and garbage collection when types overlap and owners change: a
// type that is a primary type and a related type at once, two related rules
// of one type, one type in both origins, a rule whose destination (another
// kind: a Secret written as a ConfigMap) is another resource's primary type;
// a related object that moves between primaries while their reconciles
// interleave; two tenants naming one destination; two primaries racing to
// create one copy; a name too long for a label value.
// Real API servers, relsync as a process; the service cluster is reached
// through a fault proxy, which holds chosen requests to force interleavings.
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { writeCounts, requestsBetween } from '../harness/api-metrics.js';
import { startClusters, type Clusters } from '../harness/clusters.js';
import { startFaultProxy, type FaultProxy } from '../harness/fault-proxy.js';
import { eventually } from '../harness/kube.js';
import { runCli, startRelsync, writeConfig, type RelsyncProcess } from '../harness/relsync-process.js';
import { defaultCopyNamespace, GROUP, type ClusterClient } from '../harness/tenant.js';

const OWNER = 'owner.relsync.dev/db';
const AGENT = 'e2e';

/** What relsync reads and writes here: a write to any of them during a sweep is a finding. */
const SYNCED_TYPES = ['configmaps', 'secrets', 'namespaces', `databases.${GROUP}`];

type Names = 'tenant-a' | 'tenant-b' | 'service';

/** Where one type-overlap case puts its objects. */
interface OverlapSite {
  /** The tenant namespace, and where its copies go in the service cluster. */
  readonly ns: string;
  readonly copyNs: string;
  /** The value of the `role` label that makes a ConfigMap a primary in this case. */
  readonly label: string;
  /** Creates a Database that this case's relsync (and no other) syncs. */
  readonly createDatabase: (name: string, spec: Record<string, unknown>) => Promise<unknown>;
}

describe('ownership and garbage collection', () => {
  let clusters: Clusters<Names>;
  let a: ClusterClient;
  let b: ClusterClient;
  let svc: ClusterClient;
  let proxy: FaultProxy;
  let dir: string;
  let configPath: string;
  let relsync: RelsyncProcess;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'relsync-e2e-ownership-'));
    clusters = await startClusters('tenant-a', 'tenant-b', 'service');
    ({ 'tenant-a': a, 'tenant-b': b, service: svc } = clusters.client);
    proxy = await startFaultProxy(clusters.plane.service);
    const { 'tenant-a': pa, 'tenant-b': pb } = clusters.plane;
    configPath = writeConfig(dir, {
      agentName: AGENT,
      platformClusters: [
        { name: 'tenant-a', kubeconfig: pa.kubeconfigPath },
        { name: 'tenant-b', kubeconfig: pb.kubeconfigPath },
      ],
      serviceCluster: { name: 'service', kubeconfig: proxy.kubeconfigPath },
      store: { path: join(dir, 'relsync.db') },
      workers: 4,
      // Sweeps run when a test says so (relsync sweep, or a restart), never by schedule.
      resync: { schedule: '0 0 1 1 *', onStartup: true },
      // Reads go to the API server, where the race test holds them to force its interleavings
      // (reads from the cache are tested with the same type overlaps below, and in watch-reads).
      cache: { bytes: 0 },
      leaderElection: { leaseDurationSeconds: 4, renewDeadlineSeconds: 3, retryPeriodSeconds: 1 },
      resources: [
        // ConfigMaps are a primary type here, and a related type of databases below.
        { resource: 'configmaps', selector: { matchLabels: { role: 'primary' } } },
        {
          group: GROUP,
          resource: 'databases',
          related: [
            { id: 'cm-ref', origin: 'platform', resource: 'configmaps', reference: { path: '.spec.configMapName' } },
            { id: 'cm-sel', origin: 'platform', resource: 'configmaps', selector: { matchLabels: { app: '{{ name }}' } } },
            { id: 'cm-inv', origin: 'platform', resource: 'configmaps', inverse: { label: OWNER } },
            { id: 'cm-tpl', origin: 'platform', resource: 'configmaps', template: { name: '{{ name }}-extra' } },
            // Secrets in both origins.
            { id: 'sec-p', origin: 'platform', resource: 'secrets', reference: { path: '.spec.secretName' } },
            { id: 'sec-s', origin: 'service', resource: 'secrets', inverse: { label: OWNER } },
            // A service-origin copy on the platform whose type is a primary type there.
            { id: 'cm-s', origin: 'service', resource: 'configmaps', inverse: { label: OWNER } },
            // A destination of another kind that is another resource's primary type (a Secret written as a ConfigMap).
            { id: 'as-cm', origin: 'platform', resource: 'secrets', reference: { path: '.spec.asConfigMap' }, destination: { resource: 'configmaps' } },
            // One service-side namespace for every tenant: two tenants can name one destination.
            { id: 'shared', origin: 'platform', resource: 'secrets', template: { name: 'shared-creds' }, namespace: { destination: 'shared-secrets' } },
          ],
        },
      ],
    });
    relsync = await startRelsync(configPath, join(dir, 'relsync.log'));
  });

  after(async () => {
    await relsync?.stop();
    await proxy?.close();
    await clusters?.stop();
  });

  /** Every object an agent wrote on a cluster, by `resource ns/name`, with its uid. */
  async function copiesOn(client: ClusterClient, agent = AGENT): Promise<Map<string, string>> {
    const labelSelector = `relsync.dev/agent=${agent}`;
    const found = new Map<string, string>();
    for (const cm of (await client.core.listConfigMapForAllNamespaces({ labelSelector })).items) found.set(`configmaps ${cm.metadata!.namespace}/${cm.metadata!.name}`, cm.metadata!.uid!);
    for (const s of (await client.core.listSecretForAllNamespaces({ labelSelector })).items) found.set(`secrets ${s.metadata!.namespace}/${s.metadata!.name}`, s.metadata!.uid!);
    const dbs = (await client.objects.listClusterCustomObject({ group: GROUP, version: 'v1alpha1', plural: 'databases', labelSelector })) as { items: Array<{ metadata: { namespace: string; name: string; uid: string } }> };
    for (const d of dbs.items) found.set(`databases ${d.metadata.namespace}/${d.metadata.name}`, d.metadata.uid);
    return found;
  }

  async function relationStates(cluster: string, namespace: string, name: string, config = configPath): Promise<Record<string, string>> {
    const out = await runCli(['inspect', 'primary', `databases.${GROUP}`, `${namespace}/${name}`, '--cluster', cluster, '--config', config, '-o', 'json']);
    const [parsed] = JSON.parse(out.stdout) as Array<{ relations: Array<{ rule: string; source: string; state: string }> }>;
    return Object.fromEntries((parsed?.relations ?? []).map((r) => [`${r.rule} ${r.source.slice(r.source.lastIndexOf('/') + 1)}`, r.state]));
  }

  async function sweepOnce(config = configPath): Promise<{ copiesRemoved: number; copiesRepaired: number; errors: number; status: string }> {
    const out = await runCli(['sweep', '--config', config, '-o', 'json', '--log-level', 'error']);
    assert.equal(out.code, 0, `relsync sweep exit code; stdout: ${out.stdout}; stderr: ${out.stderr}`);
    return JSON.parse(out.stdout) as { copiesRemoved: number; copiesRepaired: number; errors: number; status: string };
  }

  const writeCountsNow = async () => ({ service: await writeCounts(clusters.plane.service), tenant: await writeCounts(clusters.plane['tenant-a']) });

  /**
   * The writes since `before`, once a marker change to a primary has arrived at its copy (so
   * the work queued before it, such as the reconciles of a startup, has been done), without the
   * marker's own two writes (the test's PUT, and relsync's apply of the copy).
   */
  async function writesUpToMarker(before: Awaited<ReturnType<typeof writeCountsNow>>, ns: string, copyNs: string, name: string): Promise<string[]> {
    const marker = String(Date.now());
    await a.updateDatabase(ns, name, (d) => (d.spec = { ...d.spec, marker }));
    await eventually('the marker change arrived', async () => (await svc.database(copyNs, name))?.spec?.marker === marker, 30_000);
    // The reconcile's last write: the verdict on the primary, for its new generation.
    await eventually('the verdict for the marker\'s generation', async () => {
      const primary = await a.database(ns, name);
      const verdict = (primary?.status?.conditions as Array<{ type: string; observedGeneration?: number }> | undefined)?.find((c) => c.type === 'relsync.dev/Synced');
      return primary !== undefined && verdict?.observedGeneration === primary.metadata.generation;
    }, 30_000);
    const after = await writeCountsNow();
    const writes = [...requestsBetween(before.service, after.service, SYNCED_TYPES).map((w) => `service: ${w}`), ...requestsBetween(before.tenant, after.tenant, SYNCED_TYPES).map((w) => `tenant: ${w}`)];
    // The change itself, its copy's apply, and the verdict's new observedGeneration on the primary (sync-verdict.ts).
    const markers = [`service: APPLY databases.${GROUP} ×1`, `tenant: PATCH databases.${GROUP}/status ×1`, `tenant: PUT databases.${GROUP} ×1`];
    assert.deepEqual(writes.filter((w) => markers.includes(w)).sort(), markers, `the marker's own writes are seen: ${writes.join(', ')}`);
    return writes.filter((w) => !markers.includes(w));
  }

  const ns = defaultCopyNamespace('tenant-a', 'ov');

  it('converges with every type overlap configured', async () => {
    await a.ensureNamespace('ov');
    await a.putConfigMap('ov', 'pcm', { v: 'primary' }, { role: 'primary' });
    await a.putConfigMap('ov', 'ref-cm', { v: 'ref' });
    await a.putConfigMap('ov', 'sel-cm', { v: 'sel' }, { app: 'db1' });
    await a.putConfigMap('ov', 'inv-cm', { v: 'inv' }, { [OWNER]: 'db1' });
    await a.putConfigMap('ov', 'db1-extra', { v: 'tpl' });
    await a.putSecret('ov', 'ref-sec', { k: 'platform' });
    await a.putSecret('ov', 'conv-sec', { v: 'as a ConfigMap' });
    await a.createDatabase('ov', 'db1', { configMapName: 'ref-cm', secretName: 'ref-sec', asConfigMap: 'conv-sec' });

    await eventually('the primary ConfigMap is copied', () => svc.configMap(ns, 'pcm'), 30_000);
    const db1 = await svc.copyOf(ns, 'db1');
    // What the operator creates beside the copy, for the service-origin rules; the ConfigMap even
    // carries the label that makes a tenant's ConfigMap a primary.
    await svc.putSecret(ns, 'db1-creds', { password: 'from-operator' }, { [OWNER]: 'db1' }, db1);
    await svc.putConfigMap(ns, 'db1-endpoint', { host: 'db1.example' }, { [OWNER]: 'db1', role: 'primary' }, db1);

    for (const name of ['ref-cm', 'sel-cm', 'inv-cm', 'db1-extra']) await eventually(`related ConfigMap ${name} copied`, () => svc.configMap(ns, name), 30_000);
    await eventually('related Secret copied', () => svc.secret(ns, 'ref-sec'), 30_000);
    await eventually('the Secret is copied as a ConfigMap', () => svc.configMap(ns, 'conv-sec'), 30_000);
    await eventually('the operator\'s Secret comes back', () => a.secret('ov', 'db1-creds'), 30_000);
    await eventually('the operator\'s ConfigMap comes back', () => a.configMap('ov', 'db1-endpoint'), 30_000);
    await eventually(
      'every relation of db1 synced',
      async () => {
        const { 'shared shared-creds': shared, ...states } = await relationStates('tenant-a', 'ov', 'db1');
        return shared === 'pending' && Object.keys(states).length === 8 && Object.values(states).every((s) => s === 'synced') && states;
      },
      30_000,
    );
    // A service-origin copy is never a primary, even with the primary selector's label.
    assert.equal(await svc.configMap(defaultCopyNamespace('tenant-a', 'ov'), 'db1-endpoint').then((c) => c?.metadata?.labels?.['relsync.dev/agent']), undefined, 'the operator\'s ConfigMap is left as it is');
    const inspect = await runCli(['inspect', 'primary', 'configmaps', 'ov/db1-endpoint', '--cluster', 'tenant-a', '--config', configPath, '-o', 'json']);
    assert.deepEqual(JSON.parse(inspect.stdout), [], 'the copy on the platform is not stored as a primary');
  });

  it('a sweep deletes copies no rule accounts for, on both sides, and only those', async () => {
    await relsync.stop();
    // Copies whose source no store row names (a lost store, a removed rule): in types watched
    // unfiltered on their cluster (Secrets on the service side, ConfigMaps on the platform side).
    const marks = (cluster: string, resource: string, namespace: string, name: string) => ({
      labels: { 'relsync.dev/agent': AGENT },
      annotations: { 'relsync.dev/source-cluster': cluster, 'relsync.dev/source-group': '', 'relsync.dev/source-resource': resource, 'relsync.dev/source-namespace': namespace, 'relsync.dev/source-name': name, 'relsync.dev/content-hash': 'stale' },
    });
    await svc.core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'stray', ...marks('tenant-a', 'secrets', 'ov', 'gone') }, data: {} } });
    await a.core.createNamespacedConfigMap({ namespace: 'ov', body: { metadata: { name: 'stray-back', ...marks('service', 'configmaps', ns, 'gone-too') }, data: {} } });
    const before = { service: await copiesOn(svc), tenant: await copiesOn(a) };

    const result = await sweepOnce();
    assert.equal(result.copiesRemoved, 2, 'exactly the two strays');
    assert.equal(await svc.secret(ns, 'stray'), undefined);
    assert.equal(await a.configMap('ov', 'stray-back'), undefined);
    before.service.delete(`secrets ${ns}/stray`);
    before.tenant.delete('configmaps ov/stray-back');
    assert.deepEqual(await copiesOn(svc), before.service, 'every other copy in the service cluster is untouched (same uids)');
    assert.deepEqual(await copiesOn(a), before.tenant, 'every other copy on the platform is untouched (same uids)');
  });

  it('a sweep over the converged system writes nothing and deletes nothing, one-shot and at start', async () => {
    const uids = { service: await copiesOn(svc), tenant: await copiesOn(a) };
    assert.ok(uids.service.size >= 8, `the service cluster holds the copies (${[...uids.service.keys()].join(', ')})`);
    const counts = writeCountsNow;

    let before = await counts();
    const result = await sweepOnce();
    const after = await counts();
    assert.deepEqual({ removed: result.copiesRemoved, repaired: result.copiesRepaired, errors: result.errors }, { removed: 0, repaired: 0, errors: 0 });
    assert.deepEqual(requestsBetween(before.service, after.service, SYNCED_TYPES), [], 'no write in the service cluster');
    assert.deepEqual(requestsBetween(before.tenant, after.tenant, SYNCED_TYPES), [], 'no write on the platform');
    assert.deepEqual(await copiesOn(svc), uids.service);
    assert.deepEqual(await copiesOn(a), uids.tenant);

    before = await counts();
    relsync = await startRelsync(configPath, join(dir, 'relsync.log'));
    // The new process's own lines (log() reads this run's only).
    await eventually('the startup sweep finished', async () => relsyncLogCount(relsync, 'sweep finished') > 0, 60_000);
    assert.deepEqual(await writesUpToMarker(before, 'ov', ns, 'db1'), [], 'the start and its sweep write nothing');
    assert.deepEqual(await copiesOn(svc), uids.service);
    assert.deepEqual(await copiesOn(a), uids.tenant);
    assert.doesNotMatch(relsync.log(), /sweep deleted a copy that no rule resolves to any more.*"ov\b|deleted a related copy that no primary owns any more/);
  });

  it('keeps the copy of a related object that moves to another primary, however their reconciles interleave', async () => {
    await a.ensureNamespace('race');
    const rns = defaultCopyNamespace('tenant-a', 'race');
    await a.putSecret('race', 'one-sec', { k: '1' });
    await a.putSecret('race', 'two-sec', { k: '2' });
    await a.putConfigMap('race', 'moving', { v: '1' }, { app: 'one' });
    await a.createDatabase('race', 'one', { secretName: 'one-sec' });
    await a.createDatabase('race', 'two', { secretName: 'two-sec' });
    await eventually('the moving ConfigMap is copied for its first owner', () => svc.configMap(rns, 'moving'), 30_000);
    await eventually('both secrets copied', async () => (await svc.secret(rns, 'one-sec')) && (await svc.secret(rns, 'two-sec')), 30_000);

    const copyPath = new RegExp(`^/api/v1/namespaces/${rns}/configmaps/moving$`);
    const secretPath = (name: string) => new RegExp(`^/api/v1/namespaces/${rns}/secrets/${name}$`);
    const databasePath = (name: string) => new RegExp(`^/apis/${GROUP}/v1alpha1/namespaces/${rns}/databases/${name}$`);
    const heldAndAnswered = (path: RegExp) => proxy.requests.some((r) => r.fault === 'delay' && path.test(r.path) && r.status !== undefined);
    /** Relabels the ConfigMap from one owner to the other (with new data) under the given faults; the copy must end with that data. */
    const move = async (from: string, to: string, v: string, faults: Array<Parameters<FaultProxy['inject']>[0]>, until: RegExp) => {
      const removes = faults.map((f) => proxy.inject(f));
      try {
        const movedAt = Date.now();
        await a.putConfigMap('race', 'moving', { v }, { app: to });
        await eventually('the held requests were answered', async () => heldAndAnswered(until), 30_000);
        const copy = await eventually(`the copy exists with data ${v}`, async () => ((await svc.configMap(rns, 'moving'))?.data?.v === v ? svc.configMap(rns, 'moving') : undefined), 15_000);
        assert.equal(copy!.metadata!.annotations!['relsync.dev/source-name'], 'moving');
        await eventually(`${to}'s relation is synced, ${from}'s gone`, async () => {
          const [old, now] = [await relationStates('tenant-a', 'race', from), await relationStates('tenant-a', 'race', to)];
          return old['cm-sel moving'] === undefined && now['cm-sel moving'] === 'synced';
        });
        return Date.now() - movedAt;
      } finally {
        for (const remove of removes) remove();
      }
    };

    // 1. The interleaving that lost the copy before: the new owner writes it and is then held
    // (reading a later rule's copy) before it records the relation, while the old owner, which no
    // longer matches, decides that nobody owns the copy and deletes it.
    const ms1 = await move('one', 'two', '2', [
      { method: 'GET', path: secretPath('two-sec'), times: 1, action: { kind: 'delay', ms: 3000 } },
      { method: 'GET', path: secretPath('one-sec'), times: 1, action: { kind: 'delay', ms: 1500 } },
    ], secretPath('two-sec'));
    // 2. The window of the claim: the old owner decides first (the new owner is held 1.5 s before
    // it claims) and its DELETE is held 3 s, so the new owner claims, finds the copy in place and
    // writes the new data before the DELETE lands. The DELETE carries the resourceVersion its
    // decision read: the copy changed since, so it is refused, and the copy is never deleted.
    const uidBefore = (await svc.configMap(rns, 'moving'))?.metadata?.uid;
    const ms2 = await move('two', 'one', '3', [
      { method: 'GET', path: databasePath('one'), times: 1, action: { kind: 'delay', ms: 1500 } },
      { method: 'DELETE', path: copyPath, times: 1, action: { kind: 'delay', ms: 3000 } },
    ], copyPath);
    const deleted = proxy.requests.find((r) => r.method === 'DELETE' && copyPath.test(r.path) && r.fault === 'delay');
    assert.equal(deleted?.status, 409, 'the old owner\'s DELETE, sent on an older view, was refused by its preconditions');
    assert.ok(proxy.requests.some((r) => r.method === 'PATCH' && copyPath.test(r.path) && (r.status === 200 || r.status === 201) && r.at > deleted!.at && r.at < deleted!.at + 3000), 'the new owner wrote the copy while the DELETE was held');
    assert.equal((await svc.configMap(rns, 'moving'))?.metadata?.uid, uidBefore, 'the copy was never deleted (same uid)');
    console.log(`moved between primaries: the copy has the new data ${ms1} ms (new owner held before recording) and ${ms2} ms (old owner's DELETE held 3 s) after the relabel`);
    // Still there once everything settled (a marker: a later change arrives).
    await a.putConfigMap('race', 'moving', { v: '4' }, { app: 'one' });
    await eventually('a later change still arrives', async () => (await svc.configMap(rns, 'moving'))?.data?.v === '4', 15_000);
  });

  it('a conflicting relation of another tenant does not keep a copy alive, and takes the destination over', async () => {
    for (const c of [a, b]) await c.ensureNamespace('conf');
    await a.putSecret('conf', 'shared-creds', { who: 'a' });
    await b.putSecret('conf', 'shared-creds', { who: 'b' });
    await svc.ensureNamespace('shared-secrets');
    await a.createDatabase('conf', 'first', {});
    await eventually('tenant A\'s copy in the shared namespace', async () => (await svc.secret('shared-secrets', 'shared-creds'))?.metadata?.annotations?.['relsync.dev/source-cluster'] === 'tenant-a', 30_000);
    await b.createDatabase('conf', 'second', {});
    await eventually('tenant B gets a conflict, A\'s copy untouched', async () => (await b.events('conf', 'second')).some((e) => e.reason === 'RelatedCopyConflict'), 30_000);
    assert.equal((await svc.secret('shared-secrets', 'shared-creds'))?.metadata?.annotations?.['relsync.dev/source-cluster'], 'tenant-a');

    const deletedAt = Date.now();
    await a.deleteDatabase('conf', 'first');
    await eventually('tenant A\'s primary is gone', async () => (await a.database('conf', 'first')) === undefined, 30_000);
    const copy = await eventually('A\'s copy is removed and B\'s takes its place', async () => {
      const s = await svc.secret('shared-secrets', 'shared-creds');
      return s?.metadata?.annotations?.['relsync.dev/source-cluster'] === 'tenant-b' && s;
    }, 15_000);
    assert.equal(Buffer.from(copy.data!.who!, 'base64').toString(), 'b');
    console.log(`conflicting relation: tenant B's copy replaced A's ${Date.now() - deletedAt} ms after A's primary was deleted`);
  });

  it('two primaries that share one related object both succeed when they race to create its copy', async () => {
    await a.ensureNamespace('twin');
    const tns = defaultCopyNamespace('tenant-a', 'twin');
    await a.createDatabase('twin', 'left', { configMapName: 'common' });
    await a.createDatabase('twin', 'right', { configMapName: 'common' });
    await eventually('both primaries copied', async () => (await svc.database(tns, 'left')) && (await svc.database(tns, 'right')), 30_000);
    // Hold both creates of the copy (applies that only create), so that both reconciles find it missing and create it.
    const path = new RegExp(`^/api/v1/namespaces/${tns}/configmaps/common$`);
    const from = proxy.requests.length;
    const remove = proxy.inject({ method: 'PATCH', path, times: 2, action: { kind: 'delay', ms: 2000 } });
    try {
      await a.putConfigMap('twin', 'common', { v: '1' });
      await eventually('both creates were answered', async () => proxy.requests.slice(from).filter((r) => r.method === 'PATCH' && path.test(r.path) && r.fault === 'delay' && r.status !== undefined).length === 2, 30_000);
    } finally {
      remove();
    }
    const statuses = proxy.requests.slice(from).filter((r) => r.method === 'PATCH' && path.test(r.path) && r.fault === 'delay').map((r) => r.status).sort();
    assert.deepEqual(statuses, [201, 409], 'the race happened: one create won, one found the copy in place');
    await eventually('both relations synced', async () => {
      const [left, right] = [await relationStates('tenant-a', 'twin', 'left'), await relationStates('tenant-a', 'twin', 'right')];
      return left['cm-ref common'] === 'synced' && right['cm-ref common'] === 'synced';
    });
    for (const name of ['left', 'right']) {
      assert.deepEqual((await a.events('twin', name)).filter((e) => e.reason === 'RelatedSyncFailed'), [], `no failure reported on ${name}`);
    }
    assert.deepEqual(warnings(relsync).filter((l) => l.includes('common')), [], 'no warning about the shared copy');
  });

  it('a name too long for a label value makes an inverse label rule find nothing, and the rest syncs', async () => {
    await a.ensureNamespace('long');
    const lns = defaultCopyNamespace('tenant-a', 'long');
    const name = `db-${'x'.repeat(70)}`;
    await a.putConfigMap('long', 'long-cfg', { v: '1' });
    await a.createDatabase('long', name, { configMapName: 'long-cfg' });
    await eventually('the primary is copied', () => svc.database(lns, name), 30_000);
    await eventually('its reference rule syncs', () => svc.configMap(lns, 'long-cfg'), 30_000);
    const events = await eventually('one Event says why the inverse rules find nothing', async () => {
      const found = (await a.events('long', name)).filter((e) => e.reason === 'RelatedRuleNotApplicable');
      return found.length >= 3 && found;
    }, 15_000);
    assert.deepEqual(events.map((e) => /rule (\S+) /.exec(e.message ?? '')?.[1]).sort(), ['cm-inv', 'cm-s', 'sec-s'], 'one Event per inverse label rule');
    // A marker change is processed, and no reconcile of it failed.
    await a.putConfigMap('long', 'long-cfg', { v: '2' });
    await eventually('a later change arrives', async () => (await svc.configMap(lns, 'long-cfg'))?.data?.v === '2', 15_000);
    assert.equal((await a.events('long', name)).filter((e) => e.reason === 'RelatedRuleNotApplicable').length, 3, 'not repeated on every reconcile');
    assert.doesNotMatch(relsync.log(), /unable to parse requirement|reconcile failed.*db-xxxx/);
  });

  it('copies no key a cluster-wide tool acts on, and no Secret that would mint a token', async () => {
    await a.ensureNamespace('meta');
    const mns = defaultCopyNamespace('tenant-a', 'meta');
    await a.core.createNamespacedConfigMap({ namespace: 'meta', body: {
      metadata: { name: 'labelled', labels: { 'app.kubernetes.io/name': 'db', 'argocd.argoproj.io/instance': 'take-me', team: 'x' }, annotations: { 'meta.helm.sh/release-name': 'adopt-me', note: 'kept' } },
      data: { v: '1' },
    } });
    await a.core.createNamespacedSecret({ namespace: 'meta', body: { metadata: { name: 'sa-token', annotations: { 'kubernetes.io/service-account.name': 'default' } }, type: 'kubernetes.io/service-account-token', data: {} } });
    await a.createDatabase('meta', 'm', { configMapName: 'labelled', secretName: 'sa-token' });
    const copy = await eventually('the ConfigMap is copied', () => svc.configMap(mns, 'labelled'), 30_000);
    assert.equal(copy.metadata?.labels?.['app.kubernetes.io/name'], 'db', 'recommended labels are copied');
    assert.equal(copy.metadata?.labels?.team, 'x');
    assert.equal(copy.metadata?.labels?.['argocd.argoproj.io/instance'], undefined, 'no Argo CD instance label');
    assert.equal(copy.metadata?.annotations?.note, 'kept');
    assert.equal(copy.metadata?.annotations?.['meta.helm.sh/release-name'], undefined, 'no Helm release annotation');
    await eventually('an Event says why the Secret is not copied', async () => (await a.events('meta', 'm')).some((e) => e.reason === 'RelatedSyncFailed' && /Secrets of type kubernetes\.io\/service-account-token are not copied/.test(e.message ?? '')), 30_000);
    // A marker: a later change of the primary's ConfigMap has arrived, so the Secret's turn has passed.
    await a.putConfigMap('meta', 'labelled', { v: '2' });
    await eventually('the marker arrived', async () => (await svc.configMap(mns, 'labelled'))?.data?.v === '2', 15_000);
    assert.equal(await svc.secret(mns, 'sa-token'), undefined, 'the token Secret is not in the service cluster');
    assert.equal((await relationStates('tenant-a', 'meta', 'm'))['sec-p sa-token'], 'error', 'the relation says it is not synced');
  });

  it('a replica with a stale store leaves alone the copy another replica made of a recreated primary', async () => {
    await relsync.stop();
    // Two replicas with stores of their own (a failover), the same agent.
    const replica = (name: string) => writeConfig(dir, {
      agentName: 'fo',
      platformClusters: [{ name: 'tenant-a', kubeconfig: clusters.plane['tenant-a'].kubeconfigPath }],
      serviceCluster: { name: 'service', kubeconfig: clusters.plane.service.kubeconfigPath },
      store: { path: join(dir, `fo-${name}.db`) },
      resync: { schedule: '0 0 1 1 *', onStartup: false },
      leaderElection: { enabled: false },
      resources: [{ group: GROUP, resource: 'databases', selector: { matchLabels: { failover: 'yes' } }, naming: { namespace: 'fo-{{ namespace }}' }, related: [
        { id: 'cfg', origin: 'platform', resource: 'configmaps', reference: { path: '.spec.configMapName' } },
      ] }],
    }, `fo-${name}.yaml`);
    await a.ensureNamespace('fo');
    await a.putConfigMap('fo', 'fo-cfg', { v: '1' });
    const first = await startRelsync(replica('a'), join(dir, 'fo-a.log'));
    try {
      await a.createDatabase('fo', 'p', { configMapName: 'fo-cfg' }, { failover: 'yes' });
      await eventually('replica a synced p', () => svc.configMap('fo-fo', 'fo-cfg'), 30_000);
    } finally {
      await first.stop();
    }
    // While a is away, p is deleted and created again, and replica b (another store) syncs the new one.
    await a.updateDatabase('fo', 'p', (d) => (d.metadata.finalizers = []));
    await a.deleteDatabase('fo', 'p');
    await eventually('p deleted', async () => (await a.database('fo', 'p')) === undefined);
    const recreated = await a.createDatabase('fo', 'p', { configMapName: 'fo-cfg' }, { failover: 'yes' });
    const second = await startRelsync(replica('b'), join(dir, 'fo-b.log'));
    try {
      await eventually('replica b synced the new p', async () => (await svc.database('fo-fo', 'p'))?.metadata.annotations?.['relsync.dev/source-uid'] === recreated.metadata.uid, 30_000);
    } finally {
      await second.stop();
    }
    const before = { copy: (await svc.database('fo-fo', 'p'))!.metadata.uid, related: (await svc.configMap('fo-fo', 'fo-cfg'))!.metadata!.uid };

    // Replica a is back, with a store that still knows the old p.
    const back = await startRelsync(replica('a'), join(dir, 'fo-a.log'));
    try {
      await a.updateDatabase('fo', 'p', (d) => (d.spec = { ...d.spec, marker: 'after-failover' }));
      await eventually('replica a processed the new p (a marker change arrived)', async () => (await svc.database('fo-fo', 'p'))?.spec?.marker === 'after-failover', 30_000);
      assert.deepEqual({ copy: (await svc.database('fo-fo', 'p'))?.metadata.uid, related: (await svc.configMap('fo-fo', 'fo-cfg'))?.metadata?.uid }, before, 'the live copies were not deleted and made again');
      assert.doesNotMatch(back.log(), /deleted the copy of a primary that is gone|deleted a related copy/);

      // And the other way round: the tenant deletes p behind relsync's back (finalizer removed) and
      // creates it again unselected: the copy names the deleted incarnation and goes at once.
      await a.updateDatabase('fo', 'p', (d) => (d.metadata.finalizers = []));
      await a.deleteDatabase('fo', 'p');
      await eventually('p deleted', async () => (await a.database('fo', 'p')) === undefined);
      await a.createDatabase('fo', 'p', { configMapName: 'fo-cfg' });
      await eventually('the copy of the deleted incarnation is removed', async () => (await svc.database('fo-fo', 'p')) === undefined, 15_000);
    } finally {
      await back.stop();
    }
  });

  // The property for each type overlap alone (one overlap can hide another: an unfiltered watch
  // of a type, needed by one rule, replaced the filtered one that exposed the other's bug).
  const OVERLAPS: ReadonlyArray<{ title: string; related: unknown[]; primaryConfigMaps?: boolean; setup: (at: OverlapSite) => Promise<string[]> }> = [
    {
      title: 'a primary type that is also a platform-origin related type',
      primaryConfigMaps: true,
      related: [
        { id: 'cm-ref', origin: 'platform', resource: 'configmaps', reference: { path: '.spec.configMapName' } },
        { id: 'cm-sel', origin: 'platform', resource: 'configmaps', selector: { matchLabels: { app: '{{ name }}' } } },
        { id: 'cm-inv', origin: 'platform', resource: 'configmaps', inverse: { label: OWNER } },
      ],
      setup: async ({ ns, label, createDatabase }) => {
        await a.putConfigMap(ns, 'pcm', { v: 'primary' }, { role: label });
        await a.putConfigMap(ns, 'ref-cm', { v: 'ref' });
        await a.putConfigMap(ns, 'sel-cm', { v: 'sel' }, { app: 'db' });
        await a.putConfigMap(ns, 'inv-cm', { v: 'inv' }, { [OWNER]: 'db' });
        await createDatabase('db', { configMapName: 'ref-cm' });
        return ['configmaps pcm', 'databases db', 'configmaps ref-cm', 'configmaps sel-cm', 'configmaps inv-cm'];
      },
    },
    {
      title: 'two related rules of one type that resolve to the same object',
      related: [
        { id: 'by-ref', origin: 'platform', resource: 'configmaps', reference: { path: '.spec.configMapName' } },
        { id: 'by-tpl', origin: 'platform', resource: 'configmaps', template: { name: '{{ name }}-cfg' } },
        { id: 'by-sel', origin: 'platform', resource: 'configmaps', selector: { matchLabels: { app: '{{ name }}' } } },
      ],
      setup: async ({ ns, createDatabase }) => {
        await a.putConfigMap(ns, 'db-cfg', { v: 'one object, three rules' }, { app: 'db' });
        await createDatabase('db', { configMapName: 'db-cfg' });
        return ['databases db', 'configmaps db-cfg'];
      },
    },
    {
      title: 'one type in both origins',
      related: [
        { id: 'sec-p', origin: 'platform', resource: 'secrets', reference: { path: '.spec.secretName' } },
        { id: 'sec-s', origin: 'service', resource: 'secrets', inverse: { label: OWNER } },
      ],
      setup: async ({ ns, copyNs, createDatabase }) => {
        await a.putSecret(ns, 'ref-sec', { k: 'platform' });
        await createDatabase('db', { secretName: 'ref-sec' });
        await svc.putSecret(copyNs, 'db-creds', { password: 'operator' }, { [OWNER]: 'db' }, await svc.copyOf(copyNs, 'db'));
        return ['databases db', 'secrets ref-sec', 'back secrets db-creds'];
      },
    },
    {
      title: 'a service-origin copy of a primary type on the platform',
      primaryConfigMaps: true,
      related: [{ id: 'cm-s', origin: 'service', resource: 'configmaps', inverse: { label: OWNER } }],
      setup: async ({ copyNs, label, createDatabase }) => {
        await createDatabase('db', {});
        // It carries the label that makes a platform ConfigMap a primary: its copy must not become one.
        await svc.putConfigMap(copyNs, 'db-endpoint', { host: 'db.example' }, { [OWNER]: 'db', role: label }, await svc.copyOf(copyNs, 'db'));
        return ['databases db', 'back configmaps db-endpoint'];
      },
    },
    {
      title: 'a destination of another kind that is another resource\'s primary type',
      primaryConfigMaps: true,
      related: [{ id: 'as-cm', origin: 'platform', resource: 'secrets', reference: { path: '.spec.asConfigMap' }, destination: { resource: 'configmaps' } }],
      setup: async ({ ns, createDatabase }) => {
        await a.putSecret(ns, 'conv-sec', { v: 'as a ConfigMap' });
        await createDatabase('db', { asConfigMap: 'conv-sec' });
        return ['databases db', 'configmaps conv-sec'];
      },
    },
    {
      title: 'a destination of another kind that is another resource\'s primary type, and the source type of a service-origin rule',
      primaryConfigMaps: true,
      related: [
        { id: 'as-cm', origin: 'platform', resource: 'secrets', reference: { path: '.spec.asConfigMap' }, destination: { resource: 'configmaps' } },
        { id: 'cm-s', origin: 'service', resource: 'configmaps', inverse: { label: OWNER } },
      ],
      setup: async ({ ns, copyNs, createDatabase }) => {
        await a.putSecret(ns, 'conv-sec', { v: 'as a ConfigMap' });
        await createDatabase('db', { asConfigMap: 'conv-sec' });
        await svc.putConfigMap(copyNs, 'db-endpoint', { host: 'db.example' }, { [OWNER]: 'db' }, await svc.copyOf(copyNs, 'db'));
        return ['databases db', 'configmaps conv-sec', 'back configmaps db-endpoint'];
      },
    },
  ];

  OVERLAPS.forEach((overlap, i) => {
    it(`a sweep over a converged system writes and deletes nothing: ${overlap.title}`, async () => {
      await relsync?.stop(); // the tests above leave theirs running
      const agent = `ov${i}`;
      const ns = `overlap-${i}`;
      const copyNs = defaultCopyNamespace('tenant-a', ns);
      const label = `primary-${agent}`;
      const config = writeConfig(dir, {
        agentName: agent,
        platformClusters: [{ name: 'tenant-a', kubeconfig: clusters.plane['tenant-a'].kubeconfigPath }],
        serviceCluster: { name: 'service', kubeconfig: clusters.plane.service.kubeconfigPath },
        store: { path: join(dir, `${agent}.db`) },
        resync: { schedule: '0 0 1 1 *', onStartup: true },
        leaderElection: { enabled: false },
        resources: [
          ...(overlap.primaryConfigMaps ? [{ resource: 'configmaps', selector: { matchLabels: { role: label } } }] : []),
          { group: GROUP, resource: 'databases', selector: { matchLabels: { overlap: String(i) } }, related: overlap.related },
        ],
      }, `${agent}.yaml`);
      const log = join(dir, `${agent}.log`);
      let process = await startRelsync(config, log);
      try {
        await a.ensureNamespace(ns);
        const createDatabase = (name: string, spec: Record<string, unknown>) => a.createDatabase(ns, name, spec, { overlap: String(i) });
        const expected = await overlap.setup({ ns, copyNs, label, createDatabase });
        const want = expected.map((e) => (e.startsWith('back ') ? `${e.split(' ')[1]} ${ns}/${e.split(' ')[2]}` : `${e.split(' ')[0]} ${copyNs}/${e.split(' ')[1]}`));
        await eventually(`every copy exists (${want.join(', ')})`, async () => {
          const all = new Set([...(await copiesOn(svc, agent)).keys(), ...(await copiesOn(a, agent)).keys()]);
          return want.every((w) => all.has(w));
        }, 30_000);
        await eventually('every relation synced', async () => {
          const states = Object.values(await relationStates('tenant-a', ns, 'db', config));
          return states.length > 0 && states.every((s) => s === 'synced');
        }, 30_000);
        await process.stop();
        const uids = { service: await copiesOn(svc, agent), tenant: await copiesOn(a, agent) };
        assert.equal(uids.service.size + uids.tenant.size, want.length, `exactly the expected copies: ${[...uids.service.keys(), ...uids.tenant.keys()].join(', ')}`);

        let before = await writeCountsNow();
        const result = await sweepOnce(config);
        const after = await writeCountsNow();
        assert.deepEqual({ removed: result.copiesRemoved, repaired: result.copiesRepaired, errors: result.errors }, { removed: 0, repaired: 0, errors: 0 }, 'relsync sweep');
        assert.deepEqual([...requestsBetween(before.service, after.service, SYNCED_TYPES), ...requestsBetween(before.tenant, after.tenant, SYNCED_TYPES)], [], 'relsync sweep: API writes');
        assert.deepEqual({ service: await copiesOn(svc, agent), tenant: await copiesOn(a, agent) }, uids, 'relsync sweep: the same copies, with the same uids');

        before = await writeCountsNow();
        process = await startRelsync(config, log);
        // The new process's own lines (log() reads this run's only).
        await eventually('the startup sweep finished', async () => relsyncLogCount(process, 'sweep finished') > 0, 60_000);
        assert.deepEqual(await writesUpToMarker(before, ns, copyNs, 'db'), [], 'start and startup sweep: API writes');
        assert.deepEqual({ service: await copiesOn(svc, agent), tenant: await copiesOn(a, agent) }, uids, 'startup sweep: the same copies, with the same uids');
      } finally {
        await process.stop();
      }
    });
  });

});

/** relsync's log lines at level warn or above. */
function warnings(process: RelsyncProcess): string[] {
  return process.log().split('\n').filter((l) => /"level":"(warn|error|fatal)"/.test(l));
}

function relsyncLogCount(process: RelsyncProcess, message: string): number {
  return process.log().split('\n').filter((l) => l.includes(`"msg":"${message}"`)).length;
}
