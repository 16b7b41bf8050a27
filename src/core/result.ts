/** What a reconcile asks of the work queue: nothing, or to look again later. */
export interface Result {
  readonly requeueAfterMs?: number;
  /**
   * The primary exists and may own related copies, but the store holds none of its relations (it
   * was refused, say by limits.primariesPerCluster): a sweep must not take its cluster's related
   * copies for orphans on the store's silence.
   */
  readonly relationsUnknown?: boolean;
  /**
   * The store may not hold every claim of this primary on related copies (claim-knowledge.ts): it
   * has no record, or it was kept as it was with relations this store did not see written and
   * could not resolve anew. Its cluster's claims are not known yet, whatever a sweep did.
   */
  readonly claimsUnknown?: boolean;
  /** Copies this run created or updated, and deleted (a sweep sums its reconciles'); absent: none. */
  readonly copies?: { readonly written: number; readonly removed: number };
}

export const done: Result = {};
