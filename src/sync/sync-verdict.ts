/**
 * relsync's verdict on a primary, shown on the primary itself where tools read it: a condition
 * `relsync.dev/Synced` in `status.conditions` (metav1.Condition's shape, with observedGeneration,
 * so `kubectl wait --for=condition=relsync.dev/Synced` works) where the primary's schema keeps
 * it; otherwise annotations with the generation and time of the last complete sync and the
 * current problem. Events expire; this stays until the next verdict.
 *
 * Beside the status copied back from the service cluster: the copy-back carries the condition
 * over (carry()), and a condition of this type in the copy's status is the operator's, never
 * taken for relsync's (dropped). Written only when the verdict changes, through the primary's
 * status subresource; lastTransitionTime moves only when the condition's status does.
 *
 * Whether the schema keeps it is learnt by writing it once per cluster and type: a status
 * subresource that is missing (404), a condition the API server pruned or refused (400/422)
 * means annotations for that type from then on (remembered for an hour, then tried again, in
 * case the CRD changed).
 */
import type { Logger } from 'pino';
import { identityKey, type ObjectIdentity } from '../core/identity.js';
import type { KubeObject } from '../core/object.js';
import { typeName, type ResourceType } from '../core/resource-type.js';
import { ApiError, isConflict, isNotFound, isObjectNotFound } from '../kube/api-error.js';
import { ExpiringMap } from '../util/expiring-map.js';
import { systemClock, type Clock } from '../util/clock.js';
import type { ClusterAccess, ObjectClient } from '../cache/cluster-access.js';
import { deepEqual } from './content.js';
import { WARNING_REPEAT_MS } from './sync-intervals.js';
import { SYNCED_AT_ANNOTATION, SYNCED_CONDITION, SYNCED_GENERATION_ANNOTATION, SYNC_PROBLEM_ANNOTATION } from '../core/relsync-keys.js';

/** What relsync concluded about a primary: synced, or why not (reason: a CamelCase word, as in Events). */
export interface Verdict {
  readonly synced: boolean;
  readonly reason: string;
  readonly message: string;
}

export interface Condition {
  readonly type: string;
  readonly status: 'True' | 'False' | 'Unknown';
  readonly observedGeneration?: number;
  readonly lastTransitionTime: string;
  readonly reason: string;
  readonly message: string;
}

/** metav1.Condition caps a message at 32768 characters; the annotation is kept shorter. */
const CONDITION_MESSAGE_MAX = 32_768;
const ANNOTATION_MESSAGE_MAX = 1024;

type Status = Record<string, unknown>;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function conditionsOf(status: unknown): unknown[] {
  return isRecord(status) && Array.isArray(status.conditions) ? status.conditions : [];
}

/** Of relsync's type, in any case: `kubectl wait` matches condition types without case and takes the first. */
function isVerdictCondition(c: unknown): boolean {
  return isRecord(c) && typeof c.type === 'string' && c.type.toLowerCase() === SYNCED_CONDITION.toLowerCase();
}

/** The two conditions differ in their message alone. */
function messageOnly(before: Condition | undefined, after: Condition | undefined): boolean {
  return before !== undefined && after !== undefined && before.type === after.type && before.status === after.status && before.reason === after.reason && before.observedGeneration === after.observedGeneration && before.message !== after.message;
}

/** relsync's condition in `status`, if it is there. */
export function verdictCondition(status: unknown): Condition | undefined {
  const found = conditionsOf(status).find(isVerdictCondition);
  return found as Condition | undefined;
}

/** `status` without relsync's condition (the `conditions` key goes when nothing else was in it). */
export function withoutVerdictCondition(status: unknown): unknown {
  if (!isRecord(status) || !Array.isArray(status.conditions) || !status.conditions.some(isVerdictCondition)) return status;
  const rest = status.conditions.filter((c) => !isVerdictCondition(c));
  const { conditions: _c, ...others } = status;
  return rest.length > 0 ? { ...others, conditions: rest } : others;
}

/**
 * `status` with the verdict's condition in place of any of its type, other conditions in their
 * order. The transition time is kept when the condition's status is unchanged (Kubernetes'
 * meta.SetStatusCondition does the same), so an unchanged verdict is an unchanged status.
 */
