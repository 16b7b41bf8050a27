/**
 * What the probes say about this process, and the HTTP server that answers
 * them and /metrics. The term (leader-term.ts) reports its elector and watches
 * here as it goes; the probes only read. The server starts before anything
 * is wired, since wiring may wait long (a kcp export's first binding) and a
 * liveness probe must not kill that.
 */
import { existsSync, statSync } from 'node:fs';
import type { Logger } from 'pino';
import type { ListWatch } from '../kube/list-watch.js';
import { HttpServer, type HttpServerOptions, type Readiness } from '../server/http-server.js';
import type { Metrics } from '../server/metrics.js';
import { PRIMARY_STATES, RELATION_STATES } from '../store/schema.js';
import type { LeaderElector } from './leader-election.js';
import { QUEUE } from './term-queue.js';
import type { Wiring } from './wiring.js';
import { systemClock, type Clock } from '../util/clock.js';

/** The current term as the probes see it. */
export class TermStatus implements Readiness {
  private elector: Pick<LeaderElector, 'isLeader' | 'currentHolder'> | undefined;
  private watches: readonly ListWatch[] = [];
  /** False until every watch of this term exists (the binding watches are seen by the probes before). */
  private watchesComplete = false;
  /** Why a leader does not lead yet (leader-term.ts, withoutShardHolders); undefined once it does. */
  private holdingBack: string | undefined;

  constructor(
    private readonly storeOpen: () => boolean,
    private readonly wired: () => boolean,
  ) {}

  /** A term begins its campaign: nothing of the last term's watches counts any more. */
  campaigning(elector: Pick<LeaderElector, 'isLeader' | 'currentHolder'>): void {
    this.elector = elector;
    this.watches = [];
    this.watchesComplete = false;
    this.holdingBack = undefined;
  }

  /** A leader that holds the lease but waits before it writes, and why; undefined once it goes on. */
  waiting(why: string | undefined): void {
    this.holdingBack = why;
  }

  /** The watches the term runs so far; `complete` once every watch of the term exists. */
  watching(watches: readonly ListWatch[], complete: boolean): void {
    this.watches = watches;
    this.watchesComplete = complete;
  }

  notReady(): string[] {
    if (!this.storeOpen()) return ['the store is closed'];
    if (!this.wired()) return ['starting: connecting to the clusters'];
    if (this.elector && !this.elector.isLeader) return [];
    if (this.holdingBack !== undefined) return [`leads, but waits: ${this.holdingBack}`];
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

  /** The current term's watches and whether each is in sync (none on a standby). */
  watchStates(): Array<{ readonly name: string; readonly synced: boolean }> {
    if (this.elector && !this.elector.isLeader) return [];
    return this.watches.map((w) => ({ name: w.name, synced: w.synced }));
  }

  /** "leader", "standby (leader: x)" or "single instance (leader election off)". */
  role(): string {
    if (!this.elector) return 'single instance (leader election off)';
    if (this.elector.isLeader) return 'leader';
    return `standby (leader: ${this.elector.currentHolder ?? 'none yet'})`;
  }
}

export interface HealthServerOptions {
  readonly port: number;
  readonly metrics: Metrics;
  readonly readiness: Readiness;
  /** The Lease this process campaigns for, and whether it leads now (leader_election_master_status). */
  readonly lease?: { readonly name: string; readonly leading: () => boolean };
  readonly logger: Logger;
  /** The SQLite files (the shards' too), whose size (with their WAL) /metrics reports. */
  readonly storePaths: () => readonly string[];
  /** The current term's wiring (one per shard held), none before the first. */
  readonly wirings: () => ReadonlyArray<Pick<Wiring, 'store' | 'queue' | 'logical' | 'cache' | 'finderIndex'>>;
  readonly onListening?: ((port: number) => void) | undefined;
  /** Who may read /metrics (kube/metrics-authorizer.ts); default: everyone. */
  readonly authorizeMetrics?: HttpServerOptions['authorizeMetrics'];
  /** TLS on the port (http-server.ts); default: plain HTTP. */
  readonly tls?: HttpServerOptions['tls'];
  /** /explain, for `relsync explain --server` (http-server.ts). */
  readonly explain?: HttpServerOptions['explain'];
  /** The current term's watches, for relsync_watch_synced. */
  readonly watches?: () => ReadonlyArray<{ readonly name: string; readonly synced: boolean }>;
  /** What the store's counts are kept for on (and the certificate's files read again on); default systemClock. */
  readonly clock?: Clock;
}

/** Serves /healthz, /readyz and /metrics until `signal` aborts. */
export function serveHealth(options: HealthServerOptions, signal: AbortSignal): Promise<void> {
  const clock = options.clock ?? systemClock;
  const series = new ScrapedSeries(options, clock);
  const server = new HttpServer({
    port: options.port,
    registry: options.metrics.registry,
    readiness: options.readiness,
    logger: options.logger,
    ...(options.authorizeMetrics ? { authorizeMetrics: options.authorizeMetrics } : {}),
    ...(options.explain ? { explain: options.explain } : {}),
    ...(options.tls ? { tls: options.tls } : {}),
    clock,
    beforeScrape: () => series.update(),
  });
  return server.start(signal, options.onListening);
}

type Term = ReturnType<HealthServerOptions['wirings']>[number];
type Counts = Awaited<ReturnType<Wiring['store']['counts']>>;

/** The series read off the current terms at each scrape. */
class ScrapedSeries {
  /**
   * A term's cache and finder index count from the term's start; their counters go on across
   * terms: each scrape adds what a term's counts grew by since the last one.
   */
  private readonly counted = new WeakMap<object, Record<string, number>>();
  /** The store's counts are a scan of both tables: one per 15 s, whatever the number of scrapers. */
  private counts: { at: number; value: Counts } | undefined;

