/**
 * What a test does on one cluster, through client-node (independent of the
 * product's own REST client): namespaces, ConfigMaps, Secrets and the example
 * Database custom resource.
 */
import { createHash } from 'node:crypto';
import { CoreV1Api, CustomObjectsApi, type KubeConfig, type V1ConfigMap, type V1Secret } from '@kubernetes/client-node';

export const GROUP = 'demo.relsync.dev';
export const VERSION = 'v1alpha1';
export const PLURAL = 'databases';

export interface Database {
  apiVersion?: string;
  kind?: string;
  metadata: { name: string; namespace?: string; uid?: string; labels?: Record<string, string>; annotations?: Record<string, string>; finalizers?: string[]; deletionTimestamp?: string; resourceVersion?: string; generation?: number };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
}

export function isNotFound(err: unknown): boolean {
  return (err as { code?: number }).code === 404;
}

export class ClusterClient {
  readonly core: CoreV1Api;
  readonly objects: CustomObjectsApi;

  constructor(readonly name: string, kc: KubeConfig) {
    this.core = kc.makeApiClient(CoreV1Api);
    this.objects = kc.makeApiClient(CustomObjectsApi);
  }

  /** `serves`: as a provider that makes a copy namespace itself records whom it serves (relsync's serves annotations). */
  async ensureNamespace(name: string, serves?: { cluster: string; namespace: string }): Promise<void> {
    const annotations = serves && { 'relsync.dev/serves-cluster': serves.cluster, 'relsync.dev/serves-namespace': serves.namespace };
    try {
      await this.core.createNamespace({ body: { metadata: { name, annotations } } });
    } catch (err) {
      if ((err as { code?: number }).code !== 409) throw err;
    }
  }

  async configMap(namespace: string, name: string): Promise<V1ConfigMap | undefined> {
    try {
      return await this.core.readNamespacedConfigMap({ namespace, name });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /** `owner`: the object the ConfigMap belongs to (an ownerReference, as an operator sets on what it makes for a copy). */
  async putConfigMap(namespace: string, name: string, data: Record<string, string>, labels?: Record<string, string>, owner?: Database): Promise<void> {
    const existing = await this.configMap(namespace, name);
    const ownerReferences = owner ? [ownerReference(owner)] : existing?.metadata?.ownerReferences;
    // Labels, when given, replace the existing ones (so a test can take one away).
    if (existing) await this.core.replaceNamespacedConfigMap({ namespace, name, body: { ...existing, metadata: { ...existing.metadata, labels: labels ?? existing.metadata?.labels, ownerReferences }, data } });
    else await this.core.createNamespacedConfigMap({ namespace, body: { metadata: { name, labels, ownerReferences }, data } });
  }

  async deleteConfigMap(namespace: string, name: string): Promise<void> {
    await this.core.deleteNamespacedConfigMap({ namespace, name });
  }

  async secret(namespace: string, name: string): Promise<V1Secret | undefined> {
    try {
      return await this.core.readNamespacedSecret({ namespace, name });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /** `owner`: the object the Secret belongs to (an ownerReference, as an operator sets on what it makes for a copy). */
  async putSecret(namespace: string, name: string, values: Record<string, string>, labels?: Record<string, string>, owner?: Database): Promise<void> {
    const data = Object.fromEntries(Object.entries(values).map(([k, v]) => [k, Buffer.from(v).toString('base64')]));
    const existing = await this.secret(namespace, name);
    const ownerReferences = owner ? [ownerReference(owner)] : existing?.metadata?.ownerReferences;
    if (existing) await this.core.replaceNamespacedSecret({ namespace, name, body: { ...existing, metadata: { ...existing.metadata, labels: labels ?? existing.metadata?.labels, ownerReferences }, data } });
    else await this.core.createNamespacedSecret({ namespace, body: { metadata: { name, labels, ownerReferences }, data } });
  }

  /** The copy `name` in `namespace`, once it exists: what the service cluster's operator owns its objects by. */
  async copyOf(namespace: string, name: string, timeoutMs = 30_000): Promise<Database> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const db = await this.database(namespace, name);
      if (db?.metadata.uid) return db;
      if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for the copy ${namespace}/${name} on ${this.name}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  async deleteSecret(namespace: string, name: string): Promise<void> {
    await this.core.deleteNamespacedSecret({ namespace, name });
  }

  async database(namespace: string, name: string): Promise<Database | undefined> {
    try {
      return (await this.objects.getNamespacedCustomObject({ group: GROUP, version: VERSION, plural: PLURAL, namespace, name })) as Database;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async createDatabase(namespace: string, name: string, spec: Record<string, unknown>, labels?: Record<string, string>): Promise<Database> {
    return (await this.objects.createNamespacedCustomObject({
      group: GROUP, version: VERSION, plural: PLURAL, namespace,
      body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'Database', metadata: { name, labels }, spec },
    })) as Database;
  }

  /** Read-modify-write with retries on conflict. */
  async updateDatabase(namespace: string, name: string, mutate: (db: Database) => void, subresource?: 'status'): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      const db = await this.database(namespace, name);
      if (!db) throw new Error(`database ${namespace}/${name} not found on ${this.name}`);
      mutate(db);
      try {
        const args = { group: GROUP, version: VERSION, plural: PLURAL, namespace, name, body: db };
        if (subresource === 'status') await this.objects.replaceNamespacedCustomObjectStatus(args);
        else await this.objects.replaceNamespacedCustomObject(args);
        return;
      } catch (err) {
        if ((err as { code?: number }).code !== 409 || attempt > 5) throw err;
      }
    }
  }

  async deleteDatabase(namespace: string, name: string): Promise<void> {
    await this.objects.deleteNamespacedCustomObject({ group: GROUP, version: VERSION, plural: PLURAL, namespace, name });
  }

  async events(namespace: string, involvedName: string): Promise<Array<{ reason?: string; message?: string }>> {
    const list = await this.core.listNamespacedEvent({ namespace });
    return list.items.filter((e) => e.involvedObject.name === involvedName);
  }
}

/** An ownerReference to a Database, as controllerutil.SetControllerReference writes it. */
export function ownerReference(owner: Database): { apiVersion: string; kind: string; name: string; uid: string; controller: boolean } {
  return { apiVersion: `${GROUP}/${VERSION}`, kind: 'Database', name: owner.metadata.name, uid: owner.metadata.uid ?? '', controller: true };
}

/** Where the default naming rule puts a tenant namespace's copies. */
export function defaultCopyNamespace(cluster: string, namespace: string): string {
  return `${`${cluster}-${namespace}`.slice(0, 46)}-${createHash('sha256').update(`${cluster}/${namespace}`).digest('hex').slice(0, 16)}`;
}

/** Where the default naming rule before relsync 0.2 (24 bits of hash) put them: namespaces made then keep their copies. */
export function legacyCopyNamespace(cluster: string, namespace: string): string {
  return `${`${cluster}-${namespace}`.slice(0, 56)}-${createHash('sha256').update(`${cluster}/${namespace}`).digest('hex').slice(0, 6)}`;
}

export function decode(secret: V1Secret | undefined, key: string): string | undefined {
  const v = secret?.data?.[key];
  return v === undefined ? undefined : Buffer.from(v, 'base64').toString();
}