export function withVerdictCondition(status: unknown, verdict: Verdict, generation: number | undefined, now: string): Status {
  const before = verdictCondition(status);
  const conditionStatus = verdict.synced ? 'True' : 'False';
  const condition: Condition = {
    type: SYNCED_CONDITION,
    status: conditionStatus,
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
    lastTransitionTime: before?.status === conditionStatus && typeof before.lastTransitionTime === 'string' ? before.lastTransitionTime : now,
    reason: verdict.reason,
    message: verdict.message.slice(0, CONDITION_MESSAGE_MAX),
  };
  const base = isRecord(status) ? status : {};
  const conditions = conditionsOf(status);
  const at = conditions.findIndex(isVerdictCondition);
  const next = at >= 0 ? conditions.map((c, i) => (i === at ? condition : c)).filter((c, i) => i <= at || !isVerdictCondition(c)) : [...conditions, condition];
  return { ...base, conditions: next };
}

/**
 * The primary's annotations with the verdict: a complete sync records the generation and the
 * time (the time moves only when the generation does) and removes the problem; otherwise the
 * problem is recorded and the last complete sync stays as it was.
 */
export function withVerdictAnnotations(annotations: Readonly<Record<string, string>> | undefined, verdict: Verdict, generation: number | undefined, now: string): Record<string, string> {
  const next = { ...(annotations ?? {}) };
  if (verdict.synced) {
    delete next[SYNC_PROBLEM_ANNOTATION];
    const g = String(generation ?? 0);
    if (next[SYNCED_GENERATION_ANNOTATION] !== g || next[SYNCED_AT_ANNOTATION] === undefined) {
      next[SYNCED_GENERATION_ANNOTATION] = g;
      next[SYNCED_AT_ANNOTATION] = now;
    }
  } else {
    next[SYNC_PROBLEM_ANNOTATION] = `${verdict.reason}: ${verdict.message}`.slice(0, ANNOTATION_MESSAGE_MAX);
  }
  return next;
}

/** The annotations without relsync's verdict. */
export function withoutVerdictAnnotations(annotations: Readonly<Record<string, string>> | undefined): Record<string, string> | undefined {
  if (!annotations) return annotations;
  const { [SYNCED_GENERATION_ANNOTATION]: _g, [SYNCED_AT_ANNOTATION]: _a, [SYNC_PROBLEM_ANNOTATION]: _p, ...rest } = annotations;
  return rest;
}

/** The primary shows relsync's verdict that it is synced (as a condition, or as annotations without a problem). */
/** The primary shows relsync's verdict that it is synced, in the form in use (a problem annotation says otherwise). */
export function showsSynced(primary: KubeObject): boolean {
  const annotations = primary.metadata.annotations ?? {};
  if (annotations[SYNC_PROBLEM_ANNOTATION] !== undefined) return false;
  const condition = verdictCondition(primary.status);
  return condition ? condition.status === 'True' : annotations[SYNCED_GENERATION_ANNOTATION] !== undefined;
}

export interface SyncVerdictsDeps {
  readonly clusters: Pick<ClusterAccess, 'client'>;
  readonly logger: Logger;
  /** Writes the primary (the reconciler's writePrimary: its own watch event is then not routed back). */
  /** `onlyOurs`: false when the answer shows more changed than relsync sent (its event is then routed). */
  readonly write: (id: ObjectIdentity, precondition: string | undefined, write: () => Promise<KubeObject>, onlyOurs?: (written: KubeObject) => boolean) => Promise<KubeObject>;
  /** The time of day a verdict is stamped with, and what is remembered for; default systemClock. */
  readonly clock?: Clock;
}

type Mode = 'condition' | 'annotation';

/** One showing of a verdict on one primary. */
interface Showing {
  readonly type: ResourceType;
  readonly id: ObjectIdentity;
  /** The primary's cluster and type: where the verdict's form is learnt (modes). */
  readonly key: string;
  /** The primary's identityKey(). */
  readonly objectKey: string;
  readonly client: ObjectClient;
  /** The generation the verdict is about. */
  readonly generation: number | undefined;
  /** The time of day it is stamped with (as the API server writes times), and `at` the clock's milliseconds. */
  readonly now: string;
  readonly at: number;
}

/** A change of the message alone is written at most this often per primary (an error text that varies). */
const MESSAGE_ONLY_EVERY_MS = 10 * 60_000;

export class SyncVerdicts {
  /** Per cluster and type: where the verdict goes, once learnt (a missing status subresource, a schema that prunes it). */
  private readonly modes: ExpiringMap<string, Mode>;
  /** Primaries whose own condition write the API server refused (400/422): annotations for them alone, for a while. */
  private readonly refusedObjects: ExpiringMap<string, true>;
  /** Primaries whose verdict was written lately: a change of its message alone waits. */
  private readonly writtenLately: ExpiringMap<string, true>;
  /** Failed writes told once per cluster, type and reason in 10 minutes. */
  private readonly told: ExpiringMap<string, true>;
  private readonly clock: Clock;

