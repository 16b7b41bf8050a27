/**
 * Which primaries a sweep need not reconcile: those whose last complete sync
 * acted on exactly what the sweep's LISTs show.
 *
 * A reconcile's outcome follows from the objects it reads (the primary, its
 * copy, each relation's source and copy), the selector and inverse matches
 * among the objects of its rules' source types, and the config. The store
 * keeps the versions (resourceVersion and uid, core/object-version.ts) of the
 * first group as the last complete sync read or wrote them, with a keyed
 * fingerprint of the config and of relsync's own code (store/records.ts,
 * sync/config-fingerprint.ts). A primary is skipped only when
 *
 * - its cluster can be read (not an unbound kcp workspace, not forgotten);
 * - its last reconcile was a complete sync (state synced, versions stored),
 *   under the fingerprint in force now (and, with a namespace selector, the
 *   version of the namespace the LISTs show);
 * - the LISTs show the very versions stored of the primary, its copy and every
 *   relation's source and copy ('' for "did not exist"), and no watch event
 *   arrived for any of them since its LIST;
 * - every source type its selector and inverse rules read was listed whole,
 *   without a filter, in the cluster they read it from, and no listed object
 *   of those types that its rules find (what the router would route to it)
 *   lacks a relation with it (FoundMatches, filled while the sweep lists,
 *   checked when the sweep reads the store a page of primaries at a time).
 *
 * Anything the LISTs cannot tell (a LIST that failed midway, a filter, a
 * workspace bound meanwhile) reconciles the primary, as does a relation in
 * any state but synced or waiting for its source (a retained copy's source
 * may match again: sync/relation-sync.ts endStale). So does any change made
 * while relsync was stopped: it shows as another version, a missing object,
 * or a new match. Not compared, because no tenant writes them: the copy
 * namespace's own record (copy-namespaces.ts), which a full reconcile reads
 * live at most once a minute anyway.
 */
import { identityKey, type ObjectIdentity } from '../core/identity.js';
import type { PrimaryRecord, RelationRecord } from '../store/records.js';
import type { ResolvedResource } from '../sync/resolved-config.js';
import { selectionFingerprint } from '../sync/primary-selection.js';
import { primaryKeyString, type PrimaryKey } from './primary-key.js';

export interface ListedVersions {
  /** `copy`: relsync's copy or nothing (a LIST through the agent's filter vouches for its absence). */
  versionOf(id: ObjectIdentity, copy?: boolean): string | undefined;
  listedWhole(cluster: string, type: { group: string; resource: string }): boolean;
}

/** About what one remembered (primary, source) pair costs in memory. */
const PAIR_BYTES = 96;

/**
 * What selector and inverse rules find among the listed objects: the sources a primary must relate
 * to for its skip. Each listed object its rules find adds a (primary, source) pair, checked against
 * the primary's relations when the sweep reads them (isUpToDate), so listing costs no store read per
 * object. Bounded, and fair between tenants:
 *
 * - a primary found for more objects than it may relate to (`perPrimary`, limits.relatedPerPrimary
 *   + 1) is dirty (its reconcile says the limit), and its pairs are let go;
 * - past `budget` bytes of pairs, a listed object's owners are checked at once against the store
 *   instead (`related`, a read per object, as before pairs were kept): a tenant with many matching
 *   objects makes the sweep slower, never the process bigger, and never costs another tenant's
 *   primaries their skip.
 */
export class FoundMatches {
  private readonly sources = new Map<string, Set<string>>();
  /** Reconciled, whatever their relations: over `perPrimary`, or found for an object they have no relation with. */
  private readonly dirty = new Set<string>();
  /** Primaries some of whose found pairs went past the budget (checked against the store, not kept). */
  private readonly untold = new Set<string>();
  private bytes = 0;

  constructor(
    private readonly budget = Infinity,
    private readonly perPrimary = Infinity,
  ) {}

