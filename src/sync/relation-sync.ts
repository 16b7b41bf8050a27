/**
 * Syncs one relation of a primary: reads its source and destination, decides
 * (copy, update, wait for the source, refuse, conflict) and writes through
 * copy-writer.ts; and releases the copies of relations a primary no longer
 * resolves to. The reconciler finds the relations (related-finder.ts) and
 * stores the outcomes; this holds what happens to each one, so that a change
 * that concerns one relation is synced as that relation alone (edge-sync.ts).
 * `sync()` expects what the reconciler did before it: the primary's copy
 * written into a copy namespace it claimed, the relation's claim recorded in
 * the store, and the per-primary cap applied.
 */
import type { Logger } from 'pino';
import type { CopyPolicy } from '../config/copy-policy.js';
import { compositeKey } from '../core/composite-key.js';
import { sameType, type ResourceType } from '../core/resource-type.js';
import { describeIdentity, identityKey, type ObjectIdentity } from '../core/identity.js';
import type { KubeObject } from '../core/object.js';
import { ApiError, isConflict, isForbidden, isNotFound, isObjectNotFound } from '../kube/api-error.js';
import type { RelatedPair, ResolveInput } from '../rules/resolve-related.js';
import { mutated, specView } from '../rules/mutation.js';
import type { ResolvedRule } from '../rules/rule.js';
import { leftNothing, type RelationRecord, type RelationVersions } from '../store/records.js';
import { ROW_BYTES, type RelationStore } from '../store/relation-store.js';
import type { ClusterAccess, ObjectClient } from '../cache/cluster-access.js';
import { contentOf, stableJson, type CopyContent } from './content.js';
import { convertContent } from './content-conversion.js';
import type { ContentHasher } from './content-hasher.js';
import type { CopyNamespaces } from './copy-namespaces.js';
import type { CopyRefusals } from './copy-refusals.js';
import { MissingNamespaceError, type CopyTally, type CopyWriter, type Upsert } from './copy-writer.js';
import { objectVersion } from '../core/object-version.js';
import type { EventRecorder } from './event-recorder.js';
import { marksFor } from '../core/marks.js';
import { AdoptionRefusals } from './adoption.js';
import { ExpiringMap } from '../util/expiring-map.js';
import { systemClock, type Clock } from '../util/clock.js';
import type { ClaimKnowledge } from './claim-knowledge.js';
import { confirmLive, ReadAgainLive, type ObjectReads } from '../cache/object-reads.js';
import type { Claim, RelatedFinder, RelationOutcome } from './related-finder.js';
import type { ResolvedResource } from './resolved-config.js';
import type { SyncMetrics } from './sync-metrics.js';
import type { CopyBudget } from './copy-budget.js';
import { CONFLICT_RETRY_MS, WARNING_REPEAT_MS } from './sync-intervals.js';
import { heavyTurns } from '../util/heavy-turns.js';
import { CONTENT_HASH_ANNOTATION, STATUS_HASH_ANNOTATION } from '../core/relsync-keys.js';

export interface RelationSyncDeps {
  readonly agentName: string;
  readonly clusters: ClusterAccess;
  readonly store: RelationStore;
  readonly recorder: EventRecorder;
  readonly logger: Logger;
  readonly metrics: SyncMetrics;
  readonly hasher: ContentHasher;
  readonly copyNamespaces: CopyNamespaces;
  readonly policy: CopyPolicy;
  readonly refusals: CopyRefusals;
  readonly writer: CopyWriter;
  readonly finder: RelatedFinder;
  /** How soon to look again at a relation that waits for something outside relsync; default CONFLICT_RETRY_MS (30 s). */
  readonly conflictRetryMs?: number | undefined;
  /** limits.relatedPerPrimary: also bounds the copies a cleanup policy keeps (default 500). */
  readonly limits?: { readonly relatedPerPrimary: number } | undefined;
  /** Whether the store knows every claim of a cluster (claim-knowledge.ts); without it, the store is trusted. */
  readonly claims?: ClaimKnowledge | undefined;
  /** What each tenant's copies may take in the service cluster (copy-budget.ts); default: no budget. */
  readonly budget?: Pick<CopyBudget, 'refusal'> | undefined;
  /** What refusals logged are remembered for on; default systemClock. */
  readonly clock?: Clock | undefined;
}

