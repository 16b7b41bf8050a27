/**
 * Where a reconcile reads objects from. Normally the API servers (LiveReads);
 * during a sweep, the sweep's own fresh LISTs (controller/sweep-snapshot.ts),
 * so that a sweep with nothing to do costs its LISTs, not a GET per object.
 * Writes always go to the API servers.
 */
import type { ClusterSet } from '../kube/cluster-set.js';
import type { KubeObject } from '../kube/object.js';
import type { ResourceType } from '../kube/resource-type.js';
import { selectorQuery, type LabelSelector } from '../rules/label-selector.js';

export interface ListQuery {
  /** Only objects of this namespace; all namespaces when undefined. */
  readonly namespace?: string | undefined;
  readonly selector?: LabelSelector | undefined;
  /**
   * A hint for in-memory reads: the caller keeps only objects for which
   * `of(object) === value`, so a snapshot may answer from an index on `of`
   * (named `index`, built once). The API ignores it: the caller filters.
   */
  readonly indexed?: { readonly index: string; readonly of: (object: KubeObject) => string | undefined; readonly value: string } | undefined;
}

export interface ObjectReads {
  /** The object, or undefined when it does not exist. */
  get(cluster: string, type: ResourceType, namespace: string, name: string): Promise<KubeObject | undefined>;
  list(cluster: string, type: ResourceType, query: ListQuery): Promise<KubeObject[]>;
}

export class LiveReads implements ObjectReads {
  constructor(private readonly clusters: ClusterSet) {}

  get(cluster: string, type: ResourceType, namespace: string, name: string): Promise<KubeObject | undefined> {
    return this.clusters.client(cluster, type).get(namespace, name);
  }

  async list(cluster: string, type: ResourceType, query: ListQuery): Promise<KubeObject[]> {
    const labelSelector = query.selector ? selectorQuery(query.selector) || undefined : undefined;
    return (await this.clusters.client(cluster, type).listAll({ namespace: query.namespace || undefined, labelSelector })).items;
  }
}
