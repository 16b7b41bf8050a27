/**
 * relsync's own list/watch loop for one (cluster, resource type, label
 * selector). client-node's informer cannot resume from a stored
 * resourceVersion and stops for good on most errors, so this loop:
 *
 * - lists in pages sized by bytes and hands each page on as it arrives, then
 *   the list's end (the consumer diffs what it saw against the store: objects
 *   gone while nobody watched become deletions), so that a list is never held
 *   whole; then watches from the list's resourceVersion;
 * - can start from a checkpointed resourceVersion instead of listing;
 * - asks for bookmarks and a server-side timeout, and reconnects when nothing,
 *   not even a bookmark, arrived within the watchdog period;
 * - relists on 410 Gone, whether it comes as an HTTP status or as an ERROR
 *   event inside the stream;
 * - refuses alone an object whose LIST page or event line is too costly to
 *   parse (limits.parsedBytes): named by its metadata, handed on as refused,
 *   and the list or watch goes on past it;
 * - backs off with jitter on every error (a failed request, or a handler that
 *   threw: the list is taken again), and never lets an exception thrown by a
 *   handler end the loop. The callbacks onReconnect/onRelist/onFirstSync must
 *   not throw: if one does, the loop ends, and problem() reports the watch dead;
 * - says once when it first holds the current state (onFirstSync: an
 *   informer's HasSynced), so that readers can wait for it; relists do not
 *   say it again. A LIST the API server forbids says it too: that watch will
 *   hold nothing until its permissions change, and readers that waited for
 *   it would wait in silence, while a reconcile reading live says what it
 *   may not read.
 *
 * Emits events only; never writes to a cluster.
 */
import type { Logger } from 'pino';
import { isForbidden, isGone, ApiError } from './api-error.js';
import { MAX_PARSED_BYTES } from './connection.js';
import { parsedBytesAtMost, parsedBytesOver } from '../util/heap-size.js';
import { HEAVY_BYTES, heavyTurns } from '../util/heavy-turns.js';
import type { KubeObject, WatchEvent } from '../core/object.js';
import type { ListPage, WatchRequest, WatchStream } from './resource-client.js';
import { changeHead, deletedObject, watchEventHead, type DeletedObject } from './watch-event-head.js';
import { apiVersionOf, typeName, type ResourceType } from '../core/resource-type.js';
import type { ByteBudget } from '../util/byte-budget.js';
import { Backoff } from '../util/backoff.js';
import { systemClock, type Clock, type Timer } from '../util/clock.js';
import { onAbort } from '../util/on-abort.js';

export type ChangeType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface WatchHandler {
  /**
   * One change, in the order the server sent it. `ownChecked`: ownWrite() was asked of it already
   * and said no (it need not be asked again).
   */
  onEvent(type: ChangeType, object: KubeObject, ownChecked?: boolean): Promise<void>;
  /**
   * Asked before a change of HEAVY_BYTES or more is parsed, with its type and identity read off the
   * line without parsing the content (watch-event-head.ts changeHead): true when it is relsync's own write and
   * the handler has taken it as such, so that its content is never parsed; false to have it parsed
   * and handed to onEvent as any other. Without it, every change is parsed.
   */
  ownWrite?(type: ChangeType, object: KubeObject): Promise<boolean>;
  /** A LIST begins (the initial one, or a relist): its pages go to the sink, in order, then its end. */
  beginList(): ListSink;
  /** Called with the newest resourceVersion seen, for checkpoints. */
  onResourceVersion?(resourceVersion: string): void;
  /**
   * A change of an object whose event was too costly to parse: `object` is its metadata only. It
   * exists (unless `type` is DELETED) but was not read: nothing may be decided on what it holds.
   * Without it, such an event is skipped.
   */
  onRefused?(type: ChangeType, object: KubeObject): Promise<void>;
}

/** Where the pages of one complete LIST go. */
export interface ListSink {
  /** `refused`: objects of this page that exist but were not read (their identity only, RefusedObject): not gone. */
  page(items: readonly KubeObject[], refused: readonly KubeObject[]): Promise<void>;
  /** Every page was handed over: the list is complete. */
  end(): Promise<void>;
  /**
   * The list failed before its end: what its pages delivered is not the current state, and no
   * watch keeps it current until the next list (whatever kept it must let it go).
   */
  abort?(): void;
}

