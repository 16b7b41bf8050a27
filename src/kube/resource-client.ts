/**
 * A dynamic client for one resource type on one cluster: paths by
 * group/version/resource, JSON in and out, 404 on GET as `undefined`.
 */
import type { Readable } from 'node:stream';
import { AnswerTooLargeError, MAX_ANSWER_BYTES, type Connection, type RequestOptions } from './connection.js';
import type { KubeObject, ObjectList } from '../core/object.js';
import { apiVersionOf, type ResourceType } from '../core/resource-type.js';
import { approximateHeapBytes } from '../util/heap-size.js';
import type { Semaphore } from '../util/semaphore.js';
import { ApiError, isNotFound, isObjectNotFound } from './api-error.js';
import { metadataPageHead, type MetadataPageHead } from './metadata-page-head.js';
import { objectHead } from './object-head.js';

export interface ListOptions {
  readonly namespace?: string | undefined;
  readonly labelSelector?: string | undefined;
  readonly limit?: number;
  readonly continueToken?: string | undefined;
  readonly resourceVersion?: string | undefined;
}

export interface WatchRequest {
  readonly labelSelector?: string | undefined;
  /** Watch from here (events after it); undefined: from the current state. */
  readonly resourceVersion?: string | undefined;
  /** The server ends the watch after this long. */
  readonly timeoutSeconds: number;
  /** Aborting it ends the request and the stream. */
  readonly signal: AbortSignal;
}

/** An open watch: its answer's lines, one JSON event each, until the server ends it; close() drops it. */
export interface WatchStream extends AsyncIterable<string> {
  close(): void;
}

/**
 * A resourceVersion no object has (etcd's revisions stay far below it): an apply that names it
 * creates the object when it is missing and is refused (409) when one exists — a create that
 * never touches an object someone else made, and whose fields are owned as applied (a POST's
 * would be owned by an Update, and never let go by later applies). Checked against
 * kube-apiserver v1.36: 201 when missing, 409 when present.
 */
export const CREATE_ONLY = '9223372036854775807';

export type JsonPatchOperation = { readonly op: 'test' | 'replace' | 'add'; readonly path: string; readonly value: unknown } | { readonly op: 'remove'; readonly path: string };

export interface ListPage {
  readonly items: KubeObject[];
  readonly resourceVersion: string;
  readonly continueToken: string | undefined;
  /** pages(): the items' estimated size in memory (util/heap-size.ts), as it sized the next page by. */
  readonly heapBytes?: number;
  /**
   * pages(): objects of this place in the list that exist but were not read (RefusedObject): a
   * consumer must not take them for gone, nor decide anything on what they hold.
   */
  readonly refused?: readonly RefusedObject[];
}

/**
 * An object a LIST found but did not read: alone on its page, its answer was still too long or too
 * costly to parse (AnswerTooLargeError). Its page was asked for again as metadata only, which says
 * what it is and where the list goes on.
 */
export interface RefusedObject {
  /** Its metadata only (a PartialObjectMetadata, without managedFields), with the type's apiVersion and kind. */
  readonly object: KubeObject;
  /** Why it was not read (the error of its answer). */
  readonly why: string;
}

/**
 * The Accept header that makes a kube-apiserver (and kcp) answer a LIST with the objects' metadata
 * only (PartialObjectMetadataList, meta.k8s.io/v1): served for every resource, core and custom,
 * since Kubernetes 1.15.
 */
export const METADATA_ONLY = 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1';

/**
 * The Accept header of one object's metadata only (PartialObjectMetadata), for a GET or a write
 * whose answer is read for its metadata; a server that cannot answer so answers with the object
 * (the second choice), whose metadata is then taken.
 */
export const OBJECT_METADATA_ONLY = 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1, application/json';

/** A page of a LIST aims at this many bytes of parsed objects in the heap (util/heap-size.ts). */
export const PAGE_TARGET_SIZE = 4 * 1024 * 1024;
/**
 * A page answer longer than this (text) is dropped as it arrives and asked again smaller. Text
 * of tiny keys parses to several times its length, so this bounds the page that changes from
 * one shape to another; the pages after it are sized by their objects' parsed size.
 */
export const PAGE_MAX_BYTES = 8 * 1024 * 1024;
const FIRST_PAGE_LIMIT = 20;
const MAX_PAGE_LIMIT = 500;

