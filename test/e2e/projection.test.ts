// A PublishedResource whose primary is projected, as every api-syncagent end-to-end manifest does:
// the service cluster's Database (demo.relsync.dev/v1alpha1) appears on the platform as another
// group, kind, plural and version (platform.relsync.dev/v1 Store). The copy is a Database; status
// comes back from it; related objects follow both ways; drift of the copy is repaired; deletion,
// a restart and a lost store find the copy by its own type. Adversarial: a tenant's object of the
// service cluster's type on the platform is nobody's primary.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { startClusters, type Clusters } from '../harness/clusters.js';
import { eventually, installCrd } from '../harness/kube.js';
import { startRelsync, writePublishedConfig, type RelsyncProcess } from '../harness/relsync-process.js';
import { decode, defaultCopyNamespace, isNotFound, type ClusterClient, type Database } from '../harness/tenant.js';

const STORES = { group: 'platform.relsync.dev', version: 'v1', plural: 'stores' };

const MANIFEST = `
apiVersion: syncagent.kcp.io/v1alpha1
kind: PublishedResource
metadata:
  name: publish-databases
spec:
  resource: { apiGroup: demo.relsync.dev, versions: [v1alpha1], kind: Database }
  projection:
    group: platform.relsync.dev
    kind: Store
    plural: stores
    versions: { v1alpha1: v1 }
    scope: Namespaced
    shortNames: [st]
  related:
    - identifier: config
      origin: kcp
      kind: ConfigMap
      object:
        reference:
          path: spec.configMapName
    - identifier: credentials
      origin: service
      kind: Secret
      cleanupPolicy: MatchOrigin
      object:
        template:
          template: "{{ .Object.metadata.name }}-credentials"
`;

