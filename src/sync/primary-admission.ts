/**
 * Which primaries relsync takes on: every one the store already holds, and a new one while its
 * cluster is below `limits.primariesPerCluster` and relsync as a whole below `limits.primaries`.
 * The reconciler decides by it (a refused primary gets a `PrimaryLimitReached` verdict), and so
 * do the two ways into the work queue, the event router and the sweep: a tenant who creates a
 * million primaries past its limit costs a store lookup per event, never a million queued keys
 * (memory set by the configuration, whatever a tenant stores). A bounded number of refused
 * primaries is still queued at a time, so that some of them show the verdict that says why.
 *
 * Counts come from the store and are kept for a moment (counted up as primaries are admitted):
 * concurrent workers may pass a limit by a few, as before.
 */
import { identityKey, type ObjectIdentity } from '../core/identity.js';

export interface AdmissionLimits {
  /** Primaries synced per platform cluster (per workspace on kcp). */
  readonly perCluster: number;
  /** Primaries synced in all, over every cluster. */
  readonly total: number;
}

/** What admission reads of the store: counts and whether it holds a primary. */
export interface AdmissionStore {
  countPrimaries(cluster: string): Promise<number>;
  countAllPrimaries(): Promise<number>;
  hasPrimary(id: ObjectIdentity): Promise<boolean>;
}

/** Why a new primary is not taken on: the limit it would pass. */
export interface Refusal {
  readonly limit: 'primariesPerCluster' | 'primaries';
  readonly value: number;
}

/** Refused primaries queued at once for their verdict (each takes a slot until reconciled). */
export const REFUSED_IN_FLIGHT = 100;
/** How long a count read from the store is used (counted up meanwhile). */
const COUNT_TTL_MS = 2_000;
/** Clusters whose count is kept at once. */
const MAX_COUNTED_CLUSTERS = 10_000;

interface Count {
  n: number;
  until: number;
}

export class PrimaryAdmission {
  private readonly clusterCounts = new Map<string, Count>();
  private totalCount: Count | undefined;
  /** Refused primaries queued and not reconciled yet, by identityKey. */
  private readonly refusedInFlight = new Set<string>();
  /** New primaries queued (within the room) and not reconciled yet: by identityKey, and their count per cluster. */
  private readonly pending = new Map<string, string>();
  private readonly pendingIn = new Map<string, number>();

  constructor(
    readonly limits: AdmissionLimits,
    private readonly store: AdmissionStore,
    private readonly now: () => number = Date.now,
  ) {}

  /** Whether a primary the store does not hold may be taken on now; the limit it would pass if not. */
  async room(cluster: string): Promise<Refusal | undefined> {
    if ((await this.countOf(cluster)) >= this.limits.perCluster) return { limit: 'primariesPerCluster', value: this.limits.perCluster };
    if ((await this.total()) >= this.limits.total) return { limit: 'primaries', value: this.limits.total };
    return undefined;
  }

  /** A new primary of `cluster` was taken on (its record is being written). */
  admitted(cluster: string): void {
    const c = this.clusterCounts.get(cluster);
    if (c) c.n++;
    if (this.totalCount) this.totalCount.n++;
  }

  /** A primary of `cluster` was let go: counted afresh, so that one waiting for room is seen soon. */
  released(cluster: string): void {
    this.clusterCounts.delete(cluster);
    this.totalCount = undefined;
  }

  /**
   * Whether an event of this primary goes into the work queue: it is held in the store, there is
   * room for it, or a slot for a refused one is free (its verdict says why it is not synced).
   */
  async mayQueue(id: ObjectIdentity): Promise<boolean> {
    if (await this.store.hasPrimary(id)) return true;
    const key = identityKey(id);
    if (this.pending.has(key)) return true;
    // New ones queued count against the room until their reconcile stores them: a first LIST of a
    // million queues no more than the limits leave.
    const queuedHere = this.pendingIn.get(id.cluster) ?? 0;
    if ((await this.countOf(id.cluster)) + queuedHere < this.limits.perCluster && (await this.total()) + this.pending.size < this.limits.total) {
      this.pending.set(key, id.cluster);
      this.pendingIn.set(id.cluster, queuedHere + 1);
      return true;
    }
    return this.takeRefusedSlot(id);
  }

