/**
 * Wires and runs relsync: connections, resolved types, the store, watches,
 * the router, the work queue with its reconciler, checkpoints, sweeps and the
 * HTTP server. Every part shares one lifecycle: start(signal) resolves when
 * stopped. Shutdown stops the watches and the queue from taking work, lets
 * in-flight reconciles finish, flushes checkpoints, then closes connections.
 *
 * Data flows one way: watch event → router (store) → queue → reconcile.
 */
import { setMaxListeners } from 'node:events';
import { existsSync, statSync } from 'node:fs';
import { hostname } from 'node:os';
import cron from 'node-cron';
import type { Logger } from 'pino';
import { hasManyClusters, type Config } from '../config/config.js';
import { ClusterSet } from '../kube/cluster-set.js';
import { isForbidden, isNotFound } from '../kube/api-error.js';
import { EndpointPendingError } from '../kube/kcp-endpoint.js';
import { ListWatch, wholeList, type ListSink, type WatchHandler } from '../kube/list-watch.js';
import type { ResourceClient } from '../kube/resource-client.js';
import { LogicalClusters } from '../kube/logical-clusters.js';
import { sameType, typeName } from '../core/resource-type.js';
import { CheckpointStore, type WatchKey } from '../store/checkpoint-store.js';
import type { OpenedStore } from '../store/database.js';
import { describeIdentity, type ObjectIdentity } from '../core/identity.js';
import { LogicalClusterStore } from '../store/logical-cluster-store.js';
import { RelationStore } from '../store/relation-store.js';
import { SweepStore } from '../store/sweep-store.js';
import { HttpServer } from '../server/http-server.js';
import { Metrics } from '../server/metrics.js';
import { EventRecorder } from '../sync/event-recorder.js';
import { OwnWrites } from '../sync/own-writes.js';
import { CopyNamespaces, RefusedToRunError } from '../sync/copy-namespaces.js';
import { ContentHasher, secretType } from '../sync/content-hasher.js';
import { PrimaryReconciler } from '../sync/primary-reconciler.js';
import { resolveConfig, type ResolvedResource } from '../sync/resolved-config.js';
import { apiBindingType, bindingHandler } from './binding-watch.js';
import { Checkpointer } from './checkpointer.js';
import { ClusterScope } from './cluster-scope.js';
import { LeaderElector, leaseType, liveLeader } from './leader-election.js';
import { EventRouter, identityOf } from './event-router.js';
import { primaryKeyString, type PrimaryKey } from './primary-key.js';
import { Sweeper, type SweepResult } from './sweeper.js';
import { SweepReads } from './sweep-snapshot.js';
import { LiveReads } from '../sync/object-reads.js';
import { planWatches, type PlannedWatch } from './watch-plan.js';
import { WorkQueue } from './work-queue.js';
import { Backoff } from '../util/backoff.js';
import { sleep } from '../util/sleep.js';

/** `relsync sweep` refused: a leader is running. */
export class LeaderRunningError extends Error {
  override name = 'LeaderRunningError';
}

export interface ManagerOptions {
  readonly config: Config;
  readonly store: OpenedStore;
  readonly logger: Logger;
  /** HTTP port for health and metrics; undefined: no server. 0: any free port. */
  readonly httpPort?: number | undefined;
  readonly onHttpListening?: (port: number) => void;
  /** This replica's identity in the leader Lease (store/replica-lock.ts); default: host and pid. */
  readonly identity?: string;
  /** Bench only: route related events to every primary of their cluster (event-router.ts, `fanout`). */
  readonly fanoutRouting?: boolean;
}

interface Wiring {
  readonly clusters: ClusterSet;
  readonly logical: LogicalClusters;
  readonly scope: ClusterScope;
  readonly resources: readonly ResolvedResource[];
  readonly store: RelationStore;
  readonly checkpoints: CheckpointStore;
  readonly checkpointer: Checkpointer;
  readonly queue: WorkQueue<PrimaryKey>;
  readonly reconciler: PrimaryReconciler;
  readonly router: EventRouter;
  readonly plan: readonly PlannedWatch[];
  readonly sweeper: Sweeper;
  readonly sweepReads: SweepReads;
  readonly copyNamespaces: CopyNamespaces;
  readonly hasher: ContentHasher;
}

