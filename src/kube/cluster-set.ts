/**
 * All connections of one relsync process, by cluster name: the platform
 * clusters and the service cluster. Hands out one ResourceClient per
 * (cluster, type); the set of types is fixed by the config, so this is bounded.
 */
import type { ClusterConfig } from '../config/config.js';
import { Connection, type RequestObserver } from './connection.js';
import { Discovery, type TypeReference } from './discovery.js';
import { ResourceClient } from './resource-client.js';
import type { ResourceType } from './resource-type.js';

export interface Cluster {
  readonly name: string;
  readonly role: 'platform' | 'service';
  readonly connection: Connection;
  readonly discovery: Discovery;
}

export class ClusterSet {
  readonly service: Cluster;
  readonly platforms: readonly Cluster[];
  private readonly byName = new Map<string, Cluster>();
  private readonly clients = new Map<string, ResourceClient>();

  constructor(service: ClusterConfig, platforms: readonly ClusterConfig[], observer?: RequestObserver) {
    const make = (c: ClusterConfig, role: Cluster['role']): Cluster => {
      const connection = new Connection({ name: c.name, kubeconfig: c.kubeconfig, context: c.context });
      connection.observer = observer;
      const cluster = { name: c.name, role, connection, discovery: new Discovery(connection) };
      this.byName.set(c.name, cluster);
      return cluster;
    };
    this.service = make(service, 'service');
    this.platforms = platforms.map((p) => make(p, 'platform'));
  }

  get(name: string): Cluster {
    const c = this.byName.get(name);
    if (!c) throw new Error(`unknown cluster "${name}"`);
    return c;
  }

  has(name: string): boolean {
    return this.byName.has(name);
  }

  client(cluster: string, type: ResourceType): ResourceClient {
    const key = `${cluster}\u0000${type.group}\u0000${type.version}\u0000${type.resource}`;
    let client = this.clients.get(key);
    if (!client) {
      client = new ResourceClient(this.get(cluster).connection, type);
      this.clients.set(key, client);
    }
    return client;
  }

  resolve(cluster: string, ref: TypeReference): Promise<ResourceType> {
    return this.get(cluster).discovery.resolve(ref);
  }

  close(): void {
    for (const c of this.byName.values()) c.connection.close();
  }
}
