/**
 * The usual start of an end-to-end test: control planes side by side, the
 * example Database CRD installed on each, and a ClusterClient for each, by name.
 */
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
