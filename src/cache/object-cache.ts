/**
 * The objects relsync's own watches delivered, so that a reconcile reads
 * them instead of asking the API server again (a related change used to cost
 * a GET of the primary, its copy and both ends of every relation).
 *
 * What it holds: the latest version each watch delivered of the objects that
 * concern relsync — primaries and objects routed to a primary (related sources,
 * copies) — and, tentatively, what a LIST delivered of the types rules read
 * related sources of (below). Only the watches' events and LISTs fill it, in
 * their order, so an entry is never
 * older than the last event of its object: an event of an object that
 * concerns nobody removes it, a deletion removes it, a relist drops its type
 * first (what was deleted while nobody watched must not be read back), a kcp
 * workspace that binds or unbinds drops its objects, a sweep clears it. A
 * version relsync wrote, deleted or read live sets a floor: older versions
 * still on their way are not read back, so a cached read never goes behind
 * what relsync already saw. A GET's answer is never kept: it could be older
 * than an event still on its way.
 *
 * How it holds them: as JSON text, parsed again at each read (which also
 * gives each caller its own copy). A small object's text is a third to a
 * quarter of its parsed size in the heap, so the same budget holds three to
 * four times as many objects: at 10,000 primaries with 5 related objects each,
 * the first LIST's related sources fit in the default 32 MiB, and a new
 * primary's reconcile reads them from here instead of with a GET each.
 *
 * What it does not hold: anything over its byte budget (related objects go
 * first, the least recently used first, and primaries and their copies last:
 * every change of one of a primary's relations reads those again, see
 * Standing; beyond half the budget, owners go first, so that a tenant's many
 * primaries cost the others' related objects at most half), and objects no event has shown to concern relsync
 * (say a ConfigMap made after the LIST, before the primary that names it,
 * until it changes) — except that a LIST's objects of a type that rules read
 * related sources of are held tentatively: at the first LIST the store knows
 * no relation yet, and every new primary's reconcile reads its related
 * objects next (event-router.ts). Tentative entries use only the room that
 * the others leave and go first, the last listed first: new primaries are
 * reconciled in about the order they were listed (a LIST's order), so the
 * first listed are read first; one that was read goes before any not read
 * yet (the reconcile that read it stores the relation, and the object's next
 * event keeps it as an object that concerns a primary; until then another
 * primary that shares it still reads it here while there is room). A LIST
 * that fails midway lets its
 * type go (no watch keeps its pages current until the next LIST).
 * Both are read from the API server: a miss costs a GET, never a wrong
 * answer (or, for a copy the store says was never written, no read at all: the
 * write is a create the API server refuses when anything has the name). That an object is absent is always a live answer, and a reconcile
 * that read from the cache and is about to delete anything starts over
 * reading live (object-reads.ts's ReadAgainLive).
 */
import { compositeKey } from '../core/composite-key.js';
import { clusterKeyPrefix, identityKey, type ObjectIdentity } from '../core/identity.js';
import type { KubeObject } from '../core/object.js';
import { apiVersionOf, type ResourceType } from '../core/resource-type.js';
import { matchesQuery, projected, type ListQuery, type ObjectReads } from './object-reads.js';
import { stringBytes } from '../util/heap-size.js';
import { jsonText } from '../util/json-text.js';
import { Semaphore } from '../util/semaphore.js';
import { heavyTurns } from '../util/heavy-turns.js';

/** What the watches tell the cache: an object's latest version, or that it no longer concerns relsync (or is gone). */
export interface ObjectCacheFeed {
  /**
   * The watch's latest version of an object, or undefined: deleted, or it concerns nobody now.
   * `standing`: what it is to relsync, which decides what goes first when room is needed (below).
   */
  observe(id: ObjectIdentity, object: KubeObject | undefined, standing?: Standing): void;
  /** A version as routing found it: the cache decides whether to keep it, and its standing (admissionOf). */
  admit(id: ObjectIdentity, object: KubeObject, routed: Routed): void;
  dropCluster(cluster: string): void;
  clear(): void;
  /** A watch's LIST of this type begins: what the cache holds of the type may have been deleted while nobody watched. */
  listed(type: Pick<ResourceType, 'group' | 'resource'>, of: (cluster: string) => boolean): void;
}

