/**
 * Routes watch events to the primaries they concern, precisely:
 *
 * - a primary on a platform cluster → itself (relsync's copies there, of
 *   service-origin objects, are never primaries, whatever their type);
 * - a copy of a primary in the service cluster → the primary its marks name
 *   (or, when the marks were edited away, the primary the store says it
 *   copies); a related copy (it carries a content hash) is routed by the
 *   store's relations like any related object;
 * - anything else → the primaries that own it as a related source or as a
 *   related copy, found through the store's by-source and by-destination
 *   indexes. Reference and template relations are stored resolved, even
 *   before the object exists, so its creation finds its owner.
 *
 * Never lists primaries per event. On a full LIST (start, or relist after
 * 410), taken page by page, it also routes what the store knows but the
 * list no longer has: objects deleted while nobody watched.
 */
import type { Logger } from 'pino';
import type { ListSink } from '../kube/list-watch.js';
import type { KubeObject } from '../core/object.js';
import { sameType, typeName, type ResourceType } from '../core/resource-type.js';
import { inverseOwner } from '../rules/inverse-owner.js';
import { identityKey, identityOf, identityProblem, type ObjectIdentity } from '../core/identity.js';
import { quote } from '../core/quote.js';
import type { RelationStore } from '../store/relation-store.js';
import type { SelectorLabelKeys } from '../store/selector-index.js';
import { contentOf } from '../sync/content.js';
import type { ContentHasher } from '../sync/content-hasher.js';
import type { ObjectCacheFeed } from '../cache/object-cache.js';
import { isRelatedCopy, markedSource } from '../core/marks.js';
import { copySizes, isServiceOriginCopy, type CopyContext, type CopySize } from '../sync/copy-of.js';
import type { OwnWrites } from '../cache/own-writes.js';
import type { PrimaryAdmission } from '../sync/primary-admission.js';
import { ownerTypeOf, type ResolvedResource } from '../sync/resolved-config.js';
import type { NamespaceFilter } from './namespace-filter.js';
import { mergeKeys, type PrimaryKey } from './primary-key.js';
import type { ResolvedRule } from '../rules/rule.js';
import { CONTENT_HASH_ANNOTATION, STATUS_HASH_ANNOTATION } from '../core/relsync-keys.js';
import { loopBreaks, type LoopBreaks } from '../util/loop-breaks.js';

/**
 * The change of an object that exists but whose content was not read (too costly to parse,
 * kube/list-watch.ts), routed with its metadata only: its owners are queued as for any change, and
 * no version of it is kept, so whatever reads it next reads it live (and meets the refusal).
 */
export const REFUSED = 'REFUSED';

export interface RouterMetrics {
  /** `ownWrite`: the event of relsync's own write, not routed. */
  observeRouted(cluster: string, count: number, ownWrite?: boolean): void;
  countEvent(cluster: string, type: ResourceType, change: string): void;
}

/** How route() takes an object. */
export interface RouteOptions {
  /** The watch's word for the change: ADDED, MODIFIED, DELETED, LIST, REFUSED (not read); default EVENT. */
  readonly change?: string;
  /**
   * Whether the cache may keep this version (default true) — not for a LIST that runs beside the
   * watch of the same objects (a workspace's relist), whose pages may be older than events already handled.
   */
  readonly keep?: boolean;
  /** Whether OwnWrites was asked of this version already (ownWrite(), before it was read): not asked again. */
  readonly ownChecked?: boolean;
}

