/**
 * What the work queue holds: a primary's identity, the published resource it
 * belongs to, and, when a change concerned only some of its relations (a
 * referenced object changed), which ones: the reconciler then syncs those
 * relations alone (sync/edge-sync.ts). Keys of one primary merge while they
 * wait: a key without edges (a full reconcile) absorbs any with edges.
 *
 * A failed reconcile is retried as the key retryKey() makes of it: the whole
 * primary, read from the API servers after a 409. The hint travels with the
 * key, so it holds for exactly the run that retries, whatever else is added
 * for the primary meanwhile (it merges in).
 */
import { identityKey, type ObjectIdentity } from '../core/identity.js';
import { isConflict } from '../kube/api-error.js';
import type { EdgeHint } from '../sync/edge-sync.js';
import type { ResolvedResource } from '../sync/resolved-config.js';

export interface PrimaryKey {
  readonly resource: ResolvedResource;
  readonly id: ObjectIdentity;
  /** Only these relations changed (their source); undefined: reconcile the whole primary. */
  readonly edges?: readonly EdgeHint[] | undefined;
  /**
   * Read everything from the API servers, not from what the watches delivered: the last run met a
   * 409 (something it read was older than what it wrote over).
   */
  readonly readLive?: boolean;
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

function edgeKey(e: EdgeHint): string {
  return JSON.stringify([e.ruleId, identityKey(e.source), identityKey(e.destination)]);
}
