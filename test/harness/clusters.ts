/**
 * The usual start of an end-to-end test: control planes side by side, the
 * example Database CRD installed on each, and a ClusterClient for each, by name.
 */
import { join } from 'node:path';
import { startControlPlanes, type ControlPlane } from './control-plane.js';
import { installCrd } from './kube.js';
import { ClusterClient } from './tenant.js';

export interface Clusters<N extends string> {
  readonly plane: Record<N, ControlPlane>;
  readonly client: Record<N, ClusterClient>;
  /** Stops every control plane. */
  stop(): Promise<void>;
}

export async function startClusters<N extends string>(...names: N[]): Promise<Clusters<N>> {
  const planes = await startControlPlanes(...names);
  await Promise.all(planes.map((p) => installCrd(p.kubeConfig)));
  const plane = Object.fromEntries(planes.map((p) => [p.name, p])) as Record<N, ControlPlane>;
  const client = Object.fromEntries(planes.map((p) => [p.name, new ClusterClient(p.name, p.kubeConfig)])) as Record<N, ClusterClient>;
  return { plane, client, stop: async () => void (await Promise.all(planes.map((p) => p.stop()))) };
}

/**
 * The part of a relsync config that end-to-end tests share: agent "e2e", `platforms` as the
 * platform clusters (in that order), the service cluster, the store in `dir`.
 */
export function tenantsConfig<P extends string>(clusters: Clusters<P | 'service'>, platforms: readonly P[], dir: string): Record<string, unknown> {
  return {
    agentName: 'e2e',
    platformClusters: platforms.map((name) => ({ name, kubeconfig: clusters.plane[name].kubeconfigPath })),
    serviceCluster: { name: 'service', kubeconfig: clusters.plane.service.kubeconfigPath },
    store: { path: join(dir, 'relsync.db') },
  };
}

/** tenantsConfig of tenant-a and tenant-b. */
export function twoTenantConfig(clusters: Clusters<'tenant-a' | 'tenant-b' | 'service'>, dir: string): Record<string, unknown> {
  return tenantsConfig(clusters, ['tenant-a', 'tenant-b'], dir);
}
