/** Kysely table types; they mirror migrations/*.sql. */
import type { Generated } from 'kysely';
import type { IdentityColumns } from '../core/identity.js';
import type { LogicalClusterState } from '../core/logical-cluster.js';

export const PRIMARY_STATES = ['synced', 'conflict', 'error', 'deleting'] as const;
export type PrimaryState = (typeof PRIMARY_STATES)[number];
/**
 * retained: the primary no longer finds the relation's source, and its rule's cleanup policy keeps
 * the copy until the primary goes (rules/rule.ts CleanupPolicy); the copy is no longer updated.
 */
export const RELATION_STATES = ['pending', 'synced', 'conflict', 'error', 'retained'] as const;
export type RelationState = (typeof RELATION_STATES)[number];

export interface PrimariesTable extends IdentityColumns<''> {
  uid: string;
  copy_cluster: string;
  /** The copy's type (migration 0007): the primary's unless the config copies it as another. */
  copy_group: string;
  copy_resource: string;
  copy_namespace: string;
  copy_name: string;
  state: PrimaryState;
  message: string | null;
  first_seen_at: string;
  last_synced_at: string | null;
  /** Of the last complete sync (migration 0006): the primary's resourceVersion, its copy's, the config's fingerprint. */
  synced_version: string | null;
  copy_version: string | null;
  synced_config: string | null;
}

export interface RelationsTable extends IdentityColumns<'primary_'>, IdentityColumns<'source_'>, IdentityColumns<'dest_'> {
  rule_id: string;
  origin: 'platform' | 'service';
  state: RelationState;
  content_hash: string | null;
  message: string | null;
  last_synced_at: string | null;
  /** The versions of the source and of the copy this row's state was decided on ('' absent, NULL unknown). */
  source_version: string | null;
  dest_version: string | null;
}

export interface WatchCheckpointsTable {
  cluster: string;
  group: string;
  resource: string;
  label_selector: string;
  resource_version: string;
  updated_at: string;
}

interface SelectorScope {
  source_cluster: string;
  source_group: string;
  source_resource: string;
  source_namespace: string;
}

export interface SelectorsTable extends IdentityColumns<'primary_'>, SelectorScope {
  rule_id: string;
  requirements: string;
  selector_text: string;
  anchored: number;
}

export interface SelectorTermsTable extends IdentityColumns<'primary_'>, SelectorScope {
  rule_id: string;
  label_key: string;
  label_value: string;
}

export interface PendingPrimariesTable extends IdentityColumns<''> {
  queued_at: string;
}

/** followup: soon after a sweep that left related copies it could not tell were orphans (sweep-triggers.ts). */
export type SweepTrigger = 'startup' | 'schedule' | 'cli' | 'followup';
export type SweepStatus = 'running' | 'done' | 'failed' | 'skipped';

export interface SweepsTable {
  id: Generated<number>;
  trigger: SweepTrigger;
  status: SweepStatus;
  started_at: string;
  finished_at: string | null;
  primaries_seen: number;
  objects_listed: number;
  relations_added: number;
  relations_removed: number;
  copies_repaired: number;
  copies_removed: number;
  errors: number;
  message: string | null;
}


export interface LogicalClustersTable {
  name: string;
  platform: string;
  state: LogicalClusterState;
  first_seen_at: string;
  changed_at: string;
}

/** What each copy in the service cluster takes, charged to its tenant (migration 0009). */
export interface CopyBytesTable {
  cluster: string;
  group: string;
  resource: string;
  namespace: string;
  name: string;
  tenant: string;
  source: string;
  bytes: number;
}

export interface Database {
  copy_bytes: CopyBytesTable;
  logical_clusters: LogicalClustersTable;
  pending_primaries: PendingPrimariesTable;
  sweeps: SweepsTable;
  selectors: SelectorsTable;
  selector_terms: SelectorTermsTable;
  primaries: PrimariesTable;
  relations: RelationsTable;
  watch_checkpoints: WatchCheckpointsTable;
}
