/**
 * Runs `fn` once `signal` aborts, or at once when it has aborted already: an abort event is never
 * sent again, so a listener added after it would wait forever (a shard given up while its term was
 * still starting left its work queue running and the shard held: found by the sharded crash-loop run).
 */
export function onAbort(signal: AbortSignal, fn: () => void): void {
  if (signal.aborted) fn();
  else signal.addEventListener('abort', fn, { once: true });
}

/** Resolves once `signal` aborts (at once when it has). */
export function aborted(signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => onAbort(signal, resolve));
}