export class Manager {
  /** A one-shot `relsync sweep` (see knowsInstallation). */
  private oneShot = false;
  readonly metrics = new Metrics();
  private watches: ListWatch[] = [];
  /** False until every watch of this term exists (the binding watches are seen by the probes before). */
  private watchesComplete = false;
  private elector: LeaderElector | undefined;
  /** The current term's wiring (the HTTP server reads it). */
  private wiring: Wiring | undefined;
  private readonly identity: string;

  constructor(private readonly options: ManagerOptions) {
    this.identity = options.identity ?? `${hostname()}-${process.pid}`;
  }

  /**
   * Runs until `signal` aborts. With leader election on, serves health
   * endpoints at once but watches and reconciles only while leader. A leader
   * that cannot renew in time stops all its work (so it never writes beside a
   * new leader), then wires afresh and campaigns again: an unreachable
   * service cluster costs a term, never the process.
   */
  async start(signal: AbortSignal): Promise<void> {
    const { config, logger } = this.options;
    // Every watch, worker and the server listen on the one stop signal.
    setMaxListeners(0, signal);
    // Health endpoints first: wiring may wait (for a kcp export's first binding), and a liveness probe must not kill that.
    const server = this.options.httpPort !== undefined ? this.serve(signal) : Promise.resolve();
    let w: Wiring;
    try {
      w = this.wiring = await this.wire(signal);
    } catch (err) {
      if (!signal.aborted) throw err;
      await server; // stopped while waiting: not a failure
      logger.info('relsync stopped before it was wired up');
      return;
    }
    try {
      if (!config.leaderElection.enabled) await this.lead(w, signal);
      else {
        for (let term = 1; !signal.aborted; term++) {
          const lost = await this.campaignAndLead(w, signal);
          if (!lost || signal.aborted) break;
          this.metrics.leadershipLost.inc();
          logger.warn({ term }, 'lost the leader lease: stopped all work; wiring afresh and campaigning again');
          w.clusters.close();
          w = this.wiring = await this.rewire(signal);
        }
      }
      await server;
      logger.info('relsync stopped');
    } finally {
      w.clusters.close();
    }
  }

  /** One term: wait for the lease, lead until stopped; true when the lease was lost. */
  private async campaignAndLead(w: Wiring, signal: AbortSignal): Promise<boolean> {
    const { logger } = this.options;
    const le = this.options.config.leaderElection;
    const term = new AbortController();
    setMaxListeners(0, term.signal);
    const stopTerm = () => term.abort();
    signal.addEventListener('abort', stopTerm, { once: true });
    let lost = false;
    let becameLeader: () => void = () => undefined;
    const leadership = new Promise<void>((resolve) => (becameLeader = resolve));
    const elector = new LeaderElector({
      client: w.clusters.client(w.clusters.service.name, leaseType),
      namespace: le.namespace,
      name: le.name,
      identity: this.identity,
      leaseDurationMs: le.leaseDurationSeconds * 1000,
      renewDeadlineMs: le.renewDeadlineSeconds * 1000,
      retryPeriodMs: le.retryPeriodSeconds * 1000,
      logger,
      onStarted: becameLeader,
      onLost: () => {
        lost = true;
        term.abort();
      },
    });
    this.elector = elector;
    this.watches = [];
    this.watchesComplete = false;
    logger.info({ lease: `${le.namespace}/${le.name}` }, 'waiting to become the leader');
    try {
      const electing = elector.start(term.signal);
      const aborted = new Promise<void>((resolve) => term.signal.addEventListener('abort', () => resolve(), { once: true }));
      await Promise.race([leadership, aborted]);
      if (!term.signal.aborted) await this.lead(w, term.signal);
      term.abort();
      await electing;
      await elector.release();
      return lost;
    } finally {
      signal.removeEventListener('abort', stopTerm);
    }
  }

