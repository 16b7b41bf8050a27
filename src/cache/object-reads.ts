/**
 * Where a reconcile reads objects from. Normally the API servers (LiveReads);
 * during a sweep, the sweep's own fresh LISTs (cache/sweep-snapshot.ts),
 * so that a sweep with nothing to do costs its LISTs, not a GET per object.
 * Writes always go to the API servers.
 */
import type { ClusterAccess } from './cluster-access.js';
import type { KubeObject } from '../core/object.js';
import { typeName, type ResourceType } from '../core/resource-type.js';
import { matchesSelector, selectorQuery, type LabelSelector } from '../core/label-selector.js';

export interface ListQuery<T = KubeObject> {
  /** Only objects of this namespace; all namespaces when undefined. */
  readonly namespace?: string | undefined;
  readonly selector?: LabelSelector | undefined;
  /**
   * A hint for in-memory reads: the caller keeps only objects for which
   * `of(object) === value`, so a snapshot may answer from an index on `of`
   * (named `index`, built once). The API ignores it: the caller filters.
   */
  readonly indexed?: { readonly index: string; readonly of: (object: KubeObject) => string | undefined; readonly value: string } | undefined;
  /** Only objects this accepts (applied before `limit` counts). */
  readonly accept?: ((object: KubeObject) => boolean) | undefined;
  /**
   * At most this many objects (those first in the API server's order): a
   * tenant can make a selector match more than relsync would ever copy
   * (limits.relatedPerPrimary), and holding them all would cost the memory.
   */
  readonly limit?: number | undefined;
  /**
   * What of each object is kept (what the caller reads of it): found objects are held together, up
   * to `limit` of a tenant's objects of any size. Without it, the objects themselves.
   */
  readonly project?: ((object: KubeObject) => T) | undefined;
}

/** What a query keeps of one object it answers with (ListQuery.project). */
export function projected<T>(query: ListQuery<T>, object: KubeObject): T {
  return query.project ? query.project(object) : (object as unknown as T);
}

/** Whether a listed object answers the query's in-memory parts (`indexed`, `accept`). */
export function answers(query: ListQuery<unknown>, object: KubeObject): boolean {
  return (!query.indexed || query.indexed.of(object) === query.indexed.value) && (!query.accept || query.accept(object));
}

/** Whether an object read by name answers the whole query: its label selector (which a LIST applies on the server) too. */
export function matchesQuery(query: ListQuery<unknown>, object: KubeObject): boolean {
  return (!query.selector || matchesSelector(query.selector, object.metadata.labels)) && answers(query, object);
}

export interface ObjectReads {
  /**
   * True when answers may come from what the watches delivered (cache/object-cache.ts) rather
   * than from the API server or a sweep's fresh LIST: a decision to delete is then confirmed by
   * reading again live (ReadAgainLive).
   */
  readonly cached?: boolean;
  /** The object, or undefined when it does not exist. */
  get(cluster: string, type: ResourceType, namespace: string, name: string): Promise<KubeObject | undefined>;
  /**
   * What is known of an object without asking the API server (what the watches delivered), or
   * undefined when only the API server could say. Reads without such knowledge leave it out.
   */
  peek?(cluster: string, type: ResourceType, namespace: string, name: string): { readonly object: KubeObject } | undefined;
  /**
   * Whether the watches delivered an object of this name that is still kept (of any version of its
   * type), told without reading it. Reads without such knowledge leave it out.
   */
  holds?(cluster: string, type: ResourceType, namespace: string, name: string): boolean;
  list<T = KubeObject>(cluster: string, type: ResourceType, query: ListQuery<T>): Promise<T[]>;
}

/**
 * Thrown by a reconcile that read from the cache and is about to delete something: the reconcile
 * starts over, reading live, and deletes only if the API servers still say so.
 */
export class ReadAgainLive extends Error {
  override name = 'ReadAgainLive';
}

/** Throws ReadAgainLive when `reads` may answer from the cache. */
export function confirmLive(reads: ObjectReads): void {
  if (reads.cached) throw new ReadAgainLive('a deletion decided on cached reads is confirmed live');
}

/**
 * How one reconcile reads: first from what it was handed (the watches' cache, a sweep's snapshot,
 * or the API servers after a conflict: cache/sweep-snapshot.ts `sessionFor`), and from the API
 * servers, from the start, when a step about to delete asks to read again live (ReadAgainLive).
 */
export class ReadSession {
  constructor(
    readonly first: ObjectReads,
    private readonly live: ObjectReads,
  ) {}

  /** `step` with the first reads; once more from the start, live, when it asks to read again live. */
  async run<T>(step: (reads: ObjectReads) => Promise<T>): Promise<T> {
    try {
      return await step(this.first);
    } catch (err) {
      if (!(err instanceof ReadAgainLive)) throw err;
      return step(this.live);
    }
  }
}

export class LiveReads implements ObjectReads {
  constructor(private readonly clusters: Pick<ClusterAccess, 'client'>) {}

  get(cluster: string, type: ResourceType, namespace: string, name: string): Promise<KubeObject | undefined> {
    return this.clusters.client(cluster, type).get(namespace, name);
  }

  /**
   * Page by page, keeping only what the query answers, up to its limit: never the whole list at once.
   * An object the LIST refused (too costly to read) fails the query: it matched the namespace and
   * selector, and what it holds cannot be told, so no answer without it may be taken as complete.
   */
  async list<T = KubeObject>(cluster: string, type: ResourceType, query: ListQuery<T>): Promise<T[]> {
    const labelSelector = query.selector ? selectorQuery(query.selector) || undefined : undefined;
    const found: T[] = [];
    for await (const page of this.clusters.client(cluster, type).pages({ namespace: query.namespace || undefined, labelSelector })) {
      const refused = page.refused?.[0];
      if (refused) {
        const { namespace, name } = refused.object.metadata;
        throw new Error(`${typeName(type)} ${namespace ? `${namespace}/` : ''}${name ?? ''} in ${cluster} is not read: ${refused.why}`);
      }
      for (const object of page.items) {
        if (!answers(query, object)) continue;
        found.push(projected(query, object));
        if (query.limit !== undefined && found.length >= query.limit) return found;
      }
    }
    return found;
  }
}
