/**
 * A sweep's fresh LISTs, as the reads of the reconciles it runs.
 *
 * A sweep lists everything relsync watches and then reconciles every
 * primary. Were those reconciles to GET each object again, a sweep with
 * nothing to do would cost a dozen round trips per primary on top of the
 * LISTs. Instead they read from the LISTs just made — a real relist, not a
 * replay of a cache — and only what differs is written.
 *
 * Why this is safe:
 * - A snapshot only ever answers "this object exists, like this". What it
 *   lacks (not listed, listed through an agent filter, or absent) is read from
 *   the API server, so no deletion is ever decided on the snapshot alone
 *   (except through a selector or inverse LIST, see below).
 * - SweepReads hands the snapshot to a primary's reconcile only once per
 *   sweep, and only while no watch event has been routed to that primary
 *   since the sweep began listing. An object that changed after its LIST
 *   (its event routes to the primary) or a write that conflicted with a
 *   newer version (409; the reconcile is retried) is therefore read live.
 *   A selector or inverse match that appeared after the LIST was routed, by
 *   its event, to the primaries whose stored selector or inverse rule finds
 *   it; those read live too.
 * - An object a watch event arrived for since its LIST, or that a reconcile
 *   deleted, is read live by get() for every primary, also those the event
 *   was not routed to (another primary deleted a copy this one claims).
 *   list() still answers with the listed versions: which objects match is
 *   the routing's to keep up to date, as said above.
 *
 * Memory is bounded: the snapshot holds listed objects up to a budget
 * (`resync.snapshotBytes`, of their estimated size in memory,
 * util/heap-size.ts), and every listed object's version (for sweep-skip.ts)
 * up to a budget of the same size: a type whose versions no longer fit loses
 * them, and its primaries are reconciled instead of skipped. A type whose pages no longer fit, or whose LIST failed
 * midway (or, on kcp, a workspace bound while the list ran), is incomplete:
 * what the snapshot lacks of it is read live, and list() of it is answered
 * live. A tenant with a gigabyte of ConfigMaps makes the sweep slower (GETs
 * instead of memory), never the process bigger.
 */
import type { KubeObject } from '../core/object.js';
import { typeName, type ResourceType } from '../core/resource-type.js';
import type { LabelSelector } from '../core/label-selector.js';
import { identityKey, type ObjectIdentity } from '../core/identity.js';
import { approximateHeapBytes } from '../util/heap-size.js';
import { matchesQuery, projected, ReadSession, type ListQuery, type ObjectReads } from './object-reads.js';
import { compositeKey } from '../core/composite-key.js';
import { objectVersion } from '../core/object-version.js';

/** One LIST of a sweep, split by identity cluster. */
export interface ListedObjects {
  readonly cluster: string;
  readonly type: ResourceType;
  /** Listed through relsync's agent filter: vouches for the listed objects only. */
  readonly filtered: boolean;
  readonly items: readonly KubeObject[];
  /** The items' estimated size in memory when the LIST's pages already measured it (util/heap-size.ts). */
  readonly heapBytes?: number | undefined;
}

class ListedType {
  readonly byName = new Map<string, KubeObject>();
  /**
   * Every listed object's version (core/object-version.ts), held or not: a sweep compares them with
   * the store's (sweep-skip.ts). UNKNOWN for one without.
   */
  readonly versions = new Map<string, string>();
  /**
   * False once part of this type was not listed (its LIST failed midway, a kcp workspace bound while
   * it ran). Not the same as `complete` (every page held): a type over the memory budget is still
   * listed whole, so its versions still tell what exists.
   */
  whole = true;
  readonly byNamespace = new Map<string, KubeObject[]>();
  private readonly indexes = new Map<string, Map<string, KubeObject[]>>();
  filtered = true;
  /** False once a page of this type was not held (over budget, or its LIST failed): list() reads live. */
  complete = true;