/**
 * The pages one LIST may take (limits.listPages): 10,000 pages of at most 500 objects are 5
 * million objects, more than an etcd holds of one type. A platform's API server may be the
 * tenant's own, and one that answers every page with another continue token would otherwise keep
 * a LIST (and what waits for it: a watch, a sweep, a reconcile) going for ever.
 */
export const DEFAULT_LIST_PAGES = 10_000;

/** A LIST that did not end within its pages, or whose page held more than 500 objects with more to come: dropped, and taken again later by its caller. */
export class EndlessListError extends Error {
  override name = 'EndlessListError';
}

/**
 * How many objects the next page may ask for, after a page of `items` objects
 * taking `size` bytes parsed was asked for with `limit`: as many as that
 * page's objects say fit in PAGE_TARGET_SIZE, but at most twice `limit`
 * (sizes change within a list: a tenant can put its small objects first),
 * and at most 500.
 */
export function nextPageLimit(limit: number, items: number, size: number): number {
  const grown = Math.min(MAX_PAGE_LIMIT, limit * 2);
  if (items === 0) return grown;
  const perObject = Math.max(1, size / items);
  return Math.max(1, Math.min(grown, Math.floor(PAGE_TARGET_SIZE / perObject)));
}

export class ResourceClient {
  /**
   * `pageSlots`: shared by the clients of one cluster, so that LIST pages in flight at once
   * (every watch lists at start) stay few: each may hold up to PAGE_MAX_BYTES as text and
   * parsed, part of it outside the JavaScript heap's limit.
   */
  constructor(
    readonly connection: Connection,
    readonly type: ResourceType,
    private readonly pageSlots?: Semaphore,
    /** limits.listPages: the pages one LIST may take (pages()). */
    private readonly maxListPages = DEFAULT_LIST_PAGES,
  ) {}

  path(namespace?: string, name?: string, subresource?: string): string {
    // URL resolution turns "." and ".." into other paths (a LIST of the type): never an object's name.
    if ([namespace, name].some((part) => part === '.' || part === '..')) throw new Error(`"${name}" in "${namespace}" is not an object's name`);
    const { group, version, resource, namespaced } = this.type;
    let p = group ? `/apis/${group}/${version}` : `/api/${version}`;
    if (namespaced && namespace) p += `/namespaces/${encodeURIComponent(namespace)}`;
    p += `/${resource}`;
    if (name) p += `/${encodeURIComponent(name)}`;
    if (subresource) p += `/${subresource}`;
    return p;
  }

  async get(namespace: string, name: string): Promise<KubeObject | undefined> {
    const path = this.path(namespace, name);
    const object = oneObject(await this.connection.request<unknown>('GET', path, { absentAs: name }), path);
    return object && this.withType(object);
  }

  /**
   * The object's metadata only (without its content: a tenant's megabyte is neither sent nor
   * parsed), with the type's apiVersion and kind; undefined when it does not exist. For what
   * decides on marks, uids and versions alone (the deletion of a copy).
   */
  async getMetadata(namespace: string, name: string): Promise<KubeObject | undefined> {
    const path = this.path(namespace, name);
    const object = oneObject(await this.connection.request<unknown>('GET', path, { accept: OBJECT_METADATA_ONLY, absentAs: name }), path);
    return object && this.metadataOf(object);
  }

  /**
   * Sets the object's finalizers if it is still at `resourceVersion` (a 409 otherwise), as a merge
   * patch (a list is replaced whole): the same as a PUT of the object read with them changed, but
   * neither the body nor the answer carries its content. The answer is its metadata.
   */
  async setFinalizers(namespace: string, name: string, resourceVersion: string | undefined, finalizers: readonly string[]): Promise<KubeObject> {
    const patch = { metadata: { ...(resourceVersion ? { resourceVersion } : {}), finalizers } };
    return this.metadataOf(await this.connection.request<KubeObject>('PATCH', this.path(namespace, name), { body: patch, contentType: 'application/merge-patch+json', accept: OBJECT_METADATA_ONLY }));
  }

