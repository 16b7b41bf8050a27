/**
 * A work queue of keys (primaries): an item added while queued is not added
 * twice; an item added while it is being processed is processed again after,
 * never by two workers at once; failures are retried with capped exponential
 * backoff per key; `requeueAfterMs` schedules another look. Timers are kept
 * per key, so memory is bounded by the number of distinct keys in flight.
 *
 * Fair between lanes (platform clusters: tenants): each lane has its own
 * FIFO and workers take from the lanes in turn, so one tenant's burst of
 * 10,000 primaries delays another tenant's change by about one reconcile, not
 * by the burst. `maxPerLane` caps the workers one lane holds at once, so a
 * tenant whose reconciles are slow (a stalling API server) cannot hold them all.
 *
 * An item its `gate` does not let run yet (its cluster's watches have not
 * listed once: first-lists.ts) is held: deduped like a queued one, not run,
 * not failed, and queued when release() finds the gate open. Stopping the
 * queue leaves held items where they are (their waiters get 'error').
 */
import { Backoff } from '../util/backoff.js';
import { loopBreaks, type LoopBreaks } from '../util/loop-breaks.js';
import type { Result } from '../core/result.js';
import { systemClock, type Clock, type Timer } from '../util/clock.js';
import { onAbort } from '../util/on-abort.js';

export type Outcome = 'ok' | 'error' | 'requeue';

/** How a run ended: its outcome, and the handler's result when it returned one. */
export interface Finished {
  readonly outcome: Outcome;
  readonly result?: Result;
}

export interface WorkQueueOptions<T> {
  readonly key: (item: T) => string;
  /**
   * Two items of one key as one, when an item is added while another of its key waits (or runs,
   * for the run after); default: the later replaces the earlier.
   */
  readonly merge?: (earlier: T, later: T) => T;
  readonly concurrency: number;
  /** The lane of an item (its platform cluster); default: one lane for all. */
  readonly lane?: (item: T) => string;
  /** Workers one lane may hold at once; default: all of them. */
  readonly maxPerLane?: number;
  /** Where the workers let the event loop go round between keys (loop-breaks.ts); default the process's. */
  readonly loopBreaks?: Pick<LoopBreaks, 'due'>;
  readonly backoffInitialMs?: number;
  readonly backoffMaxMs?: number;
  /**
   * The backoff's ceiling for this failure, when it is not backoffMaxMs: what keeps failing for its
   * own reasons may wait longer than an outage's retries should. A fresh add still runs at once.
   */
  readonly backoffMaxMsFor?: (err: unknown) => number | undefined;
  readonly onError?: (item: T, err: unknown, retryInMs: number | undefined) => void;
  /** What a failed item is retried as (merged with what is added for its key meanwhile); default: itself. */
  readonly retryAs?: (item: T, err: unknown) => T;
  /**
   * What an item that ran is queued as again: when its run asked to be looked at again
   * (requeueAfterMs), and when a retry's timer fires after the retried item already ran (merged
   * into a run that an add started sooner); default: itself.
   */
  readonly requeueAs?: (item: T) => T;
  /**
   * A run ended. `runsAgain`: another run of the key is due (it was added while it ran, it failed,
   * or it asked to be looked at again): its work is not done, whatever the outcome.
   */
  readonly onProcessed?: (item: T, durationMs: number, outcome: Outcome, runsAgain: boolean) => void;
  /** An item was added that did not wait already (workqueue_adds_total). */
  readonly onAdded?: (item: T) => void;
  /** A run begins, `waitedMs` after its key was first added (workqueue_queue_duration_seconds). */
  readonly onStarted?: (item: T, waitedMs: number) => void;
  /** Time for delays and durations; default the system's (tests move a fake one). */
  readonly clock?: Clock;
  /** Random source for the backoff's jitter; default Math.random. */
  readonly random?: () => number;
  /** Runs each item's handling, with its onError and onProcessed, inside `work`'s context (a reconcile's log context); default: as it is. */
  readonly runAs?: (work: () => Promise<void>) => Promise<void>;
  /** Whether an item may run now; one that may not is held until release(). Default: every item may. */
  readonly gate?: (item: T) => boolean;
}

export interface AddOptions {
  /** Past the gate: the caller vouches for what the run reads (a sweep's reconciles read its own LISTs). */
  readonly ignoreGate?: boolean;
}

export class WorkQueue<T> {
  private readonly lanes = new FairLanes();
  private readonly items = new Map<string, T>();
  private readonly queued = new Set<string>();
  private readonly held = new Set<string>();
  /** Keys whose next run was asked for past the gate while they ran. */
  private readonly bypass = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly dirty = new Set<string>();
  private readonly timers = new Map<string, { at: number; timer: Timer }>();
  private readonly failures = new Map<string, number>();
  /** When each waiting key was first added, and when each running key started: as many as wait and run. */
  private readonly queuedAt = new Map<string, number>();
  private readonly startedAt = new Map<string, number>();
  private readonly waiters = new Map<string, Array<(finished: Finished) => void>>();
  private wake: (() => void) | undefined;
  private stopped = false;

  private readonly clock: Clock;

