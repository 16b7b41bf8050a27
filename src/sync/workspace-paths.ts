/**
 * A primary's kcp workspace path (`root:org:team`), for resources with
 * `workspacePath: true` (api-syncagent's `enableWorkspacePaths`): the
 * `kcp.io/path` annotation of the workspace's LogicalCluster object, named
 * `cluster`, read through the APIExport's virtual workspace (the export
 * needs a permission claim on `logicalclusters.core.kcp.io`). A logical
 * cluster's path never changes (kcp cannot move or rename a workspace), so
 * each is read once and remembered, in a map of bounded size. A cluster
 * that is not a kcp workspace has no path but its name.
 */
import type { ResourceType } from '../core/resource-type.js';
import { isForbidden, isNotFound } from '../kube/api-error.js';
import { ExpiringMap } from '../util/expiring-map.js';
import type { ClusterAccess } from './cluster-access.js';
import type { ObjectReads } from './object-reads.js';

export const logicalClusterType: ResourceType = { group: 'core.kcp.io', version: 'v1alpha1', resource: 'logicalclusters', kind: 'LogicalCluster', namespaced: false };
/** The one LogicalCluster object every kcp workspace has. */
const LOGICAL_CLUSTER_NAME = 'cluster';
const PATH_ANNOTATION = 'kcp.io/path';

/** Why a workspace's path could not be read: the tenant's to see (an Event), and the reconcile retries. */
export class WorkspacePathError extends Error {
  override name = 'WorkspacePathError';
}

export class WorkspacePaths {
  /** Bounded by the workspaces bound to the export; an entry that ages out is read again. */
  private readonly known = new ExpiringMap<string, string>(10_000);

  constructor(private readonly clusters: Pick<ClusterAccess, 'get'>) {}

  /** The path, when it was read before (edge syncs take the full reconcile otherwise). */
  cached(cluster: string): string | undefined {
    return this.clusters.get(cluster).kind === 'logical' ? this.known.get(cluster) : cluster;
  }

  async of(reads: ObjectReads, cluster: string): Promise<string> {
    const known = this.cached(cluster);
    if (known !== undefined) return known;
    let object;
    try {
      object = await reads.get(cluster, logicalClusterType, '', LOGICAL_CLUSTER_NAME);
    } catch (err) {
      if (!isForbidden(err) && !isNotFound(err)) throw err;
    }
    // kcp answers 404 (or 403) for a claim the workspace did not accept, as for a missing object.
    if (!object) throw new WorkspacePathError("relsync may not read logicalclusters.core.kcp.io in this workspace, which it needs for this type's workspace path: accept the APIExport's permission claim for logicalclusters.core.kcp.io in the APIBinding");
    const path = object.metadata.annotations?.[PATH_ANNOTATION];
    // Never a stand-in: a name template that reads the path would make every such workspace's copies meet.
    if (!path) throw new WorkspacePathError(`this workspace's LogicalCluster has no ${PATH_ANNOTATION} annotation: relsync cannot tell its workspace path`);
    this.known.set(cluster, path, 60 * 60_000);
    return path;
  }
}