/** One relation to sync (RelationSync.sync). */
export interface RelationJob {
  /** Where the primary's reconcile reads. */
  readonly reads: ObjectReads;
  /** Counts the copies written and deleted for it (the reconcile's). */
  readonly tally?: CopyTally;
  readonly input: ResolveInput;
  readonly pair: RelatedPair;
  /** The primary. */
  readonly owner: ObjectIdentity;
  /**
   * Whether the store says this relation's copy was written (synced, or in conflict with an object
   * in its place); when it does not (a new relation), a destination the watches did not deliver is
   * not read before it is created. Default true.
   */
  readonly copied?: boolean;
  /**
   * Whether the store says this relation found nothing in the copy's place when it last decided
   * (it waits for its source: records.ts leftNothing). Its source still absent, a destination the
   * watches did not deliver is then not read (sourceAbsent): a wildcard of names that do not exist
   * costs the tenant's own reads at every reconcile, not one in the service cluster each too.
   * Default false.
   */
  readonly leftNothing?: boolean;
  /**
   * The version of the copy the store says this synced relation last wrote or saw (edge-sync.ts): a
   * copy in the service cluster that the watches did not deliver is then updated at that version
   * instead of read first.
   */
  readonly writtenAt?: string | undefined;
  /** The content hash the store holds for this relation, when it was synced. */
  readonly syncedHash?: string | null;
}

/** The primary whose relations end: where its reconcile reads, its resource, itself. */
export interface PrimaryOf {
  readonly reads: ObjectReads;
  readonly resource: ResolvedResource;
  readonly owner: ObjectIdentity;
  /** Counts the copies deleted for it (the reconcile's). */
  readonly tally?: CopyTally;
}

/** One relation being synced: its job, its outcome's identity, the clients of its two sides. */
interface RelationAt {
  readonly job: RelationJob;
  readonly base: Pick<RelationOutcome, 'ruleId' | 'origin' | 'source' | 'destination'>;
  readonly sources: ObjectClient;
  readonly dests: ObjectClient;
  /** The destination is in the service cluster. */
  readonly inService: boolean;
  /** A Warning Event on the primary (`reason`, default RelatedSyncFailed) and the relation's error outcome. */
  readonly failed: (message: string, reason?: string, contentHash?: string | null) => RelationOutcome;
}

/** One side of a relation as read; `forbidden`: why relsync may not read it. */
interface SideRead {
  readonly object?: KubeObject | undefined;
  readonly forbidden?: string;
  readonly notServed?: boolean;
}

/** What the copy holds (RelationSync.desiredOf), and whom it is charged to. */
type Judged = ReturnType<RelationSync['desiredOf']> & { readonly charge: { readonly tenant: string; readonly bytes: number } | undefined };

/** What is in the destination's place (`existing`), or the version to update it at without reading it. */
interface Place {
  readonly existing: KubeObject | undefined;
  readonly atVersion: string | undefined;
}

export class RelationSync {
  private readonly refusals: AdoptionRefusals;

  constructor(private readonly deps: RelationSyncDeps) {
    this.refusals = new AdoptionRefusals(deps.logger, deps.agentName, deps.clock);
    this.told = new ExpiringMap(10_000, deps.clock ?? systemClock);
  }

  /**
   * Syncs one relation, in steps: the source read (absent: the copy goes or is kept, as the rule's
   * cleanup policy says), what its copy holds judged (depth, size, Secret type, the tenant's budget),
   * the destination's place read and claimed (not relsync's: a conflict), then the write. Each step
   * that ends the relation's sync returns its outcome.
   */
  async sync(job: RelationJob): Promise<RelationOutcome> {
    const { rule, primary } = job.input;
    const { clusters } = this.deps;
    const on: RelationAt = {
      job,
      base: { ruleId: rule.id, origin: rule.origin, source: job.pair.source, destination: job.pair.destination },
      sources: clusters.client(job.pair.source.cluster, rule.sourceType),
      dests: clusters.client(job.pair.destination.cluster, rule.destinationType),
      // A destination in the service cluster that relsync will not write reads the same to the tenant
      // whatever is there (refused()); one on the tenant's own platform is said as it is.
      inService: job.pair.destination.cluster === clusters.service.name,
      failed: (message, reason = 'RelatedSyncFailed', contentHash = null) => {
        this.deps.recorder.warn(job.owner.cluster, primary, reason, message);
        return { ...on.base, state: 'error', contentHash, message };
      },
    };
    const sourceRead = await this.read(on, on.sources, job.pair.source);
    if (sourceRead.forbidden !== undefined) return this.refusedRead(on, sourceRead);
    // A source that is not provably the copy's reads as absent, with the same message: the tenant
    // learns nothing about the provider's objects, not even that one of that name exists.
    const source = sourceRead.object && !this.deps.finder.isOwnCopyAsServiceSource(rule, sourceRead.object) && this.deps.finder.isProven(job.input, sourceRead.object) ? sourceRead.object : undefined;
    if (!source) return this.sourceAbsent(on, sourceRead.object);
    const judged = await this.judge(on, source);
    if ('state' in judged) return judged;
    const place = await this.placeOf(on, judged);
    if ('state' in place) return place;
    return this.write(on, source, judged, place);
  }

