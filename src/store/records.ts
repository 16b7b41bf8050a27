/**
 * What the store hands out for a primary or a relation, and how a table row
 * becomes one. Shared by the relation store and the sweep's queries, so that
 * a primary's copy is read back from its columns in one place.
 */
import { fromColumns, type ObjectIdentity } from '../core/identity.js';
import type { PrimariesTable, PrimaryState, RelationState, RelationsTable } from './schema.js';
import { capped } from '../core/quote.js';

export interface PrimaryRecord {
  readonly id: ObjectIdentity;
  readonly uid: string;
  readonly copy: ObjectIdentity;
  readonly state: PrimaryState;
  readonly message: string | null;
  readonly lastSyncedAt: string | null;
  /** What its last complete sync acted on; absent or null when the last reconcile was not one. */
  readonly versions?: PrimaryVersions | null;
}

/**
 * The resourceVersions a primary's last complete sync read or wrote last (its copy's after the
 * write), and a fingerprint of the config it ran with: a sweep that lists the same versions
 * (controller/sweep-skip.ts) knows the reconcile would do nothing.
 */
export interface PrimaryVersions {
  readonly primary: string;
  readonly copy: string;
  readonly config: string;
}

/** A relation's source and copy as its state was decided: their resourceVersions, '' for absent. */
export interface RelationVersions {
  readonly source: string;
  readonly destination: string;
}

/**
 * Whether the store says nothing of a relation's is in its destination: a relation that waits
 * for its source and found no object in the copy's place when it last decided (its destination
 * version ''). Not a claim stored before its first sync (no versions): a reconcile killed after
 * writing the copy and before saving its outcome leaves exactly that.
 */
export function leftNothing(relation: Pick<RelationRecord, 'state' | 'versions'>): boolean {
  return relation.state === 'pending' && relation.versions?.destination === '';
}

export interface RelationRecord {
  readonly primary: ObjectIdentity;
  readonly ruleId: string;
  readonly origin: 'platform' | 'service';
  readonly source: ObjectIdentity;
  readonly destination: ObjectIdentity;
  readonly state: RelationState;
  readonly contentHash: string | null;
  readonly message: string | null;
  readonly lastSyncedAt: string | null;
  /** Absent or null: not known (a state not decided on both ends, or written before migration 0006). */
  readonly versions?: RelationVersions | null;
}

/** A primary's copy: stored as its own cluster, type (migration 0007), namespace and name. */
export function copyOfRow(row: Pick<PrimariesTable, 'copy_cluster' | 'copy_group' | 'copy_resource' | 'copy_namespace' | 'copy_name'>): ObjectIdentity {
  return { cluster: row.copy_cluster, group: row.copy_group, resource: row.copy_resource, namespace: row.copy_namespace, name: row.copy_name };
}

export function toPrimary(row: PrimariesTable): PrimaryRecord {
  return {
    id: fromColumns('', row),
    uid: row.uid,
    copy: copyOfRow(row),
    state: row.state,
    message: row.message,
    lastSyncedAt: row.last_synced_at,
    versions: row.synced_version !== null && row.copy_version !== null && row.synced_config !== null ? { primary: row.synced_version, copy: row.copy_version, config: row.synced_config } : null,
  };
}

export function toRelation(row: RelationsTable): RelationRecord {
  return {
    primary: fromColumns('primary_', row),
    ruleId: row.rule_id,
    origin: row.origin,
    source: fromColumns('source_', row),
    destination: fromColumns('dest_', row),
    state: row.state,
    contentHash: row.content_hash,
    message: row.message,
    lastSyncedAt: row.last_synced_at,
    versions: row.source_version !== null && row.dest_version !== null ? { source: row.source_version, destination: row.dest_version } : null,
  };
}

/**
 * At most this many characters of a message are stored (a primary's or a relation's): messages
 * quote a tenant's values, and every row is read again at each start and sweep (issue #36).
 */
export const MAX_STORED_MESSAGE = 1024;

/** A message as the store keeps it: cut to MAX_STORED_MESSAGE, saying how long it was. */
export function storedMessage(message: string | null): string | null {
  return message === null ? null : capped(message, MAX_STORED_MESSAGE);
}

