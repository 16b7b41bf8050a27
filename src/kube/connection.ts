/**
 * One connection to one API server: credentials from a kubeconfig (credentials.ts),
 * one keep-alive HTTPS agent shared by every request and watch of that cluster
 * (a new agent per request leaks sockets in reconnect loops), and plain JSON
 * requests. relsync talks REST itself instead of through client-node's typed
 * APIs, which coerce custom kinds named like core kinds and drop unknown
 * fields of core kinds (see shared/notes/client-node.md).
 *
 * Non-watch requests take a slot of the cluster's adaptive limit
 * (adaptive-limit.ts), shared like the agent: a 429 slows every request of
 * the cluster, not only the one answered. Watches are exempt (a watch would
 * hold its slot for minutes; they are few, one per configured type and
 * cluster), and so is a connection made by unlimited() (the leader's lease).
 */
import http from 'node:http';
import https from 'node:https';
import { AdaptiveLimit, type Slot } from './adaptive-limit.js';
import { answersObjectNotFound, ApiError } from './api-error.js';
import { Credentials } from './credentials.js';
import type { ByteBudget } from '../util/byte-budget.js';
import { monotonicClock, type Clock } from '../util/clock.js';
import { parsedBytesAtMost, parsedBytesOver } from '../util/heap-size.js';
import { heavyTurns } from '../util/heavy-turns.js';
import { jsonText } from '../util/json-text.js';

export interface ConnectionOptions {
  /** Name used in logs, metrics and identities. */
  readonly name: string;
  /** Path of a kubeconfig file; when absent the in-cluster service account is used. */
  readonly kubeconfig?: string | undefined;
  /** Context inside the kubeconfig; default: its current context. */
  readonly context?: string | undefined;
  /** Per-request timeout for non-watch requests; default 30 s. */
  readonly requestTimeoutMs?: number;
  /** Time for Retry-After pauses, request durations and deadlines; default monotonicClock (pauses: the system's). */
  readonly clock?: Clock;
  /** limits.parsedBytes: the most heap one answer may take once parsed; default MAX_PARSED_BYTES. */
  readonly maxParsedBytes?: number;
  /** limits.parsedBytesInFlight: what the answers a caller holds (RequestOptions.holdParsed) take together, shared by every connection given it. */
  readonly parseBudget?: ByteBudget;
}

export interface RequestOptions {
  readonly query?: Record<string, string | number | boolean | undefined>;
  readonly body?: unknown;
  readonly contentType?: string;
  readonly signal?: AbortSignal;
  /** Give up on an answer longer than this many bytes (AnswerTooLargeError) instead of holding it. */
  readonly maxBytes?: number;
  /** Give up on an answer that would take more heap than this once parsed (AnswerTooCostlyError); default the connection's (limits.parsedBytes). */
  readonly maxParsedBytes?: number;
  /** The Accept header; default `application/json`. */
  readonly accept?: string;
  /**
   * The caller holds the parsed answer for a while (a LIST page until its consumer is done with
   * it): its parse first takes what the text says it will take of the connection's parse budget,
   * waiting for it, and this is handed the function that gives it back. The caller must not wait
   * for another such answer before giving it back (ByteBudget). Without it, no budget is taken.
   */
  readonly holdParsed?: (release: () => void) => void;
  /**
   * Reads the answer's text instead of JSON.parse (and instead of the parse cap and budget, which
   * bound what JSON.parse takes): for a reader that keeps a bounded part of it (metadata-page-head.ts,
   * object-head.ts, which is told the cap on what it parses), or none (a DELETE's answer).
   */
  readonly readText?: (text: string, maxParsedBytes: number) => unknown;
  /**
   * The name of the object a read is of: the API server's NotFound about it answers undefined
   * instead of an ApiError (api-error.ts answersObjectNotFound), for a caller that takes it as absent.
   */
  readonly absentAs?: string;
}

/** An answer was longer than RequestOptions.maxBytes; it was dropped unread. */
export class AnswerTooLargeError extends Error {
  constructor(
    readonly method: string,
    readonly path: string,
    readonly maxBytes: number,
  ) {
    super(`${method} ${path}: the answer is longer than ${maxBytes} bytes`);
  }
}

/**
 * An answer short enough, but of so many small values that parsing it would take more heap than
 * RequestOptions.maxParsedBytes (`[{},{},…]` takes 22 times its text): dropped unparsed. A LIST
 * asks again for fewer objects per page, as for a long answer.
 */
