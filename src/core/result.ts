/** What a reconcile asks of the work queue: nothing, or to look again later. */
export interface Result {
  readonly requeueAfterMs?: number;
}

export const done: Result = {};

/** An error that retrying cannot fix until the object changes; logged, not retried. */
export class TerminalError extends Error {
  override name = 'TerminalError';
}