  add(items: readonly KubeObject[]): void {
    for (const item of items) {
      const ns = item.metadata.namespace ?? '';
      const key = `${ns}/${item.metadata.name ?? ''}`;
      if (this.byName.has(key)) continue;
      this.byName.set(key, item);
      let list = this.byNamespace.get(ns);
      if (!list) this.byNamespace.set(ns, (list = []));
      list.push(item);
    }
  }

  /** An index built on first use: one pass over the objects, then a lookup per query. */
  index(name: string, of: (object: KubeObject) => string | undefined): Map<string, KubeObject[]> {
    let index = this.indexes.get(name);
    if (index) return index;
    index = new Map();
    for (const item of this.byName.values()) {
      const value = of(item);
      if (value === undefined) continue;
      let list = index.get(value);
      if (!list) index.set(value, (list = []));
      list.push(item);
    }
    this.indexes.set(name, index);
    return index;
  }
}

const namespaceType = { group: '', resource: 'namespaces' };

export class SweepSnapshot implements ObjectReads {
  private readonly types = new Map<string, ListedType>();
  /** Namespaces that hold a listed object, per cluster: they exist. */
  private readonly namespaces = new Map<string, Set<string>>();
  /** Estimated bytes of the objects held. */
  private held = 0;
  /** Estimated bytes of the versions held (their own budget, as large as the objects'). */
  private versionBytes = 0;
  /** `cluster/type` of every type the budget left incomplete. */
  readonly overBudget: string[] = [];

  constructor(
    private readonly live: ObjectReads,
    lists: readonly ListedObjects[] = [],
    /** Whether a watch event on this object (typeKey + namespace/name) arrived since its LIST: then it is read live. */
    private readonly changedSinceList: (key: string) => boolean = () => false,
    /** How many bytes (estimated) of listed objects the snapshot may hold. */
    private readonly budget = Infinity,
  ) {
    for (const list of lists) this.add(list);
  }

  /** A page of a LIST; held while the budget allows. */
  add(list: ListedObjects): void {
    const key = typeKey(list.cluster, list.type);
    let listed = this.types.get(key);
    if (!listed) this.types.set(key, (listed = new ListedType()));
    listed.filtered &&= list.filtered;
    let namespaces = this.namespaces.get(list.cluster);
    if (!namespaces) this.namespaces.set(list.cluster, (namespaces = new Set()));
    for (const item of list.items) {
      if (item.metadata.namespace) namespaces.add(item.metadata.namespace);
      if (!listed.whole) continue;
      const name = `${item.metadata.namespace ?? ''}/${item.metadata.name ?? ''}`;
      const version = objectVersion(item) ?? UNKNOWN;
      // Versions have a budget of their own, as large as the objects': past it the type's versions
      // go, and it counts as not listed whole (its primaries are reconciled, not skipped).
      this.versionBytes += VERSION_ENTRY_BYTES + name.length + version.length;
      if (this.versionBytes > this.budget) {
        this.versionBytes -= [...listed.versions].reduce((n, [k, v]) => n + VERSION_ENTRY_BYTES + k.length + v.length, 0);
        listed.versions.clear();
        listed.whole = false;
        continue;
      }
      listed.versions.set(name, version);
    }
    if (!listed.complete) return;
    const size = this.budget === Infinity ? 0 : (list.heapBytes ?? list.items.reduce((n, item) => n + approximateHeapBytes(item), 0));
    if (this.held + size > this.budget) {
      listed.complete = false;
      this.overBudget.push(`${list.cluster}/${typeName(list.type)}`);
      return;
    }
    this.held += size;
    listed.add(list.items);
  }

  /** Part of this type was not listed (its LIST failed midway): the snapshot cannot say what is not there. */
  incomplete(cluster: string, type: ResourceType): void {
    // Also before the type's first page of this cluster (on kcp, a workspace's entry is made by the
    // first page that holds its objects): a page added later must not make it whole.
    let listed = this.types.get(typeKey(cluster, type));
    if (!listed) this.types.set(typeKey(cluster, type), (listed = new ListedType()));
    listed.complete = listed.whole = false;
  }

