/** What a reconcile asks of the work queue: nothing, or to look again later. */
export interface Result {
  readonly requeueAfterMs?: number;
}

export const done: Result = {};
