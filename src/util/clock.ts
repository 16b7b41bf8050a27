/**
 * Time, wherever it decides behaviour or is written down: the only file in
 * src/ that reads the machine's time or sets a timer (lint holds every other
 * to it: eslint.config.js). Everything else is given a Clock — the system's
 * in production, a fake one in tests that moves only when told, so that a
 * test of "not before 500 ms" needs no sleep and cannot be flaky.
 */

export interface Timer {
  cancel(): void;
}

export interface Clock {
  /** Milliseconds: since the epoch for systemClock (a time of day), since an arbitrary start for monotonicClock. */
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

/** The machine's time of day (Date.now) and its timers: what production runs on. */
export const systemClock: Clock = {
  now: () => Date.now(),
  after(ms, fn) {
    const t = setTimeout(fn, ms);
    t.unref();
    return { cancel: () => clearTimeout(t) };
  },
  sleep(ms, signal) {
    // An abort listener added to a signal that already aborted never fires.
    if (signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        resolve();
      }
      signal.addEventListener('abort', done, { once: true });
    });
  },
};

/**
 * Time that only moves forward, at the machine's rate (performance.now()): for the ages of Lease
 * records and renew deadlines, which a wall clock stepped back or forward (NTP, a VM resumed)
 * would stretch or cut, as client-go measures them on Go's monotonic clock, and for durations
 * measured for metrics. Not a time of day.
 */
export const monotonicClock: Clock = { ...systemClock, now: () => performance.now() };

/** The clock's time of day as the store and the Kubernetes API write it (ISO 8601, UTC, milliseconds). */
export function isoTime(clock: Clock): string {
  return new Date(clock.now()).toISOString();
}

/** Calls `fn` every `ms` until the timer is cancelled; like after(), it does not keep the process alive. */
export function every(clock: Clock, ms: number, fn: () => void): Timer {
  let timer: Timer | undefined;
  let cancelled = false;
  const arm = () => {
    timer = clock.after(ms, () => {
      if (cancelled) return;
      arm();
      fn();
    });
  };
  arm();
  return {
    cancel: () => {
      cancelled = true;
      timer?.cancel();
    },
  };
}

/**
 * A signal that aborts after `ms` on `clock`, with a TimeoutError as AbortSignal.timeout() does;
 * like it, it does not keep the process alive.
 */
export function timeoutSignal(clock: Clock, ms: number): AbortSignal {
  const controller = new AbortController();
  clock.after(ms, () => controller.abort(new DOMException(`timed out after ${ms} ms`, 'TimeoutError')));
  return controller.signal;
}
