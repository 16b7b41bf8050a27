/**
 * Full-resync sweeps: a real relist from the API servers, never a replay of
 * a cache. One sweep
 *
 * 1. lists (page by page, never holding a whole list) everything relsync
 *    watches — primaries on every platform cluster, their copies, related
 *    sources and related copies — keeping the objects for step 2 up to a
 *    memory budget, and of the copies only their identities for step 3;
 * 2. reconciles every primary, listed or stored (through the shared work
 *    queue, so a sweep never runs a primary on two workers), each reading
 *    from those LISTs instead of the API servers (cache/sweep-snapshot.ts); every
 *    relation a stored primary has is re-resolved on the way, so objects the
 *    store knows but the lists no longer have are handled too — except the
 *    primaries whose last complete sync acted on exactly the versions the
 *    LISTs show, with no new selector or inverse match among them
 *    (sweep-skip.ts): their reconcile would do nothing;
 * 3. deletes copies that no stored primary or relation accounts for any
 *    more, found in every list, filtered or not (what counts as a copy, and
 *    of what, follows from its marks and where it lives: sync/copy-of.ts;
 *    a primary's copy is kept while its primary lives), and store rows of
 *    types no longer configured. A LIST or a delete that fails is counted
 *    and the rest of the sweep goes on.
 *
 * Its cost is one paginated LIST per watched (cluster, type), the router's
 * lookups for each listed object of a type selector or inverse rules read
 * (an indexed query per label some selector is anchored on, and per inverse
 * rule), one read of the store a page of primaries at a time
 * (store/sweep-queries.ts; what it tells, sweep-accounting.ts), and one
 * comparison (or, where something differs, an in-memory reconcile) per
 * primary, with API requests only for what differs:
 * proportional to the objects, not objects × primaries. Sweeps never overlap:
 * one due while another runs is skipped and counted.
 */
import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type { ClusterSet } from '../kube/cluster-set.js';
import { sameType, typeName, type ResourceType } from '../core/resource-type.js';
import { describeIdentity, identityKey, identityOf, identityProblem } from '../core/identity.js';
import type { RelationStore } from '../store/relation-store.js';
import type { SelectorLabelKeys } from '../store/selector-index.js';
import type { ListPage } from '../kube/resource-client.js';
import type { KubeObject } from '../core/object.js';
import type { SweepTrigger } from '../store/schema.js';
import type { SweepCounts, SweepStore } from '../store/sweep-store.js';
import { copyOf, copySizes, isServiceOriginCopy, type CopyContext, type CopySize } from '../sync/copy-of.js';
import { isSelected, platformNamespaceType } from '../sync/primary-selection.js';
import type { ResolvedResource } from '../sync/resolved-config.js';
import type { ObjectIdentity } from '../core/identity.js';
import type { Metrics } from '../server/metrics.js';
import type { ClusterScope } from './cluster-scope.js';
import type { PrimaryKey } from './primary-key.js';
import type { SweepReads, SweepSnapshot, SweepWindow } from '../cache/sweep-snapshot.js';
import type { PlannedWatch } from './watch-plan.js';
import type { Finished, WorkQueue } from './work-queue.js';
import type { CopyWriter } from '../sync/copy-writer.js';
import { markedSource } from '../core/marks.js';
import { readAhead } from '../util/read-ahead.js';
import { isNotFound } from '../kube/api-error.js';
import type { EventRouter } from './event-router.js';
import { FoundMatches, isUpToDate } from './sweep-skip.js';
import { SweepAccounting } from './sweep-accounting.js';
import type { ClaimKnowledge, DeferredCopy } from '../sync/claim-knowledge.js';
import type { PrimaryAdmission } from '../sync/primary-admission.js';
import { systemClock, type Clock } from '../util/clock.js';
import { loopBreaks } from '../util/loop-breaks.js';

export interface SweeperOptions {
  readonly agentName: string;
  readonly clusters: ClusterSet;
  readonly scope: ClusterScope;
  readonly resources: readonly ResolvedResource[];
  readonly plan: readonly PlannedWatch[];
  readonly store: RelationStore;
  readonly sweeps: SweepStore;
  /** Hands the sweep's LISTs to the reconciles it runs. */
  readonly reads: SweepReads;
  /** Which installation a copy namespace belongs to: an orphan in another's is not this one's to delete. */
  readonly installations?: { otherInstallation(namespace: string): Promise<string | undefined> };
  /** Characters of LIST answers the sweep may hold for its reconciles (resync.snapshotBytes); beyond, they read live. */
  readonly snapshotBytes?: number;
  /** limits.relatedPerPrimary: a primary that rules find more objects for is reconciled, not checked. */
  readonly relatedPerPrimary?: number;
  readonly queue: WorkQueue<PrimaryKey>;
  /** Deletes orphans through the one delete path (CopyWriter.remove), or releases those an Orphan rule may have made. */
  readonly writer: Pick<CopyWriter, 'release' | 'remove'>;
  readonly metrics: Metrics;
  readonly logger: Logger;
  /**
   * Both given: primaries whose last complete sync acted on what the LISTs show are not reconciled
   * (sweep-skip.ts). `finders` tells which primaries a listed object's selector and inverse rules
   * find (the router's answer); `fingerprint`, the config a sync is stored with.
   */
  readonly finders?: Pick<EventRouter, 'isFinderType' | 'foundBySelectorOrInverse'>;
  readonly fingerprint?: { of(resource: ResolvedResource): string };
  /**
   * Told which clusters this sweep saw completely (every primary listed and reconciled): the store
   * knows their claims from then on; the copies left in place until then are decided here.
   */
  readonly claims?: ClaimKnowledge;
  /** Which listed primaries the sweep reconciles: past the limits, new ones are not (sync/primary-admission.ts); default: every one. */
  readonly admission?: Pick<PrimaryAdmission, 'decide' | 'settled'>;
  /** Told of relsync's copies each page of the service cluster holds (sync/copy-budget.ts, listed). */
  readonly copiesListed?: (copies: readonly CopySize[]) => Promise<void>;
  /** Told when every LIST of the service cluster of a sweep completed (sync/copy-budget.ts, recounted). */
  readonly copiesRecounted?: () => void;
  /** What a sweep's phases are timed on, and the time of day of its last success; default systemClock. */
  readonly clock?: Clock;
}