  /** A fresh wiring for a new term; retries while the clusters do not answer. */
  private async rewire(signal: AbortSignal): Promise<Wiring> {
    const backoff = new Backoff({ initialMs: 500, maxMs: 5_000 });
    for (;;) {
      try {
        return await this.wire(signal);
      } catch (err) {
        if (signal.aborted) throw err;
        const retryInMs = backoff.next();
        this.options.logger.warn({ err: (err as Error).message, retryInMs }, 'could not wire up for a new term; will retry');
        await sleep(retryInMs, signal);
      }
    }
  }

  /** The leader's work: watches, reconciles, checkpoints, sweeps. */
  private async lead(w: Wiring, signal: AbortSignal): Promise<void> {
    const { config, logger } = this.options;
    // Copy namespaces an older relsync made are recorded (and their copies stay) before any reconcile; by the leader only.
    await this.adoptCopyNamespaces(w, signal);
    await this.loadHashKey(w, signal);
    const reconcileRun = w.queue.start(signal, (key) => w.reconciler.reconcile(key.resource, key.id));

    // Work that was routed but not reconciled when the last process ended.
    const pending = await w.checkpoints.pending();
    for (const id of pending) if (!this.enqueue(w, id)) w.checkpointer.noteDone(id);
    if (pending.length > 0) logger.info({ pending: pending.length }, 'requeued primaries that were pending when relsync last stopped');

    // kcp: the APIBinding watches first, so that the object watches' first LIST finds every bound workspace known.
    const bindingWatches = await Promise.all(w.clusters.platforms.filter((p) => p.kind === 'kcp').map((p) => this.bindingWatchFor(w, p.name, signal)));
    const bindingRuns = bindingWatches.map((x) => x.start(signal));
    // Seen by the probes while they sync (a binding watch stuck in its first list is a liveness problem too).
    this.watches = bindingWatches;
    while (!signal.aborted && !bindingWatches.every((x) => x.synced)) await sleep(100, signal);
    this.watches = [...bindingWatches, ...(await Promise.all(w.plan.map((p) => this.watchFor(w, p))))];
    this.watchesComplete = true;
    logger.info(
      {
        agent: config.agentName,
        resources: w.resources.map((r) => typeName(r.primaryType)),
        watches: this.watches.map((x) => x.name),
        resumed: this.watches.filter((x) => x.resumed).length,
        resync: config.resync,
      },
      'relsync started',
    );
    const runs: Array<Promise<void>> = [reconcileRun, w.checkpointer.start(signal), ...bindingRuns, ...this.watches.slice(bindingWatches.length).map((x) => x.start(signal))];

    let sweeping: Promise<unknown> = Promise.resolve();
    const sweep = (trigger: 'startup' | 'schedule') => {
      if (signal.aborted) return;
      sweeping = w.sweeper.sweep(trigger);
    };
    const task = cron.schedule(config.resync.schedule, () => sweep('schedule'), { name: 'relsync-sweep' });
    signal.addEventListener('abort', () => void task.stop(), { once: true });
    if (config.resync.onStartup) sweep('startup');

    let announced = false;
    const readyCheck = setInterval(() => {
      if (!announced && this.notReady().length === 0) {
        announced = true;
        logger.info('every watch has synced once; ready');
      }
    }, 200);
    try {
      await Promise.all(runs);
      await sweeping;
      await w.checkpointer.flush();
      await w.store.flushTouches();
    } finally {
      clearInterval(readyCheck);
      await task.destroy();
    }
  }

