// Adoption of objects that exist before relsync would create them (api-syncagent's users ask for it;
// api-syncagent adopts whatever it finds): relsync adopts only where the config says `adopt: true`
// and the object's owner granted it, with relsync.dev/adopt, to exactly one source. Tried from the
// side of a second tenant with the same names, of a rule without `adopt`, and of the tenant's own
// objects on its platform.
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import Database from 'better-sqlite3';
import { startClusters, twoTenantConfig, type Clusters } from '../harness/clusters.js';
import { eventually } from '../harness/kube.js';
import { startRelsync, writeConfig, type RelsyncProcess } from '../harness/relsync-process.js';
import { decode, defaultCopyNamespace, type ClusterClient } from '../harness/tenant.js';

const GRANT = 'relsync.dev/adopt';
const grant = (cluster: string, group: string, resource: string, namespace: string, name: string) => JSON.stringify({ agent: 'e2e', cluster, group, resource, namespace, name });
const SHARED = 'shared';

describe('adoption of existing objects, granted one source at a time', () => {
  let clusters: Clusters<'tenant-a' | 'tenant-b' | 'service'>;
  let a: ClusterClient;
  let b: ClusterClient;
  let svc: ClusterClient;
  let core: Record<'tenant-a' | 'service', CoreV1Api>;
  let relsync: RelsyncProcess;
  let dbPath: string;
  const copyNsA = defaultCopyNamespace('tenant-a', 'default');

  const relations = (cluster: string) => {
    const db = new Database(dbPath, { readonly: true });
    try {
      return db.prepare('SELECT rule_id AS rule, primary_name AS owner, state, message, content_hash AS hash FROM relations WHERE primary_cluster = ? ORDER BY rule_id').all(cluster) as Array<{ rule: string; owner: string; state: string; message: string | null; hash: string | null }>;
    } finally {
      db.close();
    }
  };

  before(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'relsync-e2e-adoption-'));
    clusters = await startClusters('tenant-a', 'tenant-b', 'service');
    ({ 'tenant-a': a, 'tenant-b': b, service: svc } = clusters.client);
    core = { 'tenant-a': clusters.plane['tenant-a'].kubeConfig.makeApiClient(CoreV1Api), service: clusters.plane.service.kubeConfig.makeApiClient(CoreV1Api) };
    // What the provider had before relsync: a namespace of shared ConfigMaps, and a copy namespace
    // with tenant A's Database in it, each object granted to A's source (a migration).
    await svc.ensureNamespace(SHARED);
    // a copy namespace the provider makes says whose it is (see docs/configuration.md "Copy namespaces")
    await svc.ensureNamespace(copyNsA, { cluster: 'tenant-a', namespace: 'default' });
    await core.service.createNamespacedConfigMap({ namespace: SHARED, body: { metadata: { name: 'orders-config', annotations: { [GRANT]: grant('tenant-a', '', 'configmaps', 'default', 'orders-config') } }, data: { provider: 'kept', v: 'old', extra: 'same' } } });
    await core.service.createNamespacedConfigMap({ namespace: SHARED, body: { metadata: { name: 'orders-notes', annotations: { [GRANT]: grant('tenant-a', '', 'configmaps', 'default', 'orders-notes') } }, data: { v: 'old' } } });
    const databases = clusters.plane.service.kubeConfig.makeApiClient(CustomObjectsApi);
    await databases.createNamespacedCustomObject({
      group: 'demo.relsync.dev', version: 'v1alpha1', plural: 'databases', namespace: copyNsA,
      body: { apiVersion: 'demo.relsync.dev/v1alpha1', kind: 'Database', metadata: { name: 'orders', labels: { provider: 'kept' }, annotations: { [GRANT]: grant('tenant-a', 'demo.relsync.dev', 'databases', 'default', 'orders') } }, spec: { size: 'old' } },
    });
    dbPath = join(dir, 'relsync.db');
    const configPath = writeConfig(dir, {
      ...twoTenantConfig(clusters, dir),
      resources: [{
        group: 'demo.relsync.dev',
        resource: 'databases',
        adopt: true,
        related: [
          { id: 'config', origin: 'platform', resource: 'configmaps', reference: { path: '.spec.configMapName' }, namespace: { destination: SHARED }, adopt: true },
          // the same grant, and a rule that does not adopt
          { id: 'notes', origin: 'platform', resource: 'configmaps', template: { name: '{{ name }}-notes' }, namespace: { destination: SHARED } },
          { id: 'credentials', origin: 'service', resource: 'secrets', template: { name: '{{ name }}-credentials' }, adopt: true },
        ],
      }],
    });
    relsync = await startRelsync(configPath, join(dir, 'relsync.log'));
  });

  after(async () => {
    await relsync?.stop();
    await clusters?.stop();
  });

  it('never gives another tenant what was granted to one: tenant B\'s same-named objects meet a conflict', async () => {
    await b.putConfigMap('default', 'orders-config', { v: 'from-b' });
    await b.createDatabase('default', 'orders', { configMapName: 'orders-config' });
    // The marker: B's relation to the granted ConfigMap was decided (stored as a conflict).
    await eventually('B\'s relation is a conflict', async () => relations('tenant-b').find((r) => r.rule === 'config' && r.state === 'conflict'), 60_000);
    const shared = await svc.configMap(SHARED, 'orders-config');
    assert.deepEqual(shared?.data, { provider: 'kept', v: 'old', extra: 'same' }, 'untouched');
    assert.equal(shared?.metadata?.annotations?.[GRANT], grant('tenant-a', '', 'configmaps', 'default', 'orders-config'), 'the grant is still A\'s');
    assert.equal(shared?.metadata?.labels?.['relsync.dev/agent'], undefined);
    const told = () => relsync.log().split('\n').filter((l) => l.includes("an object in a copy's place is not adopted"));
    await eventually('the refusal is in the log', async () => told().length > 0, 10_000);
    // A second look (B changes its ConfigMap; the marker is the relation's new content hash): still said once.
    const first = relations('tenant-b').find((r) => r.rule === 'config')!;
    await b.putConfigMap('default', 'orders-config', { v: 'from-b-2' });
    await eventually('B\'s relation looked at again', async () => relations('tenant-b').find((r) => r.rule === 'config' && r.state === 'conflict' && r.hash !== first.hash), 30_000);
    assert.equal(told().length, 1, 'said once, not at each look');
    assert.match(told()[0]!, /"reason":"its relsync.dev\/adopt annotation grants it to another agent or source"/);
    assert.doesNotMatch(told()[0]!, /"grant":/, 'no grant suggested for an object granted to someone else');
  });

  it('adopts what was granted to tenant A: the primary\'s copy and a related copy, each grant used once, fields relsync does not copy kept', async () => {
    await a.putConfigMap('default', 'orders-config', { v: 'from-a', extra: 'same' });
    await a.putConfigMap('default', 'orders-notes', { v: 'notes-a' });
    await a.createDatabase('default', 'orders', { configMapName: 'orders-config', size: 'new' });
    const copy = await eventually('the Database copy adopted', async () => {
      const db = await svc.database(copyNsA, 'orders');
      return db?.metadata?.labels?.['relsync.dev/agent'] === 'e2e' && db.spec?.size === 'new' && !db.metadata.annotations?.[GRANT] ? db : undefined;
    }, 60_000);
    assert.equal(copy.metadata?.labels?.provider, 'kept', 'a label relsync does not copy stays');
    const config = await eventually('the ConfigMap adopted', async () => {
      const cm = await svc.configMap(SHARED, 'orders-config');
      return cm?.data?.v === 'from-a' && !cm.metadata?.annotations?.[GRANT] ? cm : undefined;
    }, 30_000);
    assert.equal(config.data?.provider, 'kept', 'a key relsync does not copy stays (another manager\'s, by server-side apply)');
    // The rule without adopt: the same kind of grant, and a conflict.
    await eventually('A\'s notes relation is a conflict', async () => relations('tenant-a').find((r) => r.rule === 'notes' && r.state === 'conflict'), 30_000);
    const notes = await svc.configMap(SHARED, 'orders-notes');
    assert.deepEqual(notes?.data, { v: 'old' });
    assert.ok(notes?.metadata?.annotations?.[GRANT], 'its grant waits');
    const events = await a.events('default', 'orders');
    assert.ok(events.some((e) => e.reason === 'Adopted' && /adopted .*databases.* as this object's copy/.test(e.message ?? '')), JSON.stringify(events));
    assert.ok(events.some((e) => e.reason === 'Adopted' && /rule config: relsync adopted service:configmaps:shared\/orders-config/.test(e.message ?? '')), JSON.stringify(events));
    // Adopted, it is a copy like any other: A's change follows, and a key A drops goes, also one the
    // object had before with the same value (its previous manager's claim on it was taken over).
    await a.putConfigMap('default', 'orders-config', { v: 'from-a-2' });
    const changed = await eventually('A\'s change reaches the adopted copy', async () => {
      const cm = await svc.configMap(SHARED, 'orders-config');
      return cm?.data?.v === 'from-a-2' ? cm : undefined;
    }, 30_000);
    assert.deepEqual(changed.data, { provider: 'kept', v: 'from-a-2' });
  });

  it('adopts a tenant\'s own object on its platform that it granted to a service-side source', async () => {
    const source = grant('service', '', 'secrets', copyNsA, 'orders-credentials');
    await core['tenant-a'].createNamespacedSecret({ namespace: 'default', body: { metadata: { name: 'orders-credentials', annotations: { [GRANT]: source } }, stringData: { password: 'mine' } } });
    await svc.putSecret(copyNsA, 'orders-credentials', { password: 'from-operator' }, undefined, await svc.copyOf(copyNsA, 'orders'));
    const secret = await eventually('the tenant\'s Secret adopted', async () => {
      const s = await a.secret('default', 'orders-credentials');
      return decode(s, 'password') === 'from-operator' ? s : undefined;
    }, 30_000);
    assert.equal(secret.metadata?.annotations?.[GRANT], undefined);
    assert.equal(secret.metadata?.labels?.['relsync.dev/agent'], 'e2e');
  });

  it('leaves an object as it was, grant and all, when the API server refuses the adopting write', async () => {
    // A TLS Secret granted to a service-side Opaque one: a Secret's type cannot change, so the apply is refused.
    const source = grant('service', '', 'secrets', copyNsA, 'billing-credentials');
    await core['tenant-a'].createNamespacedSecret({ namespace: 'default', body: { metadata: { name: 'billing-credentials', annotations: { [GRANT]: source } }, type: 'kubernetes.io/tls', stringData: { 'tls.crt': 'c', 'tls.key': 'k' } } });
    await a.createDatabase('default', 'billing', {});
    const copy = await svc.copyOf(copyNsA, 'billing', 60_000);
    await svc.putSecret(copyNsA, 'billing-credentials', { password: 'p' }, undefined, copy);
    // The marker: the relation stored as failed.
    const failed = await eventually('the relation failed', async () => relations('tenant-a').find((r) => r.rule === 'credentials' && r.owner === 'billing' && r.state === 'error'), 30_000);
    assert.match(failed.message ?? '', /cannot write tenant-a:secrets:default\/billing-credentials: .*immutable/);
    const secret = await a.secret('default', 'billing-credentials');
    assert.equal(secret?.type, 'kubernetes.io/tls');
    assert.equal(decode(secret, 'tls.key'), 'k');
    assert.equal(secret?.metadata?.annotations?.[GRANT], source, 'the grant is not used up');
    assert.equal(secret?.metadata?.labels?.['relsync.dev/agent'], undefined, 'no marks: not relsync\'s');
  });

  it('deletes adopted copies with their primary, as any copy', async () => {
    await a.deleteDatabase('default', 'orders');
    await eventually('the adopted Database copy deleted', async () => (await svc.database(copyNsA, 'orders')) === undefined, 60_000);
    // Deleted; and then the name is free: tenant B's relation, a conflict until now, makes B's copy there.
    const now = await eventually('the adopted ConfigMap deleted, and B\'s copy in its place', async () => {
      const cm = await svc.configMap(SHARED, 'orders-config');
      return cm?.metadata?.annotations?.['relsync.dev/source-cluster'] === 'tenant-b' ? cm : undefined;
    }, 30_000);
    assert.deepEqual(now.data, { v: 'from-b-2' }, 'nothing of A\'s, nor of the provider\'s, in B\'s copy');
    assert.ok(await svc.configMap(SHARED, 'orders-notes'), 'the one never adopted stays');
  });
});
