/**
 * `relsync sweep --dry-run`: a ResourceClient that reads from the API server and writes nothing.
 * Each write is recorded in a ledger as what it would change (the object before, and after as
 * relsync would leave it) and answered as the API server would answer it, so that the sweep and
 * its reconciles go on as if it had landed: later reads of the object in the same run see the
 * ledger's version (a deleted copy is gone, a created one is there). Events are not recorded.
 *
 * Preconditions are kept as the API server keeps them (a resourceVersion or uid that is not the
 * object's, CREATE_ONLY over an existing object: 409; a failed `test` of a JSON patch: 422), so a
 * conflict is reported as the real sweep would meet it; a delete of an object with finalizers
 * leaves it there, being deleted. Server-side apply is approximated by a merge of the applied
 * fields over the object: a field relsync applied before and leaves out now (which the API server
 * would remove) shows unchanged.
 * The connection refuses every request that is not a read (Connection's readOnly), so that a write
 * this client does not know of fails instead of landing.
 */
import type { KubeObject } from '../core/object.js';
import { typeName, type ResourceType } from '../core/resource-type.js';
import type { Semaphore } from '../util/semaphore.js';
import { isoTime, systemClock, type Clock } from '../util/clock.js';
import { ApiError } from './api-error.js';
import type { Connection } from './connection.js';
import { CREATE_ONLY, ResourceClient, type JsonPatchOperation } from './resource-client.js';

export interface IntendedChange {
  readonly cluster: string;
  readonly type: ResourceType;
  readonly namespace: string;
  readonly name: string;
  /** undefined: it did not exist. */
  readonly before: KubeObject | undefined;
  /** undefined: deleted. */
  readonly after: KubeObject | undefined;
}

/** What a dry run would have written, by object: the first `before` and the last `after` of each. */
export class DryRunLedger {
  private readonly changes = new Map<string, IntendedChange>();
  /** The objects as the run left them (undefined: deleted), read back by later reads. */
  private readonly overlay = new Map<string, KubeObject | undefined>();
  private serial = 0;

  /** `clock`: the time of day a deletion the run pretends is stamped with; default systemClock. */
  constructor(readonly clock: Clock = systemClock) {}

  key(cluster: string, type: ResourceType, namespace: string, name: string): string {
    return JSON.stringify([cluster, type.group, type.resource, namespace, name]);
  }

  seen(key: string): { readonly known: boolean; readonly object: KubeObject | undefined } {
    return { known: this.overlay.has(key), object: this.overlay.get(key) && structuredClone(this.overlay.get(key)) };
  }

  record(change: IntendedChange): void {
    const key = this.key(change.cluster, change.type, change.namespace, change.name);
    const first = this.changes.get(key);
    this.changes.set(key, { ...change, before: first ? first.before : change.before });
    this.overlay.set(key, change.after && structuredClone(change.after));
  }

  /** A resourceVersion (or uid) no API server gave. */
  fake(what: string): string {
    return `dry-run-${what}-${++this.serial}`;
  }

  /** The changes, objects that end as they began left out, in the order first written. */
  list(): IntendedChange[] {
    return [...this.changes.values()].filter((c) => c.before !== undefined || c.after !== undefined);
  }
}

export class DryRunClient extends ResourceClient {
  constructor(
    connection: Connection,
    type: ResourceType,
    pageSlots: Semaphore | undefined,
    private readonly ledger: DryRunLedger,
    private readonly cluster: string,
    maxListPages?: number,
  ) {
    super(connection, type, pageSlots, maxListPages);
  }

  override async get(namespace: string, name: string): Promise<KubeObject | undefined> {
    const seen = this.ledger.seen(this.ledger.key(this.cluster, this.type, namespace, name));
    return seen.known ? seen.object : super.get(namespace, name);
  }

  /** The ledger's version when it has one (a copy a dry run deleted is gone), as metadata only. */
  override async getMetadata(namespace: string, name: string): Promise<KubeObject | undefined> {
    const object = await this.get(namespace, name);
    return object && { apiVersion: object.apiVersion, kind: object.kind, metadata: object.metadata };
  }