/** Where a sweep's time went (LISTs, reconciles, orphan clean-up, in ms), and how many primaries it skipped. */
export interface SweepPhases {
  listMs: number;
  reconcileMs: number;
  cleanupMs: number;
  /** Primaries not reconciled: their last complete sync acted on what the LISTs showed. */
  skipped: number;
  /**
   * Related copies left in place that may be orphans: their cluster had a primary whose relations
   * were unknown, or a LIST of its primaries that did not complete, or copies left in place while
   * the claims were not known did not fit in memory (a follow-up sweep may look again soon:
   * follow-up-sweeps.ts).
   */
  unsure: number;
  /**
   * Which clusters those copies were kept for, as a digest ('' when none): two sweeps that kept
   * copies for the same clusters have the same (a follow-up that finds the same backs off).
   */
  unsureOf: string;
}

/** What copies were kept unsure for, as SweepPhases.unsureOf says it: a digest of their clusters ('' for none). */
function unsureDigest(clusters: Iterable<string>): string {
  const sorted = [...new Set(clusters)].sort();
  return sorted.length === 0 ? '' : createHash('sha256').update(sorted.join('\n')).digest('hex').slice(0, 16);
}

/** A copy a sweep listed: what the orphan check needs, without the object. */
interface ListedCopy {
  readonly cluster: string;
  readonly type: ResourceType;
  readonly id: ObjectIdentity;
  readonly uid: string | undefined;
  readonly copy: NonNullable<ReturnType<typeof copyOf>>;
}

/** What one sweep gathers while it lists and reconciles, for its orphan check. */
class SweepFindings {
  /** Every primary to reconcile, listed or stored, by identityKey(). */
  readonly queued = new Map<string, PrimaryKey>();
  /** Every listed copy, by identity and uid only: the objects themselves are not kept. */
  readonly copies: ListedCopy[] = [];
  /** Primaries whose reconcile failed: the store may not hold their copy yet, so that copy is not an orphan. */
  readonly failed = new Set<string>();
  /** Clusters with a primary whose relations this sweep does not know (failed, or kept without any stored): their related copies stay. */
  readonly unsure = new Set<string>();
  /**
   * Which primaries exist is known of a cluster only once every primary type's LIST of its
   * platform completed: a LIST that failed (a 503, a timeout, an expired continue token), a
   * workspace bound halfway through one, or a platform without a watch at all (not wired yet)
   * leaves primaries the store may not know, whose related copies would look like orphans.
   */
  readonly primaryLists: PrimaryListCoverage;
  /** The clusters whose primaries a LIST of this sweep showed (those it may find complete). */
  readonly primaryClusters = new Set<string>();
  /**
   * Clusters with a primary whose claims this sweep could not bring into the store: its reconcile
   * failed, it has no record at all (refused by a limit), or it was kept as it was with claims
   * neither resolved anew (a conflict's and a too-big copy's are: PrimaryReconciler.keptClaims)
   * nor written since the store was opened. A kept primary still keeps this sweep from deleting
   * its cluster's unaccounted copies (unsure), but once its claims are in the store the copies
   * other primaries let go are decided.
   */
  readonly claimsUnknown = new Set<string>();
  /** Which copies the store accounts for, and the relations the sweep's reconciles changed. */
  readonly accounting = new SweepAccounting();
  /** Listed primaries past the limits (primary-admission.ts). */
  refusedByLimit = 0;
  /** Whether every LIST of the service cluster completed: then what its copies take is known (copy-budget.ts, recounted). */
  serviceListed = true;

  constructor(resources: readonly ResolvedResource[], platformOf: (cluster: string) => string) {
    this.primaryLists = new PrimaryListCoverage(resources, platformOf);
  }

  include(resource: ResolvedResource, id: ObjectIdentity): void {
    this.queued.set(identityKey(id), { resource, id });
  }

