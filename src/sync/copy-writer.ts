/**
 * Writes relsync's copies, primary and related alike, by server-side apply
 * under relsync's field manager (core/marks.ts's fieldManagerName): relsync owns
 * exactly the fields it copies, so fields others set on a copy (the
 * operator's, API defaults, nested or not) stay, a field of relsync's that
 * someone changed is set back, and a field the source dropped goes because
 * relsync stops applying it. A create is an apply that the API server refuses
 * when the object exists (CREATE_ONLY); an update names the resourceVersion
 * it read, so a change in between answers 409. The reconciler decides what a
 * copy should hold; this is the one place that decides whether an existing
 * object may be touched at all (its marks name the source: an object without
 * them is never written or deleted), and that remembers relsync's own writes
 * (cache/own-writes.ts) and counts them.
 */
import { ApiError, isAlreadyExists, isConflict, isForbidden, isNotFound } from '../kube/api-error.js';
import { CREATE_ONLY } from '../kube/resource-client.js';
import type { KubeObject } from '../core/object.js';
import { describeIdentity, sameIdentity, type ObjectIdentity } from '../core/identity.js';
import type { Logger } from 'pino';
import type { ClusterAccess, ObjectClient } from '../cache/cluster-access.js';
import { isUpToDate, stableJson, type CopyContent } from './content.js';
import { hasFieldsToFold, oldRecordOf, takenOverManagedFields, upgradedManagedFields, type OldRecord } from './field-ownership.js';
import { namespaceType } from './copy-namespaces.js';
import { adoptionGrant, fieldManagerName, isRelsyncKey, markedSource } from '../core/marks.js';
import { adoptionRefusal } from './adoption.js';
import type { OwnWrites } from '../cache/own-writes.js';
import type { SyncMetrics } from './sync-metrics.js';
import { confirmLive, ReadAgainLive, type ObjectReads } from '../cache/object-reads.js';
import type { CopyBudget } from './copy-budget.js';
import { RewritePaceError } from './rewrite-pace.js';
import { systemClock, type Clock } from '../util/clock.js';
import { ADOPT_ANNOTATION, AGENT_LABEL, SOURCE_UID_ANNOTATION } from '../core/relsync-keys.js';

export interface CopyWriterDeps {
  readonly agentName: string;
  /** Says why a copy was deleted (debug) and when a delete was refused by its preconditions (info). */
  readonly logger?: Logger | undefined;
  readonly clusters: Pick<ClusterAccess, 'client'>;
  readonly metrics: SyncMetrics;
  readonly ownWrites?: OwnWrites | undefined;
  /** Told of every copy deleted (a sweep's snapshot then no longer answers for it). */
  readonly onDeleted?: ((copy: ObjectIdentity) => void) | undefined;
  /** Told of every version relsync wrote (or, `after`, deleted): the cache reads back nothing older. */
  readonly onWritten?: ((id: ObjectIdentity, resourceVersion: string | undefined, after?: boolean) => void) | undefined;
  /** What each tenant's copies take in the service cluster (copy-budget.ts): told of each charged write and of each delete. */
  readonly budget?: Pick<CopyBudget, 'wrote' | 'removed' | 'rewriting' | 'rewriteDue'> | undefined;
  /** The time of day relsync's managed-fields entry is stamped with; default systemClock. */
  readonly clock?: Clock | undefined;
}

export type CopyKind = 'primary' | 'related';

/**
 * Why a copy goes, as its caller decided it: said where it is deleted (and logged), so that no
 * delete happens without a stated reason. 'claim ended', 'primary gone' and 'orphan' rest on the
 * store's claims too: they are taken only while the store knows every claim of the cluster
 * (sync/claim-knowledge.ts) or after a sweep with complete LISTs.
 */