  /** One sweep without watches (`relsync sweep`); resolves with its summary. */
  async sweepOnce(options: { force?: boolean } = {}): Promise<SweepResult> {
    this.oneShot = true;
    const w = await this.wire(AbortSignal.timeout(60_000));
    const le = this.options.config.leaderElection;
    if (le.enabled && !options.force) {
      // A sweep beside a running leader would race its reconciles (and, on a shared volume, its store).
      const holder = await liveLeader(w.clusters.client(w.clusters.service.name, leaseType), le.namespace, le.name).catch((err: Error) => {
        w.clusters.close();
        throw err;
      });
      if (holder) {
        w.clusters.close();
        throw new LeaderRunningError(`relsync "${holder}" holds the lease ${le.namespace}/${le.name} and sweeps on its own schedule; stop it first, or pass --force`);
      }
    }
    const stop = new AbortController();
    setMaxListeners(0, stop.signal);
    // A sweep against API servers that do not answer gives up instead of hanging.
    const setup = AbortSignal.any([stop.signal, AbortSignal.timeout(60_000)]);
    await this.adoptCopyNamespaces(w, setup)
      .then(() => this.loadHashKey(w, setup))
      .then(() => {
        if (setup.aborted) throw new Error('the service cluster did not answer within 60 s');
      })
      .catch((err: unknown) => {
        w.clusters.close();
        throw err;
      });
    const workers = w.queue.start(stop.signal, (key) => w.reconciler.reconcile(key.resource, key.id));
    try {
      return await w.sweeper.sweep('cli');
    } finally {
      stop.abort();
      await workers;
      await w.checkpointer.flush();
      await w.store.flushTouches();
      w.clusters.close();
    }
  }

  /**
   * The copy namespaces' pins and records before any reconcile. A refusal (another installation,
   * missing RBAC) ends the process; anything else (an API server that does not answer) is retried:
   * a term without its pins would move copies.
   */
  private async adoptCopyNamespaces(w: Wiring, signal: AbortSignal): Promise<void> {
    const backoff = new Backoff({ initialMs: 1000, maxMs: 30_000 });
    while (!signal.aborted) {
      try {
        return await w.copyNamespaces.adoptUnrecorded(w.resources, signal);
      } catch (err) {
        if (err instanceof RefusedToRunError || signal.aborted) throw err;
        const retryInMs = backoff.next();
        this.options.logger.warn({ err: (err as Error).message, retryInMs }, 'could not read the copy namespaces\' records; no reconcile runs until it can');
        await sleep(retryInMs, signal);
      }
    }
  }

  /** The content-hash key, retried like the adoption (a term cannot hash without it). */
  private async loadHashKey(w: Wiring, signal: AbortSignal): Promise<void> {
    const { config, logger } = this.options;
    const le = config.leaderElection;
    const backoff = new Backoff({ initialMs: 1000, maxMs: 30_000 });
    while (!signal.aborted) {
      try {
        return await w.hasher.load(w.clusters.client(w.clusters.service.name, secretType), le.namespace, config.agentName, logger, this.knowsInstallation());
      } catch (err) {
        const retryInMs = backoff.next();
        logger.error({ err: (err as Error).message, retryInMs }, 'cannot read the content-hash key; no reconcile runs until it can');
        await sleep(retryInMs, signal);
      }
    }
  }

  /**
   * Whether this process knows which installation it is (its Lease): `relsync run` does (its Lease
   * is where it campaigns, also in the "default" fallback); a one-shot `relsync sweep` only when
   * the namespace was given (POD_NAMESPACE or the config), since one run by hand elsewhere would
   * otherwise pose as an installation of its own.
   */
  private knowsInstallation(): boolean {
    return !this.oneShot || this.options.config.leaderElection.namespaceKnown;
  }

  notReady(): string[] {
    if (!this.options.store.sqlite.open) return ['the store is closed'];
    if (!this.wiring) return ['starting: connecting to the clusters'];
    if (this.elector && !this.elector.isLeader) return [];
    if (!this.watchesComplete) return ['starting'];
    return this.watches.filter((w) => !w.synced).map((w) => `watch ${w.name} is not in sync`);
  }

  /**
   * Why this process should be restarted (the liveness probe): a watch of the
   * current term that died or is stuck (list-watch.ts, problem()). Outages of
   * the API servers are not among them: they are readiness's to report.
   */
  notLive(): string[] {
    if (this.elector && !this.elector.isLeader) return [];
    return this.watches.map((w) => w.problem()).filter((p): p is string => p !== undefined);
  }

  /** "leader", "standby (leader: x)" or "single instance (leader election off)". */
  role(): string {
    if (!this.elector) return 'single instance (leader election off)';
    if (this.elector.isLeader) return 'leader';
    return `standby (leader: ${this.elector.currentHolder ?? 'none yet'})`;
  }