/** A namespaced CRD with a status subresource: the platform's Store (what the projection publishes), or another type in the service cluster. */
function crd(dir: string, type: { group: string; version: string; plural: string }, kind: string): URL {
  const path = join(dir, `${type.plural}-crd.json`);
  const open = { type: 'object', 'x-kubernetes-preserve-unknown-fields': true };
  writeFileSync(path, JSON.stringify({
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${type.plural}.${type.group}` },
    spec: {
      group: type.group,
      scope: 'Namespaced',
      names: { plural: type.plural, singular: kind.toLowerCase(), kind, listKind: `${kind}List` },
      versions: [{ name: type.version, served: true, storage: true, subresources: { status: {} }, schema: { openAPIV3Schema: { type: 'object', properties: { spec: open, status: open } } } }],
    },
  }));
  return pathToFileURL(path);
}

const MIRRORS = { group: 'demo.relsync.dev', version: 'v1alpha1', plural: 'mirrors' };

const NS = 'proj';

describe('a projected primary (PublishedResource spec.projection)', () => {
  let clusters: Clusters<'tenant-a' | 'service'>;
  let a: ClusterClient;
  let svc: ClusterClient;
  let stores: CustomObjectsApi;
  let dir: string;
  let configPath: string;
  let dbPath: string;
  let svcObjects: CustomObjectsApi;
  let relsync: RelsyncProcess;
  const copyNs = defaultCopyNamespace('tenant-a', NS);

  const store = async (name: string): Promise<Database | undefined> => {
    try {
      return (await stores.getNamespacedCustomObject({ ...STORES, namespace: NS, name })) as Database;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  };
  const createStore = (name: string, spec: Record<string, unknown>) => stores.createNamespacedCustomObject({ ...STORES, namespace: NS, body: { apiVersion: `${STORES.group}/${STORES.version}`, kind: 'Store', metadata: { name }, spec } });
  const deleteStore = (name: string) => stores.deleteNamespacedCustomObject({ ...STORES, namespace: NS, name });

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'relsync-e2e-projection-'));
    clusters = await startClusters('tenant-a', 'service');
    const { 'tenant-a': pa, service: ps } = clusters.plane;
    ({ 'tenant-a': a, service: svc } = clusters.client);
    await installCrd(pa.kubeConfig, crd(dir, STORES, 'Store'));
    await installCrd(ps.kubeConfig, crd(dir, MIRRORS, 'Mirror'));
    stores = pa.kubeConfig.makeApiClient(CustomObjectsApi);
    svcObjects = ps.kubeConfig.makeApiClient(CustomObjectsApi);
    ({ configPath, dbPath } = writePublishedConfig(dir, { platform: pa.kubeconfigPath, service: ps.kubeconfigPath }, MANIFEST));
    relsync = await startRelsync(configPath, join(dir, 'relsync.log'));
    await a.ensureNamespace(NS);
  });

  after(async () => {
    await relsync?.stop();
    await clusters?.stop();
  });

  it('copies a Store as a Database, brings the Database\'s status back, and syncs related objects both ways', async () => {
    await a.putConfigMap(NS, 'orders-config', { size: 's' });
    await createStore('orders', { configMapName: 'orders-config', engine: 'postgres' });
    const copy = await svc.copyOf(copyNs, 'orders');
    assert.equal(copy.kind, 'Database');
    assert.deepEqual(copy.spec, { configMapName: 'orders-config', engine: 'postgres' });
    await eventually('the referenced ConfigMap copied', async () => (await svc.configMap(copyNs, 'orders-config'))?.data?.size === 's', 30_000);
    await svc.updateDatabase(copyNs, 'orders', (db) => void (db.status = { phase: 'Ready' }), 'status');
    await eventually('the copy\'s status on the Store', async () => (await store('orders'))?.status?.phase === 'Ready', 30_000);
    await svc.putSecret(copyNs, 'orders-credentials', { password: 'p' }, undefined, copy);
    await eventually('the operator\'s Secret copied to the platform', async () => decode(await a.secret(NS, 'orders-credentials'), 'password') === 'p', 30_000);
  });

  it('repairs drift of the Database copy (its watch is of the copy type)', async () => {
    await svc.updateDatabase(copyNs, 'orders', (db) => void (db.spec = { ...db.spec, engine: 'mysql' }));
    await eventually('the copy\'s spec set back', async () => (await svc.database(copyNs, 'orders'))?.spec?.engine === 'postgres', 30_000);
  });

  it('a Database on the platform is nobody\'s primary: only the published Store type is synced', async () => {
    await a.createDatabase(NS, 'not-published', { engine: 'x' });
    // Marker: a Store created after it, synced; the Database type on the platform is not even watched.
    await createStore('marker', { engine: 'postgres' });
    await svc.copyOf(copyNs, 'marker');
    assert.equal(await svc.database(copyNs, 'not-published'), undefined);
    const finalizers = (await a.database(NS, 'not-published'))?.metadata.finalizers ?? [];
    assert.deepEqual(finalizers, [], 'relsync put no finalizer on it');
  });

  it('deleting the Store deletes the Database copy and the related copies', async () => {
    await deleteStore('orders');
    await eventually('the Store gone (its finalizer came off)', async () => (await store('orders')) === undefined, 30_000);
    assert.equal(await svc.database(copyNs, 'orders'), undefined);
    assert.equal(await svc.configMap(copyNs, 'orders-config'), undefined);
    assert.equal(await a.secret(NS, 'orders-credentials'), undefined);
  });

  it('a Store deleted while relsync was stopped, with the store lost too: the start-up sweep finds its Database copy by its marks and deletes it', async () => {
    await createStore('lost', { engine: 'postgres' });
    await svc.copyOf(copyNs, 'lost');
    await relsync.stop();
    await stores.patchNamespacedCustomObject({ ...STORES, namespace: NS, name: 'lost', body: [{ op: 'remove', path: '/metadata/finalizers' }] });
    await deleteStore('lost');
    for (const f of [dbPath, `${dbPath}-wal`, `${dbPath}-shm`]) rmSync(f, { force: true });
    relsync = await startRelsync(configPath, join(dir, 'relsync-2.log'));
    await eventually('the orphaned Database copy deleted', async () => (await svc.database(copyNs, 'lost')) === undefined, 60_000);
    assert.ok(await svc.database(copyNs, 'marker'), 'the copy of a live Store stays');
  });

  it('a copy type changed in the config (another spec.resource) moves each copy: the old one is found through discovery and deleted', async () => {
    await relsync.stop();
    writeFileSync(join(dir, 'published.yaml'), MANIFEST.replace('kind: Database }', 'kind: Mirror }'));
    relsync = await startRelsync(configPath, join(dir, 'relsync-3.log'));
    const mirror = async () => {
      try {
        return (await svcObjects.getNamespacedCustomObject({ ...MIRRORS, namespace: copyNs, name: 'marker' })) as Database;
      } catch (err) {
        if (isNotFound(err)) return undefined;
        throw err;
      }
    };
    await eventually('the copy of the new type', mirror, 60_000);
    await eventually('the copy of the old type deleted', async () => (await svc.database(copyNs, 'marker')) === undefined, 60_000);
    assert.equal((await mirror())?.spec?.engine, 'postgres');
  });
});
