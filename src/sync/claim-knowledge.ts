/**
 * Whether the store knows every claim on a cluster's related copies.
 *
 * A related copy may be claimed by several primaries (one Secret referenced by
 * two databases). When one of them stops claiming it, the copy goes only if no
 * other primary does — and the store can say that only if it holds the
 * relations of every primary of the cluster. A store that was lost, restored
 * from an older backup or built afresh for a shard that just arrived does not,
 * until every primary of the cluster has been reconciled once: a sweep with a
 * complete view of the cluster's primaries (controller/sweeper.ts) is that
 * evidence. Until then such a copy is left in place, remembered here, and the
 * sweep that completes the cluster decides it (it deletes it only if no stored
 * relation accounts for it by then).
 *
 * `resync.onStartup: false` says the store is current when relsync starts (no
 * sweep would come to complete it soon): a store that knows primaries is
 * trusted from the start. A new or lost one is not (it knows no claim at all):
 * it gets a startup sweep all the same.
 *
 * A kcp workspace that unbinds (every URL of its platform says so) is complete
 * too: none of its primaries can be read or claim a copy any more, so the
 * claims the store holds are all there are. Its copies left in place are then
 * decided at once (binding-watch.ts): once relsync forgets the workspace, no
 * sweep could complete it. When it binds again it is not complete any more:
 * kcp may have kept its objects (an APIBinding's `deletionPolicy: Orphan`).
 *
 * Memory: one entry per cluster a sweep or an unbind completed (clusters that
 * exist or existed while this process ran), and at most `maxDeferred` copies
 * left in place, `maxPerCluster` of one cluster (beyond, they wait for a later
 * sweep's orphan check, which finds them by listing).
 */
import { compositeKey } from '../core/composite-key.js';
import { identityKey, type ObjectIdentity } from '../core/identity.js';
import type { ResourceType } from '../core/resource-type.js';
import { isoTime, systemClock } from '../util/clock.js';

/** A related copy left in place because its cluster's claims were not known. */
export interface DeferredCopy {
  /** The cluster whose primaries may claim it (the source's, for a copy in the service cluster). */
  readonly claimants: string;
  readonly type: ResourceType;
  readonly destination: ObjectIdentity;
  readonly source: ObjectIdentity;
}

export class ClaimKnowledge {
  private readonly known = new Set<string>();
  private readonly deferred = new Map<string, DeferredCopy>();
  /** Copies left in place that did not fit in `deferred`: a later sweep must look again. */
  private overflow = 0;

  /** Copies remembered per cluster: one tenant does not take all the room. */
  private readonly perCluster = new Map<string, number>();

  constructor(
    /** The store is taken as knowing every claim from the start (claims are never deferred). */
    readonly trustedAtStart: boolean,
    private readonly maxDeferred = 10_000,
    private readonly maxPerCluster = 1_000,
    /** When this process began to rely on the store (an ISO time, as the store writes them); default: now, on systemClock. */
    readonly openedAt: string = isoTime(systemClock),
  ) {}

  /**
   * Whether a primary's stored relations are its claims as this process saw them written: the
   * store is trusted, or the primary's last complete sync (`lastSyncedAt`) came after the store was
   * opened. Relations of an older store's, or none at all, are not.
   */
  writtenSinceOpened(record: { readonly lastSyncedAt: string | null } | undefined): boolean {
    return this.trustedAtStart || (record?.lastSyncedAt != null && record.lastSyncedAt >= this.openedAt);
  }

  /** True once the store holds every claim of `cluster`'s primaries. */
  complete(cluster: string): boolean {
    return this.trustedAtStart || this.known.has(cluster);
  }

  /** A sweep reconciled every primary of these clusters, with complete LISTs; or a kcp workspace unbound. */
  markComplete(clusters: Iterable<string>): void {
    for (const c of clusters) this.known.add(c);
  }

  /** A kcp workspace binds (anew, or again): objects kcp kept may claim what the store does not know. */
  forget(cluster: string): void {
    this.known.delete(cluster);
  }

  /** Whether copies of `cluster`'s claims wait here to be decided (left in place while its claims were not known). */
  hasDeferred(cluster: string): boolean {
    return this.perCluster.has(cluster);
  }

  /**
   * Told of each cluster a copy was left in place for (remembered here or not): only a sweep that
   * completes the cluster decides it, and the next scheduled one may be hours away
   * (controller/sweep-triggers.ts asks for a follow-up).
   */
  onDeferred: ((cluster: string) => void) | undefined;

  /**
   * Remembers a copy left in place (its last known claim ended while the claims were not known).
   * `tell`: onDeferred hears of it; not for a copy a sweep could not delete and keeps for the next
   * one (its cluster complete, so no follow-up could do more than the next scheduled sweep).
   */
  defer(copy: DeferredCopy, tell = true): void {
    const key = compositeKey(identityKey(copy.destination), identityKey(copy.source));
    if (this.deferred.has(key)) return;
    if (tell) this.onDeferred?.(copy.claimants);
    const held = this.perCluster.get(copy.claimants) ?? 0;
    if (this.deferred.size >= this.maxDeferred || held >= this.maxPerCluster) {
      this.overflow++;
      return;
    }
    this.deferred.set(key, copy);
    this.perCluster.set(copy.claimants, held + 1);
  }

  /** How many copies wait here for each cluster, of those still not complete (a sweep's end: they keep waiting). */
  waiting(): ReadonlyMap<string, number> {
    return new Map([...this.perCluster].filter(([cluster]) => !this.complete(cluster)));
  }

  /**
   * The copies left in place whose cluster is complete now (of `cluster` only, when given), forgotten
   * here. How many others overflowed is the sweep's to hear (it alone finds them, by listing): only
   * a call without `cluster` takes that count.
   */
  takeDecidable(cluster?: string): { copies: DeferredCopy[]; overflowed: number } {
    const copies: DeferredCopy[] = [];
    for (const [key, copy] of this.deferred) {
      if ((cluster !== undefined && copy.claimants !== cluster) || !this.complete(copy.claimants)) continue;
      copies.push(copy);
      this.deferred.delete(key);
      const held = (this.perCluster.get(copy.claimants) ?? 1) - 1;
      if (held > 0) this.perCluster.set(copy.claimants, held);
      else this.perCluster.delete(copy.claimants);
    }
    if (cluster !== undefined) return { copies, overflowed: 0 };
    const overflowed = this.overflow;
    this.overflow = 0;
    return { copies, overflowed };
  }
}
