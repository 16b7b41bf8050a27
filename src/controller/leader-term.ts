/**
 * One term of work: campaign for the Lease (leader-election.ts), then lead
 * (watches, reconciles, checkpoints, sweeps) until stopped or the lease is
 * lost. Everything a term starts listens on the term's own signal, so that a
 * leader that cannot renew stops all of its work before a new one starts.
 */
import { setMaxListeners } from 'node:events';
import type { Logger } from 'pino';
import type { Config } from '../config/config.js';
import { typeName } from '../core/resource-type.js';
import type { Metrics } from '../server/metrics.js';
import type { TermStatus } from './health.js';
import { LeaderElector, leaseType } from './leader-election.js';
import { prepareReconciles } from './reconcile-prerequisites.js';
import { scheduleSweeps } from './sweep-triggers.js';
import { bindingWatchFor, watchFor } from './watches.js';
import { ResourceClient } from '../kube/resource-client.js';
import { isForbidden } from '../kube/api-error.js';
import { ShardLeases } from './shard-leases.js';
import { every, monotonicClock, type Clock } from '../util/clock.js';
import type { Wiring } from './wiring.js';
import { endpointSlicesChanged, settleStrayWorkspaces } from './kcp-workspaces.js';
import { aborted as whenAborted, onAbort } from '../util/on-abort.js';

export interface TermOptions {
  readonly config: Config;
  readonly logger: Logger;
  readonly metrics: Metrics;
  /** Where the probes read the term's elector and watches. */
  readonly status: TermStatus;
  /** Whether this process knows which installation it is (Manager.knowsInstallation). */
  readonly knowsInstallation: () => boolean;
  /** The shard this term works for (shard-term.ts); undefined: the whole installation. */
  readonly shard?: number;
  /** The time of day and the timers of the term (Manager's: the system's in production); Lease ages are monotonic. */
  readonly clock: Clock;
}

/** How a term ended before its stop signal: the lease lost, or kcp shards that changed (lead()). */
export type TermEnd = { readonly lost: true } | { readonly rewire: string };

/** One term: wait for the lease, lead until stopped; says why when it ended before the stop signal. */
export async function campaignAndLead(w: Wiring, options: TermOptions & { readonly identity: string }, signal: AbortSignal): Promise<TermEnd | undefined> {
  const { logger } = options;
  const le = options.config.leaderElection;
  const term = new AbortController();
  setMaxListeners(0, term.signal);
  const stopTerm = () => term.abort();
  onAbort(signal, stopTerm);
  let lost = false;
  let becameLeader: () => void = () => undefined;
  const leadership = new Promise<void>((resolve) => (becameLeader = resolve));
  // Renewed past the service cluster's concurrency limit: a Retry-After on writes must not cost the lease.
  const leaseClient = new ResourceClient(w.clusters.service.connection.unlimited(), leaseType);
  const elector = new LeaderElector({
    client: leaseClient,
    namespace: le.namespace,
    name: le.name,
    identity: options.identity,
    leaseDurationMs: le.leaseDurationSeconds * 1000,
    renewDeadlineMs: le.renewDeadlineSeconds * 1000,
    retryPeriodMs: le.retryPeriodSeconds * 1000,
    logger,
    wallClock: options.clock,
    onStarted: becameLeader,
    onLost: () => {
      lost = true;
      term.abort();
    },
  });
  // No write of this term's leaves once the lease is not provably held (Events go through clients of their own: wiring.ts).
  w.clusters.setWriteFence(() => elector.writeBlocked());
  options.status.campaigning(elector);
  logger.info({ lease: `${le.namespace}/${le.name}` }, 'waiting to become the leader');
  try {
    const electing = elector.start(term.signal);
    const aborted = whenAborted(term.signal);
    await Promise.race([leadership, aborted]);
    if (!term.signal.aborted) await withoutShardHolders(leaseClient, options, term.signal);
    const rewire = term.signal.aborted ? undefined : await lead(w, options, term.signal);
    term.abort();
    await electing;
    await elector.release();
    return lost ? { lost: true } : rewire !== undefined ? { rewire } : undefined;
  } finally {
    signal.removeEventListener('abort', stopTerm);
  }
}

