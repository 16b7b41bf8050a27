/**
 * The kcp logical clusters relsync knows, each with the platform connection
 * that reaches it: loaded from the store at start (so that pending work of
 * the last run can be reconciled before any watch event), added when a watch
 * first shows an object of a new workspace, marked unbound when its
 * APIBinding goes, and forgotten once nothing of it is left in the store.
 * Bounded by the workspaces bound to the export.
 */
import type { LogicalClusterRecord } from '../core/logical-cluster.js';
import { configuredPlatformOf } from './kcp-endpoint.js';

/** Where the registry keeps its records (the store's logical_clusters table; the controller wires it). */
export interface LogicalClusterStorage {
  all(): Promise<LogicalClusterRecord[]>;
  save(record: LogicalClusterRecord): Promise<void>;
  delete(name: string): Promise<void>;
}

export class LogicalClusters {
  private readonly byName = new Map<string, LogicalClusterRecord>();

  private constructor(
    private readonly store: LogicalClusterStorage | undefined,
    private readonly owns: (name: string) => boolean,
  ) {}

  /**
   * `owns`: the logical clusters this process serves (a shard's, controller/shard-coordinator.ts);
   * any other is never known here, so nothing of it is routed, stored, reconciled or swept.
   */
  static async load(store: LogicalClusterStorage | undefined, owns: (name: string) => boolean = () => true): Promise<LogicalClusters> {
    const registry = new LogicalClusters(store, owns);
    for (const record of (await store?.all()) ?? []) if (owns(record.name)) registry.byName.set(record.name, record);
    return registry;
  }

  platformOf(name: string): string | undefined {
    return this.byName.get(name)?.platform;
  }

  isUnbound(name: string): boolean {
    return this.byName.get(name)?.state === 'unbound';
  }

  /** Every logical cluster reached through `platform`, bound or not. */
  of(platform: string): string[] {
    return [...this.byName.values()].filter((r) => r.platform === platform).map((r) => r.name);
  }

  records(): LogicalClusterRecord[] {
    return [...this.byName.values()];
  }

  /**
   * A logical cluster seen bound through `platform`: 'new', 'rebound', or undefined when nothing
   * changed. Never takes one over from another configured platform; within one (the URLs of its
   * endpoint slice, kcp-endpoint.ts), it follows the URL that serves it now.
   */
  async bound(name: string, platform: string): Promise<'new' | 'rebound' | undefined> {
    if (!this.owns(name)) return undefined;
    const known = this.byName.get(name);
    if (known && known.platform !== platform && configuredPlatformOf(known.platform) === configuredPlatformOf(platform)) {
      const moved: LogicalClusterRecord = { name, platform, state: 'bound' };
      await this.store?.save(moved);
      this.byName.set(name, moved);
      return known.state === 'unbound' ? 'rebound' : undefined;
    }
    if (known && (known.platform !== platform || known.state === 'bound')) return undefined;
    const record: LogicalClusterRecord = { name, platform, state: 'bound' };
    await this.store?.save(record);
    this.byName.set(name, record);
    return known ? 'rebound' : 'new';
  }

  /** True when this marked a bound logical cluster of `platform` unbound. */
  async unbound(name: string, platform: string): Promise<boolean> {
    const known = this.byName.get(name);
    if (!known || known.platform !== platform || known.state === 'unbound') return false;
    const record: LogicalClusterRecord = { ...known, state: 'unbound' };
    await this.store?.save(record);
    this.byName.set(name, record);
    return true;
  }

  async forget(name: string): Promise<void> {
    await this.store?.delete(name);
    this.byName.delete(name);
  }
}
