/**
 * How many shards each replica should hold, and which this one should take
 * or give up (shard-coordinator.ts decides with it; no I/O here).
 *
 * Every replica sees the same live members (their member Leases) and sorts
 * them by identity: the first `shards mod members` hold one more than the
 * rest, so that no replica holds more than one shard above another once all
 * agree. A replica above its share gives shards up (after stopping their
 * work); one below takes free ones: never held, released, or not renewed for
 * a whole lease duration. A live replica's shard is never taken.
 */

export interface ShardView {
  /** Live replicas (this one included), by identity. */
  readonly members: readonly string[];
  /** Each shard's live holder, or undefined when it is free. */
  readonly holders: ReadonlyArray<string | undefined>;
}

/** The share of `me` among `members` (sorted here): shards / members, the first (shards mod members) one more. */
export function shareOf(shards: number, members: readonly string[], me: string): number {
  const sorted = [...new Set([...members, me])].sort();
  const index = sorted.indexOf(me);
  return Math.floor(shards / sorted.length) + (index < shards % sorted.length ? 1 : 0);
}

export interface BalanceDecision {
  readonly share: number;
  /** Free shards to try to take, in order of preference. */
  readonly take: readonly number[];
  /** Held shards to give up (stop, then release). */
  readonly giveUp: readonly number[];
}

/**
 * `held`: the shards this replica holds and works for (not those it is already giving up).
 * Free shards are tried from an offset that differs between replicas, so that two replicas that
 * start together do not race for the same ones.
 */
export function balance(view: ShardView, me: string, held: ReadonlySet<number>): BalanceDecision {
  const shards = view.holders.length;
  const members = [...new Set([...view.members, me])].sort();
  const share = shareOf(shards, members, me);
  if (held.size > share) {
    // The last ones: with every replica doing the same, the low shards move least.
    return { share, take: [], giveUp: [...held].sort((a, b) => b - a).slice(0, held.size - share) };
  }
  const start = Math.floor((members.indexOf(me) * shards) / members.length);
  const take: number[] = [];
  for (let i = 0; i < shards && take.length < share - held.size; i++) {
    const shard = (start + i) % shards;
    if (!held.has(shard) && view.holders[shard] === undefined) take.push(shard);
  }
  return { share, take, giveUp: [] };
}
