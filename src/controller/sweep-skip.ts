/**
 * Which primaries a sweep need not reconcile: those whose last complete sync
 * acted on exactly what the sweep's LISTs show.
 *
 * A reconcile's outcome follows from the objects it reads (the primary, its
 * copy, each relation's source and copy), the selector and inverse matches
 * among the objects of its rules' source types, and the config. The store
 * keeps the versions (resourceVersion and uid, sync/object-version.ts) of the
 * first group as the last complete sync read or wrote them, with a keyed
 * fingerprint of the config and of relsync's own code (store/records.ts,
 * sync/config-fingerprint.ts). A primary is skipped only when
 *
 * - its cluster can be read (not an unbound kcp workspace, not forgotten);
 * - its last reconcile was a complete sync (state synced, versions stored),
 *   under the fingerprint in force now;
 * - the LISTs show the very versions stored of the primary, its copy and every
 *   relation's source and copy ('' for "did not exist"), and no watch event
 *   arrived for any of them since its LIST;
 * - every source type its selector and inverse rules read was listed whole,
 *   without a filter, in the cluster they read it from, and no listed object
 *   of those types that its rules find (what the router would route to it)
 *   lacks a relation with it (DirtyPrimaries, filled while the sweep lists).
 *
 * Anything the LISTs cannot tell (a LIST that failed midway, a filter, a
 * workspace bound meanwhile) reconciles the primary, as does a relation in
 * any state but synced or waiting for its source. So does any change made
 * while relsync was stopped: it shows as another version, a missing object,
 * or a new match. Not compared, because no tenant writes them: the copy
 * namespace's own record (copy-namespaces.ts), which a full reconcile reads
 * live at most once a minute anyway.
 */
import { identityKey, type ObjectIdentity } from '../core/identity.js';
import type { RelationStore } from '../store/relation-store.js';
import type { ResolvedResource } from '../sync/resolved-config.js';
import { primaryKeyString, type PrimaryKey } from './primary-key.js';

export interface ListedVersions {
  /** `copy`: relsync's copy or nothing (a LIST through the agent's filter vouches for its absence). */
  versionOf(id: ObjectIdentity, copy?: boolean): string | undefined;
  listedWhole(cluster: string, type: { group: string; resource: string }): boolean;
}

/**
 * Primaries that a listed object's selector or inverse rules find but that have no relation with it
 * yet: they are reconciled. One entry per primary at most, whatever the matches.
 */
export class DirtyPrimaries {
  private readonly keys = new Set<string>();

  /** `relatedPrimaries`: the primaries the store relates the object to (as a source). */
  found(owners: readonly PrimaryKey[], relatedPrimaries: readonly ObjectIdentity[]): void {
    const relatedKeys = new Set(relatedPrimaries.map(identityKey));
    for (const owner of owners) if (!relatedKeys.has(identityKey(owner.id))) this.keys.add(primaryKeyString(owner));
  }

  has(key: PrimaryKey): boolean {
    return this.keys.has(primaryKeyString(key));
  }
}

export interface SkipContext {
  readonly store: Pick<RelationStore, 'primary' | 'relationsOf'>;
  readonly fingerprint: { of(resource: ResolvedResource): string };
  readonly listed: ListedVersions;
  readonly dirty: DirtyPrimaries;
  readonly serviceCluster: string;
  /** False for a cluster relsync cannot read now: a reconcile decides what happens there. */
  readonly reachable: (cluster: string) => boolean;
}

/** Whether the primary's last complete sync acted on what the LISTs show (see the top of this file). */
export async function isUpToDate(c: SkipContext, key: PrimaryKey): Promise<boolean> {
  const { listed } = c;
  if (!c.reachable(key.id.cluster) || c.dirty.has(key)) return false;
  for (const rule of key.resource.rules) {
    if (rule.finder.kind !== 'selector' && rule.finder.kind !== 'inverse') continue;
    if (!listed.listedWhole(rule.origin === 'platform' ? key.id.cluster : c.serviceCluster, rule.sourceType)) return false;
  }
  const record = await c.store.primary(key.id);
  const versions = record?.versions;
  if (!record || record.state !== 'synced' || !versions || versions.config !== c.fingerprint.of(key.resource)) return false;
  if (listed.versionOf(key.id) !== versions.primary || listed.versionOf(record.copy, true) !== versions.copy) return false;
  for (const r of await c.store.relationsOf(key.id)) {
    if ((r.state !== 'synced' && r.state !== 'pending') || !r.versions) return false;
    if (!c.reachable(r.source.cluster) || !c.reachable(r.destination.cluster)) return false;
    if (listed.versionOf(r.source) !== r.versions.source || listed.versionOf(r.destination, true) !== r.versions.destination) return false;
  }
  return true;
}
