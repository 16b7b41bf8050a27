// A property over store states and sweeps (issue #35): whatever the store
// holds when relsync starts — nothing, an older backup of itself, or the store
// of another replica (or shard) that saw another part of the history — and
// whatever LISTs fail or stop part way, a related copy in the service cluster
// is deleted only when, at that moment, its source is gone or no live primary
// references it; a primary's copy, only when its primary is not live. Each
// delete is judged as it is sent. And after a sweep whose LISTs all completed
// (and whose reconciles did not fail), the copies are exactly those the live
// primaries want.
//
// "References" is what relsync could know: a primary changed while relsync
// runs counts once a reconcile of it has acted on the change (until then the
// change is an event on its way, and another primary's reconcile may let a
// copy go that it brings back, as with any store). A change made before
// relsync started counts at once.
//
// Four primaries share three ConfigMaps by reference (`.spec.configMapName`),
// on in-memory clusters (test/harness/memory-clusters.ts) with real SQLite
// stores, the real Sweeper, work queue, reconciler and sweep snapshot, wired as
// controller/wiring.ts wires them. Three terms follow each other on the same
// clusters: replica B, replica A (whose store is backed up part way), then the
// relsync under test with an empty store, A's backup or B's store. fast-check
// picks the histories (references changed, primaries and ConfigMaps deleted,
// also between terms), the reconciles and sweeps in between, the LISTs that
// fail, and primaries whose watch events arrive as a sweep starts. Reconciles
// alone: test/unit/sync/store-states.test.ts. A failure prints its seed and
// path: `fc.assert(..., { seed, path })` replays it.
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import pino from 'pino';
import { defaultCopyPolicy } from '../../../src/config/copy-policy.js';
import { ClusterScope } from '../../../src/controller/cluster-scope.js';
import { EventRouter } from '../../../src/controller/event-router.js';
import { mergeKeys, primaryKeyString, type PrimaryKey } from '../../../src/controller/primary-key.js';
import { SweepReads } from '../../../src/cache/sweep-snapshot.js';
import { Sweeper, type SweepResult } from '../../../src/controller/sweeper.js';
import { planWatches } from '../../../src/controller/watch-plan.js';
import { WorkQueue, type Finished } from '../../../src/controller/work-queue.js';
import type { ObjectIdentity } from '../../../src/core/identity.js';
import type { ResourceType } from '../../../src/core/resource-type.js';
import type { ClusterSet } from '../../../src/kube/cluster-set.js';
import { LogicalClusters } from '../../../src/kube/logical-clusters.js';
import { parseJsonPath } from '../../../src/rules/json-path.js';
import type { ResolvedRule } from '../../../src/rules/rule.js';
import { Template } from '../../../src/rules/template.js';
import { Metrics } from '../../../src/server/metrics.js';
import { openStore, type OpenedStore } from '../../../src/store/database.js';
import { RelationStore } from '../../../src/store/relation-store.js';
import { SweepStore } from '../../../src/store/sweep-store.js';
import { ClaimKnowledge } from '../../../src/sync/claim-knowledge.js';
import { ConfigFingerprint } from '../../../src/sync/config-fingerprint.js';
import { ContentHasher } from '../../../src/sync/content-hasher.js';
import { CopyNamespaces } from '../../../src/sync/copy-namespaces.js';
import { CopyWriter } from '../../../src/sync/copy-writer.js';
import { EventRecorder } from '../../../src/sync/event-recorder.js';
import { LiveReads } from '../../../src/cache/object-reads.js';
import { PrimaryReconciler } from '../../../src/sync/primary-reconciler.js';
import type { ResolvedResource } from '../../../src/sync/resolved-config.js';
import { FakeClock } from '../../harness/fake-clock.js';
import { MemoryClusters, type Call } from '../../harness/memory-clusters.js';

const AGENT = 'unit';
const SERVICE = 'service';
const TENANT = 'tenant-a';
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
const limits = { relatedPerPrimary: 500, copyBytes: 1 << 20 };
const COPY_NS = 'tenant-a-shop';
const PRIMARIES = ['p0', 'p1', 'p2', 'p3'];
const CONFIGS = ['c0', 'c1', 'c2'];
const idOf = (name: string): ObjectIdentity => ({ cluster: TENANT, group: databases.group, resource: databases.resource, namespace: 'shop', name });
/** Two objects a page: a LIST of the primaries, or of the ConfigMaps, has pages to stop between. */
const PAGE_SIZE = 2;

