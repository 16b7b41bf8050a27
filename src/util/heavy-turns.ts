/**
 * Turns on the event loop for heavy work, one per loop iteration, so that light work is never
 * held behind a pile of it.
 *
 * relsync runs on one event loop. A tenant's large objects (a 1 MiB watch line, an answer of a
 * 900 KiB copy, a page of them) each take milliseconds to parse and hash, and they come in bursts:
 * a watch stream that buffered four such lines while the loop was busy hands all four over in one
 * go, since a Readable's async iterator reads what is buffered without going back to the loop.
 * Another tenant's small change, whose socket became readable meanwhile, then waits for the whole
 * burst, and again at each step of its reconcile (tenant-budget.test.ts measured 400–900 ms where
 * its idle p99 was 47 ms). Here, work that says it is heavy waits for its turn: one heavy task
 * starts per iteration of the event loop (setImmediate), so between two of them the loop polls
 * its sockets and everything light that became ready runs first. Light work never waits, and a
 * heavy task waits for at most the heavy tasks queued before it: all get done, in order.
 *
 * What a heavy task is: its size in bytes (the text about to be parsed), at least HEAVY_BYTES.
 */

/** From this size on, a text's parsing and what follows it waits for a turn (a few ms of work on this machine's cores). */
export const HEAVY_BYTES = 64 * 1024;

export class HeavyTurns {
  private readonly waiting: Array<() => void> = [];
  private pumping = false;
  private granted = 0;

  constructor(private readonly heavyBytes = HEAVY_BYTES) {}

  /**
   * Undefined when `bytes` is light: go on at once. Otherwise a promise that resolves at the
   * heavy task's turn; `await turns.turn(n)` works for both.
   */
  turn(bytes: number): Promise<void> | undefined {
    if (bytes < this.heavyBytes) return undefined;
    const turn = new Promise<void>((resolve) => this.waiting.push(resolve));
    this.pump();
    return turn;
  }

  /** Heavy tasks that waited for a turn so far (a metric). */
  get turnsGranted(): number {
    return this.granted;
  }

  /** Heavy tasks waiting now. */
  get queued(): number {
    return this.waiting.length;
  }

  private pump(): void {
    if (this.pumping) return;
    this.pumping = true;
    // setImmediate queued from an immediate callback runs at the next iteration of the loop, after
    // its poll phase: each turn is its own iteration.
    setImmediate(() => {
      this.pumping = false;
      const next = this.waiting.shift();
      if (!next) return;
      this.granted++;
      next();
      if (this.waiting.length > 0) this.pump();
    });
  }
}

/** The process's one event loop, shared by every caller. */
export const heavyTurns = new HeavyTurns();
