/**
 * The parts of one term, built and connected: connections, resolved types,
 * the store, reconciler, work queue, router, watch plan and sweeper. Kept
 * apart from running them because a term is wired afresh after a lost lease
 * (nothing of a term that stopped may write beside a new leader), and a
 * one-shot sweep wires the same parts without any watch.
 */
import type { Logger } from 'pino';
import type { Config } from '../config/config.js';
import { ClusterSet } from '../kube/cluster-set.js';
import type { DryRunLedger } from '../kube/dry-run-client.js';
import type { ClusterConfig } from '../kube/cluster-config.js';
import { LogicalClusters } from '../kube/logical-clusters.js';
import { sameType, type ResourceType } from '../core/resource-type.js';
import { identityProblem, type ObjectIdentity } from '../core/identity.js';
import { CheckpointStore } from '../store/checkpoint-store.js';
import type { OpenedStore } from '../store/database.js';
import { LogicalClusterStore } from '../store/logical-cluster-store.js';
import { RelationStore } from '../store/relation-store.js';
import { SweepStore } from '../store/sweep-store.js';
import type { Metrics } from '../server/metrics.js';
import { EventRecorder } from '../sync/event-recorder.js';
import { OwnWrites } from '../cache/own-writes.js';
import { CopyNamespaces } from '../sync/copy-namespaces.js';
import { PrimaryAdmission } from '../sync/primary-admission.js';
import { CopyBudget } from '../sync/copy-budget.js';
import { RewritePace } from '../sync/rewrite-pace.js';
import { CopyBytesStore } from '../store/copy-bytes-store.js';
import { CopyWriter, type CopyWriterDeps } from '../sync/copy-writer.js';
import { isServiceOriginCopy } from '../sync/copy-of.js';
import { ContentHasher } from '../sync/content-hasher.js';
import { ConfigFingerprint } from '../sync/config-fingerprint.js';
import { ClaimKnowledge } from '../sync/claim-knowledge.js';
import { PrimaryReconciler } from '../sync/primary-reconciler.js';
import { resolveConfig, type ResolvedResource } from '../sync/resolved-config.js';
import { CachedReads, LiveReadsSeen, ObjectCache } from '../cache/object-cache.js';
import { FinderIndex } from '../cache/finder-index.js';
import { finderIndexDefinitions } from '../sync/finder-definitions.js';
import { fieldManagerName } from '../core/marks.js';
import { hasFieldsToFold } from '../sync/field-ownership.js';
import { LiveReads, type ObjectReads } from '../cache/object-reads.js';
import { Checkpointer } from './checkpointer.js';
import { ClusterScope } from './cluster-scope.js';
import { EventRouter } from './event-router.js';
import { FirstLists } from './first-lists.js';
import { NamespaceFilter } from './namespace-filter.js';
import { expandKcpEndpoints } from './kcp-workspaces.js';
import type { PrimaryKey } from './primary-key.js';
import { Sweeper } from './sweeper.js';
import { SweepReads } from '../cache/sweep-snapshot.js';
import { planWatches, type PlannedWatch } from './watch-plan.js';
import type { WorkQueue } from './work-queue.js';
import { countFromZero, termQueue } from './term-queue.js';
import { Backoff } from '../util/backoff.js';
import { isoTime, type Clock } from '../util/clock.js';
import { ByteBudget } from '../util/byte-budget.js';

