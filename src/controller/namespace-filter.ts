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
 * sight may follow a change made while relsync was stopped: as a MODIFIED
 * event (a watch that resumed), it counts as a change of every verdict; in a
 * LIST (start, relist), the stored primaries of a namespace that does not
 * match are reconciled (they stopped being selected), and those of one that
 * matches are left to their own LIST or events and to sweeps, which never
 * skip a primary the store does not know; a new namespace (ADDED) has no
 * primaries yet, and theirs arrive as events of their own. A namespace
 * deleted is forgotten. Whatever this misses (a relabel in the middle of a
 * primary's first reconcile), a sweep reconciles: a complete sync is stored
 * with the version of the namespace it read (sync/primary-selection.ts).
 *
 * The LIST a namespace that starts matching needs runs beside the watch, not
 * in its way: the watch of every tenant's namespaces goes on while one
 * tenant's namespace of many primaries is listed, and a namespace listed
 * already is not listed twice at once.
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
  /** Where the primaries a LIST found go (the work queue). */
  readonly enqueue: (key: PrimaryKey) => void;
  readonly logger: Logger;
}

export class NamespaceFilter {
  private readonly filtered: readonly ResolvedResource[];
  /** `cluster/namespace` → which of `filtered` match it, as a bit string ('10': the first only). */
  private readonly verdicts = new Map<string, string>();
  /** LISTs under way, by `cluster/namespace/resource index`. */
  private readonly listing = new Map<string, Promise<void>>();

  constructor(private readonly options: NamespaceFilterOptions) {
    this.filtered = options.resources.filter((r) => r.namespaceSelector !== undefined);
  }

  get active(): boolean {
    return this.filtered.length > 0;
  }

  /**
   * The stored primaries to reconcile because `namespace` (of a platform cluster) changed as it did;
   * those a LIST finds are queued when it answers. `keep` false: a LIST page that may be older than
   * events handled already (a kcp workspace's relist): it changes no verdict, and only the stored
   * primaries of what it shows not matching are reconciled (their reconcile reads the namespace).
   */
  async changed(cluster: string, namespace: KubeObject, change: string, keep = true): Promise<PrimaryKey[]> {
    const name = namespace.metadata.name ?? '';
    const key = compositeKey(cluster, name);
    const now = change === 'DELETED' ? undefined : this.filtered.map((r) => (matchesSelector(r.namespaceSelector!, namespace.metadata.labels) ? '1' : '0')).join('');
    if (!keep) return this.stored(cluster, name, (i) => now?.[i] !== '1');
    const before = this.verdicts.get(key);
    if (now === undefined) this.verdicts.delete(key);
    else this.verdicts.set(key, now);
    if (before === now) return [];
    const flipped = (i: number) => (before === undefined ? change !== 'LIST' || now?.[i] !== '1' : before[i] !== now?.[i]);
    const keys = await this.stored(cluster, name, flipped);
    if (change !== 'ADDED') {
      for (const [i, resource] of this.filtered.entries()) if (now?.[i] === '1' && flipped(i) && change !== 'LIST') this.list(cluster, name, i, resource);
    }
    return keys;
  }

  private async stored(cluster: string, namespace: string, which: (i: number) => boolean): Promise<PrimaryKey[]> {
    const keys: PrimaryKey[] = [];
    for (const [i, resource] of this.filtered.entries()) {
      if (!which(i)) continue;
      for (const id of await this.options.store.primariesInNamespace(cluster, resource.primaryType.group, resource.primaryType.resource, namespace)) keys.push({ resource, id });
    }
    if (keys.length > 0) this.options.logger.info({ cluster, namespace, primaries: keys.length }, "a namespace's labels changed whether its primaries are selected; they are reconciled");
    return keys;
  }

  /** A LIST that fails leaves the primaries to the next sweep (which never skips a primary it does not know), said in the log. */
  private list(cluster: string, namespace: string, index: number, resource: ResolvedResource): void {
    const key = compositeKey(cluster, namespace, String(index));
    if (this.listing.has(key)) return;
    const run = this.options
      .primariesIn(cluster, resource.primaryType, namespace)
      .then((ids) => {
        for (const id of ids) this.options.enqueue({ resource, id });
        if (ids.length > 0) this.options.logger.info({ cluster, namespace, resource: resource.where, primaries: ids.length }, 'a namespace started matching a namespace selector; its primaries are reconciled');
      })
      .catch((err: unknown) => this.options.logger.warn({ cluster, namespace, err: (err as Error).message }, 'could not list the primaries of a namespace that became selected; the next sweep syncs them'))
      .finally(() => this.listing.delete(key));
    this.listing.set(key, run);
  }

  /** Waits for the LISTs under way (tests, and a term that ends). */
  async settled(): Promise<void> {
    await Promise.all(this.listing.values());
  }
}
