/**
 * Active-active replicas (`sharding.shards` > 1): this replica's share of the
 * shards, held as Leases in the service cluster (shard-leases.ts), each
 * worked by a term of its own (shard-term.ts).
 *
 * Loops of their own, so that one slow request never delays another Lease's
 * renewal:
 * - one per held shard, every retry period: its renewal, with the renew
 *   deadline as its timeout. The shard's fence is shut once its last renewal
 *   was sent longer ago than the renew deadline (no write of its term leaves
 *   after that, however late the loop runs), and the shard is then lost: its
 *   term is stopped. Another replica takes it only once its record stood
 *   unchanged for a whole lease duration, longer, as seen on that replica's
 *   (monotonic) clock.
 * - the member slot's, every retry period.
 * - balance, every retry period: one LIST of the set, then this replica's
 *   share (shard-balance.ts). Above it, a shard is given up: its term is
 *   stopped (renewed meanwhile, so that no one takes it while in-flight work
 *   ends), its fence shut, then the Lease released. Below it, free shards are
 *   taken (a shard whose Lease still names this replica, left by its previous
 *   process, at once); each taken one is checked once more against the set (a
 *   replica of another shard map, or one without shards, that took something
 *   meanwhile), and released at once if there is one, before any work.
 *
 * On stop every term stops, then every shard is released and the member
 * slot too, so that the others take over at once. A shard whose work fails
 * (it should not: a shard's term retries what it cannot reach) is given up
 * and not taken again here for a while.
 */
import { setMaxListeners } from 'node:events';
import type { Logger } from 'pino';
import type { KubeObject } from '../core/object.js';
import type { ShardMap } from '../config/shard-map.js';
import type { Metrics } from '../server/metrics.js';
import { isoTime, monotonicClock, systemClock, type Clock, type Timer } from '../util/clock.js';
import { balance } from './shard-balance.js';
import type { ShardLeases } from './shard-leases.js';

export interface ShardCoordinatorOptions {
  readonly leases: Pick<ShardLeases, 'view' | 'take' | 'renew' | 'release' | 'heartbeat' | 'leave' | 'isMember'>;
  readonly map: Pick<ShardMap, 'shards' | 'fingerprint'>;
  readonly identity: string;
  readonly renewDeadlineMs: number;
  readonly retryPeriodMs: number;
  readonly logger: Logger;
  readonly metrics?: Metrics;
  /** Works for `shard` until `signal` aborts (shard-term.ts); `fence` says why writes may not leave, undefined while they may. It should not end by itself. */
  readonly work: (shard: number, signal: AbortSignal, fence: () => string | undefined, taken: ShardTake) => Promise<void>;
  /** For ages and deadlines; default monotonic (util/clock.ts). */
  readonly clock?: Clock;
  /** The time of day a shard was taken (for people); default the given clock's, else systemClock. */
  readonly wallClock?: Clock;
  /** Told the held shards each time they change (for `relsync inspect shards`). */
  readonly onChange?: (held: HeldShard[]) => void;
}

type Phase = 'working' | 'giving-up' | 'lost' | 'released';

interface Holding {
  readonly shard: number;
  lease: KubeObject;
  /** When the last successful write of the Lease was sent (monotonic). */
  lastRenew: number;
  phase: Phase;
  /** Time of day it was taken, for people. */
  readonly since: string;
  readonly stop: AbortController;
  done: Promise<void>;
}

/** A shard this replica holds, as the probes and `relsync inspect` show it. */
export interface HeldShard {
  readonly shard: number;
  readonly phase: Phase;
  readonly since: string;
}

/** After a shard's work failed: not taken again here before this, doubling from 30 s to 5 min. */
const FAILED_BACKOFF_MS = [30_000, 300_000] as const;

export class ShardCoordinator {
  private readonly holdings = new Map<number, Holding>();
  private readonly clock: Clock;
  private readonly wall: Clock;
  private stopping = false;
  private waitingForeign: string | undefined;
  private waitingSlot: string | undefined;
  /** Shards whose work failed here, and until when this replica leaves them to others. */
  private readonly failedUntil = new Map<number, { until: number; ms: number }>();
  /** The loops' waits that end when nothing is held any more, not at the stop signal. */
  private readonly never = new AbortController().signal;

