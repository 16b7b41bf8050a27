// The reconciler's decision table: for each combination of source, copy,
// marks and store, what it writes, deletes or leaves alone — checked call by
// call on in-memory clusters (test/harness/memory-clusters.ts) with a real
// SQLite store. The rule under every row: an object without relsync's marks
// naming the source is never written or deleted, and a reconcile with nothing
// to do writes nothing. A related rule of another type (ConfigMap ↔ Secret)
// writes the converted content, and its copy's events are told from drift.
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import pino from 'pino';
import type { ObjectIdentity } from '../../../src/core/identity.js';
import type { KubeObject } from '../../../src/core/object.js';
import type { ResourceType } from '../../../src/core/resource-type.js';
import { done, type Result } from '../../../src/core/result.js';
import type { ResolvedRule } from '../../../src/rules/rule.js';
import { Template } from '../../../src/rules/template.js';
import { openStore, type OpenedStore } from '../../../src/store/database.js';
import { RelationStore } from '../../../src/store/relation-store.js';
import { ContentHasher } from '../../../src/sync/content-hasher.js';
import { CopyNamespaces } from '../../../src/sync/copy-namespaces.js';
import { EventRecorder } from '../../../src/sync/event-recorder.js';
import { OwnWrites } from '../../../src/cache/own-writes.js';
import { verdictCondition } from '../../../src/sync/sync-verdict.js';
import { CachedReads, ObjectCache } from '../../../src/cache/object-cache.js';
import { ClaimKnowledge } from '../../../src/sync/claim-knowledge.js';
import { LiveReads, ReadSession, type ObjectReads } from '../../../src/cache/object-reads.js';
import { isConflict } from '../../../src/kube/api-error.js';
import { CREATE_ONLY } from '../../../src/kube/resource-client.js';
import { EventRouter } from '../../../src/controller/event-router.js';
import { mergeKeys, retryKey, type PrimaryKey } from '../../../src/controller/primary-key.js';
import { PrimaryReconciler, type ReconcileHints, type ReconcilerDeps } from '../../../src/sync/primary-reconciler.js';
import type { ResolvedResource } from '../../../src/sync/resolved-config.js';
import type { SyncMetrics } from '../../../src/sync/sync-metrics.js';
import { MemoryClusters } from '../../harness/memory-clusters.js';
import { ConfigFingerprint } from '../../../src/sync/config-fingerprint.js';
import { defaultCopyPolicy } from '../../../src/config/copy-policy.js';
import { objectVersion } from '../../../src/core/object-version.js';

const AGENT = 'unit';
const databases: ResourceType = { group: 'demo.relsync.dev', version: 'v1alpha1', resource: 'databases', kind: 'Database', namespaced: true };
const configMaps: ResourceType = { group: '', version: 'v1', resource: 'configmaps', kind: 'ConfigMap', namespaced: true };
const secrets: ResourceType = { group: '', version: 'v1', resource: 'secrets', kind: 'Secret', namespaced: true };
const namespaces: ResourceType = { group: '', version: 'v1', resource: 'namespaces', kind: 'Namespace', namespaced: false };

const template = (id: string, type: ResourceType, name: string): ResolvedRule => ({
  id, origin: 'platform', source: type, destination: type, finder: { kind: 'template', name: Template.parse(name, ['name']), destinationName: undefined },
  sourceNamespace: undefined, destinationNamespace: undefined, provenance: undefined, cleanup: 'MatchOrigin', where: `resources[0].related.${id}`, sourceType: type, destinationType: type,
});
const resource: ResolvedResource = {
  type: databases, selector: undefined, where: 'resources[0]', primaryType: databases, copyType: databases,
  naming: { namespace: Template.parse('{{ cluster }}-{{ namespace }}', ['cluster', 'namespace']), name: Template.parse('{{ name }}', ['name']) },
  related: [],
  rules: [template('config', configMaps, '{{ name }}-config'), template('creds', secrets, '{{ name }}-creds')],
};

const primaryId: ObjectIdentity = { cluster: 'tenant-a', group: databases.group, resource: databases.resource, namespace: 'shop', name: 'orders' };
const COPY_NS = 'tenant-a-shop';
const marksOf = (source: ObjectIdentity, uid: string): Record<string, string> => ({
  'relsync.dev/source-cluster': source.cluster, 'relsync.dev/source-group': source.group, 'relsync.dev/source-resource': source.resource,
  'relsync.dev/source-namespace': source.namespace, 'relsync.dev/source-name': source.name, 'relsync.dev/source-uid': uid,
});
const configId: ObjectIdentity = { cluster: 'tenant-a', group: '', resource: 'configmaps', namespace: 'shop', name: 'orders-config' };

const counter = () => ({ inc: () => undefined });
const metrics: SyncMetrics = { copiesWritten: counter(), copiesRemoved: counter(), copiesReleased: counter(), conflicts: counter(), unprovenSources: counter(), edgeSyncs: counter() };
/** What the last run wrote and deleted, as its Result counted it (outcome()). */
let lastCopies: Result['copies'];
/** A run's decision (what the queue does next), its counts kept aside in lastCopies. */
const outcome = (result: Result): Result => {
  const { copies, ...decision } = result;
  lastCopies = copies;
  return decision;
};