  /** A primary of `cluster` whose relations and claims this sweep cannot know (too costly to read, past a limit, failed, of a workspace bound meanwhile). */
  notKnown(cluster: string): void {
    this.unsure.add(cluster);
    this.claimsUnknown.add(cluster);
  }

  /** Whether `cluster`'s related copies that nothing accounts for may still be a primary's. */
  isUnsure(cluster: string): boolean {
    return this.unsure.has(cluster) || !this.primaryLists.complete(cluster);
  }
}

/** What every step of one sweep's listing and reconciling shares. */
interface SweepListing {
  readonly counts: SweepCounts;
  /** The sweep's reads (cache/sweep-snapshot.ts), and the snapshot its LISTs fill. */
  readonly window: SweepWindow;
  readonly snapshot: SweepSnapshot;
  readonly found: FoundMatches;
  readonly selectorKeys: SelectorLabelKeys | undefined;
}

/** One watch's LIST in a sweep. */
interface WatchList {
  readonly watch: PlannedWatch;
  /** The resource whose primary type it lists, if any. */
  readonly resource: ResolvedResource | undefined;
  /** A LIST of primaries (of a platform; the service cluster's list of the same type holds copies). */
  readonly ofPrimaries: boolean;
  /** Identity clusters this list covers (a kcp platform's list spans its workspaces). */
  readonly covered: Set<string>;
  /** Workspaces bound at the first page; one bound later (or again) lost its objects of the earlier pages. */
  known: Set<string> | undefined;
}

const ZERO: SweepCounts = { primariesSeen: 0, objectsListed: 0, relationsAdded: 0, relationsRemoved: 0, copiesRepaired: 0, copiesRemoved: 0, errors: 0 };

export type SweepResult = SweepCounts & { readonly id: number; readonly durationMs: number; readonly status: 'done' | 'failed' | 'skipped'; readonly phases?: SweepPhases };

export class Sweeper {
  private running = false;
  /** The keys a running sweep took (admission counts them) and has not handed to the queue yet. */
  private notHanded: Map<string, PrimaryKey> | undefined;

  /** What the orphan check needs to tell a copy from anything else; built once, used per listed object. */
  private readonly copies: CopyContext;

  constructor(private readonly options: SweeperOptions) {
    const { agentName, clusters, resources } = options;
    this.copies = { agentName, serviceCluster: clusters.service.name, isPlatform: (c) => clusters.isPlatform(c), resources };
  }

  get busy(): boolean {
    return this.running;
  }

  /**
   * Runs one sweep. Never rejects: a failure, of the API servers or of the store itself (a full
   * disk, a read-only or corrupt file), ends the sweep as 'failed' before its deletes, is logged
   * and counted, and the next sweep runs as usual.
   */
  async sweep(trigger: SweepTrigger): Promise<SweepResult> {
    const { logger, metrics, sweeps } = this.options;
    if (this.running) {
      metrics.sweeps.inc({ trigger, status: 'skipped' });
      logger.warn({ trigger }, 'sweep skipped: the previous sweep is still running');
      await sweeps.skipped(trigger, 'the previous sweep was still running').catch((err: unknown) => logger.error({ trigger, err: (err as Error).message }, 'could not record a skipped sweep in the store'));
      return { ...ZERO, id: 0, durationMs: 0, status: 'skipped' };
    }
    this.running = true;
    try {
      return await this.sweepOnce(trigger);
    } finally {
      this.running = false;
      // A sweep that failed before its reconciles: the room its new primaries took is given back.
      for (const key of this.notHanded?.values() ?? []) this.options.admission?.settled(key.id);
      this.notHanded = undefined;
    }
  }

  private async sweepOnce(trigger: SweepTrigger): Promise<SweepResult> {
    const { logger, metrics, sweeps } = this.options;
    const clock = this.options.clock ?? systemClock;
    const started = clock.now();
    const counts = { ...ZERO };
    const phases: SweepPhases = { listMs: 0, reconcileMs: 0, cleanupMs: 0, skipped: 0, unsure: 0, unsureOf: '' };
    /** The sweep's row in the store; undefined while (or when) it could not be written. */
    let id: number | undefined;
    try {
      id = await sweeps.start(trigger);
      logger.info({ sweep: id, trigger }, 'sweep started');
      await this.run(counts, phases);
      const durationMs = clock.now() - started;
      await sweeps.finish(id, 'done', counts);
      metrics.sweeps.inc({ trigger, status: 'done' });
      metrics.sweepLastSuccess.set(clock.now() / 1000);
      metrics.sweepDuration.observe(durationMs / 1000);
      logger.info({ sweep: id, trigger, durationMs, ...counts, phases }, 'sweep finished');
      return { ...counts, id, durationMs, status: 'done', phases };
    } catch (err) {
      counts.errors++;
      const message = (err as Error).message;
      metrics.sweeps.inc({ trigger, status: 'failed' });
      logger.error({ sweep: id, trigger, err: message }, id === undefined ? 'sweep failed: the store could not record its start (nothing was deleted)' : 'sweep failed');
      if (id !== undefined) {
        const row = id;
        await sweeps.finish(row, 'failed', counts, message).catch((e: unknown) => logger.error({ sweep: row, err: (e as Error).message }, 'could not record the failed sweep in the store'));
      }
      return { ...counts, id: id ?? 0, durationMs: clock.now() - started, status: 'failed' };
    }
  }

