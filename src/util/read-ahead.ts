/**
 * Iterates `source` one item ahead: the next item is asked for as soon as the
 * current one is handed over, so that producing it (a LIST page the API
 * server assembles) overlaps with the caller's work on the current one. At
 * most two items are held at once. A failure of the item asked for ahead
 * surfaces when the caller reaches it, never as an unhandled rejection; a
 * caller that stops early ends the source after the request ahead settled.
 */
export async function* readAhead<T>(source: AsyncIterable<T>): AsyncGenerator<T> {
  const iterator = source[Symbol.asyncIterator]();
  let ahead = settle(iterator.next());
  let done = false;
  try {
    for (;;) {
      const result = await ahead;
      if (!result.ok) throw result.error;
      if (result.value.done) {
        done = true;
        return;
      }
      ahead = settle(iterator.next());
      yield result.value.value;
    }
  } finally {
    if (!done) {
      // Stopped early (break, or an error here or in the caller): let the request ahead finish
      // (at most one request's timeout), then close the source so that it releases what it holds.
      // A failure to close must not hide the caller's own error, which is what stopped us.
      await ahead;
      try {
        await iterator.return?.();
      } catch {
        // nothing to add: the source's next read would have failed the same way
      }
    }
  }
}

type Settled<T> = { readonly ok: true; readonly value: IteratorResult<T> } | { readonly ok: false; readonly error: unknown };

function settle<T>(next: Promise<IteratorResult<T>>): Promise<Settled<T>> {
  return next.then(
    (value) => ({ ok: true, value }),
    (error: unknown) => ({ ok: false, error }),
  );
}
