/**
 * Which objects a selector or inverse rule could find, answered from what
 * relsync's own watches delivered instead of a LIST. A reconcile of a new
 * primary used to LIST the source namespace once per selector rule and once
 * per inverse rule; the API server filters a label-selector LIST by walking
 * every object of the namespace, so at 10,000 primaries in one namespace the
 * initial sync's LISTs grew with the square of its size.
 *
 * What it holds: for each unfiltered watch of a type that selector or
 * inverse rules read (on the side they read it), the names of the objects
 * that carry a value for one of the rules' keys — a label a selector rule
 * anchors on with a constant key (`matchLabels.app: '{{ name }}'`), or the
 * owner an inverse rule computes from the object — by that value. Names
 * only: the objects themselves are read as a reconcile reads any object (the
 * object cache, else a GET), and the whole query (namespace, selector, the
 * caller's checks) is applied to what is read. So the index only proposes
 * candidates, and a wrong candidate costs a read, never a wrong answer.
 *
 * When it answers: only for a type whose watch has listed it completely
 * since it started or last relisted, and is synced now (the informer
 * contract), and only for a query with a key it indexes; with more
 * candidates than a few reads are worth, a LIST is cheaper, and the caller
 * lists. Everything else — a kcp platform's workspaces (a workspace's
 * objects can appear without events), a filtered watch, a selector anchored
 * on a templated key, a watch resumed from a checkpoint (it did not LIST:
 * after a restart, rules LIST until the type's next relist), a type let go
 * over the budget (until its next relist) — is answered by a LIST, as before.
 * relsync's own copies are never indexed: they are never sources, and
 * tenants, who write their labels, would only fill the index with them.
 *
 * Why a missed candidate is never a missed object: the watch handler feeds
 * the index before it routes the same event, and a reconcile stores its
 * selectors and its primary (phase 1) before it asks. An object the index
 * did not have when the reconcile asked is therefore routed, after the
 * reconcile's own store write, to the primary it matches, which is queued
 * again (the router's selector index and inverse lookup, event-router.ts).
 */
import { compositeKey } from '../core/composite-key.js';
import type { ObjectIdentity } from '../core/identity.js';
import type { KubeObject } from '../core/object.js';
import type { ResourceType } from '../core/resource-type.js';
import { markedSource } from '../core/marks.js';
import type { ListQuery } from './object-reads.js';

/** Beyond this many candidates, one LIST costs the API server less than reading each. */
export const MAX_CANDIDATES = 64;

/** What an indexed object costs beside its strings: map slots, the entry arrays, a Set's header. */
const ENTRY_BYTES = 200;

/**
 * What the rules read (sync/finder-definitions.ts makes these from the config): objects of `type`
 * on `side` indexed by a label's value, or by the owner a rule reads off them under the index's
 * `name` (the name a ListQuery's `indexed.index` carries).
 */
export interface IndexDefinition {
  readonly side: 'platform' | 'service';
  readonly type: Pick<ResourceType, 'group' | 'resource'>;
  readonly by: { readonly label: string } | { readonly name: string; readonly ownerOf: (object: KubeObject) => string | undefined };
}

/**
 * One way objects of a type are indexed: by a label's value within the object's namespace (a
 * selector rule lists one namespace, so a label value common to many namespaces costs a query
 * only its own), or by the `namespace/name` of the owner an inverse rule reads off the object.
 */
interface Definition {
  readonly name: string;
  readonly keyIn: (object: KubeObject) => string | undefined;
}

/** The index of one watched type in one cluster. */
interface TypeIndex {
  readonly definitions: readonly Definition[];
  /** Listed completely since the watch began or relisted (a type over the budget is let go whole). */
  complete: boolean;
  /** Whether its watch is synced now (not failing past its grace, not stalled). */
  readonly synced: () => boolean;
  /** `definition\0value` → `namespace\0name` (one name, or several). */
  readonly byValue: Map<string, string | Set<string>>;
  /** `namespace\0name` → the byValue keys it is under, and what it costs. */
  readonly ofObject: Map<string, { readonly keys: readonly string[]; readonly bytes: number }>;
  bytes: number;
}

export interface FinderIndexStats {
  readonly objects: number;
  readonly bytes: number;
  /** Queries answered with candidates, and queries left to a LIST, since the index was made. */
  readonly answered: number;
  readonly listed: number;
}

export interface FinderIndexOptions {
  /** Whether a cluster is the service cluster (rules read their sources on one side). */
  readonly isService: (cluster: string) => boolean;
  /**
   * What all types' entries may cost together; a type that would pass it is let go until its next
   * LIST (`onOverBudget` is told), and its rules LIST again.
   */
  readonly budgetBytes: number;
  readonly onOverBudget?: (cluster: string, type: Pick<ResourceType, 'group' | 'resource'>) => void;
}

