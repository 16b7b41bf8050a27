/**
 * Time, where it decides behaviour (the work queue's delays, the list/watch
 * loop's watchdog and liveness, leader election's lease expiry and renew
 * deadline): the system's in production, a fake one in tests that moves only
 * when told, so that a test of "not before 500 ms" needs no sleep and cannot
 * be flaky.
 */
import { sleep } from './sleep.js';

export interface Timer {
  cancel(): void;
}

export interface Clock {
  now(): number;
  /** Calls `fn` after `ms`; the timer does not keep the process alive. */
  after(ms: number, fn: () => void): Timer;
  /**
   * Resolves after `ms`, or at once when `signal` aborts (never rejects). Unlike
   * after(), a wait keeps the process alive, as a retry loop's wait must: it
   * may be the only thing pending (a standby without an HTTP server).
   */
  sleep(ms: number, signal: AbortSignal): Promise<void>;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  after(ms, fn) {
    const t = setTimeout(fn, ms);
    t.unref();
    return { cancel: () => clearTimeout(t) };
  },
  sleep,
};

/**
 * Time that only moves forward, at the machine's rate (performance.now()): for the ages of Lease
 * records and renew deadlines, which a wall clock stepped back or forward (NTP, a VM resumed)
 * would stretch or cut, as client-go measures them on Go's monotonic clock. Not a time of day.
 */
export const monotonicClock: Clock = { ...systemClock, now: () => performance.now() };
