/**
 * A work queue of keys (primaries): an item added while queued is not added
 * twice; an item added while it is being processed is processed again after,
 * never by two workers at once; failures are retried with capped exponential
 * backoff per key; `requeueAfterMs` schedules another look. Timers are kept
 * per key, so memory is bounded by the number of distinct keys in flight.
 */
import { Backoff } from '../util/backoff.js';
import { TerminalError, type Result } from './result.js';

export type Outcome = 'ok' | 'error' | 'requeue';

export interface WorkQueueOptions<T> {
  readonly key: (item: T) => string;
  readonly concurrency: number;
  readonly backoffInitialMs?: number;
  readonly backoffMaxMs?: number;
  readonly onError?: (item: T, err: unknown, retryInMs: number | undefined) => void;
  readonly onProcessed?: (item: T, durationMs: number, outcome: Outcome) => void;
}

export class WorkQueue<T> {
  private readonly queue: string[] = [];
  private readonly items = new Map<string, T>();
  private readonly queued = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly dirty = new Set<string>();
  private readonly timers = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  private readonly failures = new Map<string, number>();
  private readonly waiters = new Map<string, Array<(outcome: Outcome) => void>>();
  private wake: (() => void) | undefined;
  private stopped = false;

  constructor(private readonly options: WorkQueueOptions<T>) {}

  get depth(): number {
    return this.queue.length;
  }

  get retrying(): number {
    return this.failures.size;
  }

  add(item: T): void {
    if (this.stopped) return;
    const key = this.options.key(item);
    this.items.set(key, item);
    if (this.processing.has(key)) {
      this.dirty.add(key);
      return;
    }
    if (this.queued.has(key)) return;
    this.queued.add(key);
    this.queue.push(key);
    this.wake?.();
  }

  addAfter(item: T, delayMs: number): void {
    if (this.stopped) return;
    const key = this.options.key(item);
    const at = Date.now() + delayMs;
    const existing = this.timers.get(key);
    if (existing && existing.at <= at) return;
    if (existing) clearTimeout(existing.timer);
    this.items.set(key, item);
    const timer = setTimeout(() => {
      this.timers.delete(key);
      this.add(item);
    }, delayMs);
    timer.unref();
    this.timers.set(key, { at, timer });
  }

  /**
   * Adds the item and resolves when a run of it that started after this call
   * has finished (with its outcome), or with 'error' if the queue stops first.
   */
  addAndWait(item: T): Promise<Outcome> {
    const key = this.options.key(item);
    const done = new Promise<Outcome>((resolve) => this.waiters.set(key, [...(this.waiters.get(key) ?? []), resolve]));
    if (this.stopped) this.resolveWaiters(key, 'error');
    else this.add(item);
    return done;
  }

  private resolveWaiters(key: string, outcome: Outcome): void {
    const waiting = this.waiters.get(key);
    if (!waiting) return;
    this.waiters.delete(key);
    for (const resolve of waiting) resolve(outcome);
  }

  /** Runs workers until `signal` aborts; resolves when in-flight work has finished. */
  async start(signal: AbortSignal, handle: (item: T) => Promise<Result>): Promise<void> {
    const stop = () => {
      this.stopped = true;
      this.wake?.();
    };
    signal.addEventListener('abort', stop, { once: true });
    const workers = Array.from({ length: this.options.concurrency }, () => this.worker(handle));
    await Promise.all(workers);
    for (const { timer } of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    for (const key of [...this.waiters.keys()]) this.resolveWaiters(key, 'error');
  }

  private async worker(handle: (item: T) => Promise<Result>): Promise<void> {
    while (!this.stopped) {
      const key = this.queue.shift();
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
      const started = Date.now();
      let outcome: Outcome = 'ok';
      try {
        const result = await handle(item);
        this.failures.delete(key);
        if (result.requeueAfterMs !== undefined) {
          outcome = 'requeue';
          this.addAfter(item, result.requeueAfterMs);
        }
      } catch (err) {
        outcome = 'error';
        if (err instanceof TerminalError) {
          this.failures.delete(key);
          this.options.onError?.(item, err, undefined);
        } else {
          const attempt = this.failures.get(key) ?? 0;
          this.failures.set(key, attempt + 1);
          // An API server that said when to come back (429, 503 with Retry-After) is not asked sooner
          // (a Retry-After over 5 minutes counts as 5 minutes).
          const retryAfterMs = retryAfterOf(err) * 1000;
          const delay = Math.max(Backoff.delay(attempt, this.options.backoffInitialMs ?? 500, this.options.backoffMaxMs ?? 60_000), retryAfterMs);
          this.options.onError?.(item, err, delay);
          this.addAfter(item, delay);
        }
      } finally {
        this.processing.delete(key);
        this.options.onProcessed?.(item, Date.now() - started, outcome);
        for (const resolve of waiting) resolve(outcome);
        if (this.dirty.delete(key)) this.add(item);
        else if (!this.queued.has(key) && !this.timers.has(key)) this.items.delete(key);
      }
    }
  }
}

/** Seconds an error asks to wait before retrying (ApiError's retryAfterSeconds), else 0. */
function retryAfterOf(err: unknown): number {
  const value = (err as { retryAfterSeconds?: unknown } | undefined)?.retryAfterSeconds;
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? Math.min(value, 300) : 0;
}
