/**
 * Reconciles one primary, level-based: it re-reads the primary, its copy, the
 * related objects and the store, never trusting an event's payload, and
 * brings the other side in line:
 *
 * 1. primary gone, being deleted, or filtered out → finalize: delete the
 *    copy, wait until it is gone, delete related copies no other primary
 *    owns, drop the finalizer, forget the primary;
 * 2. otherwise, in steps, each of which may end the reconcile with a
 *    NotSynced (why, and what the store keeps: refuse() shows it as an Event
 *    and the verdict and stores it): admit (limits, depth, workspace path) →
 *    planCopy (name, content, size, budget, Secret type) → placeCopy
 *    (finalizer on, copy namespace claimed, copy created/updated — never one
 *    without our marks: a conflict —, status copied back) → resolveRelated
 *    (every rule's claims stored before any related copy is touched) →
 *    syncRelated (relations that no longer resolve released, the others
 *    synced) → finish;
 * 3. finish: the verdict on the primary, then the store gets the outcome in
 *    one transaction.
 */
import type { Logger } from 'pino';
import { defaultCopyPolicy, type CopyPolicy } from '../config/copy-policy.js';
import { describeIdentity, identityKey, identityProblem, sameIdentity, type ObjectIdentity } from '../core/identity.js';
import { apiVersionOf, sameType, typeName } from '../core/resource-type.js';
import { selectorQuery } from '../core/label-selector.js';
import { mutated, specView } from '../rules/mutation.js';
import { isSelected, platformNamespaceType, selectionFingerprint } from './primary-selection.js';
import type { KubeObject } from '../core/object.js';
import { done, type Result } from '../core/result.js';
import { ApiError, isForbidden, isNotFound } from '../kube/api-error.js';
import { TypeNotServedError } from '../kube/discovery.js';
import { namespaceProblem, objectNameProblem, sidesOf } from '../rules/resolve-related.js';
import type { TemplateContext } from '../rules/template.js';
import { leftNothing, type PrimaryRecord, type PrimaryVersions, type RelationRecord } from '../store/records.js';
import { ROW_BYTES, type KnownRows, type RelationStore } from '../store/relation-store.js';
import type { PrimaryState } from '../store/schema.js';
import { selectorKeys, type SelectorRecord } from '../store/selector-index.js';
import { systemClock, type Clock } from '../util/clock.js';
import type { PrimaryAdmission } from './primary-admission.js';
import type { CopyBudget } from './copy-budget.js';
import { Semaphore } from '../util/semaphore.js';
import { heavyTurns } from '../util/heavy-turns.js';
import type { ClusterAccess, ObjectClient } from '../cache/cluster-access.js';
import { contentOf, deepEqual, stableJson, type CopyContent } from './content.js';
import type { ContentHasher } from './content-hasher.js';
import type { ConfigFingerprint } from './config-fingerprint.js';
import { isServiceOriginCopy } from './copy-of.js';
import type { CopyNamespaces } from './copy-namespaces.js';
import { CopyRefusals } from './copy-refusals.js';
import { CopyWriter, newTally, type CopyTally, type RemovalReason } from './copy-writer.js';
import { EdgeSync, type EdgeHint } from './edge-sync.js';
import type { EventRecorder } from './event-recorder.js';
import { agentSelector, isRelatedCopy, marksFor } from '../core/marks.js';
import { WorkspacePathError, WorkspacePaths } from './workspace-paths.js';
import type { ClaimKnowledge } from './claim-knowledge.js';
import { AdoptionRefusals } from './adoption.js';
import { confirmLive, LiveReads, ReadAgainLive, ReadSession, type ObjectReads } from '../cache/object-reads.js';
import type { OwnWrites } from '../cache/own-writes.js';
import { objectVersion } from '../core/object-version.js';
import { claimKey, claimsOf, RelatedFinder, type Claim, type Found, type RelationOutcome, type RulePlan } from './related-finder.js';
import { RelationSync } from './relation-sync.js';
import { showsSynced, SyncVerdicts, type Verdict } from './sync-verdict.js';
import type { ResolvedResource } from './resolved-config.js';
import type { SyncMetrics } from './sync-metrics.js';
import { CONFLICT_RETRY_MS } from './sync-intervals.js';
import { APPLIED_HASH_ANNOTATION, SOURCE_UID_ANNOTATION, WORKSPACE_PATH_ANNOTATION, finalizerName } from '../core/relsync-keys.js';

export interface ReconcilerDeps {
  readonly agentName: string;
  readonly clusters: ClusterAccess;
  readonly store: RelationStore;
  readonly recorder: EventRecorder;
  readonly logger: Logger;
  readonly metrics: SyncMetrics;
  /** Versions of relsync's own writes, whose watch events need no reconcile. */
  readonly ownWrites?: OwnWrites;
  /** How soon to look again at a conflict; default CONFLICT_RETRY_MS (30 s). */
  readonly conflictRetryMs?: number;
  /** How one reconcile of this primary reads, live reads included (cache/sweep-snapshot.ts `sessionFor`); default: the API servers through `clusters`. */
  readonly sessionFor?: (primary: ObjectIdentity, afterConflict: boolean) => ReadSession;
  /** Which labels, annotations and Secret types are copied; default: the defaults of config/copy-policy.ts. */
  readonly copyPolicy?: CopyPolicy;
  /** Told of every copy this reconciler deleted (so that a sweep's snapshot no longer answers for it). */
  readonly onDeleted?: (copy: ObjectIdentity) => void;
  /** Caps on what one primary's copies may cost; default: 500 related objects, 1 MiB per copy. */
  readonly limits?: { readonly relatedPerPrimary: number; readonly copyBytes: number };
  /** What each tenant's copies may take in the service cluster (copy-budget.ts); default: no budget. */
  readonly budget?: CopyBudget;
  /** Which new primaries are taken on (primary-admission.ts); default: every one. */
  readonly admission?: PrimaryAdmission;
  /** Keyed hashes of related copies' content (content-hasher.ts). */
  readonly hasher: ContentHasher;
  /** Told of every version relsync wrote (or, `after`, deleted): the cache reads back nothing older. */
  readonly onWritten?: (id: ObjectIdentity, resourceVersion: string | undefined, after?: boolean) => void;
  /** Where copies go and whom their namespaces serve. */
  readonly copyNamespaces: CopyNamespaces;
  /** The config a complete sync is stored with (config-fingerprint.ts); without it, no versions are stored and sweeps skip nothing. */
  readonly fingerprint?: ConfigFingerprint;
  /** Whether the store knows every claim of a cluster (claim-knowledge.ts); without it, the store is trusted. */
  readonly claims?: ClaimKnowledge;
  /** Time, for everything a reconcile remembers or stamps; default systemClock. */
  readonly clock?: Clock;
}

/**
 * The result of a reconcile that kept the primary's relations as the store had them instead of
 * resolving them (a conflict, a limit, a name or a rule it cannot use now): with a store that is
 * new or older, the copies the primary resolves to may be in none of them, and a sweep must not
 * take them for orphans (controller/sweeper.ts).
 */
const KEPT_AS_IT_WAS = { relationsUnknown: true } as const;

/** One reconcile of one primary: where it reads, what it is, and what the store held of it when it began. */
interface ReconcileScope {
  readonly reads: ObjectReads;
  readonly resource: ResolvedResource;
  readonly id: ObjectIdentity;
  readonly record: PrimaryRecord | undefined;
  /** The copies this run writes and deletes, counted by the writer (Result `copies`). */
  readonly tally: CopyTally;
}

/** What the store keeps of a primary that is not synced now, and so what it claims. */
type Kept =
  /** Nothing is stored (a new primary over a limit): its copies may exist, and its claims are unknown. */
  | { readonly kind: 'unrecorded' }
  /** Its stored relations as they are, saved with `copy` (not saved without one); claims known only if this store saw them written. */
  | { readonly kind: 'stored'; readonly copy: ObjectIdentity | undefined }
  /** Its stored relations and what its rules resolve to now (keptClaims), its copy looked for at `copy`, recorded as `recordAs`. */
  | { readonly kind: 'claims'; readonly copy: ObjectIdentity; readonly recordAs: ObjectIdentity; readonly context: TemplateContext }
  /** No relation: the copy is not wanted (`remove` takes it away, after the verdict is shown). */
  | { readonly kind: 'none'; readonly copy: ObjectIdentity; readonly remove?: () => Promise<unknown> };