  private async run(counts: SweepCounts, phases: SweepPhases): Promise<void> {
    const clock = this.options.clock ?? systemClock;
    let mark = clock.now();
    const lap = () => {
      const now = clock.now();
      const ms = now - mark;
      mark = now;
      return ms;
    };
    const { clusters, store, reads, finders, fingerprint } = this.options;
    const sweep = new SweepFindings(this.options.resources, (c) => clusters.platformOf(c));
    this.notHanded = sweep.queued;
    // Which labels selectors are anchored on, now: objects' other labels cost no lookup. A reconcile
    // that stores a selector on another key while the sweep lists turns skipping off (reconcileAll).
    const selectorKeys = finders && fingerprint ? await store.selectorLabelKeys() : undefined;
    const window = reads.begin(this.options.snapshotBytes ?? Infinity);
    try {
      const at: SweepListing = {
        counts,
        window,
        snapshot: window.snapshot,
        // What selector and inverse rules find among the listed objects (sweep-skip.ts): pairs within a
        // quarter of the snapshot's budget, past it a store read per object.
        found: new FoundMatches((this.options.snapshotBytes ?? Infinity) / 4, (this.options.relatedPerPrimary ?? Infinity) + 1),
        selectorKeys,
      };
      // 1. relist everything, page by page; collect every primary, listed or stored, and every copy
      await this.listAll(sweep, at);
      phases.listMs = lap();
      // 2. reconcile every primary once, from the snapshot of those lists
      await this.reconcileAll(sweep, at, phases);
      phases.reconcileMs = lap();
    } finally {
      window.end();
    }
    // 3. copies nothing accounts for any more, and rows of types no longer configured
    await this.cleanUp(sweep, counts, phases);
    phases.cleanupMs = lap();
  }

  /** Every planned watch's LIST, once, into the sweep's snapshot and findings. */
  private async listAll(sweep: SweepFindings, at: SweepListing): Promise<void> {
    for (const watch of this.options.plan) await this.listOne(sweep, at, watch);
    if (sweep.serviceListed) this.options.copiesRecounted?.();
    if (at.snapshot.overBudget.length > 0) {
      this.options.logger.info({ heldBytes: at.snapshot.heldSize, budget: this.options.snapshotBytes, readLive: at.snapshot.overBudget }, 'the sweep holds no more listed objects than resync.snapshotBytes allows; reconciles read the rest live');
    }
    if (sweep.refusedByLimit > 0) this.options.logger.info({ primaries: sweep.refusedByLimit }, 'listed primaries past limits.primariesPerCluster or limits.primaries are not synced (a few are reconciled to say so); their clusters\' copies are kept');
  }

  /** One watch's LIST, page by page; then the primaries of its clusters the store holds and the LIST lacks. */
  private async listOne(sweep: SweepFindings, at: SweepListing, watch: PlannedWatch): Promise<void> {
    const { clusters, store } = this.options;
    const resource = this.options.resources.find((r) => sameType(r.primaryType, watch.type));
    const list: WatchList = {
      watch,
      resource,
      // A LIST of primaries (of a platform; the service cluster's list of the same type holds copies).
      ofPrimaries: resource !== undefined && watch.cluster !== clusters.service.name,
      covered: new Set<string>([watch.cluster]),
      known: undefined,
    };
    if (list.ofPrimaries) sweep.primaryClusters.add(watch.cluster);
    // A LIST may have no items: its type still counts as listed (what is not in it does not exist).
    at.snapshot.add({ cluster: watch.cluster, type: watch.type, filtered: watch.labelSelector !== undefined, items: [] });
    try {
      // One page ahead: the API server assembles the next page while this one is looked at.
      for await (const page of readAhead(clusters.client(watch.cluster, watch.type).pages({ labelSelector: watch.labelSelector }))) await this.takePage(sweep, at, list, page);
      if (list.ofPrimaries) sweep.primaryLists.listed(watch.cluster, watch.type);
    } catch (err) {
      // One type a cluster does not serve (or an outage of one cluster) must not stop the rest:
      // reconciles read that type live, and copies it did not list wait for the next sweep's orphan check.
      at.counts.errors++;
      if (watch.cluster === clusters.service.name) sweep.serviceListed = false;
      // A plain cluster that does not serve the primary type (its CRD not installed there) has none of
      // its primaries: listed, empty. On kcp a 404 of the path proves nothing (a virtual workspace starting).
      if (list.ofPrimaries && isNotFound(err) && clusters.get(watch.cluster).kind === 'kubernetes') sweep.primaryLists.listed(watch.cluster, watch.type);
      else if (list.ofPrimaries) sweep.primaryLists.failed(watch.cluster);
      for (const cluster of list.covered) at.snapshot.incomplete(cluster, watch.type);
      this.options.logger.warn({ cluster: watch.cluster, type: typeName(watch.type), err: (err as Error).message }, 'sweep could not list a type; the rest of the sweep goes on without it');
    }
    // Stored but not listed: deleted while nobody watched.
    for (const cluster of list.covered) {
      if (list.resource && clusters.isPlatform(cluster)) for (const id of await store.primariesOfType(cluster, watch.type.group, watch.type.resource)) sweep.include(list.resource, id);
    }
  }