  /** Reads one side of a relation; not allowed to (a kcp workspace that did not accept a claim, or RBAC): said, and this relation fails, the others go on. */
  private async read(on: RelationAt, client: ObjectClient, id: ObjectIdentity): Promise<SideRead> {
    const { rule } = on.job.input;
    try {
      return { object: await on.job.reads.get(id.cluster, client.type, id.namespace, id.name) };
    } catch (err) {
      if (isForbidden(err)) return { forbidden: `rule ${rule.id}: ${this.deps.refusals.forbidden(id.cluster, client.type, 'read')}` };
      const notServed = this.notServed(err, rule, id);
      if (notServed) return { forbidden: `rule ${rule.id}: ${notServed}`, notServed: true };
      throw err;
    }
  }

  /** A side relsync may not read or write. Not served may be a moment's (a binding on its way): looked at again, as a missing namespace is. */
  private refusedRead(on: RelationAt, refused: { readonly forbidden?: string; readonly notServed?: boolean }): RelationOutcome {
    return { ...on.failed(refused.forbidden!), ...(refused.notServed ? { retrySoon: true } : {}) };
  }

  /** No source (or none provably the copy's): the copy goes, or stays as it was where the rule's cleanup policy keeps it. */
  private async sourceAbsent(on: RelationAt, sourceSeen: KubeObject | undefined): Promise<RelationOutcome> {
    const { reads, input: { rule }, pair } = on.job;
    const waiting = `waiting for ${describeIdentity(pair.source)} to exist`;
    // Nothing of this relation's there when it last looked, and nothing in its place the watches know of.
    if (on.job.leftNothing && this.nothingKnownAt(reads, on.job.owner, pair.destination, rule.destinationType)) {
      return { ...on.base, state: 'pending', contentHash: null, message: waiting, versions: relationVersions(sourceSeen, undefined) };
    }
    const destRead = await this.read(on, on.dests, pair.destination);
    if (destRead.forbidden !== undefined) return this.refusedRead(on, destRead);
    if (rule.cleanup !== 'MatchOrigin' && destRead.object && this.deps.writer.isMarkedCopyOf(destRead.object, pair.source)) {
      // The copy stays until the primary goes (cleanupPolicy), as it was: no longer updated.
      const message = `${waiting}; its copy is kept as it was until the primary is deleted (cleanupPolicy ${rule.cleanup})`;
      return { ...on.base, state: 'retained', contentHash: null, message, versions: null };
    }
    // The source's absence is the API server's word; the destination's marks may be the cache's (remove() confirms live).
    const removed = (await this.deps.writer.remove(on.dests, { kind: 'related', copy: pair.destination, source: pair.source, existing: destRead.object, decidedOn: reads, why: 'source gone', tally: on.job.tally })) === 'deleted';
    // Decided on the source's version (absent, or there but not provably the copy's) and on what is left in the destination's place.
    const versions = relationVersions(sourceSeen, removed ? undefined : destRead.object);
    return { ...on.base, state: 'pending', contentHash: null, message: waiting, versions };
  }

  /**
   * Whether the watches hold nothing of that name where a relation the store says found nothing
   * there would put its copy, while the store knows every claim of the owner's cluster
   * (claim-knowledge.ts: a lost or older store may not know that a relation wrote a copy). False
   * where the reads have no such knowledge (live reads, a sweep's): read it.
   */
  private nothingKnownAt(reads: ObjectReads, owner: ObjectIdentity, destination: ObjectIdentity, type: ResourceType): boolean {
    return reads.holds !== undefined && this.claimsKnown(owner.cluster) && !reads.holds(destination.cluster, type, destination.namespace, destination.name);
  }

  /** Whether the store knows every claim on the copies of `cluster`'s primaries (claim-knowledge.ts); without that knowledge, it is trusted. */
  private claimsKnown(cluster: string): boolean {
    return !this.deps.claims || this.deps.claims.complete(cluster);
  }

  /**
   * Whether a claim that ends leaves nothing to remove, so that it ends without a read, a store
   * query or a live restart: the store says it found nothing in its destination (records.ts
   * leftNothing; a wildcard's name that never existed), and the watches hold nothing there
   * (nothingKnownAt). A copy another primary leaves to such a claim is handed over to it: its row
   * then says "unknown" (RelationStore.handOver), and its end reads the copy.
   */
  leavesNothing(of: PrimaryOf, relation: EndedRelation): boolean {
    const type = ruleOf(of.resource, relation)?.destinationType;
    return type !== undefined && leftNothing(relation) && this.nothingKnownAt(of.reads, of.owner, relation.destination, type);
  }

