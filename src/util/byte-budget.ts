/**
 * At most `capacity` bytes taken at once, over every taker; a taker that does not fit waits, in
 * the order they asked (a large one is not overtaken by smaller ones for ever). A take larger than
 * the whole capacity waits until nothing else is taken and then takes all of it: one taker alone
 * always fits. Deadlock-free as long as no taker waits for a take while it holds one (each waiter
 * then waits only for holders that are not waiting).
 */
import { monotonicClock, type Clock } from './clock.js';

export interface ByteBudgetOptions {
  readonly capacity: number;
  /** Told how long each take that had to wait waited, in milliseconds. */
  readonly onWaited?: (ms: number) => void;
  /** What waits are timed on; default monotonicClock. */
  readonly clock?: Pick<Clock, 'now'>;
}

interface Waiter {
  readonly bytes: number;
  readonly grant: () => void;
}

export class ByteBudget {
  private taken = 0;
  private readonly waiting: Waiter[] = [];

  constructor(private readonly options: ByteBudgetOptions) {
    if (!(options.capacity > 0)) throw new Error(`a byte budget needs a positive capacity, not ${options.capacity}`);
  }

  get capacity(): number {
    return this.options.capacity;
  }

  /** Bytes taken now. */
  get held(): number {
    return this.taken;
  }

  /** Takers waiting now. */
  get queued(): number {
    return this.waiting.length;
  }

  /**
   * Takes `bytes` (at most the capacity), waiting for them; resolves with the function that gives
   * them back (once; later calls do nothing). An abort while waiting rejects with the signal's
   * reason and takes nothing.
   */
  async take(bytes: number, signal?: AbortSignal): Promise<() => void> {
    const want = Math.min(Math.max(0, bytes), this.options.capacity);
    signal?.throwIfAborted();
    if (this.waiting.length === 0 && this.taken + want <= this.options.capacity) {
      this.taken += want;
      return this.giveBack(want);
    }
    const clock = this.options.clock ?? monotonicClock;
    const since = clock.now();
    await new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        bytes: want,
        grant: () => {
          signal?.removeEventListener('abort', abort);
          resolve();
        },
      };
      const abort = () => {
        const at = this.waiting.indexOf(waiter);
        if (at >= 0) this.waiting.splice(at, 1);
        // The first in line left: those behind it may fit now.
        this.grantWaiting();
        reject(signal!.reason);
      };
      signal?.addEventListener('abort', abort, { once: true });
      this.waiting.push(waiter);
    });
    this.options.onWaited?.(clock.now() - since);
    return this.giveBack(want);
  }

  private giveBack(bytes: number): () => void {
    let given = false;
    return () => {
      if (given) return;
      given = true;
      this.taken -= bytes;
      this.grantWaiting();
    };
  }

  /** Grants the waiters at the head of the line, in order, while they fit. */
  private grantWaiting(): void {
    for (;;) {
      const next = this.waiting[0];
      if (!next || this.taken + next.bytes > this.options.capacity) return;
      this.waiting.shift();
      this.taken += next.bytes;
      next.grant();
    }
  }
}
