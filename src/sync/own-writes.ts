/**
 * The resourceVersions of objects relsync itself just wrote, so that the
 * watch event each write causes is not routed back into a reconcile that
 * would find nothing to do (it halves the reconciles per related change).
 * An entry is dropped when its event is seen; the map is capped (oldest
 * first), and a miss only costs one no-op reconcile, never a lost change.
 */
import { identityKey, type ObjectIdentity } from '../core/identity.js';

export class OwnWrites {
  private readonly written = new Map<string, string>();

  constructor(private readonly max = 10_000) {}

  record(id: ObjectIdentity, resourceVersion: string | undefined): void {
    if (!resourceVersion) return;
    const key = identityKey(id);
    this.written.delete(key);
    this.written.set(key, resourceVersion);
    while (this.written.size > this.max) this.written.delete(this.written.keys().next().value!);
  }

  /** True (once) when this exact version of the object is one relsync wrote. */
  consume(id: ObjectIdentity, resourceVersion: string | undefined): boolean {
    const key = identityKey(id);
    if (!resourceVersion || this.written.get(key) !== resourceVersion) return false;
    this.written.delete(key);
    return true;
  }

  get size(): number {
    return this.written.size;
  }
}
