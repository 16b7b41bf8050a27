/**
 * What the store hands out for a primary or a relation, and how a table row
 * becomes one. Shared by the relation store and the sweep's queries, so that
 * a primary's copy is read back from its columns in one place.
 */
import { fromColumns, type ObjectIdentity } from '../core/identity.js';
import type { PrimariesTable, PrimaryState, RelationState, RelationsTable } from './schema.js';

export interface PrimaryRecord {
  readonly id: ObjectIdentity;
  readonly uid: string;
  readonly copy: ObjectIdentity;
  readonly state: PrimaryState;
  readonly message: string | null;
  readonly lastSyncedAt: string | null;
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
}

/** A primary's copy: stored as its own cluster, namespace and name, of the primary's type. */
export function copyOfRow(row: Pick<PrimariesTable, 'copy_cluster' | 'group' | 'resource' | 'copy_namespace' | 'copy_name'>): ObjectIdentity {
  return { cluster: row.copy_cluster, group: row.group, resource: row.resource, namespace: row.copy_namespace, name: row.copy_name };
}

export function toPrimary(row: PrimariesTable): PrimaryRecord {
  return {
    id: fromColumns('', row),
    uid: row.uid,
    copy: copyOfRow(row),
    state: row.state,
    message: row.message,
    lastSyncedAt: row.last_synced_at,
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
  };
}

