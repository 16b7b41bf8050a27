/**
 * Clusters held in memory, for the reconciler's unit tests
 * (src/cache/cluster-access.ts is the port it implements). It keeps the API
 * server's rules that the reconciler's decisions depend on — 409 on a name
 * taken or a stale resourceVersion or uid, 404 with the namespace named when a
 * namespace is missing, finalizers that hold a delete, status written only
 * through its subresource, server-side apply's ownership in its simplest form
 * (a manager's next apply removes the fields of its previous one that it
 * leaves out; other writers' fields stay), LISTs continued page by page — and
 * logs every call, so a test can say exactly what was written and what was
 * read. End-to-end tests never use it: they run against real API servers.
 */
import { ApiError } from '../../src/kube/api-error.js';
import type { JsonPatchOperation, ListPage } from '../../src/kube/resource-client.js';
import type { KubeObject } from '../../src/core/object.js';
import type { ResourceType } from '../../src/core/resource-type.js';
import type { ClusterAccess, ObjectClient } from '../../src/cache/cluster-access.js';

export interface Call {
  readonly verb: 'get' | 'list' | 'create' | 'replace' | 'replaceStatus' | 'patchStatus' | 'apply' | 'jsonPatch' | 'mergePatch' | 'delete';
  readonly cluster: string;
  readonly resource: string;
  readonly namespace: string;
  readonly name: string;
}

const namespacesType = { group: '', resource: 'namespaces' };

export class MemoryClusters implements ClusterAccess {
  readonly service: { readonly name: string };
  readonly calls: Call[] = [];
  readonly unbound = new Set<string>();
  /** Objects per LIST page; a LIST of more is continued, as an API server's with `limit`. */
  pageSize = Infinity;
  /** Told of every call as it is made, before it is answered: what a test checks at that very moment. */
  onCall: ((call: Call) => void) | undefined;
  /** A mutating admission webhook: changes what a replace or patch stores (and so answers). */
  webhook: ((cluster: string, object: KubeObject) => void) | undefined;
  private readonly names: Set<string>;
  private readonly objects = new Map<string, KubeObject>();
  /** The fields (JSON-encoded paths) each manager last applied, by object uid and manager. */
  /** @internal */ readonly applied = new Map<string, Set<string>>();
  private version = 0;
  private uids = 0;

  constructor(service: string, platforms: readonly string[]) {
    this.service = { name: service };
    this.names = new Set([service, ...platforms]);
  }

  has(cluster: string): boolean {
    return this.names.has(cluster);
  }

  isUnbound(cluster: string): boolean {
    return this.unbound.has(cluster);
  }

  /** What a sweep asks of a ClusterSet besides ClusterAccess: every cluster but the service one is a platform of its own (no kcp). */
  isPlatform(cluster: string): boolean {
    return cluster !== this.service.name && this.names.has(cluster);
  }

  platformOf(cluster: string): string {
    return cluster;
  }

  get(cluster: string): { readonly kind: 'kubernetes' } {
    if (!this.has(cluster)) throw new Error(`unknown cluster ${cluster}`);
    return { kind: 'kubernetes' };
  }

  async forgetLogical(cluster: string): Promise<void> {
    this.names.delete(cluster);
  }

  client(cluster: string, type: ResourceType): ObjectClient {
    return new MemoryClient(this, cluster, type);
  }

  /** Puts an object in place as a user or another controller would, without logging a call. */
  put(cluster: string, type: Pick<ResourceType, 'group' | 'resource'>, object: KubeObject): KubeObject {
    const stored = this.stamp({ ...structuredClone(object), metadata: { uid: `uid-${++this.uids}`, ...structuredClone(object.metadata) } });
    this.objects.set(keyOf(cluster, type, object.metadata.namespace ?? '', object.metadata.name ?? ''), stored);
    return structuredClone(stored);
  }

  /** Changes an object as its owner would (a new resourceVersion), without logging a call. */
  edit(cluster: string, type: Pick<ResourceType, 'group' | 'resource'>, namespace: string, name: string, change: (o: KubeObject) => void): KubeObject {
    const o = this.read(cluster, type, namespace, name);
    if (!o) throw new Error(`no ${type.resource} ${namespace}/${name} in ${cluster}`);
    change(o);
    const stored = this.stamp(o);
    this.objects.set(keyOf(cluster, type, namespace, name), stored);
    return structuredClone(stored);
  }

  /** Removes an object at once, finalizers or not (a user's delete after the finalizers went). */
  remove(cluster: string, type: Pick<ResourceType, 'group' | 'resource'>, namespace: string, name: string): void {
    this.objects.delete(keyOf(cluster, type, namespace, name));
  }