export interface Wiring {
  /** Whether the store knows every claim of a cluster yet (claim-knowledge.ts). */
  readonly claims: ClaimKnowledge;
  /** The platform clusters connected to, kcp endpoint slices expanded (kcp-workspaces.ts): what the slices are followed against. */
  readonly platforms: readonly ClusterConfig[];
  readonly clusters: ClusterSet;
  readonly logical: LogicalClusters;
  readonly scope: ClusterScope;
  readonly resources: readonly ResolvedResource[];
  readonly store: RelationStore;
  readonly checkpoints: CheckpointStore;
  readonly checkpointer: Checkpointer;
  readonly queue: WorkQueue<PrimaryKey>;
  /** Which watches have listed once: the queue holds a primary until those it reads from have. */
  readonly firstLists: FirstLists;
  readonly reconciler: PrimaryReconciler;
  readonly router: EventRouter;
  readonly plan: readonly PlannedWatch[];
  readonly sweeper: Sweeper;
  readonly sweepReads: SweepReads;
  readonly copyNamespaces: CopyNamespaces;
  readonly hasher: ContentHasher;
  /** What the watches delivered, for reconciles to read; undefined with cache.bytes 0. */
  readonly cache: ObjectCache | undefined;
  /** What selector and inverse rules can find without a LIST (finder-index.ts); undefined with cache.bytes 0. */
  readonly finderIndex: FinderIndex | undefined;
  /** Kubernetes Events on primaries, written in the background: waited for (briefly) before the clusters close. */
  readonly recorder: EventRecorder;
  /** Queues a primary by identity; false when no configured resource has its type any more. */
  readonly enqueue: (id: ObjectIdentity) => boolean;
}
export interface WiringOptions {
  readonly config: Config;
  readonly store: OpenedStore;
  readonly logger: Logger;
  readonly metrics: Metrics;
  /** Whether this process knows which installation it is (Manager.knowsInstallation). */
  readonly knowsInstallation: () => boolean;
  /** A dry run (`relsync sweep --dry-run`): nothing is written, what would be is recorded here. */
  readonly dryRun?: DryRunLedger;
  /**
   * One shard's wiring (shard-term.ts): only these platform clusters are connected to (default:
   * the config's), and of kcp's logical clusters only those `ownsLogical` says. The config stays
   * whole for the checks that look across every tenant.
   */
  readonly shard?: { readonly platforms: readonly ClusterConfig[]; readonly ownsLogical: (name: string) => boolean };
  /** The time of day and the timers of everything wired (Manager's: the system's in production). */
  readonly clock: Clock;
}

export async function wire(options: WiringOptions, signal: AbortSignal): Promise<Wiring> {
  const { config, logger, clock } = options;
  const logical = await LogicalClusters.load(new LogicalClusterStore(options.store.db, clock), options.shard?.ownsLogical);
  // A kcp platform's endpoint slice of several URLs (kcp shards): a platform per URL.
  const platforms = await expandKcpEndpoints(options.shard?.platforms ?? config.platformClusters, logger, signal, clock);
  const clusters = connect(options, platforms, logical);
  try {
    const base = await baseOf(options, { clusters, platforms, logical });
    return controlParts(options, base, syncParts(options, base));
  } catch (err) {
    clusters.close();
    throw err;
  }
}

/** The clients of every cluster, their requests counted as client-go counts them. */
function connect(options: WiringOptions, platforms: readonly ClusterConfig[], logical: LogicalClusters): ClusterSet {
  const { config, metrics } = options;
  return new ClusterSet(config.serviceCluster, platforms, {
    observer: (cluster, method, code, seconds) => {
      metrics.apiRequests.inc({ cluster, method, code: String(code) });
      if (seconds !== undefined) metrics.restClientDuration.observe({ verb: method, host: cluster }, seconds);
      // client-go names a watch's request GET
      metrics.restClientRequests.inc({ code: String(code), method: method === 'WATCH' ? 'GET' : method, host: cluster });
    },
    limitObserver: (cluster, limit, throttled) => {
      metrics.clientConcurrencyLimit.set({ cluster }, limit);
      if (throttled) metrics.clientThrottled.inc({ cluster });
    },
    logicalClusters: logical,
    listPages: config.limits.listPages,
    maxParsedBytes: config.limits.parsedBytes,
    parseBudget: new ByteBudget({ capacity: config.limits.parsedBytesInFlight, onWaited: (ms) => metrics.parseWaits.inc(ms / 1000) }),
    ...(options.dryRun ? { dryRun: options.dryRun } : {}),
  });
}

/** What every other part of a term is built on: the clusters, the types, the store and the reads. */
interface Base extends Pick<Wiring, 'clusters' | 'platforms' | 'logical' | 'resources' | 'store' | 'checkpoints' | 'recorder' | 'claims'> {
  readonly ownWrites: OwnWrites;
  readonly reads: Reads;
}

