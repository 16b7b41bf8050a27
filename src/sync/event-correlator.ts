/**
 * What becomes of an Event relsync is about to record, decided as client-go's EventCorrelator
 * decides it (tools/record/events_cache.go), so that users see what they see from every
 * controller:
 *
 * - aggregation: once an object has had 10 different messages of one type and reason, each
 *   within 10 minutes of the one before (an error text that varies: a resourceVersion, a
 *   webhook's request id), the 10th and every one after it become one Event, "(combined from
 *   similar events): <the latest message>";
 * - deduplication: an Event like one already recorded is that Event again (`key`), its count
 *   raised, not a new object;
 * - a spam filter: a token bucket per object (25 at once, then one per 5 minutes). An Event over
 *   it is not written (`limited`), but still counted on its key, so the next one written of that
 *   key carries the repeats in between, as client-go's count does.
 *
 * Messages are remembered by hash, and each memory is capped (the oldest entry goes first) and
 * expires: what a tenant's text costs here does not grow with its length.
 */
import { createHash } from 'node:crypto';
import { ExpiringMap } from '../util/expiring-map.js';
import type { Clock } from '../util/clock.js';
import { compositeKey } from '../core/composite-key.js';

export const AGGREGATE_PREFIX = '(combined from similar events): ';

export interface CorrelatorOptions {
  /** Events one object may get at once; default 25 (client-go's). */
  readonly burst?: number;
  /** One more every this many ms; default 300,000 (client-go's 1/300 per second). */
  readonly refillMs?: number;
  /** The number of different messages of one object, type and reason from which they are combined; default 10. */
  readonly maxSimilar?: number;
  /** Each within this long of the one before; default 600,000. */
  readonly similarWindowMs?: number;
  /** Entries each memory holds at most; default 4096 (client-go's LRU size). */
  readonly maxEntries?: number;
}

/** The parts of an Event that decide what becomes of it. */
export interface EventKey {
  /** The object's identity: cluster and uid (or kind, namespace and name where no uid is known). */
  readonly object: string;
  readonly type: string;
  readonly reason: string;
  readonly message: string;
}

export interface Correlation {
  /** What identifies the Event this one is: the same key again is a repeat. */
  readonly key: string;
  /** What it says (the combined Event's message names the latest). */
  readonly message: string;
  /** Over the object's token bucket: counted on `key`, not written now. */
  readonly limited: boolean;
}

export class EventCorrelator {
  private readonly buckets: ExpiringMap<string, { tokens: number; at: number }>;
  private readonly similar: ExpiringMap<string, Set<string>>;
  private readonly burst: number;
  private readonly refillMs: number;
  private readonly maxSimilar: number;
  private readonly windowMs: number;

  /** `clock`: its memories expire on it (each decision is made at the time correlate() is given). */
  constructor(options: CorrelatorOptions, clock: Clock) {
    const entries = options.maxEntries ?? 4096;
    this.buckets = new ExpiringMap(entries, clock);
    this.similar = new ExpiringMap(entries, clock);
    this.burst = options.burst ?? 25;
    this.refillMs = options.refillMs ?? 300_000;
    this.maxSimilar = options.maxSimilar ?? 10;
    this.windowMs = options.similarWindowMs ?? 600_000;
  }

  correlate(event: EventKey, now: number): Correlation {
    const group = compositeKey(event.object, event.type, event.reason);
    const hash = createHash('sha256').update(event.message).digest('base64url').slice(0, 22);
    // The window moves with every Event of the group (client-go's LRU entry is refreshed by each).
    const messages = this.similar.get(group, now) ?? new Set<string>();
    // Once the group has had maxSimilar messages, every one of it is combined (the set stops growing there).
    if (messages.size < this.maxSimilar) messages.add(hash);
    this.similar.set(group, messages, this.windowMs, now);
    const combined = messages.size >= this.maxSimilar;
    const limited = !this.take(event.object, now);
    return combined
      ? { key: compositeKey(group, 'combined'), message: AGGREGATE_PREFIX + event.message, limited }
      : { key: compositeKey(group, 'message', hash), message: event.message, limited };
  }

  /** One token of the object's bucket, if it has one left. */
  private take(object: string, now: number): boolean {
    const bucket = this.buckets.get(object, now) ?? { tokens: this.burst, at: now };
    const tokens = Math.min(this.burst, bucket.tokens + (now - bucket.at) / this.refillMs);
    // A bucket is kept as long as it takes to fill up again; one forgotten earlier starts full (client-go's LRU does the same).
    const keepMs = Math.max(1, (this.burst - tokens + 1) * this.refillMs);
    const taken = tokens >= 1;
    this.buckets.set(object, { tokens: taken ? tokens - 1 : tokens, at: now }, keepMs, now);
    return taken;
  }
}