export type RemovalReason =
  /** The source (a related object) does not exist, or is not provably the copy's: RelationSync.sourceAbsent (a reconcile's or an edge sync's). */
  | 'source gone'
  /**
   * The primary is deleted or no longer selected, and no claim the store knows keeps the copy
   * (claim-knowledge.ts): PrimaryReconciler.removeCopy (its copy), PrimaryReconciler.finalize →
   * RelationSync.endUnclaimed → endCopy (its related copies).
   */
  | 'primary gone'
  /** The primary no longer resolves to it, and no other claim keeps it: RelationSync.endStale → endUnclaimed → endCopy. */
  | 'claim ended'
  /** The naming now puts the primary's copy elsewhere: PrimaryReconciler.deleteOwnedCopy. */
  | 'copy moved'
  /** The copy of an earlier incarnation of the primary (deleted and created again): PrimaryReconciler.removeCopy. */
  | 'earlier incarnation'
  /** The copy policy refuses what it would hold (a Secret type): RelationSync.judge. */
  | 'refused content'
  /**
   * A sweep found no primary or relation that accounts for it, with complete LISTs:
   * Sweeper.deleteIfOrphan, from its clean-up and from decideDeferred (a sweep's, or a kcp
   * workspace's unbind: binding-watch.ts).
   */
  | 'orphan';

/**
 * What one reconcile (or sweep) wrote: copies created or updated, and deleted. The writer counts
 * into it for its caller; a sweep sums its reconciles' (core/result.ts `copies`).
 */
export interface CopyTally {
  written: number;
  removed: number;
}

export function newTally(): CopyTally {
  return { written: 0, removed: 0 };
}

export interface CopyRemoval {
  /** Counts the deletion, when it happens. */
  readonly tally?: CopyTally;
  readonly kind: CopyKind;
  readonly copy: ObjectIdentity;
  /** The source its marks must name. */
  readonly source: ObjectIdentity;
  /** The copy as the decision read it; nothing is deleted when it is absent or not the marked copy. */
  readonly existing: KubeObject | undefined;
  /** What the decision was made on: a reconcile's reads (they must be live), or a sweep's complete LISTs. */
  readonly decidedOn: ObjectReads | 'sweep';
  readonly why: RemovalReason;
}

/** The labels and annotations relsync puts on a copy, beside the source's. */
export interface Marks {
  readonly labels: Record<string, string>;
  readonly annotations: Record<string, string>;
}

export interface Upsert {
  /** Counts a create or update of the copy (not of its status alone, nor an adoption). */
  readonly tally?: CopyTally;
  readonly kind: CopyKind;
  readonly copy: ObjectIdentity;
  /** What the copy's marks must name for it to be relsync's to update. */
  readonly source: ObjectIdentity;
  readonly desired: CopyContent;
  readonly marks: Marks;
  /** The copy as last read; undefined when it does not exist. */
  readonly existing: KubeObject | undefined;
  /**
   * Create the copy's namespace when a create says it is missing (related copies: a service-origin
   * copy's platform namespace, or a rule's own destination namespace); otherwise its absence is an
   * error. A copy namespace of a primary is made before, by copy-namespaces.ts.
   */
  readonly createsNamespace?: boolean;
  /**
   * A related rule's syncStatus: the status the copy gets (written to its status subresource, and
   * with the object itself for a type without one), its hash (the marks carry it too), and how it
   * is judged up to date: `repair`, by the copy's status itself (a status someone changed is set
   * back: copies on a platform, whose status only relsync writes); otherwise by `written`, the
   * store's word that this relation was synced with this very status (copies in the service
   * cluster, whose operator may write their status too: only a change of the source's status is
   * written, so relsync and the operator never take turns; and a status write that failed after the
   * object's is tried again, as the relation was not stored synced).
   */
  readonly status?: { readonly value: Record<string, unknown>; readonly hash: string; readonly repair: boolean; readonly written: boolean } | undefined;
  /**
   * The resource or rule has `adopt: true`: an object in the copy's place that is not relsync's is
   * taken over when its owner granted it to this source (adoption.ts); `announce` is told when one
   * was, `refused` why one in the way was not (and whether the grant that would do it may be suggested).
   */
  readonly adopt?: { readonly announce: () => Promise<void>; readonly refused: (reason: string, suggestGrant: boolean) => void } | undefined;
  /** A copy in the service cluster: the tenant it is charged to and the size of its content (copy-budget.ts). */
  readonly charge?: { readonly tenant: string; readonly bytes: number } | undefined;
  /**
   * The source's API client, asked for the source's live metadata only before a write over a copy
   * whose marks name another uid of the source than `marks` do: the copy of another incarnation
   * (the source deleted and made again). It is written over only while the source read live is
   * still the one this write copies: a stale read of an older incarnation (a watch cache behind, a
   * sweep's LIST taken before the recreate) would otherwise take the copy another replica made of
   * the newer one for its own, and the next reconcile would delete it as an earlier incarnation's.
   * Without it, such a copy is written over.
   */
  readonly sources?: Pick<ObjectClient, 'getMetadata'> | undefined;
}

