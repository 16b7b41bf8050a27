/**
 * How fast one tenant may make relsync rewrite its copies in the service cluster. Every update of
 * an object leaves its old revision in etcd until the API server compacts (every 5 minutes by
 * default), and that history counts against etcd's quota (2 GiB by default) as the objects do: a
 * tenant that changes a 1 MiB source in a loop would otherwise have relsync write it as often as
 * a worker gets to it, tens of MiB a second, and fill etcd within the compaction interval while
 * its copies stay within their budget (copy-budget.ts).
 *
 * So what a tenant's copies leave behind is charged to it: the size an update replaces (the copy's
 * size before it, as the store counted it) and the size of a copy deleted (its last revision
 * stays until compaction; a tenant that switches a reference between two big objects deletes one
 * copy and creates another at every switch). Each tenant pays at `bytesPerSecondPerCluster`, or
 * its share of `bytesPerSecond` among the tenants that rewrote in the last ACTIVE_MS (at least
 * MIN_BYTES_PER_SECOND), and may run BURST_SECONDS of its rate ahead. Past that, its creates and
 * updates in the service cluster are not sent: the writer throws RewritePaceError and the reconcile
 * is retried when the debt is paid (a worker is not held; a source that changes meanwhile is
 * written once, with its latest content). Deletes are never held back. A tenant without debt
 * creates at full speed: a first sync leaves no old revisions.
 *
 * GCRA: each tenant has the time at which what it left behind is paid for; writes wait until
 * that time is no more than BURST_SECONDS ahead.
 */
import type { Clock } from '../util/clock.js';

export interface RewritePaceLimits {
  readonly bytesPerSecondPerCluster: number;
  readonly bytesPerSecond: number;
}

/** How far ahead of its rate a tenant may go: a few rewrites of large objects at once. */
export const BURST_SECONDS = 8;
/** A tenant counts as rewriting (for the shares of the total) this long after its last rewrite. */
const ACTIVE_MS = 10_000;
/** Tenants kept; past it, those idle longest go (they start again with a full burst, as a new tenant does). */
const MAX_TENANTS_KEPT = 10_000;

interface Pace {
  /** When what the tenant left behind is paid for, in the clock's ms. */
  paidAt: number;
  lastAt: number;
}

/** A copy write deferred by its tenant's pace: the reconcile is retried after `retryAfterSeconds` (work-queue.ts honours it). */
export class RewritePaceError extends Error {
  override name = 'RewritePaceError';
  constructor(
    readonly retryAfterSeconds: number,
  ) {
    super(`this cluster's copies in the service cluster were rewritten faster than relsync allows (limits.rewriteBytesPerSecondPerCluster, or its share of limits.rewriteBytesPerSecond); written in ${retryAfterSeconds} s`);
  }
}

/** The least a tenant's share of the total may be: many tenants (kcp workspaces) rewriting at once do not starve each other. */
const MIN_BYTES_PER_SECOND = 64 * 1024;

export class RewritePace {
  private readonly tenants = new Map<string, Pace>();
  private counted = { at: -Infinity, n: 0, tenants: new Set<string>() };

  constructor(
    private readonly limits: RewritePaceLimits,
    private readonly clock: Pick<Clock, 'now'>,
  ) {}

  /** Ms until `tenant` may write into the service cluster again (0: now). */
  due(tenant: string): number {
    const pace = this.tenants.get(tenant);
    return pace ? Math.max(0, Math.ceil(pace.paidAt - this.clock.now() - BURST_SECONDS * 1000)) : 0;
  }

  /** `tenant` left `bytes` bytes of old revisions in etcd (an update's replaced size, a delete's). */
  charge(tenant: string, bytes: number): void {
    const now = this.clock.now();
    const pace = this.tenants.get(tenant) ?? { paidAt: now, lastAt: -Infinity };
    this.tenants.delete(tenant);
    this.tenants.set(tenant, pace);
    // Past the most kept, the tenant longest without a rewrite goes (its debt is paid by then, or nearly).
    if (this.tenants.size > MAX_TENANTS_KEPT) this.tenants.delete(this.tenants.keys().next().value!);
    const rate = Math.max(MIN_BYTES_PER_SECOND, Math.min(this.limits.bytesPerSecondPerCluster, this.limits.bytesPerSecond / this.active(now, tenant)));
    pace.paidAt = Math.max(pace.paidAt, now) + (bytes / rate) * 1000;
    pace.lastAt = now;
  }

  /** Tenants that rewrote in the last ACTIVE_MS, `tenant` among them; counted again at most once a second. */
  private active(now: number, tenant: string): number {
    if (now - this.counted.at >= 1000) {
      let n = 0;
      for (const pace of this.tenants.values()) if (now - pace.lastAt < ACTIVE_MS) n++;
      this.counted = { at: now, n, tenants: new Set() };
    }
    // One that joined since the count is one more.
    const joined = !this.counted.tenants.has(tenant) && now - (this.tenants.get(tenant)?.lastAt ?? -Infinity) >= ACTIVE_MS;
    if (joined) {
      this.counted.tenants.add(tenant);
      this.counted.n++;
    }
    return Math.max(1, this.counted.n);
  }
}
