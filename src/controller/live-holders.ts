/**
 * Whether a replica of this installation is alive, for one-shot commands that
 * must not write beside one (`relsync sweep`): the holder of its leader Lease
 * or of one of its shard Leases, judged as the replicas judge each other. A
 * record is no one's once it stood unchanged for its lease duration, watched
 * on this process's monotonic clock; renewTime is another machine's clock and
 * decides nothing (a skewed clock would let a sweep run beside a live leader).
 * So a record that names a holder is watched for up to its lease duration:
 * renewed (its resourceVersion moves) means alive, unchanged means gone.
 */
import type { KubeObject } from '../core/object.js';
import { isForbidden } from '../kube/api-error.js';
import type { ResourceClient } from '../kube/resource-client.js';
import { monotonicClock, type Clock } from '../util/clock.js';
import type { LeaseSpec } from './leader-election.js';
import { leaseSetLabel } from './shard-leases.js';
import { LEASE_KIND_LABEL, LEASE_SET_LABEL } from '../core/relsync-keys.js';

export interface LiveHolder {
  readonly holder: string;
  /** namespace/name of the Lease it holds. */
  readonly lease: string;
}

interface HolderRecord {
  readonly holder: string;
  readonly resourceVersion: string;
  readonly durationMs: number;
}

/** How often a watched record is read again (a replica renews every retryPeriod, 2 s by default). */
const READ_EVERY_MS = 1000;

export class LeaseListForbiddenError extends Error {
  override name = 'LeaseListForbiddenError';
}

/**
 * The first live holder found, or undefined once every record that named one stood unchanged for
 * its lease duration (at most the longest duration of them: 15 s by default).
 */
export async function liveHolder(client: Pick<ResourceClient, 'get' | 'listAll'>, namespace: string, base: string, clock: Clock = monotonicClock, signal: AbortSignal = new AbortController().signal): Promise<LiveHolder | undefined> {
  const read = async (): Promise<Map<string, HolderRecord>> => {
    const held = new Map<string, HolderRecord>();
    const note = (lease: KubeObject | undefined) => {
      const spec = (lease?.spec ?? {}) as LeaseSpec;
      if (!lease || !spec.holderIdentity) return;
      held.set(lease.metadata.name ?? '', { holder: spec.holderIdentity, resourceVersion: lease.metadata.resourceVersion ?? '', durationMs: (spec.leaseDurationSeconds ?? 15) * 1000 });
    };
    note(await client.get(namespace, base));
    try {
      const { items } = await client.listAll({ namespace, labelSelector: `${LEASE_SET_LABEL}=${leaseSetLabel(base)},${LEASE_KIND_LABEL}=shard` });
      for (const lease of items) note(lease);
    } catch (err) {
      if (!isForbidden(err)) throw err;
      throw new LeaseListForbiddenError(`may not list Leases in ${namespace}, so cannot tell whether replicas of a sharded config hold shards (grant list on leases, or pass --force)`, { cause: err });
    }
    return held;
  };
  const first = await read();
  const started = clock.now();
  const watched = new Map(first);
  while (watched.size > 0 && !signal.aborted) {
    await clock.sleep(READ_EVERY_MS, signal);
    const now = await read();
    const elapsed = clock.now() - started;
    for (const [name, was] of watched) {
      const current = now.get(name);
      // Renewed, or taken by another: alive.
      if (current && current.resourceVersion !== was.resourceVersion) return { holder: current.holder, lease: `${namespace}/${name}` };
      // Released, or unchanged for a whole lease duration: no one's.
      if (!current || elapsed >= was.durationMs) watched.delete(name);
    }
  }
  return undefined;
}
