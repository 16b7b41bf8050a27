/** Small helpers for tests that talk to real API servers with client-node. */
import { readFileSync } from 'node:fs';
import { ApiextensionsV1Api, CustomObjectsApi, loadYaml, type KubeConfig, type V1CustomResourceDefinition } from '@kubernetes/client-node';

export const exampleCrdPath = new URL('../../../examples/crd-databases.yaml', import.meta.url);

/** Polls `check` until it returns a truthy value; fails loudly with `what` and the last error. */
export async function eventually<T>(what: string, check: () => Promise<T | undefined | null | false>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await check();
      if (value) return value;
    } catch (err) {
      lastError = err;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const detail = lastError instanceof Error ? `; last error: ${lastError.message}` : '';
  throw new Error(`timed out after ${timeoutMs} ms waiting for: ${what}${detail}`);
}

/** Installs a CRD and waits until it is Established. */
export async function installCrd(kc: KubeConfig, path: URL = exampleCrdPath): Promise<V1CustomResourceDefinition> {
  // loadYaml turns the YAML into client-node's typed model; a plain parse would
  // lose fields such as x-kubernetes-preserve-unknown-fields on the way out.
  const crd = loadYaml<V1CustomResourceDefinition>(readFileSync(path, 'utf8'));
  const api = kc.makeApiClient(ApiextensionsV1Api);
  await api.createCustomResourceDefinition({ body: crd });
  const established = await eventually(`CRD ${crd.metadata?.name} established`, async () => {
    const got = await api.readCustomResourceDefinition({ name: crd.metadata!.name! });
    return got.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True') ? got : undefined;
  });
  // A new CRD answers 429 "storage is (re)initializing" until its watch cache is
  // ready; wait for a LIST to succeed so that tests start from a usable API.
  const objects = kc.makeApiClient(CustomObjectsApi);
  const version = crd.spec.versions[0]!.name;
  await eventually(`LIST of ${crd.spec.names.plural} answers`, async () => {
    await objects.listClusterCustomObject({ group: crd.spec.group, version, plural: crd.spec.names.plural });
    return true;
  });
  return established;
}