/** Why a step of a reconcile does not go on (PrimaryReconciler.refuse shows and stores it). */
interface NotSynced {
  /** The Warning Event's and the verdict's reason. */
  readonly reason: string;
  /** The verdict's message, and the store's. */
  readonly message: string;
  /** The Event's text, where it says more than the verdict. */
  readonly event?: string;
  /** The primary as last read or written: the Event and the verdict go on it. */
  readonly primary: KubeObject;
  /** The stored state; default 'error'. */
  readonly state?: 'error' | 'conflict';
  readonly kept: Kept;
  /** Looked at again after conflictRetryMs (nothing else says when it may change). */
  readonly requeue?: boolean;
  /** Counted in relsync_conflicts_total with this kind. */
  readonly conflict?: 'namespace' | 'primary';
}

/** The primary's copy as planned: where it goes and what it holds. */
interface CopyPlan {
  readonly copyId: ObjectIdentity;
  readonly copyNamespace: string;
  readonly context: TemplateContext;
  readonly workspacePath: string | undefined;
  readonly content: { readonly content: CopyContent; readonly serialized: string };
  readonly mutationProblems: readonly string[];
}

/** The primary's copy as written, and the primary as it is after (finalizer, status). */
interface PlacedCopy {
  readonly copyId: ObjectIdentity;
  readonly context: TemplateContext;
  readonly copy: KubeObject;
  readonly primary: KubeObject;
}

/** What a reconcile is about to act on, stored first (recordIntent). */
interface Intent {
  readonly id: ObjectIdentity;
  readonly primary: KubeObject;
  readonly copyId: ObjectIdentity;
  readonly relations: readonly RelationOutcome[];
  readonly selectors: readonly SelectorRecord[];
  readonly known: KnownRows;
}

/** What the rules resolve to, as claimed in the store. */
interface ResolvedRelated {
  readonly found: ReadonlyArray<{ plan: RulePlan } & Found>;
  /** The relations the store held when the reconcile began. */
  readonly stored: readonly RelationOutcome[];
  readonly selectors: readonly SelectorRecord[];
  readonly relations: readonly RelationOutcome[];
  readonly known: KnownRows;
  /** A rule was cut at limits.relatedPerPrimary. */
  readonly capped: boolean;
}

/** Every relation's outcome, and what the primary was warned of. */
interface RelatedSynced {
  readonly outcomes: readonly RelationOutcome[];
  readonly problems: readonly string[];
  readonly conflicts: readonly RelationOutcome[];
}

/** Everything the outcome of a reconcile that got to the related objects is made of (PrimaryReconciler.finish). */
type SyncOutcome = PlacedCopy & ResolvedRelated & RelatedSynced & { readonly namespace: KubeObject | undefined };

/** What the queue's key says of one run (controller/primary-key.ts). */
export interface ReconcileHints {
  /** Only these relations changed (their source); undefined: reconcile the whole primary. */
  readonly edges?: readonly EdgeHint[] | undefined;
  /**
   * Read everything from the API servers, not from what the watches delivered: the last run met a
   * 409 (something it read was older than what it wrote over).
   */
  readonly readLive?: boolean;
}

export class PrimaryReconciler {
  private readonly finalizer: string;
  private readonly live: ObjectReads;

  private readonly policy: CopyPolicy;
  private readonly copyNamespaces: CopyNamespaces;
  /** Which related objects a primary's rules find (related-finder.ts). */
  private readonly finder: RelatedFinder;
  /** Creates, updates and deletes copies, never one without relsync's marks (copy-writer.ts). */
  private readonly writer: CopyWriter;
  /** Why a copy is not written (copy-refusals.ts). */
  private readonly refusals: CopyRefusals;
  /** What happens to each relation (relation-sync.ts). */
  private readonly relations: RelationSync;
  /** A change that concerns one relation, synced alone (edge-sync.ts). */
  private readonly edges: EdgeSync;
  private readonly paths: WorkspacePaths;
  private readonly adoptionRefusals: AdoptionRefusals;
  /** relsync's verdict, shown on the primary (sync-verdict.ts). */
  private readonly verdicts: SyncVerdicts;
  /** Which new primaries are taken on, within the limits. */
  private readonly admission: PrimaryAdmission | undefined;

  constructor(private readonly deps: ReconcilerDeps) {
    const clock = deps.clock ?? systemClock;
    this.finder = new RelatedFinder(deps);
    this.admission = deps.admission;
    this.policy = deps.copyPolicy ?? defaultCopyPolicy;
    this.copyNamespaces = deps.copyNamespaces;
    this.finalizer = finalizerName(deps.agentName);
    this.live = new LiveReads(deps.clusters);
    this.writer = new CopyWriter(deps);
    this.refusals = new CopyRefusals(this.policy, deps.clusters, deps.limits?.copyBytes);
    this.relations = new RelationSync({ ...deps, policy: this.policy, refusals: this.refusals, writer: this.writer, finder: this.finder });
    this.paths = new WorkspacePaths(deps.clusters, clock);
    this.adoptionRefusals = new AdoptionRefusals(deps.logger, deps.agentName, clock);
    this.verdicts = new SyncVerdicts({ clusters: deps.clusters, logger: deps.logger, write: (id, precondition, write, onlyOurs) => this.writePrimary(id, precondition, write, onlyOurs), clock });
    this.edges = new EdgeSync({ ...deps, finalizer: this.finalizer, finder: this.finder, relations: this.relations, writer: this.writer, paths: this.paths, verdicts: this.verdicts, refusals: this.refusals });
  }

  /**
   * `hints.edges`: the change concerned only these relations (a referenced object changed); they
   * are synced alone when the store and the objects show that a full reconcile would do the same
   * (edge-sync.ts), otherwise the primary is reconciled in full. `hints.readLive`: read everything
   * from the API servers, not from what the watches delivered (the last run met a 409). A failed
   * run throws; the queue retries it as the whole primary (controller/primary-key.ts retryKey).
   */
  async reconcile(resource: ResolvedResource, id: ObjectIdentity, hints: ReconcileHints = {}): Promise<Result> {
    // Only a tenant's own API server sends such names (a sweep's LIST included): never a row or a key.
    if (identityProblem(id)) return done;
    const session = this.deps.sessionFor?.(id, hints.readLive === true) ?? new ReadSession(this.live, this.live);
    const tally = newTally();
    const counted = (result: Result): Result => (tally.written + tally.removed > 0 ? { ...result, copies: { ...tally } } : result);
    if (hints.edges && hints.readLive !== true) {
      try {
        if ((await this.edges.sync({ reads: session.first, resource, id, edges: hints.edges, tally })) === 'done') return counted(done);
      } catch (err) {
        // About to delete on the cache's word: the full reconcile below decides, live where it must.
        if (!(err instanceof ReadAgainLive)) throw err;
      }
    }
    // About to delete on the cache's word: the API servers decide, from the start (cache/object-reads.ts).
    return counted(await session.run((reads) => this.reconcileWith(reads, resource, id, tally)));
  }

