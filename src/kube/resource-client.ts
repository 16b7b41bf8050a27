/**
 * A dynamic client for one resource type on one cluster: paths by
 * group/version/resource, JSON in and out, 404 on GET as `undefined`.
 */
import type { Connection, RequestOptions } from './connection.js';
import type { KubeObject, ObjectList } from './object.js';
import { apiVersionOf, type ResourceType } from './resource-type.js';
import { isNotFound, isObjectNotFound } from './api-error.js';

export interface ListOptions {
  readonly namespace?: string | undefined;
  readonly labelSelector?: string | undefined;
  readonly limit?: number;
  readonly continueToken?: string | undefined;
  readonly resourceVersion?: string | undefined;
}

export class ResourceClient {
  constructor(
    readonly connection: Connection,
    readonly type: ResourceType,
  ) {}

  path(namespace?: string, name?: string, subresource?: string): string {
    const { group, version, resource, namespaced } = this.type;
    let p = group ? `/apis/${group}/${version}` : `/api/${version}`;
    if (namespaced && namespace) p += `/namespaces/${encodeURIComponent(namespace)}`;
    p += `/${resource}`;
    if (name) p += `/${encodeURIComponent(name)}`;
    if (subresource) p += `/${subresource}`;
    return p;
  }

  async get(namespace: string, name: string): Promise<KubeObject | undefined> {
    try {
      return this.withType(await this.connection.request<KubeObject>('GET', this.path(namespace, name)));
    } catch (err) {
      if (isObjectNotFound(err, name)) return undefined;
      throw err;
    }
  }

  /**
   * One page of a LIST; items get the `kind`/`apiVersion` that LIST leaves
   * out, and lose their managedFields, which relsync never reads and which
   * are most of a listed object's size (a PUT without them keeps the
   * server's).
   */
  async listPage(options: ListOptions = {}): Promise<ObjectList> {
    const list = await this.connection.request<ObjectList>('GET', this.path(options.namespace), {
      query: {
        labelSelector: options.labelSelector,
        limit: options.limit,
        continue: options.continueToken,
        resourceVersion: options.continueToken ? undefined : options.resourceVersion,
      },
    });
    list.items = (list.items ?? []).map((o) => {
      delete o.metadata.managedFields;
      return this.withType(o);
    });
    return list;
  }

  /** Every object, in pages of `limit` (default 500). */
  async listAll(options: Omit<ListOptions, 'continueToken'> = {}): Promise<{ items: KubeObject[]; resourceVersion: string }> {
    const items: KubeObject[] = [];
    let continueToken: string | undefined;
    let resourceVersion = '';
    do {
      const page = await this.listPage({ limit: 500, ...options, continueToken });
      items.push(...page.items);
      resourceVersion = page.metadata.resourceVersion ?? resourceVersion;
      continueToken = page.metadata.continue || undefined;
    } while (continueToken);
    return { items, resourceVersion };
  }

  async create(namespace: string, object: KubeObject): Promise<KubeObject> {
    return this.connection.request<KubeObject>('POST', this.path(namespace), { body: this.withType(object) });
  }

  /** PUT with the object's resourceVersion: a concurrent change answers 409. */
  async replace(object: KubeObject): Promise<KubeObject> {
    const { namespace, name } = object.metadata;
    return this.connection.request<KubeObject>('PUT', this.path(namespace, name), { body: this.withType(object) });
  }

  async replaceStatus(object: KubeObject): Promise<KubeObject> {
    const { namespace, name } = object.metadata;
    return this.connection.request<KubeObject>('PUT', this.path(namespace, name, 'status'), { body: this.withType(object) });
  }

  async mergePatch(namespace: string, name: string, patch: unknown): Promise<KubeObject> {
    const options: RequestOptions = { body: patch, contentType: 'application/merge-patch+json' };
    return this.connection.request<KubeObject>('PATCH', this.path(namespace, name), options);
  }

  /** Deletes; a missing object is not an error. `uid` makes it a precondition. */
  async delete(namespace: string, name: string, uid?: string): Promise<void> {
    try {
      await this.connection.request('DELETE', this.path(namespace, name), {
        body: uid ? { kind: 'DeleteOptions', apiVersion: 'v1', preconditions: { uid } } : undefined,
      });
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }

  private withType(object: KubeObject): KubeObject {
    object.apiVersion ??= apiVersionOf(this.type);
    object.kind ??= this.type.kind;
    return object;
  }
}