  /**
   * Sets `status` over the object's status through the status subresource, if the object is still
   * at `resourceVersion` (a 409 otherwise), as a merge patch: a member of `status` replaces the
   * object's whole (a list too), the others stay. The answer is read as apiVersion, kind, metadata
   * and status (object-head.ts): its content is neither sent nor parsed. Undefined where the
   * answer is not such an object.
   */
  async patchStatus(namespace: string, name: string, resourceVersion: string | undefined, status: Record<string, unknown>): Promise<KubeObject | undefined> {
    const patch = { metadata: { ...(resourceVersion ? { resourceVersion } : {}) }, status };
    const head = await this.connection.request<KubeObject | undefined>('PATCH', this.path(namespace, name, 'status'), { body: patch, contentType: 'application/merge-patch+json', readText: objectHead });
    return head && { ...head, apiVersion: apiVersionOf(this.type), kind: this.type.kind };
  }

  /** A PartialObjectMetadata answer as an object of this type: its metadata, without managedFields. */
  private metadataOf(answer: KubeObject): KubeObject {
    const { managedFields: _, ...metadata } = answer.metadata ?? {};
    return { apiVersion: apiVersionOf(this.type), kind: this.type.kind, metadata };
  }

  /**
   * One page of a LIST; items get the `kind`/`apiVersion` that LIST leaves
   * out, and lose their managedFields, which relsync never reads and which
   * are most of a listed object's size (a PUT without them keeps the
   * server's).
   */
  async listPage(options: ListOptions & { readonly maxBytes?: number } = {}): Promise<ListPage> {
    return this.page(options);
  }

  /**
   * listPage(), and: `holdParsed`, the page takes its share of the parse budget until the caller
   * gives it back (Connection.request).
   */
  private async page(options: ListOptions & { readonly maxBytes?: number; readonly holdParsed?: (release: () => void) => void }): Promise<ListPage> {
    const request = () => this.connection.request<ObjectList>('GET', this.path(options.namespace), {
      maxBytes: options.maxBytes,
      query: {
        labelSelector: options.labelSelector,
        limit: options.limit,
        continue: options.continueToken,
        resourceVersion: options.continueToken ? undefined : options.resourceVersion,
      },
      ...(options.holdParsed ? { holdParsed: options.holdParsed } : {}),
    });
    const list = await (this.pageSlots ? this.pageSlots.run(request) : request());
    const items = (list.items ?? []).map((o) => {
      delete o.metadata.managedFields;
      return this.withType(o);
    });
    return { items, resourceVersion: list.metadata.resourceVersion ?? '', continueToken: list.metadata.continue || undefined };
  }

  /**
   * The page of one object (from `continueToken`) whose answer `err` refused, asked for again as
   * metadata only: that object as refused, and the token to go on from. Undefined when the API
   * server cannot say (metadata only is refused, too large, or more than one object): then the list
   * cannot go on. An error of the API server's own (a 429, a 410) is thrown as it is.
   *
   * The metadata alone may be costly too (a megabyte of labels of tiny values): its text is read
   * for the object's identity and the list's token (metadata-page-head.ts), never parsed.
   */
  private async refusedPage(options: ListOptions, continueToken: string | undefined, err: AnswerTooLargeError): Promise<ListPage | undefined> {
    let head: MetadataPageHead | undefined;
    try {
      const request = () =>
        this.connection.request<MetadataPageHead | undefined>('GET', this.path(options.namespace), {
          query: { labelSelector: options.labelSelector, limit: 1, continue: continueToken, resourceVersion: continueToken ? undefined : options.resourceVersion },
          accept: METADATA_ONLY,
          // More than the one object asked for: not an answer to this question.
          readText: (text) => metadataPageHead(text, 1),
        });
      head = await (this.pageSlots ? this.pageSlots.run(request) : request());
    } catch (metadataErr) {
      // Not "cannot answer so" (406, 415): the server's own error, retried as such (a 429, a 410).
      if (metadataErr instanceof ApiError && metadataErr.statusCode !== 406 && metadataErr.statusCode !== 415) throw metadataErr;
      return undefined;
    }
    if (!head) return undefined;
    const refused = head.items.map((metadata) => ({ object: { apiVersion: apiVersionOf(this.type), kind: this.type.kind, metadata }, why: err.message }));
    return { items: [], resourceVersion: head.resourceVersion, continueToken: head.continueToken, refused };
  }