async function baseOf(options: WiringOptions, connected: Pick<Base, 'clusters' | 'platforms' | 'logical'>): Promise<Base> {
  const { config, logger, metrics, clock } = options;
  const { clusters } = connected;
  const resources = await resolveConfig(config, clusters);
  const store = new RelationStore(options.store, clock);
  return {
    ...connected,
    resources,
    store,
    checkpoints: new CheckpointStore(options.store.db, clock),
    // Events through clients the write fence lets through: a term that ended may still say what its last reconciles found.
    recorder: new EventRecorder({ clusters: { client: (cluster, type) => clusters.eventsClient(cluster, type) }, agentName: config.agentName, logger, events: metrics.kubeEvents, clock }),
    ownWrites: new OwnWrites({ clock }),
    reads: readsOf(options, clusters, resources),
    // Until a sweep has seen a cluster completely, the store may not know every claim there
    // (claim-knowledge.ts). Without a startup sweep, a store that knows primaries is taken as
    // current (resync.onStartup false says so); a new or lost one never is: it gets a startup
    // sweep all the same (leader-term.ts), which completes it.
    claims: new ClaimKnowledge(!config.resync.onStartup && (await store.knowsAnyPrimary()), undefined, undefined, isoTime(clock)),
  };
}

/** How reconciles and sweeps read the clusters (cache/). */
interface Reads extends Pick<Wiring, 'cache' | 'finderIndex' | 'sweepReads'> {
  readonly live: ObjectReads;
  /** A version relsync wrote or read live: the cache never reads back an older one still on its way. */
  readonly onWritten: CopyWriterDeps['onWritten'];
}

// Reconciles read what the watches delivered (cache/object-cache.ts), and the API servers for the rest;
// a sweep's reconciles read from its LISTs, unless a watch event routed to the primary since (cache/sweep-snapshot.ts).
function readsOf(options: WiringOptions, clusters: ClusterSet, resources: readonly ResolvedResource[]): Reads {
  const { config, logger } = options;
  // Of managedFields the cache keeps only those a copy write would fold (copy-writer.ts): the rest is room.
  const fieldManager = fieldManagerName(config.agentName);
  const cache = config.cache.bytes > 0 ? new ObjectCache(config.cache.bytes, undefined, (mf) => hasFieldsToFold(mf, fieldManager)) : undefined;
  const live = cache ? new LiveReadsSeen(cache, new LiveReads(clusters)) : new LiveReads(clusters);
  // Selector and inverse rules find candidates by name from the watches (finder-index.ts), within cache.indexBytes.
  const indexBudget = config.cache.indexBytes;
  const finderIndex = cache && indexBudget > 0
    ? new FinderIndex(config.agentName, finderIndexDefinitions(resources), {
        isService: (c) => c === clusters.service.name,
        budgetBytes: indexBudget,
        onOverBudget: (cluster, type) =>
          logger.warn({ cluster, type: type.resource, budgetBytes: indexBudget }, 'the finder index is over cache.indexBytes: selector and inverse rules LIST this type (each LIST walks its namespace on the API server) until its next list; raise cache.indexBytes'),
      })
    : undefined;
  const sweepReads = new SweepReads(live, cache ? new CachedReads(cache, live, finderIndex) : live, cache);
  return { cache, live, finderIndex, sweepReads, onWritten: cache ? (id, version, after) => cache.saw(id, version, after) : undefined };
}

/** What decides and writes copies: the reconciler and what it answers to. */
interface SyncParts extends Pick<Wiring, 'hasher' | 'copyNamespaces' | 'reconciler'> {
  readonly fingerprint: ConfigFingerprint;
  readonly admission: PrimaryAdmission;
  readonly budget: CopyBudget;
}

function syncParts(options: WiringOptions, base: Base): SyncParts {
  const { config, logger, metrics, clock } = options;
  const { clusters, store, reads } = base;
  // The key of related copies' content hashes: read (or made) at the start of each term, after the checks that may refuse.
  const hasher = new ContentHasher();
  // An installation is its Lease (its replicas share it), also with leader election off; unknown
  // where the Lease's namespace is only the fallback (a sweep run by hand outside the cluster).
  const le = config.leaderElection;
  const installation = options.knowsInstallation() ? `${le.namespace}/${le.name}` : undefined;
  const copyNamespaces = new CopyNamespaces({ agentName: config.agentName, clusters, logger, installation, clock });
  const fingerprint = new ConfigFingerprint(hasher, { agentName: config.agentName, policy: config.copy, limits: config.limits }, () => copyNamespaces.pinsDigest());
  // Which new primaries relsync takes on: within the limits, so that memory follows the config.
  const admission = new PrimaryAdmission({ perCluster: config.limits.primariesPerCluster, total: config.limits.primaries }, store, clock);
  const budget = copyBudget(options);
  const reconciler = new PrimaryReconciler({
    agentName: config.agentName, clusters, store, recorder: base.recorder, logger, metrics, ownWrites: base.ownWrites, copyNamespaces, hasher, limits: config.limits, fingerprint, claims: base.claims, admission, budget,
    sessionFor: (id, afterConflict) => reads.sweepReads.sessionFor(id, afterConflict),
    copyPolicy: config.copy,
    // A copy deleted by one reconcile is read live by the next ones of a sweep, not from its LIST.
    onDeleted: (id) => reads.sweepReads.noteObject(id),
    onWritten: reads.onWritten,
    clock,
  });
  return { hasher, copyNamespaces, fingerprint, admission, budget, reconciler };
}

