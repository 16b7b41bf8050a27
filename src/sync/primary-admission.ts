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
 * concurrent workers may pass a limit by a few, as before. What a key holds while queued (room, or
 * a verdict slot) is given back when the queue is done with it (`settled`, from the queue's
 * onProcessed), not when one run ends: a failing reconcile keeps its slot while it is retried.
 */
import { identityKey, type ObjectIdentity } from '../core/identity.js';
import { systemClock, type Clock } from '../util/clock.js';

export interface AdmissionLimits {
  /** Primaries synced per platform cluster (per workspace on kcp). */
  readonly perCluster: number;
  /** Primaries synced in all, over every cluster. */
  readonly total: number;
}

/** What admission reads of the store: counts and whether it holds a primary. */
export interface AdmissionStore {
  countPrimaries(cluster: string): Promise<number>;
  /** Primaries held in all, and how many clusters hold them. */
  countAllPrimaries(): Promise<{ primaries: number; clusters: number }>;
  hasPrimary(id: ObjectIdentity): Promise<boolean>;
}

/** Why a new primary is not taken on: the limit it would pass. */
export interface Refusal {
  readonly limit: 'primariesPerCluster' | 'primaries';
  readonly value: number;
}

/** Refused primaries queued at once for their verdict (each takes a slot until reconciled)... */
export const REFUSED_IN_FLIGHT = 100;
/** ...and of one cluster: one tenant's refused primaries never take every slot. */
export const REFUSED_IN_FLIGHT_PER_CLUSTER = 10;
/** How long a count read from the store is used (counted up meanwhile). */
const COUNT_TTL_MS = 2_000;
/** Clusters whose count is kept at once. */
const MAX_COUNTED_CLUSTERS = 10_000;

interface Count {
  n: number;
  until: number;
}

interface Total {
  n: number;
  clusters: number;
  until: number;
}

export class PrimaryAdmission {
  private readonly clusterCounts = new Map<string, Count>();
  private totalCount: Total | undefined;
  /** Refused primaries queued and not reconciled yet: by identityKey, and their count per cluster. */
  private readonly refusedInFlight = new Map<string, string>();
  private readonly refusedIn = new Map<string, number>();
  /** New primaries queued (within the room) and not reconciled yet: by identityKey, and their count per cluster. */
  private readonly pending = new Map<string, string>();
  private readonly pendingIn = new Map<string, number>();

  constructor(
    readonly limits: AdmissionLimits,
    private readonly store: AdmissionStore,
    /** What counts are kept for on; default systemClock. */
    private readonly clock: Clock = systemClock,
  ) {}

  /**
   * Whether a primary the store does not hold may be taken on now; the limit it would pass if not.
   * `queued`: new primaries queued and not reconciled yet count too (deciding what to queue).
   * `limits.primaries` is shared fairly: a cluster below its share of it (the limit over the
   * clusters that hold primaries, this one counted) is taken on even when others filled it, so one
   * tenant's flood never locks the others out; relsync then holds at most twice the limit.
   */
  async room(cluster: string, queued = false): Promise<Refusal | undefined> {
    const stored = await this.countOf(cluster);
    const total = await this.total();
    // Read after the awaits: other workers and events run between.
    const own = stored + (queued ? (this.pendingIn.get(cluster) ?? 0) : 0);
    if (own >= this.limits.perCluster) return { limit: 'primariesPerCluster', value: this.limits.perCluster };
    const all = total.n + (queued ? this.pending.size : 0);
    if (all < this.limits.total) return undefined;
    const share = Math.floor(this.limits.total / Math.max(1, total.clusters + (stored === 0 ? 1 : 0)));
    if (own < share && all < 2 * this.limits.total) return undefined;
    return { limit: 'primaries', value: this.limits.total };
  }

  /** A new primary of `cluster` was taken on (its record is being written). */
  admitted(cluster: string): void {
    const c = this.clusterCounts.get(cluster);
    if (c) c.n++;
    else this.totalCount = undefined; // perhaps a cluster new to the store: counted afresh
    if (this.totalCount) this.totalCount.n++;
  }

