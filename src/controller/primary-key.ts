/**
 * What the work queue holds: a primary's identity, the published resource it
 * belongs to, and, when a change concerned only some of its relations (a
 * referenced object changed), which ones: the reconciler then syncs those
 * relations alone (sync/edge-sync.ts). Keys of one primary merge while they
 * wait: a key without edges (a full reconcile) absorbs any with edges.
 *
 * A failed reconcile is retried as the key retryKey() makes of it: the whole
 * primary, read from the API servers after a 409. The hint travels with the
 * key: it merges into whatever else is added for the primary meanwhile, and
 * goes with the run that used it (a run that asks to be looked at again is
 * queued again without it: requeueKey()).
 */
import { identityKey, type ObjectIdentity } from '../core/identity.js';
import { isConflict } from '../kube/api-error.js';
import type { ReconcileHints } from '../sync/primary-reconciler.js';
import type { ResolvedResource } from '../sync/resolved-config.js';
import type { EdgeHint } from '../sync/edge-sync.js';
import type { WorkQueueOptions } from './work-queue.js';

/** A primary to reconcile, with what its queued changes say of the run (edges, readLive). */
export interface PrimaryKey extends ReconcileHints {
  readonly resource: ResolvedResource;
  readonly id: ObjectIdentity;
}

/** Edges one key carries at most; beyond, the whole primary is reconciled (as cheap by then). */
const MAX_EDGES = 16;

export function primaryKeyString(key: PrimaryKey): string {
  return identityKey(key.id);
}

/**
 * Two keys of one primary as one: a full reconcile if either is, otherwise the union of their
 * edges; read live if either says so.
 */
export function mergeKeys(a: PrimaryKey, b: PrimaryKey): PrimaryKey {
  const live = a.readLive === true || b.readLive === true ? { readLive: true } : {};
  if (!a.edges || !b.edges) return { resource: b.resource, id: b.id, ...live };
  const edges = new Map<string, EdgeHint>();
  for (const e of [...a.edges, ...b.edges]) edges.set(edgeKey(e), e);
  if (edges.size > MAX_EDGES) return { resource: b.resource, id: b.id, ...live };
  return { resource: b.resource, id: b.id, edges: [...edges.values()], ...live };
}

/**
 * What a failed run of `key` is retried as: the whole primary (a failed edge sync or full
 * reconcile may have left any relation behind), read live after a 409.
 */
export function retryKey(key: PrimaryKey, err: unknown): PrimaryKey {
  return { resource: key.resource, id: key.id, ...(isConflict(err) ? { readLive: true } : {}) };
}

/** What a run of `key` that asks to be looked at again is queued as: its hint to read live was used. */
export function requeueKey(key: PrimaryKey): PrimaryKey {
  return { resource: key.resource, id: key.id, ...(key.edges ? { edges: key.edges } : {}) };
}

/** How the work queue keys, merges, retries and requeues primaries (wiring.ts). */
export const primaryKeyPolicy: Pick<WorkQueueOptions<PrimaryKey>, 'key' | 'merge' | 'retryAs' | 'requeueAs'> = {
  key: primaryKeyString,
  merge: mergeKeys,
  retryAs: retryKey,
  requeueAs: requeueKey,
};

function edgeKey(e: EdgeHint): string {
  return JSON.stringify([e.ruleId, identityKey(e.source), identityKey(e.destination)]);
}