  /**
   * A LIST, one page at a time, so that a caller holds one page and not the
   * whole list. Pages are sized by bytes, not only by count: the API server
   * counts objects, and 500 ConfigMaps of 1 MiB would be one 500 MiB answer.
   * The first page asks for few objects; each next one for as many as the
   * last page's objects, parsed, say fit in PAGE_TARGET_SIZE (nextPageLimit). An
   * answer longer than PAGE_MAX_BYTES is dropped while it arrives and the
   * same page asked again for a quarter as many objects: no page is ever
   * held above that size, unless one object alone is bigger, and after a
   * drop the limit only grows back by doubling, so a list of small objects
   * followed by big ones costs a few dropped answers, not a few per page.
   *
   * A LIST ends with EndlessListError after `maxListPages` pages (an API server that answers
   * every page with another continue token), and at a page that holds more than 500 objects (the
   * most it asks for) and says more are to come (a server without paging answers with one page of
   * everything, without a token): so it ends, having taken at most 500 objects a page before its
   * last.
   *
   * One object whose answer alone is still too long or too costly to parse (a custom resource of
   * tiny values where etcd's request limit was raised, or a tenant's own API server) does not end
   * the list, which would stop the type's watch and sweeps for every tenant of the cluster: its
   * page is asked for again as metadata only, and handed on with that object in `refused` (and no
   * items), and the list goes on from there. Only a server that cannot answer so ends it.
   *
   * Each page takes its share of the connection's parse budget (limits.parsedBytesInFlight) from
   * before it is parsed until the consumer asks for the next one or stops (given back before the
   * next is asked for: a LIST never waits for budget while it holds some). A consumer that reads
   * ahead (readAhead) holds the page it looks at beyond its share.
   */
  async *pages(options: Omit<ListOptions, 'continueToken' | 'limit'> = {}): AsyncGenerator<ListPage> {
    let continueToken: string | undefined;
    let limit = FIRST_PAGE_LIMIT;
    let pages = 0;
    let objects = 0;
    let release: (() => void) | undefined;
    const holdParsed = (r: () => void) => void (release = r);
    try {
      do {
        if (pages >= this.maxListPages) {
          throw new EndlessListError(`LIST ${this.path(options.namespace)} of ${this.connection.name}: not complete after ${pages} pages (${objects} objects; limits.listPages is ${this.maxListPages}): the API server answers every page with another continue token; dropped, and taken again later`);
        }
        let page: ListPage | undefined;
        while (!page) {
          try {
            page = await this.page({ ...options, limit, continueToken, maxBytes: limit > 1 ? PAGE_MAX_BYTES : undefined, holdParsed });
          } catch (err) {
            if (!(err instanceof AnswerTooLargeError)) throw err;
            if (limit > 1) {
              limit = Math.max(1, Math.floor(limit / 4));
              continue;
            }
            // One object too large to read: asking again for it would never end; its metadata says what it is and where the list goes on.
            page = await this.refusedPage(options, continueToken, err);
            if (!page) throw err;
          }
        }
        pages++;
        objects += page.items.length;
        if (page.continueToken && page.items.length > MAX_PAGE_LIMIT) {
          throw new EndlessListError(`LIST ${this.path(options.namespace)} of ${this.connection.name}: a page of ${page.items.length} objects (asked for at most ${limit}), and more were to come; dropped, and taken again later`);
        }
        const parsed = page.items.reduce((n, item) => n + approximateHeapBytes(item), 0);
        yield { ...page, heapBytes: parsed };
        release?.();
        release = undefined;
        // A refused object says nothing of its neighbours' sizes: the limit grows back as after an empty page.
        limit = nextPageLimit(limit, page.items.length, parsed);
        continueToken = page.continueToken;
      } while (continueToken);
    } finally {
      release?.();
    }
  }

