/**
 * Which label keys stored selectors are anchored on, by scope (cluster,
 * group, resource, namespace): the selector index looks an object up only by
 * these. Kept per scope so that a lookup walks whichever is shorter, the few
 * keys selectors of the object's scope use or the object's labels: a tenant's
 * object with ten thousand labels then costs a handful of property reads, not
 * ten thousand set lookups of joined strings.
 */
import { compositeKey } from '../core/composite-key.js';
import type { ObjectIdentity } from '../core/identity.js';

/** Stands for "selectors without an anchor" among a scope's label keys (no label key has a NUL in it). */
export const UNANCHORED = '\u0000unanchored';

export type LabelScope = Omit<ObjectIdentity, 'name'>;

/** One anchoring key: a scope and a label key (or UNANCHORED). */
export interface AnchoredKey {
  readonly scope: string;
  readonly labelKey: string;
}

export function scopeKeyOf(scope: LabelScope): string {
  return compositeKey(scope.cluster, scope.group, scope.resource, scope.namespace);
}

export class AnchoredLabelKeys {
  private readonly byScope = new Map<string, Set<string>>();
  private count = 0;

  constructor(keys: Iterable<AnchoredKey> = []) {
    for (const key of keys) this.add(key);
  }

  add({ scope, labelKey }: AnchoredKey): void {
    let keys = this.byScope.get(scope);
    if (!keys) this.byScope.set(scope, (keys = new Set()));
    if (keys.has(labelKey)) return;
    keys.add(labelKey);
    this.count++;
  }

  /** The label keys of a scope (UNANCHORED among them when some selector there has no anchor). */
  keysIn(scope: string): ReadonlySet<string> {
    return this.byScope.get(scope) ?? NONE;
  }

  get size(): number {
    return this.count;
  }

  *[Symbol.iterator](): IterableIterator<AnchoredKey> {
    for (const [scope, keys] of this.byScope) for (const labelKey of keys) yield { scope, labelKey };
  }

  /** The same keys in every scope. */
  equals(other: AnchoredLabelKeys): boolean {
    if (other.size !== this.size) return false;
    for (const [scope, keys] of this.byScope) {
      const theirs = other.keysIn(scope);
      for (const key of keys) if (!theirs.has(key)) return false;
    }
    return true;
  }
}

const NONE: ReadonlySet<string> = new Set();