  /** One page of a LIST, split by identity cluster (a kcp platform's spans its workspaces). */
  private async takePage(sweep: SweepFindings, at: SweepListing, list: WatchList, page: ListPage): Promise<void> {
    const { clusters, scope } = this.options;
    const { watch } = list;
    at.counts.objectsListed += page.items.length;
    // Objects the LIST found but did not read (too costly to parse) are not gone: what the
    // snapshot lacks of their type is read live (and fails with the refusal), and their
    // cluster's copies are not decided (a refused primary's relations are not known).
    if (page.refused && page.refused.length > 0) {
      if (watch.cluster === clusters.service.name) sweep.serviceListed = false;
      for (const [cluster, part] of scope.split(watch.cluster, page.refused.map((r) => r.object))) {
        // On kcp the split names every workspace, most with nothing refused.
        if (part.length === 0) continue;
        list.covered.add(cluster);
        at.snapshot.incomplete(cluster, watch.type);
        if (list.ofPrimaries) sweep.notKnown(cluster);
        this.options.logger.warn({ cluster, type: typeName(watch.type), objects: part.map((o) => `${o.metadata.namespace ? `${o.metadata.namespace}/` : ''}${o.metadata.name ?? ''}`).slice(0, 10), err: page.refused[0]!.why }, 'sweep: objects too costly to read are refused; what reads them reads them live, and their cluster\'s copies are kept');
      }
    }
    // What relsync's copies there take, where the store does not know it (a store lost or older).
    if (watch.cluster === clusters.service.name) await this.options.copiesListed?.(await copySizes(this.copies, watch.type, page.items));
    const parts = scope.split(watch.cluster, page.items);
    // Workspaces bound at the first page; one bound later (or again) lost its objects of the earlier pages.
    list.known ??= new Set([...parts.keys()].filter((c) => !clusters.isUnbound(c)));
    // The page's measured size, when it is all of one cluster (a kcp list spans workspaces; a
    // split that left out objects of unknown workspaces makes it larger than the part: cautious).
    for (const [cluster, items] of parts) await this.takePart(sweep, at, list, { cluster, items, heapBytes: parts.size === 1 ? page.heapBytes : undefined });
  }

  /** One cluster's objects of a page: into the snapshot; relsync's copies and the primaries noted. */
  private async takePart(sweep: SweepFindings, at: SweepListing, list: WatchList, part: { readonly cluster: string; readonly items: KubeObject[]; readonly heapBytes: number | undefined }): Promise<void> {
    const { clusters, finders, fingerprint, admission } = this.options;
    const { watch, resource } = list;
    const { cluster, items } = part;
    list.covered.add(cluster);
    if (list.ofPrimaries) sweep.primaryClusters.add(cluster);
    at.snapshot.add({ cluster, type: watch.type, filtered: watch.labelSelector !== undefined, items, heapBytes: part.heapBytes });
    if (!list.known!.has(cluster)) {
      at.snapshot.incomplete(cluster, watch.type);
      if (list.ofPrimaries) sweep.notKnown(cluster);
    }
    // Each page's items in one chain of promises that wait for no I/O: the loop goes round every few ms.
    for (const item of items) {
      await loopBreaks.due();
      const copy = copyOf(this.copies, cluster, watch.type, item);
      if (copy) sweep.copies.push({ cluster, type: watch.type, id: identityOf(cluster, watch.type, item), uid: item.metadata.uid, copy });
      // relsync's own copies are never sources of selector or inverse rules (as in the router).
      if (finders && fingerprint && finders.isFinderType(watch.type) && markedSource(item, this.options.agentName) === undefined) {
        const owners = await finders.foundBySelectorOrInverse(cluster, watch.type, item, at.selectorKeys);
        const source = identityOf(cluster, watch.type, item);
        if (owners.length > 0) await at.found.found(owners, source, async () => (await this.options.store.relationsBySource(source)).map((r) => r.primary));
      }
    }
    // relsync's copies on a platform (of service-origin objects) are never primaries.
    if (!resource || !clusters.isPlatform(cluster)) return;
    const primaries = items.filter((item) => !isServiceOriginCopy(this.options.agentName, clusters.service.name, item));
    at.counts.primariesSeen += primaries.length;
    for (const item of primaries) {
      await loopBreaks.due();
      const id = identityOf(cluster, watch.type, item);
      // Only a tenant's own API server lists such names: never a key (the reconciler ignores them too).
      if (identityProblem(id)) continue;
      // Past the limits a new primary is not kept (a tenant's million stays a count), nor
      // reconciled, but for a few whose verdict says why; its cluster's copies are not decided.
      const decision = admission ? await admission.decide(id) : 'take';
      if (decision !== 'take') {
        sweep.notKnown(cluster);
        sweep.refusedByLimit++;
      }
      if (decision !== 'skip') sweep.include(resource, id);
    }
  }