  override async setFinalizers(namespace: string, name: string, resourceVersion: string | undefined, finalizers: readonly string[]): Promise<KubeObject> {
    const before = await this.existing({ metadata: { namespace, name } });
    this.precondition(before, { metadata: { name, ...(resourceVersion ? { resourceVersion } : {}) } });
    const after = this.write(namespace, name, before, this.stamped({ ...before, metadata: { ...before.metadata, finalizers: [...finalizers] } }, before));
    return { apiVersion: after.apiVersion, kind: after.kind, metadata: after.metadata };
  }

  override async patchStatus(namespace: string, name: string, resourceVersion: string | undefined, status: Record<string, unknown>): Promise<KubeObject | undefined> {
    const before = await this.existing({ metadata: { namespace, name } });
    this.precondition(before, { metadata: { name, ...(resourceVersion ? { resourceVersion } : {}) } });
    const after = this.write(namespace, name, before, this.stamped({ ...before, status: mergeOver(before.status ?? {}, status) }, before));
    return { apiVersion: after.apiVersion, kind: after.kind, metadata: after.metadata, ...(after.status !== undefined ? { status: after.status } : {}) };
  }

  override async create(namespace: string, object: KubeObject): Promise<KubeObject> {
    const name = object.metadata.name ?? `${object.metadata.generateName ?? ''}${this.ledger.fake('name')}`;
    if (object.metadata.name && (await this.get(namespace, name))) throw this.status(409, 'AlreadyExists', `${this.type.resource} "${name}" already exists`, name);
    const after = this.stamped({ ...object, metadata: { ...object.metadata, name, ...(namespace ? { namespace } : {}) } }, undefined);
    return this.write(namespace, name, undefined, after);
  }

  override async replace(object: KubeObject): Promise<KubeObject> {
    const before = await this.existing(object);
    this.precondition(before, object);
    return this.write(before.metadata.namespace ?? '', before.metadata.name!, before, this.stamped({ ...object, status: before.status }, before));
  }

  override async replaceStatus(object: KubeObject): Promise<KubeObject> {
    const before = await this.existing(object);
    this.precondition(before, object);
    return this.write(before.metadata.namespace ?? '', before.metadata.name!, before, this.stamped({ ...before, status: object.status }, before));
  }

  override async apply(object: KubeObject, _fieldManager?: string): Promise<KubeObject> {
    const { namespace = '', name = '' } = object.metadata;
    const before = await this.get(namespace, name);
    if (object.metadata.resourceVersion === CREATE_ONLY) {
      if (before) throw this.status(409, 'Conflict', `${this.type.resource} "${name}" exists (a create-only apply)`, name);
    } else if (before) this.precondition(before, object);
    const merged = mergeOver(before ?? {}, { ...object, metadata: { ...object.metadata, resourceVersion: undefined } }) as KubeObject;
    return this.write(namespace, name, before, this.stamped(merged, before));
  }

  override async applyStatus(object: KubeObject, _fieldManager?: string): Promise<KubeObject | undefined> {
    const before = await this.existing(object);
    this.precondition(before, object);
    return this.write(before.metadata.namespace ?? '', before.metadata.name!, before, this.stamped({ ...before, status: mergeOver(before.status ?? {}, object.status ?? {}) }, before));
  }

  override async jsonPatch(namespace: string, name: string, operations: readonly JsonPatchOperation[]): Promise<KubeObject> {
    const before = await this.existing({ metadata: { namespace, name } });
    const after = structuredClone(before) as unknown as Record<string, unknown>;
    for (const op of operations) {
      if (op.op !== 'test') patchAt(after, op);
      else if (JSON.stringify(valueAt(after, op.path)) !== JSON.stringify(op.value)) throw this.status(422, 'Invalid', `the test of ${op.path} failed`, name);
    }
    return this.write(namespace, name, before, this.stamped(after as unknown as KubeObject, before));
  }

  override async mergePatch(namespace: string, name: string, patch: unknown): Promise<KubeObject> {
    const before = await this.existing({ metadata: { namespace, name } });
    return this.write(namespace, name, before, this.stamped(mergeOver(before, patch) as KubeObject, before));
  }