/** A create refused because the copy's namespace does not exist and relsync may not create it. */
export class MissingNamespaceError extends Error {
  override name = 'MissingNamespaceError';
}

/** A copy to let go of (CopyWriter.release). */
export interface Release {
  readonly kind: CopyKind;
  readonly copy: ObjectIdentity;
  readonly source: ObjectIdentity;
  /** The copy as read; nothing is released unless it carries the marks naming `source`. */
  readonly existing: KubeObject | undefined;
  /** Asked after the release: a relation copies the same source there now (the marks are put back). */
  readonly claimedAgain?: () => Promise<boolean>;
}

export class CopyWriter {
  private readonly fieldManager: string;
  private readonly clock: Clock;

  constructor(private readonly deps: CopyWriterDeps) {
    this.fieldManager = fieldManagerName(deps.agentName);
    this.clock = deps.clock ?? systemClock;
  }

  /**
   * Creates the copy, or brings it up to date when its marks name the source; 'conflict' when an
   * object without them is in the way (left untouched). An object created between the read and the
   * create is read again and treated the same way: for a related copy, usually another primary
   * that copies the same source; for a primary's copy, another replica or a sweep's older read.
   */
  async upsert(client: ObjectClient, write: Upsert): Promise<KubeObject | 'conflict'> {
    // A primary's copy is announced while it is written: its watch event may come before the write's
    // answer (cache/own-writes.ts). A related copy's own events are known by their content hash instead.
    const own = this.deps.ownWrites;
    const written = await (own && write.kind === 'primary' ? own.during(write.copy, () => this.write(client, write)) : this.write(client, write));
    if (written !== 'conflict' && write.charge) await this.deps.budget?.wrote(write.charge.tenant, write.copy, write.source, write.charge.bytes);
    return written;
  }

  private async write(client: ObjectClient, write: Upsert): Promise<KubeObject | 'conflict'> {
    if (write.existing) return this.withStatus(client, write, await this.update(client, write, write.existing));
    const created = await this.create(client, write);
    if (created !== 'exists') return this.withStatus(client, write, created);
    const now = await client.get(write.copy.namespace, write.copy.name);
    // Gone again already: the next reconcile (its deletion is an event) looks again.
    if (!now) throw new Error(`${write.copy.name} existed a moment ago and is gone; trying again`);
    return this.withStatus(client, write, await this.update(client, write, now));
  }

  /**
   * Throws ReadAgainLive when `copy` is another incarnation's (its marks name another uid of the
   * source) and the source is not, live, the one `write` copies (Upsert.sources): the
   * reconcile starts over reading live (once; a second time it fails, and the queue retries it).
   */
  private async sameIncarnation(write: Upsert, copy: KubeObject): Promise<void> {
    const marked = copy.metadata.annotations?.[SOURCE_UID_ANNOTATION];
    const mine = write.marks.annotations[SOURCE_UID_ANNOTATION];
    if (!write.sources || marked === undefined || mine === undefined || marked === mine) return;
    const live = (await write.sources.getMetadata(write.source.namespace, write.source.name))?.metadata.uid;
    if (live !== mine) throw new ReadAgainLive(`${describeIdentity(write.copy)} is the copy of another incarnation of ${describeIdentity(write.source)} than the one read (${live === undefined ? 'now gone' : 'made again since'}): read again live`);
  }

  /**
   * A copy whose status is copied too (a related rule's syncStatus): where the written copy does
   * not hold it, it is applied to the status subresource (the object's own write drops status
   * where the type has one), under relsync's field manager, the copy's uid as precondition.
   */
  private async withStatus(client: ObjectClient, write: Upsert, written: KubeObject | 'conflict'): Promise<KubeObject | 'conflict'> {
    const { status } = write;
    if (written === 'conflict' || !status) return written;
    // Held already (written with the object, for a type without a status subresource); or (not
    // `repair`) this very status was written before, and whatever changed it since is not relsync's to undo.
    if (stableJson(written.status ?? {}) === stableJson(status.value)) return written;
    if (!status.repair && status.written) return written;
    const { name, namespace } = write.copy;
    // At the version just written: marks stripped in between (or anything else) answer 409, and the reconcile reads again.
    const applied = await client.applyStatus({ metadata: { name, ...(namespace ? { namespace } : {}), uid: written.metadata.uid, resourceVersion: written.metadata.resourceVersion }, status: status.value }, this.fieldManager);
    // No status subresource where the object's own write dropped the status (a virtual workspace that does not serve it): nothing more to try.
    if (!applied) return written;
    this.deps.metrics.copiesWritten.inc({ kind: write.kind, action: 'status' });
    return this.recorded(write.copy, applied);
  }

