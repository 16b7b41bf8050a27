/**
 * What one tenant's copies may take in the service cluster, whose etcd stops every write at its
 * quota (2 GiB by default) whoever filled it: at most `limits.copiedBytesPerCluster` bytes of
 * content and `limits.copiesPerCluster` copies per platform cluster (per workspace on kcp), and
 * `limits.copiedBytes` in all. A copy that would pass a budget is not written (a copy written
 * before stays as it was, as for one over limits.copyBytes); the primary says why
 * (`CopyBudgetReached`). A copy that does not grow is always written, so a tenant over a lowered
 * budget can still update and shrink. Each copy is charged its content and PER_COPY_OVERHEAD for
 * what the API server keeps beside it; old revisions etcd keeps until compaction are not counted.
 * Each shard of an active-active installation counts in its own store: the limits hold per shard.
 *
 * Counted in the store (store/copy-bytes-store.ts) as copies are written and deleted; sums are
 * read per tenant and kept for a few seconds, counted on by each write meanwhile, so concurrent
 * workers may pass a budget by a copy or a few. Copies deleted by others than relsync (the
 * operator, a namespace's deletion) count until relsync writes or deletes them again. A store
 * lost (with its watch checkpoints) is counted again from the copies the watches' first LISTs
 * find there (listed()) before any primary's reconcile (controller/first-lists.ts); one older
 * than the service cluster resumes its watches without a LIST, and the first sweep counts it.
 */
import { describeIdentity, identityKey, type ObjectIdentity } from '../core/identity.js';
import type { CopyBytesStore, CopyUsage } from '../store/copy-bytes-store.js';
import type { CopySize } from './copy-of.js';
import type { RewritePace } from './rewrite-pace.js';
import { systemClock, type Clock } from '../util/clock.js';

export interface CopyBudgetLimits {
  readonly bytesPerCluster: number;
  readonly copiesPerCluster: number;
  readonly bytes: number;
  /**
   * Bytes charged per copy beside its content: what the API server keeps with every object
   * (metadata, relsync's marks, managedFields); default PER_COPY_OVERHEAD.
   */
  readonly perCopy?: number;
}

/** What etcd holds of an object beside its content, roughly (measured: a ConfigMap copy with relsync's marks and managedFields, about 900 bytes). */
export const PER_COPY_OVERHEAD = 1024;

/** Told of each tenant's use when it changes (a metric). */
export type UsageGauge = (tenant: string, usage: CopyUsage) => void;

const USAGE_TTL_MS = 10_000;
/**
 * The total is counted on by every write and read again when a tenant gets its first copy or loses
 * its last (the shares change), else at most this often: a full scan of copy_bytes (500,000 rows at
 * 100,000 primaries × 5) is not for every ten seconds.
 */
const TOTAL_TTL_MS = 5 * 60_000;
const MAX_TENANTS_KEPT = 10_000;

interface Kept {
  bytes: number;
  copies: number;
  until: number;
}

interface KeptTotal extends Kept {
  tenants: number;
}

export interface CopyBudgetOptions {
  /** Told each tenant's usage as it changes (the metrics). */
  readonly gauge?: UsageGauge;
  /** What usage is kept for on; default systemClock. */
  readonly clock?: Clock;
  /** The pace of updates and deletes, per tenant; none when unset. */
  readonly pace?: Pick<RewritePace, 'due' | 'charge'>;
}

export class CopyBudget {
  private readonly tenants = new Map<string, Kept>();
  private all: KeptTotal | undefined;
  /**
   * Until a sweep has listed the whole service cluster since the start, the store may not know
   * the copies there (lost, older, another shard's): LISTs add what it lacks (listed()). After
   * that, a LIST page older than relsync's own deletes would only add rows of copies gone.
   */
  private recounting = true;
  /** Copies deleted since the start, while recounting: a LIST page taken before a delete does not bring its row back. */
  private readonly deletedWhileRecounting = new Set<string>();