describe('primary reconciler decisions (in-memory clusters, real SQLite store)', () => {
  let opened: OpenedStore;
  let store: RelationStore;
  let world: MemoryClusters;
  let reconciler: PrimaryReconciler;
  let recorder: EventRecorder;
  /** One run of the primary's key; `hints`: what the queue's key carries (a retry's, controller/primary-key.ts). */
  const reconcile = async (hints?: ReconcileHints) => {
    world.clearCalls();
    const result = outcome(await reconciler.reconcile(resource, primaryId, hints));
    // Events are written in the background (event-recorder.ts).
    await recorder.idle();
    return result;
  };
  const verdictOnPrimary = () => {
    const c = verdictCondition(world.read('tenant-a', databases, 'shop', 'orders')?.status);
    return c && { status: c.status, reason: c.reason };
  };
  const service = (type: ResourceType, name: string) => world.read('service', type, type.namespaced ? COPY_NS : '', name);
  const putPrimary = (spec: Record<string, unknown> = { size: 1 }) => world.put('tenant-a', databases, { apiVersion: 'demo.relsync.dev/v1alpha1', kind: 'Database', metadata: { namespace: 'shop', name: 'orders', generation: 1 }, spec });
  const putConfig = (data: Record<string, string>) => world.put('tenant-a', configMaps, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { namespace: 'shop', name: 'orders-config' }, data });
  /** Someone else creates an object of `type` in the service cluster right after relsync read its name as free. */
  const raceOnCreate = (type: ResourceType, object: () => KubeObject) => {
    const original = world.client.bind(world);
    world.client = (cluster, t) => {
      const c = original(cluster, t);
      if (cluster === 'service' && t.resource === type.resource) {
        const apply = c.apply.bind(c);
        c.apply = async (body, manager) => {
          if (body.metadata.resourceVersion === CREATE_ONLY) world.put('service', type, object());
          return apply(body, manager);
        };
      }
      return c;
    };
  };

  /** A reconciler over the in-memory clusters and the store, with `extra` deps. */
  /** Reconciles that read `first` (the watches' cache), and the API servers after a 409 or to confirm a deletion. */
  const readingFirst = (first: ObjectReads): Partial<ReconcilerDeps> => ({
    sessionFor: (_id, afterConflict) => {
      const live = new LiveReads(world);
      return new ReadSession(afterConflict ? live : first, live);
    },
  });
  const reconcilerWith = (extra: Partial<ReconcilerDeps> = {}) => {
    const logger = pino({ level: 'silent' });
    return new PrimaryReconciler({
      agentName: AGENT, clusters: world, store, logger, metrics,
      recorder: (recorder = new EventRecorder({ clusters: world, agentName: AGENT, logger })),
      hasher: new ContentHasher(Buffer.from('k')),
      copyNamespaces: new CopyNamespaces({ agentName: AGENT, clusters: world, logger, installation: undefined }),
      conflictRetryMs: 30_000,
      ...extra,
    });
  };

  beforeEach(async () => {
    opened = await openStore(join(mkdtempSync(join(tmpdir(), 'relsync-reconciler-')), 'store.db'));
    store = new RelationStore(opened);
    world = new MemoryClusters('service', ['tenant-a']);
    world.put('tenant-a', namespaces, { metadata: { name: 'shop' } });
    reconciler = reconcilerWith();
  });
  afterEach(async () => {
    await opened.close();
  });

  describe('the versions a complete sync stores, for a sweep to compare (controller/sweep-skip.ts)', () => {
    const withFingerprint = () => {
      const hasher = new ContentHasher(Buffer.from('k'));
      reconciler = reconcilerWith({ hasher, fingerprint: new ConfigFingerprint(hasher, { agentName: AGENT, policy: defaultCopyPolicy, limits: {} }) });
    };
    const versionOf = (cluster: string, type: ResourceType, namespace: string, name: string) => {
      const o = world.read(cluster, type, namespace, name);
      return o ? objectVersion(o) : '';
    };

    it('stores what a complete sync read and wrote last: the primary, its copy, each source and copy ("" for absent)', async () => {
      withFingerprint();
      putPrimary();
      putConfig({ a: '1' });
      await reconcile();
      const record = await store.primary(primaryId);
      assert.equal(record?.state, 'synced');
      assert.deepEqual({ primary: record?.versions?.primary, copy: record?.versions?.copy }, { primary: versionOf('tenant-a', databases, 'shop', 'orders'), copy: versionOf('service', databases, COPY_NS, 'orders') });
      const byRule = new Map((await store.relationsOf(primaryId)).map((r) => [r.ruleId, r.versions]));
      assert.deepEqual(byRule.get('config'), { source: versionOf('tenant-a', configMaps, 'shop', 'orders-config'), destination: versionOf('service', configMaps, COPY_NS, 'orders-config') });
      assert.deepEqual(byRule.get('creds'), { source: '', destination: '' }, 'waiting for its source: both absent');
    });

    it('stores none after a conflict, a failed write, or without a fingerprint', async () => {
      withFingerprint();
      putPrimary();
      putConfig({ a: '1' });
      await reconcile();
      assert.notEqual((await store.primary(primaryId))?.versions, null, 'synced');
      // Someone else's object takes the copy's place.
      world.remove('service', configMaps, COPY_NS, 'orders-config');
      world.put('service', configMaps, { metadata: { namespace: COPY_NS, name: 'orders-config' }, data: { theirs: 'x' } });
      await reconcile();
      assert.equal((await store.primary(primaryId))?.state, 'conflict');
      assert.equal((await store.primary(primaryId))?.versions, null, 'a conflict');

      world.remove('service', configMaps, COPY_NS, 'orders-config');
      await reconcile();
      assert.notEqual((await store.primary(primaryId))?.versions, null, 'synced again');
      world.edit('tenant-a', configMaps, 'shop', 'orders-config', (o) => void (o.data = { a: '2' }));
      world.fail({ verb: 'apply', cluster: 'service', resource: 'configmaps', status: 500, reason: 'InternalError', message: 'etcd is away' });
      await assert.rejects(reconcile());
      assert.equal((await store.primary(primaryId))?.versions, null, 'a write that failed: the next sweep reconciles it');

      reconciler = reconcilerWith();
      await reconcile();
      assert.equal((await store.primary(primaryId))?.state, 'synced');
      assert.equal((await store.primary(primaryId))?.versions, null, 'without a fingerprint nothing is stored');
    });
  });

  describe('the primary and its copy', () => {
    it('a Normal Synced Event marks the first sync only: not again, not from a replica with a new store, and still after a first verdict write that failed', async () => {
      putPrimary();
      await reconcile();
      assert.deepEqual(world.eventReasons(), ['Synced']);
      await reconcile();
      world.edit('tenant-a', databases, 'shop', 'orders', (o) => void (o.spec = { size: 2 }));
      await reconcile();
      assert.deepEqual(world.eventReasons(), ['Synced'], 'not for later syncs');

      // Another replica, whose store is new (a failover to a standby with an emptyDir store): the primary shows it synced.
      const other = await openStore(join(mkdtempSync(join(tmpdir(), 'relsync-reconciler-')), 'store.db'));
      try {
        reconciler = reconcilerWith({ store: new RelationStore(other) });
        await reconcile();
        assert.deepEqual(world.eventReasons(), ['Synced'], 'the primary already showed it');
      } finally {
        await other.close();
      }
    });

    it('a first sync whose verdict write met a 409 announces itself at the retry', async () => {
      putPrimary();
      world.fail({ verb: 'patchStatus', cluster: 'tenant-a', resource: 'databases', status: 409, reason: 'Conflict', message: 'the object has been modified', times: 1 });
      await assert.rejects(reconcile(), /409/);
      assert.equal((await store.primary(primaryId))?.state, 'synced', 'the reconcile\'s outcome was stored before the 409 went up');
      assert.deepEqual(world.eventReasons(), []);
      await reconcile();
      assert.deepEqual(world.eventReasons(), ['Synced']);
    });

    it('a new primary: finalizer on, copy namespace and copy created with marks; the next reconcile writes nothing', async () => {
      putPrimary();
      assert.deepEqual(await reconcile(), done);
      assert.deepEqual(world.writes(), [
        'mergePatch tenant-a/databases/shop/orders',
        `create service/namespaces//${COPY_NS}`,
        `apply service/databases/${COPY_NS}/orders`,
        'patchStatus tenant-a/databases/shop/orders',
      ]);
      assert.deepEqual(world.read('tenant-a', databases, 'shop', 'orders')?.metadata.finalizers, [`relsync.dev/${AGENT}`]);
      assert.deepEqual(verdictOnPrimary(), { status: 'True', reason: 'Synced' }, 'the verdict, last');
      const copy = service(databases, 'orders');
      assert.deepEqual(copy?.spec, { size: 1 });
      assert.equal(copy?.metadata.labels?.['relsync.dev/agent'], AGENT);
      assert.equal(copy?.metadata.annotations?.['relsync.dev/source-name'], 'orders');
      assert.equal((await store.primary(primaryId))?.state, 'synced');
      assert.deepEqual(lastCopies, { written: 1, removed: 0 }, 'the run counts the copy it wrote (a sweep sums these)');

      assert.deepEqual(await reconcile(), done);
      assert.deepEqual(world.writes(), [], 'nothing changed: nothing written');
      assert.equal(lastCopies, undefined, 'and counts nothing');
    });

    it('a changed primary updates its copy, keeping top-level fields the operator set on the copy', async () => {
      putPrimary();
      await reconcile();
      world.edit('service', databases, COPY_NS, 'orders', (o) => void (o.operatorNote = 'kept'));
      world.edit('tenant-a', databases, 'shop', 'orders', (o) => void (o.spec = { size: 2 }));
      await reconcile();
      assert.deepEqual(world.writes(), [`apply service/databases/${COPY_NS}/orders`]);
      const copy = service(databases, 'orders');
      assert.deepEqual(copy?.spec, { size: 2 });
      assert.equal(copy?.operatorNote, 'kept');
    });

    it('copies are applied: a nested field the operator set stays, a field or label the primary drops goes, a field of relsync\'s someone changed is set back', async () => {
      putPrimary({ size: 1, tuning: { cache: 'on', pool: 5 } });
      world.edit('tenant-a', databases, 'shop', 'orders', (o) => void (o.metadata.labels = { team: 'a', tier: 'gold' }));
      await reconcile();
      world.edit('service', databases, COPY_NS, 'orders', (o) => {
        (o.spec as { tuning: Record<string, unknown> }).tuning.operatorDefault = 'x';
        o.metadata.labels = { ...o.metadata.labels, 'operator.example/seen': 'yes' };
      });
      world.edit('tenant-a', databases, 'shop', 'orders', (o) => {
        o.spec = { size: 1, tuning: { cache: 'on' } };
        o.metadata.labels = { team: 'a' };
      });
      await reconcile();
      assert.deepEqual(world.writes(), [`apply service/databases/${COPY_NS}/orders`]);
      let copy = service(databases, 'orders')!;
      assert.deepEqual(copy.spec, { size: 1, tuning: { cache: 'on', operatorDefault: 'x' } }, 'pool (dropped by the primary) went; the operator\'s nested field stayed');
      assert.equal(copy.metadata.labels?.tier, undefined, 'a label the primary dropped goes');
      assert.equal(copy.metadata.labels?.['operator.example/seen'], 'yes', 'a label the operator added stays');

      world.edit('service', databases, COPY_NS, 'orders', (o) => void ((o.spec as { size: number }).size = 99));
      await reconcile();
      copy = service(databases, 'orders')!;
      assert.deepEqual(copy.spec, { size: 1, tuning: { cache: 'on', operatorDefault: 'x' } }, 'drift of relsync\'s field repaired, the operator\'s kept');
      await reconcile();
      assert.deepEqual(world.writes(), [], 'and then nothing to do');
    });

    it('a copy written before relsync applied its copies (it carries the old record of copied keys) is upgraded and applied once', async () => {
      putPrimary({ size: 1 });
      world.put('service', namespaces, { metadata: { name: COPY_NS, labels: { 'relsync.dev/agent': AGENT } } });
      world.put('service', databases, {
        metadata: {
          namespace: COPY_NS, name: 'orders', labels: { 'relsync.dev/agent': AGENT }, annotations: { ...marksOf(primaryId, 'unused'), 'relsync.dev/copied-labels': '', 'relsync.dev/copied-annotations': '' },
          // As the API server recorded relsync's writes without a field manager.
          managedFields: [{ manager: 'unknown', operation: 'Update', apiVersion: 'demo.relsync.dev/v1alpha1', fieldsType: 'FieldsV1', fieldsV1: { 'f:spec': { '.': {}, 'f:size': {} } } }],
        },
        spec: { size: 1 },
      });
      world.edit('service', databases, COPY_NS, 'orders', (o) => void delete o.metadata.annotations!['relsync.dev/source-uid']);
      await reconcile();
      assert.deepEqual(world.calls.filter((c) => c.cluster === 'service' && c.resource === 'databases').map((c) => c.verb), ['get', 'get', 'jsonPatch', 'apply'], 'read (as the copy), read live for its field ownership, the ownership handed to relsync\'s apply entry, applied');
      assert.deepEqual((service(databases, 'orders')!.metadata.managedFields as Array<{ manager: string; operation: string }>).map((e) => `${e.manager} ${e.operation}`), [`relsync-${AGENT} Apply`]);
      const copy = service(databases, 'orders')!;
      assert.equal(copy.metadata.annotations?.['relsync.dev/copied-labels'], undefined);
      assert.ok(copy.metadata.annotations?.['relsync.dev/applied-hash']);
      await reconcile();
      assert.deepEqual(world.writes(), []);
    });

    it('status flows back from the copy, through the status subresource only', async () => {
      putPrimary();
      await reconcile();
      world.edit('service', databases, COPY_NS, 'orders', (o) => void (o.status = { phase: 'Ready' }));
      await reconcile();
      assert.deepEqual(world.writes(), ['replaceStatus tenant-a/databases/shop/orders']);
      assert.equal((world.read('tenant-a', databases, 'shop', 'orders')?.status as { phase?: string } | undefined)?.phase, 'Ready');
      assert.deepEqual(verdictOnPrimary(), { status: 'True', reason: 'Synced' }, 'relsync\'s condition carried over the copied status, in the same write');
    });

    for (const [what, labels, annotations] of [
      ['without marks', {}, {}],
      ["with another agent's marks", { 'relsync.dev/agent': 'other' }, marksOf(primaryId, 'x')],
      ["with this agent's marks naming another source", { 'relsync.dev/agent': AGENT }, marksOf({ ...primaryId, name: 'invoices' }, 'x')],
      ["with this agent's marks naming the same name in another cluster", { 'relsync.dev/agent': AGENT }, marksOf({ ...primaryId, cluster: 'tenant-b' }, 'x')],
    ] as const) {
      it(`an object ${what} where the copy goes is a conflict: never written, retried in 30 s`, async () => {
        putPrimary();
        await reconcile();
        // The copy namespace is relsync's; the object at the copy's name is not (its copy went, someone put this there).
        world.remove('service', databases, COPY_NS, 'orders');
        world.put('service', databases, { metadata: { namespace: COPY_NS, name: 'orders', labels: { ...labels }, annotations: { ...annotations } }, spec: { theirs: true } });
        const before = service(databases, 'orders');
        world.edit('tenant-a', databases, 'shop', 'orders', (o) => void (o.spec = { size: 2 }));
        assert.deepEqual(await reconcile(), { requeueAfterMs: 30_000, relationsUnknown: true });
        assert.deepEqual(world.writes(), ['patchStatus tenant-a/databases/shop/orders'], 'only the verdict on the primary');
        assert.deepEqual(verdictOnPrimary(), { status: 'False', reason: 'CopyConflict' });
        assert.deepEqual(service(databases, 'orders'), before);
        assert.equal((await store.primary(primaryId))?.state, 'conflict');
        assert.ok(world.eventReasons().includes('CopyConflict'));
      });
    }

    for (const [what, labels, annotations] of [
      ['that relsync did not make', {}, {}],
      ['that serves another source', { 'relsync.dev/agent': AGENT }, { 'relsync.dev/serves-cluster': 'tenant-b', 'relsync.dev/serves-namespace': 'shop' }],
    ] as const) {
      it(`a copy namespace ${what} takes nothing: a conflict`, async () => {
        world.put('service', namespaces, { metadata: { name: COPY_NS, labels: { ...labels }, annotations: { ...annotations } } });
        putPrimary();
        assert.deepEqual(await reconcile(), { requeueAfterMs: 30_000, relationsUnknown: true });
        assert.deepEqual(world.writes(), ['mergePatch tenant-a/databases/shop/orders', 'patchStatus tenant-a/databases/shop/orders'], 'only the finalizer and the verdict');
        assert.deepEqual(verdictOnPrimary(), { status: 'False', reason: 'CopyConflict' });
        assert.equal((await store.primary(primaryId))?.state, 'conflict');
      });
    }

    it("an object without marks created where the copy goes, between relsync's read and its create: a conflict at once, untouched", async () => {
      putPrimary();
      await reconcile();
      world.remove('service', databases, COPY_NS, 'orders');
      raceOnCreate(databases, () => ({ metadata: { namespace: COPY_NS, name: 'orders' }, spec: { theirs: true } }));
      world.edit('tenant-a', databases, 'shop', 'orders', (o) => void (o.spec = { size: 2 }));
      assert.deepEqual(await reconcile(), { requeueAfterMs: 30_000, relationsUnknown: true });
      assert.deepEqual(world.writes().filter((w) => w.includes('service/databases')), [`apply service/databases/${COPY_NS}/orders`], 'the refused create only');
      assert.deepEqual(service(databases, 'orders')?.spec, { theirs: true });
      assert.equal((await store.primary(primaryId))?.state, 'conflict');
      assert.ok(world.eventReasons().includes('CopyConflict'));
    });

    it("this primary's own copy created meanwhile (another replica): brought up to date, synced", async () => {
      putPrimary({ size: 2 });
      const uid = world.read('tenant-a', databases, 'shop', 'orders')!.metadata.uid!;
      await reconcile();
      world.remove('service', databases, COPY_NS, 'orders');
      raceOnCreate(databases, () => ({ metadata: { namespace: COPY_NS, name: 'orders', labels: { 'relsync.dev/agent': AGENT }, annotations: marksOf(primaryId, uid) }, spec: { size: 1 } }));
      assert.deepEqual(await reconcile(), done);
      assert.deepEqual(world.writes().filter((w) => w.includes('service/databases')), [`apply service/databases/${COPY_NS}/orders`, `apply service/databases/${COPY_NS}/orders`]);
      assert.deepEqual(service(databases, 'orders')?.spec, { size: 2 });
      assert.equal((await store.primary(primaryId))?.state, 'synced');
    });

    it("remembers each of its writes' versions (its own watch events), reports each deleted copy, counts writes", async () => {
      const ownWrites = new OwnWrites();
      const deleted: string[] = [];
      const counts: string[] = [];
      const counting = (name: string) => ({ inc: (labels: Record<string, string | undefined>) => void counts.push(`${name} ${Object.values(labels).join(' ')}`) });
      reconciler = reconcilerWith({
        ownWrites, onDeleted: (c) => deleted.push(`${c.resource}/${c.name}`),
        metrics: { copiesWritten: counting('written'), copiesRemoved: counting('removed'), copiesReleased: counting('released'), conflicts: counting('conflict'), unprovenSources: counting('unproven'), edgeSyncs: counting('edge') },
      });
      putPrimary();
      putConfig({ a: '1' });
      await reconcile();
      const own = (cluster: string, type: ResourceType, ns: string, name: string) =>
        ownWrites.consume({ cluster, group: type.group, resource: type.resource, namespace: ns, name }, world.read(cluster, type, ns, name)!.metadata.resourceVersion);
      assert.ok(await own('service', databases, COPY_NS, 'orders'), "the copy's create");
      assert.ok(await own('service', configMaps, COPY_NS, 'orders-config'), "the related copy's create");
      assert.ok(await own('tenant-a', databases, 'shop', 'orders'), 'the finalizer on the primary');
      assert.deepEqual(counts.sort(), ['written primary create', 'written related create']);
      world.remove('tenant-a', configMaps, 'shop', 'orders-config');
      world.remove('tenant-a', databases, 'shop', 'orders');
      await reconcile();
      assert.deepEqual(deleted.sort(), ['configmaps/orders-config', 'databases/orders']);
      assert.deepEqual(counts.filter((c) => c.startsWith('removed')).sort(), ['removed primary', 'removed related']);
    });

    it("a finalizer write that also changed the spec (a webhook's: the generation moved) is not taken as relsync's own write", async () => {
      const ownWrites = new OwnWrites();
      reconciler = reconcilerWith({ ownWrites });
      putPrimary();
      world.edit('tenant-a', databases, 'shop', 'orders', (o) => void (o.metadata.generation = 1));
      world.webhook = (cluster, o) => {
        if (cluster === 'tenant-a' && o.metadata.name === 'orders' && o.spec !== undefined) Object.assign(o, { spec: { ...o.spec, size: 99 }, metadata: { ...o.metadata, generation: 2 } });
      };
      // The version the finalizer's patch stored, read at the call after it.
      let patched = false;
      let finalizerVersion: string | undefined;
      world.onCall = (call) => {
        if (patched && finalizerVersion === undefined) finalizerVersion = world.read('tenant-a', databases, 'shop', 'orders')?.metadata.resourceVersion;
        patched ||= call.verb === 'mergePatch' && call.cluster === 'tenant-a';
      };
      try {
        await reconcile();
      } finally {
        world.webhook = undefined;
        world.onCall = undefined;
      }
      assert.equal((world.read('tenant-a', databases, 'shop', 'orders')?.spec as { size?: number } | undefined)?.size, 99);
      assert.ok(finalizerVersion !== undefined, 'the finalizer went on by a patch');
      const id = { cluster: 'tenant-a', group: databases.group, resource: databases.resource, namespace: 'shop', name: 'orders' };
      assert.equal(await ownWrites.consume(id, finalizerVersion), false, "the webhook's version is routed: the next reconcile syncs size 99");
    });

    it('a primary of a type without generations gets the finalizer by a PUT, whose answer shows what else changed', async () => {
      world.put('tenant-a', databases, { apiVersion: 'demo.relsync.dev/v1alpha1', kind: 'Database', metadata: { namespace: 'shop', name: 'orders' }, spec: { size: 1 } });
      await reconcile();
      assert.equal(world.writes()[0], 'replace tenant-a/databases/shop/orders');
      assert.deepEqual(world.read('tenant-a', databases, 'shop', 'orders')?.metadata.finalizers, [`relsync.dev/${AGENT}`]);
    });

    it('a primary deleted: its copy goes, then the store forgets it', async () => {
      putPrimary();
      await reconcile();
      world.remove('tenant-a', databases, 'shop', 'orders');
      assert.deepEqual(await reconcile(), done);
      assert.deepEqual(world.writes(), [`delete service/databases/${COPY_NS}/orders`]);
      assert.equal(service(databases, 'orders'), undefined);
      assert.equal(await store.primary(primaryId), undefined);
    });

    it("a copy the operator holds with its own finalizer: the primary waits (state deleting) until the copy is really gone", async () => {
      putPrimary();
      await reconcile();
      world.edit('service', databases, COPY_NS, 'orders', (o) => void (o.metadata.finalizers = ['operator.example/cleanup']));
      world.edit('tenant-a', databases, 'shop', 'orders', (o) => void (o.metadata.deletionTimestamp = new Date(0).toISOString()));
      assert.deepEqual(await reconcile(), { requeueAfterMs: 1000 });
      assert.deepEqual(lastCopies, { written: 0, removed: 1 }, 'the run counts the deletion it sent');
      assert.equal((await store.primary(primaryId))?.state, 'deleting');
      assert.ok(world.read('tenant-a', databases, 'shop', 'orders')?.metadata.finalizers?.includes(`relsync.dev/${AGENT}`), 'the finalizer stays while the copy exists');
      assert.deepEqual(await reconcile(), { requeueAfterMs: 1000 });
      assert.deepEqual(world.writes(), [], 'the copy is deleted once, not again on every look');
      assert.equal(lastCopies, undefined);

      world.edit('service', databases, COPY_NS, 'orders', (o) => void (o.metadata.finalizers = []));
      world.remove('service', databases, COPY_NS, 'orders');
      assert.deepEqual(await reconcile(), done);
      assert.deepEqual(world.writes(), ['mergePatch tenant-a/databases/shop/orders'], 'only the finalizer goes (a patch of the finalizers: the content is not sent)');
      assert.equal(world.read('tenant-a', databases, 'shop', 'orders'), undefined, 'the primary is gone with its finalizer');
      assert.equal(await store.primary(primaryId), undefined);
    });

    it("a copy whose marks name another incarnation's uid is left in place when this one goes", async () => {
      putPrimary();
      await reconcile();
      world.edit('service', databases, COPY_NS, 'orders', (o) => void (o.metadata.annotations!['relsync.dev/source-uid'] = 'someone-elses-incarnation'));
      world.remove('tenant-a', databases, 'shop', 'orders');
      assert.deepEqual(await reconcile(), done);
      assert.deepEqual(world.writes(), []);
      assert.ok(service(databases, 'orders'));
    });

    it("a primary deleted and recreated while nobody looked: the old incarnation's copy goes first, then the new one is copied", async () => {
      putPrimary({ size: 1 });
      await reconcile();
      world.remove('tenant-a', databases, 'shop', 'orders');
      putPrimary({ size: 9 });
      await reconcile();
      assert.deepEqual(world.writes().filter((w) => w.includes('service/databases')), [`delete service/databases/${COPY_NS}/orders`, `apply service/databases/${COPY_NS}/orders`]);
      assert.deepEqual(service(databases, 'orders')?.spec, { size: 9 });
      assert.equal(service(databases, 'orders')?.metadata.annotations?.['relsync.dev/source-uid'], world.read('tenant-a', databases, 'shop', 'orders')?.metadata.uid);
    });

    // Reads behind the API servers: the watches' cache (a watch resumed from an old version replays
    // its history), or a sweep's LIST of the primaries taken before the delete-and-recreate (not
    // "cached": what changed since its LIST is read live only once its watch event has come).
    for (const [kind, primaryToo] of [['the watches\' cache', true], ["a sweep's LIST", true], ['the watches\' cache', false]] as const) {
      it(`stale reads (${kind}) of an old incarnation of ${primaryToo ? 'the primary and a related object' : 'a related object'} do not take the copies another replica made of the new one for their own`, async () => {
        const cache = new ObjectCache(16 * 1024 * 1024);
        const cached = new CachedReads(cache, new LiveReads(world));
        const first: ObjectReads = kind === "a sweep's LIST" ? { get: (...a) => cached.get(...a), list: (c, t, q) => cached.list(c, t, q) } : cached;
        reconciler = reconcilerWith(readingFirst(first));
        const deliver = (cluster: string, type: ResourceType, namespace: string, name: string) =>
          cache.observe({ cluster, group: type.group, resource: type.resource, namespace, name }, world.read(cluster, type, namespace, name));
        putPrimary({ size: 1 });
        putConfig({ a: 'old' });
        await reconcile();
        // This replica's reads hold the first incarnations (its store records them) ...
        deliver('tenant-a', databases, 'shop', 'orders');
        deliver('tenant-a', configMaps, 'shop', 'orders-config');
        // ... while the primary and its ConfigMap are deleted and made again, and another replica
        // (a store of its own) syncs the new ones: their copies name the new uids.
        if (primaryToo) world.remove('tenant-a', databases, 'shop', 'orders');
        world.remove('tenant-a', configMaps, 'shop', 'orders-config');
        if (primaryToo) putPrimary({ size: 9 });
        putConfig({ a: 'rotated' });
        const uids = { primary: world.read('tenant-a', databases, 'shop', 'orders')!.metadata.uid!, config: world.read('tenant-a', configMaps, 'shop', 'orders-config')!.metadata.uid! };
        if (primaryToo) {
          world.edit('service', databases, COPY_NS, 'orders', (o) => {
            o.metadata.annotations!['relsync.dev/source-uid'] = uids.primary;
            o.spec = { size: 9 };
          });
        }
        world.edit('service', configMaps, COPY_NS, 'orders-config', (o) => {
          o.metadata.annotations!['relsync.dev/source-uid'] = uids.config;
          o.data = { a: 'rotated' };
        });
        deliver('service', databases, COPY_NS, 'orders');
        deliver('service', configMaps, COPY_NS, 'orders-config');
        const copyUids = { primary: service(databases, 'orders')!.metadata.uid, config: service(configMaps, 'orders-config')!.metadata.uid };
        // Every write that reaches the service cluster, with the source uid its marks name.
        const applied: string[] = [];
        const original = world.client.bind(world);
        world.client = (cluster, t) => {
          const c = original(cluster, t);
          if (cluster !== 'service') return c;
          const apply = c.apply.bind(c);
          c.apply = async (body, manager) => {
            applied.push(`${t.resource} ${body.metadata.annotations?.['relsync.dev/source-uid'] ?? '-'}`);
            return apply(body, manager);
          };
          return c;
        };
        // One reconcile: it starts over reading live where the copies name other incarnations.
        await reconcile();
        assert.deepEqual(applied.filter((w) => !w.endsWith(uids.primary) && !w.endsWith(uids.config)), [], 'no write names an old incarnation');
        assert.ok(!world.writes().some((w) => w.startsWith('delete service/')), world.writes().join('\n'));
        assert.deepEqual({ primary: service(databases, 'orders')?.metadata.uid, config: service(configMaps, 'orders-config')?.metadata.uid }, copyUids, "the new incarnations' copies are the same objects");
        assert.equal(service(databases, 'orders')?.metadata.annotations?.['relsync.dev/source-uid'], uids.primary);
        assert.deepEqual(service(configMaps, 'orders-config')?.data, { a: 'rotated' }, 'the rotated content stays');
        assert.equal((await store.primary(primaryId))?.uid, uids.primary, 'the store now records the new incarnation');
        // Once the reads caught up, nothing more is done to them.
        for (const [cluster, type, ns, name] of [['tenant-a', databases, 'shop', 'orders'], ['tenant-a', configMaps, 'shop', 'orders-config'], ['service', databases, COPY_NS, 'orders'], ['service', configMaps, COPY_NS, 'orders-config']] as const) deliver(cluster, type, ns, name);
        applied.length = 0;
        await reconcile();
        assert.deepEqual(applied, []);
      });
    }

    it('a workspace that unbound the export: the copies go without reading the primary', async () => {
      putPrimary();
      putConfig({ a: '1' });
      await reconcile();
      world.unbound.add('tenant-a');
      assert.deepEqual(await reconcile(), done);
      assert.ok(!world.calls.some((c) => c.cluster === 'tenant-a' && c.verb === 'get'), 'nothing read from the unbound workspace');
      assert.deepEqual(world.writes().sort(), [`delete service/configmaps/${COPY_NS}/orders-config`, `delete service/databases/${COPY_NS}/orders`]);
    });

    it('a workspace that unbound while its claims were not known is not forgotten while a related copy it left waits', async () => {
      // A fresh process: the store's claims are not known yet (no sweep has completed the workspace).
      const claims = new ClaimKnowledge(false);
      reconciler = reconcilerWith({ claims });
      putPrimary();
      putConfig({ a: '1' });
      await reconcile();
      world.unbound.add('tenant-a');
      await reconcile();
      assert.ok(service(configMaps, 'orders-config'), 'the related copy is left in place: its last known claim ended while claims were not known');
      assert.equal(claims.hasDeferred('tenant-a'), true);
      assert.equal(world.has('tenant-a'), true, 'the workspace is still known, so that its copy can be told for its own when the unbind decides it');
    });
  });

  describe('related objects', () => {
    const relation = async (ruleId: string) => (await store.relationsOf(primaryId)).find((r) => r.ruleId === ruleId);

    it('a new source is copied with marks and content hash; unchanged, it is not written again', async () => {
      putPrimary();
      putConfig({ a: '1' });
      await reconcile();
      const copy = service(configMaps, 'orders-config');
      assert.deepEqual(copy?.data, { a: '1' });
      assert.equal(copy?.metadata.annotations?.['relsync.dev/source-name'], 'orders-config');
      assert.ok(copy?.metadata.annotations?.['relsync.dev/content-hash']);
      assert.equal((await relation('config'))?.state, 'synced');
      assert.equal((await relation('creds'))?.state, 'pending', 'a source that does not exist yet is waited for');

      await reconcile();
      assert.deepEqual(world.writes(), []);
    });

    it('a key or a whole data field the source drops goes from the copy; fields the operator added at the top level stay', async () => {
      putPrimary();
      world.put('tenant-a', configMaps, { metadata: { namespace: 'shop', name: 'orders-config' }, data: { a: '1', b: '2' }, binaryData: { bin: 'eA==' } });
      await reconcile();
      world.edit('service', configMaps, COPY_NS, 'orders-config', (o) => void (o.immutable = false));
      world.edit('tenant-a', configMaps, 'shop', 'orders-config', (o) => {
        o.data = { a: '1' };
        delete o.binaryData;
      });
      await reconcile();
      assert.deepEqual(world.writes(), [`apply service/configmaps/${COPY_NS}/orders-config`]);
      assert.deepEqual(service(configMaps, 'orders-config')?.data, { a: '1' });
      assert.equal(service(configMaps, 'orders-config')?.binaryData, undefined);
      assert.equal(service(configMaps, 'orders-config')?.immutable, false);
    });

    it('a source deleted: its copy goes and the relation waits for it again', async () => {
      putPrimary();
      putConfig({ a: '1' });
      await reconcile();
      world.remove('tenant-a', configMaps, 'shop', 'orders-config');
      await reconcile();
      assert.deepEqual(world.writes(), [`delete service/configmaps/${COPY_NS}/orders-config`]);
      assert.equal((await relation('config'))?.state, 'pending');
    });

    for (const [what, labels, annotations] of [
      ['without marks', {}, {}],
      ['marked as the copy of another source', { 'relsync.dev/agent': AGENT }, marksOf({ ...configId, name: 'other-config' }, 'x')],
      ["marked by another agent", { 'relsync.dev/agent': 'other' }, marksOf(configId, 'x')],
    ] as const) {
      it(`an object ${what} at the destination: never written or deleted, whether the source exists or not`, async () => {
        putPrimary();
        await reconcile();
        world.put('service', configMaps, { metadata: { namespace: COPY_NS, name: 'orders-config', labels: { ...labels }, annotations: { ...annotations } }, data: { theirs: 'yes' } });
        const before = service(configMaps, 'orders-config');

        // No source: waiting, the object stays.
        await reconcile();
        assert.deepEqual(world.writes(), []);
        assert.equal((await relation('config'))?.state, 'pending');

        // A source: a conflict, retried, the object stays.
        putConfig({ a: '1' });
        assert.deepEqual(await reconcile(), { requeueAfterMs: 30_000 });
        assert.deepEqual(world.writes(), ['patchStatus tenant-a/databases/shop/orders'], 'only the verdict on the primary');
        assert.deepEqual(verdictOnPrimary(), { status: 'False', reason: 'RelatedCopyConflict' });
        assert.deepEqual(service(configMaps, 'orders-config'), before);
        assert.equal((await relation('config'))?.state, 'conflict');
        assert.ok(world.eventReasons().includes('RelatedCopyConflict'));
      });
    }

    it('a Secret of a denied type is never copied, and a copy written before goes', async () => {
      putPrimary();
      world.put('tenant-a', secrets, { metadata: { namespace: 'shop', name: 'orders-creds' }, type: 'Opaque', data: { p: 'eA==' } });
      await reconcile();
      assert.ok(service(secrets, 'orders-creds'));
      world.edit('tenant-a', secrets, 'shop', 'orders-creds', (o) => void (o.type = 'kubernetes.io/service-account-token'));
      await reconcile();
      assert.deepEqual(world.writes(), [`delete service/secrets/${COPY_NS}/orders-creds`, 'patchStatus tenant-a/databases/shop/orders']);
      assert.deepEqual(verdictOnPrimary(), { status: 'False', reason: 'RelatedSyncFailed' });
      assert.equal((await relation('creds'))?.state, 'error');
      assert.ok(world.eventReasons().includes('RelatedSyncFailed'));
    });

    it('a source over limits.copyBytes: the copy written before stays as it was, not updated', async () => {
      putPrimary();
      putConfig({ a: '1' });
      await reconcile();
      world.edit('tenant-a', configMaps, 'shop', 'orders-config', (o) => void (o.data = { a: 'x'.repeat(2 * 1024 * 1024) }));
      await reconcile();
      assert.deepEqual(world.writes(), ['patchStatus tenant-a/databases/shop/orders'], 'only the verdict on the primary');
      assert.deepEqual(service(configMaps, 'orders-config')?.data, { a: '1' });
      assert.equal((await relation('config'))?.state, 'error');
    });

    it("a source whose labels alone are over limits.copyBytes is refused by them; the copy written before stays, and is synced again once they shrink", async () => {
      putPrimary();
      putConfig({ a: '1' });
      await reconcile();
      const labels = Object.fromEntries(Array.from({ length: 12_000 }, (_, i) => [`k${i}.example/l`, 'v'.repeat(90)]));
      world.edit('tenant-a', configMaps, 'shop', 'orders-config', (o) => void ((o.metadata.labels = labels), (o.data = { a: '2' })));
      await reconcile();
      assert.deepEqual(world.writes(), ['patchStatus tenant-a/databases/shop/orders'], 'only the verdict on the primary');
      assert.deepEqual(service(configMaps, 'orders-config')?.data, { a: '1' });
      const stored = await relation('config');
      assert.equal(stored?.state, 'error');
      assert.match(stored?.message ?? '', /its labels and annotations alone are at least \d+ bytes; relsync copies at most 1048576 \(limits\.copyBytes\)/);
      world.edit('tenant-a', configMaps, 'shop', 'orders-config', (o) => void (o.metadata.labels = { small: 'yes' }));
      await reconcile();
      assert.deepEqual(service(configMaps, 'orders-config')?.data, { a: '2' }, 'synced again');
      assert.equal((await relation('config'))?.state, 'synced');
    });

    it('a primary whose labels alone are over limits.copyBytes: its copy stays as it was, and the verdict says why', async () => {
      putPrimary();
      await reconcile();
      const before = service(databases, 'orders');
      const labels = Object.fromEntries(Array.from({ length: 12_000 }, (_, i) => [`k${i}.example/l`, 'v'.repeat(90)]));
      world.edit('tenant-a', databases, 'shop', 'orders', (o) => void ((o.metadata.labels = labels), (o.spec = { size: 9 })));
      await reconcile();
      assert.deepEqual(service(databases, 'orders')?.spec, before?.spec, 'not updated');
      assert.deepEqual(verdictOnPrimary(), { status: 'False', reason: 'CopySyncFailed' });
      assert.match((await store.primary(primaryId))?.message ?? '', /labels and annotations alone are at least \d+ bytes/);
    });

    it('a destination created by someone else between the read and the create is a conflict, not overwritten', async () => {
      putPrimary();
      await reconcile();
      putConfig({ a: '1' });
      raceOnCreate(configMaps, () => ({ metadata: { namespace: COPY_NS, name: 'orders-config' }, data: { user: 'yes' } }));
      assert.deepEqual(await reconcile(), { requeueAfterMs: 30_000 });
      assert.deepEqual(service(configMaps, 'orders-config')?.data, { user: 'yes' });
      assert.equal((await relation('config'))?.state, 'conflict');
    });

    it("a copy of the same source created meanwhile (another primary's reconcile) is this relation's copy: updated, synced", async () => {
      putPrimary();
      await reconcile();
      putConfig({ a: '2' });
      const source = world.read('tenant-a', configMaps, 'shop', 'orders-config')!;
      raceOnCreate(configMaps, () => ({ metadata: { namespace: COPY_NS, name: 'orders-config', labels: { 'relsync.dev/agent': AGENT }, annotations: marksOf(configId, source.metadata.uid!) }, data: { a: '1' } }));
      assert.deepEqual(await reconcile(), done);
      assert.deepEqual(world.writes().filter((w) => w.includes('configmaps')), [`apply service/configmaps/${COPY_NS}/orders-config`, `apply service/configmaps/${COPY_NS}/orders-config`]);
      assert.deepEqual(service(configMaps, 'orders-config')?.data, { a: '2' });
      assert.equal((await relation('config'))?.state, 'synced');
    });

    it('reads what the watches delivered; after a 409 (a copy older than the one it wrote over), the next reconcile reads the API servers', async () => {
      const cache = new ObjectCache(16 * 1024 * 1024);
      const cached = new CachedReads(cache, new LiveReads(world));
      reconciler = reconcilerWith(readingFirst(cached));
      putPrimary();
      putConfig({ a: '1' });
      await reconcile();
      // The watches delivered everything so far.
      const deliver = (cluster: string, type: ResourceType, namespace: string, name: string) =>
        cache.observe({ cluster, group: type.group, resource: type.resource, namespace, name }, world.read(cluster, type, namespace, name));
      deliver('tenant-a', databases, 'shop', 'orders');
      deliver('service', databases, COPY_NS, 'orders');
      deliver('tenant-a', configMaps, 'shop', 'orders-config');
      deliver('service', configMaps, COPY_NS, 'orders-config');
      world.edit('tenant-a', configMaps, 'shop', 'orders-config', (o) => void (o.data = { a: '2' }));
      deliver('tenant-a', configMaps, 'shop', 'orders-config');
      await reconcile();
      // Only the source that does not exist is asked for (its absence is the API server's answer); where
      // its copy would go holds nothing of that relation's (the store says so, and the watches).
      assert.deepEqual(world.calls.filter((c) => c.verb === 'get' && c.resource !== 'namespaces').map((c) => `${c.cluster}/${c.resource}/${c.name}`), ['tenant-a/secrets/orders-creds'], 'nothing read again that the watches delivered');
      assert.deepEqual(service(configMaps, 'orders-config')?.data, { a: '2' });

      // Someone changes the copy; its event has not arrived when the source changes again.
      deliver('service', configMaps, COPY_NS, 'orders-config');
      world.edit('service', configMaps, COPY_NS, 'orders-config', (o) => void (o.data = { a: 'tampered' }));
      world.edit('tenant-a', configMaps, 'shop', 'orders-config', (o) => void (o.data = { a: '3' }));
      deliver('tenant-a', configMaps, 'shop', 'orders-config');
      const conflict = await reconcile().then(() => undefined, (err: unknown) => err);
      assert.ok(isConflict(conflict), 'the write over the newer copy is refused');
      // The queue retries the key as retryKey() makes it.
      await reconcile(retryKey({ resource, id: primaryId }, conflict));
      assert.ok(world.calls.some((c) => c.verb === 'get' && c.cluster === 'service' && c.name === 'orders-config'), 'read again from the API server');
      assert.deepEqual(service(configMaps, 'orders-config')?.data, { a: '3' });
    });

    it('deletes nothing on the cache\'s word: a primary or a source the cache shows gone or changed is read again live first', async () => {
      const cache = new ObjectCache(16 * 1024 * 1024);
      const cached = new CachedReads(cache, new LiveReads(world));
      reconciler = reconcilerWith(readingFirst(cached));
      putPrimary();
      world.put('tenant-a', secrets, { metadata: { namespace: 'shop', name: 'orders-creds' }, type: 'Opaque', data: { p: 'eA==' } });
      await reconcile();
      const at = (cluster: string, type: ResourceType, namespace: string) => ({ cluster, group: type.group, resource: type.resource, namespace });
      // Stale versions in the cache: the primary as if being deleted, the Secret as if of a denied type.
      const primary = world.read('tenant-a', databases, 'shop', 'orders')!;
      cache.observe({ ...at('tenant-a', databases, 'shop'), name: 'orders' }, { ...primary, metadata: { ...primary.metadata, deletionTimestamp: new Date(0).toISOString() } });
      await reconcile();
      assert.ok(!world.writes().some((w) => w.startsWith('delete')), world.writes().join('\n'));
      assert.ok(service(databases, 'orders'));
      cache.observe({ ...at('tenant-a', databases, 'shop'), name: 'orders' }, world.read('tenant-a', databases, 'shop', 'orders'));
      const secret = world.read('tenant-a', secrets, 'shop', 'orders-creds')!;
      cache.observe({ ...at('tenant-a', secrets, 'shop'), name: 'orders-creds' }, { ...secret, type: 'kubernetes.io/service-account-token' });
      await reconcile();
      assert.ok(!world.writes().some((w) => w.startsWith('delete')), world.writes().join('\n'));
      assert.ok(service(secrets, 'orders-creds'), 'the copy of a Secret that is still Opaque stays');
    });

    it('a source relsync may not read: that relation fails, said on the primary in words that name the fix; the others go on', async () => {
      putPrimary();
      putConfig({ a: '1' });
      world.fail({ verb: 'get', cluster: 'tenant-a', resource: 'secrets', name: 'orders-creds', status: 403, reason: 'Forbidden', message: 'secrets "orders-creds" is forbidden' });
      assert.deepEqual(await reconcile(), done);
      assert.match((await relation('creds'))?.message ?? '', /rule creds: relsync may not read secrets in cluster tenant-a \(check its RBAC\)/);
      assert.equal((await relation('creds'))?.state, 'error');
      assert.equal((await relation('config'))?.state, 'synced');
      assert.ok(world.eventReasons().includes('RelatedSyncFailed'));
    });

    it('a write the service cluster answers 503 fails the reconcile (the queue retries it), and the primary reads error until it lands', async () => {
      putPrimary();
      await reconcile();
      putConfig({ a: '1' });
      world.fail({ verb: 'apply', cluster: 'service', resource: 'configmaps', name: 'orders-config', status: 503, reason: 'ServiceUnavailable', message: 'try again' });
      await assert.rejects(reconcile(), /503/);
      assert.equal((await store.primary(primaryId))?.state, 'error');
      assert.deepEqual(await reconcile(), done);
      assert.equal((await store.primary(primaryId))?.state, 'synced');
      assert.deepEqual(service(configMaps, 'orders-config')?.data, { a: '1' });
    });

    it('where an apply may not create with a resourceVersion (kcp), the copy is created by POST and nothing else is touched', async () => {
      putPrimary();
      await reconcile();
      putConfig({ a: '1' });
      world.fail({ verb: 'apply', cluster: 'service', resource: 'configmaps', name: 'orders-config', status: 500, reason: 'InternalError', message: 'resourceVersion should not be set on objects to be created' });
      assert.deepEqual(await reconcile(), done);
      assert.deepEqual(world.writes().filter((w) => w.includes('configmaps')), [`apply service/configmaps/${COPY_NS}/orders-config`, `create service/configmaps/${COPY_NS}/orders-config`]);
      assert.deepEqual(service(configMaps, 'orders-config')?.data, { a: '1' });
      assert.equal((await relation('config'))?.state, 'synced');
    });

    it('a write refused for good (422) is parked and said on the primary, not retried', async () => {
      putPrimary();
      await reconcile();
      putConfig({ a: '1' });
      world.fail({ verb: 'apply', cluster: 'service', resource: 'configmaps', name: 'orders-config', status: 422, reason: 'Invalid', message: 'denied by a webhook' });
      assert.deepEqual(await reconcile(), done);
      assert.equal((await relation('config'))?.state, 'error');
      assert.match((await relation('config'))?.message ?? '', /cannot write .*denied by a webhook/);
      assert.ok(world.eventReasons().includes('RelatedSyncFailed'));
    });

    describe('service-origin objects', () => {
      const credentials: ResolvedRule = {
        ...template('credentials', secrets, '{{ name }}-credentials'), origin: 'service', provenance: { kind: 'ownerReference' },
      };
      const walled: ResolvedRule = { ...credentials, id: 'walled', destinationNamespace: Template.parse('walled-{{ name }}', ['name']), where: 'resources[0].related.walled' };
      const serviceOrigin = (rule: ResolvedRule): ResolvedResource => ({ ...resource, rules: [rule] });

      it("copies to the tenant only what shows it belongs to the tenant's copy (an ownerReference to it)", async () => {
        putPrimary();
        await reconciler.reconcile(serviceOrigin(credentials), primaryId);
        world.put('service', secrets, { metadata: { namespace: COPY_NS, name: 'orders-credentials' }, data: { p: 'cHJvdmlkZXI=' } });
        world.clearCalls();
        await reconciler.reconcile(serviceOrigin(credentials), primaryId);
        assert.equal(world.read('tenant-a', secrets, 'shop', 'orders-credentials'), undefined, "the operator's own Secret of that name, not owned by the copy: not copied");
        assert.match((await relation('credentials'))?.message ?? '', /waiting for .* to exist/, 'and said like an absent one (the tenant learns nothing of it)');
        const copy = service(databases, 'orders')!;
        world.edit('service', secrets, COPY_NS, 'orders-credentials', (o) => void (o.metadata.ownerReferences = [{ apiVersion: 'demo.relsync.dev/v1alpha1', kind: 'Database', name: 'orders', uid: copy.metadata.uid! }]));
        await reconciler.reconcile(serviceOrigin(credentials), primaryId);
        assert.deepEqual(world.read('tenant-a', secrets, 'shop', 'orders-credentials')?.data, { p: 'cHJvdmlkZXI=' });
      });

      it('a platform namespace relsync may not create: the relation waits and looks again in 30 s', async () => {
        putPrimary();
        await reconciler.reconcile(serviceOrigin(walled), primaryId);
        const copy = service(databases, 'orders')!;
        world.put('service', secrets, { metadata: { namespace: COPY_NS, name: 'orders-credentials', ownerReferences: [{ apiVersion: 'demo.relsync.dev/v1alpha1', kind: 'Database', name: 'orders', uid: copy.metadata.uid! }] }, data: { p: 'eA==' } });
        world.fail({ verb: 'create', cluster: 'tenant-a', resource: 'namespaces', status: 403, reason: 'Forbidden', message: 'namespaces is forbidden' });
        assert.deepEqual(outcome(await reconciler.reconcile(serviceOrigin(walled), primaryId)), { requeueAfterMs: 30_000 });
        assert.match((await relation('walled'))?.message ?? '', /namespace "walled-orders" does not exist in cluster tenant-a, and relsync may not create it/);
        // Allowed now: the namespace is made and the copy lands.
        assert.deepEqual(outcome(await reconciler.reconcile(serviceOrigin(walled), primaryId)), done);
        assert.ok(world.read('tenant-a', namespaces, '', 'walled-orders'));
        assert.deepEqual(world.read('tenant-a', secrets, 'walled-orders', 'orders-credentials')?.data, { p: 'eA==' });
      });
    });

    it('two rules that name one destination: the first in rule order has it, the second is a conflict (relations are written several at a time)', async () => {
      const named = (ruleId: string, source: string): ResolvedRule => ({ ...template(ruleId, configMaps, source), finder: { kind: 'template', name: Template.parse(source, []), destinationName: Template.parse('shared', []) } });
      const two: ResolvedResource = { ...resource, rules: [named('first', 'one'), named('second', 'two'), template('a', configMaps, 'a'), template('b', configMaps, 'b'), template('c', configMaps, 'c')] };
      putPrimary();
      for (const n of ['one', 'two', 'a', 'b', 'c']) world.put('tenant-a', configMaps, { metadata: { namespace: 'shop', name: n }, data: { from: n } });
      await reconciler.reconcile(two, primaryId);
      assert.deepEqual(service(configMaps, 'shared')?.data, { from: 'one' });
      assert.equal((await relation('first'))?.state, 'synced');
      assert.equal((await relation('second'))?.state, 'conflict');
      for (const n of ['a', 'b', 'c']) assert.deepEqual(service(configMaps, n)?.data, { from: n });
    });

    it('a copy shared by two primaries stays until the last one that copies it goes', async () => {
      // Both primaries' templates render the same source: "shared-config".
      const shared: ResolvedResource = { ...resource, rules: [template('config', configMaps, 'shared-config')] };
      const invoices: ObjectIdentity = { ...primaryId, name: 'invoices' };
      putPrimary();
      world.put('tenant-a', databases, { metadata: { namespace: 'shop', name: 'invoices' }, spec: {} });
      world.put('tenant-a', configMaps, { metadata: { namespace: 'shop', name: 'shared-config' }, data: { a: '1' } });
      await reconciler.reconcile(shared, primaryId);
      await reconciler.reconcile(shared, invoices);
      assert.ok(service(configMaps, 'shared-config'));

      world.remove('tenant-a', databases, 'shop', 'orders');
      world.clearCalls();
      await reconciler.reconcile(shared, primaryId);
      assert.ok(!world.writes().includes(`delete service/configmaps/${COPY_NS}/shared-config`));
      assert.ok(service(configMaps, 'shared-config'), 'invoices still copies it');

      world.remove('tenant-a', databases, 'shop', 'invoices');
      world.clearCalls();
      await reconciler.reconcile(shared, invoices);
      assert.ok(world.writes().includes(`delete service/configmaps/${COPY_NS}/shared-config`));
      assert.equal(service(configMaps, 'shared-config'), undefined);
    });

    it("a copy shared with a primary whose claim found nothing there is handed over to it: kept, then deleted when that one goes", async () => {
      const shared: ResolvedResource = { ...resource, rules: [template('config', configMaps, 'shared-config')] };
      const invoices: ObjectIdentity = { ...primaryId, name: 'invoices' };
      putPrimary();
      world.put('tenant-a', databases, { metadata: { namespace: 'shop', name: 'invoices' }, spec: {} });
      // orders looks first, while the source does not exist: its row says it found nothing there.
      await reconciler.reconcile(shared, primaryId);
      const ordersRow = async () => (await store.relationsOf(primaryId)).find((r) => r.ruleId === 'config');
      assert.deepEqual((await ordersRow())?.versions, { source: '', destination: '' });
      world.put('tenant-a', configMaps, { metadata: { namespace: 'shop', name: 'shared-config' }, data: { a: '1' } });
      await reconciler.reconcile(shared, invoices);
      assert.ok(service(configMaps, 'shared-config'), 'invoices copied it');
      // orders' reconciles keep failing from here on (its row stays as it was); invoices goes.
      world.remove('tenant-a', databases, 'shop', 'invoices');
      await reconciler.reconcile(shared, invoices);
      assert.ok(service(configMaps, 'shared-config'), 'left to orders, which claims it');
      assert.equal((await ordersRow())?.versions ?? null, null, "orders' row no longer says it found nothing there");
      world.remove('tenant-a', databases, 'shop', 'orders');
      world.clearCalls();
      await reconciler.reconcile(shared, primaryId);
      assert.equal(service(configMaps, 'shared-config'), undefined, 'deleted with the last primary that claimed it');
    });

    it('a relation the primary no longer resolves to releases its copy; the new one is copied', async () => {
      const byRef: ResolvedResource = { ...resource, rules: [{ ...template('config', configMaps, '{{ name }}-config'), finder: { kind: 'template', name: Template.parse('{{ object.spec.config }}', ['object']), destinationName: undefined } }] };
      world.put('tenant-a', databases, { metadata: { namespace: 'shop', name: 'orders' }, spec: { config: 'one' } });
      world.put('tenant-a', configMaps, { metadata: { namespace: 'shop', name: 'one' }, data: { n: '1' } });
      world.put('tenant-a', configMaps, { metadata: { namespace: 'shop', name: 'two' }, data: { n: '2' } });
      await reconciler.reconcile(byRef, primaryId);
      assert.ok(service(configMaps, 'one'));
      world.edit('tenant-a', databases, 'shop', 'orders', (o) => void (o.spec = { config: 'two' }));
      world.clearCalls();
      await reconciler.reconcile(byRef, primaryId);
      assert.deepEqual(world.writes().filter((w) => w.includes('configmaps')), [`delete service/configmaps/${COPY_NS}/one`, `apply service/configmaps/${COPY_NS}/two`]);
      assert.deepEqual((await store.relationsOf(primaryId)).map((r) => r.source.name), ['two']);
    });
  });

  describe('a change that concerns one relation (edge sync)', () => {
    const copyConfigId: ObjectIdentity = { cluster: 'service', group: '', resource: 'configmaps', namespace: COPY_NS, name: 'orders-config' };
    const edge = [{ ruleId: 'config', source: configId, destination: copyConfigId }];
    let cache: ObjectCache;
    const deliver = (cluster: string, type: ResourceType, namespace: string, name: string) =>
      cache.observe({ cluster, group: type.group, resource: type.resource, namespace, name }, world.read(cluster, type, namespace, name));
    const deliverAll = () => {
      deliver('tenant-a', databases, 'shop', 'orders');
      deliver('service', databases, COPY_NS, 'orders');
      deliver('tenant-a', configMaps, 'shop', 'orders-config');
      deliver('service', configMaps, COPY_NS, 'orders-config');
    };
    const edgeKey: PrimaryKey = { resource, id: primaryId, edges: edge };
    /** A run of `key` (default: the edge's key, as the router queues it). */
    const reconcileEdge = async (key: PrimaryKey = edgeKey) => {
      world.clearCalls();
      const result = outcome(await reconciler.reconcile(resource, primaryId, key));
      await recorder.idle();
      return result;
    };
    const reads = () => world.calls.filter((c) => c.verb === 'get' || c.verb === 'list').map((c) => `${c.verb} ${c.cluster}/${c.resource}/${c.name}`);
    /** Everything synced, every object delivered by the watches. */
    const synced = async () => {
      putPrimary();
      putConfig({ a: '1' });
      await reconcile();
      deliverAll();
    };

    beforeEach(() => {
      cache = new ObjectCache(16 * 1024 * 1024);
      const cached = new CachedReads(cache, new LiveReads(world));
      reconciler = reconcilerWith(readingFirst(cached));
    });

    it('a new primary\'s copies are created without reading them first (a create the API server refuses when anything has the name)', async () => {
      putPrimary();
      putConfig({ a: '1' });
      deliver('tenant-a', databases, 'shop', 'orders');
      deliver('tenant-a', configMaps, 'shop', 'orders-config');
      await reconcile();
      // (The Secret's source does not exist yet: where its copy would go is read, a copy of it made before being relsync's to remove.)
      assert.deepEqual(world.calls.filter((c) => c.cluster === 'service' && c.verb === 'get' && c.resource !== 'namespaces' && c.resource !== 'secrets'), [], 'no GET of a copy that was never written');
      assert.ok(service(databases, 'orders') && service(configMaps, 'orders-config'));
      deliverAll();
      // Someone else's object where a new relation's copy goes: the create is refused, then it is read, and left alone.
      world.put('tenant-a', secrets, { metadata: { namespace: 'shop', name: 'orders-creds' }, type: 'Opaque', data: { p: 'eA==' } });
      world.put('service', secrets, { metadata: { namespace: COPY_NS, name: 'orders-creds' }, data: { theirs: 'eA==' } });
      deliver('tenant-a', secrets, 'shop', 'orders-creds');
      await reconcile();
      assert.deepEqual(service(secrets, 'orders-creds')?.data, { theirs: 'eA==' });
      assert.equal((await store.relationsOf(primaryId)).find((r) => r.ruleId === 'creds')?.state, 'conflict');
    });

    const credsId: ObjectIdentity = { cluster: 'tenant-a', group: '', resource: 'secrets', namespace: 'shop', name: 'orders-creds' };
    const copyReads = () => world.calls.filter((c) => c.cluster === 'service' && c.verb === 'get' && c.resource === 'secrets').length;
    /** A marked copy of the absent Secret in the service cluster (another primary's, or one a lost store forgot). */
    const putCredsCopy = () => world.put('service', secrets, { metadata: { namespace: COPY_NS, name: 'orders-creds', labels: { 'relsync.dev/agent': AGENT }, annotations: marksOf(credsId, 'gone') }, data: { p: 'eA==' } });

    it("a source that does not exist costs no read where its copy would go once it found nothing there; a copy of it the watches delivered still goes", async () => {
      putPrimary();
      putConfig({ a: '1' });
      deliver('tenant-a', databases, 'shop', 'orders');
      deliver('tenant-a', configMaps, 'shop', 'orders-config');
      await reconcile();
      assert.equal(copyReads(), 1, 'a new claim looks once (a reconcile that wrote its copy and then failed saved no row of it)');
      deliverAll();
      await reconcile();
      assert.equal(copyReads(), 0, 'a claim that found nothing there last time');
      await reconcile();
      assert.equal(copyReads(), 0, 'nor the time after');
      assert.equal((await store.relationsOf(primaryId)).find((r) => r.ruleId === 'creds')?.state, 'pending');
      putCredsCopy();
      deliver('service', secrets, COPY_NS, 'orders-creds');
      await reconcile();
      assert.equal(service(secrets, 'orders-creds'), undefined, 'the copy the watches know of is deleted (read live first)');
    });

    it('reads where its copy would go when the store may not say all: a claim saved before its first sync ended, no row, or a store that does not know every claim', async () => {
      putPrimary();
      putConfig({ a: '1' });
      // A reconcile killed after its write and before its outcome was saved leaves the claim as
      // recordIntent stored it (not synced yet, no versions); a store that lost the row has none.
      for (const [what, sql] of [['claim stored before its first sync', "update relations set state = 'pending', content_hash = null, source_version = null, dest_version = null where rule_id = 'creds'"], ['no row', "delete from relations where rule_id = 'creds'"]] as const) {
        world.put('tenant-a', secrets, { metadata: { namespace: 'shop', name: 'orders-creds' }, type: 'Opaque', data: { p: 'eA==' } });
        await reconcile();
        assert.ok(service(secrets, 'orders-creds'), 'copied');
        opened.sqlite.prepare(sql).run();
        world.remove('tenant-a', secrets, 'shop', 'orders-creds');
        deliver('tenant-a', databases, 'shop', 'orders');
        deliver('tenant-a', configMaps, 'shop', 'orders-config');
        await reconcile();
        assert.ok(copyReads() > 0, what);
        assert.equal(service(secrets, 'orders-creds'), undefined, `the copy of the deleted source goes (${what})`);
      }

      // A store that does not know every claim of tenant-a yet (lost, older, new): a new claim's place is read too.
      reconciler = reconcilerWith({ ...readingFirst(new CachedReads(cache, new LiveReads(world))), claims: new ClaimKnowledge(false) });
      opened.sqlite.prepare("delete from relations where rule_id = 'creds'").run();
      putCredsCopy();
      await reconcile();
      assert.ok(copyReads() > 0);
      assert.equal(service(secrets, 'orders-creds'), undefined, "a copy of relsync's whose source is gone is deleted");
    });

    it('a shared copy handed over to a claim that found nothing is read, and deleted, once its source is gone', async () => {
      const shared: ResolvedResource = { ...resource, rules: [template('config', configMaps, 'shared-config')] };
      const invoices: ObjectIdentity = { ...primaryId, name: 'invoices' };
      putPrimary();
      world.put('tenant-a', databases, { metadata: { namespace: 'shop', name: 'invoices' }, spec: {} });
      deliver('tenant-a', databases, 'shop', 'orders');
      await reconciler.reconcile(shared, primaryId);
      world.put('tenant-a', configMaps, { metadata: { namespace: 'shop', name: 'shared-config' }, data: { a: '1' } });
      deliver('tenant-a', databases, 'shop', 'invoices');
      await reconciler.reconcile(shared, invoices);
      assert.ok(service(configMaps, 'shared-config'), 'invoices copied it');
      world.remove('tenant-a', databases, 'shop', 'invoices');
      cache.observe({ ...invoices }, undefined);
      await reconciler.reconcile(shared, invoices);
      assert.ok(service(configMaps, 'shared-config'), 'left to orders');
      // The source goes; orders reconciles from the watches, which never delivered the copy.
      world.remove('tenant-a', configMaps, 'shop', 'shared-config');
      deliver('tenant-a', databases, 'shop', 'orders');
      await reconciler.reconcile(shared, primaryId);
      assert.equal(service(configMaps, 'shared-config'), undefined, 'the copy of the deleted source is deleted');
    });

    it('a relation that found nothing, then wrote its copy in a reconcile that failed, reads where its copy went once its source is gone', async () => {
      putPrimary();
      putConfig({ a: '1' });
      deliver('tenant-a', databases, 'shop', 'orders');
      deliver('tenant-a', configMaps, 'shop', 'orders-config');
      await reconcile();
      deliverAll();
      assert.deepEqual((await store.relationsOf(primaryId)).find((r) => r.ruleId === 'creds')?.versions, { source: '', destination: '' }, 'found nothing');
      // The Secret appears; its copy is written, and the reconcile fails on the other relation (nothing saved).
      world.put('tenant-a', secrets, { metadata: { namespace: 'shop', name: 'orders-creds' }, type: 'Opaque', data: { p: 'eA==' } });
      putConfig({ a: '2' });
      deliver('tenant-a', configMaps, 'shop', 'orders-config');
      world.fail({ verb: 'apply', cluster: 'service', resource: 'configmaps', status: 500, reason: 'InternalError', message: 'etcd is away' });
      await assert.rejects(reconcile(), /etcd is away/);
      assert.ok(service(secrets, 'orders-creds'), 'the copy was written');
      // The Secret goes; the watches have not delivered its copy (a sweep cleared the cache, say).
      world.remove('tenant-a', secrets, 'shop', 'orders-creds');
      await reconcile();
      assert.equal(service(secrets, 'orders-creds'), undefined, 'the copy of the deleted source is deleted');
    });

    it('a claim that found nothing ends without a read where its copy would have gone (a new one looks once)', async () => {
      const byRef: ResolvedResource = { ...resource, rules: [{ ...template('creds', secrets, '{{ name }}-creds'), finder: { kind: 'template', name: Template.parse('{{ object.spec.creds }}', ['object']), destinationName: undefined } }] };
      world.put('tenant-a', databases, { metadata: { namespace: 'shop', name: 'orders' }, spec: { creds: 'absent-1' } });
      deliver('tenant-a', databases, 'shop', 'orders');
      await reconciler.reconcile(byRef, primaryId);
      world.edit('tenant-a', databases, 'shop', 'orders', (o) => void (o.spec = { creds: 'absent-2' }));
      deliver('tenant-a', databases, 'shop', 'orders');
      world.clearCalls();
      await reconciler.reconcile(byRef, primaryId);
      assert.deepEqual(world.calls.filter((c) => c.cluster === 'service' && c.resource === 'secrets').map((c) => `${c.verb} ${c.name}`), ['get absent-2'], 'absent-1 ended without a read; absent-2, a new claim, looked once');
      assert.deepEqual((await store.relationsOf(primaryId)).map((r) => `${r.source.name} ${r.state}`), ['absent-2 pending']);
    });

    it('a changed source costs one write and no read: its copy alone is updated, and the store records the new hash', async () => {
      await synced();
      const before = (await store.relationsOf(primaryId)).find((r) => r.ruleId === 'config')!.contentHash;
      world.edit('tenant-a', configMaps, 'shop', 'orders-config', (o) => void (o.data = { a: '2' }));
      deliver('tenant-a', configMaps, 'shop', 'orders-config');
      assert.deepEqual(await reconcileEdge(), done);
      assert.deepEqual(world.writes(), [`apply service/configmaps/${COPY_NS}/orders-config`]);
      assert.deepEqual(reads(), [], 'the primary, its copy, the source and the copy came from the watches; the other rule was not looked at');
      assert.deepEqual(service(configMaps, 'orders-config')?.data, { a: '2' });
      const after = (await store.relationsOf(primaryId)).find((r) => r.ruleId === 'config')!;
      assert.equal(after.state, 'synced');
      assert.notEqual(after.contentHash, before);
      assert.equal((await store.primary(primaryId))?.state, 'synced');
    });

    it('a copy the cache does not hold is updated at the version the store recorded, without a read', async () => {
      await synced();
      cache.observe(copyConfigId, undefined);
      world.edit('tenant-a', configMaps, 'shop', 'orders-config', (o) => void (o.data = { a: '2' }));
      deliver('tenant-a', configMaps, 'shop', 'orders-config');
      assert.deepEqual(await reconcileEdge(), done);
      assert.deepEqual(reads(), [], 'the copy was not read');
      assert.deepEqual(world.writes(), [`apply service/configmaps/${COPY_NS}/orders-config`]);
      assert.deepEqual(service(configMaps, 'orders-config')?.data, { a: '2' });
      const after = (await store.relationsOf(primaryId)).find((r) => r.ruleId === 'config')!;
      assert.equal(after.versions?.destination, `${service(configMaps, 'orders-config')!.metadata.resourceVersion}/${service(configMaps, 'orders-config')!.metadata.uid}`, 'the new version is recorded for the next one');
    });

    it('a copy replaced behind the cache\'s back is never written over: the version precondition refuses, and a live read decides', async () => {
      await synced();
      cache.observe(copyConfigId, undefined);
      // Someone deletes relsync's copy and puts their own object there; no event reached relsync yet.
      world.remove('service', configMaps, COPY_NS, 'orders-config');
      world.put('service', configMaps, { metadata: { namespace: COPY_NS, name: 'orders-config' }, data: { theirs: 'yes' } });
      world.edit('tenant-a', configMaps, 'shop', 'orders-config', (o) => void (o.data = { a: '2' }));
      deliver('tenant-a', configMaps, 'shop', 'orders-config');
      await reconcileEdge();
      assert.deepEqual(service(configMaps, 'orders-config')?.data, { theirs: 'yes' });
      assert.equal((await store.relationsOf(primaryId)).find((r) => r.ruleId === 'config')?.state, 'conflict', 'the full reconcile recorded the conflict');
    });

    it('a copy deleted behind the cache\'s back is made again, not at the old version (the uid precondition), and one moved on by another writer is updated after a live read', async () => {
      await synced();
      cache.observe(copyConfigId, undefined);
      world.remove('service', configMaps, COPY_NS, 'orders-config');
      world.edit('tenant-a', configMaps, 'shop', 'orders-config', (o) => void (o.data = { a: '2' }));
      deliver('tenant-a', configMaps, 'shop', 'orders-config');
      assert.deepEqual(await reconcileEdge(), done);
      assert.deepEqual(service(configMaps, 'orders-config')?.data, { a: '2' });
      assert.ok(reads().includes(`get service/configmaps/orders-config`), 'decided on a live read');
      // Another primary's write of a copy they share moves its version on: a live read, then the write.
      cache.observe(copyConfigId, undefined);
      world.edit('service', configMaps, COPY_NS, 'orders-config', (o) => void (o.metadata.labels = { ...o.metadata.labels }));
      world.edit('tenant-a', configMaps, 'shop', 'orders-config', (o) => void (o.data = { a: '3' }));
      deliver('tenant-a', configMaps, 'shop', 'orders-config');
      assert.deepEqual(await reconcileEdge(), done);
      assert.deepEqual(service(configMaps, 'orders-config')?.data, { a: '3' });
    });

    it('a source event whose content hashes as stored sends nothing at all', async () => {
      await synced();
      world.edit('tenant-a', configMaps, 'shop', 'orders-config', (o) => void (o.metadata.ownerReferences = []));
      deliver('tenant-a', configMaps, 'shop', 'orders-config');
      assert.deepEqual(await reconcileEdge(), done);
      assert.deepEqual(world.calls.filter((c) => c.resource !== 'events'), []);
    });

    it('a copy someone else replaced (no marks) is a conflict of the full reconcile, never written by the edge', async () => {
      await synced();
      world.remove('service', configMaps, COPY_NS, 'orders-config');
      world.put('service', configMaps, { metadata: { namespace: COPY_NS, name: 'orders-config' }, data: { theirs: 'yes' } });
      deliver('service', configMaps, COPY_NS, 'orders-config');
      world.edit('tenant-a', configMaps, 'shop', 'orders-config', (o) => void (o.data = { a: '2' }));
      deliver('tenant-a', configMaps, 'shop', 'orders-config');
      await reconcileEdge();
      assert.deepEqual(world.writes(), ['patchStatus tenant-a/databases/shop/orders'], 'the foreign object is left untouched; the verdict goes on the primary');
      assert.deepEqual(verdictOnPrimary(), { status: 'False', reason: 'RelatedCopyConflict' });
      assert.deepEqual(service(configMaps, 'orders-config')?.data, { theirs: 'yes' });
      assert.equal((await store.relationsOf(primaryId)).find((r) => r.ruleId === 'config')?.state, 'conflict', 'recorded by the full reconcile');
      assert.ok(reads().includes('get tenant-a/secrets/orders-creds'), 'the full reconcile ran');
    });

    it('falls back to the full reconcile when the primary is not synced, or no longer names the pair', async () => {
      await synced();
      await store.setPrimaryState(primaryId, 'error', 'something earlier');
      world.edit('tenant-a', configMaps, 'shop', 'orders-config', (o) => void (o.data = { a: '2' }));
      deliver('tenant-a', configMaps, 'shop', 'orders-config');
      await reconcileEdge();
      assert.ok(reads().includes('get tenant-a/secrets/orders-creds'), 'not synced: the full reconcile ran');
      assert.equal((await store.primary(primaryId))?.state, 'synced');

      const byRef: ResolvedResource = { ...resource, rules: [{ ...template('config', configMaps, '{{ name }}-config'), finder: { kind: 'template', name: Template.parse('{{ object.spec.config }}', ['object']), destinationName: undefined } }] };
      world.edit('tenant-a', databases, 'shop', 'orders', (o) => void (o.spec = { config: 'orders-config' }));
      await reconciler.reconcile(byRef, primaryId);
      deliverAll();
      // The primary now names another ConfigMap; its event has not been handled, the old source changes.
      world.put('tenant-a', configMaps, { metadata: { namespace: 'shop', name: 'other' }, data: { o: '1' } });
      world.edit('tenant-a', databases, 'shop', 'orders', (o) => void (o.spec = { config: 'other' }));
      deliver('tenant-a', databases, 'shop', 'orders');
      world.edit('tenant-a', configMaps, 'shop', 'orders-config', (o) => void (o.data = { a: '3' }));
      deliver('tenant-a', configMaps, 'shop', 'orders-config');
      world.clearCalls();
      await reconciler.reconcile(byRef, primaryId, { edges: edge });
      assert.ok(world.writes().includes(`apply service/configmaps/${COPY_NS}/other`), world.writes().join('\n'));
      assert.ok(!world.writes().includes(`apply service/configmaps/${COPY_NS}/orders-config`), 'the pair the primary no longer names is not written');
    });

    it('after a full reconcile failed, a retry that only carries edges is a full reconcile (the primary\'s change is not lost)', async () => {
      await synced();
      world.edit('tenant-a', databases, 'shop', 'orders', (o) => void (o.spec = { size: 2 }));
      deliver('tenant-a', databases, 'shop', 'orders');
      world.fail({ verb: 'apply', cluster: 'service', resource: 'databases', name: 'orders', status: 503, reason: 'ServiceUnavailable', message: 'try again' });
      const failed = await reconcile().then(() => undefined, (err: unknown) => err);
      assert.match(String(failed), /503/);
      world.edit('tenant-a', configMaps, 'shop', 'orders-config', (o) => void (o.data = { a: '2' }));
      deliver('tenant-a', configMaps, 'shop', 'orders-config');
      // The retry waits in the queue; the edge's key merges into it.
      const merged = mergeKeys(retryKey({ resource, id: primaryId }, failed), edgeKey);
      assert.equal(merged.edges, undefined, 'the merged key is the whole primary');
      await reconcileEdge(merged);
      assert.deepEqual(service(databases, 'orders')?.spec, { size: 2 }, 'the primary\'s change reached its copy');
      assert.deepEqual(service(configMaps, 'orders-config')?.data, { a: '2' });
    });

    it('a write refused for good (422) on the edge is parked as the full reconcile parks it: said, recorded, written once', async () => {
      await synced();
      world.edit('tenant-a', configMaps, 'shop', 'orders-config', (o) => void (o.data = { a: '2' }));
      deliver('tenant-a', configMaps, 'shop', 'orders-config');
      world.fail({ verb: 'apply', cluster: 'service', resource: 'configmaps', name: 'orders-config', status: 422, reason: 'Invalid', message: 'denied by a webhook' });
      assert.deepEqual(await reconcileEdge(), done);
      assert.deepEqual(world.writes(), [`apply service/configmaps/${COPY_NS}/orders-config`, 'patchStatus tenant-a/databases/shop/orders'], 'one write, no second one by a full reconcile; the verdict on the primary');
      assert.deepEqual(verdictOnPrimary(), { status: 'False', reason: 'RelatedSyncFailed' });
      const relation = (await store.relationsOf(primaryId)).find((r) => r.ruleId === 'config');
      assert.equal(relation?.state, 'error');
      assert.match(relation?.message ?? '', /denied by a webhook/);
      assert.equal((await store.primary(primaryId))?.state, 'error');
      assert.ok(world.eventReasons().includes('RelatedSyncFailed'));
    });

    it('a failed edge write fails the run; the retry reconciles the whole primary', async () => {
      await synced();
      world.edit('tenant-a', configMaps, 'shop', 'orders-config', (o) => void (o.data = { a: '2' }));
      deliver('tenant-a', configMaps, 'shop', 'orders-config');
      world.fail({ verb: 'apply', cluster: 'service', resource: 'configmaps', name: 'orders-config', status: 503, reason: 'ServiceUnavailable', message: 'try again' });
      const failed = await reconcileEdge().then(() => undefined, (err: unknown) => err);
      assert.match(String(failed), /503/);
      assert.deepEqual(await reconcileEdge(retryKey(edgeKey, failed)), done);
      assert.ok(reads().includes('get tenant-a/secrets/orders-creds'), 'the retry was a full reconcile');
      assert.deepEqual(service(configMaps, 'orders-config')?.data, { a: '2' });
      assert.equal((await store.primary(primaryId))?.state, 'synced');
    });
  });

  describe('a related rule of another type: ConfigMap ↔ Secret (content converted)', () => {
    const b64 = (bytes: string | number[]) => Buffer.from(bytes as never).toString('base64');
    // The same content in each type's form: text, and bytes that are not UTF-8 (binaryData in a ConfigMap).
    const asConfigMap = (text: string, bin?: number[]) => ({ data: { text }, ...(bin ? { binaryData: { bin: b64(bin) } } : {}) });
    const asSecret = (text: string, bin?: number[]) => ({ type: 'Opaque', data: { text: b64(text), ...(bin ? { bin: b64(bin) } : {}) } });
    const directions = [
      { what: 'ConfigMap → Secret', from: configMaps, to: secrets, source: asConfigMap, copy: asSecret },
      { what: 'Secret → ConfigMap', from: secrets, to: configMaps, source: asSecret, copy: asConfigMap },
    ] as const;
    const fields = (o: KubeObject | undefined) => o && Object.fromEntries(Object.entries(o).filter(([k]) => !['apiVersion', 'kind', 'metadata'].includes(k)));

    for (const d of directions) {
      const rule: ResolvedRule = { ...template('converted', d.from, '{{ name }}-config'), destination: d.to, destinationType: d.to };
      const converting: ResolvedResource = { ...resource, rules: [rule] };
      const run = async () => {
        world.clearCalls();
        return outcome(await reconciler.reconcile(converting, primaryId));
      };
      const putSource = () => world.put('tenant-a', d.from, { metadata: { namespace: 'shop', name: 'orders-config', labels: { app: 'shop' } }, ...d.source('v1', [0xff, 0x00, 0xfe]) });
      const copy = () => world.read('service', d.to, COPY_NS, 'orders-config');

      it(`${d.what}: the copy is created in the destination's form (non-UTF-8 bytes as binaryData in a ConfigMap); the next reconcile writes nothing`, async () => {
        putPrimary();
        putSource();
        assert.deepEqual(await run(), done);
        assert.deepEqual(world.writes().filter((w) => !w.includes('databases') && !w.includes('namespaces')), [`apply service/${d.to.resource}/${COPY_NS}/orders-config`]);
        assert.deepEqual(fields(copy()), d.copy('v1', [0xff, 0x00, 0xfe]));
        assert.equal(copy()?.metadata.labels?.app, 'shop');
        assert.equal(copy()?.metadata.annotations?.['relsync.dev/source-resource'], d.from.resource);
        const relation = (await store.relationsOf(primaryId)).find((r) => r.ruleId === 'converted');
        assert.equal(relation?.state, 'synced');
        assert.equal(relation?.contentHash, copy()?.metadata.annotations?.['relsync.dev/content-hash']);

        assert.deepEqual(await run(), done);
        assert.deepEqual(world.writes(), [], 'the converted copy reads as up to date');
      });

      it(`${d.what}: a changed source updates the copy; a key the source drops goes from the copy`, async () => {
        putPrimary();
        putSource();
        await run();
        world.edit('tenant-a', d.from, 'shop', 'orders-config', (o) => {
          delete o.data;
          delete o.binaryData;
          Object.assign(o, d.source('v2'));
        });
        await run();
        assert.deepEqual(world.writes(), [`apply service/${d.to.resource}/${COPY_NS}/orders-config`]);
        assert.deepEqual(fields(copy()), d.copy('v2'), 'the new value, and the dropped key gone');
        await run();
        assert.deepEqual(world.writes(), []);
      });

      it(`${d.what}: the event of relsync's own converted copy is not routed back; drift on it is routed and repaired`, async () => {
        const queued: string[] = [];
        const router = new EventRouter({
          agentName: AGENT, serviceCluster: 'service', hasher: new ContentHasher(Buffer.from('k')), isPlatform: (c) => c === 'tenant-a',
          resources: [converting], store, enqueue: (key) => queued.push(key.id.name), logger: pino({ level: 'silent' }),
        });
        putPrimary();
        putSource();
        await run();
        assert.equal(await router.route('service', d.to, copy()!, { change: 'MODIFIED' }), 0, 'its content hash matches: relsync\'s own write');

        world.edit('service', d.to, COPY_NS, 'orders-config', (o) => void ((o.data as Record<string, string>).text = d.to === secrets ? b64('tampered') : 'tampered'));
        assert.equal(await router.route('service', d.to, copy()!, { change: 'MODIFIED' }), 1);
        assert.deepEqual(queued, ['orders'], 'drift reaches the primary');
        await run();
        assert.deepEqual(world.writes(), [`apply service/${d.to.resource}/${COPY_NS}/orders-config`]);
        assert.deepEqual(fields(copy()), d.copy('v1', [0xff, 0x00, 0xfe]), 'repaired');
        assert.equal(await router.route('service', d.to, copy()!, { change: 'MODIFIED' }), 0, 'and the repair is not routed back');
      });
    }
  });
});