  /**
   * A create or update of a copy in the service cluster, right before it is sent: refused
   * (RewritePaceError, the reconcile retried later) while its tenant owes the pace for what its
   * copies left in etcd's history (sync/rewrite-pace.ts); an update's replaced size is charged.
   */
  private async paced(write: Upsert, action: 'create' | 'update'): Promise<void> {
    if (!write.charge || !this.deps.budget) return;
    const due = this.deps.budget.rewriteDue(write.charge.tenant);
    if (due > 0) {
      this.deps.metrics.writesPaced?.inc({});
      this.deps.logger?.debug({ copy: describeIdentity(write.copy), tenant: write.charge.tenant, dueMs: due }, "a copy write waits for its tenant's rewrite pace (limits.rewriteBytesPerSecondPerCluster)");
      throw new RewritePaceError(Math.ceil(due / 1000));
    }
    if (action === 'update') await this.deps.budget.rewriting(write.charge.tenant, write.copy, write.charge.bytes);
  }

  /**
   * Updates a related copy that relsync itself last wrote (or saw) at `version` (objectVersion's
   * `resourceVersion/uid`, as the store keeps it for a synced relation), without reading it: the
   * version and the uid are the apply's preconditions, so a copy anyone changed since, replaced, or
   * deleted answers 409 (an apply would otherwise create a missing object), and the caller decides
   * on a live read. A copy whose answer shows fields still owned by an Update of relsync's (a copy
   * written before relsync applied its copies) has them folded and is applied again, as update() does.
   */
  async updateAt(client: ObjectClient, write: Upsert, version: string): Promise<KubeObject | 'conflict'> {
    const slash = version.indexOf('/');
    const [resourceVersion, uid] = [version.slice(0, slash), version.slice(slash + 1)];
    if (slash <= 0 || !uid) throw new Error(`${write.copy.name}: no stored version to update at (${version})`);
    await this.paced(write, 'update');
    const body = this.applied(write, resourceVersion);
    const written = await client.apply({ ...body, metadata: { ...body.metadata, uid } }, this.fieldManager);
    this.wrote(write, 'update');
    this.recorded(write.copy, written, resourceVersion);
    const result = await this.withStatus(client, write, this.needsUpgrade(written) ? await this.applyOver(client, write, written) : written);
    if (result !== 'conflict' && write.charge) await this.deps.budget?.wrote(write.charge.tenant, write.copy, write.source, write.charge.bytes);
    return result;
  }

  /**
   * The one way relsync deletes a copy. `existing` is the copy as the decision read it; it goes
   * only if it carries this agent's marks naming `source`. The decision's reads must be live
   * (confirmLive: a decision made on the cache starts over, reading live) unless it was made by a
   * sweep on its own complete LISTs and the store. The DELETE carries the uid and resourceVersion
   * read as preconditions: a copy written since (by a reconcile that claimed it, or by the replica
   * that took the shard over) is not deleted on an older view; the 409 leaves it to the next
   * reconcile, which decides on what it reads then: 'changed', which a caller that would let a
   * primary go on it takes as "not yet". 'absent': there was no marked copy of `source` to delete.
   */
  async remove(client: ObjectClient, removal: CopyRemoval): Promise<'deleted' | 'absent' | 'changed'> {
    const { kind, copy, source, decidedOn, existing } = removal;
    if (!existing) return this.gone(copy, source);
    // Before the marks are looked at: they may be the cache's too.
    if (decidedOn !== 'sweep') confirmLive(decidedOn);
    if (!this.isMarkedCopyOf(existing, source)) return this.gone(copy, source);
    try {
      await client.delete(copy.namespace, copy.name, existing.metadata.uid, existing.metadata.resourceVersion);
    } catch (err) {
      if (isConflict(err)) {
        this.deps.logger?.info({ copy: describeIdentity(copy), why: removal.why }, 'did not delete a copy that changed since it was read (its preconditions failed); the next reconcile decides again');
        return 'changed';
      }
      throw err;
    }
    this.deps.logger?.debug({ copy: describeIdentity(copy), why: removal.why }, 'deleted a copy');
    this.deps.onWritten?.(copy, existing.metadata.resourceVersion, true);
    this.deps.onDeleted?.(copy);
    this.deps.metrics.copiesRemoved.inc({ kind });
    if (removal.tally) removal.tally.removed++;
    await this.deps.budget?.removed(copy, source, true);
    return 'deleted';
  }

