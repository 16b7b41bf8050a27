/**
 * A primary's kcp workspace path (`root:org:team`), for resources with
 * `workspacePath: true` (api-syncagent's `enableWorkspacePaths`): the
 * `kcp.io/path` annotation of the workspace's LogicalCluster object, named
 * `cluster`, read through the APIExport's virtual workspace (the export
 * needs a permission claim on `logicalclusters.core.kcp.io`). kcp never
 * moves or renames a workspace, but the annotation is the tenant's to
 * write: kcp v0.28.1 lets a workspace's admin set it to any text (measured:
 * a PUT by a user with cluster-admin in the workspace changed it). So the
 * path is like a label of the tenant's: it names nothing relsync trusts
 * (marks and copy namespaces name the logical cluster), safety checks take
 * it for forged (config/safety-checks.ts), and it is read again after
 * PATH_TTL_MS, in a map of bounded size. A cluster that is not a kcp
 * workspace has no path but its name.
 */
import { logicalClusterType } from '../core/kcp-types.js';
import { isForbidden, isNotFound } from '../kube/api-error.js';
import { ExpiringMap } from '../util/expiring-map.js';
import { systemClock, type Clock } from '../util/clock.js';
import type { ClusterAccess } from '../cache/cluster-access.js';
import type { ObjectReads } from '../cache/object-reads.js';

/** The one LogicalCluster object every kcp workspace has. */
const LOGICAL_CLUSTER_NAME = 'cluster';
const PATH_ANNOTATION = 'kcp.io/path';
/** How long a path read is used: a changed one reaches a copy at the primary's next reconcile after that. */
const PATH_TTL_MS = 10 * 60_000;

/** Why a workspace's path could not be read: the tenant's to see (an Event), and the reconcile retries. */
export class WorkspacePathError extends Error {
  override name = 'WorkspacePathError';
}

/** kcp's path grammar (workspace names joined by `:`), and a cap far above any real path: text the tenant wrote is held and copied. */
const PATH = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(:[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const MAX_PATH_LENGTH = 512;
/** A workspace whose path could not be read is not asked again for each of its primaries. */
const FAILURE_TTL_MS = 30_000;

export class WorkspacePaths {
  /** Bounded by the workspaces bound to the export; an entry that ages out is read again. */
  private readonly known: ExpiringMap<string, string>;
  private readonly failed: ExpiringMap<string, string>;

  constructor(
    private readonly clusters: Pick<ClusterAccess, 'get'>,
    /** What a path is remembered for on; default systemClock. */
    clock: Clock = systemClock,
  ) {
    this.known = new ExpiringMap(10_000, clock);
    this.failed = new ExpiringMap(10_000, clock);
  }

  /** The path, when it was read before (edge syncs take the full reconcile otherwise). */
  cached(cluster: string): string | undefined {
    return this.clusters.get(cluster).kind === 'logical' ? this.known.get(cluster) : cluster;
  }

  async of(reads: ObjectReads, cluster: string): Promise<string> {
    const known = this.cached(cluster);
    if (known !== undefined) return known;
    const failed = this.failed.get(cluster);
    if (failed !== undefined) throw new WorkspacePathError(failed);
    try {
      const path = await this.read(reads, cluster);
      this.known.set(cluster, path, PATH_TTL_MS);
      return path;
    } catch (err) {
      if (err instanceof WorkspacePathError) this.failed.set(cluster, err.message, FAILURE_TTL_MS);
      throw err;
    }
  }

  private async read(reads: ObjectReads, cluster: string): Promise<string> {
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
    if (path.length > MAX_PATH_LENGTH || !PATH.test(path)) throw new WorkspacePathError(`this workspace's LogicalCluster states a ${PATH_ANNOTATION} that is not a workspace path (names of lowercase letters, digits and '-', joined by ':', at most ${MAX_PATH_LENGTH} characters)`);
    return path;
  }
}
