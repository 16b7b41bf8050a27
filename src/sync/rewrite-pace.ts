/**
 * How fast one tenant may make relsync rewrite its copies in the service cluster. Every update of
 * an object leaves its old revision in etcd until the API server compacts (every 5 minutes by
 * default), and that history counts against etcd's quota (2 GiB by default) as the objects do: a
 * tenant that changes a 1 MiB source in a loop would otherwise have relsync write it as often as
 * a worker gets to it, tens of MiB a second, and fill etcd within the compaction interval while
 * its copies stay within their budget (copy-budget.ts).
 *
 * So the bytes an update replaces (the copy's size before it, as the store counted it) are paced
 * per tenant: at most `bytesPerSecondPerCluster`, and all tenants together at most
 * `bytesPerSecond`, shared among the tenants that rewrote in the last ACTIVE_MS (so one tenant's
 * rewrites never delay another's). Each may go BURST_SECONDS of its rate ahead. A write that
 * would pass it waits (its reconcile holds a worker meanwhile: a tenant holds at most its lane's
 * share of the workers, work-queue.ts); a source that changes again meanwhile is written once,
 * with its latest content, as any change that waits in the queue. A new copy is not paced: it
 * leaves no old revision, and its bytes are the budget's.
 *
 * GCRA: each tenant has the time at which what it rewrote is paid for at its rate; a write waits
 * until that time is no more than BURST_SECONDS ahead.
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
  /** When what the tenant rewrote is paid for, in the clock's ms. */
  paidAt: number;
  lastAt: number;
}

export class RewritePace {
  private readonly tenants = new Map<string, Pace>();
  private readonly never = new AbortController().signal;
  private counted = { at: -Infinity, n: 0, tenants: new Set<string>() };

  constructor(
    private readonly limits: RewritePaceLimits,
    private readonly clock: Pick<Clock, 'now' | 'sleep'>,
  ) {}

  /**
   * Waits until `tenant` may replace `bytes` bytes in the service cluster; resolves with the ms
   * waited (0 within its burst).
   */
  async take(tenant: string, bytes: number): Promise<number> {
    const now = this.clock.now();
    const pace = this.tenants.get(tenant) ?? { paidAt: now, lastAt: -Infinity };
    this.tenants.delete(tenant);
    this.tenants.set(tenant, pace);
    if (this.tenants.size > MAX_TENANTS_KEPT) this.tenants.delete(this.tenants.keys().next().value!);
    const rate = Math.min(this.limits.bytesPerSecondPerCluster, this.limits.bytesPerSecond / this.active(now, tenant));
    pace.paidAt = Math.max(pace.paidAt, now) + (bytes / rate) * 1000;
    pace.lastAt = now;
    const wait = Math.max(0, pace.paidAt - now - BURST_SECONDS * 1000);
    if (wait > 0) await this.clock.sleep(wait, this.never);
    return wait;
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