/**
 * What a cached object is to relsync, in the order they go when room is needed: `tentative`, a
 * LIST's object that concerns nobody yet (see the top of this file); `related`, an object routed to
 * a primary as a related source or copy; `owner`, a primary or its copy — what
 * every change of any of the primary's relations reads again (edge-sync.ts), so that at sizes where
 * not everything fits, a change costs its write and not a GET of the primary and its copy.
 */
export type Standing = 'tentative' | 'related' | 'owner';

/** What routing (controller/event-router.ts) learnt of one version of an object. */
export interface Routed {
  /** Its content was read and is the watch's own: not a deletion, a refused object, or a LIST run beside the watch. */
  readonly readable: boolean;
  /** It concerns primaries now: queued for some, relsync's own write, or a copy the store knows. */
  readonly concerns: boolean;
  /** A primary, or a copy of one (of a primary type on a platform, a copy type in the service cluster). */
  readonly owner: boolean;
  /** A LIST's object of a type related rules read: the first reconciles of new primaries may ask for it. */
  readonly maySource?: boolean;
  /** A platform namespace that namespace selectors read. */
  readonly selectedNamespace?: boolean;
}

/**
 * Whether a routed version is kept, and how far ahead. Kept when it concerns primaries (relsync's
 * real copies do: the store knows them; an object that merely carries marks does not), a namespace
 * selectors read, or, tentatively, an object of a LIST that related rules may ask for: at the first
 * LIST the store knows no relation yet, and every new primary's reconcile would GET its related
 * objects one by one. Tentative entries only use room the others leave; owners go last.
 */
export function admissionOf(routed: Routed): { readonly keep: boolean; readonly standing: Standing } {
  const tentative = !routed.concerns && routed.maySource === true;
  return {
    keep: routed.readable && (routed.concerns || tentative || routed.selectedNamespace === true),
    standing: tentative ? 'tentative' : routed.selectedNamespace ? 'related' : routed.owner ? 'owner' : 'related',
  };
}

export interface CacheStats {
  readonly entries: number;
  readonly bytes: number;
  readonly hits: number;
  readonly misses: number;
}

export class ObjectCache implements ObjectCacheFeed {
  /** Related objects, in use order: the first entry is the least recently used. */
  private readonly entries = new Map<string, Entry>();
  /** Primaries, their copies and copy namespaces, in use order; they go after every related entry. */
  private readonly owners = new Map<string, Entry>();
  /** A LIST's objects that concern nobody yet; kept only in room the others leave (see keep()). */
  private readonly tentative = new Map<string, Entry>();
  /**
   * Tentative keys, the next to go last: in the order they came, and a key read since at the end
   * again. Keys no longer tentative are skipped when met, and dropped in compactions (not counted in
   * the budget: at most about twice the tentative entries' keys, and none when there are none).
   */
  private tentativeOrder: string[] = [];
  private size = 0;
  /** Of `size`, what owners hold: past half the budget they go before related entries (a tenant's many primaries cost others at most half). */
  private ownerBytes = 0;
  private hitCount = 0;
  private missCount = 0;
  /**
   * Versions relsync wrote or read live that the watch has not delivered yet: an older version
   * still on its way is not read back (a cached read never goes behind what relsync already saw).
   */
  private readonly floors = new Map<string, Floor>();

  /**
   * `keepsManagedFields`: whether an object's managedFields are worth their room. A watch's objects
   * carry them and they are most of a small object's size, but relsync reads them in one case only
   * (copy-writer.ts folds its own Update entries into its apply entry), so the cache drops them
   * unless that case applies — a LIST's objects come without them anyway (resource-client.ts).
   */
  constructor(
    private readonly maxBytes: number,
    private readonly maxFloors = 10_000,
    private readonly keepsManagedFields: (managedFields: unknown) => boolean = () => true,
  ) {}

  admit(id: ObjectIdentity, object: KubeObject, routed: Routed): void {
    const { keep, standing } = admissionOf(routed);
    this.observe(id, keep ? object : undefined, standing);
  }

  observe(id: ObjectIdentity, object: KubeObject | undefined, standing: Standing = 'related'): void {
    const key = keyOf(id.cluster, id, id.namespace, id.name);
    this.remove(key);
    const floor = this.floors.get(key);
    // Gone, or of no concern any more: the latest word on it, whatever relsync saw before.
    if (!object) {
      this.floors.delete(key);
      return;
    }
    if (floor) {
      if (!meets(object.metadata.resourceVersion, floor)) return;
      this.floors.delete(key);
    }
    this.keep(key, id, object, standing);
  }

