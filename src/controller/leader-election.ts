/**
 * Leader election through a coordination.k8s.io/v1 Lease in the service
 * cluster, the way client-go does it: the holder renews the lease every
 * retry period; a candidate takes it over once the record has not changed
 * for a whole lease duration, as observed on its own clock (so clock skew
 * between replicas does not matter). A leader that cannot renew within the
 * renew deadline gives up leadership (`onLost`), so that two replicas never
 * both write for longer than that; the manager then stops its work and
 * campaigns again. On a clean stop the leader releases the
 * lease (release(), after its work stopped) so a standby takes over at once.
 */
import type { Logger } from 'pino';
import { isAlreadyExists, isConflict, isNotFound } from '../kube/api-error.js';
import type { KubeObject } from '../core/object.js';
import type { ResourceClient } from '../kube/resource-client.js';
import { monotonicClock, systemClock, type Clock, type Timer } from '../util/clock.js';

export const leaseType = { group: 'coordination.k8s.io', version: 'v1', resource: 'leases', kind: 'Lease', namespaced: true } as const;

/** What the elector asks of the Lease API (a ResourceClient in production, a fake in unit tests). */
export type LeaseClient = Pick<ResourceClient, 'get' | 'create' | 'replace'>;

export interface LeaderElectionOptions {
  readonly client: LeaseClient;
  readonly namespace: string;
  readonly name: string;
  readonly identity: string;
  readonly leaseDurationMs: number;
  readonly renewDeadlineMs: number;
  readonly retryPeriodMs: number;
  readonly logger: Logger;
  /** Called once, when this process becomes the leader. */
  readonly onStarted: () => void;
  /** Called once, when a leader could not renew within the renew deadline. */
  readonly onLost: () => void;
  /** Time for the lease's expiry, the renew deadline and the retry period; default monotonic (util/clock.ts). */
  readonly clock?: Clock;
  /** The time of day written into the Lease (renewTime, acquireTime); default the given clock's, else systemClock. */
  readonly wallClock?: Clock;
}

/** A coordination.k8s.io/v1 Lease's spec, as the elector and the shard Leases (shard-leases.ts) read and write it. */
export interface LeaseSpec {
  holderIdentity?: string;
  leaseDurationSeconds?: number;
  acquireTime?: string;
  renewTime?: string;
  leaseTransitions?: number;
}

export class LeaderElector {
  private leader = false;
  private holder: string | undefined;
  private observed: { resourceVersion: string; at: number } | undefined;
  private lastRenew = 0;
  private loop: Promise<void> = Promise.resolve();
  private readonly clock: Clock;
  private readonly wall: Clock;

  constructor(private readonly options: LeaderElectionOptions) {
    this.clock = options.clock ?? monotonicClock;
    this.wall = options.wallClock ?? options.clock ?? systemClock;
  }

  get isLeader(): boolean {
    return this.leader;
  }

  /**
   * Why this process may not write as leader now (undefined: it may): it is not the leader, or its
   * last renewal is older than the renew deadline by its own clock. A standby takes over only once
   * the record stood unchanged for a whole lease duration, longer than the deadline, by its clock.
   */
  writeBlocked(): string | undefined {
    if (!this.leader) return 'this replica does not hold the lease';
    const age = this.clock.now() - this.lastRenew;
    return age > this.options.renewDeadlineMs ? `the lease was last renewed ${Math.round(age)} ms ago, past the renew deadline` : undefined;
  }

  /** Who holds the lease as last seen (this process's identity when leader). */
  get currentHolder(): string | undefined {
    return this.holder;
  }

  /** Runs the acquire/renew loop until `signal` aborts or leadership is lost. */
  start(signal: AbortSignal): Promise<void> {
    this.loop = this.run(signal);
    return this.loop;
  }

