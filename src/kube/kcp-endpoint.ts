/**
 * Where a kcp platform's objects are served: the APIExport's virtual
 * workspace. Under it, `/clusters/*` lists and watches across every
 * workspace that binds the export (each object annotated with its logical
 * cluster, `kcp.io/cluster`), and `/clusters/<logical cluster>` reads and
 * writes in one of them.
 *
 * The URL comes from the config or from the APIExportEndpointSlice in the
 * kubeconfig's (the provider's) workspace, which kcp fills in once a
 * workspace binds the export: one URL per kcp shard that serves such a
 * workspace, each serving only the workspaces on its shard. A slice of
 * several URLs is served as one platform per URL (controller/kcp-workspaces.ts
 * expands it, endpointSliceUrls() here reads it); a KcpEndpoint then has its
 * one URL from the start.
 */
import { isNotFound, isObjectNotFound } from './api-error.js';
import type { Connection } from './connection.js';

/** The annotation kcp puts on every object it serves from a wildcard request. */
export const LOGICAL_CLUSTER_ANNOTATION = 'kcp.io/cluster';

/** The endpoint slice exists but shows no URL yet. */
export class EndpointPendingError extends Error {
  override name = 'EndpointPendingError';
}

interface EndpointSlice {
  status?: { endpoints?: Array<{ url?: string }> };
}

/** A permission claim of an APIExport (apis.kcp.io/v1alpha2). */
export interface ExportClaim {
  readonly group?: string;
  readonly resource?: string;
  readonly identityHash?: string;
}

export class KcpEndpoint {
  private url: string | undefined;

  constructor(
    /** The connection to the provider's workspace (the kubeconfig's server). */
    private readonly provider: Connection,
    private readonly source: { readonly endpointSlice: string | undefined; readonly url: string | undefined },
  ) {
    this.url = source.url;
  }

  /** The URL served, when known (given, or read once). */
  get knownUrl(): string | undefined {
    return this.url;
  }

  async resolve(): Promise<string> {
    if (this.url) return this.url;
    const name = this.source.endpointSlice!;
    let slice: EndpointSlice;
    try {
      slice = await this.provider.request<EndpointSlice>('GET', `/apis/apis.kcp.io/v1alpha1/apiexportendpointslices/${encodeURIComponent(name)}`);
    } catch (err) {
      if (isNotFound(err)) throw new Error(`cluster ${this.provider.name}: no APIExportEndpointSlice "${name}" in the kubeconfig's workspace (kcp.apiExportEndpointSlice)`, { cause: err });
      throw err;
    }
    const urls = endpointUrlsOf(this.provider.name, name, slice);
    // Each shard serves only its own workspaces, and which one is listed first
    // can change: serving "the first" would make workspaces look unbound.
    if (urls.length > 1) throw new Error(`cluster ${this.provider.name}: APIExportEndpointSlice "${name}" lists ${urls.length} shards; serve it expanded, one platform per URL (controller/kcp-workspaces.ts)`);
    this.url = urls[0]!;
    return this.url;
  }

  /**
   * The export's permission claims, read from the APIExport in the kubeconfig's workspace (named
   * by the virtual workspace URL's last segment, `/services/apiexport/<cluster>/<export>`). Needs
   * `get` on it, which relsync asks for only to check a rule's identityHash.
   */
  async permissionClaims(): Promise<ExportClaim[]> {
    const [cluster, name] = new URL(await this.resolve()).pathname.split('/').filter(Boolean).slice(-2).map(decodeURIComponent) as [string, string];
    let apiExport: { metadata?: { annotations?: Record<string, string> }; spec?: { permissionClaims?: ExportClaim[] } };
    try {
      apiExport = await this.provider.request('GET', `/apis/apis.kcp.io/v1alpha2/apiexports/${encodeURIComponent(name)}`);
    } catch (err) {
      if (isObjectNotFound(err, name)) throw new Error(`cluster ${this.provider.name}: no APIExport "${name}" in the kubeconfig's workspace, whose claims relsync must read (the kubeconfig must point at the export's workspace)`, { cause: err });
      throw err;
    }
    // An endpoint slice may name an export of another workspace: one of the same name here is not it.
    const here = apiExport.metadata?.annotations?.[LOGICAL_CLUSTER_ANNOTATION];
    if (here !== cluster) throw new Error(`cluster ${this.provider.name}: the APIExport "${name}" served at ${cluster} is not the one in the kubeconfig's workspace (${here ?? 'unknown'}); point the kubeconfig at the export's workspace`);
    return apiExport.spec?.permissionClaims ?? [];
  }

  /** The base for requests across all bound workspaces. */
  async wildcard(): Promise<string> {
    return `${await this.resolve()}/clusters/*`;
  }

  /** The base for requests in one logical cluster. */
  async logicalCluster(name: string): Promise<string> {
    return `${await this.resolve()}/clusters/${encodeURIComponent(name)}`;
  }
}

/**
 * The virtual workspace URLs an APIExportEndpointSlice in the provider's workspace lists, sorted
 * and without trailing slashes; EndpointPendingError while it lists none.
 */
export async function endpointSliceUrls(provider: Connection, name: string): Promise<string[]> {
  let slice: EndpointSlice;
  try {
    slice = await provider.request<EndpointSlice>('GET', `/apis/apis.kcp.io/v1alpha1/apiexportendpointslices/${encodeURIComponent(name)}`);
  } catch (err) {
    if (isNotFound(err)) throw new Error(`cluster ${provider.name}: no APIExportEndpointSlice "${name}" in the kubeconfig's workspace (kcp.apiExportEndpointSlice)`, { cause: err });
    throw err;
  }
  return endpointUrlsOf(provider.name, name, slice);
}

function endpointUrlsOf(cluster: string, name: string, slice: EndpointSlice): string[] {
  const urls = [...new Set((slice.status?.endpoints ?? []).flatMap((e) => (e.url ? [e.url.replace(/\/+$/, '')] : [])))].sort();
  if (urls.length === 0) throw new EndpointPendingError(`cluster ${cluster}: APIExportEndpointSlice "${name}" lists no endpoint yet (kcp adds one once a workspace binds the export)`);
  const plain = urls.find((u) => !u.startsWith('https://'));
  if (plain) throw new Error(`cluster ${cluster}: APIExportEndpointSlice "${name}" lists ${plain}, not an https URL`);
  return urls;
}

/**
 * The platform that serves one URL of a kcp platform's endpoint slice: the configured name when
 * the slice lists one URL (as before slices of several were served), else `<name>@<host>` (a
 * configured name is a DNS label: never one with "@"), numbered when two URLs share a host.
 */
export function endpointPlatformNames(platform: string, urls: readonly string[]): string[] {
  if (urls.length === 1) return [platform];
  const hosts = urls.map((u) => new URL(u).host);
  return hosts.map((h, i) => (hosts.indexOf(h) === hosts.lastIndexOf(h) ? `${platform}@${h}` : `${platform}@${h}#${hosts.slice(0, i + 1).filter((x) => x === h).length}`));
}

/** The configured kcp platform a platform serving one URL belongs to: the name before "@". */
export function configuredPlatformOf(platform: string): string {
  const at = platform.indexOf('@');
  return at < 0 ? platform : platform.slice(0, at);
}