  private async reconcileWith(reads: ObjectReads, resource: ResolvedResource, id: ObjectIdentity, tally: CopyTally): Promise<Result> {
    const { clusters, store } = this.deps;
    const record = await store.primary(id);
    if (!clusters.has(id.cluster)) {
      // A kcp workspace relsync has forgotten (nothing of it is stored), or a cluster no longer configured: never a reason to delete copies.
      if (!record) return done;
      throw new Error(`${describeIdentity(id)}: cluster "${id.cluster}" is not configured; its copies are left in place`);
    }
    // A kcp workspace that unbound the export cannot be read: its primaries are gone for relsync.
    const primary = clusters.isUnbound(id.cluster) ? undefined : await reads.get(id.cluster, resource.primaryType, id.namespace, id.name);

    const scope: ReconcileScope = { reads, resource, id, record, tally };
    // relsync's copies on a platform are never primaries (a service-origin copy whose type is a primary type).
    let namespace: KubeObject | undefined;
    const namespaceOf = async (ns: string) => (namespace = await reads.get(id.cluster, platformNamespaceType, '', ns));
    if (!primary || primary.metadata.deletionTimestamp || isServiceOriginCopy(this.deps.agentName, clusters.service.name, primary) || !(await isSelected(resource, primary, namespaceOf))) {
      // Confirmed live where something could be deleted (a primary relsync never synced has nothing to lose).
      if (primary && (record || primary.metadata.finalizers?.includes(this.finalizer))) confirmLive(reads);
      if (primary && !primary.metadata.deletionTimestamp) this.deps.logger.debug({ primary: describeIdentity(id) }, 'not synced: not selected by the resource\'s selector or namespace selector, or one of relsync\'s copies');
      // The copy may be of the stored incarnation or of this one (deleted and created again since).
      // Without a record (a lost, older or another shard's store) a primary that carries relsync's
      // finalizer was synced: its copy is where the naming puts it, and it goes before the primary does.
      const copyId = record?.copy ?? (primary?.metadata.finalizers?.includes(this.finalizer) ? await this.namedCopyOf(reads, resource, id, primary) : undefined);
      return this.finalize(scope, primary, copyId);
    }
    if (record && record.uid !== primary.metadata.uid) {
      // Deleted and recreated while nobody looked: the old one's copy goes first (unless it is
      // already this one's). Related copies do not depend on the primary's uid: the ones this
      // incarnation no longer resolves to are ended below, like any stale relation.
      confirmLive(reads);
      const waiting = await this.removeCopy(scope, record.copy, [record.uid], 'earlier incarnation');
      if (waiting) return waiting;
    }
    // The steps of a sync; each one that cannot go on says why (NotSynced), and refuse() shows and stores it.
    const admitted = await this.admit(scope, primary);
    if ('reason' in admitted) return this.refuse(scope, admitted);
    const planned = await this.planCopy(scope, primary, admitted.workspacePath);
    if ('reason' in planned) return this.refuse(scope, planned);
    const placed = await this.placeCopy(scope, primary, planned);
    if ('reason' in placed) return this.refuse(scope, placed);
    const related = await this.resolveRelated(scope, placed);
    const relationsSynced = await this.syncRelated(scope, placed.primary, related);
    return this.finish(scope, { ...placed, ...related, ...relationsSynced, namespace });
  }

  /**
   * Whether a selected primary is taken on now: within the limits (a new one), not nested deeper
   * than relsync reads, and (where the naming uses it) with a workspace path known.
   */
  private async admit(scope: ReconcileScope, primary: KubeObject): Promise<NotSynced | { readonly workspacePath: string | undefined }> {
    const { resource, id, record } = scope;
    // One tenant's flood stops at its own limit, and all of them at relsync's (counted in the store;
    // concurrent workers may pass it by a few).
    const refusal = !record && this.admission ? await this.admission.room(id.cluster) : undefined;
    if (refusal) {
      // Not requeued (a flood would keep the workers busy): its next change or the next sweep looks again.
      const message = refusal.limit === 'primariesPerCluster'
        ? `relsync syncs at most ${refusal.value} primaries of this cluster (limits.primariesPerCluster); this one is synced once others are deleted (at its next change or the next sweep)`
        : `relsync syncs at most ${refusal.value} primaries in all (limits.primaries), and that many are synced; this one is synced once others are deleted (at its next change or the next sweep)`;
      // A fresh store admits primaries in another order: this one's copies may exist and must stay.
      return { reason: 'PrimaryLimitReached', message, primary, kept: { kind: 'unrecorded' } };
    }
    if (!record) this.admission?.admitted(id.cluster);
    // Nested deeper than relsync reads (copy-refusals.ts): refused before any template, path or
    // copy reads its content. The copy and related copies stay as they were, as for a copy over
    // limits.copyBytes; not retried until the primary changes (a relist or sweep looks again: one walk, which stops at that depth).
    const tooDeep = this.refusals.depth(primary);
    if (tooDeep) {
      // Without a record (new, or a lost store) none is made up: a copy identity that may not be the
      // copy's would let a sweep take the real copy for an orphan (its live primary keeps it instead).
      return { reason: 'CopySyncFailed', message: `relsync does not copy this object: ${tooDeep}; a copy written before stays as it was`, primary, kept: { kind: 'stored', copy: record?.copy } };
    }
    if (!resource.workspacePath) return { workspacePath: undefined };
    try {
      return { workspacePath: await this.paths.of(scope.reads, id.cluster) };
    } catch (err) {
      if (!(err instanceof WorkspacePathError)) throw err;
      // Until the claim is accepted: looked at again as a conflict is (no event says when it is).
      return { reason: 'WorkspacePathUnknown', message: err.message, event: `relsync cannot sync this object: ${err.message}`, primary, kept: { kind: 'stored', copy: record?.copy ?? this.defaultCopyId(resource, id) }, requeue: true };
    }
  }

  /** Where the primary's copy goes and what it holds, judged (name, size, budget, Secret type) before anything is written. */
  private async planCopy(scope: ReconcileScope, primary: KubeObject, workspacePath: string | undefined): Promise<NotSynced | CopyPlan> {
    const { resource, id, record } = scope;
    const { clusters } = this.deps;
    const context: TemplateContext = { cluster: id.cluster, ...(workspacePath !== undefined ? { clusterPath: workspacePath } : {}), namespace: id.namespace, name: id.name, object: primary };
    const copyNamespace = this.copyNamespaces.nameFor(resource, { cluster: id.cluster, namespace: id.namespace }, context);
    const copyName = resource.naming.name.render(context);
    const nameProblem = (resource.copyType.namespaced ? prefixed('copy namespace', namespaceProblem(copyNamespace)) : undefined) ?? prefixed('copy name', objectNameProblem(copyName));
    if (nameProblem) {
      // The copy written before (if any) stays recorded, so that it is still found and, with the primary, deleted.
      // So do its relations: what it claimed is not let go because a name cannot be rendered now.
      return { reason: 'InvalidCopyName', message: nameProblem, event: `relsync cannot sync this object: ${nameProblem} (check ${resource.where}.naming)`, primary, kept: { kind: 'stored', copy: record?.copy ?? this.defaultCopyId(resource, id) } };
    }
    const copyId: ObjectIdentity = { cluster: clusters.service.name, group: resource.copyType.group, resource: resource.copyType.resource, namespace: resource.copyType.namespaced ? copyNamespace : '', name: copyName };
    // What the copy holds: the primary's fields, mutated (rules/mutation.ts), judged (size, Secret
    // type) and compared as mutated, so a mutation neither slips past a limit nor makes a write loop.
    const unmutated = contentOf(primary, this.policy);
    // Labels and annotations over the limit on their own: refused before the content is written out.
    const labelsTooBig = this.refusals.metadataSize(unmutated);
    const mutation = labelsTooBig ? { result: unmutated.fields, problems: [] } : mutated(unmutated.fields, resource.mutation?.spec ?? [], specView(primary));
    const content = { ...unmutated, fields: mutation.result };
    const serialized = labelsTooBig ? '' : stableJson(content);
    // The rest of a large primary's reconcile (its hash, the write's body, the answer) waits for a
    // turn on the event loop in its cluster's lane (heavy-turns.ts): another tenant's change goes first.
    await heavyTurns.turn(serialized.length, id.cluster);
    const tooBig = labelsTooBig ?? this.refusals.size(serialized);
    const overBudget = tooBig ? undefined : await this.deps.budget?.refusal(id.cluster, copyId, Buffer.byteLength(serialized));
    if (tooBig || overBudget) {
      // Over limits.copyBytes or the tenant's budget: the copy and its related copies stay as they were
      // (removing them would make the operator deprovision), no longer updated, until it fits again.
      const message = tooBig ? `relsync does not update the copy of this object: ${tooBig}` : overBudget!;
      return { reason: tooBig ? 'CopySyncFailed' : 'CopyBudgetReached', message, primary, kept: { kind: 'claims', copy: copyId, recordAs: record?.copy ?? copyId, context } };
    }
    const refused = this.refusals.secret(resource.copyType, content);
    if (refused) {
      // A primary that is a Secret of a denied type: never copied; a copy written before goes.
      if (record) confirmLive(scope.reads);
      const remove = record ? () => this.removeCopy(scope, record.copy, [record.uid, primary.metadata.uid], 'refused content') : undefined;
      return { reason: 'CopySyncFailed', message: `relsync does not copy this object: ${refused}`, primary, kept: { kind: 'none', copy: copyId, ...(remove ? { remove } : {}) } };
    }
    return { copyId, copyNamespace, context, workspacePath, content: { content, serialized }, mutationProblems: mutation.problems };
  }

