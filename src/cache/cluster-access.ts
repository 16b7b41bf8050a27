/**
 * What the sync layer needs of the clusters: a client per resource type and
 * a few facts about a cluster. kube/cluster-set.ts's ClusterSet is the real
 * one; the reconciler's unit tests give an in-memory one
 * (test/harness/memory-clusters.ts) so that each decision — what is written,
 * deleted or left alone for a given source, copy, marks and store — is
 * checked write by write, without an API server. Kept narrow on purpose: a
 * method added here is one every implementation must honour.
 */
import type { ResourceType, TypeReference } from '../core/resource-type.js';
import type { ResourceClient } from '../kube/resource-client.js';

/** The calls the sync layer makes on one resource type of one cluster. */
export type ObjectClient = Pick<ResourceClient, 'type' | 'get' | 'getMetadata' | 'setFinalizers' | 'patchStatus' | 'pages' | 'listAll' | 'create' | 'replace' | 'replaceStatus' | 'apply' | 'applyStatus' | 'jsonPatch' | 'mergePatch' | 'delete'>;

export interface ClusterAccess {
  readonly service: { readonly name: string };
  /** Configured, or a kcp workspace relsync knows. */
  has(cluster: string): boolean;
  /** A kcp workspace that unbound the export: nothing of it can be read or written. */
  isUnbound(cluster: string): boolean;
  /** 'logical' for a kcp workspace (its permission claims decide what relsync may read). */
  get(cluster: string): { readonly kind: 'kubernetes' | 'kcp' | 'logical' };
  client(cluster: string, type: ResourceType): ObjectClient;
  /** The type a group and resource name in a cluster, through discovery (a copy of a type the config no longer names). */
  resolve?(cluster: string, ref: TypeReference): Promise<ResourceType>;
  /** Drops a kcp workspace that unbound the export once nothing of it is left. */
  forgetLogical(cluster: string): Promise<void>;
}