  /** What the copy of `source` holds, judged before anything is read or written at the destination; or why it is not written. */
  private async judge(on: RelationAt, source: KubeObject): Promise<RelationOutcome | Judged> {
    const { input: { rule, primary }, pair, owner } = on.job;
    const not = (why: string) => `rule ${rule.id}: ${describeIdentity(pair.source)} is not copied: ${why}`;
    // Nested deeper than relsync reads (copy-refusals.ts): refused before its content is converted,
    // mutated or hashed. A copy written before stays as it was, as for a copy over the size limit.
    const tooDeep = this.deps.refusals.depth(source);
    if (tooDeep) return on.failed(not(tooDeep));
    // Labels and annotations over the size limit on their own (a tenant's megabyte of them): refused
    // before the content is serialized and hashed. A copy written before stays, as below.
    const start = this.contentStart(source);
    if (start.refused) return on.failed(not(start.refused));
    const desired = this.desiredOf(rule, source, start.content);
    // Converting, mutating and hashing a large source took milliseconds: the rest waits for a turn
    // on the event loop (util/heavy-turns.ts), so that a reconcile of many large related objects
    // read from memory (the cache, a sweep's snapshot) is not one long task.
    await heavyTurns.turn(desired.serialized.length, owner.cluster);
    // A mutation that did not fit this source: said on the primary (the value stays as it was in the copy).
    for (const p of desired.problems) this.deps.recorder.warn(owner.cluster, primary, 'MutationProblem', `the copy of ${describeIdentity(pair.source)}: ${p}`);
    // A copy written before stays as it was (removing it could make the operator act); it is no longer updated.
    const tooBig = this.deps.refusals.size(desired.serialized);
    if (tooBig) return on.failed(not(tooBig));
    // Judged on what is written, and on the source when it is a Secret written as another kind: a
    // token-minting Secret's values are not the other side's to read in a ConfigMap either.
    const refusal = this.deps.refusals.secret(rule.destinationType, desired.desired) ?? this.deps.refusals.secret(rule.sourceType, { fields: { type: source.type } });
    if (refusal) {
      // A tenant's Secret that would make the other side act (mint a token): never copied; a copy
      // written before the policy said so goes.
      const destRead = await this.read(on, on.dests, pair.destination);
      if (destRead.forbidden !== undefined) return this.refusedRead(on, destRead);
      await this.deps.writer.remove(on.dests, { kind: 'related', copy: pair.destination, source: pair.source, existing: destRead.object, decidedOn: on.job.reads, why: 'refused content', tally: on.job.tally });
      return on.failed(not(refusal));
    }
    // Into the service cluster, charged to the primary's tenant (copy-budget.ts); past its budget,
    // kept as it was, like one too big. Judged before the destination is read or its namespace
    // claimed: a tenant at its budget learns nothing of what is there, and makes no namespace.
    const charge = on.inService ? { tenant: owner.cluster, bytes: Buffer.byteLength(desired.serialized) } : undefined;
    const overBudget = charge && (await this.deps.budget?.refusal(charge.tenant, pair.destination, charge.bytes));
    if (overBudget) return on.failed(`rule ${rule.id}: ${overBudget}`, 'CopyBudgetReached');
    return { ...desired, charge };
  }

  /**
   * What is in the destination's place, and whether relsync may write there: a new relation's
   * destination that the watches did not deliver is not read (the write is a create that the API
   * server refuses when anything has the name, and then it is read, copy-writer.ts: a first sync
   * costs one write per copy, not a GET and a write); a relation whose copy was written reads it
   * (from the watches, or the API server), or, beside the primary's copy, updates it at the version
   * the store says it wrote.
   */
  private async placeOf(on: RelationAt, judged: Judged): Promise<RelationOutcome | Place> {
    const { reads, input, pair, owner, copied = true, writtenAt } = on.job;
    const { rule } = input;
    const known = !copied || writtenAt !== undefined ? reads.peek?.(pair.destination.cluster, rule.destinationType, pair.destination.namespace, pair.destination.name) : undefined;
    // The copy as relsync left it, not read: its version is the write's precondition (copy-writer.ts
    // updateAt). Only beside the primary's copy, whose namespace the caller saw it in (a rule's own
    // destination namespace is claimed again before anything is written there).
    const atVersion = !known && writtenAt !== undefined && on.inService && pair.destination.namespace === (input.copy.metadata.namespace ?? '') ? writtenAt : undefined;
    let existing: KubeObject | undefined = known?.object;
    if (!known && atVersion === undefined && (copied || !reads.peek)) {
      const destRead = await this.read(on, on.dests, pair.destination);
      if (destRead.forbidden !== undefined) return on.inService ? this.refused(on, judged.hash, destRead.forbidden) : this.refusedRead(on, destRead);
      existing = destRead.object;
    }
    // Not relsync's: a conflict, unless the rule adopts and the writer finds it granted (adoption.ts).
    const foreign = existing !== undefined && !this.deps.writer.isMarkedCopyOf(existing, pair.source);
    if (foreign && !rule.adopt) return this.conflict(on, judged.hash);
    // A service-side destination namespace of the rule's own (namespace.destination) serves this
    // primary's source namespace, as a copy namespace does: one that serves another source is a conflict
    // (also for an object granted for adoption there).
    const destNamespace = pair.destination.namespace;
    if ((!existing || foreign) && atVersion === undefined && on.inService && destNamespace && rule.destinationNamespace && destNamespace !== input.copy.metadata.namespace) {
      const taken = await this.deps.copyNamespaces.claim(reads, { template: rule.destinationNamespace, where: `${rule.where}.namespace.destination` }, { cluster: owner.cluster, namespace: owner.namespace }, destNamespace);
      if (taken) return this.refused(on, judged.hash, taken);
    }
    return { existing, atVersion };
  }