  /** No copy of relsync's is there (any more): it takes nothing of its tenant's budget. */
  private async gone(copy: ObjectIdentity, source: ObjectIdentity): Promise<'absent'> {
    await this.deps.budget?.removed(copy, source);
    return 'absent';
  }

  /**
   * Lets go of a related copy without deleting it (cleanupPolicy Orphan): relsync's labels and
   * annotations are removed, so the object is an ordinary one of whoever owns its namespace;
   * relsync never touches it again (an object without its marks is a conflict). The patch tests
   * the uid and each mark it removes, not the resourceVersion, so that a tenant who keeps changing
   * the copy cannot hold the release (and the primary's deletion) up. `claimedAgain`, asked after
   * the release: when it says a relation copies the same source there now (a reconcile that
   * claimed the copy while this one decided to let it go), the marks are put back, so that the
   * claimer keeps its copy. False when it is not (or no longer) the marked copy of `source`, or
   * was taken back.
   */
  async release(client: ObjectClient, { kind, copy, source, existing, claimedAgain }: Release): Promise<boolean> {
    if (!existing || !this.isMarkedCopyOf(existing, source)) return false;
    const pointer = (field: string, key: string) => `/metadata/${field}/${key.replaceAll('~', '~0').replaceAll('/', '~1')}`;
    const ours = (field: 'labels' | 'annotations') => Object.fromEntries(Object.entries(existing.metadata[field] ?? {}).filter(([key]) => isRelsyncKey(key)));
    const marks = (['labels', 'annotations'] as const).flatMap((field) => Object.entries(ours(field)).map(([key, value]) => ({ path: pointer(field, key), value })));
    const released = await client.jsonPatch(copy.namespace, copy.name, [
      { op: 'test', path: '/metadata/uid', value: existing.metadata.uid },
      ...marks.flatMap(({ path, value }) => [{ op: 'test' as const, path, value }, { op: 'remove' as const, path }]),
    ]);
    this.recorded(copy, released);
    if (claimedAgain && (await claimedAgain())) {
      // A merge patch: the release may have left no labels (or annotations) at all. The uid in it is a precondition.
      const restored = await client.mergePatch(copy.namespace, copy.name, { metadata: { uid: existing.metadata.uid, labels: ours('labels'), annotations: ours('annotations') } });
      this.recorded(copy, restored);
      return false;
    }
    this.deps.metrics.copiesReleased.inc({ kind });
    return true;
  }

  /** A copy was created or updated: counted in the metric and the caller's tally. */
  private wrote(write: Pick<Upsert, 'kind' | 'tally'>, action: 'create' | 'update'): void {
    this.deps.metrics.copiesWritten.inc({ kind: write.kind, action });
    if (write.tally) write.tally.written++;
  }

  /** Whether the object carries this agent's marks naming `source`. */
  isMarkedCopyOf(object: KubeObject, source: ObjectIdentity): boolean {
    const marked = markedSource(object, this.deps.agentName);
    return marked !== undefined && sameIdentity(marked, source);
  }

  /** Remembers the version a write of relsync's produced, so its own watch event is not routed back. */
  private recorded(id: ObjectIdentity, written: KubeObject, precondition?: string): KubeObject {
    this.deps.onWritten?.(id, written.metadata.resourceVersion);
    this.deps.ownWrites?.record(id, written.metadata.resourceVersion, precondition);
    return written;
  }