export interface EventRouterOptions {
  readonly agentName: string;
  readonly serviceCluster: string;
  /** The keyed hash relsync puts on related copies (sync/content-hasher.ts). */
  readonly hasher: ContentHasher;
  /** A platform cluster's name, or a kcp logical cluster's (see kube/cluster-set.ts). */
  readonly isPlatform: (cluster: string) => boolean;
  /** The cluster label of metrics; default: the cluster itself. */
  readonly metricsCluster?: (cluster: string) => string;
  readonly resources: readonly ResolvedResource[];
  readonly store: RelationStore;
  readonly enqueue: (key: PrimaryKey) => void;
  readonly logger: Logger;
  readonly metrics?: RouterMetrics;
  /** Versions relsync wrote itself; their events are not routed. */
  readonly ownWrites?: OwnWrites;
  /**
   * Told every object routed: its version when it concerns relsync (a primary, a copy, an object
   * routed to a primary), or undefined (it concerns nobody, or was deleted), so that reconciles
   * read what the watches delivered (cache/object-cache.ts).
   */
  readonly cache?: Pick<ObjectCacheFeed, 'admit'>;
  /** Namespace selectors: a platform namespace's label change routed to its primaries (namespace-filter.ts). */
  readonly namespaces?: Pick<NamespaceFilter, 'active' | 'changed'>;
  /** Whether a primary's event is queued: past the limits, a new one is not (sync/primary-admission.ts); default: every one. */
  readonly admission?: Pick<PrimaryAdmission, 'mayQueue'>;
  /**
   * Told of relsync's copies each page of a service-cluster LIST holds, with the size of their
   * content, before the page is routed: what they take is counted again where the store lost it
   * (sync/copy-budget.ts, listed).
   */
  readonly copiesListed?: (copies: readonly CopySize[]) => Promise<void>;
  /**
   * Where routing a LIST page lets the event loop go round (util/loop-breaks.ts); default the
   * process's. A page's items are routed in one chain of promises that wait for no I/O.
   */
  readonly loopBreaks?: Pick<LoopBreaks, 'due'>;
}


export class EventRouter {
  private readonly platforms: { has(cluster: string): boolean };
  /** `group/resource` of every type some selector rule selects. */
  private readonly selectorTypes = new Set<string>();
  /** Inverse rules by the `group/resource` of the objects they read. */
  private readonly inverseRules = new Map<string, Array<{ resource: ResolvedResource; rule: ResolvedRule }>>();
  /** `origin/group/resource` of every type some rule reads related sources of, on that side. */
  private readonly sourceTypes = new Set<string>();

  private readonly copies: CopyContext;

  constructor(private readonly options: EventRouterOptions) {
    this.platforms = { has: options.isPlatform };
    this.copies = { agentName: options.agentName, serviceCluster: options.serviceCluster, isPlatform: options.isPlatform, resources: options.resources };
    for (const resource of options.resources) {
      for (const rule of resource.rules) {
        const key = `${rule.sourceType.group}/${rule.sourceType.resource}`;
        if (rule.finder.kind === 'selector') this.selectorTypes.add(key);
        if (rule.finder.kind === 'inverse') this.inverseRules.set(key, [...(this.inverseRules.get(key) ?? []), { resource, rule }]);
        this.sourceTypes.add(`${rule.origin}/${key}`);
      }
    }
  }

  /**
   * Whether the change of an object, of which only its identity was read (a heavy watch line:
   * list-watch.ts), is relsync's own write; if so it is taken as such: routed nowhere, and the
   * cache lets go of the object (its content was not read; the reconcile that wrote it holds it,
   * and the next one reads it from the API server). False: it is to be read and routed.
   */
  async ownWrite(cluster: string, type: ResourceType, object: KubeObject, change: string): Promise<boolean> {
    const id = identityOf(cluster, type, object);
    if (identityProblem(id) || (await this.options.ownWrites?.consume(id, object.metadata.resourceVersion)) !== true) return false;
    const metricsCluster = this.options.metricsCluster?.(cluster) ?? cluster;
    this.options.metrics?.countEvent(metricsCluster, type, change);
    // Its content was not read: whatever the cache held of it goes.
    this.options.cache?.admit(id, object, { readable: false, concerns: false, owner: false });
    this.options.logger.debug({ cluster, type: typeName(type), object: id.namespace ? `${id.namespace}/${id.name}` : id.name, change, enqueued: 0, ownWrite: true, read: false }, 'routed event');
    this.options.metrics?.observeRouted(metricsCluster, 0, true);
    return true;
  }

