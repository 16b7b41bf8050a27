/**
 * Time, where it decides behaviour (the work queue's delays, for now): the
 * system's in production, a fake one in tests that moves only when told, so
 * that a test of "not before 500 ms" needs no sleep and cannot be flaky.
 */
export interface Timer {
  cancel(): void;
}

export interface Clock {
  now(): number;
  /** Calls `fn` after `ms`; the timer does not keep the process alive. */
  after(ms: number, fn: () => void): Timer;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  after(ms, fn) {
    const t = setTimeout(fn, ms);
    t.unref();
    return { cancel: () => clearTimeout(t) };
  },
};
