/**
 * The parts of one term, built and connected: connections, resolved types,
 * the store, reconciler, work queue, router, watch plan and sweeper. Kept
 * apart from running them because a term is wired afresh after a lost lease
 * (nothing of a term that stopped may write beside a new leader), and a
 * one-shot sweep wires the same parts without any watch.
 */
import type { Logger } from 'pino';
import { hasManyClusters, type Config } from '../config/config.js';
import { ClusterSet } from '../kube/cluster-set.js';
import type { DryRunLedger } from '../kube/dry-run-client.js';
import type { ClusterConfig } from '../kube/cluster-config.js';
import { LogicalClusters } from '../kube/logical-clusters.js';
import { sameType, typeName } from '../core/resource-type.js';
import { describeIdentity, identityProblem, type ObjectIdentity } from '../core/identity.js';
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
import { CopyWriter } from '../sync/copy-writer.js';
import { isServiceOriginCopy } from '../sync/copy-of.js';
import { ContentHasher } from '../sync/content-hasher.js';
import { ConfigFingerprint } from '../sync/config-fingerprint.js';
import { ClaimKnowledge } from '../sync/claim-knowledge.js';
import { PrimaryReconciler } from '../sync/primary-reconciler.js';
import { resolveConfig, type ResolvedResource } from '../sync/resolved-config.js';
import { CachedReads, LiveReadsSeen, ObjectCache } from '../cache/object-cache.js';
import { FinderIndex } from '../sync/finder-index.js';
import { fieldManagerName } from '../core/marks.js';
import { hasFieldsToFold } from '../sync/field-ownership.js';
import { LiveReads } from '../cache/object-reads.js';
import { Checkpointer } from './checkpointer.js';
import { ClusterScope } from './cluster-scope.js';
import { EventRouter } from './event-router.js';
import { FirstLists } from './first-lists.js';
import { NamespaceFilter } from './namespace-filter.js';
import { expandKcpEndpoints } from './kcp-workspaces.js';
import { primaryKeyPolicy, type PrimaryKey } from './primary-key.js';
import { Sweeper } from './sweeper.js';
import { SweepReads } from '../cache/sweep-snapshot.js';
import { planWatches, type PlannedWatch } from './watch-plan.js';
import { WorkQueue } from './work-queue.js';
import { Backoff } from '../util/backoff.js';
import { asReconcile } from '../util/log-context.js';
import { isLastingRefusal } from '../kube/api-error.js';
import { isoTime, type Clock } from '../util/clock.js';
import { ByteBudget } from '../util/byte-budget.js';