  /** Routes one object (new or old version); returns how many primaries were enqueued. */
  async route(cluster: string, type: ResourceType, object: KubeObject, { change = 'EVENT', keep = true, ownChecked = false }: RouteOptions = {}): Promise<number> {
    const metricsCluster = this.options.metricsCluster?.(cluster) ?? cluster;
    this.options.metrics?.countEvent(metricsCluster, type, change);
    const id = identityOf(cluster, type, object);
    const impossible = identityProblem(id);
    if (impossible) {
      this.options.logger.warn({ cluster, type: typeName(type), name: quote(id.name), namespace: quote(id.namespace), problem: impossible }, 'an API server delivered an object no Kubernetes API server would hold; it is ignored');
      return 0;
    }
    /** No content to keep or to compare: gone, or not read (REFUSED). */
    const unread = change === 'DELETED' || change === REFUSED;
    // The event of relsync's own write: the reconcile that wrote it already holds this state.
    const unchangedCopy = change !== 'LIST' && !unread && isUnchangedRelatedCopy(object, this.options.agentName, this.options.hasher);
    const ownWrite = !unchangedCopy && !ownChecked && change !== 'LIST' && !unread && (await this.options.ownWrites?.consume(id, object.metadata.resourceVersion)) === true;
    if (ownWrite || unchangedCopy) {
      // Of concern when it is a version relsync wrote (its answer may come after its event) of an
      // object the store knows: an unchanged related copy can be a tenant's clone of one under another name.
      if (this.options.cache) this.options.cache.admit(id, object, { readable: true, concerns: ownWrite || (await this.options.store.ownersOf(id)).length > 0, owner: this.isOwnerType(cluster, type) });
      this.options.logger.debug({ cluster, type: typeName(type), object: id.namespace ? `${id.namespace}/${id.name}` : id.name, change, enqueued: 0, ownWrite: true }, 'routed event');
      this.options.metrics?.observeRouted(metricsCluster, 0, true);
      return 0;
    }
    const keys = new Map<string, PrimaryKey>();
    const add = (key: PrimaryKey | undefined) => {
      if (!key) return;
      const k = identityKey(key.id);
      const earlier = keys.get(k);
      keys.set(k, earlier ? mergeKeys(earlier, key) : key);
    };

    // What an object is follows from its marks, not from its type alone: a type can be a primary
    // type and a related type at once, and relsync's copies on a platform are never primaries.
    const marked = markedSource(object, this.options.agentName);
    const primaryResource = this.resourceFor(type.group, type.resource);
    // A primary's own event; admission (past the limits, a new one is not queued) is asked last, right
    // before the keys are queued, so that nothing it counts is left unqueued by a failure between.
    const primaryKey = primaryResource && this.platforms.has(cluster) && !isServiceOriginCopy(this.options.agentName, this.options.serviceCluster, object) ? { resource: primaryResource, id } : undefined;
    const copyResource = cluster === this.options.serviceCluster ? this.resourceByCopyType(type) : undefined;
    if (copyResource) {
      // A copy of a primary: the primary its marks name (a copy can be written before the store
      // records it), or, when its marks were edited away, the primary the store says it copies. A
      // related copy (it carries a content hash) is routed by the relations below instead.
      if (marked && !isRelatedCopy(object) && this.platforms.has(marked.cluster) && sameType(marked, copyResource.primaryType)) add({ resource: copyResource, id: marked });
      else add(this.keyFor((await this.options.store.primaryByCopy(id))?.id));
    }
    // A platform namespace read by namespace selectors: kept for the reconciles that read it.
    const selectedBy = this.options.namespaces?.active === true && this.platforms.has(cluster) && type.group === '' && type.resource === 'namespaces';
    if (selectedBy) for (const key of await this.options.namespaces!.changed(cluster, object, change, keep)) add(key);
    // relsync's own copies are never sources of selector or inverse rules.
    const ownCopy = marked !== undefined;
    // Reference, template and former matches: the store's relations by identity
    // (this is also how an object that lost a label reaches its former owner).
    // A changed source of a reference or template relation concerns that relation
    // alone: its primary gets an edge (sync/edge-sync.ts); anything else, the whole primary.
    const edgeChange = (change === 'ADDED' || change === 'MODIFIED') && !ownCopy;
    for (const r of await this.options.store.relationsBySource(id)) {
      const key = this.keyFor(r.primary);
      const rule = key?.resource.rules.find((x) => x.id === r.ruleId);
      const named = rule?.finder.kind === 'reference' || rule?.finder.kind === 'template';
      add(key && edgeChange && named ? { ...key, edges: [{ ruleId: r.ruleId, source: r.source, destination: r.destination }] } : key);
    }
    for (const owner of await this.options.store.ownersByDestination(id)) add(this.keyFor(owner));
    if (!ownCopy) for (const key of await this.foundBySelectorOrInverse(cluster, type, object)) add(key);

    if (primaryKey && (this.options.admission === undefined || (await this.options.admission.mayQueue(id)))) add(primaryKey);
    // The cache decides what it keeps for reconciles from what routing found (cache/object-cache.ts admissionOf).
    this.options.cache?.admit(id, object, {
      readable: keep && !unread,
      concerns: keys.size > 0,
      owner: this.isOwnerType(cluster, type),
      maySource: change === 'LIST' && !ownCopy && this.isSourceType(cluster, type),
      selectedNamespace: selectedBy,
    });
    for (const key of keys.values()) this.options.enqueue(key);
    this.options.metrics?.observeRouted(metricsCluster, keys.size);
    if (change !== 'LIST') {
      this.options.logger.debug({ cluster, type: typeName(type), object: id.namespace ? `${id.namespace}/${id.name}` : id.name, change, enqueued: keys.size }, 'routed event');
    }
    return keys.size;
  }