  /** An object in the destination's place that is not relsync's copy of this source. */
  private conflict(on: RelationAt, hash: string): RelationOutcome {
    const { input: { rule }, pair } = on.job;
    if (on.inService) return this.refused(on, hash, "an object there is not relsync's copy of this source (the provider's own, another source's copy, or one not granted for adoption)");
    this.deps.metrics.conflicts.inc({ kind: 'related' });
    return { ...on.base, state: 'conflict', contentHash: hash, message: `rule ${rule.id}: ${describeIdentity(pair.destination)} exists and is not relsync's copy of ${describeIdentity(pair.source)}; it is left untouched` };
  }

  /** The copy written; what the destination's API server answered decides the outcome. */
  private async write(on: RelationAt, source: KubeObject, judged: Judged, place: Place): Promise<RelationOutcome> {
    const { input: { rule, primary }, pair, owner, syncedHash } = on.job;
    // A row that says it found nothing there lets a later reconcile skip reading the copy's place:
    // it says "unknown" before the copy is written, so that a reconcile that writes it and then
    // fails (its outcome not saved) leaves no such word behind.
    if (on.job.leftNothing) await this.deps.store.unknownAt({ dest: pair.destination, source: pair.source, primary: owner, ruleId: rule.id });
    const { desired, hash, markHash, status, charge } = judged;
    const baseMarks = marksFor(this.deps.agentName, pair.source, source.metadata.uid);
    const statusMark: Record<string, string> = status ? { [STATUS_HASH_ANNOTATION]: status.hash } : {};
    const marks = { labels: baseMarks.labels, annotations: { ...baseMarks.annotations, [CONTENT_HASH_ANNOTATION]: markHash, ...statusMark } };
    let written: KubeObject | 'conflict';
    try {
      // A copy's status on a platform is relsync's alone (set back when changed); in the service cluster its operator may write it too.
      // `written`: the store says this relation was synced with this very content and status, so the status write succeeded.
      const statusWrite = status && { ...status, repair: !on.inService, written: syncedHash === hash };
      const adopt = rule.adopt ? this.adoption(owner, primary, rule, pair) : undefined;
      const write = { kind: 'related' as const, copy: pair.destination, source: pair.source, desired, marks, existing: place.existing, createsNamespace: true, status: statusWrite, adopt, charge, tally: on.job.tally, sources: on.sources };
      written = place.atVersion !== undefined ? await this.atVersionOrLive(on.dests, write, place.atVersion) : await this.deps.writer.upsert(on.dests, write);
      if (written === 'conflict') return this.conflict(on, hash);
    } catch (err) {
      return this.writeFailed(on, hash, err);
    }
    return { ...on.base, state: 'synced', contentHash: hash, message: null, versions: relationVersions(source, written) };
  }

  /** A write the destination refused: the relation's outcome, or (for what a retry may fix) the reconcile's error. */
  private async writeFailed(on: RelationAt, hash: string, err: unknown): Promise<RelationOutcome> {
    const { input: { rule }, pair, owner } = on.job;
    const cannot = `rule ${rule.id}: cannot write ${describeIdentity(pair.destination)}`;
    // The copy is another incarnation's: the reconcile starts over, reading live (copy-writer.ts).
    if (err instanceof ReadAgainLive) throw err;
    if (err instanceof MissingNamespaceError) {
      return { ...on.failed(`${cannot}: ${err.message}; relsync looks again every ${Math.round((this.deps.conflictRetryMs ?? CONFLICT_RETRY_MS) / 1000)} s`, 'RelatedSyncFailed', hash), retrySoon: true };
    }
    // A concurrent change (409), throttling (429), a server error, expired credentials or an
    // unreachable cluster: the whole reconcile is retried with the work queue's backoff (never
    // sooner than Retry-After).
    if (isConflict(err)) throw err;
    if (isTransient(err)) {
      // Until a retry lands, the primary does not read as synced. (Always followed by the throw:
      // the reconcile's last save compares with the rows it knows, store/relation-store.ts KnownRows.)
      await this.deps.store.setPrimaryState(owner, 'error', `${cannot} yet: ${(err as Error).message}; retrying`);
      throw err;
    }
    const notServed = this.notServed(err, rule, pair.destination);
    if (notServed) return this.refusedRead(on, { forbidden: `${cannot}: ${notServed}`, notServed: true });
    // Forbidden (RBAC, an admission policy that reserves the name): the service cluster's 403 may
    // differ with what exists there (an apply that creates needs `create` as well), so it reads
    // as any other refused destination. A 422 is about the content, the tenant's to fix: said below.
    if (on.inService && isForbidden(err)) return this.refused(on, hash, (err as Error).message);
    // Refused for good (invalid, denied, forbidden): parked until the source, the primary or the config changes.
    return on.failed(`${cannot}: ${(err as Error).message}`, 'RelatedSyncFailed', hash);
  }