/**
 * For types whose whole list is small: collects the pages and hands over the list at its end. A
 * list with an object refused is not whole: it fails (and is taken again), rather than
 * tell its handler that the object is gone.
 */
export function wholeList(onList: (items: KubeObject[]) => Promise<void>): ListSink {
  const items: KubeObject[] = [];
  return {
    page: async (page, refused) => {
      if (refused.length > 0) throw new Error(`${refused.length} object(s) too costly to read: the whole list is not known`);
      items.push(...page);
    },
    end: () => onList(items),
  };
}

/**
 * What the loop asks of one resource type's API (a ResourceClient in
 * production, a fake in unit tests): its LIST pages and its WATCH lines.
 */
export interface ListWatchSource {
  readonly connection: { readonly name: string };
  readonly type: ResourceType;
  path(): string;
  pages(options: { readonly labelSelector?: string | undefined }): AsyncIterable<ListPage>;
  watch(request: WatchRequest): Promise<WatchStream>;
}

export interface ListWatchOptions {
  readonly client: ListWatchSource;
  readonly handler: WatchHandler;
  readonly logger: Logger;
  readonly labelSelector?: string | undefined;
  /** Resume from this resourceVersion instead of listing first. */
  readonly resumeFrom?: string | undefined;
  /** Server-side watch timeout; default 300 s. */
  readonly timeoutSeconds?: number;
  /** Reconnect when the stream was silent this long; default timeoutSeconds + 30 s. */
  readonly watchdogMs?: number;
  readonly onReconnect?: (reason: string) => void;
  readonly onRelist?: () => void;
  /**
   * Called once, when the loop first holds the current state: its first LIST was handed over
   * (sink.end() returned), or, resumed from a checkpoint, at once: what a LIST would rebuild is
   * in the store already, and what changed since arrives as events (a resumed watch's request
   * can also stay unanswered until the watchdog, seen on a filtered watch after a restart). Never again:
   * not for a relist, also not when the server answers a checkpoint it no longer has with a 410
   * inside the stream it just opened (then the relist routes what changed, as any relist does).
   */
  readonly onFirstSync?: () => void;
  /** How long a first LIST may keep failing (not forbidden: that says it at once) before onFirstSync is said anyway, readers then reading live; default 2 minutes. */
  readonly firstListGraceMs?: number;
  /** How long requests may keep failing before the loop counts as not synced; default 10 s. */
  readonly failureGraceMs?: number;
  /** How long the loop may make no progress at all before it counts as stuck (liveness); default watchdog + 60 s. */
  readonly stuckAfterMs?: number;
  /** Time for the watchdog, retry delays, `synced` and problem(); default the system's. */
  readonly clock?: Clock;
  /** limits.parsedBytes: an event line that would take more heap once parsed is refused; default MAX_PARSED_BYTES. */
  readonly maxParsedBytes?: number;
  /**
   * limits.parsedBytesInFlight, shared by the process's watches and LIST pages: an event takes what
   * its line says from before it is parsed until its handler returned. The handler must not wait
   * for this budget itself (a LIST page, say) while it holds it.
   */
  readonly parseBudget?: Pick<ByteBudget, 'take'>;
  /**
   * A DELETED event's object is read as its apiVersion, kind and metadata only (its content scanned,
   * not parsed: watch-event-head.ts deletedObject): for handlers that route a deletion by metadata.
   */
  readonly deletedAsMetadata?: boolean;
  /** Told of each object a LIST or an event refused (its page or line too costly to read), after the log line that names it. */
  readonly onRefused?: () => void;
}

export class ListWatch {
  private resourceVersion: string | undefined;
  private syncedOnce = false;
  private firstSyncSaid = false;
  /** When the loop's requests began to fail; undefined while a stream is open. */
  private failingSince: number | undefined;
  private readonly backoff = new Backoff({ initialMs: 500, maxMs: 30_000 });
  /** When the last 410 Gone was met (clock.now()). */
  private goneAt: number | undefined;
  /** When the loop last did anything: a page, a line (a bookmark too), a failed request, a retry. */
  private lastProgressAt: number;
  /** 'idle' before start(), 'running', 'stopped' (its signal aborted) or 'ended' (it returned without being stopped). */
  private state: 'idle' | 'running' | 'stopped' | 'ended' = 'idle';