export class FinderIndex {
  /** `side\0group\0resource` → how objects of that type are indexed on that side. */
  private readonly definitions = new Map<string, Definition[]>();
  /** `cluster\0group\0resource` → its index. */
  private readonly types = new Map<string, TypeIndex>();
  private bytes = 0;
  private answered = 0;
  private listed = 0;

  private readonly isService: (cluster: string) => boolean;
  private readonly budgetBytes: number;
  private readonly onOverBudget: (cluster: string, type: Pick<ResourceType, 'group' | 'resource'>) => void;

  constructor(
    private readonly agentName: string,
    definitions: readonly IndexDefinition[],
    options: FinderIndexOptions,
  ) {
    this.isService = options.isService;
    this.budgetBytes = options.budgetBytes;
    this.onOverBudget = options.onOverBudget ?? (() => undefined);
    for (const d of definitions) {
      const key = compositeKey(d.side, d.type.group, d.type.resource);
      const list = this.definitions.get(key) ?? [];
      const definition = definitionOf(d.by);
      if (!list.some((x) => x.name === definition.name)) list.push(definition);
      this.definitions.set(key, list);
    }
  }

  /** Whether a watch of this type in this cluster feeds the index: unfiltered, of a type some rule indexes there. */
  wants(cluster: string, type: Pick<ResourceType, 'group' | 'resource'>, labelSelector: string | undefined): boolean {
    return !labelSelector && this.definitionsFor(cluster, type) !== undefined;
  }

  /**
   * A LIST of the type begins (the watch's first, or a relist): until it ends, nothing is answered
   * for the type; after, while `synced` says the watch is.
   */
  beginList(cluster: string, type: Pick<ResourceType, 'group' | 'resource'>, synced: () => boolean): void {
    const definitions = this.definitionsFor(cluster, type);
    if (!definitions) return;
    this.drop(typeKey(cluster, type));
    this.types.set(typeKey(cluster, type), { definitions, complete: false, synced, byValue: new Map(), ofObject: new Map(), bytes: 0 });
  }

  /** The LIST ended: the index answers for the type (unless it went over the budget meanwhile). */
  endList(cluster: string, type: Pick<ResourceType, 'group' | 'resource'>): void {
    const index = this.types.get(typeKey(cluster, type));
    if (index) index.complete = true;
  }

  /** The LIST failed midway: the type is not answered until its next LIST ends. */
  abortList(cluster: string, type: Pick<ResourceType, 'group' | 'resource'>): void {
    this.drop(typeKey(cluster, type));
  }

  /** An object as the watch (or its LIST) delivered it; `object` undefined: deleted. */
  observe({ cluster, group, resource, namespace, name }: ObjectIdentity, object: KubeObject | undefined): void {
    const key = typeKey(cluster, { group, resource });
    const index = this.types.get(key);
    if (!index) return;
    const objectKey = compositeKey(namespace, name);
    this.remove(index, objectKey);
    if (!object || markedSource(object, this.agentName) !== undefined) return;
    const keys: string[] = [];
    let bytes = 0;
    for (const d of index.definitions) {
      const value = d.keyIn(object);
      if (value === undefined) continue;
      const k = compositeKey(d.name, value);
      keys.push(k);
      bytes += k.length * 2;
    }
    if (keys.length === 0) return;
    bytes += ENTRY_BYTES + objectKey.length * 2;
    // Over the budget: the largest type goes (a tenant's flood costs its own type, not another's
    // that happened to come next), and this one too if that is not room enough.
    while (this.bytes + bytes > this.budgetBytes) {
      const largest = [...this.types].reduce<[string, TypeIndex] | undefined>((a, b) => (!a || b[1].bytes > a[1].bytes ? b : a), undefined);
      const [dropKey] = largest !== undefined && largest[1].bytes > 0 ? largest : [key];
      this.letGo(dropKey);
      if (dropKey === key) return;
    }
    for (const k of keys) {
      const had = index.byValue.get(k);
      if (had === undefined) index.byValue.set(k, objectKey);
      else if (typeof had === 'string') index.byValue.set(k, new Set([had, objectKey]));
      else had.add(objectKey);
    }
    index.ofObject.set(objectKey, { keys, bytes });
    index.bytes += bytes;
    this.bytes += bytes;
  }