  /**
   * Every primary reconciled once, from the snapshot of the sweep's LISTs, but those whose last
   * complete sync acted on what the LISTs showed (skipped). Also primaries whose watches have not
   * listed yet (first-lists.ts): these reconciles read the sweep's own LISTs, and a cluster whose
   * watches cannot list must not hold a sweep (nor every later one) forever.
   */
  private async reconcileAll(sweep: SweepFindings, at: SweepListing, phases: SweepPhases): Promise<void> {
    const { clusters, queue, store, metrics, finders, fingerprint } = this.options;
    at.window.reconcileFromSnapshot();
    const keysKept = at.selectorKeys !== undefined && at.selectorKeys.equals(await store.selectorLabelKeys());
    if (at.selectorKeys && !keysKept) this.options.logger.info('selectors on new label keys were stored while the sweep listed: it reconciles every primary');
    // The config's fingerprint, once per resource for this sweep (it hashes the whole config).
    const fingerprints = new Map<ResolvedResource, string>();
    const skip = finders && fingerprint && keysKept
      ? { fingerprint: { of: (r: ResolvedResource) => fingerprints.get(r) ?? fingerprints.set(r, fingerprint.of(r)).get(r)! }, listed: at.snapshot, found: at.found, serviceCluster: clusters.service.name, reachable: (c: string) => clusters.has(c) && !clusters.isUnbound(c) }
      : undefined;
    // The store, a page of primaries at a time (two reads per page): the skip checks, and what the
    // orphan check and the sweep's record need (sweep-accounting.ts). A queued primary the store does
    // not know is reconciled.
    for await (const page of store.primariesWithRelations()) {
      for (const { primary, relations } of page) {
        const name = identityKey(primary.id);
        const key = sweep.queued.get(name);
        const skipped = key !== undefined && skip !== undefined && isUpToDate(skip, key, primary, relations);
        sweep.accounting.read(primary, relations, key !== undefined && !skipped);
        if (!skipped) continue;
        sweep.queued.delete(name);
        phases.skipped++;
        store.confirmSynced(primary.id);
      }
    }
    const keys = [...sweep.queued.values()];
    // From here the queue settles each key's admission (onProcessed).
    this.notHanded = undefined;
    metrics.sweepPrimaries.inc({ outcome: 'skipped' }, phases.skipped);
    metrics.sweepPrimaries.inc({ outcome: 'reconciled' }, keys.length);
    await Promise.all(keys.map(async (key) => this.reconciled(sweep, at.counts, key, await queue.addAndWait(key, { ignoreGate: true }))));
    await store.flushTouches();
  }

  /** What one primary's reconcile tells the sweep: what it changed, and whether its cluster's claims are known. */
  private async reconciled(sweep: SweepFindings, counts: SweepCounts, key: PrimaryKey, { outcome, result }: Finished): Promise<void> {
    const { store } = this.options;
    if (outcome === 'error') {
      counts.errors++;
      sweep.failed.add(identityKey(key.id));
      sweep.notKnown(key.id.cluster);
    }
    // It lives, but the store knows none of its relations (refused by a limit, say).
    if (result?.relationsUnknown) sweep.unsure.add(key.id.cluster);
    // Read again as it ends: its pairs for the orphan check, and what it changed.
    const record = await store.primary(key.id);
    const relations = await store.relationsOf(key.id);
    // No record at all (refused by a limit), or kept with claims neither resolved anew nor
    // written since the store was opened (an older store's): the store may lack its claims.
    if (result?.claimsUnknown || (result?.relationsUnknown && !record)) sweep.claimsUnknown.add(key.id.cluster);
    // Kept as it was (error, conflict) with nothing to keep: a store that never knew its relations (new, or a shard's that just arrived).
    if (record && (record.state === 'error' || record.state === 'conflict') && relations.length === 0) sweep.unsure.add(key.id.cluster);
    const changed = sweep.accounting.reconciled(key.id, record, relations);
    counts.relationsAdded += changed.added;
    counts.relationsRemoved += changed.removed;
    // What its run wrote, as the writer counted it (a watch's run of the same primary merged in counts too).
    counts.copiesRepaired += result?.copies?.written ?? 0;
    counts.copiesRemoved += result?.copies?.removed ?? 0;
  }