  constructor(private readonly deps: SyncVerdictsDeps) {
    this.clock = deps.clock ?? systemClock;
    this.modes = new ExpiringMap(10_000, this.clock);
    this.refusedObjects = new ExpiringMap(10_000, this.clock);
    this.writtenLately = new ExpiringMap(10_000, this.clock);
    this.told = new ExpiringMap(1000, this.clock);
  }

  /**
   * The status copied back from the copy, with relsync's condition carried over from the primary
   * (and any condition of its type in the copy's status dropped: that one is the operator's).
   */
  carry(primary: KubeObject, copied: unknown): unknown {
    const own = verdictCondition(primary.status);
    const status = withoutVerdictCondition(copied);
    if (!own) return status;
    const base = isRecord(status) ? status : {};
    return { ...base, conditions: [...conditionsOf(status), own] };
  }

  /**
   * Shows `verdict` on the primary, in one form, and takes the other form off if it is there (a
   * type whose form changed); the primary as written (or as it was, when nothing changed or the
   * write failed: a failed write is logged, never the reconcile's failure, except a 409, which
   * is, so that the retry reads the primary live). A change of the message alone (same status,
   * reason and generation) is written at most once per 10 minutes per primary.
   */
  async show(type: ResourceType, id: ObjectIdentity, primary: KubeObject, verdict: Verdict): Promise<KubeObject> {
    const at = this.clock.now();
    const s: Showing = { type, id, key: `${id.cluster}\u0000${typeName(type)}`, objectKey: identityKey(id), client: this.deps.clusters.client(id.cluster, type), generation: primary.metadata.generation, at, now: new Date(at).toISOString().replace(/\.\d{3}Z$/, 'Z') };
    const { key, objectKey, client } = s;
    let current = primary;
    try {
      if ((this.modes.get(key) ?? 'condition') === 'condition' && !this.refusedObjects.get(objectKey)) {
        const status = withVerdictCondition(primary.status, verdict, s.generation, s.now);
        if (!deepEqual(status, primary.status)) {
          if (messageOnly(verdictCondition(primary.status), verdictCondition(status)) && this.writtenLately.get(objectKey, at)) return primary;
          const written = await this.conditionWrite(s, primary, status);
          current = written.object;
          if (!written.kept) return await this.showAsAnnotations(s, current, verdict);
          this.writtenLately.set(objectKey, true, MESSAGE_ONLY_EVERY_MS, at);
        }
        // Annotations of an earlier form go.
        const annotations = withoutVerdictAnnotations(current.metadata.annotations) ?? {};
        if (deepEqual(annotations, current.metadata.annotations ?? {})) return current;
        const before = current;
        return await this.deps.write(id, before.metadata.resourceVersion, () => client.replace({ ...before, metadata: { ...before.metadata, annotations } }));
      }
      return await this.showAsAnnotations(s, current, verdict);
    } catch (err) {
      if (isConflict(err)) throw err;
      this.tell(s, 'write', err, 'could not show relsync\'s verdict on the primary; its sync is not affected');
      return current;
    }
  }

  /** The verdict as annotations; a condition of relsync's left from before goes (where the API server lets it). */
  private async showAsAnnotations(s: Showing, primary: KubeObject, verdict: Verdict): Promise<KubeObject> {
    const { client, id, objectKey, at } = s;
    let current = primary;
    const annotations = withVerdictAnnotations(current.metadata.annotations, verdict, s.generation, s.now);
    const changed = !deepEqual(annotations, current.metadata.annotations ?? {});
    const problemOnly = changed && !verdict.synced && current.metadata.annotations?.[SYNC_PROBLEM_ANNOTATION]?.startsWith(`${verdict.reason}: `) === true;
    if (changed && !(problemOnly && this.writtenLately.get(objectKey, at))) {
      const before = current;
      current = await this.deps.write(id, before.metadata.resourceVersion, () => client.replace({ ...before, metadata: { ...before.metadata, annotations } }));
      this.writtenLately.set(objectKey, true, MESSAGE_ONLY_EVERY_MS, at);
    }
    if (verdictCondition(current.status)) {
      const before = current;
      const status = withoutVerdictCondition(before.status);
      current = await this.deps.write(id, before.metadata.resourceVersion, () => client.replaceStatus({ ...before, status })).catch((err: unknown) => {
        if (isConflict(err)) throw err;
        // No status subresource (a condition put into the object's own status by someone): left; the annotations say the verdict.
        return before;
      });
    }
    return current;
  }