  private readonly clock: Clock;

  constructor(private readonly options: ListWatchOptions) {
    this.resourceVersion = options.resumeFrom;
    this.clock = options.clock ?? systemClock;
    this.lastProgressAt = this.clock.now();
  }

  /** True when this loop started from a checkpoint instead of a LIST. */
  get resumed(): boolean {
    return this.options.resumeFrom !== undefined;
  }

  get name(): string {
    const { client, labelSelector } = this.options;
    return `${client.connection.name}/${typeName(client.type)}${labelSelector ? `?${labelSelector}` : ''}`;
  }

  /**
   * True once a LIST (or a resumed watch) delivered the current state, and
   * while the loop has not been failing for longer than a grace period. One
   * failed request (a reconnect that is retried at once and resumes from the
   * last resourceVersion, losing nothing) does not make the loop unsynced.
   */
  get synced(): boolean {
    return this.syncedOnce && (this.failingSince === undefined || this.clock.now() - this.failingSince < (this.options.failureGraceMs ?? 10_000));
  }

  /**
   * Why the loop is dead (it ended though nobody stopped it) or stuck (no
   * progress at all for longer than stuckAfterMs: a handler that never
   * returns, a stream that neither delivers nor fails), for the liveness
   * probe; undefined while it works. An API server that is down is not a
   * reason: the loop retries (progress), and a restart would not help.
   */
  problem(): string | undefined {
    if (this.state === 'ended') return `watch ${this.name} has stopped`;
    if (this.state !== 'running') return undefined;
    const silentMs = this.clock.now() - this.lastProgressAt;
    const limitMs = this.options.stuckAfterMs ?? this.watchdogMs() + 60_000;
    return silentMs > limitMs ? `watch ${this.name} made no progress for ${Math.round(silentMs / 1000)} s` : undefined;
  }

  /** Runs until `signal` aborts. */
  async start(signal: AbortSignal): Promise<void> {
    this.state = 'running';
    this.lastProgressAt = this.clock.now();
    try {
      await this.loop(signal);
    } finally {
      this.state = signal.aborted ? 'stopped' : 'ended';
    }
  }

  private progress(): void {
    this.lastProgressAt = this.clock.now();
  }

  private watchdogMs(): number {
    return this.options.watchdogMs ?? ((this.options.timeoutSeconds ?? 300) + 30) * 1000;
  }

  private async loop(signal: AbortSignal): Promise<void> {
    const { logger } = this.options;
    if (this.resourceVersion !== undefined) this.firstSync();
    while (!signal.aborted) {
      this.progress();
      try {
        if (this.resourceVersion === undefined) await this.list(signal);
        // Stopped during the LIST: no watch (its request would not see an abort that came before it).
        if (signal.aborted) break;
        const opened = this.clock.now();
        const watched = await this.watch(signal);
        if (signal.aborted) break;
        const lasted = this.clock.now() - opened;
        if (watched.reopen || (watched.lines === 0 && lasted < SHORT_WATCH_MS)) {
          // A server that ends every watch at once, or answers a line that does not parse (a
          // tenant's own can), is not reconnected to in a loop: the backoff grows until a watch lasts.
          const delay = this.backoff.next();
          logger.warn({ watch: this.name, retryInMs: delay, lines: watched.lines, ...(watched.reopen ? { unparsable: true } : {}) }, watched.reopen ? 'the watch sent a line that does not parse; reconnecting after a backoff' : 'the watch ended at once without a line; reconnecting after a backoff');
          this.options.onReconnect?.(watched.reopen ? 'unparsable' : 'short');
          await this.clock.sleep(delay, signal);
          continue;
        }
        this.backoff.reset();
        // At most one watch a second whatever the server does: one that sends a line and ends at once is opened again a second after.
        if (lasted < SHORT_WATCH_MS) await this.clock.sleep(SHORT_WATCH_MS - lasted, signal);
      } catch (err) {
        if (signal.aborted) break;
        if (isGone(err)) {
          this.resourceVersion = undefined;
          this.options.onRelist?.();
          // Relisted at once, unless the last 410 came moments ago: a server that answers every
          // watch with 410 Gone (a tenant's own) is answered with the backoff, not a LIST in a loop.
          // Moments after the relist began, not after the last 410: a backoff that grew past
          // GONE_AGAIN_MS would otherwise make the next 410 look like the first, and relist at once.
          const again = this.goneAt !== undefined && this.clock.now() - this.goneAt < GONE_AGAIN_MS;
          const delay = again ? this.backoff.next() : 0;
          logger.info({ watch: this.name, ...(again ? { retryInMs: delay } : {}) }, 'resourceVersion expired (410 Gone); relisting');
          if (again) await this.clock.sleep(delay, signal);
          this.goneAt = this.clock.now();
          continue;
        }
        this.failingSince ??= this.clock.now();
        this.progress();
        if (isForbidden(err)) this.firstSync();
        else if (!this.firstSyncSaid && this.clock.now() - this.failingSince >= (this.options.firstListGraceMs ?? 120_000)) {
          // Readers would wait for a LIST that keeps failing (a type the cluster does not serve, an
          // outage) with nothing to show for it: after a grace period (controller-runtime's cache sync
          // timeout is as long) they go on reading live, and say what fails.
          logger.warn({ watch: this.name, failingForMs: this.clock.now() - this.failingSince }, 'the first LIST keeps failing; what waited for it goes on and reads from the API server');
          this.firstSync();
        }
        const delay = this.backoff.next();
        logger.warn({ watch: this.name, err: errorText(err), retryInMs: delay }, 'list/watch failed; retrying');
        this.options.onReconnect?.('error');
        await this.clock.sleep(delay, signal);
      }
    }
  }

