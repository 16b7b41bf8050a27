// A primary being deleted that the store has no record of (a lost, older or another shard's store):
// its copy is found by its marks, even where the naming no longer puts it, and the primary keeps
// relsync's finalizer until that copy is gone (issue #35, point 2). The naming here renders from a
// field the tenant can still change while the primary is terminating (`.spec.alias`): a tenant must
// not be able to leak its copy, or keep another's, by changing it. End-to-end with a lost store and an
// operator's finalizer on the copy: test/e2e/store-loss.test.ts.
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import pino from 'pino';
import type { ObjectIdentity } from '../../../src/core/identity.js';
import type { KubeObject } from '../../../src/core/object.js';
import type { ResourceType } from '../../../src/core/resource-type.js';
import { Template } from '../../../src/rules/template.js';
import { openStore } from '../../../src/store/database.js';
import { RelationStore } from '../../../src/store/relation-store.js';
import { ClaimKnowledge } from '../../../src/sync/claim-knowledge.js';
import { ContentHasher } from '../../../src/sync/content-hasher.js';
import { CopyNamespaces } from '../../../src/sync/copy-namespaces.js';
import { EventRecorder } from '../../../src/sync/event-recorder.js';
import { marksFor } from '../../../src/core/marks.js';
import { PrimaryReconciler } from '../../../src/sync/primary-reconciler.js';
import type { ResolvedResource } from '../../../src/sync/resolved-config.js';
import type { SyncMetrics } from '../../../src/sync/sync-metrics.js';
import { MemoryClusters } from '../../harness/memory-clusters.js';
import { finalizerName } from '../../../src/core/relsync-keys.js';

const AGENT = 'unit';
const databases: ResourceType = { group: 'demo.relsync.dev', version: 'v1alpha1', resource: 'databases', kind: 'Database', namespaced: true };
const namespaces: ResourceType = { group: '', version: 'v1', resource: 'namespaces', kind: 'Namespace', namespaced: false };
const resource: ResolvedResource = {
  type: databases, selector: undefined, where: 'resources[0]', primaryType: databases, copyType: databases,
  naming: { namespace: Template.parse('{{ cluster }}-{{ namespace }}', ['cluster', 'namespace', 'object']), name: Template.parse('{{ object.spec.alias }}', ['cluster', 'namespace', 'name', 'object']) },
  related: [],
  rules: [],
};
const COPY_NS = 'tenant-a-shop';
const counter = () => ({ inc: () => undefined });
const metrics: SyncMetrics = { copiesWritten: counter(), copiesRemoved: counter(), copiesReleased: counter(), conflicts: counter(), unprovenSources: counter(), edgeSyncs: counter() };
const idOf = (name: string): ObjectIdentity => ({ cluster: 'tenant-a', group: databases.group, resource: databases.resource, namespace: 'shop', name });

async function world() {
  const clusters = new MemoryClusters('service', ['tenant-a']);
  clusters.put('tenant-a', namespaces, { metadata: { name: 'shop' } });
  clusters.put('service', namespaces, { metadata: { name: COPY_NS } });
  const store = await openStore(join(mkdtempSync(join(tmpdir(), 'relsync-recordless-')), 'fresh.db'));
  const logger = pino({ level: 'silent' });
  const reconciler = new PrimaryReconciler({
    agentName: AGENT, clusters, store: new RelationStore(store), logger, metrics,
    recorder: new EventRecorder({ clusters, agentName: AGENT, logger }),
    hasher: new ContentHasher(Buffer.from('k')),
    copyNamespaces: new CopyNamespaces({ agentName: AGENT, clusters, logger, installation: undefined }),
    conflictRetryMs: 30_000,
    claims: new ClaimKnowledge(false),
  });
  /** A primary relsync synced with another store, now being deleted: it carries the finalizer. */
  const terminating = (name: string, alias: string): KubeObject => {
    const primary = clusters.put('tenant-a', databases, { apiVersion: 'demo.relsync.dev/v1alpha1', kind: 'Database', metadata: { namespace: 'shop', name, finalizers: [finalizerName(AGENT)] }, spec: { alias } });
    void clusters.client('tenant-a', databases).delete('shop', name); // held by the finalizer
    return primary;
  };
  /** A copy in the service cluster with the marks of `source` (its uid, as relsync writes them). */
  const copy = (name: string, source: KubeObject) => {
    const marks = marksFor(AGENT, idOf(source.metadata.name!), source.metadata.uid);
    return clusters.put('service', databases, { apiVersion: 'demo.relsync.dev/v1alpha1', kind: 'Database', metadata: { namespace: COPY_NS, name, labels: marks.labels, annotations: marks.annotations }, spec: {} });
  };
  return { clusters, store, reconciler, terminating, copy };
}