  /**
   * A WATCH with bookmarks: resolves once the server answered 2xx (an error
   * answer rejects with its ApiError), then hands over the answer line by line.
   */
  async watch(request: WatchRequest): Promise<WatchStream> {
    const res = await this.connection.stream(this.path(), {
      query: {
        watch: true,
        allowWatchBookmarks: true,
        resourceVersion: request.resourceVersion,
        timeoutSeconds: request.timeoutSeconds,
        labelSelector: request.labelSelector,
      },
      signal: request.signal,
    });
    // Errors of an aborted stream surface through the iterator (or not at all
    // once the reader stopped); without listeners they would crash the process.
    res.on('error', () => undefined);
    // Lines that arrive before the reader starts wait in the stream (its buffer, then the socket's).
    const iterator = linesOf(res, MAX_WATCH_LINE_BYTES, `watch of ${this.path()}`);
    return {
      [Symbol.asyncIterator]: () => iterator,
      close() {
        res.destroy();
      },
    };
  }

  /** Every object (for lists known to be small: a whole list is held at once). */
  async listAll(options: Omit<ListOptions, 'continueToken' | 'limit'> = {}): Promise<{ items: KubeObject[]; resourceVersion: string }> {
    const items: KubeObject[] = [];
    let resourceVersion = '';
    for await (const page of this.pages(options)) {
      // Its callers act on the whole list (what is not in it is gone): one that lacks an object fails.
      if (page.refused && page.refused.length > 0) throw new Error(`LIST ${this.path(options.namespace)} of ${this.connection.name}: ${page.refused[0]!.why}; the whole list is not known`);
      items.push(...page.items);
      resourceVersion = page.resourceVersion || resourceVersion;
    }
    return { items, resourceVersion };
  }

  /** `fieldManager`: whom the API server records as the owner of the created fields (an Update's). */
  async create(namespace: string, object: KubeObject, fieldManager?: string): Promise<KubeObject> {
    return this.connection.request<KubeObject>('POST', this.path(namespace), { body: this.withType(object), query: { fieldManager } });
  }

  /** PUT with the object's resourceVersion: a concurrent change answers 409. */
  async replace(object: KubeObject): Promise<KubeObject> {
    const { namespace, name } = object.metadata;
    return this.connection.request<KubeObject>('PUT', this.path(namespace, name), { body: this.withType(object) });
  }

  async replaceStatus(object: KubeObject): Promise<KubeObject> {
    const { namespace, name } = object.metadata;
    return this.connection.request<KubeObject>('PUT', this.path(namespace, name, 'status'), { body: this.withType(object) });
  }

  /**
   * Server-side apply of `object`'s status to the status subresource under `fieldManager`, forced;
   * its uid and resourceVersion, when given, are preconditions.
   * Undefined when the type has no status subresource (404 from the subresource, the object being
   * there): its status was written with the object itself.
   */
  async applyStatus(object: KubeObject, fieldManager: string): Promise<KubeObject | undefined> {
    const { namespace, name } = object.metadata;
    try {
      return await this.connection.request<KubeObject>('PATCH', this.path(namespace, name, 'status'), {
        body: this.withType({ metadata: { name, ...(namespace ? { namespace } : {}), ...(object.metadata.uid ? { uid: object.metadata.uid } : {}), ...(object.metadata.resourceVersion ? { resourceVersion: object.metadata.resourceVersion } : {}) }, status: object.status }),
        contentType: 'application/apply-patch+yaml',
        query: { fieldManager, force: true },
      });
    } catch (err) {
      if (isNotFound(err) && !isObjectNotFound(err, name ?? '')) return undefined;
      throw err;
    }
  }

  /**
   * Server-side apply under `fieldManager`, forced: the manager owns exactly the fields of
   * `object` — fields others set stay, a field it applied before and leaves out now goes, and a
   * field of its that someone changed is set back. A resourceVersion in `object` is a
   * precondition (409 when the object changed since); with CREATE_ONLY, 409 when it exists at all.
   * The server creates a missing object, also when `object` names a resourceVersion.
   */
  async apply(object: KubeObject, fieldManager: string): Promise<KubeObject> {
    const { namespace, name } = object.metadata;
    return this.connection.request<KubeObject>('PATCH', this.path(namespace, name), {
      body: this.withType(object),
      contentType: 'application/apply-patch+yaml',
      query: { fieldManager, force: true },
    });
  }

  /** An RFC 6902 JSON patch (e.g. a `test` of the resourceVersion before a `replace`). */
  async jsonPatch(namespace: string, name: string, operations: readonly JsonPatchOperation[]): Promise<KubeObject> {
    return this.connection.request<KubeObject>('PATCH', this.path(namespace, name), { body: operations, contentType: 'application/json-patch+json' });
  }