export class AnswerTooCostlyError extends AnswerTooLargeError {
  constructor(method: string, path: string, bytes: number, parsedBytes: number, maxParsedBytes: number) {
    super(method, path, bytes);
    this.message = `${method} ${path}: the answer (${bytes} bytes) would take about ${mib(parsedBytes)} MiB of memory once parsed, more than ${mib(maxParsedBytes)} MiB (limits.parsedBytes): it holds too many small values`;
  }
}

const mib = (bytes: number): string => (bytes / 1024 / 1024).toFixed(0);

/** Counts requests per verb, for metrics and benchmarks. */
/** `seconds`: from sending the request to reading the whole answer; undefined for a watch. */
export type RequestObserver = (cluster: string, method: string, statusCode: number, seconds?: number) => void;

/** Sees the cluster's concurrency limit when its whole part changes, and each throttled answer (`throttled`: this call is one). */
export type LimitObserver = (cluster: string, limit: number, throttled: boolean) => void;

/** Most non-watch requests of one cluster at once, and the agent's sockets. */
const MAX_CONCURRENCY = 32;

/** Credentials, the one keep-alive agent and the concurrency limit, shared by a connection and those derived from it. */
interface Transport {
  readonly agent: https.Agent | http.Agent;
  readonly credentials: Credentials;
  readonly limit: AdaptiveLimit;
  /** What requests are timed on (their duration, their whole answer's deadline). */
  readonly clock: Clock;
  observer: RequestObserver | undefined;
  limitObserver: LimitObserver | undefined;
  /** Every request but a read is refused before it is sent (a dry run). */
  readOnly: boolean;
  /** Why writes may not be sent now (a term that lost or gave up its Lease), checked as each is sent; undefined: they may. */
  writeFence: WriteFence | undefined;
  /** limits.parsedBytes. */
  readonly maxParsedBytes: number;
  readonly parseBudget: ByteBudget | undefined;
}

/** Why a write (method, path) may not be sent now; undefined: it may. */
export type WriteFence = (method: string, path: string) => string | undefined;

/** A write refused by the connection's write fence (setWriteFence): it was never sent. */
export class FencedWriteError extends Error {
  override name = 'FencedWriteError';
}

export class Connection {
  readonly name: string;
  /** The cluster name in metrics: derived connections count under their parent's. */
  readonly metricsName: string;
  private server: string | undefined;
  private readonly resolveServer: () => Promise<string>;
  private readonly transport: Transport;
  private readonly requestTimeoutMs: number;
  /** False for a connection made by unlimited(). */
  private readonly limited: boolean = true;
  /** False for a connection made by unlimited(): the Lease's own writes are what keeps the fence open. */
  private readonly fenced: boolean = true;

  constructor(options: ConnectionOptions) {
    this.name = options.name;
    this.metricsName = options.name;
    this.requestTimeoutMs = options.requestTimeoutMs ?? 30_000;
    let credentials: Credentials;
    try {
      credentials = new Credentials({ kubeconfig: options.kubeconfig, context: options.context }, undefined, options.clock);
    } catch (err) {
      throw new Error(`cluster ${options.name}: ${(err as Error).message}`, { cause: err });
    }
    const server = credentials.server;
    this.server = server;
    this.resolveServer = () => Promise.resolve(server);
    const agentOptions = { keepAlive: true, maxSockets: MAX_CONCURRENCY };
    const transport: Transport = {
      agent: server.startsWith('https:') ? new https.Agent(agentOptions) : new http.Agent(agentOptions),
      credentials,
      limit: new AdaptiveLimit({
        max: MAX_CONCURRENCY,
        clock: options.clock,
        onChange: (limit, throttled) => transport.limitObserver?.(this.metricsName, limit, throttled),
      }),
      clock: options.clock ?? monotonicClock,
      observer: undefined,
      limitObserver: undefined,
      readOnly: false,
      writeFence: undefined,
      maxParsedBytes: options.maxParsedBytes ?? MAX_PARSED_BYTES,
      parseBudget: options.parseBudget,
    };
    this.transport = transport;
  }

  /** Refuses, from now on, every request but a read, of this connection and of those derived from it. */
  makeReadOnly(): void {
    this.transport.readOnly = true;
  }

  /**
   * From now on, each request but a read, of this connection and of those derived from it, asks
   * `fence` just before it is sent and is refused (FencedWriteError) when told why. A term's
   * fence says whether its Lease is still held: checked at the last moment, it also stops the
   * writes of a process that was paused past its lease and has not yet noticed.
   */
  setWriteFence(fence: WriteFence): void {
    this.transport.writeFence = fence;
  }