  override async delete(namespace: string, name: string, uid?: string, resourceVersion?: string): Promise<void> {
    const before = await this.get(namespace, name);
    if (!before) return;
    if (uid && before.metadata.uid !== uid) throw this.status(409, 'Conflict', `the uid precondition of ${this.type.resource} "${name}" failed`, name);
    if (resourceVersion && before.metadata.resourceVersion !== resourceVersion) throw this.status(409, 'Conflict', `the resourceVersion precondition of ${this.type.resource} "${name}" failed`, name);
    // Finalizers hold it, being deleted (the operator's, on a copy): still there for the next read.
    const held = (before.metadata.finalizers?.length ?? 0) > 0;
    const after = held ? this.stamped({ ...before, metadata: { ...before.metadata, deletionTimestamp: before.metadata.deletionTimestamp ?? isoTime(this.ledger.clock) } }, before) : undefined;
    this.ledger.record({ cluster: this.cluster, type: this.type, namespace, name, before, after });
  }

  /** The API server's preconditions of a write: the given uid and resourceVersion must be the object's. */
  private precondition(before: KubeObject, object: KubeObject): void {
    const { uid, resourceVersion, name = '' } = object.metadata;
    if ((uid && uid !== before.metadata.uid) || (resourceVersion && resourceVersion !== before.metadata.resourceVersion)) {
      throw this.status(409, 'Conflict', `Operation cannot be fulfilled on ${this.type.resource} "${name}": the object has been modified; please apply your changes to the latest version and try again`, name);
    }
  }

  private async existing(object: KubeObject): Promise<KubeObject> {
    const { namespace = '', name = '' } = object.metadata;
    const before = await this.get(namespace, name);
    if (!before) throw this.status(404, 'NotFound', `${this.type.resource} "${name}" not found`, name);
    return before;
  }

  /** As the API server answers a write: a new resourceVersion, the uid kept (or given). */
  private stamped(object: KubeObject, before: KubeObject | undefined): KubeObject {
    return { ...object, metadata: { ...object.metadata, uid: before?.metadata.uid ?? object.metadata.uid ?? this.ledger.fake('uid'), resourceVersion: this.ledger.fake('rv') } };
  }

  private write(namespace: string, name: string, before: KubeObject | undefined, after: KubeObject): KubeObject {
    // Events are what a run says, not what it changes: answered, not recorded.
    if (this.type.resource !== 'events' || this.type.group !== '') this.ledger.record({ cluster: this.cluster, type: this.type, namespace, name, before, after });
    return structuredClone(after);
  }

  private status(code: number, reason: string, message: string, name: string): ApiError {
    return new ApiError('DRY-RUN', `${typeName(this.type)}/${name}`, code, JSON.stringify({ kind: 'Status', reason, message, details: { name } }));
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** `patch` over `target` as a JSON merge patch (RFC 7386): maps merged, null removes, the rest replaced. */
export function mergeOver(target: unknown, patch: unknown): unknown {
  if (!isRecord(patch)) return structuredClone(patch);
  const out: Record<string, unknown> = isRecord(target) ? structuredClone(target) : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null || v === undefined) delete out[k];
    else out[k] = mergeOver(out[k], v);
  }
  return out;
}

function pointer(path: string): string[] {
  return path.split('/').slice(1).map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
}

/** The value at a JSON pointer (undefined where there is none). */
function valueAt(object: unknown, path: string): unknown {
  let at: unknown = object;
  for (const p of pointer(path)) at = isRecord(at) || Array.isArray(at) ? (at as Record<string, unknown>)[p] : undefined;
  return at;
}

/** One add/replace/remove of a JSON patch, at its JSON pointer (the operations relsync sends). */
function patchAt(object: Record<string, unknown>, op: Exclude<JsonPatchOperation, { op: 'test' }>): void {
  const parts = pointer(op.path);
  const last = parts.pop();
  if (last === undefined) return;
  let at: unknown = object;
  for (const p of parts) {
    if (!isRecord(at) && !Array.isArray(at)) return;
    at = (at as Record<string, unknown>)[p];
  }
  if (Array.isArray(at)) {
    const i = last === '-' ? at.length : Number(last);
    if (op.op === 'remove') at.splice(i, 1);
    else if (op.op === 'add') at.splice(i, 0, op.value);
    else at[i] = op.value;
  } else if (isRecord(at)) {
    if (op.op === 'remove') delete at[last];
    else at[last] = op.value;
  }
}
