/**
 * A clock that moves only when a test says so (src/util/clock.ts): timers
 * fire in time order during advance(), and each fired callback's promises
 * settle before the next one, so a test sees exactly what happened by then.
 */
import { systemClock, type Clock, type Timer } from '../../src/util/clock.js';

export class FakeClock implements Clock {
  private seq = 0;
  private readonly timers = new Map<number, { at: number; fn: () => void }>();

  /** `time`: where it starts (ms; a time of day for what writes one down, e.g. Date.parse('2026-12-02T10:00:00Z')). */
  constructor(private time = 0) {}

  now(): number {
    return this.time;
  }

  after(ms: number, fn: () => void): Timer {
    const id = this.seq++;
    // As setTimeout: a negative or NaN delay is about 1 ms, never the past.
    const delay = Number.isFinite(ms) && ms >= 1 ? ms : 1;
    this.timers.set(id, { at: this.time + delay, fn });
    return { cancel: () => void this.timers.delete(id) };
  }

  /** As the system clock's: resolves when advance() reaches `ms` from now, or at once on abort. */
  sleep(ms: number, signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        timer.cancel();
        signal.removeEventListener('abort', done);
        resolve();
      };
      const timer = this.after(ms, done);
      if (signal.aborted) done();
      else signal.addEventListener('abort', done, { once: true });
    });
  }

  /** Timers (and sleeps) not yet fired. */
  get pending(): number {
    return this.timers.size;
  }

  /**
   * Moves time forward by `ms`, firing what falls due, in order. What can
   * settle now settles first, as it would before any real time passed (a line
   * a test just pushed is read before a timer due later fires).
   */
  async advance(ms: number): Promise<void> {
    const until = this.time + ms;
    await settle();
    for (;;) {
      const next = [...this.timers.entries()].filter(([, t]) => t.at <= until).sort((a, b) => a[1].at - b[1].at || a[0] - b[0])[0];
      if (!next) break;
      this.timers.delete(next[0]);
      this.time = next[1].at;
      next[1].fn();
      await settle();
    }
    this.time = until;
    await settle();
  }
}

/** Lets every promise that can settle now settle (a few macrotask turns, no time passes on any clock). */
export async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
}

/**
 * A clock that reads the time the test sets (`now`), for code that only reads time: unlike
 * FakeClock, moving it settles nothing; its timers, if any, are the system's.
 */
export function clockReading(now: () => number): Clock {
  return { ...systemClock, now };
}