/**
 * Waits while replicas of a sharded config (sharding.shards > 1, a rollout between the two) hold
 * shards of this installation: they work for clusters this leader would too. Its Lease was
 * written before this read, and they read it after taking a shard (shard-leases.ts view()), so
 * of a leader and a shard holder that start together, at least one sees the other. A record is
 * no one's once it stood unchanged for its lease duration, as seen here.
 */
async function withoutShardHolders(client: ResourceClient, options: TermOptions & { readonly identity: string }, signal: AbortSignal): Promise<void> {
  const le = options.config.leaderElection;
  const leases = new ShardLeases({ client, namespace: le.namespace, base: le.name, identity: options.identity, fingerprint: 'without shards', leaseDurationMs: le.leaseDurationSeconds * 1000, clock: monotonicClock, wallClock: options.clock });
  let said = false;
  let saidForbiddenAt = 0;
  while (!signal.aborted) {
    try {
      const { foreign } = await leases.view(0);
      if (foreign.length === 0) return options.status.waiting(undefined);
      options.status.waiting(`replicas of a sharded config hold shards of this installation (${foreign.join(', ')})`);
      if (!said) options.logger.warn({ holders: foreign }, 'leads, but waits: replicas of a sharded config hold shards of this installation; they give them up when stopped');
      said = true;
    } catch (err) {
      // RBAC of a release before sharding (no list on Leases): shard holders cannot be seen, and ones
      // that run beside it (a rollback that restored the old RBAC) would write for the same clusters.
      // It does not lead blind: it waits, and says what to grant.
      if (isForbidden(err)) {
        options.status.waiting('may not list Leases, so cannot see whether replicas of a sharded config hold shards; grant list on leases in its namespace');
        // Said again every few minutes: an upgrade that kept older RBAC is an outage until it is granted.
        if (options.clock.now() - saidForbiddenAt > 5 * 60_000) options.logger.error({ err: (err as Error).message }, 'leader: may not list Leases, so cannot see whether replicas of a sharded config hold shards; it waits instead of writing beside them. Grant list on leases in its namespace (deploy/rbac.yaml and the Helm chart do)');
        saidForbiddenAt = options.clock.now();
      } else {
        options.status.waiting('could not read the shard Leases yet');
        options.logger.warn({ err: (err as Error).message }, 'leader: could not read the shard Leases; will retry');
      }
    }
    await options.clock.sleep(le.retryPeriodSeconds * 1000, signal);
  }
}

/**
 * The leader's work: watches, reconciles, checkpoints, sweeps, until `signal` aborts, or until a
 * kcp endpoint slice lists other shards than it was wired with: then it ends by itself and says
 * why (the caller wires afresh and leads again).
 */
export async function lead(w: Wiring, options: TermOptions, stop: AbortSignal): Promise<string | undefined> {
  const { logger, clock } = options;
  const ended = new AbortController();
  setMaxListeners(0, ended.signal);
  const signal = AbortSignal.any([stop, ended.signal]);
  setMaxListeners(0, signal);
  const following = endpointSlicesChanged(w.platforms, logger, signal, { clock }).then((why) => {
    if (why === undefined || signal.aborted) return undefined;
    logger.info({ why }, 'kcp shards changed: this term ends and is wired afresh with them');
    ended.abort();
    return why;
  });
  // Whatever ends the term (a throw before the work runs included) stops the slice follower.
  try {
    // Copy namespaces an older relsync made are recorded (and their copies stay) before any reconcile; by the leader only.
    await prepareReconciles(w, options, signal);
    const reconcileRun = w.queue.start(signal, (key) => w.reconciler.reconcile(key.resource, key.id, key));
    await requeuePending(w, logger);
    const watchRuns = await startWatches(w, options, signal);
    await runTerm(w, options, { signal, ended, runs: [reconcileRun, w.checkpointer.start(signal), ...watchRuns] });
    return await following;
  } finally {
    ended.abort();
  }
}