  /**
   * The primary's copy written: an old one the naming moved away from goes, the finalizer goes on,
   * the copy namespace is claimed, the copy is created or updated, and its status comes back.
   */
  private async placeCopy(scope: ReconcileScope, primary: KubeObject, plan: CopyPlan): Promise<NotSynced | PlacedCopy> {
    const { reads, resource, id, record } = scope;
    const { clusters } = this.deps;
    const { copyId, copyNamespace, context } = plan;
    // The naming puts the copy elsewhere now: the old one goes once the new one may be written
    // (a copy refused above stays where it is, recorded, rather than none at all).
    if (record && !sameIdentity(record.copy, copyId)) {
      confirmLive(reads);
      await this.deleteOwnedCopy(scope, record.copy);
    }
    const primaries = clusters.client(id.cluster, resource.primaryType);
    const current = await this.ensureFinalizer(primaries, primary, id);
    const taken = resource.copyType.namespaced ? await this.copyNamespaces.claim(reads, { template: resource.naming.namespace, where: `${resource.where}.naming.namespace` }, { cluster: id.cluster, namespace: id.namespace }, copyNamespace) : undefined;
    if (taken) {
      // Another tenant's namespace (names that collided, or a template that cannot keep them apart): nothing goes there.
      return { reason: 'CopyConflict', message: taken, event: `relsync cannot sync this object: ${taken}`, primary: current, state: 'conflict', kept: { kind: 'claims', copy: copyId, recordAs: copyId, context }, requeue: true, conflict: 'namespace' };
    }
    for (const p of plan.mutationProblems) this.deps.recorder.warn(id.cluster, current, 'MutationProblem', `the copy's ${p}`);
    const copy = await this.syncCopy(scope, plan, current).catch(async (err: unknown) => {
      // The copy namespace went since it was last seen: made again at the retry.
      if (isNotFound(err) && /namespaces? "[^"]*" not found/.test((err as Error).message)) this.copyNamespaces.forget(copyNamespace);
      // Refused by the service cluster (invalid, denied by admission, forbidden) is the user's to see; a concurrent change (409),
      // throttling or an unreachable cluster is retried quietly.
      if (err instanceof ApiError && err.statusCode >= 400 && err.statusCode < 500 && err.statusCode !== 409 && err.statusCode !== 429) {
        const message = `relsync cannot write the copy ${describeIdentity(copyId)} in the service cluster: ${(err as Error).message}; it retries`;
        this.deps.recorder.warn(id.cluster, current, 'CopySyncFailed', message);
        await this.notSynced(scope, current, { reason: 'CopySyncFailed', message }).catch(() => undefined);
      }
      throw err;
    });
    if (copy === 'conflict') {
      const message = `${describeIdentity(copyId)} exists and was not created by relsync agent "${this.deps.agentName}"; it is left untouched`;
      return { reason: 'CopyConflict', message, primary: current, state: 'conflict', kept: { kind: 'claims', copy: copyId, recordAs: copyId, context }, requeue: true, conflict: 'primary' };
    }
    return { copyId, context, copy, primary: await this.syncStatus(scope, current, copy) };
  }

  /**
   * What every rule of the primary resolves to, claimed in the store before any related copy is
   * touched: first the names (before related objects are read, so that an object created while
   * this reconcile runs is routed here), then what selector and inverse rules found.
   */
  private async resolveRelated(scope: ReconcileScope, placed: PlacedCopy): Promise<ResolvedRelated> {
    const { reads, resource, id, record } = scope;
    const { clusters, store } = this.deps;
    const { primary: synced, copy, copyId, context } = placed;
    // Phase 1: what every rule resolves to without reading related objects
    // (names, rendered selectors) is stored before those objects are read, so
    // that an object created while this reconcile runs is routed here (the
    // queue then runs this primary again) instead of being missed.
    const plans = resource.rules.map((rule) => this.finder.plan({ rule, primary: synced, platformCluster: id.cluster, copy, serviceCluster: clusters.service.name, context: { ...context, object: synced } }));
    const selectors = plans.flatMap((p) => (p.selector ? [p.selector] : []));
    // The stored relations are read once: only this reconcile writes this primary's rows meanwhile.
    const stored = await this.keptRelations(id);
    const storedSelectorRows = await store.selectorsOf(id);
    const storedSelectors = new Map(storedSelectorRows.map((s) => [s.ruleId, s.selector]));
    const selectorsChanged = selectors.length !== storedSelectors.size || selectors.some((s) => storedSelectors.get(s.ruleId) !== selectorQuery(s.selector));
    // What the store holds for this primary from here on, as this reconcile read and wrote it: the
    // last save compares against it instead of reading the rows again (KnownRows).
    const rows: Intent = { id, primary: synced, copyId, selectors, relations: [], known: { primary: record, relations: stored, selectorKeys: storedSelectorRows.map((s) => s.key) } };
    // The names of reference and template rules, within limits.relatedPerPrimary as capRelated keeps
    // them (a wildcard resolves to one past it): the store never holds more claims than a primary may have.
    const named = plans.map((plan) => ({ plan, pairs: plan.named?.pairs ?? [], problems: [], ...(plan.named?.more ? { more: true } : {}) }));
    this.finder.capRelated(named, stored);
    let { relations, known } = await this.recordIntent({ ...rows, relations: stored }, record, named.flatMap((n) => claimsOf(n.plan.input.rule, n.pairs)), selectorsChanged);

    const found: Array<{ plan: RulePlan } & Found> = [];
    for (const plan of plans) {
      const result = await this.finder.findRelated(reads, resource, plan, synced).catch((err: unknown): Found => {
        if (!isForbidden(err)) throw err;
        const { rule } = plan.input;
        const sourceCluster = sidesOf(plan.input).sourceCluster;
        return { pairs: [], problems: [`rule ${rule.id}: ${this.refusals.forbidden(sourceCluster, rule.sourceType, 'list')}`], keepStored: true, unanswered: true };
      });
      found.push({ plan, ...result });
    }
    const capped = this.finder.capRelated(found, stored);
    // Claim what selector and inverse rules found before touching any copy: another primary's
    // reconcile that is about to delete one of these copies (it stopped owning it) sees the claim
    // and keeps it, or, if it already decided, its delete is routed here by the claim and this
    // primary writes the copy again. No interleaving of two reconciles ends without the copy, as long
    // as the copy's DELETED event (or, after a watch gap, the relist) is delivered, which the list/watch
    // loop guarantees.
    ({ relations, known } = await this.recordIntent({ ...rows, relations, known }, record ?? { state: 'synced', message: null }, found.flatMap((f) => (f.plan.named ? [] : claimsOf(f.plan.input.rule, f.pairs))), false));
    return { found, stored, selectors, relations, known, capped };
  }

