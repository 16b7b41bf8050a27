/**
 * The objects relsync's own watches delivered, so that a reconcile reads
 * them instead of asking the API server again (a related change used to cost
 * a GET of the primary, its copy and both ends of every relation).
 *
 * What it holds: the latest version each watch delivered of the objects that
 * concern relsync — primaries and objects routed to a primary (related sources,
 * copies). Only watch events fill it, in their order, so an entry is never
 * older than the last event of its object: an event of an object that
 * concerns nobody removes it, a deletion removes it, a relist drops its type
 * first (what was deleted while nobody watched must not be read back), a kcp
 * workspace that unbinds or is listed again drops its objects, a sweep clears
 * it, and relsync's own write removes the object until the write's event
 * arrives. A GET's answer is never kept: it could be older than an event
 * still on its way.
 *
 * What it does not hold: anything over its byte budget (the least recently
 * used entries go first), and objects no event has shown to concern relsync
 * (say a ConfigMap made before the primary that names it, until it changes).
 * Both are read from the API server: a miss costs a GET, never a wrong
 * answer. That an object is absent is always a live answer, and a reconcile
 * that read from the cache and is about to delete anything starts over
 * reading live (object-reads.ts's ReadAgainLive).
 */
import { compositeKey } from '../core/composite-key.js';
import type { ObjectIdentity } from '../core/identity.js';
import type { KubeObject } from '../core/object.js';
import type { ResourceType } from '../core/resource-type.js';
import { approximateHeapBytes } from '../util/heap-size.js';
import type { ListQuery, ObjectReads } from './object-reads.js';

/** What the watches tell the cache: an object's latest version, or that it no longer concerns relsync (or is gone). */
export interface ObjectCacheFeed {
  observe(id: ObjectIdentity, object: KubeObject | undefined): void;
  dropCluster(cluster: string): void;
  clear(): void;
  /**
   * A watch's LIST of this type begins: what the cache holds of the type may have been deleted
   * while nobody watched. Unfiltered (no label selector), every later change of an object of the
   * type in that cluster reaches the cache, so a GET's answer may be kept for it.
   */
  listed(cluster: string, type: Pick<ResourceType, 'group' | 'resource'>, labelSelector: string | undefined): void;
}

export interface CacheStats {
  readonly entries: number;
  readonly bytes: number;
  readonly hits: number;
  readonly misses: number;
}

export class ObjectCache implements ObjectCacheFeed {
  /** In use order: the first entry is the least recently used. */
  private readonly entries = new Map<string, { readonly object: KubeObject; readonly bytes: number; readonly type: string }>();
  private size = 0;
  private hitCount = 0;
  private missCount = 0;

  constructor(private readonly maxBytes: number) {}

  observe(id: ObjectIdentity, object: KubeObject | undefined): void {
    const key = keyOf(id.cluster, id, id.namespace, id.name);
    this.remove(key);
    if (object) this.keep(key, typeOf(id), object);
  }

  /** Of every cluster: a kcp watch lists all its workspaces at once, and a miss only costs a GET. */
  listed(_cluster: string, type: Pick<ResourceType, 'group' | 'resource'>, _labelSelector: string | undefined): void {
    const t = typeOf(type);
    for (const [key, entry] of this.entries) if (entry.type === t) this.remove(key);
  }

  /** Forgets a cluster's objects (a kcp workspace that unbound, or is listed again after it bound again). */
  dropCluster(cluster: string): void {
    // The cluster and the separator after it: "a" never drops "ab"'s objects.
    const prefix = compositeKey(cluster, '');
    for (const key of [...this.entries.keys()]) if (key.startsWith(prefix)) this.remove(key);
  }

  /** Everything: a sweep is the level-based safety net, for the cache too. */
  clear(): void {
    this.entries.clear();
    this.size = 0;
  }

  private keep(key: string, type: string, object: KubeObject): void {
    const bytes = approximateHeapBytes(object);
    // One object over the whole budget would only push everything else out.
    if (bytes > this.maxBytes) return;
    this.entries.set(key, { object, bytes, type });
    this.size += bytes;
    for (const [oldest] of this.entries) {
      if (this.size <= this.maxBytes) break;
      this.remove(oldest);
    }
  }

  /** A copy of the cached object (callers may change what they read), or undefined on a miss. */
  get(cluster: string, type: Pick<ResourceType, 'group' | 'resource'>, namespace: string, name: string): KubeObject | undefined {
    const key = keyOf(cluster, type, namespace, name);
    const entry = this.entries.get(key);
    if (!entry) {
      this.missCount++;
      return undefined;
    }
    this.hitCount++;
    this.entries.delete(key);
    this.entries.set(key, entry);
    return structuredClone(entry.object);
  }

  stats(): CacheStats {
    return { entries: this.entries.size, bytes: this.size, hits: this.hitCount, misses: this.missCount };
  }

  private remove(key: string): void {
    const entry = this.entries.get(key);
    if (!entry) return;
    this.entries.delete(key);
    this.size -= entry.bytes;
  }
}

/** Reads from the cache, and from `live` what it does not hold; lists are always live. */
export class CachedReads implements ObjectReads {
  constructor(
    private readonly cache: ObjectCache,
    private readonly live: ObjectReads,
  ) {}

  readonly cached = true;

  async get(cluster: string, type: ResourceType, namespace: string, name: string): Promise<KubeObject | undefined> {
    return this.cache.get(cluster, type, type.namespaced ? namespace : '', name) ?? this.live.get(cluster, type, namespace, name);
  }

  list(cluster: string, type: ResourceType, query: ListQuery): Promise<KubeObject[]> {
    return this.live.list(cluster, type, query);
  }
}

function keyOf(cluster: string, type: Pick<ResourceType, 'group' | 'resource'>, namespace: string, name: string): string {
  return compositeKey(cluster, type.group, type.resource, namespace, name);
}

function typeOf(type: Pick<ResourceType, 'group' | 'resource'>): string {
  return compositeKey(type.group, type.resource);
}