/** Work that was routed but not reconciled when the last process ended. */
async function requeuePending(w: Wiring, logger: Logger): Promise<void> {
  const pending = await w.checkpoints.pending();
  for (const id of pending) if (!w.enqueue(id)) w.checkpointer.noteDone(id);
  if (pending.length > 0) logger.info({ pending: pending.length }, 'requeued primaries that were pending when relsync last stopped');
}

/** The term's watches, started: kcp's APIBinding watches first, so that the object watches' first LIST finds every bound workspace known. */
async function startWatches(w: Wiring, options: TermOptions, signal: AbortSignal): Promise<Array<Promise<void>>> {
  const { config, logger, status, clock } = options;
  const watchOptions = { logger, metrics: options.metrics, watch: config.watch, clock };
  const bindingWatches = await Promise.all(w.clusters.platforms.filter((p) => p.kind === 'kcp').map((p) => bindingWatchFor(w, watchOptions, p.name, signal)));
  const bindingRuns = bindingWatches.map((x) => x.start(signal));
  // Seen by the probes while they sync (a binding watch stuck in its first list is a liveness problem too).
  status.watching(bindingWatches, false);
  while (!signal.aborted && !bindingWatches.every((x) => x.synced)) await clock.sleep(100, signal);
  if (!signal.aborted && bindingWatches.length > 0) await settleStrayWorkspaces(w, logger, signal);
  const objectWatches = await Promise.all(w.plan.map((p) => watchFor(w, watchOptions, p)));
  const watches = [...bindingWatches, ...objectWatches];
  status.watching(watches, true);
  logger.info(
    {
      agent: config.agentName,
      resources: w.resources.map((r) => typeName(r.primaryType)),
      watches: watches.map((x) => x.name),
      resumed: watches.filter((x) => x.resumed).length,
      resync: config.resync,
    },
    'relsync started',
  );
  return [...bindingRuns, ...objectWatches.map((x) => x.start(signal))];
}

/** Runs the term's work and its sweeps until the signal aborts, then ends them in order: the last sweep, checkpoints, touches. */
async function runTerm(w: Wiring, options: TermOptions, term: { readonly signal: AbortSignal; readonly ended: AbortController; readonly runs: ReadonlyArray<Promise<void>> }): Promise<void> {
  const { config, logger, status, clock } = options;
  // A store that is not trusted to know every claim (new, lost: claim-knowledge.ts) is completed by a startup sweep, whatever resync.onStartup says.
  const resync = { ...config.resync, onStartup: config.resync.onStartup || !w.claims.trustedAtStart };
  const sweeps = scheduleSweeps(w.sweeper, resync, term.signal, { clock, onInterval: (seconds) => options.metrics.sweepInterval.set(seconds) });
  // A copy left in place while its cluster's claims are not known waits for a sweep: one comes soon.
  w.claims.onDeferred = sweeps.copyWaiting;
  // The alert on missed sweeps counts from here: a standby that became leader is not late for the sweeps of its standby time.
  options.metrics.termStart.set(clock.now() / 1000);
  let announced = false;
  const readyCheck = every(clock, 200, () => {
    if (!announced && status.notReady().length === 0) {
      announced = true;
      logger.info('every watch has synced once; ready');
    }
  });
  try {
    await Promise.all(term.runs);
    await sweeps.last();
    await w.checkpointer.flush();
    await w.store.flushTouches();
  } finally {
    // The term's work ends before its sweeps are let go: a sweep still running stops on the signal.
    term.ended.abort();
    readyCheck.cancel();
    w.claims.onDeferred = undefined;
    await sweeps.destroy();
    // No longer the one that sweeps: the alert on missed sweeps reads this process no more
    // (of a shard's term, the coordinator says so once it works for no shard).
    if (options.shard === undefined) {
      options.metrics.sweepInterval.set(0);
      options.metrics.termStart.set(0);
    }
  }
}