  read(cluster: string, type: Pick<ResourceType, 'group' | 'resource'>, namespace: string, name: string): KubeObject | undefined {
    const o = this.objects.get(keyOf(cluster, type, namespace, name));
    return o && structuredClone(o);
  }

  /** The calls that changed something, as `verb cluster/resource/namespace/name`; Events left out unless asked. */
  writes(options: { events?: boolean } = {}): string[] {
    return this.calls.filter((c) => c.verb !== 'get' && c.verb !== 'list' && (options.events || c.resource !== 'events')).map((c) => `${c.verb} ${c.cluster}/${c.resource}/${c.namespace}/${c.name}`);
  }

  /** The reasons of the Events created, in order. */
  eventReasons(): string[] {
    return [...this.objects.entries()].filter(([k]) => k.includes('\u0000events\u0000')).map(([, o]) => String(o.reason));
  }

  clearCalls(): void {
    this.calls.length = 0;
  }

  /**
   * Logs a call, and answers it with the Status of the first fault that matches, at once; or, for
   * a LIST whose fault says `afterPages`, hands that Status to the LIST to answer part way.
   * @internal
   */
  log(call: Call): { readonly afterPages: number; readonly error: ApiError } | undefined {
    this.calls.push(call);
    this.onCall?.(call);
    const i = this.faults.findIndex((f) => f.verb === call.verb && f.cluster === call.cluster && f.resource === call.resource && (f.name === undefined || f.name === call.name));
    if (i < 0) return undefined;
    const fault = this.faults[i]!;
    if (--fault.times <= 0) this.faults.splice(i, 1);
    const error = status(call.verb.toUpperCase(), fault.status, fault.reason, fault.message, call.name);
    if (fault.afterPages !== undefined && call.verb === 'list') return { afterPages: fault.afterPages, error };
    throw error;
  }

  /**
   * The next `times` calls of `verb` on these objects answer with this Status instead. A LIST with
   * `afterPages` first gives that many of its pages (fewer if it has no more: it never completes),
   * as one whose continue token expired, or whose connection broke, part way.
   */
  fail(fault: { verb: Call['verb']; cluster: string; resource: string; name?: string; status: number; reason: string; message: string; times?: number; afterPages?: number }): void {
    this.faults.push({ ...fault, times: fault.times ?? 1 });
  }

  /** Drops every fault not used yet. */
  clearFaults(): void {
    this.faults.length = 0;
  }

  private readonly faults: Array<{ verb: Call['verb']; cluster: string; resource: string; name?: string | undefined; status: number; reason: string; message: string; times: number; afterPages?: number | undefined }> = [];

  /** @internal */ store(cluster: string, type: Pick<ResourceType, 'group' | 'resource'>, object: KubeObject | undefined, namespace: string, name: string): void {
    const key = keyOf(cluster, type, namespace, name);
    if (object) this.objects.set(key, object);
    else this.objects.delete(key);
  }

  /** @internal */ stamp(o: KubeObject): KubeObject {
    o.metadata.resourceVersion = String(++this.version);
    return o;
  }

  /** @internal */ newUid(): string {
    return `uid-${++this.uids}`;
  }

  /** @internal */ list(cluster: string, type: Pick<ResourceType, 'group' | 'resource'>, namespace: string | undefined): KubeObject[] {
    const prefix = keyOf(cluster, type, '', '').slice(0, -2);
    return [...this.objects.entries()].filter(([k, o]) => k.startsWith(prefix + '\u0000') && (!namespace || o.metadata.namespace === namespace)).map(([, o]) => structuredClone(o));
  }
}

class MemoryClient implements ObjectClient {
  constructor(
    private readonly world: MemoryClusters,
    private readonly cluster: string,
    readonly type: ResourceType,
  ) {}

  async get(namespace: string, name: string): Promise<KubeObject | undefined> {
    this.log('get', namespace, name);
    return this.world.read(this.cluster, this.type, this.ns(namespace), name);
  }

  /** As a real API server's PartialObjectMetadata: the object without its content (logged as a get). */
  async getMetadata(namespace: string, name: string): Promise<KubeObject | undefined> {
    const object = await this.get(namespace, name);
    return object && { apiVersion: object.apiVersion, kind: object.kind, metadata: object.metadata };
  }

