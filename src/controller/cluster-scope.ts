/**
 * Which cluster an object a watch or LIST returned belongs to. For a plain
 * platform or the service cluster, the one the watch is on. For a kcp
 * platform, the logical cluster kcp annotated it with, once its APIBinding
 * made that workspace known (logical_clusters), so that its primaries can be
 * read and written through `/clusters/<name>`.
 */
import type { Logger } from 'pino';
import type { ClusterSet } from '../kube/cluster-set.js';
import { LOGICAL_CLUSTER_ANNOTATION } from '../kube/kcp-endpoint.js';
import type { LogicalClusters } from '../kube/logical-clusters.js';
import type { KubeObject } from '../core/object.js';

export class ClusterScope {
  constructor(
    private readonly clusters: ClusterSet,
    private readonly logical: LogicalClusters,
    private readonly logger: Logger,
  ) {}

  /**
   * The identity cluster of `object`, seen on `watched`; undefined when it
   * has none yet. Only a workspace's APIBinding makes it known
   * (binding-watch.ts), and a LIST of it follows, so the objects skipped here
   * are not lost: they are late events of a workspace that left, objects
   * kcp showed before the binding was seen, or objects of a workspace that
   * binds another export (kcp v0.28 lists those when two exports share a
   * schema, but forbids reading them).
   */
  of(watched: string, object: KubeObject): string | undefined {
    if (this.clusters.get(watched).kind !== 'kcp') return watched;
    const cluster = object.metadata.annotations?.[LOGICAL_CLUSTER_ANNOTATION] || undefined;
    const where = `${object.metadata.namespace ? `${object.metadata.namespace}/` : ''}${object.metadata.name ?? ''}`;
    if (cluster === undefined) {
      this.logger.warn({ cluster: watched, object: where }, `kcp served an object without the ${LOGICAL_CLUSTER_ANNOTATION} annotation; it is skipped`);
      return undefined;
    }
    if (this.logical.platformOf(cluster) === watched) return cluster;
    this.logger.debug({ cluster: watched, logicalCluster: cluster, object: where }, 'an object of a workspace not bound (or not yet seen bound) through this platform; skipped');
    return undefined;
  }

  /** Whether `cluster`'s objects come through the watches of `watched` (itself, or on kcp a workspace bound through it). */
  listedBy(watched: string, cluster: string): boolean {
    return this.clusters.get(watched).kind !== 'kcp' ? cluster === watched : this.logical.platformOf(cluster) === watched;
  }

  /** The logical clusters whose binding is gone, of every kcp platform. */
  unbound(): string[] {
    return this.logical.records().flatMap((r) => (r.state === 'unbound' ? [r.name] : []));
  }

  /**
   * A complete LIST of `watched`, split by identity cluster. For kcp, every
   * logical cluster known for that platform is in the result, with no items
   * when the list had none of it: what the store knows of a workspace that
   * vanished from the list is then routed as gone.
   */
  split(watched: string, items: readonly KubeObject[]): Map<string, KubeObject[]> {
    if (this.clusters.get(watched).kind !== 'kcp') return new Map([[watched, [...items]]]);
    const parts = new Map<string, KubeObject[]>(this.logical.of(watched).map((name) => [name, []]));
    for (const item of items) {
      const cluster = this.of(watched, item);
      if (cluster === undefined) continue;
      let part = parts.get(cluster);
      if (!part) parts.set(cluster, (part = []));
      part.push(item);
    }
    return parts;
  }
}