/** The LISTs of a sweep that a fault may hit: its watch plan, one (cluster, type) each. */
const LISTS = {
  primaries: { cluster: TENANT, type: databases },
  sources: { cluster: TENANT, type: configMaps },
  'related copies': { cluster: SERVICE, type: configMaps },
  'primary copies': { cluster: SERVICE, type: databases },
} as const;
type ListName = keyof typeof LISTS;

/** A change of the world, by a user: not relsync's to know until its event comes (or, before relsync started, a LIST shows it). */
type Change =
  | { readonly kind: 'refer'; readonly primary: string; readonly config: string }
  | { readonly kind: 'delete primary'; readonly primary: string; readonly force: boolean }
  | { readonly kind: 'delete source'; readonly config: string };

/** A LIST that fails at once (afterPages 0) or after some of its pages. */
interface Fault {
  readonly list: ListName;
  readonly afterPages: number;
}

type Step =
  | Change
  | { readonly kind: 'reconcile'; readonly primary: string }
  | { readonly kind: 'sweep'; readonly faults: readonly Fault[]; readonly alongside: readonly string[] };

/** One relsync term: changes made while none ran, then what happens while it runs. */
interface Term {
  readonly before: readonly Change[];
  readonly steps: readonly Step[];
}

class World {
  readonly clusters = new MemoryClusters(SERVICE, [TENANT]);
  readonly dir = mkdtempSync(join(tmpdir(), 'relsync-sweep-store-states-'));
  private files = 0;

  constructor(refs: readonly string[], private readonly template: string) {
    this.clusters.pageSize = PAGE_SIZE;
    this.clusters.put(TENANT, namespaces, { metadata: { name: 'shop' } });
    for (const c of CONFIGS) this.clusters.put(TENANT, configMaps, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { namespace: 'shop', name: c }, data: { v: c } });
    PRIMARIES.forEach((p, i) => this.clusters.put(TENANT, databases, { apiVersion: 'demo.relsync.dev/v1alpha1', kind: 'Database', metadata: { namespace: 'shop', name: p }, spec: { configMapName: refs[i] } }));
  }

  /** A path for a new store file. */
  file(): string {
    return join(this.dir, `store-${++this.files}.db`);
  }

  /** A store file as relsync makes it where it finds none: a copy of one made so once (its migrations take the time). */
  emptyStore(): string {
    const path = this.file();
    copyFileSync(this.template, path);
    return path;
  }

  change(change: Change): void {
    const { clusters } = this;
    if (change.kind === 'delete source') return clusters.remove(TENANT, configMaps, 'shop', change.config);
    const primary = clusters.read(TENANT, databases, 'shop', change.primary);
    if (!primary) return;
    if (change.kind === 'refer') {
      clusters.edit(TENANT, databases, 'shop', change.primary, (o) => void (o.spec = { configMapName: change.config }));
      return;
    }
    // A user's delete: held by relsync's finalizer, unless someone removed that too (`force`).
    if (change.force || (primary.metadata.finalizers ?? []).length === 0) clusters.remove(TENANT, databases, 'shop', change.primary);
    else if (!primary.metadata.deletionTimestamp) clusters.edit(TENANT, databases, 'shop', change.primary, (o) => void (o.metadata.deletionTimestamp = new Date(0).toISOString()));
  }

  /** The ConfigMap a primary references now; undefined when it is not live (gone, or being deleted). */
  liveRef(primary: string): string | undefined {
    const o = this.clusters.read(TENANT, databases, 'shop', primary);
    return o && !o.metadata.deletionTimestamp ? String((o.spec as { configMapName: string }).configMapName) : undefined;
  }

  hasSource(config: string): boolean {
    return this.clusters.read(TENANT, configMaps, 'shop', config) !== undefined;
  }

  /** The ConfigMaps whose copy some live primary wants. */
  wanted(): Set<string> {
    return new Set(PRIMARIES.flatMap((p) => {
      const ref = this.liveRef(p);
      return ref !== undefined && this.hasSource(ref) ? [ref] : [];
    }));
  }

  /** The copies in the service cluster (related ones by ConfigMap, primary ones by primary), with their uids. */
  copies(): Map<string, string> {
    const found = new Map<string, string>();
    for (const c of CONFIGS) {
      const copy = this.clusters.read(SERVICE, configMaps, COPY_NS, c);
      if (copy) found.set(`configmaps/${c}`, copy.metadata.uid ?? '');
    }
    for (const p of PRIMARIES) {
      const copy = this.clusters.read(SERVICE, databases, COPY_NS, p);
      if (copy) found.set(`databases/${p}`, copy.metadata.uid ?? '');
    }
    return found;
  }
}