  /** Sees every request of this connection and of those derived from it. */
  get observer(): RequestObserver | undefined {
    return this.transport.observer;
  }

  set observer(observer: RequestObserver | undefined) {
    this.transport.observer = observer;
  }

  /** Sees the concurrency limit of this connection and of those derived from it; told the current one at once. */
  set limitObserver(observer: LimitObserver | undefined) {
    this.transport.limitObserver = observer;
    observer?.(this.metricsName, this.transport.limit.limit, false);
  }

  /** The cluster's concurrency limit (shared with derived connections), for tests and probes. */
  get concurrency(): Pick<AdaptiveLimit, 'limit' | 'inFlight' | 'queued'> {
    return this.transport.limit;
  }

  /**
   * A connection with the same credentials and agent to another base URL,
   * found on first use (for kcp: the virtual workspace URL, which the
   * APIExportEndpointSlice only shows once a workspace binds the export).
   * A failed lookup fails that request and is tried again on the next one.
   * The base URL must have the parent's scheme: the agent is shared.
   */
  derive(name: string, resolveServer: () => Promise<string>): Connection {
    const child = Object.create(Connection.prototype) as Connection;
    Object.assign(child, {
      name,
      metricsName: this.metricsName,
      server: undefined,
      resolveServer,
      transport: this.transport,
      requestTimeoutMs: this.requestTimeoutMs,
      limited: this.limited,
      fenced: this.fenced,
    });
    return child;
  }

  /**
   * This connection, but its requests skip the concurrency limit and its
   * pauses: for the leader's Lease, which must be renewed within the renew
   * deadline even while the cluster's other requests wait out a Retry-After
   * (the API server's priority and fairness gives leases their own priority
   * level for the same reason). Its answers do not move the limit, and the
   * write fence does not hold it back (the lease write is what keeps it open).
   */
  unlimited(): Connection {
    const child = Object.create(Connection.prototype) as Connection;
    Object.assign(child, this, { limited: false, fenced: false });
    return child;
  }

  /**
   * This connection, but the write fence does not hold its writes back: for Kubernetes Events on
   * primaries, which a term that ended may still write (they change nothing a holder owns).
   */
  unfenced(): Connection {
    const child = Object.create(Connection.prototype) as Connection;
    Object.assign(child, this, { fenced: false });
    return child;
  }

  /** The base URL, once known. */
  get baseUrl(): string | undefined {
    return this.server;
  }

