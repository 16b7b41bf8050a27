/**
 * Which shard each unit of work belongs to, with `sharding.shards` > 1. A
 * unit is a platform cluster: a configured Kubernetes platform, or on kcp a
 * logical cluster (kcp platforms themselves are in every shard, each shard
 * serving the logical clusters that fall in it).
 *
 * Configured clusters are dealt round-robin in the order of their names, so
 * that six clusters over three shards give two each; a logical cluster, whose
 * name kcp chooses, goes by a hash of its name. Every replica computes the
 * same map from the same config; `fingerprint` names the map, so that
 * replicas of two configs that map differently (a rollout that changes the
 * shards or the clusters) never work side by side (shard-coordinator.ts).
 */
import { createHash } from 'node:crypto';
import type { ClusterConfig } from '../kube/cluster-config.js';
import type { Config } from './config.js';

export class ShardMap {
  readonly shards: number;
  readonly fingerprint: string;
  private readonly configured = new Map<string, number>();

  constructor(shards: number, platformClusters: readonly ClusterConfig[]) {
    this.shards = shards;
    const plain = platformClusters.filter((c) => !c.kcp).map((c) => c.name).sort();
    plain.forEach((name, i) => this.configured.set(name, i % shards));
    const kcp = platformClusters.filter((c) => c.kcp).map((c) => c.name).sort();
    // v1: the scheme itself; any change to how units map must change the fingerprint.
    const described = JSON.stringify({ scheme: 'v1 round-robin by name; logical clusters sha256 mod shards', shards, plain, kcp });
    this.fingerprint = createHash('sha256').update(described).digest('hex').slice(0, 10);
  }

  static of(config: Pick<Config, 'sharding' | 'platformClusters'>): ShardMap {
    return new ShardMap(config.sharding.shards, config.platformClusters);
  }

  /** The shard of a configured Kubernetes platform, or of a kcp logical cluster by its name. */
  shardOf(unit: string): number {
    return this.configured.get(unit) ?? hashShard(unit, this.shards);
  }

  /** The platform clusters a shard's wiring is configured with: its Kubernetes platforms, and every kcp platform. */
  platformsOf(shard: number, platformClusters: readonly ClusterConfig[]): ClusterConfig[] {
    return platformClusters.filter((c) => c.kcp !== undefined || this.configured.get(c.name) === shard);
  }

  /** The units of a shard that the config names (its Kubernetes platforms), for logs and status. */
  configuredIn(shard: number): string[] {
    return [...this.configured].filter(([, s]) => s === shard).map(([name]) => name);
  }
}

function hashShard(name: string, shards: number): number {
  return createHash('sha256').update(name).digest().readUInt32BE(0) % shards;
}
