/**
 * Runs relsync: the HTTP server, then the wiring (wiring.ts), then terms of
 * work (leader-term.ts) until stopped. Every part shares one lifecycle:
 * start(signal) resolves when stopped. Shutdown stops the watches and the
 * queue from taking work, lets in-flight reconciles finish, flushes
 * checkpoints, then closes connections.
 *
 * Data flows one way: watch event → router (store) → queue → reconcile.
 * This file holds only the lifecycle and the face the CLI uses; each part
 * it runs lives in the file named after it.
 */
import { setMaxListeners } from 'node:events';
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import type { Config } from '../config/config.js';
import type { OpenedStore } from '../store/database.js';
import { Connection } from '../kube/connection.js';
import type { DryRunLedger } from '../kube/dry-run-client.js';
import { MetricsAuthorizer } from '../kube/metrics-authorizer.js';
import { Metrics } from '../server/metrics.js';
import { explain, explainQuery } from './explain.js';
import { serveHealth, TermStatus, type HealthServerOptions } from './health.js';
import { campaignAndLead, lead, type TermOptions } from './leader-term.js';
import type { SweepResult } from './sweeper.js';
import { sweepOnce } from './sweep-triggers.js';
import { rewire, wire, type Wiring, type WiringOptions } from './wiring.js';
import { ShardMap } from '../config/shard-map.js';
import { ResourceClient } from '../kube/resource-client.js';
import { isoTime, monotonicClock, systemClock, type Clock, type Timer } from '../util/clock.js';
import { leaseType } from './leader-election.js';
import { ShardCoordinator, type HeldShard } from './shard-coordinator.js';
import { ShardLeases } from './shard-leases.js';
import { dropShardStores, runShardTerm, shardStorePath, writeShardStatus, type ShardTermOptions, type ShardTermView } from './shard-term.js';
import { onAbort } from '../util/on-abort.js';

export { LeaderRunningError } from './sweep-triggers.js';

export interface ManagerOptions {
  readonly config: Config;
  readonly store: OpenedStore;
  readonly logger: Logger;
  /** HTTP port for health and metrics; undefined: no server. 0: any free port. */
  readonly httpPort?: number | undefined;
  readonly onHttpListening?: (port: number) => void;
  /** This replica's identity in the leader Lease (store/replica-lock.ts); default: host and pid. */
  readonly identity?: string;
  /** `kubernetes`: /metrics only for bearer tokens the service cluster authenticates and authorizes (`get /metrics`); default `none`. */
  readonly metricsAuth?: 'none' | 'kubernetes';
  /** With metricsAuth `kubernetes`: how long an allowed token is trusted before it is reviewed again; default 60 s. */
  readonly metricsAuthTtlMs?: number;
  /** The audience a token for /explain must be minted for (kube/metrics-authorizer.ts); default `relsync`. */
  readonly explainAudience?: string;
  /** Serve the HTTP port over TLS with this certificate and key (read again when they change). */
  readonly tls?: HealthServerOptions['tls'];
  /** The time of day and the timers of everything relsync runs; default systemClock. Lease ages are measured on monotonicClock. */
  readonly clock?: Clock;
}

/** What a token for /explain must be minted for unless --explain-audience says otherwise. */
export const DEFAULT_EXPLAIN_AUDIENCE = 'relsync';

export class Manager {
  /** A one-shot `relsync sweep` (see knowsInstallation). */
  private oneShot = false;
  readonly metrics = new Metrics();
  /** The current term's wiring (the HTTP server reads it). */
  private wiring: Wiring | undefined;
  /** With shards: the coordinator, and each held shard's term (its status and wiring, once wired). */
  private coordinator: ShardCoordinator | undefined;
  private readonly shardTerms = new Map<number, ShardTermView>();
  /** Why a held shard is not wired up yet (its last try's error). */
  private readonly shardProblems = new Map<number, string>();
  private readonly map: ShardMap;
  private readonly status: TermStatus;
  private readonly identity: string;
  private readonly wiringOptions: WiringOptions;
  private readonly termOptions: TermOptions;
  private readonly clock: Clock;