/** The labels of relsync's one work queue in controller-runtime's workqueue_* metrics. */
export const QUEUE = { name: 'relsync', controller: 'relsync' } as const;

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
  const { config, logger, metrics, clock } = options;
  const db = options.store.db;
  const logical = await LogicalClusters.load(new LogicalClusterStore(db, clock), options.shard?.ownsLogical);
  // A kcp platform's endpoint slice of several URLs (kcp shards): a platform per URL.
  const platforms = await expandKcpEndpoints(options.shard?.platforms ?? config.platformClusters, logger, signal, clock);
  const clusters = new ClusterSet(config.serviceCluster, platforms, {
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
  try {
    const resources = await resolveConfig(config, clusters);
    const store = new RelationStore(options.store, clock);
    const checkpoints = new CheckpointStore(db, clock);
    const checkpointer = new Checkpointer(checkpoints, logger, clock);
    // Events through clients the write fence lets through: a term that ended may still say what its last reconciles found.
    const recorder = new EventRecorder({ clusters: { client: (cluster, type) => clusters.eventsClient(cluster, type) }, agentName: config.agentName, logger, events: metrics.kubeEvents, clock });
    const ownWrites = new OwnWrites({ clock });
    // Reconciles read what the watches delivered (cache/object-cache.ts), and the API servers for the rest;
    // a sweep's reconciles read from its LISTs, unless a watch event routed to the primary since (cache/sweep-snapshot.ts).
    // Of managedFields it keeps only those a copy write would fold (copy-writer.ts): the rest is room.
    const fieldManager = fieldManagerName(config.agentName);
    const cache = config.cache.bytes > 0 ? new ObjectCache(config.cache.bytes, undefined, (mf) => hasFieldsToFold(mf, fieldManager)) : undefined;
    const live = cache ? new LiveReadsSeen(cache, new LiveReads(clusters)) : new LiveReads(clusters);
    // Selector and inverse rules find candidates by name from the watches (finder-index.ts), within cache.indexBytes.
    const indexBudget = config.cache.indexBytes;
    const finderIndex = cache && indexBudget > 0
      ? new FinderIndex(config.agentName, resources, {
          isService: (c) => c === clusters.service.name,
          budgetBytes: indexBudget,
          onOverBudget: (cluster, type) =>
            logger.warn({ cluster, type: type.resource, budgetBytes: indexBudget }, 'the finder index is over cache.indexBytes: selector and inverse rules LIST this type (each LIST walks its namespace on the API server) until its next list; raise cache.indexBytes'),
        })
      : undefined;
    const sweepReads = new SweepReads(live, cache ? new CachedReads(cache, live, finderIndex) : live, cache);
    // An installation is its Lease (its replicas share it), also with leader election off; unknown
    // where the Lease's namespace is only the fallback (a sweep run by hand outside the cluster).
    const le = config.leaderElection;
    // The key of related copies' content hashes: read (or made) at the start of each term, after the checks that may refuse.
    const hasher = new ContentHasher();
    const installation = options.knowsInstallation() ? `${le.namespace}/${le.name}` : undefined;
    const copyNamespaces = new CopyNamespaces({ agentName: config.agentName, clusters, logger, installation, clock });
    const fingerprint = new ConfigFingerprint(hasher, { agentName: config.agentName, policy: config.copy, limits: config.limits }, () => copyNamespaces.pinsDigest());
    // Until a sweep has seen a cluster completely, the store may not know every claim there
    // (claim-knowledge.ts). Without a startup sweep, a store that knows primaries is taken as
    // current (resync.onStartup false says so); a new or lost one never is: it gets a startup
    // sweep all the same (leader-term.ts), which completes it.
    const claims = new ClaimKnowledge(!config.resync.onStartup && (await store.knowsAnyPrimary()), undefined, undefined, isoTime(clock));
    // Which new primaries relsync takes on: within the limits, so that memory follows the config.
    const admission = new PrimaryAdmission({ perCluster: config.limits.primariesPerCluster, total: config.limits.primaries }, store, clock);
    // What each tenant's copies take in the service cluster's etcd, within its budget.
    const budget = new CopyBudget(
      { bytesPerCluster: config.limits.copiedBytesPerCluster, copiesPerCluster: config.limits.copiesPerCluster, bytes: config.limits.copiedBytes },
      new CopyBytesStore(db),
      {
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
        pace: new RewritePace({ bytesPerSecondPerCluster: config.limits.rewriteBytesPerSecondPerCluster, bytesPerSecond: config.limits.rewriteBytesPerSecond }, clock),
      },
    );
    const reconciler = new PrimaryReconciler({
      agentName: config.agentName, clusters, store, recorder, logger, metrics, ownWrites, copyNamespaces, hasher, limits: config.limits, fingerprint, claims, admission, budget,
      readsFor: (id) => sweepReads.readsFor(id),
      copyPolicy: config.copy,
      // A copy deleted by one reconcile is read live by the next ones of a sweep, not from its LIST.
      onDeleted: (id) => sweepReads.noteObject(id),
      // A version relsync wrote or read live: the cache never reads back an older one still on its way.
      onWritten: cache ? (id, version, after) => cache.saw(id, version, after) : undefined,
      liveReads: live,
      clock,
    });
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
    const queue = new WorkQueue<PrimaryKey>({
      // A failed run is retried as the whole primary, read live after a 409 (primary-key.ts).
      ...primaryKeyPolicy,
      concurrency: config.workers,
      clock,
      gate: (key) => firstLists.ready(key.resource, key.id.cluster),
      // Tenants take turns; with several (and more than one worker), one always leaves a worker to the others.
      lane: (key) => key.id.cluster,
      maxPerLane: hasManyClusters(config.platformClusters) ? Math.max(1, config.workers - 1) : config.workers,
      // What the API server keeps refusing (invalid, denied, forbidden) backs off to 1,000 s, as
      // controller-runtime's default does; an outage's retries stay within 60 s, so that recovery is seen soon.
      backoffMaxMsFor: (err) => (isLastingRefusal(err) ? 1_000_000 : undefined),
      // Each reconcile's log lines, the failure's included, carry its id (util/log-context.ts).
      runAs: asReconcile,
      onAdded: () => metrics.workqueueAdds.inc(QUEUE),
      onStarted: (_item, waitedMs) => metrics.workqueueQueueDuration.observe(QUEUE, waitedMs / 1000),
      onError: (item, err, retryInMs) => {
        metrics.workqueueRetries.inc(QUEUE);
        logger.warn(
          { primary: describeIdentity(item.id), err: (err as Error).message, ...(logger.isLevelEnabled('debug') ? { stack: (err as Error).stack } : {}), retryInMs },
          retryInMs === undefined ? 'reconcile failed; not retried' : 'reconcile failed; will retry',
        );
      },
      onProcessed: (item, ms, outcome, runsAgain) => {
        metrics.reconciles.inc({ outcome });
        // controller-runtime's per-controller series, a controller being a primary type here.
        const controller = typeName(item.resource.primaryType);
        metrics.reconcileTotal.inc({ controller, result: outcome === 'ok' ? 'success' : outcome === 'error' ? 'error' : 'requeue_after' });
        if (outcome === 'error') metrics.reconcileErrors.inc({ controller });
        metrics.reconcileTime.observe({ controller }, ms / 1000);
        metrics.workqueueWorkDuration.observe(QUEUE, ms / 1000);
        metrics.reconcileDuration.observe(ms / 1000);
        // Pending until no run of it is due: an event routed while it ran (its checkpoint may be
        // stored already), a failure or a requeue keeps it pending, so a restart reconciles it.
        if (!runsAgain) {
          checkpointer.noteDone(item.id);
          // What it held while queued as a new or a refused primary (sync/primary-admission.ts).
          admission.settled(item.id);
        }
      },
    });
    // The queue's counters exist from the start (at 0), as controller-runtime's do, so that rates and alerts have a series.
    metrics.workqueueAdds.inc(QUEUE, 0);
    metrics.workqueueRetries.inc(QUEUE, 0);
    for (const r of resources) {
      const controller = typeName(r.primaryType);
      for (const result of ['success', 'error', 'requeue_after']) metrics.reconcileTotal.inc({ controller, result }, 0);
      metrics.reconcileErrors.inc({ controller }, 0);
    }
    // Every way into the queue notes the primary first: a sweep then reads it live, and a checkpoint never gets ahead of it.
    const queueKey = (key: PrimaryKey) => {
      sweepReads.noteChanged(key.id);
      checkpointer.noteQueued(key.id);
      queue.add(key);
    };
    const enqueue = (id: ObjectIdentity) => {
      const resource = resources.find((r) => sameType(r.primaryType, id));
      if (!resource) return false;
      queueKey({ resource, id });
      return true;
    };
    const router = new EventRouter({
      agentName: config.agentName,
      hasher,
      serviceCluster: clusters.service.name,
      isPlatform: (cluster) => clusters.isPlatform(cluster),
      metricsCluster: (cluster) => clusters.metricsName(cluster),
      resources,
      store,
      enqueue: queueKey,
      admission,
      logger,
      metrics,
      ownWrites,
      cache,
      // A store lost or older than the service cluster: what the copies there take is counted again.
      copiesListed: (copies) => budget.listed(copies),
      namespaces: new NamespaceFilter({
        resources,
        store,
        logger,
        enqueue: queueKey,
        // Identities only are kept, a page at a time, and only of the primaries admission takes
        // (relsync's own copies on a platform are never primaries): a namespace of a million past
        // the limits costs its LIST, not a million keys.
        primariesIn: async (cluster, type, namespace) => {
          const ids: ObjectIdentity[] = [];
          try {
            for await (const page of clusters.client(cluster, type).pages({ namespace })) {
              // One too costly to read is a primary all the same: its reconcile says why it is not synced.
              for (const item of [...page.items, ...(page.refused ?? []).map((r) => r.object)]) {
                if (isServiceOriginCopy(config.agentName, clusters.service.name, item)) continue;
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
        },
      }),
    });
    const scope = new ClusterScope(clusters, logical, logger);
    const sweeper = new Sweeper({ agentName: config.agentName, clusters, scope, resources, plan, store, sweeps: new SweepStore(db, clock), reads: sweepReads, installations: copyNamespaces, snapshotBytes: config.resync.snapshotBytes, relatedPerPrimary: config.limits.relatedPerPrimary, queue, writer: new CopyWriter({ agentName: config.agentName, clusters, metrics, ownWrites, logger, budget, onDeleted: (id) => sweepReads.noteObject(id), onWritten: cache ? (id, version, after) => cache.saw(id, version, after) : undefined, clock }), metrics, logger, finders: router, fingerprint, claims, admission, copiesListed: (copies) => budget.listed(copies), copiesRecounted: () => budget.recounted(), clock });
    return { claims, platforms, clusters, logical, scope, resources, store, checkpoints, checkpointer, queue, firstLists, reconciler, router, plan, sweeper, sweepReads, copyNamespaces, hasher, enqueue, cache, finderIndex, recorder };
  } catch (err) {
    clusters.close();
    throw err;
  }
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