  /** Whether selector or inverse rules read objects of this type: foundBySelectorOrInverse() may find owners for them. */
  isFinderType(type: Pick<ResourceType, 'group' | 'resource'>): boolean {
    const key = `${type.group}/${type.resource}`;
    return this.selectorTypes.has(key) || this.inverseRules.has(key);
  }

  /**
   * The primaries whose selector or inverse rules find this object as it is now (not relsync's own
   * copies: the caller leaves those out), from the store's selectors and the object's own owner
   * pointer. Also what a sweep asks of every listed object (sweep-skip.ts), with a snapshot of the
   * label keys selectors are anchored on (`selectorKeys`), so that other labels cost no lookup.
   */
  async foundBySelectorOrInverse(cluster: string, type: ResourceType, object: KubeObject, selectorKeys?: SelectorLabelKeys): Promise<PrimaryKey[]> {
    const found: PrimaryKey[] = [];
    const id = identityOf(cluster, type, object);
    // Selector rules: candidate selectors by the object's current labels.
    if (this.selectorTypes.has(`${type.group}/${type.resource}`)) {
      const scope = { cluster, group: type.group, resource: type.resource, namespace: id.namespace };
      for (const owner of await this.options.store.selectorOwners(scope, object.metadata.labels, selectorKeys)) {
        const key = this.keyFor(owner);
        if (key) found.push(key);
      }
    }
    // Inverse rules: the owner is computed from the object itself, in its own cluster.
    for (const { resource, rule } of this.inverseRules.get(`${type.group}/${type.resource}`) ?? []) {
      const finder = rule.finder as Extract<ResolvedRule['finder'], { kind: 'inverse' }>;
      const owner = ownerTypeOf(resource, rule);
      const ref = inverseOwner(finder, object, owner.kind, owner.group);
      if (!ref) continue;
      const named = { cluster, group: owner.group, resource: owner.resource, namespace: ref.namespace, name: ref.name };
      if (rule.origin === 'platform' && this.platforms.has(cluster)) {
        const record = await this.options.store.primary(named);
        if (record && (ref.uid === undefined || ref.uid === record.uid)) found.push({ resource, id: record.id });
      } else if (rule.origin === 'service' && cluster === this.options.serviceCluster) {
        const key = this.keyFor((await this.options.store.primaryByCopy(named))?.id);
        if (key) found.push(key);
      }
    }
    return found;
  }

  /**
   * Routes a complete LIST as it arrives, page by page: every item, then, at
   * its end, the owners of every stored object of this type the list did not
   * have. What the store knows of the type is read at the first page and
   * crossed off as items arrive, so memory follows the store, not the list:
   * a tenant's many objects that nothing relates to cost nothing here. What
   * the store learnt while the list ran cannot be checked against it (its
   * objects may have been listed before): its owners are queued at the end,
   * as they would be for an event. An object the list found but did not read (refused) is not
   * gone: it is routed as REFUSED.
   */
  beginList(cluster: string, type: ResourceType, labelSelector: string | undefined, keep = true): ListSink {
    let stored: Promise<Map<string, ObjectIdentity[]>> | undefined;
    let before: Set<string> | undefined;
    const expected = () =>
      (stored ??= this.storedOfType(cluster, type, labelSelector).then((known) => {
        before = new Set(known.keys());
        return known;
      }));
    return {
      page: async (items, refused = []) => {
        const known = await expected();
        if (cluster === this.options.serviceCluster && this.options.copiesListed) await this.options.copiesListed(await copySizes(this.copies, type, items));
        // Routing an item reads the store several times (relations, owners, selectors, admission) and
        // waits for no I/O: the loop goes round every few ms (a tenant's first LIST of a flood, 500
        // primaries a page, held another tenant's change for the whole page).
        const breaks = this.options.loopBreaks ?? loopBreaks;
        for (const item of items) {
          await breaks.due();
          known.delete(identityKey(identityOf(cluster, type, item)));
          await this.route(cluster, type, item, { change: 'LIST', keep });
        }
        for (const item of refused) {
          await breaks.due();
          known.delete(identityKey(identityOf(cluster, type, item)));
          await this.route(cluster, type, item, { change: REFUSED, keep });
        }
      },
      end: async () => {
        let missing = 0;
        const enqueue = (owners: readonly ObjectIdentity[]) => {
          for (const owner of owners) {
            const key = this.keyFor(owner);
            if (!key) continue;
            this.options.enqueue(key);
            missing++;
          }
        };
        for (const owners of (await expected()).values()) enqueue(owners);
        for (const [key, owners] of await this.storedOfType(cluster, type, labelSelector)) if (!before!.has(key)) enqueue(owners);
        if (missing > 0) this.options.logger.info({ cluster, type: type.resource, missing }, 'objects known to the store are gone or were learnt while the list ran; their primaries are queued');
      },
    };
  }