  async setFinalizers(namespace: string, name: string, resourceVersion: string | undefined, finalizers: readonly string[]): Promise<KubeObject> {
    const written = await this.mergePatch(namespace, name, { metadata: { ...(resourceVersion ? { resourceVersion } : {}), finalizers } });
    return { apiVersion: written.apiVersion, kind: written.kind, metadata: written.metadata };
  }

  /** A merge patch of the status subresource, answered as apiVersion, kind, metadata and status (as object-head.ts reads it). */
  async patchStatus(namespace: string, name: string, resourceVersion: string | undefined, status: Record<string, unknown>): Promise<KubeObject | undefined> {
    const written = this.write('patchStatus', { metadata: { namespace, name, ...(resourceVersion ? { resourceVersion } : {}) } }, (current) => ({ ...current, status: mergePatch(current.status ?? {}, status) }));
    return { apiVersion: written.apiVersion, kind: written.kind, metadata: written.metadata, ...(written.status !== undefined ? { status: written.status } : {}) };
  }

  async *pages(options: { namespace?: string | undefined; labelSelector?: string | undefined } = {}): AsyncGenerator<ListPage> {
    const late = this.log('list', options.namespace ?? '', '');
    const matches = parseSelector(options.labelSelector ?? '');
    const items = this.world.list(this.cluster, this.type, options.namespace).filter((o) => matches(o.metadata.labels ?? {}));
    const size = this.world.pageSize;
    const last = Number.isFinite(size) ? Math.max(0, Math.ceil(items.length / size) - 1) : 0;
    for (let page = 0; page <= last; page++) {
      if (late && page === Math.min(late.afterPages, last)) throw late.error;
      const chunk = Number.isFinite(size) ? items.slice(page * size, (page + 1) * size) : items;
      yield { items: chunk, resourceVersion: '0', continueToken: page < last ? String(page + 1) : undefined };
    }
  }

  async listAll(options: { namespace?: string | undefined; labelSelector?: string | undefined } = {}): Promise<{ items: KubeObject[]; resourceVersion: string }> {
    const items: KubeObject[] = [];
    for await (const page of this.pages(options)) items.push(...page.items);
    return { items, resourceVersion: '0' };
  }

  async create(namespace: string, object: KubeObject, _fieldManager?: string): Promise<KubeObject> {
    const ns = this.ns(namespace);
    const name = object.metadata.name ?? `${String(object.metadata.generateName ?? '')}${this.world.newUid()}`;
    this.log('create', ns, name);
    if (ns && !this.world.read(this.cluster, namespacesType, '', ns)) throw status('POST', 404, 'NotFound', `namespaces "${ns}" not found`, ns);
    if (this.world.read(this.cluster, this.type, ns, name)) throw status('POST', 409, 'AlreadyExists', `${this.type.resource} "${name}" already exists`, name);
    const stored = this.world.stamp({ ...structuredClone(object), metadata: { ...structuredClone(object.metadata), name, ...(ns ? { namespace: ns } : {}), uid: this.world.newUid() } });
    delete stored.status;
    this.world.store(this.cluster, this.type, stored, ns, name);
    return structuredClone(stored);
  }

  async replace(object: KubeObject): Promise<KubeObject> {
    return this.write('replace', object, (current, next) => ({ ...next, ...(current.status === undefined ? {} : { status: current.status }) }));
  }

  async replaceStatus(object: KubeObject): Promise<KubeObject> {
    return this.write('replaceStatus', object, (current, next) => ({ ...current, status: next.status }));
  }

  /** The status subresource, as every type here had one (the main write drops status). */
  async applyStatus(object: KubeObject): Promise<KubeObject | undefined> {
    return this.write('replaceStatus', object, (current, next) => ({ ...current, status: next.status }));
  }

