// A property over store states (issue #35): whatever the store holds when
// relsync starts — nothing, an older copy of itself, or another replica's
// store that saw another history — reconciles never delete a related copy
// that a live primary still references, while the claims are not known
// (no sweep has completed the cluster since the store was opened). Once every
// primary has been reconciled (what a complete sweep does), the store knows
// every claim again, and a copy goes exactly when its last claim ends.
//
// Four primaries share three ConfigMaps by reference (`.spec.configMapName`),
// on in-memory clusters (test/harness/memory-clusters.ts) with real SQLite
// stores; fast-check picks the histories, the store state and the order of the
// reconciles. With sweeps and LIST faults: test/unit/controller/sweep-store-states.test.ts.
// End-to-end, with real API servers and sweeps: test/e2e/store-loss.test.ts.
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import pino from 'pino';
import type { ObjectIdentity } from '../../../src/core/identity.js';
import type { ResourceType } from '../../../src/core/resource-type.js';
import { parseJsonPath } from '../../../src/rules/json-path.js';
import type { ResolvedRule } from '../../../src/rules/rule.js';
import { Template } from '../../../src/rules/template.js';
import { openStore, type OpenedStore } from '../../../src/store/database.js';
import { RelationStore } from '../../../src/store/relation-store.js';
import { ClaimKnowledge } from '../../../src/sync/claim-knowledge.js';
import { ContentHasher } from '../../../src/sync/content-hasher.js';
import { CopyNamespaces } from '../../../src/sync/copy-namespaces.js';
import { EventRecorder } from '../../../src/sync/event-recorder.js';
import { PrimaryReconciler } from '../../../src/sync/primary-reconciler.js';
import type { ResolvedResource } from '../../../src/sync/resolved-config.js';
import type { SyncMetrics } from '../../../src/sync/sync-metrics.js';
import { MemoryClusters } from '../../harness/memory-clusters.js';

const AGENT = 'unit';
const databases: ResourceType = { group: 'demo.relsync.dev', version: 'v1alpha1', resource: 'databases', kind: 'Database', namespaced: true };
const configMaps: ResourceType = { group: '', version: 'v1', resource: 'configmaps', kind: 'ConfigMap', namespaced: true };
const namespaces: ResourceType = { group: '', version: 'v1', resource: 'namespaces', kind: 'Namespace', namespaced: false };
const rule: ResolvedRule = {
  id: 'config', origin: 'platform', source: configMaps, destination: configMaps,
  finder: { kind: 'reference', path: parseJsonPath('.spec.configMapName'), destinationPath: undefined, rewrite: undefined },
  sourceNamespace: undefined, destinationNamespace: undefined, provenance: undefined, cleanup: 'MatchOrigin', where: 'resources[0].related.config', sourceType: configMaps, destinationType: configMaps,
};
const resource: ResolvedResource = {
  type: databases, selector: undefined, where: 'resources[0]', primaryType: databases, copyType: databases,
  naming: { namespace: Template.parse('{{ cluster }}-{{ namespace }}', ['cluster', 'namespace']), name: Template.parse('{{ name }}', ['name']) },
  related: [],
  rules: [rule],
};
const COPY_NS = 'tenant-a-shop';
const PRIMARIES = ['p0', 'p1', 'p2', 'p3'];
const CONFIGS = ['c0', 'c1', 'c2'];
const counter = () => ({ inc: () => undefined });
const metrics: SyncMetrics = { copiesWritten: counter(), copiesRemoved: counter(), copiesReleased: counter(), conflicts: counter(), unprovenSources: counter(), edgeSyncs: counter() };
const idOf = (name: string): ObjectIdentity => ({ cluster: 'tenant-a', group: databases.group, resource: databases.resource, namespace: 'shop', name });

/** Which ConfigMap each primary references. */
type Refs = readonly string[];

class World {
  readonly clusters = new MemoryClusters('service', ['tenant-a']);
  private readonly dir = mkdtempSync(join(tmpdir(), 'relsync-store-states-'));
  private stores = 0;

