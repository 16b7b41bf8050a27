/**
 * Breaks for the event loop in a run of work that never waits for I/O.
 *
 * A reconcile whose reads the cache answers and whose copies are up to date writes nothing and
 * waits for nothing but promises: the work queue's next key starts in the same microtask chain,
 * and so on for hundreds of keys. No socket is read meanwhile, so another tenant's change that
 * arrived waits for the whole run: the startup sweep's 500 such reconciles held the loop for
 * 540 ms (tenant-budget.test.ts, "flood after a restart": tenant-b's change took 598 ms where the
 * floor's took 58 ms). So does routing a LIST page (event-router.ts) and a sweep's listing
 * (sweeper.ts): store reads item after item, no socket read. heavy-turns.ts gives turns to work
 * that says it is heavy; this is for light work that adds up. A caller asks due() between two pieces of work: once the loop has gone
 * BUSY_MS without reaching its check phase (setImmediate), the next piece waits for it, and the
 * loop polls its sockets first.
 */
import { monotonicClock, type Clock } from './clock.js';

/** How long a run of light work may hold the loop before it lets it go round: a few reconciles. */
export const BUSY_MS = 8;

export class LoopBreaks {
  /** When the loop last reached its check phase (as far as this knows). */
  private lastBreak: number;
  private armed = false;
  /** The break every caller that finds one due waits for: one, or each would start a budget of its own after it. */
  private pending: Promise<void> | undefined;

  constructor(
    private readonly busyMs = BUSY_MS,
    private readonly clock: Pick<Clock, 'now'> = monotonicClock,
  ) {
    this.lastBreak = clock.now();
  }

  /**
   * Undefined: go on at once. Otherwise the promise, shared by every caller meanwhile, that
   * resolves in the loop's next check phase; `await breaks.due()` works for both. Callers that
   * resume after a break share one budget again: several workers hold the loop BUSY_MS together,
   * not BUSY_MS each. After an idle loop the first call may wait one check phase (the last break
   * it knows of is old): a fraction of a millisecond.
   */
  due(): Promise<void> | undefined {
    if (this.pending) return this.pending;
    if (this.clock.now() - this.lastBreak < this.busyMs) {
      this.arm();
      return undefined;
    }
    this.pending = new Promise((resolve) => setImmediate(() => {
      this.pending = undefined;
      this.lastBreak = this.clock.now();
      resolve();
    }));
    return this.pending;
  }

  /** Notes when the loop next goes round: a loop that does, between two calls, owes no break. */
  private arm(): void {
    if (this.armed) return;
    this.armed = true;
    setImmediate(() => {
      this.armed = false;
      this.lastBreak = this.clock.now();
    });
  }
}

/** The process's one event loop, shared by every caller. */
export const loopBreaks = new LoopBreaks();
