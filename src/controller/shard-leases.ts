/**
 * The Leases of a sharded installation, in the service cluster next to its
 * leader Lease (named `<leaderElection.name>-shard-<k>` and
 * `<leaderElection.name>-member-<k>`, k below the number of shards, so that
 * RBAC can name every one), and the reads and writes on them;
 * shard-coordinator.ts decides when.
 *
 * A shard Lease is held the way leader-election.ts holds the leader Lease
 * (client-go's rules): renewed every retry period; taken over only once its
 * record stood unchanged for a whole lease duration, as seen on this
 * process's own clock; every write is a PUT with the resourceVersion read,
 * so of two replicas that try at once, one gets a 409. A member Lease (a slot
 * each replica holds the same way) says a replica is alive: the live members
 * decide each one's share (shard-balance.ts). There are as many slots as
 * shards: a replica beyond that waits for a slot, as it would for a shard.
 * Every Lease of the set carries the shard map's
 * fingerprint (config/shard-map.ts): a replica never takes a shard while a
 * live replica works from another map.
 */
import { createHash } from 'node:crypto';
import type { KubeObject } from '../core/object.js';
import { isAlreadyExists, isConflict, isNotFound } from '../kube/api-error.js';
import type { ResourceClient } from '../kube/resource-client.js';
import type { Clock } from '../util/clock.js';
import { micro, type LeaseSpec } from './leader-election.js';
import { LEASE_KIND_LABEL, LEASE_SET_LABEL, SHARDING_ANNOTATION, SHARD_ANNOTATION } from '../core/relsync-keys.js';

export type ShardLeaseClient = Pick<ResourceClient, 'get' | 'create' | 'replace' | 'listAll'>;

export interface ShardLeasesOptions {
  readonly client: ShardLeaseClient;
  readonly namespace: string;
  /** The leader Lease's name: the set's Leases are named after it. */
  readonly base: string;
  readonly identity: string;
  /** The shard map's (config/shard-map.ts). */
  readonly fingerprint: string;
  readonly leaseDurationMs: number;
  /** For the age of records: monotonic in production (util/clock.ts). */
  readonly clock: Clock;
  /** The time of day written into the Leases; default the clock's. */
  readonly wallClock?: Clock;
}

/** What one LIST of the set showed. */
export interface LeaseSetView {
  /** Live members that work from this map, by identity (this replica included once it holds a slot). */
  readonly members: string[];
  /**
   * Live holders of shards of another map, or of the leader Lease (a replica without shards): while
   * there are any, no shard is taken. Members of another map do not count: they take nothing
   * either while this map's shards are held.
   */
  readonly foreign: string[];
  /** The live holder of the installation's leader Lease (a replica without shards), when another. */
  readonly leader: string | undefined;
  /** Each shard's live holder (undefined: free), and its Lease as read (undefined: none yet). */
  readonly shards: Array<{ readonly holder: string | undefined; readonly lease: KubeObject | undefined }>;
  /** Each member slot's live holder (undefined: free), and its Lease as read. */
  readonly slots: Array<{ readonly holder: string | undefined; readonly lease: KubeObject | undefined }>;
}

export class ShardLeases {
  /** When each Lease's current record was first seen here: its age is measured from then, on this clock. */
  private readonly observed = new Map<string, { readonly resourceVersion: string; readonly at: number }>();
  private member: KubeObject | undefined;

  private readonly wall: Clock;

  constructor(private readonly options: ShardLeasesOptions) {
    this.wall = options.wallClock ?? options.clock;
  }

  shardName(shard: number): string {
    return `${this.options.base}-shard-${shard}`;
  }

  memberName(slot: number): string {
    return `${this.options.base}-member-${slot}`;
  }

  /** Whether this replica holds a member slot (counts among the members). */
  get isMember(): boolean {
    return this.member !== undefined;
  }

  /** The label value that finds the set: the base name when it is a valid label value, else its hash. */
  get setLabel(): string {
    return leaseSetLabel(this.options.base);
  }

