/** What a reconcile asks of the work queue: nothing, or to look again later. */
export interface Result {
  readonly requeueAfterMs?: number;
  /**
   * The primary exists and may own related copies, but the store holds none of its relations (it
   * was refused, say by limits.primariesPerCluster): a sweep must not take its cluster's related
   * copies for orphans on the store's silence.
   */
  readonly relationsUnknown?: boolean;
}

export const done: Result = {};