  /**
   * Copies nothing accounts for any more go, and rows of types no longer configured. Every list is
   * looked at, filtered or not: where an unfiltered watch of a type replaced the filtered one
   * (watch-plan.ts), relsync's copies are among its objects.
   */
  private async cleanUp(sweep: SweepFindings, counts: SweepCounts, phases: SweepPhases): Promise<void> {
    const { clusters, scope, store } = this.options;
    let keptUnsure = 0;
    /** The clusters whose copies were kept as unsure ('' for those the claims could not remember). */
    const keptFor = new Set<string>();
    for (const listed of sweep.copies) {
      const { cluster, type, id, copy } = listed;
      if (clusters.isUnbound(cluster)) continue; // nothing can be deleted there any more
      if ((copy.kind === 'primary' && sweep.failed.has(identityKey(copy.source))) || sweep.accounting.accounts(copy.source, id)) continue;
      // A related copy does not say whose it is: of a tenant with a primary whose relations are unknown, it may be that one's.
      const tenant = cluster === clusters.service.name ? copy.source.cluster : cluster;
      if (copy.kind === 'related' && sweep.isUnsure(tenant)) {
        keptUnsure++;
        keptFor.add(tenant);
        continue;
      }
      try {
        if (await this.deleteIfOrphan(listed)) counts.copiesRemoved++;
      } catch (err) {
        // One copy that cannot be deleted (forbidden, a webhook, an outage) must not keep the others.
        counts.errors++;
        this.options.logger.warn({ copy: describeIdentity(id), type: typeName(type), err: (err as Error).message }, 'sweep could not delete (or release) a copy that no rule resolves to any more; the next sweep tries again');
      }
    }
    // The clusters seen completely: their claims are known from now on, and the copies left in place
    // until then (their last known claim ended) are orphans unless a stored relation accounts for them.
    const claims = this.options.claims;
    if (claims) {
      claims.markComplete([...sweep.primaryClusters].filter((c) => sweep.primaryLists.complete(c) && !sweep.claimsUnknown.has(c)));
      const { errors, overflowed, removed } = await this.decideDeferred();
      counts.errors += errors;
      counts.copiesRemoved += removed;
      // Those not remembered are found by the next sweep's LISTs.
      keptUnsure += overflowed;
      if (overflowed > 0) keptFor.add('');
      // Left in place by reconciles while their cluster's claims were not known, and not complete
      // now either (a reconcile of it failed in this sweep): a follow-up looks again.
      for (const [cluster, waiting] of claims.waiting()) {
        keptUnsure += waiting;
        keptFor.add(cluster);
      }
    }
    phases.unsure = keptUnsure;
    phases.unsureOf = unsureDigest(keptFor);
    if (keptUnsure > 0) this.options.logger.info({ copies: keptUnsure, clusters: [...new Set([...sweep.unsure, ...keptFor])].filter(Boolean), unlisted: sweep.primaryLists.incomplete() }, 'sweep left related copies that no stored relation accounts for in place: their cluster had a primary that failed, was refused or was kept as it was (error, conflict) without a stored relation, or a LIST of its primaries that did not complete, or a reconcile left them while its claims were not known, so they may be a primary\'s; a follow-up sweep may look again before the next scheduled one (at most one per interval: follow-up-sweeps.ts)');
    counts.relationsRemoved += (await store.forgetPrimariesOtherThan(this.options.resources.map((r) => ({ group: r.primaryType.group, resource: r.primaryType.resource })))).relations;
    for (const name of scope.unbound()) if (!(await store.hasPrimaries(name))) await clusters.forgetLogical(name);
  }

  /**
   * The related copies left in place while their cluster's claims were not known, of the clusters
   * whose claims are known now (of `cluster` only, when given): each deleted (or released) if no
   * stored relation accounts for it. Run by every sweep, and when a kcp workspace unbinds
   * (binding-watch.ts): once relsync forgets it, no sweep could complete it. One that cannot be
   * deleted now is left for the next sweep; only the sweep's call hears how many overflowed.
   */
  async decideDeferred(cluster?: string): Promise<{ errors: number; overflowed: number; removed: number }> {
    const claims = this.options.claims;
    if (!claims) return { errors: 0, overflowed: 0, removed: 0 };
    const { copies, overflowed } = claims.takeDecidable(cluster);
    let errors = 0;
    let removed = 0;
    for (const deferred of copies) {
      try {
        if (await this.deleteIfUnclaimed(deferred)) removed++;
      } catch (err) {
        errors++;
        claims.defer(deferred, false);
        this.options.logger.warn({ copy: describeIdentity(deferred.destination), err: (err as Error).message }, 'could not delete a related copy left in place while the claims were not known; the next sweep looks again');
      }
    }
    return { errors, overflowed, removed };
  }

  /**
   * A related copy left in place while the claims were not known: deleted (or released) if it is an
   * orphan now — and still the copy of the source it was left for: another tenant's copy of another
   * source in its place is decided by that tenant's claims, not by these.
   */
  private async deleteIfUnclaimed(deferred: DeferredCopy): Promise<boolean> {
    const { clusters } = this.options;
    const { destination: id, type } = deferred;
    if (!clusters.has(id.cluster) || clusters.isUnbound(id.cluster)) return false;
    const current = await clusters.client(id.cluster, type).get(id.namespace, id.name);
    const copy = current && copyOf(this.copies, id.cluster, type, current);
    if (!current || !copy || copy.kind !== 'related' || identityKey(copy.source) !== identityKey(deferred.source)) return false;
    return this.deleteIfOrphan({ cluster: id.cluster, type, id, uid: current.metadata.uid, copy });
  }