describe('a primary being deleted that the store has no record of', () => {
  it('is let go only once its copy is gone, also when the naming field changed since the copy was written', async () => {
    const w = await world();
    try {
      const primary = w.terminating('orders', 'written-as');
      w.copy('written-as', primary);
      // The tenant changes the field the name renders from while the primary terminates.
      w.clusters.edit('tenant-a', databases, 'shop', 'orders', (o) => void (o.spec = { alias: 'elsewhere' }));
      await w.reconciler.reconcile(resource, idOf('orders'));
      assert.equal(w.clusters.read('service', databases, COPY_NS, 'written-as'), undefined, 'its copy, found by its marks, is deleted');
      assert.equal(w.clusters.read('tenant-a', databases, 'shop', 'orders'), undefined, 'then the primary is let go');
    } finally {
      await w.store.close();
    }
  });

  it('deletes nothing of another primary that the changed name points at', async () => {
    const w = await world();
    try {
      const other = w.clusters.put('tenant-a', databases, { apiVersion: 'demo.relsync.dev/v1alpha1', kind: 'Database', metadata: { namespace: 'shop', name: 'payments', finalizers: [finalizerName(AGENT)] }, spec: { alias: 'payments' } });
      const othersCopy = w.copy('payments', other);
      const primary = w.terminating('orders', 'orders');
      w.copy('orders', primary);
      // It points its name at the other primary's copy: that copy's marks name another source.
      w.clusters.edit('tenant-a', databases, 'shop', 'orders', (o) => void (o.spec = { alias: 'payments' }));
      await w.reconciler.reconcile(resource, idOf('orders'));
      assert.equal(w.clusters.read('service', databases, COPY_NS, 'payments')?.metadata.uid, othersCopy.metadata.uid, 'the other primary\'s copy is untouched');
      assert.equal(w.clusters.read('service', databases, COPY_NS, 'orders'), undefined, 'its own copy is deleted');
    } finally {
      await w.store.close();
    }
  });

  it('keeps its finalizer while the copy is held by someone else\'s finalizer', async () => {
    const w = await world();
    try {
      const primary = w.terminating('orders', 'orders');
      const held = w.copy('orders', primary);
      w.clusters.edit('service', databases, COPY_NS, 'orders', (o) => void (o.metadata.finalizers = ['operator.example/deprovision']));
      w.clusters.edit('tenant-a', databases, 'shop', 'orders', (o) => void (o.spec = { alias: 'moved' }));
      const result = await w.reconciler.reconcile(resource, idOf('orders'));
      assert.ok(result.requeueAfterMs !== undefined, 'it waits for the copy');
      assert.ok(w.clusters.read('service', databases, COPY_NS, 'orders')?.metadata.deletionTimestamp, 'the copy is being deleted');
      assert.equal(w.clusters.read('service', databases, COPY_NS, 'orders')?.metadata.uid, held.metadata.uid);
      assert.ok(w.clusters.read('tenant-a', databases, 'shop', 'orders'), 'the primary waits');
    } finally {
      await w.store.close();
    }
  });

  it('finds its own incarnation\'s copy, not an earlier one\'s the name points at', async () => {
    const w = await world();
    try {
      // An earlier incarnation's copy, orphaned (its finalizer was taken off by hand), at "old".
      const earlier = w.clusters.put('tenant-a', databases, { apiVersion: 'demo.relsync.dev/v1alpha1', kind: 'Database', metadata: { namespace: 'shop', name: 'orders' }, spec: { alias: 'old' } });
      const orphan = w.copy('old', earlier);
      w.clusters.remove('tenant-a', databases, 'shop', 'orders');
      const primary = w.terminating('orders', 'new');
      w.copy('new', primary);
      // The tenant points the name at the earlier copy.
      w.clusters.edit('tenant-a', databases, 'shop', 'orders', (o) => void (o.spec = { alias: 'old' }));
      await w.reconciler.reconcile(resource, idOf('orders'));
      assert.equal(w.clusters.read('service', databases, COPY_NS, 'new'), undefined, 'its own copy is deleted');
      assert.equal(w.clusters.read('service', databases, COPY_NS, 'old')?.metadata.uid, orphan.metadata.uid, 'the earlier one is the sweep\'s to judge');
      assert.equal(w.clusters.read('tenant-a', databases, 'shop', 'orders'), undefined, 'let go once its copy is gone');
    } finally {
      await w.store.close();
    }
  });
});