  constructor(private readonly options: WorkQueueOptions<T>) {
    this.clock = options.clock ?? systemClock;
  }

  get depth(): number {
    return this.lanes.size;
  }

  get retrying(): number {
    return this.failures.size;
  }

  /** Items held by the gate (not in `depth`). */
  get waiting(): number {
    return this.held.size;
  }

  add(item: T, options: AddOptions = {}): void {
    if (this.stopped) return;
    const key = this.options.key(item);
    this.remember(key, item);
    // A key that waits already (queued, held, or due again after its run: it has a first add not
    // yet started) is not added twice; the wait of the run to come counts from that first add, as
    // client-go's queue counts it.
    if (!this.queuedAt.has(key)) {
      this.options.onAdded?.(item);
      this.queuedAt.set(key, this.clock.now());
    }
    if (this.processing.has(key)) {
      this.dirty.add(key);
      // The run after this one passes the gate too (a sweep waits for it).
      if (options.ignoreGate) this.bypass.add(key);
      return;
    }
    if (this.queued.has(key)) return;
    if (!options.ignoreGate && this.options.gate?.(item) === false) {
      this.held.add(key);
      return;
    }
    this.held.delete(key);
    this.enqueue(key, item);
  }

  /** Queues the held items the gate now lets run, and returns them. */
  release(): T[] {
    const released: T[] = [];
    for (const key of this.held) {
      const item = this.items.get(key)!;
      if (this.options.gate?.(item) === false) continue;
      this.held.delete(key);
      this.enqueue(key, item);
      released.push(item);
    }
    return released;
  }

  /** How long each run in progress has been running, in ms (workqueue_unfinished_work_seconds, longest_running_processor). */
  running(): number[] {
    const now = this.clock.now();
    return [...this.startedAt.values()].map((at) => now - at);
  }

  private enqueue(key: string, item: T): void {
    this.queued.add(key);
    if (!this.queuedAt.has(key)) this.queuedAt.set(key, this.clock.now());
    this.lanes.push(this.options.lane?.(item) ?? '', key);
    this.wake?.();
  }

  addAfter(item: T, delayMs: number): void {
    if (this.stopped) return;
    const key = this.options.key(item);
    const at = this.clock.now() + delayMs;
    const existing = this.timers.get(key);
    // Merged with what already waits for this key, also when an earlier timer stays: that timer
    // runs the merged item (a full retry is never narrowed to a partial one).
    this.remember(key, item);
    if (existing && existing.at <= at) return;
    existing?.timer.cancel();
    const timer = this.clock.after(delayMs, () => {
      this.timers.delete(key);
      // Not remembered any more: the item ran since, merged into a run an add started sooner.
      this.add(this.items.get(key) ?? this.options.requeueAs?.(item) ?? item);
    });
    this.timers.set(key, { at, timer });
  }

  /** The item to run next for `key`: merged with one that waits already. */
  private remember(key: string, item: T): void {
    const earlier = this.items.get(key);
    this.items.set(key, earlier !== undefined && this.options.merge ? this.options.merge(earlier, item) : item);
  }

  /**
   * Adds the item and resolves when a run of it that started after this call
   * has finished (with its outcome), or with 'error' if the queue stops first.
   */
  addAndWait(item: T, options: AddOptions = {}): Promise<Finished> {
    const key = this.options.key(item);
    const done = new Promise<Finished>((resolve) => this.waiters.set(key, [...(this.waiters.get(key) ?? []), resolve]));
    if (this.stopped) this.resolveWaiters(key, { outcome: 'error' });
    else this.add(item, options);
    return done;
  }

  private resolveWaiters(key: string, finished: Finished): void {
    const waiting = this.waiters.get(key);
    if (!waiting) return;
    this.waiters.delete(key);
    for (const resolve of waiting) resolve(finished);
  }

  /** Runs workers until `signal` aborts; resolves when in-flight work has finished. */
  async start(signal: AbortSignal, handle: (item: T) => Promise<Result>): Promise<void> {
    const stop = () => {
      this.stopped = true;
      this.wake?.();
    };
    onAbort(signal, stop);
    const workers = Array.from({ length: this.options.concurrency }, () => this.worker(handle));
    await Promise.all(workers);
    for (const { timer } of this.timers.values()) timer.cancel();
    this.timers.clear();
    for (const key of [...this.waiters.keys()]) this.resolveWaiters(key, { outcome: 'error' });
  }

  private async worker(handle: (item: T) => Promise<Result>): Promise<void> {
    while (!this.stopped) {
      // Reconciles that wait for no I/O follow each other in one microtask chain: the loop goes
      // round now and then, so that another tenant's change on a socket is read (loop-breaks.ts).
      await (this.options.loopBreaks ?? loopBreaks).due();
      if (this.stopped) break;
      const key = this.lanes.take(this.options.maxPerLane ?? this.options.concurrency);
      if (key === undefined) {
        await new Promise<void>((resolve) => {
          const previous = this.wake;
          this.wake = () => {
            this.wake = undefined;
            previous?.();
            resolve();
          };
        });
        continue;
      }
      this.queued.delete(key);
      this.processing.add(key);
      // Waiters registered from here on wait for the next run (the key is then dirty).
      const waiting = this.waiters.get(key) ?? [];
      this.waiters.delete(key);
      const item = this.items.get(key)!;
      // What is added while it runs is the next run's item alone, not merged with this one.
      this.items.delete(key);
      await (this.options.runAs ?? ((work) => work()))(() => this.process(key, item, waiting, handle));
    }
  }