  /**
   * A related copy's destination in the service cluster that relsync will not write — an object
   * there that is not this source's copy (the provider's own, another source's copy, one not
   * granted for adoption), a destination namespace serving another source, a read or write the
   * service cluster forbids — answered to the tenant in one way: a conflict, with the same message
   * for all, so that the names a primary points at tell nothing of what the provider has there
   * (issue #36). Looked at again as any conflict is (every 30 s, and when the object in the way
   * goes). `why` goes to the provider's log, once per destination and reason in ten minutes.
   */
  private refused({ base, job: { owner, input: { rule } } }: RelationAt, hash: string, why: string): RelationOutcome {
    this.deps.metrics.conflicts.inc({ kind: 'related' });
    const told = compositeKey(identityKey(base.destination), why);
    if (!this.told.get(told)) {
      this.told.set(told, true, WARNING_REPEAT_MS);
      this.deps.logger.warn({ rule: rule.where, primary: describeIdentity(owner), source: describeIdentity(base.source), destination: describeIdentity(base.destination), why }, "a related copy's place in the service cluster is refused; the tenant is told only that it is taken or closed");
    }
    return {
      ...base,
      state: 'conflict',
      contentHash: hash,
      message: `rule ${rule.id}: the copy of ${describeIdentity(base.source)} is not written: ${describeIdentity(base.destination)} is taken or closed to this primary in the service cluster; it is left untouched`,
    };
  }

  /** Destinations and reasons whose refusal was logged in the last ten minutes (refused()). */
  private readonly told: ExpiringMap<string, true>;

  /**
   * A type of another APIExport (a rule's identityHash) that a workspace does not serve: kcp answers
   * a 404 of the whole path in a workspace that does not bind that export. Said so for such a rule's
   * platform-side objects only; any other 404 (a missing namespace, an object) is not this.
   */
  private notServed(err: unknown, rule: ResolvedRule, id: ObjectIdentity): string | undefined {
    if (rule.identityHash === undefined || id.cluster === this.deps.clusters.service.name) return undefined;
    if (!isNotFound(err) || isObjectNotFound(err, id.name) || /namespaces? "[^"]*" not found/.test((err as Error).message)) return undefined;
    return this.deps.refusals.notServed(id.cluster, rule.origin === 'platform' ? rule.sourceType : rule.destinationType);
  }

  /**
   * For a rule with `adopt: true`: a Normal Event on the primary when its copy was adopted; why an
   * object in the way was not goes to relsync's log only (the provider's: the tenant learns nothing
   * of an object in the service cluster), with the grant that would let relsync adopt it.
   */
  private adoption(owner: ObjectIdentity, primary: KubeObject, rule: ResolvedRule, pair: RelatedPair): NonNullable<Upsert['adopt']> {
    return {
      announce: async () => this.deps.recorder.normal(owner.cluster, primary, 'Adopted', `rule ${rule.id}: relsync adopted ${describeIdentity(pair.destination)} as the copy of ${describeIdentity(pair.source)}, as its owner granted`),
      refused: (reason, suggestGrant) => this.refusals.note(rule.where, { object: pair.destination, source: pair.source }, reason, suggestGrant),
    };
  }

  /**
   * The write at the stored version; when the copy is no longer as relsync left it (changed,
   * replaced, deleted, its namespace gone, or moved on by another primary's write of a copy they
   * share), decided on a live read as any write is.
   */
  private async atVersionOrLive(dests: ObjectClient, write: Upsert, version: string): Promise<KubeObject | 'conflict'> {
    try {
      return await this.deps.writer.updateAt(dests, write, version);
    } catch (err) {
      if (!isConflict(err) && !isNotFound(err)) throw err;
      return this.deps.writer.upsert(dests, { ...write, existing: await dests.get(write.copy.namespace, write.copy.name) });
    }
  }

  /**
   * What a copy of `source` holds, serialized once (weighed against the size limit) and its keyed
   * hash: the store keeps it, and a change whose hash equals the stored one needs no write. With
   * the rule's `syncStatus`, the source's status goes beside it (`{}` when the source has none, so
   * that what relsync wrote before goes): the stored hash covers it, `markHash` (the copy's
   * content-hash annotation, which the router compares with a hash of the copy's content) does not,
   * and `status.hash` is the copy's status-hash annotation.
   */
  /**
   * What of `source` a copy starts from (content.ts contentOf, under the copy policy), and why it
   * is refused by its labels and annotations alone (copy-refusals.ts metadataSize), before anything
   * is written out.
   */
  contentStart(source: KubeObject): { content: CopyContent; refused: string | undefined } {
    const content = contentOf(source, this.deps.policy);
    return { content, refused: this.deps.refusals.metadataSize(content) };
  }