  /**
   * relsync saw this version of an object outside the watch: wrote it, or read it live (`after`:
   * deleted it, so only a later version may be read back). Until the watch delivers it, older
   * versions are not read from the cache.
   */
  saw(id: ObjectIdentity, resourceVersion: string | undefined, after = false): void {
    if (!resourceVersion) return;
    const key = keyOf(id.cluster, id, id.namespace, id.name);
    const floor: Floor = { resourceVersion, after };
    this.floors.delete(key);
    this.floors.set(key, floor);
    for (const [oldest] of this.floors) {
      if (this.floors.size <= this.maxFloors) break;
      this.floors.delete(oldest);
    }
    const entry = this.mapOf(key)?.get(key);
    if (entry && !meets(entry.resourceVersion, floor)) this.remove(key);
  }

  /**
   * A LIST of the type begins (or failed): the entries of the clusters it lists go (`of`: a plain
   * cluster's watch lists that cluster, a kcp platform's every workspace bound through it). Not
   * those of other clusters: a tenant whose own API server keeps its watch relisting must not
   * empty every tenant's cache of the type.
   */
  listed(type: Pick<ResourceType, 'group' | 'resource'>, of: (cluster: string) => boolean): void {
    const t = typeOf(type);
    for (const map of [this.owners, this.entries, this.tentative]) for (const [key, entry] of map) if (entry.type === t && of(entry.cluster)) this.remove(key);
  }

  /** Forgets a cluster's objects (a kcp workspace that unbound, or is listed again after it bound again). */
  dropCluster(cluster: string): void {
    // "a" never drops "ab"'s objects.
    const prefix = clusterKeyPrefix(cluster);
    for (const key of [...this.owners.keys(), ...this.entries.keys(), ...this.tentative.keys()]) if (key.startsWith(prefix)) this.remove(key);
  }

  /** Everything: a sweep is the level-based safety net, for the cache too. */
  clear(): void {
    this.owners.clear();
    this.ownerBytes = 0;
    this.entries.clear();
    this.tentative.clear();
    this.tentativeOrder = [];
    this.floors.clear();
    this.size = 0;
  }

  /**
   * Tentative entries use only the room the others leave: they go first when the budget is full, the
   * last listed first, and one never pushes out anything (a tenant's many objects that nothing
   * relates to cost others nothing but the room nobody used). Then owners beyond half the budget,
   * then related entries, the least recently used first, and owners last.
   */
  private keep(key: string, id: ObjectIdentity, delivered: KubeObject, standing: Standing): void {
    const tentative = standing === 'tentative';
    // No room for a tentative entry of any size: not worth the text.
    if (tentative && this.size + ENTRY_BYTES + key.length > this.maxBytes) return;
    // At any depth: a tenant's object may be nested deeper than JSON.stringify goes (util/json-text.ts).
    const text = jsonText(this.slim(delivered));
    // The text as the heap holds it, and the entry's own room.
    const bytes = ENTRY_BYTES + key.length + stringBytes(text);
    // One object over the whole budget would only push everything else out.
    if (bytes > this.maxBytes) return;
    if (tentative && this.size + bytes > this.maxBytes) return;
    const map = tentative ? this.tentative : standing === 'owner' ? this.owners : this.entries;
    map.set(key, { text, resourceVersion: delivered.metadata.resourceVersion, bytes, type: typeOf(id), cluster: id.cluster });
    if (tentative) {
      this.tentativeOrder.push(key);
      this.compactTentativeOrderIfLong();
    }
    this.size += bytes;
    if (map === this.owners) this.ownerBytes += bytes;
    while (this.size > this.maxBytes && this.dropLastTentative());
    for (const [oldest] of this.owners) {
      if (this.size <= this.maxBytes || this.ownerBytes <= this.maxBytes / 2) break;
      this.remove(oldest);
    }
    for (const lru of [this.entries, this.owners]) {
      for (const [oldest] of lru) {
        if (this.size <= this.maxBytes) return;
        this.remove(oldest);
      }
    }
  }

  /** Keys of entries that went another way (routed, dropped) or came again stay until passed: compact now and then. */
  private compactTentativeOrderIfLong(): void {
    if (this.tentativeOrder.length > 2 * this.tentative.size + 1024) this.compactTentativeOrder();
  }