  private async list(signal: AbortSignal): Promise<void> {
    const { client, labelSelector, handler, logger } = this.options;
    const sink = handler.beginList();
    let resourceVersion = '';
    // A failed request ends the list here (and start() retries or relists); a failed handler too, after its log.
    try {
      for await (const page of client.pages({ labelSelector })) {
        if (signal.aborted) return;
        this.progress();
        for (const r of page.refused ?? []) this.refused('LIST', r.object, r.why);
        const unread = page.refused?.map((r) => r.object) ?? [];
        if (!(await guard(logger, this.name, 'list handler', () => sink.page(page.items, unread)))) throw new Error('the list handler failed; listing again');
        resourceVersion = page.resourceVersion || resourceVersion;
      }
    } catch (err) {
      sink.abort?.();
      throw err;
    }
    if (signal.aborted) return;
    if (!(await guard(logger, this.name, 'list handler', () => sink.end()))) {
      sink.abort?.();
      throw new Error('the list handler failed; listing again');
    }
    this.resourceVersion = resourceVersion;
    handler.onResourceVersion?.(resourceVersion);
    this.firstSync();
  }

  /** Says which object was not read, and why. */
  private refused(change: string, object: KubeObject, why: string): void {
    const { namespace, name } = object.metadata;
    this.options.logger.warn({ watch: this.name, change, object: namespace ? `${namespace}/${name ?? ''}` : name, err: why }, 'an object is too costly to read: it is refused alone (its changes are not synced, and what needs its content fails, until it is smaller); the rest of its type goes on');
    this.options.onRefused?.();
  }

  private firstSync(): void {
    if (this.firstSyncSaid) return;
    this.firstSyncSaid = true;
    this.options.onFirstSync?.();
  }

