/**
 * All connections of one relsync process, by cluster name: the service
 * cluster, the platform clusters, and, behind each kcp platform, its logical
 * clusters. An identity's `cluster` is one of these names: for a plain
 * Kubernetes platform the configured name, for kcp the logical cluster.
 *
 * A kcp platform's own connection reaches every bound workspace at once
 * (`/clusters/*`, for watches and sweeps); a logical cluster gets its own
 * connection (`/clusters/<name>`, for reads and writes), made on first use
 * over the same agent. Hands out one ResourceClient per (cluster, type):
 * bounded by the config's types times the known clusters, and a forgotten
 * logical cluster's clients go with it.
 */

import { Connection, MAX_PARSED_BYTES, type LimitObserver, type RequestObserver, type WriteFence } from './connection.js';
import { Discovery } from './discovery.js';
import { KcpEndpoint } from './kcp-endpoint.js';
import type { LogicalClusters } from './logical-clusters.js';
import { DryRunClient, type DryRunLedger } from './dry-run-client.js';
import { ResourceClient } from './resource-client.js';
import type { ResourceType, TypeReference } from '../core/resource-type.js';
import { Semaphore } from '../util/semaphore.js';
import type { ByteBudget } from '../util/byte-budget.js';
import type { ClusterConfig } from './cluster-config.js';
import { compositeKey } from '../core/composite-key.js';

/**
 * LIST pages being fetched and parsed at once, per cluster: each may be up to PAGE_MAX_BYTES of
 * text (resource-client.ts). What consumers keep of the pages they were handed is theirs to bound.
 */
const PAGES_IN_FLIGHT = 2;

export interface Cluster {
  readonly name: string;
  readonly role: 'platform' | 'service';
  /** `kcp`: a kcp platform seen across its workspaces; `logical`: one of its workspaces. */
  readonly kind: 'kubernetes' | 'kcp' | 'logical';
  readonly connection: Connection;
  readonly discovery: Discovery;
  /** kcp platforms only. */
  readonly endpoint?: KcpEndpoint;
}

export interface ClusterSetOptions {
  readonly observer?: RequestObserver;
  /** Sees each configured cluster's concurrency limit (a kcp platform's workspaces share their platform's). */
  readonly limitObserver?: LimitObserver;
  /** The logical clusters of kcp platforms; required when a platform is kcp. */
  readonly logicalClusters?: LogicalClusters;
  /** A dry run: the connections only read, and the clients record what they would write here (dry-run-client.ts). */
  readonly dryRun?: DryRunLedger;
  /** limits.listPages: the pages one LIST may take; default DEFAULT_LIST_PAGES (resource-client.ts). */
  readonly listPages?: number;
  /** limits.parsedBytes: the most heap one answer or watch event may take once parsed; default MAX_PARSED_BYTES (connection.ts). */
  readonly maxParsedBytes?: number;
  /** limits.parsedBytesInFlight: what LIST pages and watch events being parsed and handed on take together, over every cluster; default: no bound. */
  readonly parseBudget?: ByteBudget;
}

export class ClusterSet {
  readonly service: Cluster;
  readonly platforms: readonly Cluster[];
  private readonly byName = new Map<string, Cluster>();
  private readonly logical = new Map<string, Cluster>();
  private readonly clients = new Map<string, ResourceClient>();
  private readonly eventClients = new Map<string, ResourceClient>();
  /**
   * LIST pages in flight at once, per cluster (a kcp platform's workspaces share their
   * platform's): a cluster that stalls holds only its own (resource-client.ts).
   */
  private readonly pageSlots = new Map<string, Semaphore>();
  private readonly logicalClusters: LogicalClusters | undefined;

  private readonly dryRun: DryRunLedger | undefined;
  private readonly listPages: number | undefined;
  /** limits.parsedBytes, as every connection of the set has it: for the watches' lines. */
  readonly maxParsedBytes: number;
  /** limits.parsedBytesInFlight, shared by every connection of the set and the watches' lines. */
  readonly parseBudget: ByteBudget | undefined;

  constructor(service: ClusterConfig, platforms: readonly ClusterConfig[], options: ClusterSetOptions = {}) {
    this.logicalClusters = options.logicalClusters;
    this.dryRun = options.dryRun;
    this.listPages = options.listPages;
    this.maxParsedBytes = options.maxParsedBytes ?? MAX_PARSED_BYTES;
    this.parseBudget = options.parseBudget;
    const make = (c: ClusterConfig, role: Cluster['role']): Cluster => {
      const connection = new Connection({ name: c.name, kubeconfig: c.kubeconfig, context: c.context, maxParsedBytes: this.maxParsedBytes, ...(options.parseBudget ? { parseBudget: options.parseBudget } : {}) });
      if (options.dryRun) connection.makeReadOnly();
      connection.observer = options.observer;
      connection.limitObserver = options.limitObserver;
      let cluster: Cluster;
      if (c.kcp) {
        if (!this.logicalClusters) throw new Error(`cluster ${c.name}: a kcp platform needs the store's logical clusters`);
        const endpoint = new KcpEndpoint(connection, c.kcp);
        const wildcard = connection.derive(c.name, () => endpoint.wildcard());
        cluster = { name: c.name, role, kind: 'kcp', connection: wildcard, discovery: new Discovery(wildcard), endpoint };
      } else {
        cluster = { name: c.name, role, kind: 'kubernetes', connection, discovery: new Discovery(connection) };
      }
      this.byName.set(c.name, cluster);
      return cluster;
    };
    this.service = make(service, 'service');
    this.platforms = platforms.map((p) => make(p, 'platform'));
  }