  /** Every object of this type the store knows in this cluster (by identity key), with the primaries to queue if it is gone. */
  private async storedOfType(cluster: string, type: ResourceType, labelSelector: string | undefined): Promise<Map<string, ObjectIdentity[]>> {
    const known = new Map<string, ObjectIdentity[]>();
    const expect = (id: ObjectIdentity, owner: ObjectIdentity) => {
      const key = identityKey(id);
      const owners = known.get(key);
      if (owners) owners.push(owner);
      else known.set(key, [owner]);
    };
    const primaryResource = this.resourceFor(type.group, type.resource);
    if (primaryResource && this.platforms.has(cluster)) {
      for (const id of await this.options.store.primariesOfType(cluster, type.group, type.resource)) expect(id, id);
    }
    if (cluster === this.options.serviceCluster && this.resourceByCopyType(type)) {
      for (const p of await this.options.store.primariesByCopyType(cluster, type.group, type.resource)) expect(p.copy, p.id);
    }
    // A filtered watch (relsync's own copies) can only vouch for objects that carry the marks.
    for (const r of await this.options.store.relationsTouchingType(cluster, type.group, type.resource)) {
      const endpoint = r.source.cluster === cluster && sameType(r.source, type) ? r.source : r.destination;
      if (labelSelector && endpoint === r.source) continue;
      expect(endpoint, r.primary);
    }
    return known;
  }

  /** A primary, or a copy of one (a primary type on a platform, a copy type in the service cluster), is kept ahead of related objects (cache/object-cache.ts). */
  private isOwnerType(cluster: string, type: ResourceType): boolean {
    const owner = this.platforms.has(cluster) ? this.resourceFor(type.group, type.resource) : cluster === this.options.serviceCluster ? this.resourceByCopyType(type) : undefined;
    return owner !== undefined;
  }

  /** Whether some rule reads related sources of this type in this cluster. */
  private isSourceType(cluster: string, type: ResourceType): boolean {
    const side = this.platforms.has(cluster) ? 'platform' : cluster === this.options.serviceCluster ? 'service' : undefined;
    return side !== undefined && this.sourceTypes.has(`${side}/${type.group}/${type.resource}`);
  }

  private resourceFor(group: string, resource: string): ResolvedResource | undefined {
    return this.options.resources.find((r) => r.primaryType.group === group && r.primaryType.resource === resource);
  }

  /** The resource whose copies in the service cluster are of this type. */
  private resourceByCopyType(type: Pick<ResourceType, 'group' | 'resource'>): ResolvedResource | undefined {
    return this.options.resources.find((r) => sameType(r.copyType, type));
  }

  private keyFor(id: ObjectIdentity | undefined): PrimaryKey | undefined {
    if (!id) return undefined;
    const resource = this.resourceFor(id.group, id.resource);
    return resource ? { resource, id } : undefined;
  }
}

/**
 * A related copy whose content is still exactly what relsync wrote (its
 * content-hash annotation matches): its event is relsync's own write, not
 * drift. Deterministic, unlike matching resourceVersions, whose event can
 * arrive before the write's answer.
 */
function isUnchangedRelatedCopy(object: KubeObject, agentName: string, hasher: ContentHasher): boolean {
  const written = object.metadata.annotations?.[CONTENT_HASH_ANNOTATION];
  // A copy whose status relsync writes (syncStatus) is unchanged only with that status, too.
  const status = object.metadata.annotations?.[STATUS_HASH_ANNOTATION];
  if (status !== undefined && hasher.hashStatus(object.status) !== status) return false;
  return written !== undefined && markedSource(object, agentName) !== undefined && hasher.hash(contentOf(object)) === written;
}