/** One relsync term on `world` with `opened` as its store, wired as controller/wiring.ts wires one. */
class Agent {
  /** Each primary's reference as this relsync's last reconcile of it read it; at its start, the one then. */
  readonly known = new Map<string, string | undefined>();
  readonly sweeper: Sweeper;
  private readonly queue: WorkQueue<PrimaryKey>;
  private readonly reads: SweepReads;
  private readonly store: RelationStore;
  private readonly recorder: EventRecorder;
  private readonly stopped = new AbortController();
  private readonly workers: Promise<void>;
  private closed: Promise<void> | undefined;

  /** Starts a term on the store file at `path` (opened as relsync opens it at start). */
  static async start(world: World, path: string): Promise<Agent> {
    return new Agent(world, await openStore(path), await LogicalClusters.load(undefined));
  }

  private constructor(world: World, readonly opened: OpenedStore, logical: LogicalClusters) {
    for (const p of PRIMARIES) this.known.set(p, world.liveRef(p));
    const clusters = world.clusters;
    const logger = pino({ level: 'silent' });
    const metrics = new Metrics();
    const hasher = new ContentHasher(Buffer.from('k'));
    // relsync's default resync.onStartup (true): no store is trusted to know every claim before a sweep completes its cluster.
    const claims = new ClaimKnowledge(false);
    this.store = new RelationStore(opened);
    this.recorder = new EventRecorder({ clusters, agentName: AGENT, logger });
    const live = new LiveReads(clusters);
    this.reads = new SweepReads(live);
    const copyNamespaces = new CopyNamespaces({ agentName: AGENT, clusters, logger, installation: undefined });
    const fingerprint = new ConfigFingerprint(hasher, { agentName: AGENT, policy: defaultCopyPolicy, limits }, () => copyNamespaces.pinsDigest());
    const onDeleted = (id: ObjectIdentity) => this.reads.noteObject(id);
    const reconciler = new PrimaryReconciler({
      agentName: AGENT, clusters, store: this.store, recorder: this.recorder, logger, metrics, copyNamespaces, hasher, limits, fingerprint, claims,
      sessionFor: (id, afterConflict) => this.reads.sessionFor(id, afterConflict), onDeleted,
    });
    // Time stands still: a failed reconcile's retry never comes by itself (the next step or sweep runs it).
    this.queue = new WorkQueue<PrimaryKey>({
      key: primaryKeyString, merge: mergeKeys, concurrency: 2, clock: new FakeClock(), random: () => 0.5,
      onError: (key, err) => logger.warn({ primary: key.id.name, err: (err as Error).stack }, 'reconcile failed'),
    });
    // A reconcile that failed, or kept the primary's relations as they were, has not acted on what it
    // read: its retry (or the primary's next event) will.
    this.workers = this.queue.start(this.stopped.signal, async (key) => {
      const ref = world.liveRef(key.id.name);
      const result = await reconciler.reconcile(key.resource, key.id, key);
      if (!result.relationsUnknown) this.known.set(key.id.name, ref);
      return result;
    });
    // The sweep asks of its clusters a few facts MemoryClusters has (isPlatform, platformOf), not the whole ClusterSet.
    const clusterSet = clusters as unknown as ClusterSet;
    // Asked only which primaries selector and inverse rules find among listed objects (sweep-skip.ts): none here.
    const router = new EventRouter({ agentName: AGENT, serviceCluster: SERVICE, hasher, isPlatform: (c) => clusters.isPlatform(c), resources: [resource], store: this.store, enqueue: (key) => void this.enqueue(key.id.name), logger });
    this.sweeper = new Sweeper({
      agentName: AGENT, clusters: clusterSet, scope: new ClusterScope(clusterSet, logical, logger), resources: [resource],
      plan: planWatches([resource], SERVICE, [TENANT], AGENT), store: this.store, sweeps: new SweepStore(opened.db), reads: this.reads, installations: copyNamespaces,
      relatedPerPrimary: limits.relatedPerPrimary, queue: this.queue, writer: new CopyWriter({ agentName: AGENT, clusters, metrics, logger, onDeleted }),
      metrics, logger, finders: router, fingerprint, claims,
    });
  }