  /** One run of `key`: the handler, then its retry or requeue, the counts and the waiters. */
  private async process(key: string, item: T, waiting: ReadonlyArray<(finished: Finished) => void>, handle: (item: T) => Promise<Result>): Promise<void> {
    const started = this.clock.now();
    this.startedAt.set(key, started);
    const queuedAt = this.queuedAt.get(key);
    this.queuedAt.delete(key);
    let outcome: Outcome = 'ok';
    let result: Result | undefined;
    try {
      if (queuedAt !== undefined) this.options.onStarted?.(item, started - queuedAt);
      result = await handle(item);
      this.failures.delete(key);
      if (result.requeueAfterMs !== undefined) {
        outcome = 'requeue';
        this.addAfter(this.options.requeueAs?.(item) ?? item, result.requeueAfterMs);
      }
    } catch (err) {
      outcome = 'error';
      const attempt = this.failures.get(key) ?? 0;
      this.failures.set(key, attempt + 1);
      // An API server that said when to come back (429, 503 with Retry-After) is not asked sooner
      // (a Retry-After over 5 minutes counts as 5 minutes).
      const retryAfterMs = retryAfterOf(err) * 1000;
      const maxMs = this.options.backoffMaxMsFor?.(err) ?? this.options.backoffMaxMs ?? 60_000;
      const delay = Math.max(Backoff.delay(attempt, this.options.backoffInitialMs ?? 500, maxMs, this.options.random), retryAfterMs);
      this.options.onError?.(item, err, delay);
      this.addAfter(this.options.retryAs?.(item, err) ?? item, delay);
    } finally {
      this.startedAt.delete(key);
      this.processing.delete(key);
      this.lanes.done(key);
      this.options.onProcessed?.(item, this.clock.now() - started, outcome, outcome !== 'ok' || this.dirty.has(key));
      for (const resolve of waiting) resolve({ outcome, ...(result !== undefined ? { result } : {}) });
      if (this.dirty.delete(key)) this.add(this.items.get(key) ?? item, { ignoreGate: this.bypass.delete(key) });
      else if (!this.queued.has(key) && !this.held.has(key) && !this.timers.has(key)) this.items.delete(key);
      // A lane that was at its cap may take work again.
      this.wake?.();
    }
  }
}

/**
 * Queued keys in one FIFO per lane, taken round-robin over the lanes that have any; a lane's
 * running count is kept from `take` to `done`. Memory: the queued keys, and one entry per lane
 * with queued or running keys.
 */
class FairLanes {
  private readonly queues = new Map<string, { keys: string[]; head: number }>();
  /** Lanes with queued keys, in turn order. */
  private readonly turn: string[] = [];
  private readonly running = new Map<string, number>();
  private readonly laneOfRunning = new Map<string, string>();
  private count = 0;

  get size(): number {
    return this.count;
  }

  push(lane: string, key: string): void {
    let q = this.queues.get(lane);
    if (!q) {
      q = { keys: [], head: 0 };
      this.queues.set(lane, q);
      this.turn.push(lane);
    }
    q.keys.push(key);
    this.count++;
  }

  /** The next key of the first lane in turn below `maxPerLane` running; that lane goes to the back. */
  take(maxPerLane: number): string | undefined {
    for (let i = 0; i < this.turn.length; i++) {
      const lane = this.turn[i]!;
      if ((this.running.get(lane) ?? 0) >= maxPerLane) continue;
      const q = this.queues.get(lane)!;
      const key = q.keys[q.head++]!;
      this.count--;
      this.turn.splice(i, 1);
      if (q.head === q.keys.length) this.queues.delete(lane);
      else {
        // Drop taken keys now and then, not on every take (Array.shift would copy the rest each time).
        if (q.head > 1024 && q.head * 2 > q.keys.length) {
          q.keys = q.keys.slice(q.head);
          q.head = 0;
        }
        this.turn.push(lane);
      }
      this.running.set(lane, (this.running.get(lane) ?? 0) + 1);
      this.laneOfRunning.set(key, lane);
      return key;
    }
    return undefined;
  }

  done(key: string): void {
    const lane = this.laneOfRunning.get(key);
    if (lane === undefined) return;
    this.laneOfRunning.delete(key);
    const n = (this.running.get(lane) ?? 1) - 1;
    if (n > 0) this.running.set(lane, n);
    else this.running.delete(lane);
  }
}

/** Seconds an error asks to wait before retrying (ApiError's retryAfterSeconds), else 0. */
function retryAfterOf(err: unknown): number {
  const value = (err as { retryAfterSeconds?: unknown } | undefined)?.retryAfterSeconds;
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? Math.min(value, 300) : 0;
}