  /**
   * Every relation synced: copies of relations the primary no longer resolves to go first (unless
   * another primary claims them), so that a destination that changed its source is free for the new
   * one; those a rule's cleanup policy keeps until the primary goes stay, as retained relations
   * (relation-sync.ts endStale). Warnings and conflicts are recorded on the primary.
   */
  private async syncRelated(scope: ReconcileScope, primary: KubeObject, related: ResolvedRelated): Promise<RelatedSynced> {
    const { reads, resource, id, tally } = scope;
    const { found, stored, relations } = related;
    const retained = await this.relations.endStale({ reads, resource, owner: id, tally }, relations, found.flatMap((f) => (f.keepStored ? stored.filter((r) => r.ruleId === f.plan.input.rule.id) : claimsOf(f.plan.input.rule, f.pairs))));
    const problems: string[] = [];
    const work: Array<RelationOutcome | RelationWork> = [...retained];
    for (const { plan, ...result } of found) {
      problems.push(...result.problems);
      if (result.keepStored) {
        // The rule could not be evaluated (e.g. a selector rendered invalid): keep what it had, lose nothing.
        work.push(...stored.filter((r) => r.ruleId === plan.input.rule.id));
        continue;
      }
      for (const pair of result.pairs) {
        const before = stored.find((r) => r.ruleId === plan.input.rule.id && sameIdentity(r.source, pair.source) && sameIdentity(r.destination, pair.destination));
        const copied = before !== undefined && (before.state === 'synced' || before.state === 'conflict' || before.state === 'retained');
        // Stored as having found nothing in its place (relation-sync.ts sourceAbsent). Not a new claim
        // (recordIntent stored it as not synced yet, its versions unknown): what is there is read.
        const nothing = before !== undefined && leftNothing(before);
        work.push({ destination: identityKey(pair.destination), run: () => this.relations.sync({ reads, tally, input: plan.input, pair, owner: id, copied, leftNothing: nothing, syncedHash: before?.state === 'synced' ? before.contentHash : null }) });
      }
    }
    const outcomes = await syncedTogether(work);
    // The recorder logs each warning as it records it (see event-recorder.ts).
    for (const p of problems) this.deps.recorder.warn(id.cluster, primary, 'RelatedResourceProblem', p);
    const conflicts = outcomes.filter((o) => o.state === 'conflict');
    for (const c of conflicts) this.deps.recorder.warn(id.cluster, primary, 'RelatedCopyConflict', c.message ?? '');
    return { outcomes, problems, conflicts };
  }

  /**
   * The reconcile's outcome: the verdict on the primary (first: the versions a sweep compares are
   * those it leaves), a Synced Event at the milestone, the store's one save, and the queue's answer.
   */
  private async finish(scope: ReconcileScope, outcome: SyncOutcome): Promise<Result> {
    const { resource, id, record } = scope;
    const { store } = this.deps;
    const { primary: synced, copyId, found, outcomes, problems, conflicts, selectors, known } = outcome;
    // A primary reads as synced only when every relation is (or waits for its source to exist).
    const failed = outcomes.find((o) => o.state === 'error');
    const state: PrimaryState = problems.length > 0 || failed ? 'error' : conflicts.length > 0 ? 'conflict' : 'synced';
    const retrySoon = conflicts.length > 0 || outcomes.some((o) => o.retrySoon);
    // A complete sync: what it acted on, for a sweep to compare its LISTs with (controller/sweep-skip.ts).
    // Not after a warning on the primary (a rule that cannot apply to it): a sweep's reconcile says it again.
    const warned = found.some((f) => f.warned);
    const message = problems[0] ?? failed?.message ?? conflicts[0]?.message ?? null;
    const shown = await this.verdicts.show(resource.primaryType, id, synced, verdictOf(state, problems.length > 0 ? 'RelatedResourceProblem' : failed ? 'RelatedSyncFailed' : 'RelatedCopyConflict', message)).catch(async (err: unknown) => {
      // A 409 (the primary changed meanwhile): what this reconcile did is stored all the same; the retry reads live.
      await store.saveReconcile({ id, uid: synced.metadata.uid ?? '', copy: copyId, state, message, versions: null }, outcomes, selectors, known);
      throw err;
    });
    // A milestone the user cares about, not every write: the primary shows the change (so a replica whose store is new
    // announces nothing the primary already showed), and the store had not completed a sync of it (so an upgrade that
    // brings the verdict to primaries synced before does not announce them all; a first sync whose last step failed does).
    const completedBefore = record?.state === 'synced' && record.versions != null;
    if (state === 'synced' && !completedBefore && !showsSynced(synced) && showsSynced(shown)) this.deps.recorder.normal(id.cluster, shown, 'Synced', 'relsync synced this object to the service cluster');
    const versions = state === 'synced' && !retrySoon && !warned ? this.completeSync(resource, shown, outcome) : null;
    await store.saveReconcile({ id, uid: synced.metadata.uid ?? '', copy: copyId, state, message, versions }, outcomes, selectors, known);
    // A rule kept what it had (it could not be evaluated) or was cut at the limit: with a store that
    // did not know them, copies it resolved to before are in no stored relation (a sweep keeps them).
    // A rule cut at the limit claims what it stored: the rest is not wanted. One that could not be
    // evaluated keeps its stored relations; when the cluster did not answer (a LIST refused), they
    // are its claims only if this store saw them written. One the tenant's input breaks resolves to
    // nothing until it is fixed: what the store holds of it is all it claims.
    const keptStored = found.some((f) => f.keepStored);
    const unanswered = found.some((f) => f.unanswered);
    const unknown = outcome.capped || keptStored ? { ...KEPT_AS_IT_WAS, ...this.claimsKnownIf(!unanswered, record) } : {};
    return retrySoon ? { requeueAfterMs: this.retryMs, ...unknown } : unknown;
  }

  /**
   * One exit of a reconcile that does not sync the primary now: a Warning Event and the verdict on
   * the primary, the metric of a conflict, what the store keeps of it (NotSynced.kept), and the
   * queue's answer.
   */
  private async refuse(scope: ReconcileScope, why: NotSynced): Promise<Result> {
    const { id, record } = scope;
    const { store } = this.deps;
    this.deps.recorder.warn(id.cluster, why.primary, why.reason, why.event ?? why.message);
    await this.notSynced(scope, why.primary, why);
    if (why.conflict) this.deps.metrics.conflicts.inc({ kind: why.conflict });
    const row = (copy: ObjectIdentity) => ({ id, uid: why.primary.metadata.uid ?? '', copy, state: why.state ?? 'error', message: why.message });
    const retry = why.requeue ? { requeueAfterMs: this.retryMs } : {};
    const { kept } = why;
    switch (kept.kind) {
      case 'unrecorded':
        return { relationsUnknown: true, claimsUnknown: true };
      case 'none':
        await kept.remove?.();
        await store.saveReconcile(row(kept.copy), []);
        return done;
      case 'stored':
        if (kept.copy) await store.saveReconcile(row(kept.copy), await this.keptRelations(id));
        return { ...retry, ...KEPT_AS_IT_WAS, ...this.claimsKnownIf(false, record) };
      case 'claims': {
        const claims = await this.keptClaims(scope, why.primary, kept);
        await store.saveReconcile(row(kept.recordAs), claims.relations);
        return { ...retry, ...KEPT_AS_IT_WAS, ...this.claimsKnownIf(claims.known, record) };
      }
    }
  }

  /** How soon a conflict (or a workspace path not known yet) is looked at again. */
  private get retryMs(): number {
    return this.deps.conflictRetryMs ?? CONFLICT_RETRY_MS;
  }

  /** Where a primary's copy is recorded before its name could be rendered: the primary's own namespace and name, in the service cluster. */
  private defaultCopyId(resource: ResolvedResource, id: ObjectIdentity): ObjectIdentity {
    return { ...id, cluster: this.deps.clusters.service.name, group: resource.copyType.group, resource: resource.copyType.resource };
  }

  /** The versions of a complete sync, or null when any object it acted on has none to compare. */
  private completeSync(resource: ResolvedResource, primary: KubeObject, { copy, outcomes, namespace }: Pick<SyncOutcome, 'copy' | 'outcomes' | 'namespace'>): PrimaryVersions | null {
    const p = objectVersion(primary);
    const c = objectVersion(copy);
    if (!this.deps.fingerprint || p === undefined || c === undefined || outcomes.some((o) => !o.versions)) return null;
    return { primary: p, copy: c, config: selectionFingerprint(resource, this.deps.fingerprint.of(resource), namespace && objectVersion(namespace)) };
  }