  constructor(private readonly options: ManagerOptions) {
    this.clock = options.clock ?? systemClock;
    const clock = this.clock;
    this.identity = options.identity ?? `${hostname()}-${process.pid}`;
    this.map = ShardMap.of(options.config);
    this.status = new TermStatus(() => options.store.sqlite.open, () => this.wiring !== undefined);
    const { config, logger } = options;
    const knowsInstallation = () => this.knowsInstallation();
    this.wiringOptions = { config, store: options.store, logger, metrics: this.metrics, knowsInstallation, clock };
    this.termOptions = { config, logger, metrics: this.metrics, status: this.status, knowsInstallation, clock };
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
    const server = this.options.httpPort !== undefined ? this.serve(this.options.httpPort, signal) : Promise.resolve();
    if (this.map.shards > 1) {
      await this.runSharded(signal);
      await server;
      logger.info('relsync stopped');
      return;
    }
    let w: Wiring;
    try {
      w = this.wiring = await wire(this.wiringOptions, signal);
    } catch (err) {
      if (!signal.aborted) throw err;
      await server; // stopped while waiting: not a failure
      logger.info('relsync stopped before it was wired up');
      return;
    }
    try {
      for (let term = 1; !signal.aborted; term++) {
        const end = config.leaderElection.enabled
          ? await campaignAndLead(w, { ...this.termOptions, identity: this.identity }, signal)
          : await lead(w, this.termOptions, signal).then((why) => (why === undefined ? undefined : { rewire: why }));
        if (!end || signal.aborted) break;
        if ('lost' in end) {
          this.metrics.leadershipLost.inc();
          logger.warn({ term }, 'lost the leader lease: stopped all work; wiring afresh and campaigning again');
        } else logger.info({ term, why: end.rewire }, 'wiring afresh for the kcp shards the endpoint slice lists now');
        await w.recorder.idle(2000);
        w.clusters.close();
        w = this.wiring = await rewire(this.wiringOptions, signal);
      }
      await server;
      logger.info('relsync stopped');
    } finally {
      // Events recorded by the last reconciles are written before the connections close (not for long).
      await w.recorder.idle(5000);
      w.clusters.close();
    }
  }

  /** Active-active (sharding.shards > 1): this replica's share of the shards, each worked by a term of its own (shard-coordinator.ts, shard-term.ts). */
  private async runSharded(signal: AbortSignal): Promise<void> {
    const { config, logger } = this.options;
    const le = config.leaderElection;
    const map = this.map;
    this.metrics.shardsConfigured.set(map.shards);
    // Stores of another shard map can never be resumed; this map's are, when a take proves them current (shard-term.ts).
    for (const name of dropShardStores(config.storePath, map)) logger.info({ file: name }, 'sharding: removed a shard store of another shard map');
    const service = config.serviceCluster;
    const connection = new Connection({ name: service.name, kubeconfig: service.kubeconfig, context: service.context });
    connection.observer = (cluster, method, code) => this.metrics.apiRequests.inc({ cluster, method, code: String(code) });
    logger.info({ shards: map.shards, sharding: map.fingerprint, leases: `${le.namespace}/${le.name}-shard-*`, identity: this.identity }, 'sharding: this replica takes its share of the shards');
    const coordinator = (this.coordinator = new ShardCoordinator({
      leases: this.shardLeases(connection),
      map,
      identity: this.identity,
      renewDeadlineMs: le.renewDeadlineSeconds * 1000,
      retryPeriodMs: le.retryPeriodSeconds * 1000,
      logger,
      metrics: this.metrics,
      clock: monotonicClock,
      wallClock: this.clock,
      onChange: (held) => this.shardsHeld(held),
      work: (shard, shardSignal, fence, taken) => this.workShard({ shard, fence, taken }, shardSignal),
    }));
    try {
      await coordinator.start(signal);
    } finally {
      connection.close();
    }
  }

  private shardLeases(connection: Connection): ShardLeases {
    const le = this.options.config.leaderElection;
    return new ShardLeases({
      // Past the service cluster's concurrency limit, as the leader Lease: a Retry-After on writes must not cost a shard.
      client: new ResourceClient(connection.unlimited(), leaseType),
      namespace: le.namespace,
      base: le.name,
      identity: this.identity,
      fingerprint: this.map.fingerprint,
      leaseDurationMs: le.leaseDurationSeconds * 1000,
      clock: monotonicClock,
      wallClock: this.clock,
    });
  }

  /** The shards this replica holds changed: said in the status file (for `relsync inspect shards`) and the sweep alert's series. */
  private shardsHeld(held: readonly HeldShard[]): void {
    const { config, logger } = this.options;
    const map = this.map;
    // No longer the one that sweeps any shard: the alert on missed sweeps reads this process no more.
    if (!held.some((h) => h.phase === 'working')) {
      this.metrics.sweepInterval.set(0);
      this.metrics.termStart.set(0);
    }
    try {
      writeShardStatus(config.storePath, {
        identity: this.identity,
        shards: map.shards,
        fingerprint: map.fingerprint,
        at: isoTime(this.clock),
        held: held.map((h) => ({ ...h, clusters: map.configuredIn(h.shard), store: shardStorePath(config.storePath, map, h.shard) })),
      });
    } catch (err) {
      logger.warn({ err: (err as Error).message }, 'sharding: could not write which shards this replica holds (for relsync inspect shards)');
    }
  }