  constructor() {
    this.clusters.put('tenant-a', namespaces, { metadata: { name: 'shop' } });
    for (const c of CONFIGS) this.clusters.put('tenant-a', configMaps, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { namespace: 'shop', name: c }, data: { v: c } });
    for (const p of PRIMARIES) this.clusters.put('tenant-a', databases, { apiVersion: 'demo.relsync.dev/v1alpha1', kind: 'Database', metadata: { namespace: 'shop', name: p }, spec: { configMapName: CONFIGS[0] } });
  }

  refer(refs: Refs): void {
    PRIMARIES.forEach((p, i) => this.clusters.edit('tenant-a', databases, 'shop', p, (o) => void (o.spec = { configMapName: refs[i] })));
  }

  /** A fresh store file, or a copy of `from` (a backup, another replica's file). */
  async store(from?: OpenedStore): Promise<OpenedStore> {
    const path = join(this.dir, `store-${++this.stores}.db`);
    if (from) from.sqlite.exec(`VACUUM INTO '${path}'`);
    return openStore(path);
  }

  reconciler(opened: OpenedStore, claims: ClaimKnowledge, limits?: { relatedPerPrimary: number; copyBytes: number }): PrimaryReconciler {
    const logger = pino({ level: 'silent' });
    return new PrimaryReconciler({
      agentName: AGENT, clusters: this.clusters, store: new RelationStore(opened), logger, metrics, ...(limits ? { limits } : {}),
      recorder: new EventRecorder({ clusters: this.clusters, agentName: AGENT, logger }),
      hasher: new ContentHasher(Buffer.from('k')),
      copyNamespaces: new CopyNamespaces({ agentName: AGENT, clusters: this.clusters, logger, installation: undefined }),
      conflictRetryMs: 30_000,
      claims,
    });
  }

  /** The related copies in the service cluster, by name, with their uids. */
  copies(): Map<string, string> {
    const found = new Map<string, string>();
    for (const c of CONFIGS) {
      const copy = this.clusters.read('service', configMaps, COPY_NS, c);
      if (copy) found.set(c, copy.metadata.uid ?? '');
    }
    return found;
  }
}

const refs = fc.array(fc.constantFrom(...CONFIGS), { minLength: PRIMARIES.length, maxLength: PRIMARIES.length });