  private async wire(signal: AbortSignal): Promise<Wiring> {
    const { config, logger } = this.options;
    const db = this.options.store.db;
    const logical = await LogicalClusters.load(new LogicalClusterStore(db));
    const clusters = new ClusterSet(config.serviceCluster, config.platformClusters, {
      observer: (cluster, method, code) => this.metrics.apiRequests.inc({ cluster, method, code: String(code) }),
      logicalClusters: logical,
    });
    try {
      await this.awaitKcpEndpoints(clusters, signal);
      const resources = await resolveConfig(config, clusters);
      const store = new RelationStore(db);
      const checkpoints = new CheckpointStore(db);
      const checkpointer = new Checkpointer(checkpoints, logger);
      const recorder = new EventRecorder({ clusters, agentName: config.agentName, logger });
      const ownWrites = new OwnWrites();
      // A sweep's reconciles read from its LISTs, unless a watch event routed to the primary since (sweep-snapshot.ts).
      const sweepReads = new SweepReads(new LiveReads(clusters));
      // An installation is its Lease (its replicas share it), also with leader election off; unknown
      // where the Lease's namespace is only the fallback (a sweep run by hand outside the cluster).
      const le = config.leaderElection;
      // The key of related copies' content hashes: read (or made) at the start of each term, after the checks that may refuse.
      const hasher = new ContentHasher();
      const copyNamespaces = new CopyNamespaces({ agentName: config.agentName, clusters, logger, installation: this.knowsInstallation() ? `${le.namespace}/${le.name}` : undefined });
      const reconciler = new PrimaryReconciler({
        agentName: config.agentName, clusters, store, recorder, logger, metrics: this.metrics, ownWrites, copyNamespaces, hasher, limits: config.limits,
        readsFor: (id) => sweepReads.readsFor(id),
        copyPolicy: config.copy,
        // A copy deleted by one reconcile is read live by the next ones of a sweep, not from its LIST.
        onDeleted: (id) => sweepReads.noteObject(id),
      });
      const queue = new WorkQueue<PrimaryKey>({
        key: primaryKeyString,
        concurrency: config.workers,
        // Tenants take turns; with several (and more than one worker), one always leaves a worker to the others.
        lane: (key) => key.id.cluster,
        maxPerLane: hasManyClusters(config.platformClusters) ? Math.max(1, config.workers - 1) : config.workers,
        onError: (item, err, retryInMs) =>
          logger.warn({ primary: describeIdentity(item.id), err: (err as Error).message, retryInMs }, retryInMs === undefined ? 'reconcile failed; not retried' : 'reconcile failed; will retry'),
        onProcessed: (item, ms, outcome) => {
          this.metrics.reconciles.inc({ outcome });
          this.metrics.reconcileDuration.observe(ms / 1000);
          if (outcome !== 'error') checkpointer.noteDone(item.id);
        },
      });
      const router = new EventRouter({
        agentName: config.agentName,
        hasher,
        serviceCluster: clusters.service.name,
        isPlatform: (cluster) => clusters.isPlatform(cluster),
        metricsCluster: (cluster) => clusters.metricsName(cluster),
        resources,
        store,
        enqueue: (key) => {
          sweepReads.noteChanged(key.id);
          checkpointer.noteQueued(key.id);
          queue.add(key);
        },
        logger,
        metrics: this.metrics,
        fanout: this.options.fanoutRouting ?? false,
        ownWrites,
      });
      const plan = planWatches(resources, clusters.service.name, clusters.platforms.map((p) => p.name), config.agentName);
      const scope = new ClusterScope(clusters, logical, logger);
      const sweeper = new Sweeper({ agentName: config.agentName, clusters, scope, resources, plan, store, sweeps: new SweepStore(db), reads: sweepReads, installations: copyNamespaces, snapshotBytes: config.resync.snapshotBytes, queue, metrics: this.metrics, logger });
      return { clusters, logical, scope, resources, store, checkpoints, checkpointer, queue, reconciler, router, plan, sweeper, sweepReads, copyNamespaces, hasher };
    } catch (err) {
      clusters.close();
      throw err;
    }
  }