  /** One LIST of the set: who is alive, and who holds each of `shards` and each member slot. */
  async view(shards: number): Promise<LeaseSetView> {
    const { client, namespace, identity, fingerprint } = this.options;
    const { items } = await client.listAll({ namespace, labelSelector: `${LEASE_SET_LABEL}=${this.setLabel}` });
    const now = this.options.clock.now();
    const members = new Set<string>(this.member ? [identity] : []);
    const foreign = new Set<string>();
    const byName = new Map(items.map((l) => [l.metadata.name ?? '', l]));
    for (const lease of items) {
      const holder = this.liveHolder(lease, now);
      if (holder === undefined) continue;
      const theirs = lease.metadata.annotations?.[SHARDING_ANNOTATION];
      const kind = lease.metadata.labels?.[LEASE_KIND_LABEL];
      if (kind === 'shard' && theirs !== fingerprint && holder !== identity) foreign.add(holder);
      if (kind === 'member' && theirs === fingerprint) members.add(holder);
    }
    // The leader Lease of this installation: held by a replica that works for every cluster.
    const leader = await client.get(namespace, this.options.base);
    const leaderHolder = leader ? this.liveHolder(leader, now) : undefined;
    if (leaderHolder !== undefined && leaderHolder !== identity) foreign.add(leaderHolder);
    const held = (name: string) => {
      const lease = byName.get(name);
      return { holder: lease ? this.liveHolder(lease, now) : undefined, lease };
    };
    return {
      members: [...members].sort(),
      foreign: [...foreign].sort(),
      leader: leaderHolder !== identity ? leaderHolder : undefined,
      shards: Array.from({ length: shards }, (_, k) => held(this.shardName(k))),
      slots: Array.from({ length: shards }, (_, k) => held(this.memberName(k))),
    };
  }

  /**
   * Takes shard `k`, free as `seen` showed it (undefined: no Lease yet). The new record if taken;
   * undefined when another replica wrote first (a 409, or it exists already).
   */
  async take(shard: number, seen: KubeObject | undefined): Promise<KubeObject | undefined> {
    return this.takeLease(this.shardName(shard), 'shard', shard, seen);
  }

  private async takeLease(name: string, kind: 'shard' | 'member', index: number, seen: KubeObject | undefined): Promise<KubeObject | undefined> {
    const { client, namespace } = this.options;
    const now = new Date(this.wall.now());
    try {
      if (!seen) {
        const created = await client.create(namespace, {
          metadata: { name, namespace, labels: this.labels(kind), annotations: this.annotations(kind, index) },
          spec: { ...this.spec(now), acquireTime: micro(now), leaseTransitions: 0 },
        });
        return this.wrote(created);
      }
      const spec = (seen.spec ?? {}) as LeaseSpec;
      const next: KubeObject = {
        ...seen,
        metadata: { ...seen.metadata, labels: { ...seen.metadata.labels, ...this.labels(kind) }, annotations: { ...seen.metadata.annotations, ...this.annotations(kind, index) } },
        spec: { ...spec, ...this.spec(now), acquireTime: micro(now), leaseTransitions: (spec.leaseTransitions ?? 0) + 1 },
      };
      return this.wrote(await client.replace(next));
    } catch (err) {
      if (isConflict(err) || isAlreadyExists(err) || isNotFound(err)) return undefined;
      throw err;
    }
  }

  /** Renews a shard this replica holds; the new record, or undefined when it is no longer this replica's (another took it). */
  async renew(held: KubeObject): Promise<KubeObject | undefined> {
    const { client, namespace, identity } = this.options;
    const now = new Date(this.wall.now());
    try {
      return this.wrote(await this.options.client.replace({ ...held, spec: { ...(held.spec as LeaseSpec), ...this.spec(now) } }));
    } catch (err) {
      if (!isConflict(err) && !isNotFound(err)) throw err;
      // Changed since this replica's last write: still its own (a retried write that landed), or another's now.
      const current = await client.get(namespace, held.metadata.name ?? '');
      if (!current || (current.spec as LeaseSpec | undefined)?.holderIdentity !== identity) return undefined;
      return this.wrote(await client.replace({ ...current, spec: { ...(current.spec as LeaseSpec), ...this.spec(now) } }));
    }
  }

