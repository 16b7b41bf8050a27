/**
 * What a sweep learns from reading the store once: which (source, copy)
 * pairs the store accounts for (for the orphan check), and which relations
 * its reconciles added and removed (for its record).
 *
 * A sweep reads every primary with its relations, a page at a time, for its
 * skip checks (sweep-skip.ts). The same pages give every pair the store
 * accounts for, so the orphan check needs no second read of the whole store;
 * the primaries the sweep reconciles are read again as each reconcile ends,
 * and only their pairs change (their counts then include what a watch-driven
 * reconcile of the same primary changed meanwhile). A change made meanwhile
 * to a primary the sweep skipped is not seen here, and that is safe both
 * ways: a pair it added is missing, so the orphan check looks at that copy
 * again with a fresh GET and a store read before deleting anything
 * (sweeper.ts); a pair it removed is still counted, so that copy waits for the
 * next sweep — the reconcile that dropped the relation deletes its copy
 * itself.
 *
 * Memory: a key per pair, as many as the store's primaries and relations,
 * for the sweep's duration; and the relation keys of the primaries it
 * reconciles, until they are read again.
 */
import { compositeKey } from '../core/composite-key.js';
import { identityKey, type ObjectIdentity } from '../core/identity.js';
import type { PrimaryRecord, RelationRecord } from '../store/records.js';

type Relation = Pick<RelationRecord, 'ruleId' | 'source' | 'destination'>;

/** The in-memory key of a (source, copy) pair. */
function pairKey(source: ObjectIdentity, copy: ObjectIdentity): string {
  return compositeKey(identityKey(source), identityKey(copy));
}

function relationKey(r: Relation): string {
  return compositeKey(r.ruleId, identityKey(r.source));
}

export class SweepAccounting {
  /** Every pair the store accounts for, as read (of a reconciled primary: after its reconcile). */
  private readonly pairs = new Set<string>();
  /** Relation keys, as stored before the sweep reconciled them, of the primaries it reconciles. */
  private readonly before = new Map<string, Set<string>>();

  /**
   * A primary as the store holds it. `reconciled`: the sweep reconciles it and calls reconciled()
   * after; its pairs count from then.
   */
  read(primary: Pick<PrimaryRecord, 'id' | 'copy'>, relations: readonly Relation[], reconciled: boolean): void {
    if (reconciled) this.before.set(identityKey(primary.id), new Set(relations.map(relationKey)));
    else this.count(primary, relations);
  }

  /**
   * A primary the sweep reconciled, as the store holds it after (`primary` undefined: not in the
   * store). Returns how many relations it has that read() did not see, and how many it lost.
   */
  reconciled(id: ObjectIdentity, primary: Pick<PrimaryRecord, 'id' | 'copy'> | undefined, relations: readonly Relation[]): { added: number; removed: number } {
    if (primary) this.count(primary, relations);
    const before = this.before.get(identityKey(id)) ?? new Set<string>();
    this.before.delete(identityKey(id));
    const after = new Set(relations.map(relationKey));
    let added = 0;
    let removed = 0;
    for (const k of after) if (!before.has(k)) added++;
    for (const k of before) if (!after.has(k)) removed++;
    return { added, removed };
  }

  /** Whether the store (as read) accounts for `copy` as the copy of `source`. */
  accounts(source: ObjectIdentity, copy: ObjectIdentity): boolean {
    return this.pairs.has(pairKey(source, copy));
  }

  private count(primary: Pick<PrimaryRecord, 'id' | 'copy'>, relations: readonly Relation[]): void {
    this.pairs.add(pairKey(primary.id, primary.copy));
    for (const r of relations) this.pairs.add(pairKey(r.source, r.destination));
  }
}