  /**
   * Deletes a copy whose marks name a source that no stored primary or
   * relation copies to it, after a fresh GET: a reconcile may have claimed it
   * since the LIST. A related copy's claim is stored before the claimer reads
   * the copy, so a delete that races it is routed to the claimer, which writes
   * the copy again. A primary's copy is written before the store records the
   * primary, so a primary that exists (and is synced) keeps its copy here.
   */
  private async deleteIfOrphan(listed: ListedCopy): Promise<boolean> {
    const { store, clusters } = this.options;
    const { cluster, type, id } = listed;
    const client = clusters.client(cluster, type);
    const current = await client.get(id.namespace, id.name);
    const copy = current && current.metadata.uid === listed.uid ? copyOf(this.copies, cluster, type, current) : undefined;
    if (!current || !copy || (await store.accounts(copy.source, id))) return false;
    // A live primary's copy that its record does not account for stays unless that record is a
    // complete sync: without one (a lost store), or kept as it was (a name it cannot render now, a
    // workspace path unknown, too deep), the record's copy may be made up, and this one its real copy.
    if (copy.kind === 'primary' && (await store.primary(copy.source))?.state !== 'synced' && (await this.isLivePrimary(copy.source))) return false;
    const other = cluster === clusters.service.name ? await this.options.installations?.otherInstallation(id.namespace) : undefined;
    if (other !== undefined) {
      this.options.logger.error({ copy: describeIdentity(id), installation: other }, `a copy without an owner here is in a namespace of another relsync installation with agent name "${this.options.agentName}": left alone. Two installations must not share an agent name`);
      throw new Error(`${describeIdentity(id)} is in a namespace of another installation (${other})`);
    }
    if (copy.kind === 'related' && this.releasesInstead(cluster, type, copy.source)) {
      // Its primary's reconcile would have released it (cleanupPolicy Orphan): the sweep does too,
      // and puts the marks back if a reconcile claimed it meanwhile.
      if (await this.options.writer.release(client, { kind: 'related', copy: id, source: copy.source, existing: current, claimedAgain: () => store.accounts(copy.source, id) })) {
        this.options.logger.info({ copy: describeIdentity(id), source: describeIdentity(copy.source), type: typeName(type) }, "sweep released a related copy that no rule resolves to any more: relsync's marks are removed and the object is left in place (cleanupPolicy Orphan)");
      }
      return false;
    }
    if ((await this.options.writer.remove(client, { kind: copy.kind, copy: id, source: copy.source, existing: current, decidedOn: 'sweep', why: 'orphan' })) !== 'deleted') return false;
    this.options.logger.info({ copy: describeIdentity(id), source: describeIdentity(copy.source), type: typeName(type) }, 'sweep deleted a copy that no rule resolves to any more');
    return true;
  }

  /**
   * A related copy of this type on this side, of a source of this type, may be an Orphan rule's (the
   * copy does not say which rule made it): released rather than deleted, since of two rules that
   * share the types, releasing loses nothing and deleting could lose what the provider chose to keep.
   */
  private releasesInstead(cluster: string, type: ResourceType, source: ObjectIdentity): boolean {
    if (cluster === this.options.clusters.service.name) return false;
    return this.options.resources.some((r) => r.rules.some((rule) => rule.origin === 'service' && rule.cleanup === 'Orphan' && sameType(rule.destinationType, type) && sameType(rule.sourceType, source)));
  }

  /** A primary that exists, is not being deleted and is selected: its reconcile owns its copy. */
  private async isLivePrimary(id: ObjectIdentity): Promise<boolean> {
    const resource = this.options.resources.find((r) => sameType(r.primaryType, id));
    if (!resource || !this.options.clusters.has(id.cluster) || this.options.clusters.isUnbound(id.cluster)) return false;
    const primary = await this.options.clusters.client(id.cluster, resource.primaryType).get(id.namespace, id.name);
    const clusters = this.options.clusters;
    return primary !== undefined && !primary.metadata.deletionTimestamp && (await isSelected(resource, primary, (ns) => clusters.client(id.cluster, platformNamespaceType).get('', ns)));
  }
}

/**
 * Which platforms a sweep listed every primary type of, completely. A platform
 * is complete once each configured primary type was listed there and no LIST
 * of a primary type failed there.
 */
class PrimaryListCoverage {
  private readonly done = new Map<string, Set<string>>();
  private readonly broken = new Set<string>();

  constructor(
    private readonly resources: readonly ResolvedResource[],
    private readonly platformOf: (cluster: string) => string,
  ) {}

  listed(platform: string, type: ResourceType): void {
    let types = this.done.get(platform);
    if (!types) this.done.set(platform, (types = new Set()));
    types.add(typeName(type));
  }

  failed(platform: string): void {
    this.broken.add(platform);
  }

  complete(cluster: string): boolean {
    const platform = this.platformOf(cluster);
    const types = this.done.get(platform);
    return !this.broken.has(platform) && types !== undefined && this.resources.every((r) => types.has(typeName(r.primaryType)));
  }

  /** The platforms not complete, of those seen (for the log). */
  incomplete(): string[] {
    return [...new Set([...this.broken, ...this.done.keys()])].filter((p) => !this.complete(p));
  }
}