  /** A watch event's way in (wiring.ts's queueKey): noted for a running sweep, then queued. */
  enqueue(primary: string): Promise<Finished> {
    this.reads.noteChanged(idOf(primary));
    return this.queue.addAndWait({ resource, id: idOf(primary) });
  }

  /** Ends the term: its workers stop, its Events are written, its store is closed. */
  close(): Promise<void> {
    this.closed ??= (async () => {
      this.stopped.abort();
      await this.workers;
      await this.recorder.idle();
      await this.store.flushTouches();
      await this.opened.close();
    })();
    return this.closed;
  }
}

/**
 * Runs one term's steps, checking every delete of a copy as it is sent, each step's copies kept,
 * and, after each sweep whose LISTs all completed, that the copies are what the live primaries want.
 */
async function run(world: World, agent: Agent, name: string, steps: readonly Step[]): Promise<void> {
  const { clusters } = world;
  /** The copies that may not go now, and why. */
  const protectedCopies = (): Map<string, string> => {
    const kept = new Map<string, string>();
    for (const p of PRIMARIES) {
      const ref = world.liveRef(p);
      if (ref === undefined) continue;
      kept.set(`databases/${p}`, `its primary ${p} is live`);
      if (world.hasSource(ref) && agent.known.get(p) === ref) kept.set(`configmaps/${ref}`, `its source exists and the live primary ${p} references it`);
    }
    return kept;
  };
  const violations: string[] = [];
  clusters.onCall = (call: Call) => {
    if (call.verb !== 'delete' || call.cluster !== SERVICE || call.namespace !== COPY_NS) return;
    const why = protectedCopies().get(`${call.resource}/${call.name}`);
    if (why) violations.push(`the copy ${call.resource}/${call.name} was deleted while ${why}`);
  };
  for (const [index, step] of steps.entries()) {
    const where = `${name}, step ${index} (${JSON.stringify(step)})`;
    const before = world.copies();
    const kept = protectedCopies();
    let sweep: SweepResult | undefined;
    if (step.kind === 'reconcile') await agent.enqueue(step.primary);
    else if (step.kind === 'sweep') {
      for (const { list, afterPages } of step.faults) {
        const { cluster, type } = LISTS[list];
        clusters.fail({ verb: 'list', cluster, resource: type.resource, status: afterPages === 0 ? 503 : 410, reason: afterPages === 0 ? 'ServiceUnavailable' : 'Expired', message: `the LIST of ${list} broke after ${afterPages} pages`, afterPages });
      }
      // Watch events of these primaries arrive as the sweep starts: their reconciles run beside it.
      [sweep] = await Promise.all([agent.sweeper.sweep('schedule'), ...step.alongside.map((p) => agent.enqueue(p))]);
      // A fault this sweep did not meet is not carried into later steps that declared none.
      clusters.clearFaults();
    } else world.change(step);
    assert.deepEqual(violations, [], where);
    const after = world.copies();
    for (const [copy, uid] of before) if (kept.has(copy)) assert.equal(after.get(copy), uid, `${where}: the copy ${copy} kept its uid (${kept.get(copy)})`);
    // A sweep with no LIST fault completes: when none of its reconciles failed either (one beside
    // it may make it read a primary's version that relsync's own write replaced: a 409, retried
    // later), the copies are exactly those the live primaries want.
    if (sweep && step.kind === 'sweep' && step.faults.length === 0) {
      assert.equal(sweep.status, 'done', `${where}: the sweep completed`);
      if (step.alongside.length === 0) assert.equal(sweep.errors, 0, `${where}: nothing failed in a sweep alone without faults`);
      if (sweep.errors === 0) {
        const expected = [...[...world.wanted()].map((c) => `configmaps/${c}`), ...PRIMARIES.filter((p) => world.liveRef(p) !== undefined).map((p) => `databases/${p}`)].sort();
        assert.deepEqual([...after.keys()].sort(), expected, `${where}: after a sweep whose LISTs completed, the copies are exactly those the live primaries want`);
      }
    }
  }
  clusters.onCall = undefined;
}