  async mergePatch(namespace: string, name: string, patch: unknown): Promise<KubeObject> {
    const options: RequestOptions = { body: patch, contentType: 'application/merge-patch+json' };
    return this.connection.request<KubeObject>('PATCH', this.path(namespace, name), options);
  }

  /**
   * Deletes the object; the API server's NotFound of this object is success (a 404 of the path,
   * such as a type not served for a moment, is not). Preconditions: its uid and, when given, its
   * resourceVersion (a 409 when it changed since it was read).
   */
  async delete(namespace: string, name: string, uid?: string, resourceVersion?: string): Promise<void> {
    const preconditions = { ...(uid ? { uid } : {}), ...(resourceVersion ? { resourceVersion } : {}) };
    try {
      await this.connection.request('DELETE', this.path(namespace, name), {
        body: uid || resourceVersion ? { kind: 'DeleteOptions', apiVersion: 'v1', preconditions } : undefined,
        // The answer is the object as deleted (a tenant's copy of up to a megabyte): nobody reads it.
        readText: () => undefined,
      });
    } catch (err) {
      if (!isObjectNotFound(err, name)) throw err;
    }
  }

  private withType(object: KubeObject): KubeObject {
    object.apiVersion ??= apiVersionOf(this.type);
    object.kind ??= this.type.kind;
    return object;
  }
}

/**
 * The answer to a read of one object: undefined only where the connection says the API server's
 * NotFound was about it (RequestOptions.absentAs). Anything else that is not an object with
 * metadata (`null`, a list, a number, `{}`: a proxy's or a tenant's server's) fails the read: taken
 * as absent, it could have a copy deleted.
 */
function oneObject(answer: unknown, path: string): KubeObject | undefined {
  if (answer === undefined) return undefined;
  if (answer === null || typeof answer !== 'object' || Array.isArray(answer)) throw new Error(`GET ${path}: the answer is not an object`);
  // Without metadata it would read as an object with no uid, version or marks: "not relsync's", or "gone already".
  const metadata = (answer as { metadata?: unknown }).metadata;
  if (metadata === null || typeof metadata !== 'object' || Array.isArray(metadata)) throw new Error(`GET ${path}: the answer has no metadata`);
  return answer as KubeObject;
}

/**
 * The longest watch event line read: an event holds one object (at most ~1.5 MiB in etcd, a few
 * MiB as JSON with its managed fields). A platform's API server may be the tenant's own: a line
 * that never ends would otherwise be held whole. The same cap as one object's answer
 * (MAX_ANSWER_BYTES), for one object.
 */
export const MAX_WATCH_LINE_BYTES = MAX_ANSWER_BYTES;

/** A watch line longer than MAX_WATCH_LINE_BYTES: the watch is dropped (and started again by its loop). */
export class WatchLineTooLongError extends Error {
  override name = 'WatchLineTooLongError';
}

/** The stream's lines ("\n", a trailing "\r" dropped), each at most `maxBytes`, held as Buffers until whole. */
export async function* linesOf(input: Readable, maxBytes: number, what: string): AsyncGenerator<string> {
  let pending: Buffer[] = [];
  let size = 0;
  const line = (last: Buffer): string => {
    const text = (pending.length === 0 ? last : Buffer.concat([...pending, last])).toString('utf8');
    pending = [];
    size = 0;
    return text.endsWith('\r') ? text.slice(0, -1) : text;
  };
  for await (const chunk of input as AsyncIterable<Buffer>) {
    let start = 0;
    for (let end = chunk.indexOf(10); end >= 0; end = chunk.indexOf(10, start)) {
      const part = chunk.subarray(start, end);
      if (size + part.length > maxBytes) {
        input.destroy();
        throw new WatchLineTooLongError(`${what}: a line longer than ${maxBytes} bytes; the watch is dropped`);
      }
      start = end + 1;
      yield line(part);
    }
    const rest = chunk.subarray(start);
    size += rest.length;
    if (size > maxBytes) {
      input.destroy();
      throw new WatchLineTooLongError(`${what}: a line longer than ${maxBytes} bytes; the watch is dropped`);
    }
    if (rest.length > 0) pending.push(rest);
  }
  if (size > 0) yield line(Buffer.alloc(0));
}