  private readonly perCopy: number;

  private readonly gauge: UsageGauge | undefined;
  private readonly clock: Clock;
  private readonly pace: Pick<RewritePace, 'due' | 'charge'> | undefined;

  constructor(
    private readonly limits: CopyBudgetLimits,
    private readonly store: Pick<CopyBytesStore, 'usage' | 'total' | 'of' | 'save' | 'saveMissing' | 'delete'>,
    options: CopyBudgetOptions = {},
  ) {
    this.perCopy = limits.perCopy ?? PER_COPY_OVERHEAD;
    this.gauge = options.gauge;
    this.clock = options.clock ?? systemClock;
    this.pace = options.pace;
  }

  /**
   * Why a copy of `bytes` bytes of `tenant`'s may not be written at `copy` (in the service
   * cluster), in words the tenant reads; undefined when it fits.
   */
  async refusal(tenant: string, copy: ObjectIdentity, content: number): Promise<string | undefined> {
    const bytes = content + this.perCopy;
    const stored = await this.store.of(copy);
    const before = stored?.tenant === tenant ? stored.bytes : 0;
    const isNew = stored?.tenant !== tenant;
    if (bytes <= before && !isNew) return undefined;
    const own = await this.usageOf(tenant);
    const what = `the copy ${describeIdentity(copy)} (${content} bytes of content) is not written`;
    if (own.bytes - before + bytes > this.limits.bytesPerCluster) {
      return `${what}: this cluster's copies in the service cluster take ${own.bytes} bytes, and relsync copies at most ${this.limits.bytesPerCluster} (limits.copiedBytesPerCluster); it is written once others are smaller or gone`;
    }
    if (isNew && own.copies + 1 > this.limits.copiesPerCluster) {
      return `${what}: this cluster has ${own.copies} copies in the service cluster, and relsync writes at most ${this.limits.copiesPerCluster} (limits.copiesPerCluster); it is written once others are gone`;
    }
    // Shared fairly: a tenant below its share of the total is written to even when others filled
    // it (so one tenant's copies never lock the others out), up to twice the total in all.
    const all = await this.total();
    const after = all.bytes - before + bytes;
    if (after <= this.limits.bytes) return undefined;
    const share = Math.floor(this.limits.bytes / Math.max(1, all.tenants + (own.copies === 0 ? 1 : 0)));
    if (own.bytes - before + bytes <= share && after <= 2 * this.limits.bytes) return undefined;
    // The tenant reads this: nothing of what other tenants' copies take.
    return `${what}: relsync's copies in the service cluster are at their limit in all (limits.copiedBytes), and this cluster's take their share or more; it is written once others are smaller or gone`;
  }

  /** A copy of `source`, `tenant`'s, was written with `bytes` bytes of content. */
  async wrote(tenant: string, copy: ObjectIdentity, source: ObjectIdentity, content: number): Promise<void> {
    const bytes = content + this.perCopy;
    const stored = await this.store.of(copy);
    const sourceKey = identityKey(source);
    if (stored?.tenant === tenant && stored.source === sourceKey && stored.bytes === bytes) return;
    // Read before the row changes, so that the change is counted once.
    await this.usageOf(tenant);
    if (stored && stored.tenant !== tenant) await this.usageOf(stored.tenant);
    await this.store.save(copy, tenant, sourceKey, bytes);
    if (stored) this.count(stored.tenant, -stored.bytes, -1);
    this.count(tenant, bytes, 1);
  }

  /** Ms until `tenant` may write into the service cluster again (rewrite-pace.ts); 0: now. */
  rewriteDue(tenant: string): number {
    return this.pace?.due(tenant) ?? 0;
  }

