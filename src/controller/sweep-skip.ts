/**
 * Which primaries a sweep need not reconcile: those whose last complete sync
 * acted on exactly what the sweep's LISTs show.
 *
 * A reconcile's outcome follows from the objects it reads (the primary, its
 * copy, each relation's source and copy), the selector and inverse matches
 * among the listed objects, and the config. The store keeps the resourceVersions
 * of the first group as the last complete sync read or wrote them, with a
 * fingerprint of the config (store/records.ts). A primary is skipped only when
 *
 * - its last reconcile was a complete sync (state synced, versions stored),
 *   under the config in force now (sync/config-fingerprint.ts);
 * - the LISTs show the very versions stored of the primary, its copy and every
 *   relation's source and copy ('' for "did not exist": a type listed whole and
 *   unfiltered that lacks it), and no watch event arrived for any of them
 *   since its LIST;
 * - no listed object that a selector or inverse rule finds for it (what the
 *   router would route it to) is missing from its relations.
 *
 * Anything the LISTs cannot tell (a LIST that failed, a filter, a workspace
 * bound meanwhile) reconciles the primary, as does a relation in any state
 * but synced or waiting for its source. A primary that changed while relsync
 * was stopped shows another version; a new object its selector finds shows
 * up as a candidate: neither is skipped.
 */
import { identityKey, type ObjectIdentity } from '../core/identity.js';
import type { RelationStore } from '../store/relation-store.js';
import type { ResolvedResource } from '../sync/resolved-config.js';
import { primaryKeyString, type PrimaryKey } from './primary-key.js';

export interface ListedVersions {
  versionOf(id: ObjectIdentity): string | undefined;
}

/**
 * Selector and inverse matches among the sweep's listed objects, by primary: the sources a primary
 * must already have a relation with to be skipped. Bounded: past `maxPairs` it stops holding them
 * and no primary is skipped (a selector that matches everything for every primary costs the sweep
 * its shortcut, not its memory).
 */
export class FoundSources {
  private readonly byPrimary = new Map<string, Set<string>>();
  private pairs = 0;
  overflowed = false;

  constructor(private readonly maxPairs = 500_000) {}

  add(primary: PrimaryKey, source: ObjectIdentity): void {
    if (this.overflowed) return;
    const key = primaryKeyString(primary);
    let set = this.byPrimary.get(key);
    if (!set) this.byPrimary.set(key, (set = new Set()));
    const before = set.size;
    set.add(identityKey(source));
    if (set.size > before && ++this.pairs > this.maxPairs) {
      this.overflowed = true;
      this.byPrimary.clear();
    }
  }

  of(primary: PrimaryKey): ReadonlySet<string> {
    return this.byPrimary.get(primaryKeyString(primary)) ?? new Set();
  }
}

/** Whether the primary's last complete sync acted on what the LISTs show (see the top of this file). */
export async function isUpToDate(
  store: Pick<RelationStore, 'primary' | 'relationsOf'>,
  fingerprint: { of(resource: ResolvedResource): string },
  listed: ListedVersions,
  found: FoundSources,
  key: PrimaryKey,
): Promise<boolean> {
  if (found.overflowed) return false;
  const record = await store.primary(key.id);
  const versions = record?.versions;
  if (!record || record.state !== 'synced' || !versions || versions.config !== fingerprint.of(key.resource)) return false;
  if (listed.versionOf(key.id) !== versions.primary || listed.versionOf(record.copy) !== versions.copy) return false;
  const sources = new Set<string>();
  for (const r of await store.relationsOf(key.id)) {
    if ((r.state !== 'synced' && r.state !== 'pending') || !r.versions) return false;
    if (listed.versionOf(r.source) !== r.versions.source || listed.versionOf(r.destination) !== r.versions.destination) return false;
    sources.add(identityKey(r.source));
  }
  for (const source of found.of(key)) if (!sources.has(source)) return false;
  return true;
}