  /** What relsync applies: the copied fields, labels and annotations, its marks, and a resourceVersion as precondition. */
  private applied(write: Upsert, resourceVersion: string | undefined): KubeObject {
    const { copy, desired, marks } = write;
    return {
      ...desired.fields,
      // Dropped by the API server where the type has a status subresource (withStatus writes it there).
      ...(write.status ? { status: write.status.value } : {}),
      metadata: {
        name: copy.name,
        ...(copy.namespace ? { namespace: copy.namespace } : {}),
        ...(resourceVersion ? { resourceVersion } : {}),
        labels: { ...desired.labels, ...marks.labels },
        annotations: { ...desired.annotations, ...marks.annotations },
      },
    };
  }

  /** 'exists' when something (anyone's) already has the copy's name: nothing was written. */
  private async create(client: ObjectClient, write: Upsert): Promise<KubeObject | 'exists'> {
    const { copy } = write;
    await this.paced(write, 'create');
    const body = this.applied(write, CREATE_ONLY);
    const apply = () =>
      client.apply(structuredClone(body), this.fieldManager).catch((err: unknown) => {
        if (!refusesCreateOnly(err)) throw err;
        return this.createByPost(client, write);
      });
    let created: KubeObject;
    try {
      created = await apply().catch(async (err: unknown) => {
        // A related copy into a namespace that does not exist (yet), e.g. a service-origin copy's
        // platform namespace: create it, as relsync does for copy namespaces, and where it may not, say so.
        if (!write.createsNamespace || !copy.namespace || !isMissingNamespace(err)) throw err;
        await this.createNamespace(copy.cluster, copy.namespace).catch((e: unknown) => {
          throw isForbidden(e) ? new MissingNamespaceError(`namespace "${copy.namespace}" does not exist in cluster ${copy.cluster}, and relsync may not create it`) : e;
        });
        return apply();
      });
    } catch (err) {
      if (isConflict(err) || isAlreadyExists(err)) return 'exists';
      throw err;
    }
    this.wrote(write, 'create');
    return this.recorded(copy, created);
  }

  /**
   * kcp (v0.28.1) answers an apply that would create and names a resourceVersion with 500
   * "resourceVersion should not be set on objects to be created": there a create is a POST
   * (refused when the name is taken, as a create must be), and the Update entry it leaves is folded
   * into relsync's apply entry at once, so that later applies still let go of what the source drops
   * (should that patch fail, the next update folds it: see update()).
   */
  private async createByPost(client: ObjectClient, write: Upsert): Promise<KubeObject> {
    const { copy } = write;
    const created = await client.create(copy.namespace, this.applied(write, undefined), this.fieldManager);
    // Two versions (the POST's, then the patch's): both events are relsync's own.
    this.deps.ownWrites?.record(copy, created.metadata.resourceVersion);
    const managedFields = upgradedManagedFields(created.metadata.managedFields, this.fieldManager, this.clock.now());
    if (!managedFields) return created;
    return client
      .jsonPatch(copy.namespace, copy.name, [
        { op: 'test', path: '/metadata/resourceVersion', value: created.metadata.resourceVersion },
        { op: 'replace', path: '/metadata/managedFields', value: managedFields },
      ])
      .catch(() => created);
  }

  private async update(client: ObjectClient, write: Upsert, read: KubeObject): Promise<KubeObject | 'conflict'> {
    if (!this.isMarkedCopyOf(read, write.source)) return write.adopt ? this.adopt(client, write, write.adopt, read) : 'conflict';
    // An adoption whose last step did not land (see adopt()): finished first, on a live read (the
    // watches and LISTs drop managed fields, which the last step rewrites). Said no second time.
    const finished = write.adopt && read.metadata.annotations?.[ADOPT_ANNOTATION] === adoptionGrant(this.deps.agentName, write.source) ? await this.finishAdoptionLive(client, write) : read;
    if (finished === 'conflict') return 'conflict';
    if (isUpToDate(write.desired, write.marks, finished) && this.hasStatus(write, finished)) return finished;
    await this.paced(write, 'update');
    return this.applyOver(client, write, finished);
  }