  /** An object watch of the plan: its events and lists go to the router (for kcp, split by workspace). */
  private watchFor(w: Wiring, p: PlannedWatch): Promise<ListWatch> {
    return this.listWatch(w, { cluster: p.cluster, group: p.type.group, resource: p.type.resource, labelSelector: p.labelSelector ?? '' }, w.clusters.client(p.cluster, p.type), {
      onEvent: async (change, object) => {
        const cluster = w.scope.of(p.cluster, object);
        if (cluster === undefined) return;
        w.sweepReads.noteObject(identityOf(cluster, p.type, object));
        await w.router.route(cluster, p.type, object, change);
      },
      beginList: () => {
        // A kcp platform's list spans its workspaces: one routed list per workspace. A workspace
        // bound (or bound again) while the list ran lost its objects of the earlier pages: its items are routed,
        // but its list is not complete, so nothing the store knows of it is taken for gone.
        const sinks = new Map<string, ListSink>();
        let known: Set<string> | undefined;
        return {
          page: async (items) => {
            const parts = w.scope.split(p.cluster, items);
            known ??= new Set([...parts.keys()].filter((c) => !w.clusters.isUnbound(c)));
            for (const [cluster, part] of parts) {
              let sink = sinks.get(cluster);
              if (!sink) sinks.set(cluster, (sink = w.router.beginList(cluster, p.type, p.labelSelector)));
              await sink.page(part);
            }
          },
          end: async () => {
            for (const [cluster, sink] of sinks) if (known?.has(cluster)) await sink.end();
          },
        };
      },
    });
  }

  /** The APIBinding watch of one kcp platform: workspaces that bind and unbind its export (binding-watch.ts). */
  private bindingWatchFor(w: Wiring, platform: string, signal: AbortSignal): Promise<ListWatch> {
    const bindings = bindingHandler({ platform, logical: w.logical, store: w.store, enqueue: (id) => void this.enqueue(w, id),
      forget: (c) => w.clusters.forgetLogical(c),
      stillBound: (c) => stillBinds(w.clusters, c),
      relist: (c) => this.relistWorkspace(w, platform, c, signal),
      reserved: (c) => w.clusters.isConfigured(c),
      logger: this.options.logger,
    });
    return this.listWatch(w, { cluster: platform, group: apiBindingType.group, resource: apiBindingType.resource, labelSelector: '' }, w.clusters.client(platform, apiBindingType), {
      onEvent: (change, object) => bindings.onEvent(change, object),
      beginList: () => wholeList((items) => bindings.onList(items)),
    });
  }

  /** A list/watch loop as every watch of relsync runs: resumed from its checkpoint, its versions checkpointed, its reconnects counted. */
  private async listWatch(w: Wiring, key: WatchKey, client: ResourceClient, handler: Pick<WatchHandler, 'onEvent' | 'beginList'>): Promise<ListWatch> {
    const watch: ListWatch = new ListWatch({
      client,
      labelSelector: key.labelSelector || undefined,
      logger: this.options.logger,
      resumeFrom: await w.checkpoints.resourceVersion(key),
      timeoutSeconds: this.options.config.watch.timeoutSeconds,
      watchdogMs: this.options.config.watch.idleTimeoutSeconds * 1000,
      handler: { ...handler, onResourceVersion: (rv) => w.checkpointer.noteVersion(key, rv) },
      onReconnect: (reason) => this.metrics.watchReconnects.inc({ watch: watch.name, reason }),
      onRelist: () => this.metrics.watchRelists.inc({ watch: watch.name }),
    });
    return watch;
  }

