/** Resolves after `ms`, or at once when `signal` aborts or already has (never rejects). */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
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
}