  private async run(signal: AbortSignal): Promise<void> {
    const { logger, retryPeriodMs, renewDeadlineMs } = this.options;
    while (!signal.aborted) {
      try {
        // One attempt may not outlast the renew deadline: against an API
        // server that hangs (SIGSTOP, a black-holed network) a request would
        // otherwise wait its whole request timeout and the deadline pass unseen.
        // The renewal counts from when it was sent: the API server wrote it after that, and a
        // standby's lease duration runs from when it saw the write, later still.
        const sentAt = this.clock.now();
        const ok = await withTimeout(this.clock, this.tryAcquireOrRenew(), renewDeadlineMs, 'lease request');
        if (ok) {
          this.lastRenew = sentAt;
          if (!this.leader) {
            this.leader = true;
            logger.info({ lease: `${this.options.namespace}/${this.options.name}`, identity: this.options.identity }, 'became the leader');
            this.options.onStarted();
          }
        }
      } catch (err) {
        logger.warn({ err: (err as Error).message }, 'leader election: could not read or write the lease');
      }
      if (this.leader && this.clock.now() - this.lastRenew > renewDeadlineMs) {
        this.leader = false;
        logger.error({ renewDeadlineMs }, 'lost leadership: the lease could not be renewed in time');
        this.options.onLost();
        return;
      }
      await this.clock.sleep(retryPeriodMs, signal);
    }
  }

  private async tryAcquireOrRenew(): Promise<boolean> {
    const { client, namespace, name, identity, leaseDurationMs } = this.options;
    const now = new Date(this.wall.now());
    const spec = (): LeaseSpec => ({ holderIdentity: identity, leaseDurationSeconds: Math.ceil(leaseDurationMs / 1000), renewTime: micro(now) });
    const lease = await client.get(namespace, name);
    if (!lease) {
      try {
        await client.create(namespace, { metadata: { name, namespace }, spec: { ...spec(), acquireTime: micro(now), leaseTransitions: 0 } });
        this.holder = identity;
        return true;
      } catch (err) {
        if (isAlreadyExists(err)) return false;
        throw err;
      }
    }
    const current = (lease.spec ?? {}) as LeaseSpec;
    const rv = lease.metadata.resourceVersion ?? '';
    if (this.observed?.resourceVersion !== rv) this.observed = { resourceVersion: rv, at: this.clock.now() };
    this.holder = current.holderIdentity || undefined;
    const mine = current.holderIdentity === identity;
    const durationMs = (current.leaseDurationSeconds ?? Math.ceil(leaseDurationMs / 1000)) * 1000;
    const expired = !current.holderIdentity || this.clock.now() - this.observed.at > durationMs;
    if (!mine && !expired) return false;
    const next: KubeObject = {
      ...lease,
      spec: {
        ...current,
        ...spec(),
        acquireTime: mine ? current.acquireTime : micro(now),
        leaseTransitions: (current.leaseTransitions ?? 0) + (mine ? 0 : 1),
      },
    };
    try {
      const written = await client.replace(next);
      this.observed = { resourceVersion: written.metadata.resourceVersion ?? '', at: this.clock.now() };
      this.holder = identity;
      return true;
    } catch (err) {
      if (isConflict(err) || isNotFound(err)) return false;
      throw err;
    }
  }

  /**
   * Gives the lease up so that a standby does not wait a whole lease
   * duration. Call it after the leader's work has stopped, not before.
   */
  async release(): Promise<void> {
    // A renewal that was in flight when the stop signal came would otherwise
    // race this write: either it conflicts with ours, or it lands after ours
    // and names this process the holder again. Both make the standby wait a
    // whole lease duration.
    await this.loop;
    if (!this.leader) return;
    const { client, namespace, name, identity, logger } = this.options;
    try {
      for (let attempt = 1; ; attempt++) {
        const lease = await client.get(namespace, name);
        if (!lease || (lease.spec as LeaseSpec | undefined)?.holderIdentity !== identity) return;
        try {
          await client.replace({ ...lease, spec: { ...(lease.spec as LeaseSpec), holderIdentity: '', leaseDurationSeconds: 1, renewTime: micro(new Date(this.wall.now())) } });
          logger.info('released the leader lease');
          return;
        } catch (err) {
          if (!isConflict(err) || attempt >= 3) throw err;
        }
      }
    } catch (err) {
      logger.warn({ err: (err as Error).message }, 'could not release the leader lease; a standby takes over when it expires');
    } finally {
      this.leader = false;
    }
  }
}

/** The request it waits for keeps the process alive, so the clock's timer need not. */
function withTimeout<T>(clock: Clock, work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: Timer | undefined;
  const timeout = new Promise<never>((_, reject) => (timer = clock.after(ms, () => reject(new Error(`${what}: no answer within ${ms} ms`)))));
  return Promise.race([work, timeout]).finally(() => timer?.cancel());
}

/** Lease times are MicroTime: RFC 3339 with microseconds. */
export function micro(d: Date): string {
  return d.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