  /** Gives a shard up so that another replica takes it at once. Only after its work stopped. */
  async release(held: KubeObject): Promise<void> {
    const { client, namespace, identity } = this.options;
    for (let attempt = 1; ; attempt++) {
      const current = attempt === 1 ? held : await client.get(namespace, held.metadata.name ?? '');
      if (!current || (current.spec as LeaseSpec | undefined)?.holderIdentity !== identity) return;
      try {
        await client.replace({ ...current, spec: { ...(current.spec as LeaseSpec), holderIdentity: '', leaseDurationSeconds: 1, renewTime: micro(new Date(this.wall.now())) } });
        return;
      } catch (err) {
        if ((!isConflict(err) && !isNotFound(err)) || attempt >= 3) throw err;
      }
    }
  }

  /**
   * Renews this replica's member slot, or takes a free one (a restarted replica finds its own
   * still held: it is the holder the slot names). False when it holds none: every slot is a live
   * replica's (more replicas than shards).
   */
  async heartbeat(shards: number): Promise<boolean> {
    const { identity } = this.options;
    if (this.member) {
      const renewed = await this.renew(this.member);
      this.member = renewed;
      if (renewed) return true;
    }
    const view = await this.view(shards);
    const own = view.slots.findIndex((s) => s.holder === identity);
    if (own >= 0) {
      this.member = await this.renew(view.slots[own]!.lease!);
      if (this.member) return true;
    }
    for (let k = 0; k < shards && !this.member; k++) {
      if (view.slots[k]!.holder === undefined) this.member = await this.takeLease(this.memberName(k), 'member', k, view.slots[k]!.lease);
    }
    return this.member !== undefined;
  }

  /** This replica leaves: its member slot is released, so the others count it out at once. */
  async leave(): Promise<void> {
    if (!this.member) return;
    const member = this.member;
    this.member = undefined;
    await this.release(member);
  }

  private labels(kind: 'shard' | 'member'): Record<string, string> {
    return { [LEASE_SET_LABEL]: this.setLabel, [LEASE_KIND_LABEL]: kind };
  }

  private annotations(kind: 'shard' | 'member', index: number): Record<string, string> {
    return { [SHARDING_ANNOTATION]: this.options.fingerprint, ...(kind === 'shard' ? { [SHARD_ANNOTATION]: String(index) } : {}) };
  }

  /** The holder of a Lease when it is alive: renewed within its duration as seen here, or this replica's own. */
  private liveHolder(lease: KubeObject, now: number): string | undefined {
    const spec = (lease.spec ?? {}) as LeaseSpec;
    const holder = spec.holderIdentity || undefined;
    const age = this.age(lease.metadata.name ?? '', lease, now);
    if (holder === undefined) return undefined;
    return holder === this.options.identity || age <= (spec.leaseDurationSeconds ?? this.options.leaseDurationMs / 1000) * 1000 ? holder : undefined;
  }

  private spec(now: Date): LeaseSpec {
    return { holderIdentity: this.options.identity, leaseDurationSeconds: Math.ceil(this.options.leaseDurationMs / 1000), renewTime: micro(now) };
  }

  /** How long this record of a Lease has stood unchanged, as seen here. */
  private age(name: string, lease: KubeObject, now: number): number {
    const rv = lease.metadata.resourceVersion ?? '';
    const seen = this.observed.get(name);
    if (seen?.resourceVersion !== rv) {
      this.observed.set(name, { resourceVersion: rv, at: now });
      return 0;
    }
    return now - seen.at;
  }

  private wrote(lease: KubeObject): KubeObject {
    this.observed.set(lease.metadata.name ?? '', { resourceVersion: lease.metadata.resourceVersion ?? '', at: this.options.clock.now() });
    return lease;
  }
}

/** The label value that finds a set's Leases: the leader Lease's name when it is a valid label value, else its hash. */
export function leaseSetLabel(base: string): string {
  return base.length <= 63 && /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/.test(base) ? base : createHash('sha256').update(base).digest('hex').slice(0, 32);
}