  constructor(private readonly options: HealthServerOptions, private readonly clock: Clock) {}

  async update(): Promise<void> {
    const { metrics } = this.options;
    // 1 while this process reconciles (the leader, or the one instance with leader election off).
    const leading = this.options.lease?.leading() ?? true;
    if (this.options.lease) metrics.leaderStatus.set({ name: this.options.lease.name }, leading ? 1 : 0);
    // A term's watches only: one of a term that ended is no longer a series.
    metrics.watchSynced.reset();
    for (const watch of this.options.watches?.() ?? []) metrics.watchSynced.set({ watch: watch.name }, watch.synced ? 1 : 0);
    const all = this.options.wirings();
    if (all.length === 0) return;
    await this.storeSeries(all, leading);
    queueSeries(metrics, all);
    this.cacheSeries(all);
    metrics.logicalClusters.reset();
    for (const w of all) for (const r of w.logical.records()) metrics.logicalClusters.inc({ platform: r.platform, state: r.state });
  }

  private async storeSeries(all: readonly Term[], leading: boolean): Promise<void> {
    const { metrics } = this.options;
    if (!this.counts || this.clock.now() - this.counts.at > 15_000) {
      const value: Counts = { primaries: {}, relations: {} } as Counts;
      for (const one of await Promise.all(all.map((x) => x.store.counts()))) {
        add(value.primaries, one.primaries);
        add(value.relations, one.relations);
      }
      this.counts = { at: this.clock.now(), value };
    }
    const { primaries, relations } = this.counts.value;
    const sum = (byState: Record<string, number | undefined>) => Object.values(byState).reduce<number>((a, b) => a + (b ?? 0), 0);
    metrics.storeRows.set({ table: 'primaries' }, sum(primaries));
    metrics.storeRows.set({ table: 'relations' }, sum(relations));
    if (leading) {
      // Every state has its series, 0 included, so that an alert on one has something to read.
      for (const state of PRIMARY_STATES) metrics.primaries.set({ state }, primaries[state] ?? 0);
      for (const state of RELATION_STATES) metrics.relations.set({ state }, relations[state] ?? 0);
    } else {
      // A standby's store is its last term's: its states are no one's now (the leader reports the current ones).
      metrics.primaries.reset();
      metrics.relations.reset();
    }
    metrics.storeBytes.set(this.options.storePaths().reduce((n, path) => n + storeFileBytes(path), 0));
  }

  private cacheSeries(all: readonly Term[]): void {
    const { metrics } = this.options;
    const caches = all.filter((w) => w.cache);
    if (caches.length > 0) {
      metrics.cacheObjects.set(total(all, (w) => w.cache?.stats().entries ?? 0));
      metrics.cacheBytes.set(total(all, (w) => w.cache?.stats().bytes ?? 0));
      for (const w of caches) {
        const cache = w.cache!.stats();
        this.countGrowth(w.cache!, { hit: cache.hits, miss: cache.misses }, (result, n) => metrics.cacheReads.inc({ result }, n));
      }
    }
    const indexes = all.filter((w) => w.finderIndex);
    if (indexes.length > 0) {
      metrics.finderIndexObjects.set(total(all, (w) => w.finderIndex?.stats().objects ?? 0));
      metrics.finderIndexBytes.set(total(all, (w) => w.finderIndex?.stats().bytes ?? 0));
      for (const w of indexes) {
        const index = w.finderIndex!.stats();
        this.countGrowth(w.finderIndex!, { index: index.answered, list: index.listed }, (how, n) => metrics.finderLookups.inc({ how }, n));
      }
    }
  }

  private countGrowth(owner: object, now: Record<string, number>, add: (label: string, n: number) => void): void {
    const before = this.counted.get(owner) ?? {};
    for (const [label, n] of Object.entries(now)) add(label, n - (before[label] ?? 0));
    this.counted.set(owner, now);
  }
}

function queueSeries(metrics: Metrics, all: readonly Term[]): void {
  metrics.queueDepth.set(total(all, (w) => w.queue.depth));
  metrics.workqueueDepth.set(QUEUE, total(all, (w) => w.queue.depth));
  const running = all.flatMap((w) => w.queue.running());
  metrics.workqueueUnfinished.set(QUEUE, running.reduce((a, b) => a + b, 0) / 1000);
  metrics.workqueueLongest.set(QUEUE, Math.max(0, ...running) / 1000);
  metrics.queueRetrying.set(total(all, (w) => w.queue.retrying));
  metrics.queueHeld.set(total(all, (w) => w.queue.waiting));
}

const total = (all: readonly Term[], f: (w: Term) => number) => all.reduce((n, w) => n + f(w), 0);

function add(into: Record<string, number | undefined>, from: Record<string, number | undefined>): void {
  for (const [k, n] of Object.entries(from)) into[k] = (into[k] ?? 0) + (n ?? 0);
}

/** Bytes of the SQLite file and its WAL. */
function storeFileBytes(path: string): number {
  return [path, `${path}-wal`].reduce((n, p) => n + (existsSync(p) ? statSync(p).size : 0), 0);
}