  /**
   * Stores what this reconcile is about to act on, when the store does not
   * hold it yet: the primary, its new relations as pending claims, its
   * selectors. Called with the names of phase 1 (before related objects are
   * read, so that one created meanwhile is routed here) and again with what
   * selector and inverse rules found (before any copy is written).
   */
  private async recordIntent(intent: Intent, record: Pick<PrimaryRecord, 'state' | 'message'> | undefined, claims: readonly Claim[], selectorsChanged: boolean): Promise<{ relations: RelationOutcome[]; known: KnownRows }> {
    const { id, primary, copyId, relations, selectors, known } = intent;
    const claimed = new Set(relations.map(claimKey));
    const fresh: RelationOutcome[] = claims.filter((c) => !claimed.has(claimKey(c))).map((c) => ({ ...c, state: 'pending' as const, contentHash: null, message: 'resolved; not synced yet' }));
    // Nothing new to claim, and the stored row is this incarnation's with this copy: routing already finds this primary.
    const rowHeld = known.primary !== undefined && known.primary.uid === (primary.metadata.uid ?? '') && sameIdentity(known.primary.copy, copyId);
    if (record !== undefined && rowHeld && fresh.length === 0 && !selectorsChanged) return { relations: [...relations], known };
    const next = [...relations, ...fresh];
    const row = { id, uid: primary.metadata.uid ?? '', copy: copyId, state: record?.state ?? 'synced', message: record?.message ?? null };
    await this.deps.store.saveReconcile(row, next, selectors, known);
    // Written, or found held already: either way the store now holds exactly this.
    return { relations: next, known: { primary: row, relations: next, selectorKeys: selectorKeys(selectors) } };
  }

  /** False for a kcp workspace that unbound the export, or that relsync has forgotten: nothing can be read or written there. */
  private reachable(cluster: string): boolean {
    return this.deps.clusters.has(cluster) && !this.deps.clusters.isUnbound(cluster);
  }

  /**
   * The copy of a primary the store has no record of (a lost, older or another shard's store), found
   * by its marks: first where the naming puts it, then — the name renders from fields the tenant may
   * have changed since the copy was written — among this agent's copies in the copy namespace (one
   * LIST, on this rare path only). A copy that cannot be found so (a namespace that cannot be
   * rendered now, a cluster-scoped copy that moved) is said and left to the sweep, which finds it by
   * its marks once its primary is gone: the tenant cannot hold a finalizer, and a worker, with a
   * name it broke.
   */
  private async namedCopyOf(reads: ObjectReads, resource: ResolvedResource, id: ObjectIdentity, primary: KubeObject): Promise<ObjectIdentity | undefined> {
    const service = this.deps.clusters.service.name;
    const copyType = resource.copyType;
    const at = (namespace: string, name: string): ObjectIdentity => ({ cluster: service, group: copyType.group, resource: copyType.resource, namespace, name });
    const workspacePath = resource.workspacePath ? await this.paths.of(reads, id.cluster).catch((err: unknown) => {
      // A path not known now (the workspace's to give): a naming that uses it does not render, and
      // the copy is looked for by its marks. Anything else (an outage) fails the reconcile: the finalizer stays.
      if (!(err instanceof WorkspacePathError)) throw err;
      return undefined;
    }) : undefined;
    const context: TemplateContext = { cluster: id.cluster, ...(workspacePath !== undefined ? { clusterPath: workspacePath } : {}), namespace: id.namespace, name: id.name, object: primary };
    const rendered = (what: string, render: () => string, problem: (v: string) => string | undefined): string | undefined => {
      try {
        const value = render();
        const wrong = prefixed(what, problem(value));
        if (!wrong) return value;
        this.deps.logger.info({ primary: describeIdentity(id), problem: wrong }, 'the copy of a primary without a record is not where the naming puts it now');
      } catch (err) {
        this.deps.logger.info({ primary: describeIdentity(id), problem: `${what}: ${(err as Error).message}` }, 'the copy of a primary without a record is not where the naming puts it now');
      }
      return undefined;
    };
    const namespace = copyType.namespaced ? rendered('copy namespace', () => this.copyNamespaces.nameFor(resource, { cluster: id.cluster, namespace: id.namespace }, context), namespaceProblem) : '';
    const name = rendered('copy name', () => resource.naming.name.render(context), objectNameProblem);
    const copies = this.deps.clusters.client(service, copyType);
    // This incarnation's copy (or one of relsync before uids were marked), not a related copy of it.
    const isItsCopy = (o: KubeObject) => this.writer.isMarkedCopyOf(o, id) && !isRelatedCopy(o) && !copiesAnotherUid(o, [primary.metadata.uid]);
    // API errors propagate: the reconcile fails and is retried, the finalizer stays.
    if (namespace !== undefined && name !== undefined) {
      const there = await copies.get(namespace, name);
      if (there && isItsCopy(there)) return at(namespace, name);
    }
    if (copyType.namespaced && namespace !== undefined) {
      for await (const page of copies.pages({ namespace, labelSelector: agentSelector(this.deps.agentName) })) {
        // A copy too costly to read still carries its marks in its metadata.
        const copy = page.items.find(isItsCopy) ?? page.refused?.map((r) => r.object).find(isItsCopy);
        if (copy?.metadata.name) return at(namespace, copy.metadata.name);
      }
      return undefined; // no copy of it in its copy namespace: nothing to wait for
    }
    if (!copyType.namespaced && name !== undefined) return undefined;
    this.deps.logger.warn({ primary: describeIdentity(id) }, 'a primary without a record in the store is let go, but where its copy is cannot be told now (its copy namespace or name does not render); the sweep removes the copy once it finds it (by its marks) without a primary');
    return undefined;
  }