/** What each tenant's copies take in the service cluster's etcd, within its budget. */
function copyBudget(options: WiringOptions): CopyBudget {
  const { config, metrics, clock } = options;
  const limits = config.limits;
  return new CopyBudget({ bytesPerCluster: limits.copiedBytesPerCluster, copiesPerCluster: limits.copiesPerCluster, bytes: limits.copiedBytes }, new CopyBytesStore(options.store.db), {
    // One series per cluster (kcp: workspace) that has copies; it goes with its last copy.
    gauge: (tenant, usage) => {
      if (usage.copies <= 0) {
        metrics.tenantCopyBytes.remove({ cluster: tenant });
        metrics.tenantCopies.remove({ cluster: tenant });
        return;
      }
      metrics.tenantCopyBytes.set({ cluster: tenant }, usage.bytes);
      metrics.tenantCopies.set({ cluster: tenant }, usage.copies);
    },
    clock,
    // Updates and deletes leave old revisions in etcd until compaction: paced per tenant.
    pace: new RewritePace({ bytesPerSecondPerCluster: limits.rewriteBytesPerSecondPerCluster, bytesPerSecond: limits.rewriteBytesPerSecond }, clock),
  });
}

/** What runs the work: the watch plan, the queue, the router and the sweeper. */
function controlParts(options: WiringOptions, base: Base, sync: SyncParts): Wiring {
  const { config, logger, metrics, clock } = options;
  const { clusters, logical, resources, reads } = base;
  const checkpointer = new Checkpointer(base.checkpoints, logger, clock);
  const plan = planWatches(resources, clusters.service.name, clusters.platforms.map((p) => p.name), config.agentName);
  // The informer contract, per cluster: a primary runs once the watches it reads from have listed.
  const firstLists = new FirstLists({
    plan,
    resources,
    serviceCluster: clusters.service.name,
    platforms: clusters.platforms.map((p) => p.name),
    watchedAs: (cluster) => logical.platformOf(cluster) ?? cluster,
    onListed: (ready) => {
      const released = queue.release();
      for (const cluster of ready) {
        const held = released.filter((k) => k.id.cluster === cluster || logical.platformOf(k.id.cluster) === cluster).length;
        logger.info({ cluster, released: held }, 'every watch its primaries read has listed once; their reconciles run');
      }
    },
  });
  const queue = termQueue({ config, logger, metrics, clock, firstLists: () => firstLists, checkpointer, admission: sync.admission });
  countFromZero(metrics, resources);
  // Every way into the queue notes the primary first: a sweep then reads it live, and a checkpoint never gets ahead of it.
  const queueKey = (key: PrimaryKey) => {
    reads.sweepReads.noteChanged(key.id);
    checkpointer.noteQueued(key.id);
    queue.add(key);
  };
  const enqueue = (id: ObjectIdentity) => {
    const resource = resources.find((r) => sameType(r.primaryType, id));
    if (!resource) return false;
    queueKey({ resource, id });
    return true;
  };
  const router = eventRouter(options, base, sync, queueKey);
  const scope = new ClusterScope(clusters, logical, logger);
  const sweeper = sweeperOf(options, { base, sync, plan, scope, queue, router });
  const { cache, finderIndex, sweepReads } = reads;
  const { claims, platforms, store, checkpoints, recorder } = base;
  const { reconciler, copyNamespaces, hasher } = sync;
  return { claims, platforms, clusters, logical, scope, resources, store, checkpoints, checkpointer, queue, firstLists, reconciler, router, plan, sweeper, sweepReads, copyNamespaces, hasher, enqueue, cache, finderIndex, recorder };
}

