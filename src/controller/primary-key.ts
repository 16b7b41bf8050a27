/**
 * What the work queue holds: a primary's identity, the published resource it
 * belongs to, and, when a change concerned only some of its relations (a
 * referenced object changed), which ones: the reconciler then syncs those
 * relations alone (sync/edge-sync.ts). Keys of one primary merge while they
 * wait: a key without edges (a full reconcile) absorbs any with edges.
 */
import { identityKey, type ObjectIdentity } from '../core/identity.js';
import type { EdgeHint } from '../sync/edge-sync.js';
import type { ResolvedResource } from '../sync/resolved-config.js';

export interface PrimaryKey {
  readonly resource: ResolvedResource;
  readonly id: ObjectIdentity;
  /** Only these relations changed (their source); undefined: reconcile the whole primary. */
  readonly edges?: readonly EdgeHint[] | undefined;
}

/** Edges one key carries at most; beyond, the whole primary is reconciled (as cheap by then). */
const MAX_EDGES = 16;

export function primaryKeyString(key: PrimaryKey): string {
  return identityKey(key.id);
}

/** Two keys of one primary as one: a full reconcile if either is, otherwise the union of their edges. */
export function mergeKeys(a: PrimaryKey, b: PrimaryKey): PrimaryKey {
  if (!a.edges || !b.edges) return { resource: b.resource, id: b.id };
  const edges = new Map<string, EdgeHint>();
  for (const e of [...a.edges, ...b.edges]) edges.set(edgeKey(e), e);
  if (edges.size > MAX_EDGES) return { resource: b.resource, id: b.id };
  return { resource: b.resource, id: b.id, edges: [...edges.values()] };
}

function edgeKey(e: EdgeHint): string {
  return JSON.stringify([e.ruleId, identityKey(e.source), identityKey(e.destination)]);
}