  /** A primary of `cluster` was let go: counted afresh, so that one waiting for room is seen soon. */
  released(cluster: string): void {
    this.clusterCounts.delete(cluster);
    this.totalCount = undefined;
  }

  /**
   * What to do with a primary an event or a sweep's LIST shows: 'take' it when the store holds it,
   * or within the room the limits leave (it then counts against that room until the queue is done
   * with it); 'verdict': reconcile it only to say it is refused, in one of a bounded number of
   * slots; 'skip' it otherwise. One being deleted is decided the same way: the store holds every
   * primary relsync took on, and one it does not hold (a store lost, or a tenant's deletion of a
   * million it never took) has its finalizer removed by the reconcile of a slot (deletion comes
   * before the limits there), a slot at a time, the rest at a later event or sweep — not a queue
   * of a million.
   */
  async decide(id: ObjectIdentity): Promise<'take' | 'verdict' | 'skip'> {
    const key = identityKey(id);
    if (this.pending.has(key)) return 'take';
    if (this.refusedInFlight.has(key)) return 'verdict';
    if (await this.store.hasPrimary(id)) return 'take';
    // A first LIST of a million queues no more than the limits leave.
    if ((await this.room(id.cluster, true)) === undefined) {
      this.addPending(key, id.cluster);
      return 'take';
    }
    return this.takeRefusedSlot(key, id.cluster) ? 'verdict' : 'skip';
  }

  /** Whether an event of this primary goes into the work queue (decide). */
  async mayQueue(id: ObjectIdentity): Promise<boolean> {
    return (await this.decide(id)) !== 'skip';
  }

  /** The queue is done with `id` (no run of it is due): the room or the slot it held while queued is free. */
  settled(id: ObjectIdentity): void {
    if (this.refusedInFlight.size === 0 && this.pending.size === 0) return;
    const key = identityKey(id);
    const refusedOf = this.refusedInFlight.get(key);
    if (refusedOf !== undefined) {
      this.refusedInFlight.delete(key);
      decrement(this.refusedIn, refusedOf);
    }
    const cluster = this.pending.get(key);
    if (cluster === undefined) return;
    this.pending.delete(key);
    decrement(this.pendingIn, cluster);
  }

  private takeRefusedSlot(key: string, cluster: string): boolean {
    if (this.refusedInFlight.size >= REFUSED_IN_FLIGHT || (this.refusedIn.get(cluster) ?? 0) >= REFUSED_IN_FLIGHT_PER_CLUSTER) return false;
    this.refusedInFlight.set(key, cluster);
    this.refusedIn.set(cluster, (this.refusedIn.get(cluster) ?? 0) + 1);
    return true;
  }

  private addPending(key: string, cluster: string): void {
    this.pending.set(key, cluster);
    this.pendingIn.set(cluster, (this.pendingIn.get(cluster) ?? 0) + 1);
  }

  private async countOf(cluster: string): Promise<number> {
    const now = this.clock.now();
    const kept = this.clusterCounts.get(cluster);
    if (kept && kept.until > now) return kept.n;
    const n = await this.store.countPrimaries(cluster);
    this.clusterCounts.delete(cluster);
    this.clusterCounts.set(cluster, { n, until: now + COUNT_TTL_MS });
    if (this.clusterCounts.size > MAX_COUNTED_CLUSTERS) this.clusterCounts.delete(this.clusterCounts.keys().next().value!);
    return n;
  }

  private async total(): Promise<Total> {
    const now = this.clock.now();
    if (this.totalCount && this.totalCount.until > now) return this.totalCount;
    const { primaries, clusters } = await this.store.countAllPrimaries();
    this.totalCount = { n: primaries, clusters, until: now + COUNT_TTL_MS };
    return this.totalCount;
  }
}

function decrement(counts: Map<string, number>, key: string): void {
  const n = (counts.get(key) ?? 1) - 1;
  if (n > 0) counts.set(key, n);
  else counts.delete(key);
}