  /**
   * Takes over the object in the copy's place when its owner granted it (adoption.ts). The grant is
   * looked for in the object as read (from the watches, maybe: one without a grant is refused
   * without a request, as a conflict is looked at again every 30 s) and decided on a live read.
   * The copy is applied over it first, marks included, at the version read (a change in between
   * answers 409, and the reconcile reads again): an apply the API server refuses (an immutable
   * field, admission) leaves the object as it was, grant and all. Then finishAdoption.
   */
  private async adopt(client: ObjectClient, write: Upsert, adopt: NonNullable<Upsert['adopt']>, read: KubeObject): Promise<KubeObject | 'conflict'> {
    const { copy } = write;
    if (read.metadata.annotations?.[ADOPT_ANNOTATION] === undefined) {
      adopt.refused(adoptionRefusal(read, this.deps.agentName, write.source) ?? 'no grant', true);
      return 'conflict';
    }
    const live = await client.get(copy.namespace, copy.name);
    if (!live) throw new Error(`${copy.name} went while relsync was deciding whether to adopt it; trying again`);
    if (this.isMarkedCopyOf(live, write.source)) return this.update(client, write, live);
    const refusal = adoptionRefusal(live, this.deps.agentName, write.source);
    if (refusal) {
      // A grant for someone else is not to be "corrected" from relsync's log: no grant is suggested then.
      adopt.refused(refusal, live.metadata.annotations?.[ADOPT_ANNOTATION] === undefined);
      return 'conflict';
    }
    // Not folded first (applyOver's upgrade is for relsync's own copies): the last step takes every other manager's claim over.
    const applied = await this.applyOver(client, write, live, false);
    if (applied === 'conflict') return 'conflict';
    const finished = await this.finishAdoption(client, write, applied);
    this.deps.metrics.copiesWritten.inc({ kind: write.kind, action: 'adopt' });
    await adopt.announce();
    return finished;
  }

  private async finishAdoptionLive(client: ObjectClient, write: Upsert): Promise<KubeObject | 'conflict'> {
    const live = await client.get(write.copy.namespace, write.copy.name);
    if (!live) throw new Error(`${write.copy.name} went while relsync finished adopting it; trying again`);
    if (!this.isMarkedCopyOf(live, write.source)) return 'conflict';
    return live.metadata.annotations?.[ADOPT_ANNOTATION] === adoptionGrant(this.deps.agentName, write.source) ? this.finishAdoption(client, write, live) : live;
  }

  /**
   * The last step of an adoption, on the object as relsync's apply left it: one JSON patch, tested
   * against its uid, resourceVersion and the grant, removes the grant (it is used once) and the
   * other managers' claims on the fields relsync applies (field-ownership.ts takenOverManagedFields),
   * so that a field the source drops later goes from the copy as from any other. Should it not land
   * (a change in between), the next reconcile finds the marked copy with its grant and does it then.
   */
  private async finishAdoption(client: ObjectClient, write: Upsert, applied: KubeObject): Promise<KubeObject> {
    const { copy } = write;
    const grantPath = `/metadata/annotations/${ADOPT_ANNOTATION.replaceAll('~', '~0').replaceAll('/', '~1')}`;
    const grant = adoptionGrant(this.deps.agentName, write.source);
    const managedFields = takenOverManagedFields(applied.metadata.managedFields, this.fieldManager);
    const finished = await client
      .jsonPatch(copy.namespace, copy.name, [
        { op: 'test', path: '/metadata/uid', value: applied.metadata.uid },
        { op: 'test', path: '/metadata/resourceVersion', value: applied.metadata.resourceVersion },
        { op: 'test', path: grantPath, value: grant },
        { op: 'remove', path: grantPath },
        ...(managedFields ? [{ op: 'replace' as const, path: '/metadata/managedFields', value: managedFields }] : []),
      ])
      .catch(async (err: unknown) => {
        if (!(err instanceof ApiError) || err.statusCode !== 422) throw err;
        // A failed `test` answers 422: changed since, a conflict like any other, retried live. Any
        // other 422 (an admission policy's) is the API server's refusal, and stays one.
        const now = await client.get(copy.namespace, copy.name);
        const same = now !== undefined && now.metadata.uid === applied.metadata.uid && now.metadata.resourceVersion === applied.metadata.resourceVersion && now.metadata.annotations?.[ADOPT_ANNOTATION] === grant;
        if (same) throw err;
        throw new ApiError('PATCH', `${copy.namespace}/${copy.name}`, 409, JSON.stringify({ kind: 'Status', reason: 'Conflict', message: `changed while relsync adopted it: ${err.message}` }));
      });
    return this.recorded(copy, finished, applied.metadata.resourceVersion);
  }

