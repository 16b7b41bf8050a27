/**
 * At most `capacity` bytes taken at once, over every taker; a taker that does not fit waits, in
 * the order they asked (a large one is not overtaken by smaller ones for ever). A take larger than
 * the whole capacity waits until nothing else is taken and then takes all of it: one taker alone
 * always fits. Deadlock-free as long as no taker waits for a take while it holds one (each waiter
 * then waits only for holders that are not waiting).
 *
 * One exception to the order: a small take (at most an eighth of the capacity: an ordinary watch
 * event) that fits goes ahead of waiting ones, as long as what such takes hold together stays
 * within an eighth of the capacity and the first in line would still fit beside them. Otherwise a
 * tenant whose relists keep large pages waiting (its own API server answering 410 Gone) would hold
 * every other tenant's small events behind them. The first in line is not starved: it waits only
 * for the holders that were in line before it and at most an eighth of small ones.
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
  /** `ahead`: granted ahead of a large waiting take (counted in aheadTaken until given back). */
  readonly grant: (ahead: boolean) => void;
}

export class ByteBudget {
  private taken = 0;
  /** Of `taken`, what small takes that went ahead of waiting ones hold. */
  private aheadTaken = 0;
  private readonly waiting: Waiter[] = [];
  /** Small takes that could not go ahead when they asked, in order. */
  private readonly smallWaiting: Waiter[] = [];

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
    return this.waiting.length + this.smallWaiting.length;
  }

  /**
   * Takes `bytes` (at most the capacity), waiting for them; resolves with the function that gives
   * them back (once; later calls do nothing). An abort while waiting rejects with the signal's
   * reason and takes nothing.
   */
  async take(bytes: number, signal?: AbortSignal): Promise<() => void> {
    const want = Math.min(Math.max(0, bytes), this.options.capacity);
    signal?.throwIfAborted();
    const small = want <= this.options.capacity / 8;
    if (this.waiting.length === 0 && this.smallWaiting.length === 0 && this.taken + want <= this.options.capacity) {
      this.taken += want;
      return this.giveBack(want);
    }
    if (small && this.smallWaiting.length === 0 && this.mayGoAhead(want)) {
      this.taken += want;
      this.aheadTaken += want;
      return this.giveBack(want, true);
    }
    const clock = this.options.clock ?? monotonicClock;
    const since = clock.now();
    // Small ones wait in a line of their own, let in as room among the small ones comes back.
    const line = small ? this.smallWaiting : this.waiting;
    const ahead = await new Promise<boolean>((resolve, reject) => {
      const waiter: Waiter = {
        bytes: want,
        grant: (wentAhead) => {
          signal?.removeEventListener('abort', abort);
          resolve(wentAhead);
        },
      };
      const abort = () => {
        const at = line.indexOf(waiter);
        if (at >= 0) line.splice(at, 1);
        // The first in line left: those behind it may fit now.
        this.grantWaiting();
        reject(signal!.reason);
      };
      signal?.addEventListener('abort', abort, { once: true });
      line.push(waiter);
    });
    this.options.onWaited?.(clock.now() - since);
    return this.giveBack(want, ahead);
  }

  /** A small take that fits, beside the other small ones ahead, and leaves room for the first in line. */
  private mayGoAhead(want: number): boolean {
    const share = this.options.capacity / 8;
    const first = this.waiting[0];
    return (
      first !== undefined &&
      want <= share &&
      this.aheadTaken + want <= share &&
      this.taken + want <= this.options.capacity &&
      first.bytes + share <= this.options.capacity
    );
  }

  private giveBack(bytes: number, ahead = false): () => void {
    let given = false;
    return () => {
      if (given) return;
      given = true;
      this.taken -= bytes;
      if (ahead) this.aheadTaken -= bytes;
      this.grantWaiting();
    };
  }

  /**
   * Grants the waiters at the head of the line, in order, while they fit; then small ones, ahead
   * of a large one at the head while mayGoAhead() lets them, or in turn when no large one waits.
   */
  private grantWaiting(): void {
    for (;;) {
      const next = this.waiting[0];
      if (next && this.taken + next.bytes <= this.options.capacity) {
        this.waiting.shift();
        this.taken += next.bytes;
        next.grant(false);
        continue;
      }
      const small = this.smallWaiting[0];
      if (!small) return;
      if (!next && this.taken + small.bytes <= this.options.capacity) {
        this.smallWaiting.shift();
        this.taken += small.bytes;
        small.grant(false);
        continue;
      }
      if (!next || !this.mayGoAhead(small.bytes)) return;
      this.smallWaiting.shift();
      this.taken += small.bytes;
      this.aheadTaken += small.bytes;
      small.grant(true);
    }
  }
}