  async apply(object: KubeObject, fieldManager: string): Promise<KubeObject> {
    const ns = this.ns(object.metadata.namespace ?? '');
    const name = object.metadata.name ?? '';
    this.log('apply', ns, name);
    const { resourceVersion, uid, name: _n, namespace: _ns, ...meta } = object.metadata;
    const body: KubeObject = { ...structuredClone(object), metadata: structuredClone(meta) };
    delete body.status;
    const paths = leafPaths(body);
    const current = this.world.read(this.cluster, this.type, ns, name);
    if (!current) {
      if (ns && !this.world.read(this.cluster, namespacesType, '', ns)) throw status('PATCH', 404, 'NotFound', `namespaces "${ns}" not found`, ns);
      if (uid !== undefined) throw status('PATCH', 409, 'Conflict', `uid mismatch: the provided object specified uid ${uid}, and no existing object was found`, name);
      const stored = this.world.stamp({ ...body, metadata: { ...body.metadata, name, ...(ns ? { namespace: ns } : {}), uid: this.world.newUid() } });
      this.world.store(this.cluster, this.type, stored, ns, name);
      this.world.applied.set(`${stored.metadata.uid}/${fieldManager}`, paths);
      return structuredClone(stored);
    }
    if (resourceVersion !== undefined && resourceVersion !== current.metadata.resourceVersion) throw status('PATCH', 409, 'Conflict', 'the object has been modified; please apply your changes to the latest version and try again', name);
    const next = structuredClone(current);
    const owned = `${current.metadata.uid}/${fieldManager}`;
    for (const path of this.world.applied.get(owned) ?? []) if (!paths.has(path)) removePath(next, JSON.parse(path) as string[]);
    const merged = mergePatch(next, body) as KubeObject;
    const stored = this.world.stamp(merged);
    this.world.store(this.cluster, this.type, stored, ns, name);
    this.world.applied.set(owned, paths);
    return structuredClone(stored);
  }

  async jsonPatch(namespace: string, name: string, operations: readonly JsonPatchOperation[]): Promise<KubeObject> {
    const ns = this.ns(namespace);
    const current = this.world.read(this.cluster, this.type, ns, name);
    this.log('jsonPatch', ns, name);
    if (!current) throw status('PATCH', 404, 'NotFound', `${this.type.resource} "${name}" not found`, name);
    const next = structuredClone(current) as unknown as Record<string, unknown>;
    for (const op of operations) {
      const path = op.path.split('/').slice(1).map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
      const parent = path.slice(0, -1).reduce<Record<string, unknown>>((o, k) => o[k] as Record<string, unknown>, next);
      const last = path[path.length - 1]!;
      if (op.op === 'test' && JSON.stringify(parent[last]) !== JSON.stringify(op.value)) throw status('PATCH', 422, 'Invalid', `the test of ${op.path} failed`, name);
      if (op.op === 'replace' || op.op === 'add') parent[last] = structuredClone(op.value);
      if (op.op === 'remove') delete parent[last];
    }
    const stored = this.world.stamp(next as unknown as KubeObject);
    this.world.store(this.cluster, this.type, stored, ns, name);
    // Ownership handed to an apply entry (field-ownership.ts's upgrade): in this model, the fields
    // of relsync's old writes were all the object's fields but its status and identity.
    if (operations.some((op) => op.path === '/metadata/managedFields')) {
      const { name: _n, namespace: _ns, uid: _u, resourceVersion: _rv, managedFields, ...meta } = stored.metadata;
      const { status: _s, ...rest } = stored;
      for (const entry of (managedFields as Array<{ manager: string; operation: string }> | undefined) ?? []) {
        if (entry.operation === 'Apply') this.world.applied.set(`${stored.metadata.uid}/${entry.manager}`, leafPaths({ ...rest, metadata: meta }));
      }
    }
    return structuredClone(stored);
  }

  async mergePatch(namespace: string, name: string, patch: unknown): Promise<KubeObject> {
    const ns = this.ns(namespace);
    const current = this.world.read(this.cluster, this.type, ns, name);
    if (!current) {
      this.log('mergePatch', ns, name);
      throw status('PATCH', 404, 'NotFound', `${this.type.resource} "${name}" not found`, name);
    }
    return this.write('mergePatch', mergePatch(current, patch) as KubeObject, (_c, next) => next);
  }

  async delete(namespace: string, name: string, uid?: string): Promise<void> {
    const ns = this.ns(namespace);
    this.log('delete', ns, name);
    const current = this.world.read(this.cluster, this.type, ns, name);
    if (!current) throw status('DELETE', 404, 'NotFound', `${this.type.resource} "${name}" not found`, name);
    if (uid !== undefined && current.metadata.uid !== uid) throw status('DELETE', 409, 'Conflict', 'Precondition failed: UID in precondition does not match', name);
    if ((current.metadata.finalizers ?? []).length > 0) {
      current.metadata.deletionTimestamp ??= new Date(0).toISOString();
      this.world.store(this.cluster, this.type, this.world.stamp(current), ns, name);
    } else {
      this.world.store(this.cluster, this.type, undefined, ns, name);
    }
  }