  /**
   * One line of a watch stream: relsync's own write (not parsed), refused when too costly to read,
   * or parsed and handed to the handler; 'reopen' when it does not parse (the stream is opened
   * again). Throws on an ERROR event and when the handler fails (a relist follows).
   */
  private async handleLine(line: string, signal: AbortSignal): Promise<'next' | 'reopen'> {
    const { client, handler, logger } = this.options;
    const maxParsed = this.options.maxParsedBytes ?? MAX_PARSED_BYTES;
    const own = await this.ownWrite(line);
    if (own === true) return 'next';
    // A heavy deletion is read by its metadata; a light one is parsed as it always was.
    const deleted = this.options.deletedAsMetadata && line.length >= HEAVY_BYTES ? deletedObject(line) : undefined;
    // The same bound as an answer's (connection.ts): a line of many tiny values parses to ~30
    // times its length. With a budget, every line is charged what it says (a deletion, what
    // its metadata says: the rest is not parsed).
    const parsed = deleted?.metadataText ?? line;
    const said = this.options.parseBudget ? parsedBytesAtMost(parsed) : parsedBytesOver(parsed, maxParsed);
    if (said !== undefined && said > maxParsed) {
      await this.refuseLine(line, said, maxParsed);
      return 'next';
    }
    const release = this.options.parseBudget && said !== undefined ? await this.options.parseBudget.take(said, signal) : undefined;
    try {
      let event: WatchEvent;
      try {
        event = deleted ? { type: 'DELETED', object: deletedRead(deleted) } : (JSON.parse(line) as WatchEvent);
      } catch {
        // Its text is not logged: it may hold an object's data.
        logger.warn({ watch: this.name, bytes: Buffer.byteLength(line) }, 'unparsable watch line; reconnecting');
        return 'reopen';
      }
      if (event.type === 'ERROR') {
        const status = event.object as unknown as { code?: number; message?: string };
        throw new ApiError('WATCH', client.path(), status.code ?? 500, JSON.stringify(status));
      }
      const rv = event.object.metadata?.resourceVersion;
      if (event.type !== 'BOOKMARK') {
        const object = event.object;
        object.apiVersion ??= apiVersionOf(client.type);
        object.kind ??= client.type.kind;
        if (!(await guard(logger, this.name, 'event handler', () => handler.onEvent(event.type as ChangeType, object, own === false)))) {
          // The event is not lost: a relist routes the difference between the cluster and the store.
          this.resourceVersion = undefined;
          throw new Error('the event handler failed; relisting so that its event is not lost');
        }
      }
      this.advance(rv);
    } finally {
      // The handler is done with the event: what it keeps (the cache's copy) is bounded elsewhere.
      release?.();
    }
    return 'next';
  }

  /** One watch request, until its stream ends: the lines it handled, and whether it ended on one that does not parse. */
  private async watch(signal: AbortSignal): Promise<{ readonly lines: number; readonly reopen: boolean }> {
    const { client, labelSelector, logger } = this.options;
    const timeoutSeconds = this.options.timeoutSeconds ?? 300;
    const watchdogMs = this.watchdogMs();
    const local = new AbortController();
    const abort = () => local.abort();
    onAbort(signal, abort);
    // Jitter the server timeout so that many loops do not reconnect in step.
    const serverTimeout = Math.round(timeoutSeconds * (0.8 + Math.random() * 0.2));
    let watchdog: Timer | undefined;
    let stream: WatchStream | undefined;
    /** Lines handled since this stream's last turn on the event loop. */
    const lines = heavyTurns.meter(client.connection.name);
    let handled = 0;
    const pet = () => {
      watchdog?.cancel();
      // The stream (or the request opening it) that this timer watches keeps the process alive.
      watchdog = this.clock.after(watchdogMs, () => {
        logger.warn({ watch: this.name, silentMs: watchdogMs }, 'watch silent for too long; reconnecting');
        // A server that hangs instead of failing: the loop counts as failing until a stream opens again.
        this.failingSince ??= this.clock.now();
        this.options.onReconnect?.('watchdog');
        local.abort();
      });
    };
    try {
      pet();
      stream = await client.watch({ resourceVersion: this.resourceVersion, timeoutSeconds: serverTimeout, labelSelector, signal: local.signal });
      // The stream is open from a known resourceVersion: this loop is in sync.
      this.syncedOnce = true;
      this.firstSync();
      this.progress();
      this.failingSince = undefined;
      for await (const line of stream) {
        pet();
        this.progress();
        if (!line.trim()) continue;
        // Every 64 KiB of lines wait for a turn on the event loop, in this cluster's lane (heavy-turns.ts):
        // a burst of them, buffered while the loop was busy, does not hold another tenant's events back.
        await lines.add(line.length);
        if ((await this.handleLine(line, local.signal)) === 'reopen') return { lines: handled, reopen: true };
        handled++;
      }
      return { lines: handled, reopen: false };
    } catch (err) {
      // Stopped, or the watchdog (reconnect at once: it waited a whole idle period).
      if (local.signal.aborted) return { lines: handled, reopen: false };
      throw err;
    } finally {
      watchdog?.cancel();
      signal.removeEventListener('abort', abort);
      stream?.close();
      local.abort();
    }
  }