  /** Only the keys still tentative, each once at its latest place (a key kept again or read comes again). */
  private compactTentativeOrder(): void {
    const seen = new Set<string>();
    const kept: string[] = [];
    for (let i = this.tentativeOrder.length - 1; i >= 0; i--) {
      const key = this.tentativeOrder[i]!;
      if (!this.tentative.has(key) || seen.has(key)) continue;
      seen.add(key);
      kept.push(key);
    }
    this.tentativeOrder = kept.reverse();
  }

  /** Lets the last listed tentative entry go; false when there is none. */
  private dropLastTentative(): boolean {
    while (this.tentativeOrder.length > 0) {
      const key = this.tentativeOrder.pop()!;
      if (!this.tentative.has(key)) continue;
      this.remove(key);
      return true;
    }
    return false;
  }

  /** The object as kept: without managedFields nobody will read (a new object: the watch's is not changed). */
  private slim(object: KubeObject): KubeObject {
    const { managedFields, ...metadata } = object.metadata;
    if (managedFields === undefined || this.keepsManagedFields(managedFields)) return object;
    return { ...object, metadata };
  }

  /** What reading an object of the cache costs (its entry's bytes; 0 when it has none), without reading it. */
  bytesOf(cluster: string, type: Pick<ResourceType, 'group' | 'resource'>, namespace: string, name: string): number {
    const key = keyOf(cluster, type, namespace, name);
    return this.mapOf(key)?.get(key)?.bytes ?? 0;
  }

  /** The cached object, parsed for this caller (who may change it), or undefined on a miss. */
  get(cluster: string, type: Pick<ResourceType, 'group' | 'resource'>, namespace: string, name: string): KubeObject | undefined {
    const key = keyOf(cluster, type, namespace, name);
    const map = this.mapOf(key);
    const entry = map?.get(key);
    if (!map || !entry) {
      this.missCount++;
      return undefined;
    }
    this.hitCount++;
    if (map === this.tentative) {
      // Read by its primary's first reconcile: it goes before any tentative entry not read yet.
      this.tentativeOrder.push(key);
      this.compactTentativeOrderIfLong();
    } else {
      map.delete(key);
      map.set(key, entry);
    }
    return JSON.parse(entry.text) as KubeObject;
  }

  stats(): CacheStats {
    return { entries: this.owners.size + this.entries.size + this.tentative.size, bytes: this.size, hits: this.hitCount, misses: this.missCount };
  }

  /** The map that holds `key`, if any. */
  private mapOf(key: string): Map<string, Entry> | undefined {
    return this.owners.has(key) ? this.owners : this.entries.has(key) ? this.entries : this.tentative.has(key) ? this.tentative : undefined;
  }

  private remove(key: string): void {
    const map = this.mapOf(key);
    const entry = map?.get(key);
    if (!map || !entry) return;
    map.delete(key);
    this.size -= entry.bytes;
    if (map === this.owners) this.ownerBytes -= entry.bytes;
    if (this.tentative.size === 0) this.tentativeOrder = [];
  }
}

/** Live reads that tell the cache what they saw, so that a later cached read never goes behind them. */
export class LiveReadsSeen implements ObjectReads {
  constructor(
    private readonly cache: ObjectCache,
    private readonly live: ObjectReads,
  ) {}

  async get(cluster: string, type: ResourceType, namespace: string, name: string): Promise<KubeObject | undefined> {
    const object = await this.live.get(cluster, type, namespace, name);
    if (object) this.cache.saw({ cluster, group: type.group, resource: type.resource, namespace: type.namespaced ? namespace : '', name }, object.metadata.resourceVersion);
    return object;
  }

  list<T = KubeObject>(cluster: string, type: ResourceType, query: ListQuery<T>): Promise<T[]> {
    return this.live.list(cluster, type, query);
  }
}

/**
 * The names a selector or inverse rule's list may find, from what the watches delivered
 * (cache/finder-index.ts); undefined when the index cannot answer for the type now.
 */
export interface CandidateIndex {
  candidates(cluster: string, type: Pick<ResourceType, 'group' | 'resource'>, query: ListQuery<unknown>): Array<{ namespace: string; name: string }> | undefined;
}

