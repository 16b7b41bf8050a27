/**
 * Turns on the event loop for heavy work, one per loop iteration, taken by lanes in turn, so
 * that light work is never held behind a pile of heavy work, nor one tenant's heavy work behind
 * another's.
 *
 * relsync runs on one event loop. A tenant's large objects (a 1 MiB watch line, an answer of a
 * 900 KiB object, a page of them) each take milliseconds to parse and hash, and they come in
 * bursts: a watch stream that buffered four such lines while the loop was busy hands all four over
 * in one go, since a Readable's async iterator reads what is buffered without going back to the
 * loop. Another tenant's small change, whose socket became readable meanwhile, then waits for the
 * whole burst, and again at each step of its reconcile (tenant-budget.test.ts measured 400–900 ms
 * where its idle p99 was 47 ms). Here, work that says it is heavy waits for its turn: one heavy
 * task starts per iteration of the event loop (setImmediate), so between two of them the loop
 * polls its sockets and everything light that became ready runs first. Light work never waits.
 * Heavy tasks wait in the lane their caller names (the cluster they come from or are done for):
 * lanes take turns, and a lane's tasks go in order, so a tenant that keeps a hundred heavy tasks
 * queued delays another's by one turn each, not by a hundred.
 *
 * What is heavy: work that costs at least as much as parsing HEAVY_BYTES of JSON.
 */

/** From this cost on (bytes of JSON parsed, or the like), work waits for a turn: a few ms on this machine's cores. */
export const HEAVY_BYTES = 64 * 1024;

/** Cost added up across small pieces of work: see HeavyTurns.meter(). */
export interface TurnMeter {
  /** Undefined: go on at once; otherwise the turn to await first. */
  add(cost: number): Promise<void> | undefined;
}

export class HeavyTurns {
  /** The lanes with tasks waiting, in the order they take turns; each lane's tasks in order. */
  private readonly lanes = new Map<string, Array<() => void>>();
  private waitingCount = 0;
  private pumping = false;
  private granted = 0;

  constructor(private readonly heavyBytes = HEAVY_BYTES) {}

  /**
   * Undefined when `cost` is light: go on at once. Otherwise a promise that resolves at the heavy
   * task's turn in `lane`; `await turns.turn(n, lane)` works for both.
   */
  turn(cost: number, lane = ''): Promise<void> | undefined {
    if (cost < this.heavyBytes) return undefined;
    const turn = new Promise<void>((resolve) => {
      const tasks = this.lanes.get(lane);
      if (tasks) tasks.push(resolve);
      else this.lanes.set(lane, [resolve]);
    });
    this.waitingCount++;
    this.pump();
    return turn;
  }

  /**
   * For a run of small pieces of work whose cost adds up (a stream's lines, a page's items): add()
   * each piece's cost, and once they come to heavyBytes the next add() waits for a turn in `lane`.
   */
  meter(lane = ''): TurnMeter {
    let since = 0;
    return {
      add: (cost) => {
        since += cost;
        const turn = this.turn(since, lane);
        if (!turn) return undefined;
        since = 0;
        return turn;
      },
    };
  }

  /** Heavy tasks that waited for a turn so far (a metric). */
  get turnsGranted(): number {
    return this.granted;
  }

  /** Heavy tasks waiting now. */
  get queued(): number {
    return this.waitingCount;
  }

  private pump(): void {
    if (this.pumping) return;
    this.pumping = true;
    // setImmediate queued from an immediate callback runs at the next iteration of the loop, after
    // its poll phase: each turn is its own iteration.
    setImmediate(() => {
      this.pumping = false;
      const next = this.lanes.entries().next();
      if (next.done) return;
      const [lane, tasks] = next.value;
      const resolve = tasks.shift()!;
      // The lane goes to the back (Map order), or away when it has nothing more waiting.
      this.lanes.delete(lane);
      if (tasks.length > 0) this.lanes.set(lane, tasks);
      this.waitingCount--;
      this.granted++;
      resolve();
      if (this.waitingCount > 0) this.pump();
    });
  }
}

/** The process's one event loop, shared by every caller. */
export const heavyTurns = new HeavyTurns();