  /** `content`: contentStart's, when the caller has it (a tenant's 12,000 labels are filtered once). */
  desiredOf(rule: ResolvedRule, source: KubeObject, content = contentOf(source, this.deps.policy)): { desired: CopyContent; serialized: string; hash: string; markHash: string; status?: { value: Record<string, unknown>; hash: string }; problems: string[] } {
    // Mutated after the conversion (paths name the written type's fields); a problem leaves that rule's value as it was.
    const converted = convertContent(content, rule.sourceType, rule.destinationType);
    const spec = mutated(converted.fields, rule.mutation?.spec ?? [], specView(source));
    const desired = { ...converted, fields: spec.result };
    const serialized = stableJson(desired);
    const markHash = this.deps.hasher.hashSerialized(serialized);
    if (!rule.syncStatus) return { desired, serialized, hash: markHash, markHash, problems: spec.problems };
    const statusMutation = mutated({ status: source.status ?? {} }, rule.mutation?.status ?? [], source);
    const value = (statusMutation.result.status ?? {}) as Record<string, unknown>;
    const statusText = stableJson(value);
    return {
      desired,
      serialized: `${serialized}${statusText}`,
      hash: this.deps.hasher.hashSerialized(`${serialized}\u0000status\u0000${statusText}`),
      markHash,
      status: { value, hash: this.deps.hasher.hashStatus(value) },
      problems: [...spec.problems, ...statusMutation.problems],
    };
  }

  /**
   * Relations this primary had before and no longer resolves to: their copies go unless some
   * relation of this primary or another still copies the same source there. A rule whose cleanup
   * policy keeps copies until the primary goes (OnPrimaryDeletion, Orphan) keeps those it wrote
   * instead, returned as retained relations — unless one this primary resolves to now writes the
   * same destination (that copy goes, so that the new source can take its place), or more are kept
   * than limits.relatedPerPrimary leaves room for beside the relations found now (the first kept
   * stay; the others end as at the primary's deletion), so that a tenant who keeps changing what
   * its primary names cannot grow its rows without bound.
   */
  async endStale(of: PrimaryOf, stored: readonly RelationOutcome[], current: readonly Claim[]): Promise<RelationOutcome[]> {
    const { reads, resource, owner } = of;
    const pairKey = (r: Pick<Claim, 'source' | 'destination'>) => compositeKey(identityKey(r.source), identityKey(r.destination));
    const keep = new Set(current.map(pairKey));
    const destinations = new Set(current.map((c) => identityKey(c.destination)));
    let room = Math.max(0, (this.deps.limits?.relatedPerPrimary ?? 500) - current.length);
    const retained: RelationOutcome[] = [];
    // Each ended relation asks the store (and may delete a copy): hundreds of them (a wildcard
    // reference whose names all changed) take turns on the event loop, a few rows at a time.
    const ended = heavyTurns.meter(owner.cluster);
    for (const old of stored) {
      if (keep.has(pairKey(old))) continue;
      await ended.add(ROW_BYTES);
      const rule = ruleOf(resource, old);
      // Only what was written is kept: a claim never synced (or refused) has no copy to keep.
      const kept = rule !== undefined && rule.cleanup !== 'MatchOrigin' && (old.state === 'synced' || old.state === 'retained');
      if (kept && !destinations.has(identityKey(old.destination)) && room > 0) {
        room--;
        const message = `no longer found by rule ${rule.id}; its copy is kept as it was until the primary is deleted (cleanupPolicy ${rule.cleanup})`;
        retained.push({ ruleId: old.ruleId, origin: old.origin, source: old.source, destination: old.destination, state: 'retained', contentHash: old.contentHash, message, versions: null });
        continue;
      }
      // A claim that left nothing (a wildcard's name that never existed): nothing to decide.
      if (this.leavesNothing(of, old)) continue;
      // What the primary no longer resolves to was decided on what this reconcile read; the claim
      // it gives up (kept by another primary or not) is decided live too.
      confirmLive(reads);
      if (await this.deps.store.handOver(old.destination, old.source, owner)) continue;
      // Beyond the room for kept copies: ended as the policy ends them with the primary. While the
      // store may not know every claim, left for the sweep (also where this primary now fills the
      // destination from another source: another primary may still copy the old one there, and
      // then this one's copy is the conflict).
      await this.endUnclaimed(of, old, kept && !destinations.has(identityKey(old.destination)) ? 'primary gone' : 'stale');
    }
    return retained;
  }

