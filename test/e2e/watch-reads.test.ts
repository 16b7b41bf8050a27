// Reads from what the watches delivered (cache/object-cache.ts), counted by
// the API servers themselves: once the watches have shown relsync a
// primary's objects, a related change is synced without a GET of the
// primary, its copy or either end of a relation, and costs relsync one
// request: the write of that relation's copy (sync/edge-sync.ts). (What happens after a 409,
// and that nothing is deleted on the cache's word, is in
// test/unit/sync/primary-reconciler.test.ts.)
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { requestCounts, requestsBetween } from '../harness/api-metrics.js';
import { eventually } from '../harness/kube.js';
import { startTenants, type RelsyncFixture } from '../harness/relsync-fixture.js';
import { defaultCopyNamespace, type ClusterClient } from '../harness/tenant.js';

const GET = new Set(['GET']);
const SINGLE = new Set(['GET', 'POST', 'PUT', 'PATCH', 'APPLY', 'DELETE']);
const TYPES = ['configmaps', 'secrets', 'databases.demo.relsync.dev'];

describe('reads from the watches', () => {
  let t: RelsyncFixture<'tenant-a'>;
  let a: ClusterClient;
  let svc: ClusterClient;
  const ns = defaultCopyNamespace('tenant-a', 'cache');

  before(async () => {
    t = await startTenants('watch-reads', ['tenant-a'], {
      resync: { schedule: '0 0 1 1 *', onStartup: false },
      resources: [{ group: 'demo.relsync.dev', resource: 'databases', related: [
        { id: 'config', origin: 'platform', resource: 'configmaps', reference: { path: '.spec.configMapName' } },
        { id: 'settings', origin: 'platform', resource: 'configmaps', template: { name: '{{ name }}-settings' } },
        { id: 'credentials', origin: 'service', resource: 'secrets', template: { name: '{{ name }}-credentials' } },
      ] }],
    });
    ({ 'tenant-a': a, service: svc } = t.clusters.client);
    await a.ensureNamespace('cache');
    // The primary first: its related objects' events then concern it, and the cache keeps them.
    await a.createDatabase('cache', 'orders', { configMapName: 'cfg' });
    await svc.copyOf(ns, 'orders');
    await a.putConfigMap('cache', 'cfg', { v: '0' });
    await a.putConfigMap('cache', 'orders-settings', { s: '0' });
    await svc.putSecret(ns, 'orders-credentials', { password: 'p' }, undefined, await svc.copyOf(ns, 'orders'));
    await eventually('converged', async () => (await svc.configMap(ns, 'cfg')) !== undefined && (await svc.configMap(ns, 'orders-settings')) !== undefined && (await a.secret('cache', 'orders-credentials')) !== undefined, 30_000);
  });

  after(() => t?.stop());

  // The harness polls with LISTs (one object, by field selector), so that every GET counted is relsync's.
  const listed = async (client: ClusterClient, kind: 'configMap' | 'secret', namespace: string, name: string): Promise<Record<string, string> | undefined> => {
    const fieldSelector = `metadata.name=${name}`;
    const items = kind === 'configMap' ? (await client.core.listNamespacedConfigMap({ namespace, fieldSelector })).items : (await client.core.listNamespacedSecret({ namespace, fieldSelector })).items;
    const item = items[0];
    if (!item) return undefined;
    return kind === 'configMap' ? (item as { data?: Record<string, string> }).data ?? {} : Object.fromEntries(Object.entries((item as { data?: Record<string, string> }).data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString()]));
  };
  const gets = async () => ({ tenant: await requestCounts(t.clusters.plane['tenant-a'], GET), service: await requestCounts(t.clusters.plane.service, GET) });
  const singles = async () => ({ tenant: await requestCounts(t.clusters.plane['tenant-a'], SINGLE), service: await requestCounts(t.clusters.plane.service, SINGLE) });

  it('syncs a related change without reading again what the watches delivered', async () => {
    const before = await gets();
    const beforeAll = await singles();
    await a.core.replaceNamespacedConfigMap({ namespace: 'cache', name: 'cfg', body: { metadata: { name: 'cfg', namespace: 'cache' }, data: { v: '1' } } });
    await eventually('the change copied', async () => (await listed(svc, 'configMap', ns, 'cfg'))?.v === '1', 30_000);
    // Marker: a change of the last relation (in rule order) of the same primary, copied after the
    // first, so the reconciles of both changes have done all their reads.
    const secret = (await svc.core.listNamespacedSecret({ namespace: ns, fieldSelector: 'metadata.name=orders-credentials' })).items[0]!;
    await svc.core.replaceNamespacedSecret({ namespace: ns, name: 'orders-credentials', body: { ...secret, data: { password: Buffer.from('p2').toString('base64') } } });
    await eventually('the marker copied', async () => (await listed(a, 'secret', 'cache', 'orders-credentials'))?.password === 'p2', 30_000);
    const after = await gets();
    const reads = { tenant: requestsBetween(before.tenant, after.tenant, TYPES), service: requestsBetween(before.service, after.service, TYPES) };
    const namespaces = requestsBetween(before.service, after.service, ['namespaces']);
    console.log(`GETs by relsync while a related change and a marker were synced: ${JSON.stringify(reads)}; copy namespace reads (no watch covers namespaces): ${JSON.stringify(namespaces)}`);
    assert.deepEqual(reads, { tenant: [], service: [] }, 'no GET of a primary, a copy or a related object');
    // Each change concerned one relation (sync/edge-sync.ts): one write of its copy, and no other
    // request of relsync's (the test's own two writes are the other lines).
    const afterAll = await singles();
    const all = { tenant: requestsBetween(beforeAll.tenant, afterAll.tenant, [...TYPES, 'namespaces']), service: requestsBetween(beforeAll.service, afterAll.service, [...TYPES, 'namespaces']) };
    console.log(`every request but LIST and WATCH meanwhile: ${JSON.stringify(all)}`);
    const write = (type: string) => (line: string) => new RegExp(`^(PUT|PATCH|APPLY) ${type} ×1$`).test(line);
    assert.equal(all.tenant.length, 2, all.tenant.join(', '));
    assert.ok(all.tenant.some(write('configmaps')) && all.tenant.some(write('secrets')), `the test's ConfigMap change and relsync's one write of the Secret's copy: ${all.tenant.join(', ')}`);
    assert.equal(all.service.length, 2, all.service.join(', '));
    assert.ok(all.service.some(write('configmaps')) && all.service.some(write('secrets')), `relsync's one write of the ConfigMap's copy and the test's Secret change: ${all.service.join(', ')}`);
  });
});