  constructor(private readonly options: ShardCoordinatorOptions) {
    this.clock = options.clock ?? monotonicClock;
    this.wall = options.wallClock ?? options.clock ?? systemClock;
  }

  held(): HeldShard[] {
    return [...this.holdings.values()].sort((a, b) => a.shard - b.shard).map((h) => ({ shard: h.shard, phase: h.phase, since: h.since }));
  }

  /** Why this replica takes no shard now (replicas of another shard map are alive, or no member slot is free), if so. */
  get waiting(): string | undefined {
    return this.waitingForeign ?? this.waitingSlot;
  }

  /** Runs until `signal` aborts, then hands every shard over. */
  async start(signal: AbortSignal): Promise<void> {
    const { logger, retryPeriodMs } = this.options;
    // A member slot first: the others count this replica before it takes anything.
    await this.heartbeat();
    const membership = this.memberLoop();
    while (!signal.aborted) {
      try {
        await this.balanceOnce(signal);
      } catch (err) {
        logger.warn({ err: (err as Error).message }, 'sharding: could not read or write the shard Leases; will retry');
      }
      await this.clock.sleep(retryPeriodMs, signal);
    }
    this.stopping = true;
    for (const h of this.holdings.values()) if (h.phase === 'working') this.giveUp(h, 'stopping');
    await Promise.all([...this.holdings.values()].map((h) => h.done));
    await membership;
    try {
      await this.timed(this.options.leases.leave(), 'member slot');
    } catch (err) {
      logger.warn({ err: (err as Error).message }, 'sharding: could not release this replica\'s member slot; the others count it out when it expires');
    }
  }

  /** Renews (or takes) the member slot every retry period until stopping. */
  private async memberLoop(): Promise<void> {
    while (!this.stopping) {
      await this.clock.sleep(this.options.retryPeriodMs, this.never);
      if (!this.stopping) await this.heartbeat();
    }
  }

  /** Renews one held shard every retry period while it is held and not lost. */
  private async renewLoop(h: Holding): Promise<void> {
    const { leases, logger, renewDeadlineMs, retryPeriodMs } = this.options;
    for (;;) {
      await this.clock.sleep(retryPeriodMs, this.never);
      if (h.phase !== 'working' && h.phase !== 'giving-up') return;
      const sentAt = this.clock.now();
      try {
        const lease = await this.timed(leases.renew(h.lease), `shard ${h.shard} lease`);
        if (h.phase !== 'working' && h.phase !== 'giving-up') return;
        if (!lease) return this.lose(h, 'another replica holds its Lease now');
        h.lease = lease;
        h.lastRenew = sentAt;
      } catch (err) {
        logger.warn({ shard: h.shard, err: (err as Error).message }, 'sharding: could not renew a shard Lease');
      }
      if (this.clock.now() - h.lastRenew > renewDeadlineMs) return this.lose(h, 'its Lease could not be renewed within the renew deadline');
    }
  }

  /** Renews (or takes) this replica's member slot; says once when every slot is another's. */
  private async heartbeat(): Promise<void> {
    const { leases, map, logger } = this.options;
    try {
      const member = await this.timed(leases.heartbeat(map.shards), 'member slot');
      const why = member ? undefined : `every member slot (${map.shards}, one per shard) is held by a live replica: this one stands by`;
      if (why && this.waitingSlot !== why) logger.warn(`sharding: ${why}`);
      this.waitingSlot = why;
    } catch (err) {
      logger.warn({ err: (err as Error).message }, 'sharding: could not renew or take a member slot (Lease); will retry');
    }
  }