describe('reconciles with any store', () => {
  it('never delete a related copy a live primary references while the claims are not known, and end the last claim once they are', async () => {
    await fc.assert(
      fc.asyncProperty(
        refs, refs, refs,
        fc.constantFrom('empty', 'older', 'another replica\'s'),
        fc.nat({ max: PRIMARIES.length }),
        fc.shuffledSubarray(PRIMARIES, { minLength: PRIMARIES.length, maxLength: PRIMARIES.length }),
        fc.shuffledSubarray(PRIMARIES, { minLength: 1, maxLength: PRIMARIES.length }),
        async (history, now, later, state, backupAfter, order, laterOrder) => {
          const world = new World();
          const stores: OpenedStore[] = [];
          try {
            // Before: a replica synced every primary under `history`; its store was backed up after `backupAfter` of them.
            world.refer(history);
            const before = await world.store();
            stores.push(before);
            const first = world.reconciler(before, new ClaimKnowledge(true));
            let backup: OpenedStore | undefined;
            for (const [i, p] of PRIMARIES.entries()) {
              if (i === backupAfter) stores.push((backup = await world.store(before)));
              await first.reconcile(resource, idOf(p));
            }
            backup ??= await world.store(before);
            if (!stores.includes(backup)) stores.push(backup);
            // Another replica's store: it saw the primaries reference other ConfigMaps (its history is `later`, reversed).
            let other: OpenedStore | undefined;
            if (state === 'another replica\'s') {
              const copiesNow = world.copies();
              world.refer([...later].reverse());
              other = await world.store();
              stores.push(other);
              const theirs = world.reconciler(other, new ClaimKnowledge(true));
              for (const p of PRIMARIES) await theirs.reconcile(resource, idOf(p));
              // Their history is not the cluster's: the copies are as the first replica left them.
              for (const c of CONFIGS) if (!copiesNow.has(c)) world.clusters.remove('service', configMaps, COPY_NS, c);
              world.refer(history);
              for (const p of PRIMARIES) await first.reconcile(resource, idOf(p));
            }

            // relsync starts with that store; meanwhile the primaries changed to `now`.
            world.refer(now);
            const opened = state === 'empty' ? await world.store() : state === 'older' ? backup : other!;
            if (state === 'empty') stores.push(opened);
            const claims = new ClaimKnowledge(false);
            const restarted = world.reconciler(opened, claims);
            const wanted = new Set(now);
            const uids = world.copies();
            for (const p of order) {
              world.clusters.clearCalls();
              await restarted.reconcile(resource, idOf(p));
              const deleted = world.clusters.calls.filter((c) => c.verb === 'delete' && c.cluster === 'service' && c.resource === 'configmaps').map((c) => c.name);
              for (const d of deleted) assert.ok(!wanted.has(d), `${d} was deleted while a live primary references it (store ${state}, reconciling ${p})`);
              for (const [c, uid] of uids) if (wanted.has(c)) assert.equal(world.copies().get(c), uid, `the copy of ${c}, still wanted, kept its uid`);
            }
            // Every wanted copy exists once each primary was reconciled.
            for (const c of wanted) assert.ok(world.copies().has(c), `the copy of ${c} exists`);

            // Every primary reconciled since the store was opened: its claims are known. A later
            // change of some primaries keeps every copy some primary still claims (the ones not
            // reconciled again claim what they referenced under `now`, as the store says).
            claims.markComplete(['tenant-a']);
            world.refer(later);
            const claimed = new Set(PRIMARIES.map((p, i) => (laterOrder.includes(p) ? later[i]! : now[i]!)));
            const uidsLater = world.copies();
            for (const p of laterOrder) await restarted.reconcile(resource, idOf(p));
            for (const c of claimed) assert.ok(world.copies().has(c), `the copy of ${c}, claimed, exists`);
            // Claimed throughout by a primary that did not change: never deleted. (A copy whose only
            // claimer moves away while another primary starts to reference it may go and come
            // back: the second one's change is its own event, as it would be with any store.)
            const steady = new Set(PRIMARIES.flatMap((p, i) => (laterOrder.includes(p) ? [] : [now[i]!])));
            for (const [c, uid] of uidsLater) if (steady.has(c)) assert.equal(world.copies().get(c), uid, `the copy of ${c}, claimed throughout, kept its uid`);
          } finally {
            for (const s of stores) await s.close();
          }
        },
      ),
      { numRuns: 60 },
    );
  });

  it('keeps a shared copy that a primary kept as it was (its copy too big) still references, whatever the store knew of it', async () => {
    // p0 and p1 share c0. The store is lost (or an older one comes back) while p1 grows past
    // limits.copyBytes: p1 is kept as it was, and the store did not know its claim. The cluster is
    // completed (every primary reconciled, as a sweep does); then p0 moves to c1. c0 stays: p1's
    // claim was resolved anew when it was kept (before: the store knew none, and c0 was deleted).
    for (const state of ['empty', 'older'] as const) {
      const world = new World();
      const stores: OpenedStore[] = [];
      try {
        const limits = { relatedPerPrimary: 500, copyBytes: 4096 };
        world.refer(['c2', 'c2', 'c1', 'c1']);
        const first = await world.store();
        stores.push(first);
        const before = world.reconciler(first, new ClaimKnowledge(true), limits);
        for (const p of PRIMARIES) await before.reconcile(resource, idOf(p));
        const backup = await world.store(first); // knows p0 and p1 on c2
        stores.push(backup);
        world.refer(['c0', 'c0', 'c1', 'c1']);
        for (const p of PRIMARIES) await before.reconcile(resource, idOf(p));
        const uid = world.copies().get('c0');
        assert.ok(uid, 'the shared copy exists');

        world.clusters.edit('tenant-a', databases, 'shop', 'p1', (o) => void (o.spec = { configMapName: 'c0', blob: 'x'.repeat(8192) }));
        const opened = state === 'empty' ? await world.store() : backup;
        if (state === 'empty') stores.push(opened);
        const claims = new ClaimKnowledge(false);
        const restarted = world.reconciler(opened, claims, limits);
        const results = [];
        for (const p of PRIMARIES) results.push(await restarted.reconcile(resource, idOf(p)));
        assert.ok(results[1]?.relationsUnknown, 'p1 is kept as it was');
        assert.ok(!results.some((r) => r.claimsUnknown), 'its claims were resolved anew: the cluster can complete');
        claims.markComplete(['tenant-a']);

        world.clusters.edit('tenant-a', databases, 'shop', 'p0', (o) => void (o.spec = { configMapName: 'c1' }));
        await restarted.reconcile(resource, idOf('p0'));
        assert.equal(world.copies().get('c0'), uid, `${state} store: the copy p1 still references kept its uid`);
      } finally {
        for (const s of stores) await s.close();
      }
    }
  });
});
