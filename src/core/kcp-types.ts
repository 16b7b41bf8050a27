/**
 * The kcp types relsync reads through an APIExport's virtual workspace,
 * besides the configured ones: APIBindings (which workspaces bind the
 * export, and what it claims) and LogicalClusters (a workspace's path).
 */
import type { ResourceType } from './resource-type.js';

export const apiBindingType: ResourceType = { group: 'apis.kcp.io', version: 'v1alpha1', resource: 'apibindings', kind: 'APIBinding', namespaced: false };

export const logicalClusterType: ResourceType = { group: 'core.kcp.io', version: 'v1alpha1', resource: 'logicalclusters', kind: 'LogicalCluster', namespaced: false };
