/**
 * Active-active replicas (`sharding.shards` > 1): this replica's share of the
 * shards, held as Leases in the service cluster (shard-leases.ts), each
 * worked by a term of its own (shard-term.ts).
 *
 * Two loops, so that a slow LIST never delays a renewal:
 * - renew, every retry period: this replica's member Lease and each shard it
 *   holds, each write with the renew deadline as its timeout. A shard whose
 *   last renewal was sent longer ago than the renew deadline is lost: its
 *   fence shuts at that moment (no write of its term leaves after it), and
 *   its term is stopped. Another replica takes it only once its record stood
 *   unchanged for a whole lease duration, longer, as seen on that replica's
 *   clock.
 * - balance, every retry period: one LIST of the set, then this replica's
 *   share (shard-balance.ts). Above it, a shard is given up: its term is
 *   stopped (renewed meanwhile, so that no one takes it while in-flight work
 *   ends), then the Lease is released. Below it, free shards are taken; each
 *   taken one is checked once more against the members (a replica of another
 *   shard map that wrote its member Lease meanwhile), and released at once
 *   if there is one, before any work.
 *
 * On stop every term stops, then every shard is released and the member
 * Lease deleted, so that the others take over at once.
 */
import type { Logger } from 'pino';
import type { KubeObject } from '../core/object.js';
import type { ShardMap } from '../config/shard-map.js';
import type { Metrics } from '../server/metrics.js';
import { systemClock, type Clock, type Timer } from '../util/clock.js';
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
  /** Works for `shard` until `signal` aborts (shard-term.ts); `fence` says why writes may not leave, undefined while they may. */
  readonly work: (shard: number, signal: AbortSignal, fence: () => string | undefined) => Promise<void>;
  readonly clock?: Clock;
  /** Told the held shards each time they change (for `relsync inspect shards`). */
  readonly onChange?: (held: HeldShard[]) => void;
}

type Phase = 'working' | 'giving-up' | 'lost';

interface Holding {
  readonly shard: number;
  lease: KubeObject;
  /** When the last successful write of the Lease was sent. */
  lastRenew: number;
  phase: Phase;
  readonly since: number;
  readonly stop: AbortController;
  done: Promise<void>;
}

/** A shard this replica holds, as the probes and `relsync inspect` show it. */
export interface HeldShard {
  readonly shard: number;
  readonly phase: Phase;
  readonly since: string;
}

export class ShardCoordinator {
  private readonly holdings = new Map<number, Holding>();
  private readonly clock: Clock;
  private stopping = false;
  private waitingForeign: string | undefined;
  private waitingSlot: string | undefined;
  private failure: unknown;
  /** The renew loop's waits: it ends when nothing is held any more, not at the stop signal. */
  private readonly never = new AbortController().signal;

  constructor(private readonly options: ShardCoordinatorOptions) {
    this.clock = options.clock ?? systemClock;
  }

  held(): HeldShard[] {
    return [...this.holdings.values()].sort((a, b) => a.shard - b.shard).map((h) => ({ shard: h.shard, phase: h.phase, since: new Date(h.since).toISOString() }));
  }

  /** Why this replica takes no shard now (replicas of another shard map are alive, or no member slot is free), if so. */
  get waiting(): string | undefined {
    return this.waitingForeign ?? this.waitingSlot;
  }

  /** Runs until `signal` aborts, then hands every shard over; rejects when a shard's work failed for good (a config problem). */
  async start(signal: AbortSignal): Promise<void> {
    const { logger, retryPeriodMs } = this.options;
    // A member slot first: the others count this replica before it takes anything.
    await this.heartbeat();
    const renewing = this.renewLoop();
    while (!signal.aborted && this.failure === undefined) {
      try {
        await this.balanceOnce();
      } catch (err) {
        logger.warn({ err: (err as Error).message }, 'sharding: could not read or write the shard Leases; will retry');
      }
      await this.clock.sleep(retryPeriodMs, signal);
    }
    this.stopping = true;
    for (const h of this.holdings.values()) if (h.phase === 'working') this.giveUp(h, 'stopping');
    await Promise.all([...this.holdings.values()].map((h) => h.done));
    await renewing;
    try {
      await this.timed(this.options.leases.leave(), 'member lease');
    } catch (err) {
      logger.warn({ err: (err as Error).message }, 'sharding: could not delete this replica\'s member Lease; the others count it out when it expires');
    }
    if (this.failure !== undefined) throw this.failure;
  }

  /** Renews the member Lease and every shard not lost, until stopped and nothing is held. */
  private async renewLoop(): Promise<void> {
    const { leases, logger, renewDeadlineMs, retryPeriodMs } = this.options;
    while (!(this.stopping && this.holdings.size === 0)) {
      const renewals = [...this.holdings.values()].filter((h) => h.phase !== 'lost').map(async (h) => {
        const sentAt = this.clock.now();
        try {
          const lease = await this.timed(leases.renew(h.lease), `shard ${h.shard} lease`);
          if (!lease) return this.lose(h, 'another replica holds its Lease now');
          h.lease = lease;
          h.lastRenew = sentAt;
        } catch (err) {
          logger.warn({ shard: h.shard, err: (err as Error).message }, 'sharding: could not renew a shard Lease');
        }
      });
      await Promise.all([...renewals, this.stopping ? Promise.resolve() : this.heartbeat()]);
      for (const h of this.holdings.values()) {
        if (h.phase !== 'lost' && this.clock.now() - h.lastRenew > renewDeadlineMs) this.lose(h, 'its Lease could not be renewed within the renew deadline');
      }
      await this.clock.sleep(retryPeriodMs, this.never);
    }
  }