  private async balanceOnce(signal: AbortSignal): Promise<void> {
    const { leases, map, identity, logger } = this.options;
    // Not counted by the others: it takes nothing (what it holds it keeps renewing; no one may take that).
    if (!leases.isMember) return;
    const view = await this.timed(leases.view(map.shards), 'shard leases');
    // A replica without shards leads: it works for every cluster. It waits while it sees shard
    // holders, but one that started as this replica took a shard may not have seen it (each reads
    // the other's Lease after writing its own: at least one sees the other). The shards go to it.
    if (view.leader !== undefined) {
      const working = [...this.holdings.values()].filter((h) => h.phase === 'working');
      if (working.length > 0) logger.warn({ leader: view.leader, shards: working.map((h) => h.shard) }, 'sharding: a replica without shards holds the leader Lease of this installation; every shard held here is given up to it');
      for (const h of working) this.giveUp(h, `a replica without shards (${view.leader}) leads this installation`);
    }
    if (view.foreign.length > 0) {
      const why = `replicas of another config (another shard map, or without shards) hold shards or the leader Lease: ${view.foreign.slice(0, 3).join(', ')}`;
      if (this.waitingForeign !== why) logger.warn({ foreign: view.foreign }, `sharding: takes no shard while ${why}; they give theirs up when stopped`);
      this.waitingForeign = why;
      return;
    }
    this.waitingForeign = undefined;
    const now = this.clock.now();
    const working = new Set([...this.holdings.values()].filter((h) => h.phase === 'working').map((h) => h.shard));
    const holders = view.shards.map((s, k) => {
      // Held here (also while it stops): not free to take again yet.
      if (this.holdings.has(k)) return identity;
      // Failed here lately: left to the others for a while.
      if ((this.failedUntil.get(k)?.until ?? 0) > now) return `${identity} (failed lately)`;
      // Named this replica but not held: left by its previous process (the replica lock keeps the identity), free to it at once.
      return s.holder === identity ? undefined : s.holder;
    });
    const decision = balance({ members: view.members, holders }, identity, working);
    for (const shard of decision.giveUp) this.giveUp(this.holdings.get(shard)!, `its share is ${decision.share} of ${map.shards} with ${view.members.length} replicas`);
    for (const shard of decision.take) {
      if (signal.aborted) return;
      const sentAt = this.clock.now();
      const lease = await this.timed(leases.take(shard, view.shards[shard]!.lease), `shard ${shard} lease`);
      if (!lease) continue; // another replica was first
      // Written before this read: of two replicas of different configs that take at once, one sees the other's take.
      const again = await this.timed(leases.view(map.shards), 'shard leases').catch(() => undefined);
      if (!again || again.foreign.length > 0 || signal.aborted) {
        logger.warn({ shard, foreign: again?.foreign }, 'sharding: gives a shard it just took back: replicas of another config hold shards (or the Leases could not be read again, or it stops)');
        await this.timed(leases.release(lease), `shard ${shard} lease`).catch(() => undefined);
        continue;
      }
      this.begin(shard, lease, sentAt, decision.share, view.members.length, takeOf(view.shards[shard]!.lease, lease));
    }
  }

  private begin(shard: number, lease: KubeObject, sentAt: number, share: number, members: number, taken: ShardTake): void {
    const { logger, renewDeadlineMs } = this.options;
    const stop = new AbortController();
    setMaxListeners(0, stop.signal);
    const h: Holding = { shard, lease, lastRenew: sentAt, phase: 'working', since: isoTime(this.wall), stop, done: Promise.resolve() };
    // Asked as each write is sent: shut once the shard is lost or released, or its last renewal is older than the deadline.
    const fence = () => {
      if (h.phase === 'lost' || h.phase === 'released') return `shard ${shard}'s Lease is no longer held here (${h.phase})`;
      const age = this.clock.now() - h.lastRenew;
      return age > renewDeadlineMs ? `shard ${shard}'s Lease was last renewed ${Math.round(age)} ms ago, past the renew deadline` : undefined;
    };
    this.holdings.set(shard, h);
    this.report();
    logger.info({ shard, share, replicas: members }, 'sharding: took a shard');
    const renewing = this.renewLoop(h);
    h.done = this.options
      .work(shard, stop.signal, fence, taken)
      .then(
        () => {
          if (!stop.signal.aborted) this.failed(h, new Error('its work ended by itself'));
        },
        (err: unknown) => {
          if (!stop.signal.aborted) this.failed(h, err);
        },
      )
      .then(() => this.finish(h))
      .then(() => renewing);
  }