  private write(verb: 'replace' | 'replaceStatus' | 'patchStatus' | 'mergePatch', object: KubeObject, merge: (current: KubeObject, next: KubeObject) => KubeObject): KubeObject {
    const ns = this.ns(object.metadata.namespace ?? '');
    const name = object.metadata.name ?? '';
    this.log(verb, ns, name);
    const current = this.world.read(this.cluster, this.type, ns, name);
    if (!current) throw status('PUT', 404, 'NotFound', `${this.type.resource} "${name}" not found`, name);
    const rv = object.metadata.resourceVersion;
    if (rv !== undefined && rv !== current.metadata.resourceVersion) throw status('PUT', 409, 'Conflict', 'the object has been modified; please apply your changes to the latest version and try again', name);
    const next = merge(current, structuredClone(object));
    // What the API server keeps whatever the body says.
    next.metadata = { ...next.metadata, uid: current.metadata.uid, ...(current.metadata.deletionTimestamp ? { deletionTimestamp: current.metadata.deletionTimestamp } : {}) };
    if (next.metadata.deletionTimestamp && (next.metadata.finalizers ?? []).length === 0) {
      this.world.store(this.cluster, this.type, undefined, ns, name);
      return next;
    }
    this.world.webhook?.(this.cluster, next);
    const stored = this.world.stamp(next);
    this.world.store(this.cluster, this.type, stored, ns, name);
    return structuredClone(stored);
  }

  private ns(namespace: string): string {
    return this.type.namespaced ? namespace : '';
  }

  private log(verb: Call['verb'], namespace: string, name: string): ReturnType<MemoryClusters['log']> {
    return this.world.log({ verb, cluster: this.cluster, resource: this.type.resource, namespace, name });
  }
}

function keyOf(cluster: string, type: Pick<ResourceType, 'group' | 'resource'>, namespace: string, name: string): string {
  return [cluster, type.group, type.resource, namespace, name].join('\u0000');
}

function status(method: string, code: number, reason: string, message: string, name: string): ApiError {
  return new ApiError(method, '/memory', code, JSON.stringify({ kind: 'Status', status: 'Failure', reason, message, details: { name } }));
}

/** Every leaf of an object (a scalar or a list: lists are owned whole), as JSON-encoded paths. */
function leafPaths(value: unknown, prefix: string[] = [], out = new Set<string>()): Set<string> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    out.add(JSON.stringify(prefix));
    return out;
  }
  for (const [k, v] of Object.entries(value)) leafPaths(v, [...prefix, k], out);
  return out;
}

/** Removes a leaf, and the maps it leaves empty (the apply owned them too). */
function removePath(target: unknown, path: readonly string[]): void {
  const chain: Array<Record<string, unknown>> = [];
  let o = target as Record<string, unknown> | undefined;
  for (const k of path.slice(0, -1)) {
    if (!o || typeof o !== 'object') return;
    chain.push(o);
    o = o[k] as Record<string, unknown> | undefined;
  }
  if (!o || typeof o !== 'object') return;
  delete o[path[path.length - 1]!];
  for (let i = chain.length - 1; i >= 0; i--) {
    const child = chain[i]![path[i]!];
    if (typeof child === 'object' && child !== null && Object.keys(child).length === 0 && path[i] !== 'metadata') delete chain[i]![path[i]!];
  }
}

/** RFC 7386. */
function mergePatch(target: unknown, patch: unknown): unknown {
  if (typeof patch !== 'object' || patch === null || Array.isArray(patch)) return patch;
  const out: Record<string, unknown> = typeof target === 'object' && target !== null && !Array.isArray(target) ? { ...(target as Record<string, unknown>) } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

/** The label selector forms relsync sends (core/label-selector.ts's selectorQuery). */
function parseSelector(query: string): (labels: Record<string, string>) => boolean {
  const parts = query.match(/[^,(]+(\([^)]*\))?/g)?.map((p) => p.trim()).filter(Boolean) ?? [];
  const tests = parts.map((part): ((l: Record<string, string>) => boolean) => {
    let m = /^(\S+)\s+(in|notin)\s+\(([^)]*)\)$/.exec(part);
    if (m) {
      const [, key, op, list] = m as unknown as [string, string, string, string];
      const values = list.split(',').map((v) => v.trim());
      return op === 'in' ? (l) => key in l && values.includes(l[key]!) : (l) => !(key in l) || !values.includes(l[key]!);
    }
    m = /^([^!=]+)(==|=|!=)(.*)$/.exec(part);
    if (m) {
      const [, key, op, value] = m as unknown as [string, string, string, string];
      return op === '!=' ? (l) => l[key] !== value : (l) => l[key] === value;
    }
    if (part.startsWith('!')) return (l) => !(part.slice(1) in l);
    return (l) => part in l;
  });
  return (labels) => tests.every((t) => t(labels));
}