  /** Sends one request and parses the JSON answer; non-2xx answers throw ApiError. */
  async request<T = unknown>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    if (this.transport.readOnly && method !== 'GET') throw new Error(`${method} ${path}: not sent (a read-only run)`);
    for (let attempt = 0; ; attempt++) {
      const slot = this.limited ? await this.transport.limit.acquire(options.signal) : undefined;
      let status: number;
      let text: string;
      let retryAfter: number | undefined;
      const sent = this.transport.clock.now();
      try {
        const res = await this.open(method, path, options, this.requestTimeoutMs);
        status = res.statusCode ?? 0;
        retryAfter = retryAfterHeader(res);
        try {
          const ok = status >= 200 && status < 300;
          text = await readBody(res, ok ? (options.maxBytes ?? MAX_ANSWER_BYTES) : MAX_ERROR_BYTES, method, path, !ok);
        } finally {
          // Counted also when the answer was dropped for its size: the API server did the work.
          this.observer?.(this.metricsName, method, status, (this.transport.clock.now() - sent) / 1000);
        }
        if (slot) tellLimit(slot, status, retryAfter);
      } finally {
        // No answer (a reset, a timeout, an abort): the slot is freed and the limit left as it was.
        slot?.release();
      }
      // A 429 is not retried here: the caller (the work queue) retries no sooner than Retry-After,
      // and the limit above keeps the cluster's other requests back meanwhile.
      if (status === 401 && attempt === 0) {
        // Expired or rotated credentials: apply them afresh and try once more.
        this.transport.credentials.invalidate();
        continue;
      }
      // An error's answer is read as a Status (up to MAX_ERROR_BYTES): a tenant's API server that
      // answers every GET of a wildcard's thousand names with 64 KiB is parsed at its turns, in its lane.
      if ((status < 200 || status >= 300) && method === 'GET') await heavyTurns.turn(text.length, this.name);
      if (options.absentAs !== undefined && answersObjectNotFound(status, text, options.absentAs)) return undefined as T;
      if (status < 200 || status >= 300) throw new ApiError(method, path, status, text, retryAfter);
      // Undefined says "absent" to a read that takes a NotFound so: an empty answer is not that.
      if (!text && options.absentAs !== undefined) throw new Error(`${method} ${path}: an empty answer from ${this.name}`);
      if (!text) return undefined as T;
      // A large answer is parsed (and its caller goes on) at its turn on the event loop, in this
      // cluster's lane (heavy-turns.ts). Not an answer to a write: while one of relsync's own writes
      // is under way, the events of its object wait for its answer (cache/own-writes.ts), holding
      // their watch (on kcp, or the service cluster's copies: every tenant's), and a turn behind a
      // lane that a tenant keeps busy would hold it for as long.
      if (method === 'GET') await heavyTurns.turn(text.length, this.name);
      const maxParsed = options.maxParsedBytes ?? this.transport.maxParsedBytes;
      if (options.readText) return options.readText(text, maxParsed) as T;
      const budget = options.holdParsed && this.transport.parseBudget;
      // A held answer is charged what its text says, whatever its length: every page's share counts.
      const said = budget ? parsedBytesAtMost(text) : parsedBytesOver(text, maxParsed);
      if (said !== undefined && said > maxParsed) throw new AnswerTooCostlyError(method, path, Buffer.byteLength(text), said, maxParsed);
      if (!budget || said === undefined) return parseAnswer<T>(text, method, path);
      // Taken before JSON.parse and given back by the caller once it lets the parsed answer go, not
      // when JSON.parse returns: JSON.parse runs to its end without yielding, so a budget given
      // back there would never be held by two answers at once and would bound nothing. What takes
      // the heap is the parsed answer while its caller hands it on.
      const release = await budget.take(said, options.signal);
      try {
        const answer = parseAnswer<T>(text, method, path);
        options.holdParsed!(release);
        return answer;
      } catch (err) {
        release();
        throw err;
      }
    }
  }

  /** Opens a streaming request (a watch); the caller reads and closes the response. */
  async stream(path: string, options: RequestOptions): Promise<http.IncomingMessage> {
    for (let attempt = 0; ; attempt++) {
      const res = await this.open('GET', path, options, 0);
      const status = res.statusCode ?? 0;
      this.observer?.(this.metricsName, 'WATCH', status);
      if (status === 401 && attempt === 0) {
        res.resume();
        this.transport.credentials.invalidate();
        continue;
      }
      if (status < 200 || status >= 300) throw new ApiError('GET', path, status, await readBody(res, MAX_ERROR_BYTES, 'GET', path, true), retryAfterHeader(res));
      return res;
    }
  }

  /** Closes the shared agent: this connection and every one derived from it. Requests waiting for a slot fail. */
  close(): void {
    this.transport.limit.close();
    this.transport.agent.destroy();
  }

  private async open(method: string, path: string, options: RequestOptions, timeoutMs: number): Promise<http.IncomingMessage> {
    const { headers: auth, tls } = await this.transport.credentials.current();
    this.server ??= (await this.resolveServer()).replace(/\/+$/, '');
    const url = new URL(this.server + path);
    // After every wait (a slot, credentials, the server's URL), and again once the request has its socket (below).
    const fence = method !== 'GET' && this.fenced ? this.transport.writeFence : undefined;
    const refused = (why: string) => new FencedWriteError(`${method} ${path}: not sent to ${this.name}: ${why}`);
    const fenced = fence?.(method, path);
    if (fenced !== undefined) throw refused(fenced);
    for (const [key, value] of Object.entries(options.query ?? {})) {
      if (value !== undefined) url.searchParams.set(key, String(value));
    }
    // A tenant's object sent back (a finalizer, a status) may be nested deeper than JSON.stringify goes.
    const body = options.body === undefined ? undefined : jsonText(options.body);
    const headers: Record<string, string> = { Accept: options.accept ?? 'application/json', ...auth };
    if (body !== undefined) {
      headers['Content-Type'] = options.contentType ?? 'application/json';
      headers['Content-Length'] = String(Buffer.byteLength(body));
    }
    const transport = url.protocol === 'https:' ? https : http;
    return new Promise((resolve, reject) => {
      let answer: http.IncomingMessage | undefined;
      const req = transport.request(
        url,
        {
          method,
          headers,
          agent: this.transport.agent,
          ca: tls.ca,
          cert: tls.cert,
          key: tls.key,
          rejectUnauthorized: tls.rejectUnauthorized,
          servername: tls.servername,
          signal: options.signal,
        },
        (res) => resolve((answer = res)),
      );
      if (timeoutMs > 0) {
        // eslint-disable-next-line no-restricted-syntax -- the socket's idle timeout: Node times the socket's silence, which no Clock sees
        req.setTimeout(timeoutMs, () => req.destroy(new Error(`${method} ${path}: no answer from ${this.name} within ${timeoutMs} ms`)));
        // Idle time alone lets an answer trickled a byte at a time hold the request for ever (a
        // platform's API server may be the tenant's): the whole answer has a deadline too.
        const totalMs = timeoutMs * TOTAL_TIMEOUT_FACTOR;
        const deadline = this.transport.clock.after(totalMs, () => (answer ?? req).destroy(new Error(`${method} ${path}: no complete answer from ${this.name} within ${totalMs} ms`)));
        req.once('close', () => deadline.cancel());
      }
      req.on('error', reject);
      if (!fence) return void req.end(body);
      // Nothing is sent before end(): a write that waited in the agent's queue for a socket, or for a new one to connect, asks the fence again first.
      req.once('socket', (socket) => {
        const send = () => {
          const why = fence(method, path);
          if (why === undefined) req.end(body);
          else req.destroy(refused(why));
        };
        if (socket.connecting) socket.once('connect', send);
        else send();
      });
    });
  }
}

