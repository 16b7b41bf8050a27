/**
 * Resolves a configured type (group plus resource or kind, version optional)
 * to a ResourceType through the API server's discovery documents. Results are
 * kept per group/version; relsync only asks for the few types it is
 * configured with, so this memo is bounded by the config.
 */
import { isNotFound } from './api-error.js';
import type { Connection } from './connection.js';
import type { ResourceType, TypeReference } from '../core/resource-type.js';

interface ApiResourceList {
  resources: Array<{ name: string; kind: string; namespaced: boolean; verbs?: string[] }>;
}

/** The API server serves no such type at that version (not an outage: the answer was read). */
export class TypeNotServedError extends Error {
  override name = 'TypeNotServedError';
}

export class Discovery {
  private readonly lists = new Map<string, Promise<ApiResourceList>>();

  constructor(private readonly connection: Connection) {}

  async resolve(ref: TypeReference): Promise<ResourceType> {
    const version = ref.version ?? (await this.preferredVersion(ref.group));
    const list = await this.resources(ref.group, version);
    const found = list.resources.find((r) =>
      !r.name.includes('/') && (ref.resource ? r.name === ref.resource : r.kind === ref.kind),
    );
    if (!found) {
      const wanted = ref.resource ? `resource "${ref.resource}"` : `kind "${ref.kind}"`;
      const available = list.resources.filter((r) => !r.name.includes('/')).map((r) => r.name).join(', ');
      throw new TypeNotServedError(`cluster ${this.connection.name}: ${wanted} not found in ${ref.group || 'core'}/${version} (served: ${available || 'none'})`);
    }
    return { group: ref.group, version, resource: found.name, kind: found.kind, namespaced: found.namespaced };
  }

  /** The versions of a group this API server serves, its preferred one first; none for a group it does not serve. */
  async servedVersions(group: string): Promise<string[]> {
    if (!group) return ['v1'];
    let doc: { preferredVersion?: { version: string }; versions?: Array<{ version: string }> };
    try {
      doc = await this.connection.request('GET', `/apis/${group}`);
    } catch (err) {
      if (isNotFound(err)) return [];
      throw new Error(`cluster ${this.connection.name}: reading the versions of API group ${group}: ${(err as Error).message}`, { cause: err });
    }
    const served = (doc.versions ?? []).map((v) => v.version);
    const preferred = doc.preferredVersion?.version;
    return preferred !== undefined && served.includes(preferred) ? [preferred, ...served.filter((v) => v !== preferred)] : served;
  }

  private async preferredVersion(group: string): Promise<string> {
    const [preferred] = await this.servedVersions(group);
    if (preferred === undefined) throw new TypeNotServedError(`cluster ${this.connection.name}: API group ${group} is not served`);
    return preferred;
  }

  private resources(group: string, version: string): Promise<ApiResourceList> {
    const key = `${group}/${version}`;
    let list = this.lists.get(key);
    if (!list) {
      list = this.connection.request<ApiResourceList>('GET', group ? `/apis/${group}/${version}` : `/api/${version}`);
      list.catch(() => this.lists.delete(key));
      this.lists.set(key, list);
    }
    return list;
  }
}
