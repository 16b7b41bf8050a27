/**
 * How many non-watch requests one cluster gets at once, set by the API
 * server's answers rather than a fixed guess: additive increase,
 * multiplicative decrease, as TCP's congestion window.
 *
 * - A throttled answer (429, or 503 with Retry-After) halves the limit (at
 *   least 1) and pauses the cluster: no request starts until Retry-After has
 *   passed (capped; a short default without the header). Answers to requests
 *   sent before the last cut were sent under the old limit: they extend the
 *   pause but do not cut again, so one burst of 32 rejections halves the
 *   limit once, not five times.
 * - Each other answer of a request sent under the current limit raises it by
 *   1/limit: about one more slot per limit's worth of answers, up to the
 *   ceiling.
 * - No answer (a network error, a timeout, an abort) and a 5xx without
 *   Retry-After say nothing about load: the slot is freed, the limit stays.
 *
 * Requests wait in arrival order, so none is passed over forever. Time is the
 * injected clock's; nothing here does I/O.
 */
import { systemClock, type Clock } from '../util/clock.js';

export interface AdaptiveLimitOptions {
  /** Most requests at once, and the limit at start; default 32. */
  readonly max?: number;
  /** Longest pause one answer may ask for; default 30 s (a Retry-After beyond it counts as 30 s). */
  readonly maxPauseMs?: number;
  /** Pause after a throttled answer without Retry-After; default 1 s. */
  readonly defaultPauseMs?: number;
  /** Told the limit after every change of its whole part, and on every throttled answer. */
  readonly onChange?: (limit: number, throttled: boolean) => void;
  /** Default: the system's. */
  readonly clock?: Clock;
}

/** One request's hold on the limit. The first of the three calls counts; later ones do nothing. */
export interface Slot {
  /** An answer that is not throttling (any status but 429 and 5xx): the limit grows a little. */
  answered(): void;
  /** 429, or 503 with Retry-After: the limit is cut and the cluster paused. */
  throttled(retryAfterSeconds: number | undefined): void;
  /** Anything else (no answer, a 5xx without Retry-After): only frees the slot. */
  release(): void;
}

interface Waiter {
  readonly resolve: (slot: Slot) => void;
  readonly reject: (err: unknown) => void;
  readonly signal: AbortSignal | undefined;
  readonly onAbort: () => void;
}

export class AdaptiveLimit {
  private readonly max: number;
  private readonly maxPauseMs: number;
  private readonly defaultPauseMs: number;
  private readonly clock: Clock;
  /** Fractional, so that growth can be 1/limit per answer; requests are let in up to its whole part. */
  private value: number;
  /** Bumped by each cut: a slot taken before it was sent under the old limit. */
  private generation = 0;
  private running = 0;
  private pausedUntil = 0;
  private readonly waiting: Waiter[] = [];
  /** Ends the pauses' sleeps on close(), so they do not keep the process alive. */
  private readonly closing = new AbortController();
  private closed = false;

  constructor(private readonly options: AdaptiveLimitOptions = {}) {
    this.max = options.max ?? 32;
    this.maxPauseMs = options.maxPauseMs ?? 30_000;
    this.defaultPauseMs = options.defaultPauseMs ?? 1_000;
    this.clock = options.clock ?? systemClock;
    this.value = this.max;
  }

  /** Requests allowed at once now. */
  get limit(): number {
    return Math.floor(this.value);
  }

  /** Requests holding a slot. */
  get inFlight(): number {
    return this.running;
  }

  /** Requests waiting for a slot. */
  get queued(): number {
    return this.waiting.length;
  }

  /** Resolves with a slot once the cluster is not paused and fewer than `limit` requests hold one; rejects when `signal` aborts first. */
  acquire(signal?: AbortSignal): Promise<Slot> {
    if (this.closed) return Promise.reject(new Error('the connection is closed'));
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.waiting.length === 0 && this.canStart()) return Promise.resolve(this.take());
    return new Promise<Slot>((resolve, reject) => {
      const waiter: Waiter = {
        resolve,
        reject,
        signal,
        onAbort: () => {
          const i = this.waiting.indexOf(waiter);
          if (i >= 0) this.waiting.splice(i, 1);
          reject(signal!.reason);
        },
      };
      signal?.addEventListener('abort', waiter.onAbort, { once: true });
      this.waiting.push(waiter);
    });
  }

  /** Fails every waiting request and ends the pause's sleep; later acquires fail. Slots held stay valid. */
  close(): void {
    this.closed = true;
    this.closing.abort();
    for (const w of this.waiting.splice(0)) {
      w.signal?.removeEventListener('abort', w.onAbort);
      w.reject(new Error('the connection is closed'));
    }
  }

  private canStart(): boolean {
    return this.running < this.limit && this.clock.now() >= this.pausedUntil;
  }

  private take(): Slot {
    this.running++;
    const generation = this.generation;
    let done = false;
    const finish = (then?: () => void) => {
      if (done) return;
      done = true;
      this.running--;
      then?.();
      this.admit();
    };
    return {
      answered: () => finish(() => generation === this.generation && this.grow()),
      throttled: (retryAfterSeconds) => finish(() => this.throttle(generation, retryAfterSeconds)),
      release: () => finish(),
    };
  }

  private grow(): void {
    const before = this.limit;
    this.value = Math.min(this.max, this.value + 1 / this.limit);
    if (this.limit !== before) this.options.onChange?.(this.limit, false);
  }

  private throttle(generation: number, retryAfterSeconds: number | undefined): void {
    if (generation === this.generation) {
      this.value = Math.max(1, Math.floor(this.limit / 2));
      this.generation++;
    }
    const pauseMs = retryAfterSeconds === undefined ? this.defaultPauseMs : Math.min(retryAfterSeconds * 1000, this.maxPauseMs);
    const until = this.clock.now() + pauseMs;
    if (until > this.pausedUntil) {
      this.pausedUntil = until;
      this.awaitPauseEnd();
    }
    this.options.onChange?.(this.limit, true);
  }

  /** One sleep at a time until the pause ends (a burst of 429s that extends it adds no listener per answer). */
  private sleeping = false;

  private awaitPauseEnd(): void {
    if (this.sleeping) return;
    this.sleeping = true;
    const wake = () => {
      const left = this.pausedUntil - this.clock.now();
      if (this.closed || left <= 0) {
        this.sleeping = false;
        this.admit();
        return;
      }
      // A sleep, not an unref'd timer: a one-shot command whose only pending work waits here must not exit.
      void this.clock.sleep(left, this.closing.signal).then(wake);
    };
    wake();
  }

  /** Lets waiting requests in, oldest first, while the limit and the pause allow. */
  private admit(): void {
    while (!this.closed && this.waiting.length > 0 && this.canStart()) {
      const w = this.waiting.shift()!;
      w.signal?.removeEventListener('abort', w.onAbort);
      w.resolve(this.take());
    }
  }
}