  /** The reconcile of `id` ran: the room or the slot it held while queued is free. */
  settled(id: ObjectIdentity): void {
    if (this.refusedInFlight.size === 0 && this.pending.size === 0) return;
    const key = identityKey(id);
    this.refusedInFlight.delete(key);
    const cluster = this.pending.get(key);
    if (cluster === undefined) return;
    this.pending.delete(key);
    const n = (this.pendingIn.get(cluster) ?? 1) - 1;
    if (n > 0) this.pendingIn.set(cluster, n);
    else this.pendingIn.delete(cluster);
  }

  /** One sweep's view: what its LISTs show is admitted within the room the store leaves. */
  forSweep(): SweepAdmission {
    return new SweepAdmission(this);
  }

  /** @internal for SweepAdmission */
  takeRefusedSlot(id: ObjectIdentity): boolean {
    const key = identityKey(id);
    if (this.refusedInFlight.has(key)) return true;
    if (this.refusedInFlight.size >= REFUSED_IN_FLIGHT) return false;
    this.refusedInFlight.add(key);
    return true;
  }

  /** @internal for SweepAdmission */
  hasPrimary(id: ObjectIdentity): Promise<boolean> {
    return this.store.hasPrimary(id);
  }

  /** @internal for SweepAdmission: counts as the store holds them (fresh for this sweep). */
  async storedCounts(cluster: string): Promise<{ cluster: number; total: number }> {
    return { cluster: await this.countOf(cluster), total: await this.total() };
  }

  private async countOf(cluster: string): Promise<number> {
    const now = this.now();
    const kept = this.clusterCounts.get(cluster);
    if (kept && kept.until > now) return kept.n;
    const n = await this.store.countPrimaries(cluster);
    this.clusterCounts.delete(cluster);
    this.clusterCounts.set(cluster, { n, until: now + COUNT_TTL_MS });
    if (this.clusterCounts.size > MAX_COUNTED_CLUSTERS) this.clusterCounts.delete(this.clusterCounts.keys().next().value!);
    return n;
  }

  private async total(): Promise<number> {
    const now = this.now();
    if (this.totalCount && this.totalCount.until > now) return this.totalCount.n;
    const n = await this.store.countAllPrimaries();
    this.totalCount = { n, until: now + COUNT_TTL_MS };
    return n;
  }
}

/**
 * Admission over one sweep's LISTs, which show primaries by the page before any of them is
 * reconciled: as long as the primaries listed so far and those the store holds fit the limits,
 * every listed one is taken (whether the store holds it or not); past that, each is looked up,
 * and one the store does not hold is taken only within the room left, counting every earlier
 * listed one as new. So a sweep takes on at most the room the limits leave (sometimes less, when
 * held primaries were listed first: the rest come at the next sweep or change), and keeps at
 * most the limits' worth of keys however many a tenant lists.
 */
export class SweepAdmission {
  private readonly listed = new Map<string, number>();
  private listedTotal = 0;
  private readonly stored = new Map<string, { cluster: number; total: number }>();

  constructor(private readonly admission: PrimaryAdmission) {}

  /** 'take': reconcile it; 'verdict': reconcile it to say it is refused; 'skip': not now. */
  async decide(id: ObjectIdentity): Promise<'take' | 'verdict' | 'skip'> {
    const { perCluster, total } = this.admission.limits;
    let stored = this.stored.get(id.cluster);
    if (!stored) {
      stored = await this.admission.storedCounts(id.cluster);
      this.stored.set(id.cluster, stored);
    }
    const listed = (this.listed.get(id.cluster) ?? 0) + 1;
    const clusterFits = stored.cluster + listed <= perCluster;
    const totalFits = stored.total + this.listedTotal + 1 <= total;
    if ((clusterFits && totalFits) || (await this.admission.hasPrimary(id))) {
      this.listed.set(id.cluster, listed);
      this.listedTotal++;
      return 'take';
    }
    return this.admission.takeRefusedSlot(id) ? 'verdict' : 'skip';
  }
}