  /**
   * The objects the query could find, sorted by namespace, then name, as the API server lists
   * them, or undefined when the index cannot answer it (the caller LISTs): the type is not
   * complete here or its watch is not synced, the query has no key the index holds, or there are
   * more than MAX_CANDIDATES.
   */
  candidates(cluster: string, type: Pick<ResourceType, 'group' | 'resource'>, query: ListQuery<unknown>): Array<{ namespace: string; name: string }> | undefined {
    const found = this.find(cluster, type, query);
    if (found) this.answered++;
    else this.listed++;
    return found;
  }

  private find(cluster: string, type: Pick<ResourceType, 'group' | 'resource'>, query: ListQuery<unknown>): Array<{ namespace: string; name: string }> | undefined {
    const index = this.types.get(typeKey(cluster, type));
    if (!index?.complete || !index.synced()) return undefined;
    const keys = this.keysFor(index, query);
    if (!keys) return undefined;
    const found = new Set<string>();
    for (const key of keys) {
      const names = index.byValue.get(key);
      if (names === undefined) continue;
      for (const objectKey of typeof names === 'string' ? [names] : names) {
        // Inverse rules with namespaceFrom list every namespace; an owner's own namespace otherwise.
        if (query.namespace !== undefined && query.namespace !== '' && !objectKey.startsWith(`${query.namespace}\u0000`)) continue;
        found.add(objectKey);
        if (found.size > MAX_CANDIDATES) return undefined;
      }
    }
    return [...found]
      .map((k) => {
        const at = k.indexOf('\u0000');
        return { namespace: k.slice(0, at), name: k.slice(at + 1) };
      })
      .sort((a, b) => (a.namespace !== b.namespace ? (a.namespace < b.namespace ? -1 : 1) : a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  stats(): FinderIndexStats {
    let objects = 0;
    for (const index of this.types.values()) objects += index.ofObject.size;
    return { objects, bytes: this.bytes, answered: this.answered, listed: this.listed };
  }

  /** Where the query names a value of an index of this type: an inverse rule's owner, or a selector's `In` on an indexed label in one namespace. */
  private keysFor(index: TypeIndex, query: ListQuery<unknown>): string[] | undefined {
    if (query.indexed) {
      return index.definitions.some((d) => d.name === query.indexed!.index) ? [compositeKey(query.indexed.index, query.indexed.value)] : undefined;
    }
    // A selector over all namespaces cannot use the namespaced label keys (selector rules always name one, or '' for cluster-scoped types).
    if (query.namespace === undefined) return undefined;
    for (const r of query.selector?.requirements ?? []) {
      if (r.operator !== 'In' || r.values.length === 0) continue;
      const name = labelIndex(r.key);
      if (index.definitions.some((d) => d.name === name)) return r.values.map((v) => compositeKey(name, query.namespace!, v));
    }
    return undefined;
  }

  private definitionsFor(cluster: string, type: Pick<ResourceType, 'group' | 'resource'>): Definition[] | undefined {
    return this.definitions.get(compositeKey(this.isService(cluster) ? 'service' : 'platform', type.group, type.resource));
  }

  private remove(index: TypeIndex, objectKey: string): void {
    const entry = index.ofObject.get(objectKey);
    if (!entry) return;
    index.ofObject.delete(objectKey);
    index.bytes -= entry.bytes;
    this.bytes -= entry.bytes;
    for (const key of entry.keys) {
      const names = index.byValue.get(key);
      if (names === undefined) continue;
      if (typeof names === 'string') {
        if (names === objectKey) index.byValue.delete(key);
        continue;
      }
      names.delete(objectKey);
      if (names.size === 1) index.byValue.set(key, names.values().next().value!);
    }
  }

  private drop(key: string): void {
    const index = this.types.get(key);
    if (!index) return;
    this.bytes -= index.bytes;
    this.types.delete(key);
  }

  /** A type over the budget: answered by LISTs until its next LIST. */
  private letGo(key: string): void {
    this.drop(key);
    const [cluster, group, resource] = key.split('\u0000') as [string, string, string];
    this.onOverBudget(cluster, { group, resource });
  }
}

function labelIndex(key: string): string {
  return `label:${key}`;
}

/** A label's index keys its value within the object's namespace (keysFor asks it so). */
function definitionOf(by: IndexDefinition['by']): Definition {
  if ('ownerOf' in by) return { name: by.name, keyIn: by.ownerOf };
  const label = by.label;
  return {
    name: labelIndex(label),
    keyIn: (o) => {
      const value = o.metadata.labels?.[label];
      return value === undefined ? undefined : compositeKey(o.metadata.namespace ?? '', value);
    },
  };
}

function typeKey(cluster: string, type: Pick<ResourceType, 'group' | 'resource'>): string {
  return compositeKey(cluster, type.group, type.resource);
}