function eventRouter(options: WiringOptions, base: Base, sync: SyncParts, enqueue: (key: PrimaryKey) => void): EventRouter {
  const { config, logger, metrics } = options;
  const { clusters, resources, store } = base;
  return new EventRouter({
    agentName: config.agentName,
    hasher: sync.hasher,
    serviceCluster: clusters.service.name,
    isPlatform: (cluster) => clusters.isPlatform(cluster),
    metricsCluster: (cluster) => clusters.metricsName(cluster),
    resources,
    store,
    enqueue,
    admission: sync.admission,
    logger,
    metrics,
    ownWrites: base.ownWrites,
    cache: base.reads.cache,
    // A store lost or older than the service cluster: what the copies there take is counted again.
    copiesListed: (copies) => sync.budget.listed(copies),
    namespaces: new NamespaceFilter({ resources, store, logger, enqueue, primariesIn: primariesIn(config.agentName, clusters, sync.admission) }),
  });
}

/**
 * The primaries of one namespace that admission takes, for a namespace that comes into scope.
 * Identities only are kept, a page at a time (relsync's own copies on a platform are never
 * primaries): a namespace of a million past the limits costs its LIST, not a million keys.
 */
function primariesIn(agentName: string, clusters: ClusterSet, admission: PrimaryAdmission) {
  return async (cluster: string, type: ResourceType, namespace: string): Promise<ObjectIdentity[]> => {
    const ids: ObjectIdentity[] = [];
    try {
      for await (const page of clusters.client(cluster, type).pages({ namespace })) {
        // One too costly to read is a primary all the same: its reconcile says why it is not synced.
        for (const item of [...page.items, ...(page.refused ?? []).map((r) => r.object)]) {
          if (isServiceOriginCopy(agentName, clusters.service.name, item)) continue;
          const id = { cluster, group: type.group, resource: type.resource, namespace, name: item.metadata.name ?? '' };
          if (!identityProblem(id) && (await admission.mayQueue(id))) ids.push(id);
        }
      }
    } catch (err) {
      // A later page failed (its server may be the tenant's): what was counted for the ids taken goes back.
      for (const id of ids) admission.settled(id);
      throw err;
    }
    return ids;
  };
}

interface SweeperParts extends Pick<Wiring, 'plan' | 'scope' | 'queue' | 'router'> {
  readonly base: Base;
  readonly sync: SyncParts;
}

function sweeperOf(options: WiringOptions, parts: SweeperParts): Sweeper {
  const { config, logger, metrics, clock } = options;
  const { base, sync } = parts;
  const { clusters, reads } = base;
  const writer = new CopyWriter({
    agentName: config.agentName, clusters, metrics, ownWrites: base.ownWrites, logger, budget: sync.budget, clock,
    onDeleted: (id) => reads.sweepReads.noteObject(id),
    onWritten: reads.onWritten,
  });
  return new Sweeper({
    agentName: config.agentName, clusters, scope: parts.scope, resources: base.resources, plan: parts.plan, store: base.store,
    sweeps: new SweepStore(options.store.db, clock), reads: reads.sweepReads, installations: sync.copyNamespaces,
    snapshotBytes: config.resync.snapshotBytes, relatedPerPrimary: config.limits.relatedPerPrimary, queue: parts.queue, writer,
    metrics, logger, finders: parts.router, fingerprint: sync.fingerprint, claims: base.claims, admission: sync.admission,
    copiesListed: (copies) => sync.budget.listed(copies),
    copiesRecounted: () => sync.budget.recounted(),
    clock,
  });
}

/** A fresh wiring for a new term; retries while the clusters do not answer. */
export async function rewire(options: WiringOptions, signal: AbortSignal): Promise<Wiring> {
  const backoff = new Backoff({ initialMs: 500, maxMs: 5_000 });
  for (;;) {
    try {
      return await wire(options, signal);
    } catch (err) {
      if (signal.aborted) throw err;
      const retryInMs = backoff.next();
      options.logger.warn({ err: (err as Error).message, retryInMs }, 'could not wire up for a new term; will retry');
      await options.clock.sleep(retryInMs, signal);
    }
  }
}