  /** A shard's work failed (not stopped): whatever of it still runs is stopped, it is given up, and left to the others for a while. */
  private failed(h: Holding, err: unknown): void {
    const shard = h.shard;
    h.stop.abort();
    const last = this.failedUntil.get(shard);
    const ms = last ? Math.min(last.ms * 2, FAILED_BACKOFF_MS[1]) : FAILED_BACKOFF_MS[0];
    this.failedUntil.set(shard, { until: this.clock.now() + ms, ms });
    this.options.logger.error({ shard, err: (err as Error).message, retryInMs: ms }, 'sharding: the work for a shard failed; it is given up and left to the other replicas for a while');
  }

  private giveUp(h: Holding, why: string): void {
    if (h.phase !== 'working') return;
    h.phase = 'giving-up';
    this.options.logger.info({ shard: h.shard, why }, 'sharding: giving a shard up: its work stops, then its Lease is released');
    h.stop.abort();
    this.report();
  }

  private lose(h: Holding, why: string): void {
    if (h.phase === 'lost' || h.phase === 'released') return;
    h.phase = 'lost';
    this.options.metrics?.shardsLost.inc();
    this.options.logger.error({ shard: h.shard, why }, 'sharding: lost a shard: no more writes for it; its work stops');
    h.stop.abort();
    this.report();
  }

  /** The shard's work ended: released when this replica still holds it (its fence shut first), forgotten either way. */
  private async finish(h: Holding): Promise<void> {
    if (h.phase !== 'lost') {
      h.phase = 'released';
      try {
        await this.timed(this.options.leases.release(h.lease), `shard ${h.shard} lease`);
        this.options.logger.info({ shard: h.shard }, 'sharding: released a shard');
      } catch (err) {
        this.options.logger.warn({ shard: h.shard, err: (err as Error).message }, 'sharding: could not release a shard; another replica takes it when its Lease expires');
      }
    }
    this.holdings.delete(h.shard);
    this.report();
  }

  private report(): void {
    this.options.onChange?.(this.held());
    const metrics = this.options.metrics;
    if (!metrics) return;
    metrics.shardsHeld.reset();
    for (const h of this.holdings.values()) metrics.shardsHeld.set({ shard: String(h.shard), phase: h.phase }, 1);
  }

  /** One Lease request may not outlast the renew deadline (an API server that hangs). */
  private timed<T>(work: Promise<T>, what: string): Promise<T> {
    const ms = this.options.renewDeadlineMs;
    let timer: Timer | undefined;
    const timeout = new Promise<never>((_, reject) => (timer = this.clock.after(ms, () => reject(new Error(`${what}: no answer within ${ms} ms`)))));
    return Promise.race([work, timeout]).finally(() => timer?.cancel());
  }
}

/**
 * The Lease history of one take, for a shard store to tell whether it is still current
 * (shard-term.ts): the Lease's uid, and its leaseTransitions before and after this take. Every
 * take by any replica adds a transition; renewals and releases do not.
 */
export interface ShardTake {
  readonly leaseUid: string;
  /** undefined: there was no Lease (this take created it). */
  readonly transitionsBefore: number | undefined;
  readonly transitionsAfter: number;
}

function takeOf(seen: KubeObject | undefined, taken: KubeObject): ShardTake {
  const transitions = (lease: KubeObject | undefined) => ((lease?.spec ?? {}) as { leaseTransitions?: number }).leaseTransitions;
  return { leaseUid: taken.metadata.uid ?? '', transitionsBefore: seen ? (transitions(seen) ?? 0) : undefined, transitionsAfter: transitions(taken) ?? 0 };
}
