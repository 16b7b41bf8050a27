// Tenant isolation against a tenant that tries: forged relsync marks on its
// own primary and objects, references that try to leave the namespace, and
// an inverse annotation naming another tenant's primary. (Identical names,
// selector and inverse labels across tenants and unowned objects in the
// destination are covered in core-sync and selector-inverse.)
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { eventually } from '../harness/kube.js';
import { startTenants, type RelsyncFixture } from '../harness/relsync-fixture.js';
import { runCli } from '../harness/relsync-process.js';
import { decode, defaultCopyNamespace, type ClusterClient } from '../harness/tenant.js';

const OWNER = 'demo.relsync.dev/owner';

describe('tenant isolation against a tenant that tries', () => {
  let t: RelsyncFixture<'tenant-a' | 'tenant-b'>;
  let a: ClusterClient;
  let b: ClusterClient;
  let svc: ClusterClient;
  const nsA = defaultCopyNamespace('tenant-a', 'iso');
  const nsB = defaultCopyNamespace('tenant-b', 'iso');

  before(async () => {
    t = await startTenants('isolation', ['tenant-a', 'tenant-b'], {
      resources: [
        {
          group: 'demo.relsync.dev',
          resource: 'databases',
          related: [
            { id: 'config', origin: 'platform', resource: 'configmaps', reference: { path: '.spec.configMapName' } },
            { id: 'owned', origin: 'platform', resource: 'configmaps', inverse: { annotation: OWNER } },
            { id: 'credentials', origin: 'service', resource: 'secrets', template: { name: '{{ name }}-credentials' } },
            // Service-origin rules whose names and namespace the tenant writes (the copy's spec is its primary's).
            { id: 'svc-ref', origin: 'service', resource: 'secrets', reference: { path: '.spec.secretName' } },
            { id: 'svc-sel', origin: 'service', resource: 'configmaps', selector: { matchLabels: { app: '{{ object.spec.app }}' } }, namespace: { source: '{{ object.spec.fromNamespace }}' } },
          ],
        },
      ],
    });
    ({ 'tenant-a': a, 'tenant-b': b, service: svc } = t.clusters.client);
    for (const c of [a, b]) await c.ensureNamespace('iso');
    await a.putConfigMap('iso', 'cfg', { tenant: 'a' });
    await a.createDatabase('iso', 'orders', { configMapName: 'cfg', size: 'a' });
    await eventually("tenant a's primary copied", () => svc.configMap(nsA, 'cfg'), 30_000);
    await svc.putSecret(nsA, 'orders-credentials', { password: 'only-a' }, undefined, await svc.copyOf(nsA, 'orders'));
    await eventually('tenant a gets its credentials', async () => decode(await a.secret('iso', 'orders-credentials'), 'password') === 'only-a');
    // Tenant b's marker primary, with an object of each watch of tenant b that relsync routes to it.
    await b.createDatabase('iso', 'marker', {});
    await b.core.createNamespacedConfigMap({ namespace: 'iso', body: { metadata: { name: 'marker-owned', annotations: { [OWNER]: 'marker' } }, data: { n: '0' } } });
    await svc.putSecret(nsB, 'marker-credentials', { n: '0' }, undefined, await svc.copyOf(nsB, 'marker'));
    await eventually("tenant b's marker objects synced", async () => (await svc.configMap(nsB, 'marker-owned')) !== undefined && (await b.secret('iso', 'marker-credentials')) !== undefined, 30_000);
  });

  after(() => t?.stop());

  // Negative claims ("nothing was copied") are checked only once what could have copied it has
  // provably run. A watch routes its events in order, so a later change on the same watch that
  // reached its copy proves the earlier events were routed; and the work queue runs one primary
  // at a time, so two changes to one primary, each reaching its copy after the one before, prove
  // that every reconcile of it queued before the first has finished.
  let markers = 0;

  /** Every event so far on relsync's watch of tenant b's ConfigMaps has been routed. */
  async function tenantBConfigMapsRouted(): Promise<void> {
    const n = String(++markers);
    await b.putConfigMap('iso', 'marker-owned', { n });
    await eventually(`tenant b ConfigMap marker ${n}`, async () => (await svc.configMap(nsB, 'marker-owned'))?.data?.n === n, 30_000);
  }

  /** Every event so far on relsync's watch of tenant b's Secrets has been routed: a copy relsync made there, deleted, comes back. */
  async function tenantBSecretsRouted(): Promise<void> {
    const before = (await b.secret('iso', 'marker-credentials'))?.metadata?.uid;
    await b.deleteSecret('iso', 'marker-credentials');
    await eventually('tenant b Secret marker', async () => {
      const uid = (await b.secret('iso', 'marker-credentials'))?.metadata?.uid;
      return uid !== undefined && uid !== before;
    }, 30_000);
  }

  /** Every reconcile of tenant a's primary "orders" queued before now has finished. */
  async function tenantAOrdersDone(password: string): Promise<void> {
    const copyA = await svc.copyOf(nsA, 'orders');
    for (let i = 0; i < 2; i++) {
      const n = String(++markers);
      await svc.putSecret(nsA, 'orders-credentials', { password, marker: n }, undefined, copyA);
      await eventually(`tenant a's orders marker ${n}`, async () => decode(await a.secret('iso', 'orders-credentials'), 'marker') === n, 30_000);
    }
  }

  /** Every reconcile of tenant b's primary `name` queued before now has finished. */
  async function tenantBPrimaryDone(name: string): Promise<void> {
    for (let i = 0; i < 2; i++) {
      const n = String(++markers);
      await b.updateDatabase('iso', name, (db) => (db.spec = { ...db.spec, marker: n }));
      await eventually(`tenant b's ${name} marker ${n}`, async () => (await svc.database(nsB, name))?.spec?.marker === n, 30_000);
    }
  }

  async function tenantAUntouched(): Promise<void> {
    assert.deepEqual((await svc.database(nsA, 'orders'))?.spec, { configMapName: 'cfg', size: 'a' });
    assert.deepEqual((await svc.configMap(nsA, 'cfg'))?.data, { tenant: 'a' });
    assert.equal(decode(await svc.secret(nsA, 'orders-credentials'), 'password'), 'only-a');
    assert.equal((await svc.database(nsA, 'orders'))?.metadata.annotations?.['relsync.dev/source-cluster'], 'tenant-a');
  }

  it("cannot claim another tenant's copy by forging relsync's marks on its own primary", async () => {
    const copyA = await svc.database(nsA, 'orders');
    const forged = {
      'relsync.dev/source-cluster': 'tenant-a',
      'relsync.dev/source-group': 'demo.relsync.dev',
      'relsync.dev/source-resource': 'databases',
      'relsync.dev/source-namespace': 'iso',
      'relsync.dev/source-name': 'orders',
      'relsync.dev/source-uid': copyA?.metadata.annotations?.['relsync.dev/source-uid'] ?? 'x',
    };
    await b.putConfigMap('iso', 'cfg', { tenant: 'b' });
    await b.objects.createNamespacedCustomObject({
      group: 'demo.relsync.dev', version: 'v1alpha1', plural: 'databases', namespace: 'iso',
      body: { apiVersion: 'demo.relsync.dev/v1alpha1', kind: 'Database', metadata: { name: 'orders', labels: { 'relsync.dev/agent': 'e2e' }, annotations: forged }, spec: { configMapName: 'cfg', size: 'b' } },
    });
    await eventually("tenant b's own copy", async () => (await svc.database(nsB, 'orders'))?.spec?.size === 'b', 30_000);
    const copyB = (await svc.database(nsB, 'orders'))!;
    assert.equal(copyB.metadata.annotations?.['relsync.dev/source-cluster'], 'tenant-b', "the copy's marks name its true source, not the forged one");
    assert.equal(copyB.metadata.annotations?.['relsync.dev/source-uid'], (await b.database('iso', 'orders'))?.metadata.uid);
    await eventually("tenant b's related copy", async () => (await svc.configMap(nsB, 'cfg'))?.data?.tenant === 'b', 30_000);
    // The service side answers tenant b's copy; tenant a's credentials stay where they are.
    await svc.putSecret(nsB, 'orders-credentials', { password: 'only-b' }, undefined, copyB);
    await eventually('tenant b gets its own credentials', async () => decode(await b.secret('iso', 'orders-credentials'), 'password') === 'only-b');
    // A sweep must not take the forged marks for anything either.
    await t.relsync.stop();
    const sweep = await runCli(['sweep', '--config', t.configPath, '-o', 'json']);
    assert.equal(sweep.code, 0, sweep.stderr);
    await t.restart();
    await tenantAUntouched();
    assert.equal(decode(await a.secret('iso', 'orders-credentials'), 'password'), 'only-a');
    // Deleting tenant b's forged primary removes tenant b's copy only.
    await b.deleteDatabase('iso', 'orders');
    await eventually("tenant b's copy removed", async () => (await svc.database(nsB, 'orders')) === undefined, 30_000);
    await tenantAUntouched();
  });

  it('cannot reach another namespace through a reference', async () => {
    await b.ensureNamespace('victim');
    await b.putConfigMap('victim', 'cfg', { secret: 'victim' });
    for (const [name, ref] of [['slash', 'victim/cfg'], ['dotdot', '../victim/cfg'], ['dots', '..']] as const) {
      await b.createDatabase('iso', `ref-${name}`, { configMapName: ref });
    }
    // Each primary's Warning is recorded after its relations were synced: its reconcile has run.
    for (const name of ['slash', 'dotdot', 'dots']) {
      await eventually(`Event for ref-${name}`, async () => (await b.events('iso', `ref-${name}`)).some((e) => e.reason === 'RelatedResourceProblem'), 20_000);
    }
    const copies = (await svc.core.listConfigMapForAllNamespaces({ labelSelector: 'relsync.dev/agent=e2e' })).items;
    assert.equal(copies.filter((c) => c.data?.secret === 'victim').length, 0, "nothing of the other namespace was copied");
    assert.equal(await svc.configMap(defaultCopyNamespace('tenant-b', 'victim'), 'cfg'), undefined);
  });

  it("cannot attach its objects to another tenant's primary with an inverse annotation", async () => {
    await b.core.createNamespacedConfigMap({ namespace: 'iso', body: { metadata: { name: 'b-attached', annotations: { [OWNER]: 'orders' } }, data: { from: 'b' } } });
    await a.core.createNamespacedConfigMap({ namespace: 'iso', body: { metadata: { name: 'a-attached', annotations: { [OWNER]: 'orders' } }, data: { from: 'a' } } });
    await eventually("tenant a's own inverse object copied", () => svc.configMap(nsA, 'a-attached'), 30_000);
    // b-attached was routed (same watch), and tenant a's "orders", the primary it names, ran since.
    await tenantBConfigMapsRouted();
    await tenantAOrdersDone('only-a');
    assert.equal(await svc.configMap(nsA, 'b-attached'), undefined);
    const everywhere = (await svc.core.listConfigMapForAllNamespaces({ labelSelector: 'relsync.dev/agent=e2e' })).items;
    assert.equal(everywhere.filter((c) => c.metadata?.name === 'b-attached').length, 0, "tenant b has no primary named orders now, so its object goes nowhere");
  });

  it("cannot have the provider's own objects copied back by naming them in a service-origin rule", async () => {
    // What the provider keeps for itself: a Secret beside the tenant's copies (owned by nothing of the
    // tenant's), and a labelled ConfigMap in the operator's namespace.
    await svc.putSecret(nsB, 'operator-token', { token: 'provider-secret' });
    await svc.ensureNamespace('operator-system');
    await svc.putConfigMap('operator-system', 'operator-settings', { token: 'provider-secret' }, { app: 'thief' });
    // And one in kube-system, where a third primary points its selector's namespace.
    await svc.putConfigMap('kube-system', 'system-settings', { token: 'provider-secret' }, { app: 'thief' });
    // Another tenant's copy owns its Secret: an ownerReference to a copy that is not the tenant's own.
    const copyA = await svc.copyOf(nsA, 'orders');
    await svc.putSecret(nsB, 'a-owned', { token: 'provider-secret' }, undefined, copyA);
    // Tenant b names them every way a service-origin rule reads names: a reference, a selector in a
    // namespace of its choosing, and a selector whose namespace it renders empty ("all namespaces").
    await b.createDatabase('iso', 'thief', { secretName: 'operator-token', app: 'thief', fromNamespace: 'operator-system' });
    await b.createDatabase('iso', 'thief2', { secretName: 'a-owned', app: 'thief', fromNamespace: '' });
    await b.createDatabase('iso', 'thief3', { secretName: 'kube-root-ca.crt', app: 'thief', fromNamespace: 'kube-system' });
    // The empty namespace is an error for that primary, said on it.
    await eventually('an Event says the rendered namespace is empty', async () => (await b.events('iso', 'thief2')).some((e) => e.reason === 'RelatedResourceProblem' && /source namespace is empty/.test(e.message ?? '')), 30_000);
    // Marker: what the operator made for the thief's copy, owned by it, comes back; everything before it was processed.
    const thiefCopy = await svc.copyOf(nsB, 'thief');
    await svc.putSecret(nsB, 'thief-owned', { token: 'fine' }, undefined, thiefCopy);
    await b.updateDatabase('iso', 'thief', (db) => (db.spec = { ...db.spec, secretName: 'thief-owned' }));
    await eventually("the copy's own Secret comes back (marker)", async () => decode(await b.secret('iso', 'thief-owned'), 'token') === 'fine', 30_000);
    await b.updateDatabase('iso', 'thief', (db) => (db.spec = { ...db.spec, secretName: 'operator-token' }));
    for (const name of ['thief', 'thief2', 'thief3']) await tenantBPrimaryDone(name);
    for (const name of ['operator-token', 'a-owned', 'kube-root-ca.crt']) assert.equal(await b.secret('iso', name).then((s) => s && s.metadata?.labels?.['relsync.dev/agent']), undefined, `${name} never reaches the tenant`);
    assert.equal(await b.configMap('iso', 'operator-settings'), undefined, "the operator's ConfigMap never reaches the tenant");
    assert.equal(await b.configMap('iso', 'system-settings'), undefined, 'nor one in kube-system');
    assert.equal(await b.secret('iso', 'thief-owned'), undefined, 'the reference moved away: the copy of the owned Secret went');
    const everywhere = [...(await b.core.listSecretForAllNamespaces()).items, ...(await b.core.listConfigMapForAllNamespaces()).items];
    assert.deepEqual(everywhere.filter((o) => JSON.stringify(o.data ?? {}).includes(Buffer.from('provider-secret').toString('base64')) || JSON.stringify(o.data ?? {}).includes('provider-secret')).map((o) => o.metadata?.name), []);
    assert.ok(!t.relsync.log().includes('provider-secret'), 'nor the log');
  });

  it("never writes into a tenant's object that merely carries relsync's marks, from another tenant", async () => {
    // Tenant b forges a "copy" of tenant a's credentials in its own namespace.
    await b.core.createNamespacedSecret({
      namespace: 'iso',
      body: {
        metadata: { name: 'stolen', labels: { 'relsync.dev/agent': 'e2e' }, annotations: { 'relsync.dev/source-cluster': 'service', 'relsync.dev/source-group': '', 'relsync.dev/source-resource': 'secrets', 'relsync.dev/source-namespace': nsA, 'relsync.dev/source-name': 'orders-credentials' } },
        data: { password: Buffer.from('empty').toString('base64') },
      },
    });
    await svc.putSecret(nsA, 'orders-credentials', { password: 'only-a-v2' });
    await eventually('tenant a gets the new credentials', async () => decode(await a.secret('iso', 'orders-credentials'), 'password') === 'only-a-v2');
    // "stolen" was routed (same watch), and tenant a's "orders", whose copy its marks name, ran since.
    await tenantBSecretsRouted();
    await tenantAOrdersDone('only-a-v2');
    const stolen = await b.secret('iso', 'stolen');
    assert.notEqual(decode(stolen, 'password'), 'only-a-v2', "tenant a's value never reaches tenant b");
    assert.ok(!t.relsync.log().includes('only-a'), 'and never reaches the log');
  });
});