  /** Whether the copy holds the status it should (see Upsert.status); its marks (with the status hash) are judged with its content. */
  private hasStatus(write: Upsert, copy: KubeObject): boolean {
    const { status } = write;
    return !status || (status.repair ? stableJson(copy.status ?? {}) === stableJson(status.value) : status.written);
  }

  /**
   * Fields still owned by an Update of relsync's — a copy written before it applied its copies (it
   * carries the old record of copied keys), or created by POST on kcp (its own Update entry; objects
   * from a LIST carry no managed fields, a watch's do) — which must become its applied fields first.
   */
  private needsUpgrade(copy: KubeObject): boolean {
    return oldRecordOf(copy.metadata.annotations) !== undefined || hasFieldsToFold(copy.metadata.managedFields, this.fieldManager);
  }

  /** Applies `write` over `read` (relsync's copy), after folding what needsUpgrade() finds (unless `upgrade` is false: an adoption's own object). */
  private async applyOver(client: ObjectClient, write: Upsert, read: KubeObject, upgrade = true): Promise<KubeObject | 'conflict'> {
    let current = read;
    if (upgrade && this.needsUpgrade(current)) {
      const upgraded = await this.upgradeOwnership(client, write, oldRecordOf(current.metadata.annotations));
      if (upgraded === 'conflict') return 'conflict';
      if (upgraded) current = upgraded;
    }
    if (!current.metadata.resourceVersion) throw new Error(`${write.copy.name}: read without a resourceVersion; an update without one would be unconditional`);
    // Every update of a copy comes here, on the version its precondition names.
    await this.sameIncarnation(write, current);
    // The version read is the precondition: a change since (a cached read behind the API server,
    // another writer) answers 409, and the reconcile reads live and decides again.
    const written = await client.apply(this.applied(write, current.metadata.resourceVersion), this.fieldManager);
    // Deleted since it was read (and not made again by anyone): the apply created it.
    this.wrote(write, written.metadata.uid === current.metadata.uid ? 'update' : 'create');
    return this.recorded(write.copy, written, current.metadata.resourceVersion);
  }

  /**
   * A copy written before relsync applied its copies: its fields become relsync's applied fields
   * (field-ownership.ts), read and patched live; the copy as it is then, undefined when it is gone.
   */
  private async upgradeOwnership(client: ObjectClient, write: Upsert, old: OldRecord | undefined): Promise<KubeObject | 'conflict' | undefined> {
    const live = await client.get(write.copy.namespace, write.copy.name);
    if (!live) return undefined;
    if (!this.isMarkedCopyOf(live, write.source)) return 'conflict';
    const managedFields = upgradedManagedFields(live.metadata.managedFields, this.fieldManager, this.clock.now(), old ?? oldRecordOf(live.metadata.annotations));
    if (!managedFields) return live;
    return client
      .jsonPatch(write.copy.namespace, write.copy.name, [
        { op: 'test', path: '/metadata/resourceVersion', value: live.metadata.resourceVersion },
        { op: 'replace', path: '/metadata/managedFields', value: managedFields },
      ])
      .catch((err: unknown) => {
        // A failed `test` (changed since the GET) answers 422: a conflict like any other, retried live.
        if (err instanceof ApiError && err.statusCode === 422) throw new ApiError('PATCH', `${write.copy.namespace}/${write.copy.name}`, 409, JSON.stringify({ kind: 'Status', reason: 'Conflict', message: `changed while its field ownership was upgraded: ${err.message}` }));
        throw err;
      });
  }

  /** A related copy's missing namespace (primaries' copy namespaces: copy-namespaces.ts). */
  private async createNamespace(cluster: string, name: string): Promise<void> {
    try {
      await this.deps.clusters.client(cluster, namespaceType).create('', { metadata: { name, labels: { [AGENT_LABEL]: this.deps.agentName } } });
    } catch (err) {
      if (!isAlreadyExists(err)) throw err;
    }
  }
}

/** kcp's answer to an apply that would create with a resourceVersion (see CopyWriter.createByPost). */
function refusesCreateOnly(err: unknown): boolean {
  return err instanceof ApiError && err.statusCode === 500 && /resourceVersion should not be set on objects to be created/.test(err.message);
}

/** A 404 to a create whose namespace does not exist (the API server names the namespace, not the object). */
function isMissingNamespace(err: unknown): boolean {
  return isNotFound(err) && /namespaces? "[^"]*" not found/.test((err as Error).message);
}