  /**
   * Whether a heavy change line is relsync's own write, asked before it is parsed (handler.ownWrite):
   * true when the handler took it (the loop goes on past it), false when it said no, undefined when
   * it was not asked (a light line, no such handler, a line that does not start as an API server's).
   */
  private async ownWrite(line: string): Promise<boolean | undefined> {
    const { handler, client, logger } = this.options;
    // A deletion (read by its metadata below), a bookmark or an error is no write: not scanned for one.
    if (!handler.ownWrite || line.length < HEAVY_BYTES || NOT_A_CHANGE.test(line)) return undefined;
    const head = changeHead(line);
    if (!head) return undefined;
    const object: KubeObject = { apiVersion: apiVersionOf(client.type), kind: client.type.kind, metadata: head.metadata };
    let taken = false;
    if (!(await guard(logger, this.name, 'event handler', async () => void (taken = await handler.ownWrite!(head.type as ChangeType, object))))) {
      this.resourceVersion = undefined;
      throw new Error('the event handler failed; relisting so that its event is not lost');
    }
    if (taken) this.advance(head.metadata.resourceVersion);
    return taken;
  }

  /** The watch has seen everything up to `rv`: a reconnect resumes after it. */
  private advance(rv: string | undefined): void {
    if (!rv) return;
    this.resourceVersion = rv;
    this.options.handler.onResourceVersion?.(rv);
  }

  /**
   * An event line too costly to parse. Its object is refused alone, as a LIST refuses it, and the
   * watch goes on after it: listing again would meet the same object (the LIST refuses it too), so
   * a tenant that changes it in a loop would make each change cost a LIST of the whole type (on kcp,
   * of every workspace). What it is about is read from the line without parsing the rest
   * (watch-event-head.ts); the handler is told (onRefused), so that nothing acts on what it held
   * before. A line that does not say even that (not an API server's) is answered as before: a relist.
   */
  private async refuseLine(line: string, said: number, maxParsed: number): Promise<void> {
    const { client, handler, logger } = this.options;
    const head = watchEventHead(line);
    const why = `a watch event of ${Buffer.byteLength(line)} bytes would take about ${Math.round(said / 1024 / 1024)} MiB of memory once parsed, more than ${Math.round(maxParsed / 1024 / 1024)} MiB (limits.parsedBytes)`;
    const type = head?.type;
    if (!head || (type !== 'ADDED' && type !== 'MODIFIED' && type !== 'DELETED') || !head.metadata.name) {
      this.resourceVersion = undefined;
      throw new Error(`${why}, and does not say which object it is about; relisting`);
    }
    const object: KubeObject = { apiVersion: apiVersionOf(client.type), kind: client.type.kind, metadata: head.metadata };
    this.refused(type, object, why);
    // A handler that cannot be told of a refusal would miss the change: a relist tells it what is there.
    if (!handler.onRefused) {
      this.resourceVersion = undefined;
      throw new Error(`${why}, and this watch's handler cannot be told of a refused object; relisting`);
    }
    if (!(await guard(logger, this.name, 'event handler', () => handler.onRefused!(type, object)))) {
      this.resourceVersion = undefined;
      throw new Error('the event handler failed; relisting so that its event is not lost');
    }
    this.advance(head.metadata.resourceVersion);
  }
}

/** A deletion's object; a throw (as JSON.parse's) where its metadata is not an object. */
function deletedRead(deleted: DeletedObject): KubeObject {
  const object = deleted.read();
  if (!object) throw new SyntaxError('the metadata of a deleted object is not an object');
  return object;
}

/** The start of a watch line that is no ADDED or MODIFIED event, as API servers write it. */
const NOT_A_CHANGE = /^\s*\{\s*"type"\s*:\s*"(DELETED|BOOKMARK|ERROR)"/;

/** A 410 Gone this soon after the last one waits for the backoff before the LIST. */
const GONE_AGAIN_MS = 5_000;

/**
 * A watch that ends this soon without a line is a failure, answered with the backoff (client-go's
 * reflector: "very short watch … lasted less than a second and no items received").
 */
const SHORT_WATCH_MS = 1_000;

/** Runs a handler; an exception is logged, never kills the loop, and is answered with false. */
async function guard(logger: Logger, watch: string, what: string, fn: () => Promise<void>): Promise<boolean> {
  try {
    await fn();
    return true;
  } catch (err) {
    logger.error({ watch, err: errorText(err) }, `${what} threw; the loop goes on and lists again`);
    return false;
  }
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