  /** Takes relsync's verdict off a primary relsync no longer syncs (deselected); the primary as written. */
  async clear(type: ResourceType, id: ObjectIdentity, primary: KubeObject): Promise<KubeObject> {
    const client = this.deps.clusters.client(id.cluster, type);
    try {
      let current = primary;
      if (verdictCondition(current.status)) {
        const status = withoutVerdictCondition(current.status);
        current = await this.deps.write(id, current.metadata.resourceVersion, () => client.replaceStatus({ ...current, status }));
      }
      const annotations = withoutVerdictAnnotations(current.metadata.annotations);
      if (!deepEqual(annotations ?? {}, current.metadata.annotations ?? {})) {
        const before = current;
        current = await this.deps.write(id, before.metadata.resourceVersion, () => client.replace({ ...before, metadata: { ...before.metadata, annotations } }));
      }
      return current;
    } catch (err) {
      if (isConflict(err)) throw err;
      this.tell({ key: `${id.cluster}\u0000${typeName(type)}`, id }, 'clear', err, 'could not take relsync\'s verdict off a primary it no longer syncs');
      return primary;
    }
  }

  /**
   * The primary after the condition's write; `kept` false when it does not keep it: for the type
   * (no status subresource, a schema that prunes it), which from then on shows verdicts as
   * annotations; or for this object (the API server refused its write, 400/422: a CRD's limit on
   * a message or on conditions, which another object of the type may well meet).
   */
  private async conditionWrite(s: Showing, primary: KubeObject, status: Status): Promise<{ object: KubeObject; kept: boolean }> {
    const { key, objectKey, type, id, client } = s;
    let written: KubeObject;
    try {
      // The conditions alone, as a merge patch at the version read: what a PUT of the status with
      // them changed writes (but for nulls inside the list, which a merge patch drops), without the
      // primary's content (a tenant's megabyte) in the body or the answer; a status write cannot
      // change it, so the answer's status and metadata are put on the primary as read. An answer
      // of another object or generation is not taken for relsync's own write (its event is routed).
      const same = (written: KubeObject) => written.metadata.uid === primary.metadata.uid && written.metadata.generation === primary.metadata.generation;
      const head = await this.deps.write(id, primary.metadata.resourceVersion, async () => {
        const answer = await client.patchStatus(id.namespace, id.name, primary.metadata.resourceVersion, { conditions: status.conditions });
        if (!answer) throw new Error(`${type.resource} "${id.name}": the answer to the status write is not an object`);
        return answer;
      }, same);
      written = { ...primary, metadata: head.metadata, status: head.status };
    } catch (err) {
      if (isNotFound(err) && !isObjectNotFound(err, id.name)) {
        this.annotationsFor(key, type, id, 'it has no status subresource');
        return { object: primary, kept: false };
      }
      if (err instanceof ApiError && (err.statusCode === 400 || err.statusCode === 422)) {
        this.refusedObjects.set(objectKey, true, 60 * 60_000);
        this.tell(s, 'refused', err, `the API server refused relsync's ${SYNCED_CONDITION} condition on this primary; its verdict is shown as annotations`);
        return { object: primary, kept: false };
      }
      throw err;
    }
    if (verdictCondition(written.status) === undefined) {
      // Pruned: the write changed nothing else (the status was the primary's); the annotations go on the version it made.
      this.annotationsFor(key, type, id, 'its status schema does not keep status.conditions');
      return { object: written, kept: false };
    }
    this.modes.set(key, 'condition', 60 * 60_000);
    return { object: written, kept: true };
  }

  private annotationsFor(key: string, type: ResourceType, id: ObjectIdentity, why: string): void {
    if (this.modes.get(key) !== 'annotation') {
      this.deps.logger.info({ cluster: id.cluster, type: typeName(type), why }, `relsync shows its verdict on these primaries as annotations (${SYNCED_GENERATION_ANNOTATION}, ${SYNC_PROBLEM_ANNOTATION}), not as the ${SYNCED_CONDITION} condition`);
    }
    this.modes.set(key, 'annotation', 60 * 60_000);
  }

  private tell({ key, id }: Pick<Showing, 'key' | 'id'>, what: string, err: unknown, message: string): void {
    const code = err instanceof ApiError ? err.statusCode : 0;
    const toldKey = `${key}\u0000${what}\u0000${code}`;
    if (this.told.get(toldKey)) return;
    this.told.set(toldKey, true, WARNING_REPEAT_MS);
    this.deps.logger.warn({ cluster: id.cluster, primary: `${id.namespace}/${id.name}`, err: (err as Error).message }, message);
  }
}