  /**
   * An object's listed version (core/object-version.ts); '' when its type was listed whole and the
   * object was not among it (it did not exist); undefined when the LISTs cannot tell, or a watch
   * event arrived for it since. `copy`: the object is one of relsync's copies, or nothing: a LIST
   * through the agent's filter (watch-plan.ts) that lacks it says it is not there as a copy, and
   * what is there instead is never written over or deleted.
   */
  versionOf(id: ObjectIdentity, copy = false): string | undefined {
    const key = typeKey(id.cluster, id);
    const listed = this.types.get(key);
    const name = `${id.namespace}/${id.name}`;
    if (!listed || this.changedSinceList(identityKey(id))) return undefined;
    const version = listed.versions.get(name);
    if (version !== undefined) return version === UNKNOWN ? undefined : version;
    return listed.whole && (copy || !listed.filtered) ? '' : undefined;
  }

  /** Whether every object of this type in this cluster was listed (none held back by a filter, no page missing). */
  listedWhole(cluster: string, type: { group: string; resource: string }): boolean {
    const listed = this.types.get(typeKey(cluster, type));
    return listed !== undefined && listed.whole && !listed.filtered;
  }

  /** Estimated bytes of the objects held. */
  get heldSize(): number {
    return this.held;
  }

  get size(): number {
    let n = 0;
    for (const t of this.types.values()) n += t.byName.size;
    return n;
  }

  async get(cluster: string, type: ResourceType, namespace: string, name: string): Promise<KubeObject | undefined> {
    const key = typeKey(cluster, type);
    const found = this.types.get(key)?.byName.get(`${namespace}/${name}`);
    const changed = this.changedSinceList(identityKey({ cluster, group: type.group, resource: type.resource, namespace, name }));
    if (found && !changed) return found;
    // A namespace that holds listed objects exists; only where namespaces themselves were not listed
    // (their labels, which a namespace selector reads, are then not known) and it did not change since.
    if (!changed && !this.types.has(key) && type.group === namespaceType.group && type.resource === namespaceType.resource && this.namespaces.get(cluster)?.has(name)) {
      return { apiVersion: 'v1', kind: 'Namespace', metadata: { name } };
    }
    return this.live.get(cluster, type, namespace, name);
  }

  async list<T = KubeObject>(cluster: string, type: ResourceType, query: ListQuery<T>): Promise<T[]> {
    const listed = this.types.get(typeKey(cluster, type));
    if (!listed || listed.filtered || !listed.complete) return this.live.list(cluster, type, query);
    const namespace = query.namespace || undefined;
    let candidates: readonly KubeObject[];
    const equality = query.selector && equalityTerm(query.selector);
    if (query.indexed) {
      candidates = listed.index(`indexed:${query.indexed.index}`, query.indexed.of).get(query.indexed.value) ?? [];
    } else if (equality) {
      candidates = listed.index(`label:${equality.key}`, (o) => o.metadata.labels?.[equality.key]).get(equality.value) ?? [];
    } else if (namespace !== undefined) {
      candidates = listed.byNamespace.get(namespace) ?? [];
    } else {
      candidates = [...listed.byName.values()];
    }
    const found = candidates.filter((o) => (namespace === undefined || (o.metadata.namespace ?? '') === namespace) && matchesQuery(query, o));
    return (query.limit === undefined ? found : found.slice(0, query.limit)).map((o) => projected(query, o));
  }
}

/** One sweep's reads, from before its first LIST to its end. */
export interface SweepWindow {
  /** What the sweep's LISTs add to, page by page. */
  readonly snapshot: SweepSnapshot;
  /** From now on each primary's first reconcile of the sweep reads the snapshot; throws for a window that has ended. */
  reconcileFromSnapshot(): void;
  /** Reconciles read as outside a sweep again. */
  end(): void;
}

