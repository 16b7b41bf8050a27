/**
 * Which cluster an object a watch or LIST returned belongs to. For a plain
 * platform or the service cluster, the one the watch is on. For a kcp
 * platform, the logical cluster kcp annotated it with; a workspace seen for
 * the first time is recorded (logical_clusters), so that its primaries can
 * be read and written through `/clusters/<name>`.
 */
import type { Logger } from 'pino';
import type { ClusterSet } from '../kube/cluster-set.js';
import { LOGICAL_CLUSTER_ANNOTATION } from '../kube/kcp-endpoint.js';
import type { LogicalClusters } from '../kube/logical-clusters.js';
import type { KubeObject } from '../kube/object.js';

export class ClusterScope {
  constructor(
    private readonly clusters: ClusterSet,
    private readonly logical: LogicalClusters,
    private readonly logger: Logger,
  ) {}

  /**
   * The identity cluster of `object`, seen on `watched`; undefined (and
   * logged) when kcp did not say. A deletion never registers a workspace: it
   * may be the late event of one that relsync just forgot.
   */
  async of(watched: string, object: KubeObject, change?: string): Promise<string | undefined> {
    if (this.clusters.get(watched).kind !== 'kcp') return watched;
    const cluster = this.clusters.clusterOf(watched, object);
    const where = `${object.metadata.namespace ? `${object.metadata.namespace}/` : ''}${object.metadata.name ?? ''}`;
    if (cluster === undefined) {
      this.logger.warn({ cluster: watched, object: where }, `kcp served an object without the ${LOGICAL_CLUSTER_ANNOTATION} annotation; it is skipped`);
      return undefined;
    }
    const platform = this.logical.platformOf(cluster);
    if (platform === undefined) {
      if (change === 'DELETED') return undefined;
      if (this.clusters.has(cluster)) {
        this.logger.error({ cluster: watched, logicalCluster: cluster, object: where }, 'a logical cluster has the name of a configured cluster; its objects are skipped (rename the configured cluster)');
        return undefined;
      }
      // Object events register new workspaces; binding and unbinding are the APIBinding watch's (binding-watch.ts).
      await this.logical.bound(cluster, watched);
      this.logger.info({ cluster: watched, logicalCluster: cluster }, 'a new workspace binds the export; syncing its objects');
    } else if (platform !== watched) {
      this.logger.error({ cluster: watched, logicalCluster: cluster, platform }, 'one logical cluster is served by two configured kcp platforms; it stays with the first');
      return undefined;
    }
    return cluster;
  }

  /** The logical clusters of `platform` whose binding is gone. */
  unboundOf(platform: string): string[] {
    return this.logical.of(platform).filter((name) => this.logical.isUnbound(name));
  }

  /**
   * A complete LIST of `watched`, split by identity cluster. For kcp, every
   * logical cluster known for that platform is in the result, with no items
   * when the list had none of it: what the store knows of a workspace that
   * vanished from the list is then routed as gone.
   */
  async split(watched: string, items: readonly KubeObject[]): Promise<Map<string, KubeObject[]>> {
    if (this.clusters.get(watched).kind !== 'kcp') return new Map([[watched, [...items]]]);
    const parts = new Map<string, KubeObject[]>(this.logical.of(watched).map((name) => [name, []]));
    for (const item of items) {
      const cluster = await this.of(watched, item);
      if (cluster === undefined) continue;
      let part = parts.get(cluster);
      if (!part) parts.set(cluster, (part = []));
      part.push(item);
    }
    return parts;
  }
}