  /**
   * Ends the copy of a relation that no claim the store holds keeps any more — or, while the store
   * may not hold every claim of the owner's cluster (a lost, older or new store: claim-knowledge.ts),
   * leaves it in place for the sweep that completes the cluster to decide. Returns which ('changed':
   * the copy changed since it was read and was not deleted; the next reconcile decides again).
   */
  async endUnclaimed(of: PrimaryOf, relation: EndedRelation, why: 'stale' | 'primary gone'): Promise<'ended' | 'deferred' | 'changed'> {
    const { resource, owner } = of;
    const claims = this.deps.claims;
    const type = ruleOf(resource, relation)?.destinationType;
    if (claims && type && !claims.complete(owner.cluster)) {
      claims.defer({ claimants: owner.cluster, type, destination: relation.destination, source: relation.source });
      this.deps.logger.info({ copy: describeIdentity(relation.destination), source: describeIdentity(relation.source), primary: describeIdentity(owner) }, 'left a related copy in place whose last known claim ended: the store may not know every primary of this cluster yet (no sweep has completed it since the store was opened); that sweep decides');
      return 'deferred';
    }
    return (await this.endCopy(of, relation, why)) === 'changed' ? 'changed' : 'ended';
  }

  /**
   * Ends a related copy that no relation keeps any more: deleted if it still carries the marks of
   * its source, or, when its primary is gone and its rule's policy is Orphan, released (marks
   * removed, left in place). A copy of a rule since removed from the config is released where it
   * is on a platform (the tenant's side: nothing of theirs is lost) and left in the service cluster
   * (the sweep deletes it there).
   */
  private async endCopy({ reads: decidedOn, resource, owner, tally }: PrimaryOf, relation: EndedRelation, why: 'stale' | 'primary gone'): Promise<'done' | 'changed'> {
    const { destination: dest, source } = relation;
    const rule = ruleOf(resource, relation);
    const onPlatform = dest.cluster !== this.deps.clusters.service.name;
    if (!rule && !onPlatform) {
      this.deps.logger.warn({ copy: describeIdentity(dest), rule: relation.ruleId }, 'a stored relation names a rule that is no longer configured; its copy is left in place');
      return 'done';
    }
    const type = rule?.destinationType ?? resource.rules.find((r) => sameType(r.destinationType, dest))?.destinationType;
    if (!type) {
      this.deps.logger.warn({ copy: describeIdentity(dest), rule: relation.ruleId }, 'a stored relation names a rule that is no longer configured, of a type no rule writes; its copy is left in place');
      return 'done';
    }
    const dests = this.deps.clusters.client(dest.cluster, type);
    const existing = await dests.get(dest.namespace, dest.name);
    if (!rule || (why === 'primary gone' && rule.cleanup === 'Orphan')) {
      // Claimed again meanwhile (another primary's reconcile copies the same source there): its marks are put back.
      const claimed = () => this.deps.store.handOver(dest, source, owner);
      if (await this.deps.writer.release(dests, { kind: 'related', copy: dest, source, existing, claimedAgain: claimed })) {
        this.deps.logger.info({ copy: describeIdentity(dest), rule: relation.ruleId }, rule ? "released a related copy whose primary is gone: relsync's marks are removed and the object is left in place (cleanupPolicy Orphan)" : "released a related copy of a rule no longer configured: relsync's marks are removed and the object is left in place");
      }
      return 'done';
    }
    const removed = await this.deps.writer.remove(dests, { kind: 'related', copy: dest, source, existing, decidedOn, why: why === 'stale' ? 'claim ended' : 'primary gone', tally });
    if (removed === 'deleted') this.deps.logger.info({ copy: describeIdentity(dest) }, 'deleted a related copy that no primary owns any more');
    return removed === 'changed' ? 'changed' : 'done';
  }
}

/** A relation whose claim ends: its rule, its two ends, and what the store says it left (state and versions). */
type EndedRelation = Pick<RelationRecord, 'ruleId' | 'source' | 'destination' | 'state' | 'versions'>;

/** The configured rule a stored relation was made by (its id and destination type), if it still is. */
function ruleOf(resource: ResolvedResource, relation: Pick<RelationRecord, 'ruleId' | 'destination'>): ResolvedRule | undefined {
  const dest = relation.destination;
  return resource.rules.find((r) => r.id === relation.ruleId && r.destinationType.group === dest.group && r.destinationType.resource === dest.resource);
}

/** The versions a relation's state was decided on ('' for absent); null when an object lacks one. */
function relationVersions(source: KubeObject | undefined, destination: KubeObject | undefined): RelationVersions | null {
  const v = (o: KubeObject | undefined) => (o ? objectVersion(o) : '');
  const [s, d] = [v(source), v(destination)];
  return s !== undefined && d !== undefined ? { source: s, destination: d } : null;
}

/**
 * Worth retrying with backoff: throttling, server errors, credentials the API server refused even
 * after they were applied afresh (a rotation still settling), and failures without an answer
 * (resets, timeouts).
 */
function isTransient(err: unknown): boolean {
  if (!(err instanceof ApiError)) return true;
  return err.statusCode === 401 || err.statusCode === 429 || err.statusCode >= 500;
}