const primary = fc.constantFrom(...PRIMARIES);
const config = fc.constantFrom(...CONFIGS);
// Mostly new references: deletes end a history soon.
const change: fc.Arbitrary<Change> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ kind: fc.constant('refer' as const), primary, config }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('delete primary' as const), primary, force: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('delete source' as const), config }) },
);
const fault: fc.Arbitrary<Fault> = fc.record({ list: fc.constantFrom(...(Object.keys(LISTS) as ListName[])), afterPages: fc.nat({ max: 2 }) });
const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 3, arbitrary: change },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('reconcile' as const), primary }) },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('sweep' as const),
      // One fault per LIST at most: each LIST is made once per sweep.
      faults: fc.oneof(fc.constant([]), fc.uniqueArray(fault, { minLength: 1, maxLength: 2, selector: (f) => f.list })),
      alongside: fc.uniqueArray(primary, { maxLength: 2 }),
    }),
  },
);
const term: fc.Arbitrary<Term> = fc.record({ before: fc.array(change, { maxLength: 3 }), steps: fc.array(step, { maxLength: 10 }) });

describe('sweeps with any store', () => {
  it('delete a copy only when its source or owner is provably gone, and leave exactly the wanted copies after a complete sweep', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'relsync-sweep-store-template-'));
    const template = join(dir, 'empty.db');
    await (await openStore(template)).close();
    await fc.assert(
      fc.asyncProperty(
        fc.array(config, { minLength: PRIMARIES.length, maxLength: PRIMARIES.length }),
        term, term, term,
        fc.nat(),
        fc.constantFrom('empty', 'older', 'another replica\'s'),
        async (refs, b, a, now, backupAt, state) => {
          const world = new World(refs, template);
          const open: Agent[] = [];
          const start = async (path: string) => {
            const agent = await Agent.start(world, path);
            open.push(agent);
            return agent;
          };
          try {
            // Replica B's term, on its own store.
            for (const c of b.before) world.change(c);
            const storeB = world.emptyStore();
            const replicaB = await start(storeB);
            await run(world, replicaB, 'replica B', b.steps);
            await replicaB.close();
            // Replica A's term, on a store of its own, backed up part way (as a file copy would be).
            for (const c of a.before) world.change(c);
            const replicaA = await start(world.emptyStore());
            const backup = world.file();
            const backupAfter = backupAt % (a.steps.length + 1);
            await run(world, replicaA, 'replica A', a.steps.slice(0, backupAfter));
            replicaA.opened.sqlite.exec(`VACUUM INTO '${backup}'`);
            await run(world, replicaA, 'replica A after its backup', a.steps.slice(backupAfter));
            await replicaA.close();
            // relsync starts with that store.
            for (const c of now.before) world.change(c);
            const agent = await start(state === 'empty' ? world.emptyStore() : state === 'older' ? backup : storeB);
            await run(world, agent, 'relsync', now.steps);
            // However it ended, a sweep whose LISTs complete leaves exactly the wanted copies.
            await run(world, agent, 'relsync at last', [{ kind: 'sweep', faults: [], alongside: [] }]);
          } finally {
            for (const agent of open) await agent.close();
            rmSync(world.dir, { recursive: true, force: true });
          }
        },
      ),
      { numRuns: 100 },
    );
    rmSync(dir, { recursive: true, force: true });
  });
});