  get(name: string): Cluster {
    const c = this.byName.get(name) ?? this.logicalCluster(name);
    if (!c) throw new Error(`unknown cluster "${name}"`);
    return c;
  }

  has(name: string): boolean {
    return this.byName.has(name) || this.logicalClusters?.platformOf(name) !== undefined;
  }

  /** A name from the config (service, platform, kcp platform), never a logical cluster's. */
  isConfigured(name: string): boolean {
    return this.byName.has(name);
  }

  /** True for a platform cluster's name and for a known logical cluster (never for a kcp platform's own, wildcard, name). */
  isPlatform(name: string): boolean {
    const c = this.byName.get(name);
    if (c) return c.role === 'platform' && c.kind === 'kubernetes';
    return this.logicalClusters?.platformOf(name) !== undefined;
  }

  /** A logical cluster whose APIBinding is gone: nothing can be read or written there any more. */
  isUnbound(name: string): boolean {
    return this.logicalClusters?.isUnbound(name) ?? false;
  }

  /** The configured cluster whose watches see `cluster`: a logical cluster's kcp platform, else itself. */
  platformOf(cluster: string): string {
    return this.logicalClusters?.platformOf(cluster) ?? cluster;
  }

  /** The name metrics use: a logical cluster counts under its kcp platform (one label value per workspace would not scale). */
  metricsName(cluster: string): string {
    return this.platformOf(cluster);
  }

  client(cluster: string, type: ResourceType): ResourceClient {
    const key = compositeKey(cluster, type.group, type.version, type.resource);
    let client = this.clients.get(key);
    if (!client) {
      const connection = this.get(cluster).connection;
      let slots = this.pageSlots.get(connection.metricsName);
      if (!slots) this.pageSlots.set(connection.metricsName, (slots = new Semaphore(PAGES_IN_FLIGHT)));
      client = this.dryRun ? new DryRunClient(connection, type, slots, this.dryRun, cluster, this.listPages) : new ResourceClient(connection, type, slots, this.listPages);
      this.clients.set(key, client);
    }
    return client;
  }

  /**
   * A client whose writes the write fence does not hold back (Connection.unfenced): for Events
   * only, which a term that ended may still write. In a dry run, the dry-run client.
   */
  eventsClient(cluster: string, type: ResourceType): ResourceClient {
    if (this.dryRun) return this.client(cluster, type);
    const key = compositeKey(cluster, type.group, type.version, type.resource);
    let client = this.eventClients.get(key);
    if (!client) {
      client = new ResourceClient(this.get(cluster).connection.unfenced(), type, undefined, this.listPages);
      this.eventClients.set(key, client);
    }
    return client;
  }

  resolve(cluster: string, ref: TypeReference): Promise<ResourceType> {
    return this.get(cluster).discovery.resolve(ref);
  }

  /** The versions of an API group a cluster serves, its preferred one first. */
  servedVersions(cluster: string, group: string): Promise<string[]> {
    return this.get(cluster).discovery.servedVersions(group);
  }

  /** Forgets an unbound logical cluster once nothing of it is left in the store: its row, connection and clients. */
  async forgetLogical(name: string): Promise<void> {
    await this.logicalClusters?.forget(name);
    this.logical.delete(name);
    for (const key of this.clients.keys()) if (key.startsWith(compositeKey(name, ''))) this.clients.delete(key);
    for (const key of this.eventClients.keys()) if (key.startsWith(compositeKey(name, ''))) this.eventClients.delete(key);
  }

  /** Every connection's writes from now on ask `fence` first (Connection.setWriteFence): a term's, while it holds its Lease. */
  setWriteFence(fence: WriteFence): void {
    for (const c of this.byName.values()) c.connection.setWriteFence(fence);
  }

  close(): void {
    for (const c of this.byName.values()) c.connection.close();
  }

  /**
   * A client for one logical cluster through a given kcp platform, whichever the registry records
   * it under (not kept): to ask a URL of a platform's endpoint slice whether a workspace is served there.
   */
  clientThrough(platform: string, name: string, type: ResourceType): ResourceClient | undefined {
    const parent = this.byName.get(platform);
    if (!parent?.endpoint) return undefined;
    const endpoint = parent.endpoint;
    return new ResourceClient(parent.connection.derive(`${parent.name}/${name}`, () => endpoint.logicalCluster(name)), type, undefined, this.listPages);
  }

  private logicalCluster(name: string): Cluster | undefined {
    const known = this.logical.get(name);
    if (known) return known;
    const platform = this.logicalClusters?.platformOf(name);
    const parent = platform === undefined ? undefined : this.byName.get(platform);
    if (!parent?.endpoint) return undefined;
    const endpoint = parent.endpoint;
    const connection = parent.connection.derive(`${parent.name}/${name}`, () => endpoint.logicalCluster(name));
    const cluster: Cluster = { name, role: 'platform', kind: 'logical', connection, discovery: parent.discovery };
    this.logical.set(name, cluster);
    return cluster;
  }
}