  /**
   * A workspace that became known while the object watches run: every
   * watched type of it, listed and routed like a relist. In the background,
   * with retries: right after a binding, kcp's virtual workspace may still
   * refuse requests into that workspace for a moment (403).
   */
  private relistWorkspace(w: Wiring, platform: string, cluster: string, signal: AbortSignal): void {
    const relistType = async (p: PlannedWatch) => {
      const backoff = new Backoff({ initialMs: 500, maxMs: 5_000 });
      for (let attempt = 1; !signal.aborted && w.clusters.has(cluster); attempt++) {
        try {
          const sink = w.router.beginList(cluster, p.type, p.labelSelector);
          for await (const page of w.clusters.client(cluster, p.type).pages({ labelSelector: p.labelSelector })) await sink.page(page.items);
          await sink.end();
          return;
        } catch (err) {
          if (attempt >= 12) {
            // e.g. a claim the workspace did not accept: that type's relations report it when they are synced
            this.options.logger.warn({ cluster: platform, logicalCluster: cluster, type: typeName(p.type), err: (err as Error).message }, 'could not list a type in a newly bound workspace; the next sweep will');
            return;
          }
          await sleep(backoff.next(), signal);
        }
      }
    };
    void (async () => {
      for (const p of w.plan.filter((x) => x.cluster === platform)) await relistType(p);
    })();
  }

  /** Queues a primary by identity; false when no configured resource has its type any more. */
  private enqueue(w: Wiring, id: ObjectIdentity): boolean {
    const resource = w.resources.find((r) => sameType(r.primaryType, id));
    if (!resource) return false;
    w.sweepReads.noteChanged(id);
    w.checkpointer.noteQueued(id);
    w.queue.add({ resource, id });
    return true;
  }

  /**
   * A kcp platform's virtual workspace URL appears once a workspace binds the
   * export: until then relsync waits (and says so) instead of failing.
   */
  private async awaitKcpEndpoints(clusters: ClusterSet, signal: AbortSignal): Promise<void> {
    for (const platform of clusters.platforms) {
      if (!platform.endpoint) continue;
      const backoff = new Backoff({ initialMs: 1_000, maxMs: 10_000 });
      for (let attempt = 1; ; attempt++) {
        try {
          const url = await platform.endpoint.resolve();
          this.options.logger.info({ cluster: platform.name, url }, 'kcp virtual workspace found');
          break;
        } catch (err) {
          if (!(err instanceof EndpointPendingError) || signal.aborted) throw err;
          const retryInMs = backoff.next();
          if (attempt === 1 || attempt % 10 === 0) this.options.logger.info({ cluster: platform.name, retryInMs }, `${err.message}; waiting`);
          await sleep(retryInMs, signal);
        }
      }
    }
  }

  private serve(signal: AbortSignal): Promise<void> {
    const server = new HttpServer({
      port: this.options.httpPort!,
      registry: this.metrics.registry,
      readiness: { notReady: () => this.notReady(), notLive: () => this.notLive(), role: () => this.role() },
      logger: this.options.logger,
      beforeScrape: async () => {
        const w = this.wiring;
        if (!w) return;
        const counts = await w.store.counts();
        this.metrics.storeRows.set({ table: 'primaries' }, counts.primaries);
        this.metrics.storeRows.set({ table: 'relations' }, counts.relations);
        this.metrics.storeBytes.set(storeFileBytes(this.options.store.path));
        this.metrics.queueDepth.set(w.queue.depth);
        this.metrics.queueRetrying.set(w.queue.retrying);
        this.metrics.logicalClusters.reset();
        for (const r of w.logical.records()) this.metrics.logicalClusters.inc({ platform: r.platform, state: r.state });
      },
    });
    return server.start(signal, this.options.onHttpListening);
  }
}

/** Whether a logical cluster still shows an APIBinding of the export (the virtual workspace forbids a workspace that does not). */
async function stillBinds(clusters: ClusterSet, cluster: string): Promise<boolean> {
  try {
    return (await clusters.client(cluster, apiBindingType).listPage({ limit: 1 })).items.length > 0;
  } catch (err) {
    if (isForbidden(err) || isNotFound(err)) return false;
    throw err;
  }
}

/** Bytes of the SQLite file and its WAL. */
function storeFileBytes(path: string): number {
  return [path, `${path}-wal`].reduce((n, p) => n + (existsSync(p) ? statSync(p).size : 0), 0);
}