function parseAnswer<T>(text: string, method: string, path: string): T {
  try {
    return JSON.parse(text) as T;
  } catch {
    // JSON.parse's message quotes the text, which may hold an object's data
    throw new Error(`${method} ${path}: the answer (${Buffer.byteLength(text)} bytes) is not JSON`);
  }
}

/** What an answer says about the API server's load: 429, or 503 with Retry-After, is throttling; another 5xx, nothing. */
function tellLimit(slot: Slot, status: number, retryAfter: number | undefined): void {
  if (status === 429 || (status === 503 && retryAfter !== undefined)) slot.throttled(retryAfter);
  else if (status < 500) slot.answered();
}

/** The Retry-After header in seconds (429, 503), when it is a number. */
function retryAfterHeader(res: http.IncomingMessage): number | undefined {
  const value = Number(res.headers['retry-after']);
  return Number.isFinite(value) && value >= 0 ? value : undefined;
}

/**
 * The most of an answer relsync reads without a size the caller chose (a GET, an apply, a LIST of
 * one, a discovery document of one group): an object is at most ~1.5 MiB in etcd (~2 MiB as JSON,
 * a Secret's values in base64), a group's discovery document a few KiB. A platform's API server is
 * the tenant's to run on some installations: it may answer every GET with as much as this, so it
 * bounds what a reconcile holds (workers × this, as text and parsed), not only what is sane.
 */
export const MAX_ANSWER_BYTES = 8 * 1024 * 1024;
/**
 * The most heap one answer may take once parsed (told before parsing, util/heap-size.ts), unless
 * limits.parsedBytes says otherwise. Enough
 * for any object a kube-apiserver stores (at most 1.5 MiB in etcd: 1.5 MiB of `[]` says ~66 MiB),
 * while an 8 MiB answer of a tenant's own API server parses to at most this, not the ~230 MiB its
 * worst shapes take.
 */
export const MAX_PARSED_BYTES = 72 * 1024 * 1024;
/** The most of an error answer kept: its Status message is what is read of it; the rest is dropped. */
export const MAX_ERROR_BYTES = 64 * 1024;
/** A request (not a watch) and its whole answer take at most this many times its idle timeout. */
export const TOTAL_TIMEOUT_FACTOR = 4;

/**
 * The answer as text. The chunks stay Buffers (outside the JavaScript heap's
 * limit) until one toString. An answer that grows past `maxBytes` is dropped
 * (AnswerTooLargeError) before it is held whole; an error answer (`truncate`)
 * is cut there instead, and the connection closed.
 */
function readBody(res: http.IncomingMessage, maxBytes = MAX_ANSWER_BYTES, method = 'GET', path = '', truncate = false): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let bytes = 0;
    res.on('data', (c: Buffer) => {
      bytes += c.length;
      if (bytes > maxBytes && truncate) {
        chunks.push(c.subarray(0, c.length - (bytes - maxBytes)));
        res.destroy();
        resolve(Buffer.concat(chunks).toString('utf8'));
        return;
      }
      if (bytes > maxBytes) {
        chunks.length = 0;
        res.destroy();
        reject(new AnswerTooLargeError(method, path, maxBytes));
        return;
      }
      chunks.push(c);
    });
    res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    res.on('error', reject);
    // Cut before its end (the request's deadline destroyed it): no answer.
    res.on('close', () => {
      if (!res.complete) reject(new Error(`${method} ${path}: the answer was cut before its end`));
    });
  });
}
