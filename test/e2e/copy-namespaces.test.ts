// Copy namespaces against a tenant that collides on purpose, and across the
// upgrade from the 24-bit default: a namespace that serves one tenant's
// source never takes another's copies, and the copies a namespace of the old
// default holds stay where they are (same uids), also when the store is lost.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startClusters, twoTenantConfig, type Clusters } from '../harness/clusters.js';
import { eventually } from '../harness/kube.js';
import { startRelsync, writeConfig, type RelsyncProcess } from '../harness/relsync-process.js';
import { defaultCopyNamespace, legacyCopyNamespace, type ClusterClient } from '../harness/tenant.js';

const SERVES_CLUSTER = 'relsync.dev/serves-cluster';
const SERVES_NAMESPACE = 'relsync.dev/serves-namespace';
const LEGACY = '{{ join "-" cluster namespace | trunc 56 }}-{{ hash cluster namespace | trunc 6 }}';

describe('copy namespaces', () => {
  let clusters: Clusters<'tenant-a' | 'tenant-b' | 'service'>;
  let a: ClusterClient;
  let b: ClusterClient;
  let svc: ClusterClient;
  let dir: string;
  let relsync: RelsyncProcess | undefined;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'relsync-e2e-copy-ns-'));
    clusters = await startClusters('tenant-a', 'tenant-b', 'service');
    ({ 'tenant-a': a, 'tenant-b': b, service: svc } = clusters.client);
  });

  after(async () => {
    await relsync?.stop();
    await clusters?.stop();
  });

  const related = [{ id: 'config', origin: 'platform', resource: 'configmaps', reference: { path: '.spec.configMapName' } }];
  const config = (naming: Record<string, string> | undefined, store: string, file: string) =>
    // The Lease's namespace given, as POD_NAMESPACE gives it in a pod: the installation is known (and recorded).
    writeConfig(dir, { ...twoTenantConfig(clusters, dir), leaderElection: { namespace: 'default' }, store: { path: join(dir, store) }, resources: [{ group: 'demo.relsync.dev', resource: 'databases', ...(naming ? { naming } : {}), related }] }, file);

  async function annotations(ns: string): Promise<Record<string, string>> {
    return (await svc.core.readNamespace({ name: ns })).metadata?.annotations ?? {};
  }

  it("never puts a tenant's copies into a namespace that serves another tenant's source", async () => {
    // A naming template with 8 bits of hash (validate cannot see that it is weak), and a tenant b
    // that searches for a namespace of its own whose copy namespace is tenant a's "shop"'s.
    relsync = await startRelsync(config({ namespace: 'c{{ hash cluster namespace | trunc 2 }}' }, 'collide.db', 'collide.yaml'), join(dir, 'collide.log'));
    const hash = (c: string, n: string) => createHash('sha256').update(`${c}/${n}`).digest('hex').slice(0, 2);
    const victimNs = `c${hash('tenant-a', 'shop')}`;
    let attackerNs = '';
    for (let i = 0; !attackerNs; i++) if (hash('tenant-b', `shop-${i}`) === hash('tenant-a', 'shop')) attackerNs = `shop-${i}`;
    await a.ensureNamespace('shop');
    await b.ensureNamespace(attackerNs);
    await a.putConfigMap('shop', 'cfg', { tenant: 'a' });
    await a.createDatabase('shop', 'orders', { configMapName: 'cfg', size: 'a' });
    await eventually("tenant a's copy", () => svc.database(victimNs, 'orders'), 30_000);
    await eventually("tenant a's related copy", () => svc.configMap(victimNs, 'cfg'), 30_000);
    assert.deepEqual([(await annotations(victimNs))[SERVES_CLUSTER], (await annotations(victimNs))[SERVES_NAMESPACE]], ['tenant-a', 'shop']);

    await b.putConfigMap(attackerNs, 'cfg', { tenant: 'b' });
    await b.putConfigMap(attackerNs, 'other', { tenant: 'b' });
    await b.createDatabase(attackerNs, 'orders', { configMapName: 'cfg', size: 'b' });
    await b.createDatabase(attackerNs, 'intruder', { configMapName: 'other' });
    // The Event on tenant b's objects proves their reconciles ran: what they did not write is checked after it.
    for (const name of ['orders', 'intruder']) {
      await eventually(`a CopyConflict Event on tenant b's ${name}`, async () => (await b.events(attackerNs, name)).some((e) => e.reason === 'CopyConflict' && new RegExp(`copy namespace ${victimNs} serves another source`).test(e.message ?? '') && !/tenant-a/.test(e.message ?? '')), 30_000);
    }
    assert.equal((await svc.database(victimNs, 'orders'))?.spec?.size, 'a', "tenant a's copy is untouched");
    assert.equal((await svc.configMap(victimNs, 'cfg'))?.data?.tenant, 'a', "tenant a's related copy is untouched");
    assert.equal(await svc.database(victimNs, 'intruder'), undefined, "tenant b's other primary is not copied next to tenant a's");
    assert.equal(await svc.configMap(victimNs, 'other'), undefined, "nor its related object");
    await relsync.stop();
    relsync = undefined;
  });

  it('keeps the copies of a namespace made under the 24-bit default where they are, also when the store is lost', async () => {
    const legacyNs = legacyCopyNamespace('tenant-a', 'old');
    const newNs = defaultCopyNamespace('tenant-a', 'old');
    assert.notEqual(legacyNs, newNs);
    // What a relsync before 0.2 left behind: its copies in a namespace of the old default, with no
    // record of whom the namespace serves (made here by running the old template and removing the record).
    relsync = await startRelsync(config({ namespace: LEGACY }, 'upgrade.db', 'legacy.yaml'), join(dir, 'legacy.log'));
    await a.ensureNamespace('old');
    await a.putConfigMap('old', 'cfg', { v: '1' });
    await a.createDatabase('old', 'orders', { configMapName: 'cfg' });
    const copy = await eventually('copy in the old default namespace', () => svc.database(legacyNs, 'orders'), 30_000);
    const relatedCopy = await eventually('related copy there', () => svc.configMap(legacyNs, 'cfg'), 30_000);
    await relsync.stop();
    await svc.core.patchNamespace({ name: legacyNs, body: [{ op: 'remove', path: '/metadata/annotations' }] });
    assert.deepEqual(await annotations(legacyNs), {});

    // The new relsync, with the default naming and the same store.
    relsync = await startRelsync(config(undefined, 'upgrade.db', 'upgraded.yaml'), join(dir, 'upgraded.log'));
    await eventually('the namespace records whom it serves', async () => (await annotations(legacyNs))[SERVES_CLUSTER] === 'tenant-a', 30_000);
    assert.equal((await annotations(legacyNs))[SERVES_NAMESPACE], 'old');
    await a.putConfigMap('old', 'cfg', { v: '2' });
    await a.createDatabase('old', 'later', { configMapName: 'cfg' });
    await a.ensureNamespace('fresh');
    await a.createDatabase('fresh', 'orders', {});
    await eventually('a change reaches the related copy where it is', async () => (await svc.configMap(legacyNs, 'cfg'))?.data?.v === '2', 30_000);
    await eventually('a new primary of the same namespace joins its siblings', () => svc.database(legacyNs, 'later'), 30_000);
    await eventually('a primary of a new namespace gets a 64-bit copy namespace', () => svc.database(defaultCopyNamespace('tenant-a', 'fresh'), 'orders'), 30_000);
    assert.equal((await svc.database(legacyNs, 'orders'))?.metadata.uid, copy.metadata.uid, 'the copy was not made again');
    assert.equal((await svc.configMap(legacyNs, 'cfg'))?.metadata?.uid, relatedCopy.metadata?.uid, 'nor the related copy');
    assert.equal(await svc.database(newNs, 'orders'), undefined, 'no second copy under the new default');
    await relsync.stop();

    // The store is lost: the namespace's record keeps the copies where they are.
    rmSync(join(dir, 'upgrade.db'), { force: true });
    for (const suffix of ['-wal', '-shm', '.replica']) rmSync(join(dir, `upgrade.db${suffix}`), { force: true });
    relsync = await startRelsync(config(undefined, 'upgrade.db', 'upgraded.yaml'), join(dir, 'store-lost.log'));
    await a.putConfigMap('old', 'cfg', { v: '3' });
    await eventually('a change still reaches the copy where it is', async () => (await svc.configMap(legacyNs, 'cfg'))?.data?.v === '3', 30_000);
    await eventually('the startup sweep is done', async () => /"msg":"sweep finished"/.test(relsync!.log()), 30_000);
    assert.equal((await svc.database(legacyNs, 'orders'))?.metadata.uid, copy.metadata.uid, 'the copy was not made again after the store was lost');
    assert.equal(await svc.database(newNs, 'orders'), undefined, 'no second copy under the new default');
  });

  it('refuses to run beside another installation with the same agent name', async () => {
    const copies = (await svc.objects.listClusterCustomObject({ group: 'demo.relsync.dev', version: 'v1alpha1', plural: 'databases' })) as { items: Array<{ metadata: { uid: string } }> };
    // Same agent name, its own Lease (another namespace), its own store: another installation.
    const other = writeConfig(dir, { ...twoTenantConfig(clusters, dir), store: { path: join(dir, 'other.db') }, leaderElection: { enabled: false, namespace: 'elsewhere' }, resources: [{ group: 'demo.relsync.dev', resource: 'databases', related }] }, 'other.yaml');
    const logFile = join(dir, 'other.log');
    await svc.ensureNamespace('elsewhere');
    const exited = await startRelsync(other, logFile).then(
      (p) =>
        new Promise<number | string | null>((resolve) => {
          if (p.child.exitCode !== null) return resolve(p.child.exitCode);
          p.child.once('exit', resolve);
          // A relsync that runs on instead of refusing fails the test, not hangs it.
          setTimeout(() => void p.kill().then(() => resolve('still running after 30 s')), 30_000).unref();
        }),
      // It may refuse before the harness saw it serve: then the harness says with which code it exited.
      (err: Error) => Number(/relsync exited with (\d+)/.exec(err.message)?.[1] ?? NaN),
    );
    assert.ok(typeof exited === 'number' && exited > 0, `exit: ${exited}`);
    assert.match(readFileSync(logFile, 'utf8'), /belong to another relsync installation with agent name \\"e2e\\" \(its Lease: default\/relsync-e2e\); this one's Lease is elsewhere\/relsync-e2e/);
    const after = (await svc.objects.listClusterCustomObject({ group: 'demo.relsync.dev', version: 'v1alpha1', plural: 'databases' })) as { items: Array<{ metadata: { uid: string } }> };
    assert.deepEqual(after.items.map((c) => c.metadata.uid).sort(), copies.items.map((c) => c.metadata.uid).sort(), 'no copy was touched');
  });

  it("leaves alone the copies of an installation that appeared after its start, even when they look like orphans", async () => {
    await relsync?.stop();
    const late = writeConfig(dir, { ...twoTenantConfig(clusters, dir), leaderElection: { namespace: 'default' }, resync: { schedule: '*/2 * * * * *', onStartup: true }, store: { path: join(dir, 'late.db') }, resources: [{ group: 'demo.relsync.dev', resource: 'databases', related }] }, 'late.yaml');
    relsync = await startRelsync(late, join(dir, 'late.log'));
    await eventually('the start sweep', async () => relsync!.log().includes('"sweep finished"') || undefined, 30_000);
    // Copies whose primaries do not exist: one in a namespace of this installation, one in a
    // namespace another installation with the same agent name made after this one started.
    const orphan = async (ns: string, installation: string) => {
      await svc.core.createNamespace({ body: { metadata: { name: ns, labels: { 'relsync.dev/agent': 'e2e' }, annotations: { [SERVES_CLUSTER]: 'tenant-a', [SERVES_NAMESPACE]: ns, 'relsync.dev/installation': installation } } } });
      const marks = { 'relsync.dev/source-cluster': 'tenant-a', 'relsync.dev/source-group': 'demo.relsync.dev', 'relsync.dev/source-resource': 'databases', 'relsync.dev/source-namespace': ns, 'relsync.dev/source-name': 'ghost', 'relsync.dev/source-uid': '00000000-0000-0000-0000-000000000001' };
      await svc.objects.createNamespacedCustomObject({ group: 'demo.relsync.dev', version: 'v1alpha1', plural: 'databases', namespace: ns, body: { apiVersion: 'demo.relsync.dev/v1alpha1', kind: 'Database', metadata: { name: 'ghost', labels: { 'relsync.dev/agent': 'e2e' }, annotations: marks }, spec: {} } });
    };
    await orphan('late-theirs', 'other/relsync-e2e');
    await orphan('late-mine', 'default/relsync-e2e');
    // The marker: this installation's orphan is deleted, so a sweep has looked at both.
    await eventually("this installation's orphan deleted by a sweep", async () => !(await svc.database('late-mine', 'ghost')) || undefined, 30_000);
    // The same sweep looked at the other installation's copy (created first, listed with it) and said why it kept it.
    await eventually('the sweep says it left the other installation\'s copy alone', async () => relsync!.log().includes('another relsync installation with agent name') || undefined, 10_000);
    assert.ok(await svc.database('late-theirs', 'ghost'), "the other installation's copy is still there");
    assert.match(relsync.log(), /a copy without an owner here is in a namespace of another relsync installation/);
  });
});