  /**
   * Removes the copy (of the stored incarnation or of this one: deleted and created again since)
   * and the related copies only this primary owned, then lets the primary go.
   */
  private async finalize(scope: ReconcileScope, primary: KubeObject | undefined, copyId: ObjectIdentity | undefined): Promise<Result> {
    const { reads, resource, id, tally } = scope;
    const { clusters, store, logger } = this.deps;
    const of = { reads, resource, owner: id, tally };
    if (copyId) {
      const waiting = await this.removeCopy(scope, copyId, [scope.record?.uid, primary?.metadata.uid], 'primary gone');
      if (waiting) return waiting;
    }
    const shared: RelationRecord[] = [];
    let changed = false;
    // Each relation asks the store (and may delete a copy): a primary's hundreds of them (a wildcard
    // reference) take turns on the event loop, a few at a time, as RelationSync.endStale's do.
    const ended = heavyTurns.meter(id.cluster);
    for (const relation of await store.relationsOf(id)) {
      await ended.add(ROW_BYTES);
      if (!this.reachable(relation.destination.cluster)) {
        logger.info({ primary: describeIdentity(id), copy: describeIdentity(relation.destination) }, 'the workspace unbound the export; its copy there cannot be removed by relsync');
        continue;
      }
      // A claim that left nothing (a wildcard's name that never existed): no store query, no read.
      if (this.relations.leavesNothing(of, relation)) continue;
      if (!(await store.handOver(relation.destination, relation.source, id))) changed = (await this.relations.endUnclaimed(of, relation, 'primary gone')) === 'changed' || changed;
      else shared.push(relation);
    }
    // A related copy that changed since it was read was not deleted: the primary is not let go yet.
    if (changed) return { requeueAfterMs: 1000 };
    // A primary relsync no longer syncs (deselected) keeps no verdict of relsync's; one it never synced (another
    // agent's, which may show its own verdict) and relsync's own copies are not touched.
    const synced = primary !== undefined && (copyId !== undefined || primary.metadata.finalizers?.includes(this.finalizer) === true);
    const kept = primary && synced && !primary.metadata.deletionTimestamp && !isServiceOriginCopy(this.deps.agentName, clusters.service.name, primary) ? await this.verdicts.clear(resource.primaryType, id, primary) : primary;
    if (kept && kept.metadata.finalizers?.includes(this.finalizer)) {
      const primaries = clusters.client(id.cluster, resource.primaryType);
      try {
        const finalizers = kept.metadata.finalizers.filter((f) => f !== this.finalizer);
        // A patch of the finalizers alone: a PUT would send and read back a tenant's megabyte.
        await this.writePrimary(id, kept.metadata.resourceVersion, () => primaries.setFinalizers(id.namespace, id.name, kept.metadata.resourceVersion, finalizers));
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
    }
    await store.deletePrimary(id);
    // Room for a primary that waits for it (limits.primariesPerCluster, limits.primaries): count afresh.
    this.admission?.released(id.cluster);
    // A copy shared with primaries that are being finalized at the same moment
    // (on other workers): each looks again after its own rows are gone, so the
    // last one sees no owner left and removes the copy.
    for (const relation of shared) {
      await ended.add(ROW_BYTES);
      if (!(await store.handOver(relation.destination, relation.source, id))) await this.relations.endUnclaimed(of, relation, 'primary gone');
    }
    // Not while copies its claims left in place wait to be decided: forgotten, the workspace is no
    // platform any more, and no sweep or unbind could tell those copies for its own (copy-of.ts).
    // The binding watch decides them once the workspace is unbound, then forgets it.
    if (clusters.isUnbound(id.cluster) && !(await store.hasPrimaries(id.cluster)) && this.deps.claims?.hasDeferred(id.cluster) !== true) {
      await clusters.forgetLogical(id.cluster);
      logger.info({ logicalCluster: id.cluster }, 'every copy of an unbound workspace is removed; relsync forgets the workspace');
    }
    return done;
  }

  /**
   * Deletes the copy of the primary `id` whose uid is one of `uids`, and waits until it is gone (the
   * service cluster's operator may hold it with its own finalizers); a result while waiting. A
   * copy whose marks name another uid is the copy of another incarnation of the same name (one
   * that another replica, with a store of its own, already synced after a delete-and-recreate):
   * it is left in place.
   */
  private async removeCopy({ reads, resource, id, tally }: ReconcileScope, copyId: ObjectIdentity, uids: ReadonlyArray<string | undefined>, why: RemovalReason): Promise<Result | undefined> {
    const copies = await this.copyClient(resource, copyId);
    if (!copies) return undefined;
    // What decides is the copy's marks, uid and version: its content is neither sent nor parsed.
    const copy = await copies.getMetadata(copyId.namespace, copyId.name);
    if (!copy || !this.writer.isMarkedCopyOf(copy, id)) {
      // Gone already (or another's in its place): it takes nothing of the tenant's budget.
      await this.deps.budget?.removed(copyId, id);
      return undefined;
    }
    if (copiesAnotherUid(copy, uids)) return undefined;
    if (!copy.metadata.deletionTimestamp && (await this.writer.remove(copies, { kind: 'primary', copy: copyId, source: id, existing: copy, decidedOn: reads, why, tally })) === 'deleted') {
      this.deps.logger.info({ primary: describeIdentity(id), copy: describeIdentity(copyId) }, 'deleted the copy of a primary that is gone');
    }
    if (await copies.getMetadata(copyId.namespace, copyId.name)) {
      await this.deps.store.setPrimaryState(id, 'deleting', 'waiting for the copy in the service cluster to be deleted');
      return { requeueAfterMs: 1000 };
    }
    return undefined;
  }

  /** The copy moved (its naming template now renders elsewhere): the old one goes. */
  private async deleteOwnedCopy({ reads, resource, id, tally }: ReconcileScope, copyId: ObjectIdentity): Promise<void> {
    const copies = await this.copyClient(resource, copyId);
    if (!copies) return;
    await this.writer.remove(copies, { kind: 'primary', copy: copyId, source: id, existing: await copies.get(copyId.namespace, copyId.name), decidedOn: reads, why: 'copy moved', tally });
  }

  /**
   * The client for a stored copy: of the copy type; of another type (made before the config changed
   * `copyAs`), found through discovery, so that the old copy is deleted rather than forgotten. One
   * whose type the service cluster no longer serves is gone with its type.
   */
  private async copyClient(resource: ResolvedResource, copyId: ObjectIdentity): Promise<ObjectClient | undefined> {
    for (const type of [resource.copyType, resource.primaryType]) if (sameType(type, copyId)) return this.deps.clusters.client(copyId.cluster, type);
    try {
      const type = await this.deps.clusters.resolve?.(copyId.cluster, { group: copyId.group, resource: copyId.resource });
      return type && this.deps.clusters.client(copyId.cluster, type);
    } catch (err) {
      if (!(err instanceof TypeNotServedError)) throw err;
      this.deps.logger.info({ copy: describeIdentity(copyId), copyType: typeName(resource.copyType) }, 'a stored copy is of a type the service cluster no longer serves: nothing of it is left to delete');
      return undefined;
    }
  }

  private async ensureFinalizer(client: ObjectClient, primary: KubeObject, id: ObjectIdentity): Promise<KubeObject> {
    if (primary.metadata.finalizers?.includes(this.finalizer)) return primary;
    const finalizers = [...(primary.metadata.finalizers ?? []), this.finalizer];
    // A type without generations cannot say whether the write changed its content too (a webhook's):
    // the whole object is written and its answer taken, as before.
    if (primary.metadata.generation === undefined) return this.writePrimary(id, primary.metadata.resourceVersion, () => client.replace({ ...primary, metadata: { ...primary.metadata, finalizers } }));
    // A patch of the finalizers alone, answered with metadata: a PUT would send and read back a tenant's megabyte.
    // The content is what was read, unless the generation moved: the write changed the spec too (a
    // webhook's). Then that version is not relsync's alone (its event is routed, and the next
    // reconcile syncs it), and the primary is read again, so that no later write of this reconcile
    // (the verdict as annotations is a PUT) puts the spec as it was back.
    const sameSpec = (written: KubeObject) => written.metadata.generation === primary.metadata.generation;
    const written = await this.writePrimary(id, primary.metadata.resourceVersion, () => client.setFinalizers(id.namespace, id.name, primary.metadata.resourceVersion, finalizers), sameSpec);
    if (sameSpec(written)) return { ...primary, metadata: written.metadata };
    const now = await client.get(id.namespace, id.name);
    if (!now) throw new Error(`${describeIdentity(id)} is gone since relsync added its finalizer; the next reconcile looks again`);
    return now;
  }

  /**
   * Writes the primary's copy as planned: what it holds (the primary's content, mutated), with its
   * stableJson, which the plan wrote once (a tenant's megabyte takes a while), and where it goes;
   * the primary's kcp workspace path (resources with workspacePath) is marked on the copy.
   */
  private async syncCopy(scope: ReconcileScope, plan: CopyPlan, primary: KubeObject): Promise<KubeObject | 'conflict'> {
    const { reads, resource, id } = scope;
    const { copyId, workspacePath, content: { content: desired, serialized } } = plan;
    const copies = this.deps.clusters.client(this.deps.clusters.service.name, resource.copyType);
    // The store knows this primary (its copy was written, or found in the way).
    const known = scope.record !== undefined;
    // resources[].adopt: the resource's place in the config, when it adopts (sync/adoption.ts).
    const adopting = resource.adopt ? resource.where : undefined;
    const base = marksFor(this.deps.agentName, id, primary.metadata.uid);
    // The hash of what is applied: a field the primary dropped makes the copy out of date (see APPLIED_HASH_ANNOTATION).
    const annotations = { ...base.annotations, [APPLIED_HASH_ANNOTATION]: this.deps.hasher.hashSerialized(serialized), ...(workspacePath !== undefined ? { [WORKSPACE_PATH_ANNOTATION]: workspacePath } : {}) };
    const marks = { labels: base.labels, annotations };
    // A new primary's copy that the watches did not deliver is not read: the write is a create the
    // API server refuses when anything has the name, and the copy is read after (copy-writer.ts).
    const existing = !known && reads.peek ? reads.peek(copyId.cluster, copies.type, copyId.namespace, copyId.name)?.object : await reads.get(copyId.cluster, copies.type, copyId.namespace, copyId.name);
    // resources[].adopt: a Normal Event on the primary when one was; why an object in the way was not goes to the provider's log only.
    const adopt = adopting !== undefined
      ? {
          announce: async () => this.deps.recorder.normal(id.cluster, primary, 'Adopted', `relsync adopted ${describeIdentity(copyId)} in the service cluster as this object's copy, as its owner granted`),
          refused: (reason: string, suggestGrant: boolean) => this.adoptionRefusals.note(adopting, { object: copyId, source: id }, reason, suggestGrant),
        }
      : undefined;
    // Charged to the primary's tenant (copy-budget.ts): what it takes in the service cluster.
    return this.writer.upsert(copies, { kind: 'primary', copy: copyId, source: id, desired, marks, existing, adopt, charge: { tenant: id.cluster, bytes: Buffer.byteLength(serialized) }, tally: scope.tally, sources: this.deps.clusters.client(id.cluster, resource.primaryType) });
  }

  /** Status flows back: the copy's status replaces the primary's, through the status subresource. */
  private async syncStatus({ resource, id }: ReconcileScope, primary: KubeObject, copy: KubeObject): Promise<KubeObject> {
    if (copy.status === undefined) return primary;
    // The copy's status, mutated on its way back (rules/mutation.ts).
    const { result, problems } = mutated({ status: copy.status }, resource.mutation?.status ?? [], copy);
    for (const p of problems) this.deps.recorder.warn(id.cluster, primary, 'MutationProblem', `the status's ${p}`);
    // relsync's own condition stays beside what the operator wrote (sync-verdict.ts).
    const status = this.verdicts.carry(primary, result.status);
    if (deepEqual(status, primary.status)) return primary;
    const primaries = this.deps.clusters.client(id.cluster, resource.primaryType);
    return this.writePrimary(id, primary.metadata.resourceVersion, () => primaries.replaceStatus({ ...primary, status }));
  }

  /** Writes the primary; the version written is remembered, so its own watch event is not routed back here (cache/own-writes.ts). */
  private async writePrimary(id: ObjectIdentity, precondition: string | undefined, write: () => Promise<KubeObject>, onlyOurs: (written: KubeObject) => boolean = () => true): Promise<KubeObject> {
    const run = async () => {
      const written = await write();
      this.deps.onWritten?.(id, written.metadata.resourceVersion);
      // `onlyOurs`: false when the answer shows more changed than relsync sent; then its event is routed.
      if (onlyOurs(written)) this.deps.ownWrites?.record(id, written.metadata.resourceVersion, precondition);
      return written;
    };
    return this.deps.ownWrites ? this.deps.ownWrites.during(id, run) : run();
  }

  /** Shows on the primary why it is not synced (sync-verdict.ts); what is shown is not needed after. */
  private async notSynced({ resource, id }: ReconcileScope, primary: KubeObject, { reason, message }: Pick<NotSynced, 'reason' | 'message'>): Promise<void> {
    await this.verdicts.show(resource.primaryType, id, primary, { synced: false, reason, message });
  }

  /** `claimsUnknown` unless the claims were resolved anew (`resolved`) or the store saw the stored ones written. */
  private claimsKnownIf(resolved: boolean, record: Pick<PrimaryRecord, 'lastSyncedAt'> | undefined): { claimsUnknown?: true } {
    const claims = this.deps.claims;
    return resolved || !claims || claims.writtenSinceOpened(record) ? {} : { claimsUnknown: true };
  }

  /**
   * What a primary kept as it was (its copy too big, a conflict) claims: its stored relations, and
   * what its rules resolve to now, as pending claims. With a lost or older store, the stored
   * relations may lack copies it made since, and a copy it shares would be deleted when another
   * primary lets it go (issue #35). Rules are resolved as a reconcile resolves them (names; the
   * LISTs of selector and inverse rules); nothing but the store's rows is written. A service-side
   * rule reads the primary's own copy: without one (a conflict), it claims nothing. `known`: every
   * rule was resolved, none cut at its limit.
   */
  private async keptClaims({ reads, resource, id }: ReconcileScope, primary: KubeObject, { copy: copyId, context }: { readonly copy: ObjectIdentity; readonly context: TemplateContext }): Promise<{ relations: RelationOutcome[]; known: boolean }> {
    const kept = await this.keptRelations(id);
    const service = this.deps.clusters.service.name;
    const there = await reads.get(service, resource.copyType, copyId.namespace, copyId.name);
    const copy = there && this.writer.isMarkedCopyOf(there, id) ? there : undefined;
    // Where its copy would be: platform-side rules read only its namespace.
    const placeholder: KubeObject = { apiVersion: apiVersionOf(resource.copyType), kind: resource.copyType.kind, metadata: { ...(copyId.namespace ? { namespace: copyId.namespace } : {}), name: copyId.name } };
    let known = true;
    const claims: Claim[] = [];
    for (const rule of resource.rules) {
      if (rule.origin === 'service' && !copy) continue;
      const plan = this.finder.plan({ rule, primary, platformCluster: id.cluster, copy: copy ?? placeholder, serviceCluster: service, context: { ...context, object: primary } });
      const found = await this.finder.findRelated(reads, resource, plan, primary).catch((err: unknown) => {
        if (err instanceof ReadAgainLive) throw err;
        return undefined;
      });
      // Not answered (an outage, a LIST refused), or more than the limit looked at: not all it claims.
      if (!found || found.unanswered || found.more) known = false;
      claims.push(...claimsOf(rule, found?.pairs ?? []));
    }
    const had = new Set(kept.map(claimKey));
    const fresh = claims.filter((c) => !had.has(claimKey(c))).map((c) => ({ ...c, state: 'pending' as const, contentHash: null, message: 'claimed while the primary is not synced; not copied' }));
    return { relations: [...kept, ...fresh], known };
  }

  private async keptRelations(id: ObjectIdentity): Promise<RelationOutcome[]> {
    return (await this.deps.store.relationsOf(id)).map(({ primary: _p, lastSyncedAt: _l, ...rest }) => rest);
  }
}

/** The copy's marks name a source uid that is none of `uids` (copies without one, written by older relsync, name none). */
function copiesAnotherUid(copy: KubeObject, uids: ReadonlyArray<string | undefined>): boolean {
  const marked = copy.metadata.annotations?.[SOURCE_UID_ANNOTATION];
  const known = uids.filter((u): u is string => u !== undefined && u !== '');
  return known.length > 0 && marked !== undefined && !known.includes(marked);
}

/** The verdict of a reconcile that got as far as the related objects. */
function verdictOf(state: PrimaryState, reason: string, message: string | null): Verdict {
  if (state !== 'synced') return { synced: false, reason, message: message ?? state };
  // One message for every synced primary: a count in it would make a status write of every change of the related objects.
  return { synced: true, reason: 'Synced', message: 'the copy in the service cluster and every related object are in sync' };
}

function prefixed(what: string, problem: string | undefined): string | undefined {
  return problem ? `${what} ${problem}` : undefined;
}

interface RelationWork {
  /** Relations that write one destination run one after the other, in rule order, as before. */
  readonly destination: string;
  readonly run: () => Promise<RelationOutcome>;
}

/**
 * A primary's relations synced a few at a time (a new primary's related copies do not wait for
 * each other), outcomes in their order. Relations with one destination keep their order, so the
 * first rule still wins a destination two rules name. Every one is tried; then the first failure,
 * if any, is the reconcile's (the queue retries it; what landed meanwhile is up to date then).
 */
async function syncedTogether(work: ReadonlyArray<RelationOutcome | RelationWork>): Promise<RelationOutcome[]> {
  const slots = new Semaphore(RELATIONS_AT_ONCE);
  const last = new Map<string, Promise<unknown>>();
  const settled = await Promise.allSettled(
    work.map((w) => {
      if (!('run' in w)) return Promise.resolve(w);
      const after = last.get(w.destination) ?? Promise.resolve();
      const mine = after.catch(() => undefined).then(() => slots.run(w.run));
      last.set(w.destination, mine);
      return mine;
    }),
  );
  const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
  return settled.map((r) => (r as PromiseFulfilledResult<RelationOutcome>).value);
}

/** Relations of one primary written at once: enough to hide a round trip, few enough to stay fair to other primaries' workers. */
export const RELATIONS_AT_ONCE = 4;