/**
 * Decides, per reconcile, what it reads: the running sweep's snapshot (once per primary), the
 * watches' cache, or the API servers (see the top of this file).
 */
export class SweepReads {
  private window: SweepWindow | undefined;
  private snapshot: SweepSnapshot | undefined;
  private tracking = false;
  /** Primaries a watch event was routed to since the sweep began listing. */
  private readonly changed = new Set<string>();
  /** Primaries that have had their one snapshot reconcile. */
  private readonly used = new Set<string>();
  /**
   * Objects a watch event arrived for since the sweep began listing: the
   * snapshot's version may be older (deleted by another primary's reconcile,
   * say), so they are read live by every reconcile, including those of
   * primaries the event was not routed to.
   */
  private readonly changedObjects = new Set<string>();

  /**
   * `live`: the API servers, what a snapshot reads when it lacks an object; `everyday`: what
   * reconciles read outside a sweep (the watches' cache, see cache/object-cache.ts), which a
   * sweep clears: it is the level-based safety net for the cache too.
   */
  constructor(
    readonly live: ObjectReads,
    private readonly everyday: ObjectReads = live,
    private readonly cache?: { clear(): void },
  ) {}

  /**
   * A sweep begins, before its first LIST: the cache is cleared, and events are tracked until the
   * window ends. Its snapshot starts with `lists` (the LISTs add to it page by page); reconciles
   * read it once the window says so. One window at a time: a new one ends the last.
   */
  begin(budget = Infinity, lists: readonly ListedObjects[] = []): SweepWindow {
    this.end();
    this.cache?.clear();
    this.tracking = true;
    const snapshot = new SweepSnapshot(this.live, lists, (key) => this.changedObjects.has(key), budget);
    const current = () => this.window === window;
    const window: SweepWindow = {
      snapshot,
      reconcileFromSnapshot: () => {
        // One sweep at a time (Sweeper.running): a window that ended would reconcile from the
        // everyday reads while its caller trusts the snapshot's versions.
        if (!current()) throw new Error('a sweep window that has ended cannot be reconciled from');
        this.snapshot = snapshot;
      },
      end: () => {
        if (current()) this.end();
      },
    };
    this.window = window;
    return window;
  }

  private end(): void {
    this.window = undefined;
    this.snapshot = undefined;
    this.tracking = false;
    this.changed.clear();
    this.used.clear();
    this.changedObjects.clear();
  }

  /** A watch event arrived for this object, or a reconcile deleted it. */
  noteObject(id: ObjectIdentity): void {
    if (this.tracking) this.changedObjects.add(identityKey(id));
  }

  /** A watch event was routed to this primary. */
  noteChanged(primary: ObjectIdentity): void {
    if (this.tracking) this.changed.add(identityKey(primary));
  }

  /** One reconcile's reads of `primary`; `afterConflict`: its last run met a 409, and it reads live. */
  sessionFor(primary: ObjectIdentity, afterConflict = false): ReadSession {
    return new ReadSession(afterConflict ? this.live : this.readsFor(primary), this.live);
  }

  readsFor(primary: ObjectIdentity): ObjectReads {
    if (!this.snapshot) return this.everyday;
    const key = identityKey(primary);
    if (this.changed.has(key) || this.used.has(key)) return this.everyday;
    this.used.add(key);
    return this.snapshot;
  }
}

/** About what one entry of a type's versions takes besides its two strings' characters. */
const VERSION_ENTRY_BYTES = 96;

/** The version of a listed object that has none to compare: never equal to a stored one. */
const UNKNOWN = '\u0000unknown';

function typeKey(cluster: string, type: { group: string; resource: string }): string {
  return compositeKey(cluster, type.group, type.resource);
}

/** A requirement `key=value` (In with one value) that every match must meet: the index to start from. */
function equalityTerm(selector: LabelSelector): { key: string; value: string } | undefined {
  const r = selector.requirements.find((x) => x.operator === 'In' && x.values.length === 1);
  return r ? { key: r.key, value: r.values[0]! } : undefined;
}
