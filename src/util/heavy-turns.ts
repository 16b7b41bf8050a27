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
 *
 * A turn is one heavy task, but not every heavy task is short: a tenant's megabyte of labels takes
 * 10 ms to parse on an idle core and 50–100 ms on a machine its API servers keep busy, and one turn
 * after another gives light work only the loop's poll phases in between. Another tenant's change
 * needs several of them (its watch line, its reconcile's reads, the answer to its write), each
 * behind the next long turn: tenant-budget.test.ts measured its p99 at 2–2.9× the floor client's
 * while one tenant's heavy objects were created, listed and deleted. So a large turn whose loop
 * iteration took REST_FROM_MS or more is followed by as long a rest of large work (at most
 * MAX_REST_MS), whatever lane asks next: light work then has about half the loop while long turns
 * pile up, and a long turn costs it one wait, not one per step. (Not per lane: a tenant's long
 * turns come in several lanes — its own cluster's, the service cluster's watch of its copies, its
 * kcp workspaces'.) Large work is a turn of 4 × HEAVY_BYTES or more (a large line, answer or
 * page); smaller turns (a reconcile's few rows, a few small watch lines) are not held by a rest
 * and start none (a tenant's stream of them would otherwise keep every lane's large work resting
 * for as long as it lasts), and short turns follow each other as before.
 */
import { monotonicClock, type Clock } from './clock.js';

/** From this cost on (bytes of JSON parsed, or the like), work waits for a turn: a few ms on this machine's cores. */
export const HEAVY_BYTES = 64 * 1024;

/** A turn whose loop iteration took this long (ms) is followed by as long a rest of heavy work. */
export const REST_FROM_MS = 20;

/** The longest rest (ms): a garbage collection or a stalled iteration does not stop heavy work for its length. */
export const MAX_REST_MS = 100;

/** Cost added up across small pieces of work: see HeavyTurns.meter(). */
export interface TurnMeter {
  /** Undefined: go on at once; otherwise the turn to await first. */
  add(cost: number): Promise<void> | undefined;
}

export class HeavyTurns {
  /** The lanes with tasks waiting, in the order they take turns; each lane's tasks in order. */
  private readonly lanes = new Map<string, Array<{ readonly resolve: () => void; readonly cost: number }>>();
  private waitingCount = 0;
  private pumping = false;
  private granted = 0;
  /** Heavy work rests until this time (the clock's) after a long turn. */
  private restUntil = -Infinity;
  /** A wake-up at the rest's end is scheduled. */
  private waking = false;

  constructor(
    private readonly heavyBytes = HEAVY_BYTES,
    private readonly clock: Clock = monotonicClock,
    private readonly restFromMs = REST_FROM_MS,
    /** From this cost on, a turn waits out a rest. */
    private readonly largeBytes = 4 * heavyBytes,
  ) {}

  /**
   * Undefined when `cost` is light: go on at once. Otherwise a promise that resolves at the heavy
   * task's turn in `lane`; `await turns.turn(n, lane)` works for both.
   */
  turn(cost: number, lane = ''): Promise<void> | undefined {
    if (cost < this.heavyBytes) return undefined;
    const turn = new Promise<void>((resolve) => {
      const tasks = this.lanes.get(lane);
      if (tasks) tasks.push({ resolve, cost });
      else this.lanes.set(lane, [{ resolve, cost }]);
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
    setImmediate(() => this.grant());
  }

  /** The next turn, to the next lane in line; during a rest, to the next whose turn is not large. */
  private grant(): void {
    this.pumping = false;
    const now = this.clock.now();
    const resting = this.restUntil > now;
    for (const [lane, tasks] of this.lanes) {
      if (resting && tasks[0]!.cost >= this.largeBytes) continue;
      const { resolve, cost } = tasks.shift()!;
      // The lane goes to the back (Map order), or away when it has nothing more waiting.
      this.lanes.delete(lane);
      if (tasks.length > 0) this.lanes.set(lane, tasks);
      this.waitingCount--;
      this.granted++;
      // Queued before the next turn's grant: it measures the iteration this turn's task runs in.
      setImmediate(() => this.measure(now, cost));
      resolve();
      if (this.waitingCount > 0) this.pump();
      return;
    }
    if (!resting || this.waking) return;
    this.waking = true;
    // A wait that keeps the process alive: heavy work is waiting.
    void this.clock.sleep(this.restUntil - now, NEVER).then(() => {
      this.waking = false;
      this.pump();
    });
  }

  /** A turn's loop iteration ended: a long one of a large turn is followed by a rest, if heavy work waits. */
  private measure(grantedAt: number, cost: number): void {
    if (cost < this.largeBytes) return;
    const now = this.clock.now();
    const took = now - grantedAt;
    if (took >= this.restFromMs && this.waitingCount > 0) this.restUntil = now + Math.min(took, MAX_REST_MS);
  }
}

/** A rest is never cut short. */
const NEVER = new AbortController().signal;

/** The process's one event loop, shared by every caller. */
export const heavyTurns = new HeavyTurns();