  /**
   * `owners`: the primaries whose selector or inverse rules find `source` as it was listed;
   * `related`: the primaries the store relates to `source` now (read only past the budget).
   */
  async found(owners: readonly PrimaryKey[], source: ObjectIdentity, related: () => Promise<readonly ObjectIdentity[]>): Promise<void> {
    const sourceKey = identityKey(source);
    const unknown: string[] = [];
    for (const owner of owners) {
      const key = primaryKeyString(owner);
      if (this.dirty.has(key)) continue;
      const known = this.sources.get(key);
      if (known?.has(sourceKey)) continue;
      if ((known?.size ?? 0) >= this.perPrimary) {
        this.markDirty(key);
        continue;
      }
      const cost = PAIR_BYTES + sourceKey.length + (known ? 0 : PAIR_BYTES + key.length);
      if (this.bytes + cost > this.budget) {
        unknown.push(key);
        continue;
      }
      this.bytes += cost;
      if (known) known.add(sourceKey);
      else this.sources.set(key, new Set([sourceKey]));
    }
    if (unknown.length === 0) return;
    for (const key of unknown) this.untold.add(key);
    const relatedKeys = new Set((await related()).map(identityKey));
    for (const key of unknown) if (!relatedKeys.has(key)) this.markDirty(key);
  }

  /**
   * Whether rules of this primary found `source` among the listed objects; true also when that cannot
   * be told (its pairs past the budget were checked against the store instead, not kept): a flood
   * of another tenant's matches costs no primary its skip.
   */
  has(key: PrimaryKey, source: ObjectIdentity): boolean {
    const name = primaryKeyString(key);
    return this.sources.get(name)?.has(identityKey(source)) === true || this.untold.has(name);
  }

  /** Whether rules of this primary found a listed object it has no relation with (as a source). */
  isDirty(key: PrimaryKey, relations: ReadonlyArray<Pick<RelationRecord, 'source'>>): boolean {
    const name = primaryKeyString(key);
    if (this.dirty.has(name)) return true;
    const found = this.sources.get(name);
    if (!found) return false;
    const related = new Set(relations.map((r) => identityKey(r.source)));
    for (const source of found) if (!related.has(source)) return true;
    return false;
  }

  private markDirty(key: string): void {
    this.dirty.add(key);
    const known = this.sources.get(key);
    if (!known) return;
    this.sources.delete(key);
    this.bytes -= PAIR_BYTES + key.length;
    for (const source of known) this.bytes -= PAIR_BYTES + source.length;
  }
}

export interface SkipContext {
  readonly fingerprint: { of(resource: ResolvedResource): string };
  readonly listed: ListedVersions;
  readonly found: FoundMatches;
  readonly serviceCluster: string;
  /** False for a cluster relsync cannot read now: a reconcile decides what happens there. */
  readonly reachable: (cluster: string) => boolean;
}

/**
 * Whether the primary's last complete sync acted on what the LISTs show (see the top of this file),
 * given its stored row and relations (`record` undefined: the store does not know it).
 */
export function isUpToDate(c: SkipContext, key: PrimaryKey, record: PrimaryRecord | undefined, relations: readonly RelationRecord[]): boolean {
  const { listed } = c;
  if (!c.reachable(key.id.cluster)) return false;
  for (const rule of key.resource.rules) {
    if (rule.finder.kind !== 'selector' && rule.finder.kind !== 'inverse') continue;
    if (!listed.listedWhole(rule.origin === 'platform' ? key.id.cluster : c.serviceCluster, rule.sourceType)) return false;
  }
  const versions = record?.versions;
  // With a namespace selector, the namespace's listed version is part of what the sync was stored with.
  const namespace = { cluster: key.id.cluster, group: '', resource: 'namespaces', namespace: '', name: key.id.namespace };
  const config = selectionFingerprint(key.resource, c.fingerprint.of(key.resource), key.resource.namespaceSelector ? (listed.versionOf(namespace) ?? 'not listed') : undefined);
  if (!record || record.state !== 'synced' || !versions || versions.config !== config) return false;
  if (listed.versionOf(key.id) !== versions.primary || listed.versionOf(record.copy, true) !== versions.copy) return false;
  const finders = new Map(key.resource.rules.map((rule) => [rule.id, rule.finder.kind]));
  for (const r of relations) {
    if ((r.state !== 'synced' && r.state !== 'pending') || !r.versions) return false;
    // A selector or inverse relation whose source the LISTs show but its rules no longer find there (a
    // label removed): the stored version alone cannot tell, when the last sync read the object's new
    // version and kept the relation on an older view of what matched.
    const kind = finders.get(r.ruleId);
    if ((kind === 'selector' || kind === 'inverse') && !c.found.has(key, r.source)) return false;
    if (!c.reachable(r.source.cluster) || !c.reachable(r.destination.cluster)) return false;
    if (listed.versionOf(r.source) !== r.versions.source || listed.versionOf(r.destination, true) !== r.versions.destination) return false;
  }
  return !c.found.isDirty(key, relations);
}
