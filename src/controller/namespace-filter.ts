/**
 * Routes a platform namespace's changes to the primaries a namespace selector
 * (`namespaceSelector`, api-syncagent's `filter.namespace`) decides on: when
 * a namespace's labels make it start or stop matching a resource's selector,
 * every primary of that resource in it is reconciled — those stored (they
 * stop being selected: their copies go) and those a LIST of the namespace
 * finds (they start: nothing of them is stored yet). A change that leaves the
 * verdict as it was (an annotation, a label no selector reads) costs nothing.
 *
 * It remembers one verdict per platform namespace it has seen (which of the
 * resources match), so that a change is told from a first sight. A first
 * sight may follow a change made while relsync was stopped: as an event (a
 * watch that resumed), it counts as a change of every verdict; in a LIST
 * (start, relist), the stored primaries of a namespace that does not match
 * are reconciled (they stopped being selected), and those of one that
 * matches are left to their own LIST or events and to sweeps, which never
 * skip a primary the store does not know. A namespace deleted is forgotten.
 */
import type { Logger } from 'pino';
import { compositeKey } from '../core/composite-key.js';
import type { ObjectIdentity } from '../core/identity.js';
import { matchesSelector } from '../core/label-selector.js';
import type { KubeObject } from '../core/object.js';
import type { ResourceType } from '../core/resource-type.js';
import type { RelationStore } from '../store/relation-store.js';
import type { ResolvedResource } from '../sync/resolved-config.js';
import type { PrimaryKey } from './primary-key.js';

export interface NamespaceFilterOptions {
  readonly resources: readonly ResolvedResource[];
  readonly store: Pick<RelationStore, 'primariesInNamespace'>;
  /** The primaries of `type` in one namespace of a platform cluster, live (a LIST). */
  readonly primariesIn: (cluster: string, type: ResourceType, namespace: string) => Promise<ObjectIdentity[]>;
  readonly logger: Logger;
}

export class NamespaceFilter {
  private readonly filtered: readonly ResolvedResource[];
  /** `cluster/namespace` → which of `filtered` match it, as a bit string ('10': the first only). */
  private readonly verdicts = new Map<string, string>();

  constructor(private readonly options: NamespaceFilterOptions) {
    this.filtered = options.resources.filter((r) => r.namespaceSelector !== undefined);
  }

  get active(): boolean {
    return this.filtered.length > 0;
  }

  /** The primaries to reconcile because `namespace` (of a platform cluster) changed as it did. */
  async changed(cluster: string, namespace: KubeObject, change: string): Promise<PrimaryKey[]> {
    const name = namespace.metadata.name ?? '';
    const key = compositeKey(cluster, name);
    const before = this.verdicts.get(key);
    const now = change === 'DELETED' ? undefined : this.filtered.map((r) => (matchesSelector(r.namespaceSelector!, namespace.metadata.labels) ? '1' : '0')).join('');
    if (now === undefined) this.verdicts.delete(key);
    else this.verdicts.set(key, now);
    if (before === now) return [];
    const keys: PrimaryKey[] = [];
    for (const [i, resource] of this.filtered.entries()) {
      const selected = now?.[i] === '1';
      if (before === undefined ? change === 'LIST' && selected : before[i] === now?.[i]) continue;
      const { group, resource: plural } = resource.primaryType;
      const stored = await this.options.store.primariesInNamespace(cluster, group, plural, name);
      const live = selected && change !== 'LIST' ? await this.listed(cluster, resource.primaryType, name) : [];
      const seen = new Set<string>();
      for (const id of [...stored, ...live]) {
        if (seen.has(id.name)) continue;
        seen.add(id.name);
        keys.push({ resource, id });
      }
      if (seen.size > 0) this.options.logger.info({ cluster, namespace: name, resource: resource.where, selected, primaries: seen.size }, "a namespace's labels changed whether its primaries are selected; they are reconciled");
    }
    return keys;
  }

  /** A LIST that fails leaves the primaries to the next sweep (which reconciles every primary), said in the log. */
  private async listed(cluster: string, type: ResourceType, namespace: string): Promise<ObjectIdentity[]> {
    try {
      return await this.options.primariesIn(cluster, type, namespace);
    } catch (err) {
      this.options.logger.warn({ cluster, namespace, err: (err as Error).message }, 'could not list the primaries of a namespace that became selected; the next sweep syncs them');
      return [];
    }
  }
}
