/**
 * The objects relsync's own watches delivered, so that a reconcile reads
 * them instead of asking the API server again (a related change used to cost
 * a GET of the primary, its copy and both ends of every relation).
 *
 * What it holds: the latest version each watch delivered of the objects that
 * concern relsync — primaries, relsync's copies, and objects routed to a
 * primary (related sources and copies) — and what a reconcile had to GET (an
 * object that came to concern relsync after its last event, say a ConfigMap
 * made before the primary that names it). An event of an object that concerns
 * nobody removes it, so an entry is never older than the last event of its
 * object; a relist drops its type first (what was deleted while nobody
 * watched must not be read back); a deletion removes it. A GET's answer is
 * kept only if no event of that object (nor a relist of its type) came while
 * it was asked: otherwise it may be older than what the watch said since.
 *
 * What it does not hold: anything over its byte budget (the least recently
 * used entries go first), and objects no watch has delivered. Both are read
 * from the API server: a miss costs a GET, never a wrong answer. That an
 * object is absent is therefore always a live answer, so a decision to
 * delete a copy because its source is gone is never taken on the cache's
 * word.
 */
import { compositeKey } from '../core/composite-key.js';
import type { ObjectIdentity } from '../core/identity.js';
import type { KubeObject } from '../core/object.js';
import type { ResourceType } from '../core/resource-type.js';
import { approximateHeapBytes } from '../util/heap-size.js';
import { type ListQuery, type ObjectReads } from './object-reads.js';

/** What the watches tell the cache: an object's latest version, or that it no longer concerns relsync (or is gone). */
export interface ObjectCacheFeed {
  observe(id: ObjectIdentity, object: KubeObject | undefined): void;
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
  /** Counts watch news (events, relists): a GET's answer is kept only if no news of its object came meanwhile. */
  private tick = 0;
  /** When each object's latest news came, for the most recent `maxNews` objects. */
  private readonly newsAt = new Map<string, number>();
  /** When news of an object no longer in `newsAt` may have come (older records are forgotten beyond `maxNews`). */
  private forgottenAt = 0;
  /** When each type was last relisted. */
  private readonly relistedAt = new Map<string, number>();
  /** (cluster, type) pairs an unfiltered watch lists and watches: only their GET answers may be kept. */
  private readonly watched = new Set<string>();

  constructor(
    private readonly maxBytes: number,
    private readonly maxNews = 20_000,
  ) {}

  observe(id: ObjectIdentity, object: KubeObject | undefined): void {
    const key = keyOf(id.cluster, id, id.namespace, id.name);
    this.noteNews(key);
    this.remove(key);
    if (object) this.keep(key, typeOf(id), object);
  }

  listed(cluster: string, type: Pick<ResourceType, 'group' | 'resource'>, labelSelector: string | undefined): void {
    if (!labelSelector) this.watched.add(compositeKey(cluster, typeOf(type)));
    this.dropType(type);
  }

  /** Of every cluster: a kcp watch lists all its workspaces at once, and a miss only costs a GET. */
  private dropType(type: Pick<ResourceType, 'group' | 'resource'>): void {
    const t = typeOf(type);
    this.relistedAt.set(t, ++this.tick);
    for (const [key, entry] of this.entries) if (entry.type === t) this.remove(key);
  }

  /** Call before a GET whose answer may be offered: the moment it began. */
  now(): number {
    return this.tick;
  }

  /**
   * A GET's answer, asked since `since` (from now()): kept if an unfiltered watch of its type in
   * its cluster will tell of every later change (a type nobody watches, say Namespaces, would stay
   * as it was read), unless the cache holds the object already or the watch said anything of it
   * (or relisted its type) since the GET began.
   */
  offer(id: ObjectIdentity, object: KubeObject, since: number): void {
    const key = keyOf(id.cluster, id, id.namespace, id.name);
    if (this.entries.has(key) || !this.watched.has(compositeKey(id.cluster, typeOf(id)))) return;
    const news = this.newsAt.get(key) ?? this.forgottenAt;
    if (news > since || (this.relistedAt.get(typeOf(id)) ?? 0) > since) return;
    this.keep(key, typeOf(id), object);
  }

  private noteNews(key: string): void {
    this.newsAt.delete(key);
    this.newsAt.set(key, ++this.tick);
    for (const [oldest, at] of this.newsAt) {
      if (this.newsAt.size <= this.maxNews) break;
      this.newsAt.delete(oldest);
      this.forgottenAt = at;
    }
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

  async get(cluster: string, type: ResourceType, namespace: string, name: string): Promise<KubeObject | undefined> {
    const ns = type.namespaced ? namespace : '';
    const since = this.cache.now();
    const cached = this.cache.get(cluster, type, ns, name);
    if (cached) return cached;
    const live = await this.live.get(cluster, type, namespace, name);
    // What a reconcile reads concerns relsync: kept for the next one (absence never is).
    if (live) this.cache.offer({ cluster, group: type.group, resource: type.resource, namespace: ns, name }, structuredClone(live), since);
    return live;
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