  /**
   * `tenant`'s copy at `copy` is about to be replaced by an update: what it takes now (as counted,
   * or `content` where the store has none) is charged to the tenant's rewrite pace.
   */
  async rewriting(tenant: string, copy: ObjectIdentity, content: number): Promise<void> {
    if (!this.pace) return;
    const stored = await this.store.of(copy);
    this.pace.charge(tenant, stored?.tenant === tenant ? stored.bytes : content + this.perCopy);
  }

  /**
   * Copies of relsync's a LIST found in the service cluster, each with the size of its content:
   * charged to their tenants where the store has no row for them (a store lost, or older than
   * the service cluster); a row there already is right or is put right by the copy's next write.
   */
  async listed(copies: readonly CopySize[]): Promise<void> {
    if (!this.recounting) return;
    const found = copies.filter((c) => !this.deletedWhileRecounting.has(identityKey(c.copy)));
    const added = await this.store.saveMissing(found.map(({ tenant, copy, source, content }) => ({ copy, tenant, source: identityKey(source), bytes: content + this.perCopy })));
    if (added === 0) return;
    // Sums of these tenants are read again, with their gauges, and the total (only while recounting).
    for (const { tenant } of found) this.tenants.delete(tenant);
    this.all = undefined;
  }

  /** A sweep listed the whole service cluster: the store knows every copy there from now on. */
  recounted(): void {
    this.recounting = false;
    this.deletedWhileRecounting.clear();
  }

  /**
   * The copy of `source` at `copy` was deleted (`deleted`), or is not there (any more). Only the row of that
   * very source goes: a primary that names another one's copy as its destination frees nothing.
   */
  async removed(copy: ObjectIdentity, source: ObjectIdentity, deleted = false): Promise<void> {
    if (deleted && this.recounting) this.deletedWhileRecounting.add(identityKey(copy));
    const stored = await this.store.of(copy);
    if (!stored || stored.source !== identityKey(source)) return;
    await this.usageOf(stored.tenant);
    // Its last revision stays in etcd until compaction: charged to the tenant's rewrite pace.
    if (deleted) this.pace?.charge(stored.tenant, stored.bytes);
    await this.store.delete(copy, stored.source);
    this.count(stored.tenant, -stored.bytes, -1);
  }

  /**
   * Counts a change of `tenant`'s copies, its usage having been read before the store changed
   * (usageOf): the total's tenants follow a first copy and a last one without reading the table
   * again (a tenant that makes and deletes one copy in a loop would otherwise have every write
   * scan it, on the main thread).
   */
  private count(tenant: string, bytes: number, copies: number): void {
    const kept = this.tenants.get(tenant);
    if (!kept) {
      // Not read before the change (evicted meanwhile): the total is read again.
      this.all = undefined;
      return;
    }
    const before = kept.copies;
    kept.bytes += bytes;
    kept.copies += copies;
    this.gauge?.(tenant, { bytes: kept.bytes, copies: kept.copies });
    if (this.all) {
      this.all.bytes += bytes;
      this.all.copies += copies;
      if (before <= 0 && kept.copies > 0) this.all.tenants++;
      if (before > 0 && kept.copies <= 0) this.all.tenants--;
    }
  }

  private async usageOf(tenant: string): Promise<Kept> {
    const now = this.clock.now();
    const kept = this.tenants.get(tenant);
    if (kept && kept.until > now) return kept;
    const fresh = { ...(await this.store.usage(tenant)), until: now + USAGE_TTL_MS };
    this.tenants.delete(tenant);
    this.tenants.set(tenant, fresh);
    if (this.tenants.size > MAX_TENANTS_KEPT) this.tenants.delete(this.tenants.keys().next().value!);
    this.gauge?.(tenant, { bytes: fresh.bytes, copies: fresh.copies });
    return fresh;
  }

  private async total(): Promise<KeptTotal> {
    const now = this.clock.now();
    if (this.all && this.all.until > now) return this.all;
    this.all = { ...(await this.store.total()), until: now + TOTAL_TTL_MS };
    return this.all;
  }
}
