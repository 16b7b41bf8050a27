/**
 * What becomes of an Event relsync is about to record, decided as client-go's EventCorrelator
 * decides it (tools/record/events_cache.go), so that users see what they see from every
 * controller:
 *
 * - a spam filter: a token bucket per object (25 at once, then one per 5 minutes): what is over
 *   it is dropped (an object whose sync keeps failing cannot flood its namespace's Events);
 * - aggregation: Events of one object, type and reason with more than 10 different messages
 *   within 10 minutes (an error text that varies: a resourceVersion, a webhook's request id)
 *   become one Event, "(combined from similar events): <the latest message>";
 * - deduplication: an Event like one already recorded is that Event again, its count raised,
 *   not a new object.
 *
 * The memory of each is capped (the oldest entry goes first) and expires.
 */
import { ExpiringMap } from '../util/expiring-map.js';
import { compositeKey } from '../core/composite-key.js';

export const AGGREGATE_PREFIX = '(combined from similar events): ';

export interface CorrelatorOptions {
  /** Events one object may get at once; default 25 (client-go's). */
  readonly burst?: number;
  /** One more every this many ms; default 300,000 (client-go's 1/300 per second). */
  readonly refillMs?: number;
  /** Different messages of one object, type and reason before they are combined; default 10. */
  readonly maxSimilar?: number;
  /** Over this window; default 600,000. */
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

export type Correlation =
  | { readonly action: 'drop' }
  /** `key`: what identifies the Event this one is (the same key again is a repeat); `message`: what it says. */
  | { readonly action: 'record'; readonly key: string; readonly message: string };

export class EventCorrelator {
  private readonly buckets: ExpiringMap<string, { tokens: number; at: number }>;
  private readonly similar: ExpiringMap<string, Set<string>>;
  private readonly burst: number;
  private readonly refillMs: number;
  private readonly maxSimilar: number;
  private readonly windowMs: number;

  constructor(options: CorrelatorOptions = {}) {
    const entries = options.maxEntries ?? 4096;
    this.buckets = new ExpiringMap(entries);
    this.similar = new ExpiringMap(entries);
    this.burst = options.burst ?? 25;
    this.refillMs = options.refillMs ?? 300_000;
    this.maxSimilar = options.maxSimilar ?? 10;
    this.windowMs = options.similarWindowMs ?? 600_000;
  }

  correlate(event: EventKey, now: number): Correlation {
    if (!this.take(event.object, now)) return { action: 'drop' };
    const group = compositeKey(event.object, event.type, event.reason);
    // The window starts with the first message of the group (client-go's does too) and is not extended by later ones.
    const messages = this.similar.get(group, now) ?? new Set<string>();
    if (messages.size === 0) this.similar.set(group, messages, this.windowMs, now);
    if (!messages.has(event.message) && messages.size >= this.maxSimilar) {
      return { action: 'record', key: compositeKey(group, 'combined'), message: AGGREGATE_PREFIX + event.message };
    }
    messages.add(event.message);
    return { action: 'record', key: compositeKey(group, 'message', event.message), message: event.message };
  }

  /** One token of the object's bucket, if it has one left. */
  private take(object: string, now: number): boolean {
    const bucket = this.buckets.get(object, now) ?? { tokens: this.burst, at: now };
    const tokens = Math.min(this.burst, bucket.tokens + (now - bucket.at) / this.refillMs);
    // A bucket kept as long as it takes to fill up again; one forgotten earlier starts full (client-go's LRU does the same).
    const keepMs = Math.max(1, (this.burst - tokens + 1) * this.refillMs);
    if (tokens < 1) {
      this.buckets.set(object, { tokens, at: now }, keepMs, now);
      return false;
    }
    this.buckets.set(object, { tokens: tokens - 1, at: now }, keepMs, now);
    return true;
  }
}