  private workShard(take: Pick<ShardTermOptions, 'shard' | 'fence' | 'taken'>, signal: AbortSignal): Promise<void> {
    const { shard } = take;
    return runShardTerm(
      {
        ...take,
        identity: this.identity,
        map: this.map,
        wiring: this.wiringOptions,
        term: this.termOptions,
        logger: this.options.logger.child({ shard }),
        onStatus: (term) => {
          this.shardProblems.delete(shard);
          if (term) this.shardTerms.set(shard, term);
          else this.shardTerms.delete(shard);
        },
        onWiring: (problem) => this.shardProblems.set(shard, problem),
      },
      signal,
    );
  }

  /**
   * One sweep without watches (`relsync sweep`); resolves with its summary. `dryRun`: nothing is
   * written, what would be is recorded there (the store given is then a copy).
   */
  async sweepOnce(options: { force?: boolean; dryRun?: DryRunLedger } = {}): Promise<SweepResult> {
    this.oneShot = true;
    const { config } = this.options;
    const wiringOptions = options.dryRun ? { ...this.wiringOptions, dryRun: options.dryRun } : this.wiringOptions;
    return sweepOnce(
      {
        wire: (signal) => wire(wiringOptions, signal),
        leaderElection: config.leaderElection,
        prerequisites: this.termOptions,
      },
      options,
    );
  }

  /** /explain requests being answered: a few at a time, so that asking never crowds out reconciling. */
  private explaining = 0;

  /** An /explain answer: from the process that reconciles (its store and watches' clusters are the current ones). */
  private async explainAnswer(query: URLSearchParams): Promise<{ status: number; body: unknown }> {
    const q = explainQuery(query.get('type') ?? '', query.get('object') ?? '', query.get('cluster') ?? undefined);
    if (typeof q === 'string') return { status: 400, body: { error: q } };
    let w = this.wiring;
    let db = this.options.store.db;
    if (this.map.shards > 1) {
      // The replica that holds the cluster's shard answers: its store and watches are the current ones.
      if (q.cluster === undefined) return { status: 400, body: { error: `with ${this.map.shards} shards, say which platform cluster (cluster=): the replica that holds its shard answers` } };
      const shard = this.map.shardOf(q.cluster);
      const term = this.shardTerms.get(shard);
      if (!term) return { status: 503, body: { error: `cluster ${q.cluster} is in shard ${shard}, which this replica does not work for (${this.role()}): ask the one that does` } };
      w = term.wiring;
      db = term.store.db;
    } else if (this.options.config.leaderElection.enabled && this.status.role() !== 'leader') return { status: 503, body: { error: `this replica does not reconcile (${this.status.role()}): ask the leader` } };
    if (!w) return { status: 503, body: { error: 'starting: not connected to the clusters yet' } };
    if (this.explaining >= 2) return { status: 503, body: { error: 'busy answering other explain requests; try again' } };
    this.explaining++;
    const work = explain({ agentName: this.options.config.agentName, resources: w.resources, clusters: w.clusters, db }, q).finally(() => this.explaining--);
    let timer: Timer | undefined;
    const late = new Promise<undefined>((resolve) => (timer = this.clock.after(20_000, () => resolve(undefined))));
    const answer = await Promise.race([work, late]);
    timer?.cancel();
    return answer ? { status: 200, body: answer } : { status: 504, body: { error: 'the API servers did not answer within 20 s' } };
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
    if (this.map.shards === 1) return this.status.notReady();
    if (!this.options.store.sqlite.open) return ['the store is closed'];
    // A replica that holds no shard (yet) is ready, as a standby is: it takes shards when its share says so.
    const starting = this.heldShards()
      .filter((h) => h.phase === 'working' && !this.shardTerms.has(h.shard) && this.map.platformsOf(h.shard, this.options.config.platformClusters).length > 0)
      .map((h) => `shard ${h.shard}: starting${this.shardProblems.has(h.shard) ? `: ${this.shardProblems.get(h.shard)}` : ''}`);
    return [...starting, ...[...this.shardTerms].flatMap(([shard, t]) => t.status.notReady().map((why) => `shard ${shard}: ${why}`))];
  }