  /** Renews (or takes) this replica's member slot; says once when every slot is another's. */
  private async heartbeat(): Promise<void> {
    const { leases, map, logger } = this.options;
    try {
      const member = await this.timed(leases.heartbeat(map.shards), 'member lease');
      const why = member ? undefined : `every member slot (${map.shards}, one per shard) is held by a live replica: this one stands by`;
      if (why && this.waitingSlot !== why) logger.warn(`sharding: ${why}`);
      this.waitingSlot = why;
    } catch (err) {
      logger.warn({ err: (err as Error).message }, 'sharding: could not renew or take a member slot (Lease); will retry');
    }
  }

  private async balanceOnce(): Promise<void> {
    const { leases, map, identity, logger } = this.options;
    // Not counted by the others: it takes nothing (what it holds it keeps renewing; no one may take that).
    if (!leases.isMember) return;
    const view = await this.timed(leases.view(map.shards), 'shard leases');
    if (view.foreign.length > 0) {
      const why = `replicas working from another shard map (another config) are alive: ${view.foreign.slice(0, 3).join(', ')}`;
      if (this.waitingForeign !== why) logger.warn({ foreign: view.foreign }, `sharding: takes no shard while ${why}; they give theirs up when stopped`);
      this.waitingForeign = why;
      return;
    }
    this.waitingForeign = undefined;
    const working = new Set([...this.holdings.values()].filter((h) => h.phase === 'working').map((h) => h.shard));
    const busy = new Set(this.holdings.keys());
    // A shard this replica still stops (giving up, lost) is not free to it yet.
    const holders = view.shards.map((s, k) => (busy.has(k) ? identity : s.holder));
    const decision = balance({ members: view.members, holders }, identity, working);
    for (const shard of decision.giveUp) this.giveUp(this.holdings.get(shard)!, `its share is ${decision.share} of ${map.shards} with ${view.members.length} replicas`);
    for (const shard of decision.take) {
      if (this.stopping) return;
      const sentAt = this.clock.now();
      const lease = await this.timed(leases.take(shard, view.shards[shard]!.lease), `shard ${shard} lease`);
      if (!lease) continue; // another replica was first
      // Written after this replica's member Lease, read after that: of two replicas of different maps, one sees the other.
      const again = await this.timed(leases.view(map.shards), 'shard leases').catch(() => undefined);
      if (!again || again.foreign.length > 0) {
        logger.warn({ shard, foreign: again?.foreign }, 'sharding: gives a shard it just took back: replicas of another shard map are alive (or the Leases could not be read again)');
        await leases.release(lease).catch(() => undefined);
        continue;
      }
      this.begin(shard, lease, sentAt, decision.share, view.members.length);
    }
  }

  private begin(shard: number, lease: KubeObject, sentAt: number, share: number, members: number): void {
    const { logger, renewDeadlineMs } = this.options;
    const stop = new AbortController();
    const h: Holding = { shard, lease, lastRenew: sentAt, phase: 'working', since: this.clock.now(), stop, done: Promise.resolve() };
    // Checked as each write is sent: shut once the phase is lost or the last renewal is older than the deadline.
    const fence = () => {
      if (h.phase === 'lost') return `shard ${shard}'s Lease was lost`;
      const age = this.clock.now() - h.lastRenew;
      return age > renewDeadlineMs ? `shard ${shard}'s Lease was last renewed ${Math.round(age)} ms ago, past the renew deadline` : undefined;
    };
    this.holdings.set(shard, h);
    this.report();
    logger.info({ shard, share, replicas: members }, 'sharding: took a shard');
    h.done = this.options
      .work(shard, stop.signal, fence)
      .catch((err: unknown) => {
        if (stop.signal.aborted) return;
        // A config problem (a type not served) stops the replica, as it would one without shards.
        logger.error({ shard, err: (err as Error).message }, 'sharding: the work for a shard failed');
        this.failure ??= err;
      })
      .then(() => this.finish(h));
  }

  private giveUp(h: Holding, why: string): void {
    if (h.phase !== 'working') return;
    h.phase = 'giving-up';
    this.options.logger.info({ shard: h.shard, why }, 'sharding: giving a shard up: its work stops, then its Lease is released');
    h.stop.abort();
    this.report();
  }

  private lose(h: Holding, why: string): void {
    if (h.phase === 'lost') return;
    h.phase = 'lost';
    this.options.metrics?.leadershipLost.inc();
    this.options.logger.error({ shard: h.shard, why }, 'sharding: lost a shard: no more writes for it; its work stops');
    h.stop.abort();
    this.report();
  }

  /** The shard's work ended: released when this replica still holds it, forgotten either way. */
  private async finish(h: Holding): Promise<void> {
    if (h.phase !== 'lost') {
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
    if (![...this.holdings.values()].some((h) => h.phase === 'working')) {
      metrics.sweepInterval.set(0);
      metrics.termStart.set(0);
    }
  }

  /** One Lease request may not outlast the renew deadline (an API server that hangs). */
  private timed<T>(work: Promise<T>, what: string): Promise<T> {
    const ms = this.options.renewDeadlineMs;
    let timer: Timer | undefined;
    const timeout = new Promise<never>((_, reject) => (timer = this.clock.after(ms, () => reject(new Error(`${what}: no answer within ${ms} ms`)))));
    return Promise.race([work, timeout]).finally(() => timer?.cancel());
  }
}