/**
 * Reads from the cache, and from `live` (a LiveReadsSeen) what it does not hold. A selector or
 * inverse rule's list is answered from the finder index's candidates (finder-index.ts), each read
 * like any object and checked against the whole query, where the index can answer; otherwise live.
 */
export class CachedReads implements ObjectReads {
  constructor(
    private readonly cache: ObjectCache,
    private readonly live: ObjectReads,
    private readonly index?: CandidateIndex,
  ) {}

  readonly cached = true;

  async get(cluster: string, type: ResourceType, namespace: string, name: string): Promise<KubeObject | undefined> {
    // A large entry is parsed at its turn on the event loop (util/heavy-turns.ts), as a large GET
    // answer is: a reconcile that reads many from the cache would otherwise parse them all, and do
    // what follows with each, without the loop polling its sockets in between.
    await heavyTurns.turn(this.cache.bytesOf(cluster, type, type.namespaced ? namespace : '', name), cluster);
    return this.peek(cluster, type, namespace, name)?.object ?? this.live.get(cluster, type, namespace, name);
  }

  holds(cluster: string, type: ResourceType, namespace: string, name: string): boolean {
    return this.cache.bytesOf(cluster, type, type.namespaced ? namespace : '', name) > 0;
  }

  peek(cluster: string, type: ResourceType, namespace: string, name: string): { readonly object: KubeObject } | undefined {
    const hit = this.cache.get(cluster, type, type.namespaced ? namespace : '', name);
    // The same group and resource configured at another version: read it as asked.
    return hit && (hit.apiVersion === undefined || hit.apiVersion === apiVersionOf(type)) ? { object: hit } : undefined;
  }

  async list<T = KubeObject>(cluster: string, type: ResourceType, query: ListQuery<T>): Promise<T[]> {
    const candidates = this.index?.candidates(cluster, type, query);
    if (!candidates) return this.live.list(cluster, type, query);
    // At most MAX_CANDIDATES (after a sweep cleared the cache, most are GETs), CANDIDATE_READS at
    // once, each let go at once unless the query takes it: a tenant's own API server that answers
    // every GET with the most limits.parsedBytes allows holds CANDIDATE_READS of them, not 64.
    const slots = new Semaphore(CANDIDATE_READS);
    // Reads start in the index's order: once `limit` of them matched, those not started yet are not needed.
    let matched = 0;
    const read = await Promise.all(
      candidates.map(({ namespace, name }) =>
        slots.run(async () => {
          if (query.limit !== undefined && matched >= query.limit) return undefined;
          const object = await this.get(cluster, type, namespace, name);
          if (!object || !matchesQuery(query, object)) return undefined;
          matched++;
          return projected(query, object);
        }),
      ),
    );
    // In the index's order.
    const found = read.filter((t): t is Awaited<T> => t !== undefined) as T[];
    return query.limit !== undefined ? found.slice(0, query.limit) : found;
  }
}

interface Entry {
  /** The object as JSON. */
  readonly text: string;
  readonly resourceVersion: string | undefined;
  readonly bytes: number;
  readonly type: string;
  readonly cluster: string;
}

/** Candidates of a list() read at once. */
const CANDIDATE_READS = 4;

/** What an entry costs beside its text: the map's slot, the entry object, its strings' headers. */
const ENTRY_BYTES = 160;

interface Floor {
  readonly resourceVersion: string;
  /** Only versions after it (relsync deleted this one). */
  readonly after: boolean;
}

/**
 * Whether an object's version (`rv`) is at least the floor. resourceVersions are compared as numbers when
 * both are (etcd's revisions, also kcp's); otherwise only the very version meets it.
 */
function meets(rv: string | undefined, floor: Floor): boolean {
  if (rv === undefined) return false;
  if (/^[0-9]+$/.test(rv) && /^[0-9]+$/.test(floor.resourceVersion)) {
    const [a, b] = [BigInt(rv), BigInt(floor.resourceVersion)];
    return floor.after ? a > b : a >= b;
  }
  return !floor.after && rv === floor.resourceVersion;
}

function keyOf(cluster: string, type: Pick<ResourceType, 'group' | 'resource'>, namespace: string, name: string): string {
  return identityKey({ cluster, group: type.group, resource: type.resource, namespace, name });
}

function typeOf(type: Pick<ResourceType, 'group' | 'resource'>): string {
  return compositeKey(type.group, type.resource);
}