  /** Why this process should be restarted (the liveness probe; see TermStatus.notLive). */
  notLive(): string[] {
    if (this.map.shards === 1) return this.status.notLive();
    return [...this.shardTerms].flatMap(([shard, t]) => t.status.notLive().map((why) => `shard ${shard}: ${why}`));
  }

  /** "leader", "standby (leader: x)", "single instance (leader election off)", or with shards which it holds. */
  role(): string {
    if (this.map.shards === 1) return this.status.role();
    const held = this.heldShards();
    const working = held.filter((h) => h.phase === 'working').map((h) => h.shard);
    const stopping = held.filter((h) => h.phase !== 'working').map((h) => `${h.shard} (${h.phase})`);
    const waiting = this.coordinator?.waiting;
    return `holds ${working.length === 0 ? 'no shard' : `shard${working.length > 1 ? 's' : ''} ${working.join(', ')}`} of ${this.map.shards}${stopping.length > 0 ? `, stopping ${stopping.join(', ')}` : ''}${waiting ? ` (waiting: ${waiting})` : ''}`;
  }

  /** The shards this replica holds (none without sharding). */
  heldShards(): HeldShard[] {
    return this.coordinator?.held() ?? [];
  }

  /** Every wiring that works now: the term's, or each held shard's. */
  private wirings(): Wiring[] {
    if (this.map.shards === 1) return this.wiring ? [this.wiring] : [];
    return [...this.shardTerms.values()].map((t) => t.wiring);
  }

  /** The watches of every term that works now, and whether each is in sync; a shard's named after it. */
  private watchStates(): Array<{ readonly name: string; readonly synced: boolean }> {
    if (this.map.shards === 1) return this.status.watchStates();
    return [...this.shardTerms].flatMap(([shard, t]) => t.status.watchStates().map((w) => ({ name: `shard-${shard}/${w.name}`, synced: w.synced })));
  }

  private serve(port: number, signal: AbortSignal): Promise<void> {
    let authorizer: MetricsAuthorizer | undefined;
    let explain: HealthServerOptions['explain'];
    if (this.options.metricsAuth === 'kubernetes') {
      // Its own connection to the service cluster: the server answers before anything is wired, and across terms.
      const service = this.options.config.serviceCluster;
      const connection = new Connection({ name: service.name, kubeconfig: service.kubeconfig, context: service.context });
      onAbort(signal, () => connection.close());
      const { logger, metricsAuthTtlMs } = this.options;
      authorizer = new MetricsAuthorizer(connection, { logger, clock: this.clock, ...(metricsAuthTtlMs !== undefined ? { allowedTtlMs: metricsAuthTtlMs } : {}) });
      // /explain shows tenants' names and messages: served only with the check, for whom may `get /explain`,
      // with a token minted for relsync (one a user holds for another service is not enough).
      const explainAuthorizer = new MetricsAuthorizer(connection, {
        logger,
        clock: this.clock,
        path: '/explain',
        audience: this.options.explainAudience ?? DEFAULT_EXPLAIN_AUDIENCE,
        ...(metricsAuthTtlMs !== undefined ? { allowedTtlMs: metricsAuthTtlMs } : {}),
      });
      explain = { authorize: (header, source) => explainAuthorizer.authorize(header, source), answer: (query) => this.explainAnswer(query) };
    }
    return serveHealth(
      {
        port,
        metrics: this.metrics,
        readiness: { notReady: () => this.notReady(), notLive: () => this.notLive(), role: () => this.role() },
        lease: {
          name: this.options.config.leaderElection.name,
          // With shards: while it works for one.
          leading: () => (this.map.shards > 1 ? this.shardTerms.size > 0 : this.wiring !== undefined && (this.options.config.leaderElection.enabled ? this.status.role() === 'leader' : true)),
        },
        logger: this.options.logger,
        storePaths: () => [this.options.store.path, ...[...this.shardTerms.keys()].map((k) => shardStorePath(this.options.config.storePath, this.map, k))],
        wirings: () => this.wirings(),
        watches: () => this.watchStates(),
        ...(authorizer ? { authorizeMetrics: (header: string | undefined, source: string) => authorizer.authorize(header, source) } : {}),
        ...(explain ? { explain } : {}),
        ...(this.options.tls ? { tls: this.options.tls } : {}),
        onListening: this.options.onHttpListening,
        clock: this.clock,
      },
      signal,
    );
  }
}
