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
 * - backs off with jitter on every error (a failed request, or a handler that
 *   threw: the list is taken again), and never lets an exception thrown by a
 *   handler end the loop. The callbacks onReconnect/onRelist must not throw:
 *   if one does, the loop ends, and problem() reports the watch dead.
 *
 * Emits events only; never writes to a cluster.
 */
import type { IncomingMessage } from 'node:http';
import { createInterface, type Interface } from 'node:readline';
import type { Logger } from 'pino';
import { isGone, ApiError } from './api-error.js';
import type { KubeObject, WatchEvent } from '../core/object.js';
import type { ResourceClient } from './resource-client.js';
import { typeName } from '../core/resource-type.js';
import { Backoff } from '../util/backoff.js';
import { sleep } from '../util/sleep.js';

export type ChangeType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface WatchHandler {
  /** One change, in the order the server sent it. */
  onEvent(type: ChangeType, object: KubeObject): Promise<void>;
  /** A LIST begins (the initial one, or a relist): its pages go to the sink, in order, then its end. */
  beginList(): ListSink;
  /** Called with the newest resourceVersion seen, for checkpoints. */
  onResourceVersion?(resourceVersion: string): void;
}

/** Where the pages of one complete LIST go. */
export interface ListSink {
  page(items: readonly KubeObject[]): Promise<void>;
  /** Every page was handed over: the list is complete. */
  end(): Promise<void>;
}

/** For types whose whole list is small (APIBindings): collects the pages and hands over the list at its end. */
export function wholeList(onList: (items: KubeObject[]) => Promise<void>): ListSink {
  const items: KubeObject[] = [];
  return {
    page: async (page) => void items.push(...page),
    end: () => onList(items),
  };
}

export interface ListWatchOptions {
  readonly client: ResourceClient;
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
  /** How long requests may keep failing before the loop counts as not synced; default 10 s. */
  readonly failureGraceMs?: number;
  /** How long the loop may make no progress at all before it counts as stuck (liveness); default watchdog + 60 s. */
  readonly stuckAfterMs?: number;
}

export class ListWatch {
  private resourceVersion: string | undefined;
  private syncedOnce = false;
  /** When the loop's requests began to fail; undefined while a stream is open. */
  private failingSince: number | undefined;
  private readonly backoff = new Backoff({ initialMs: 500, maxMs: 30_000 });
  /** When the loop last did anything: a page, a line (a bookmark too), a failed request, a retry. */
  private lastProgressAt = Date.now();
  /** 'idle' before start(), 'running', 'stopped' (its signal aborted) or 'ended' (it returned without being stopped). */
  private state: 'idle' | 'running' | 'stopped' | 'ended' = 'idle';

  constructor(private readonly options: ListWatchOptions) {
    this.resourceVersion = options.resumeFrom;
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
    return this.syncedOnce && (this.failingSince === undefined || Date.now() - this.failingSince < (this.options.failureGraceMs ?? 10_000));
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
    const silentMs = Date.now() - this.lastProgressAt;
    const limitMs = this.options.stuckAfterMs ?? this.watchdogMs() + 60_000;
    return silentMs > limitMs ? `watch ${this.name} made no progress for ${Math.round(silentMs / 1000)} s` : undefined;
  }

  /** Runs until `signal` aborts. */
  async start(signal: AbortSignal): Promise<void> {
    this.state = 'running';
    this.lastProgressAt = Date.now();
    try {
      await this.loop(signal);
    } finally {
      this.state = signal.aborted ? 'stopped' : 'ended';
    }
  }

  private progress(): void {
    this.lastProgressAt = Date.now();
  }

  private watchdogMs(): number {
    return this.options.watchdogMs ?? ((this.options.timeoutSeconds ?? 300) + 30) * 1000;
  }

  private async loop(signal: AbortSignal): Promise<void> {
    const { logger } = this.options;
    while (!signal.aborted) {
      this.progress();
      try {
        if (this.resourceVersion === undefined) await this.list(signal);
        await this.watch(signal);
        this.backoff.reset();
      } catch (err) {
        if (signal.aborted) break;
        if (isGone(err)) {
          logger.info({ watch: this.name }, 'resourceVersion expired (410 Gone); relisting');
          this.resourceVersion = undefined;
          this.options.onRelist?.();
          continue;
        }
        this.failingSince ??= Date.now();
        this.progress();
        const delay = this.backoff.next();
        logger.warn({ watch: this.name, err: errorText(err), retryInMs: delay }, 'list/watch failed; retrying');
        this.options.onReconnect?.('error');
        await sleep(delay, signal);
      }
    }
  }

  private async list(signal: AbortSignal): Promise<void> {
    const { client, labelSelector, handler, logger } = this.options;
    const sink = handler.beginList();
    let resourceVersion = '';
    // A failed request ends the list here (and start() retries or relists); a failed handler too, after its log.
    for await (const page of client.pages({ labelSelector })) {
      if (signal.aborted) return;
      this.progress();
      if (!(await guard(logger, this.name, 'list handler', () => sink.page(page.items)))) throw new Error('the list handler failed; listing again');
      resourceVersion = page.resourceVersion || resourceVersion;
    }
    if (signal.aborted) return;
    if (!(await guard(logger, this.name, 'list handler', () => sink.end()))) throw new Error('the list handler failed; listing again');
    this.resourceVersion = resourceVersion;
    handler.onResourceVersion?.(resourceVersion);
  }

  private async watch(signal: AbortSignal): Promise<void> {
    const { client, labelSelector, handler, logger } = this.options;
    const timeoutSeconds = this.options.timeoutSeconds ?? 300;
    const watchdogMs = this.watchdogMs();
    const local = new AbortController();
    const abort = () => local.abort();
    signal.addEventListener('abort', abort, { once: true });
    // Jitter the server timeout so that many loops do not reconnect in step.
    const serverTimeout = Math.round(timeoutSeconds * (0.8 + Math.random() * 0.2));
    let watchdog: NodeJS.Timeout | undefined;
    let stream: { res: IncomingMessage; lines: Interface } | undefined;
    const pet = () => {
      clearTimeout(watchdog);
      watchdog = setTimeout(() => {
        logger.warn({ watch: this.name, silentMs: watchdogMs }, 'watch silent for too long; reconnecting');
        // A server that hangs instead of failing: the loop counts as failing until a stream opens again.
        this.failingSince ??= Date.now();
        this.options.onReconnect?.('watchdog');
        local.abort();
      }, watchdogMs);
    };
    try {
      pet();
      const res = await client.connection.stream(client.path(), {
        query: {
          watch: true,
          allowWatchBookmarks: true,
          resourceVersion: this.resourceVersion,
          timeoutSeconds: serverTimeout,
          labelSelector,
        },
        signal: local.signal,
      });
      // The stream is open from a known resourceVersion: this loop is in sync.
      this.syncedOnce = true;
      this.progress();
      this.failingSince = undefined;
      const lines = createInterface({ input: res, crlfDelay: Infinity });
      // Errors of an aborted stream surface through the iterator (or not at all
      // once we stopped reading); without listeners they would crash the process.
      res.on('error', () => undefined);
      lines.on('error', () => undefined);
      stream = { res, lines };
      for await (const line of lines) {
        pet();
        this.progress();
        if (!line.trim()) continue;
        let event: WatchEvent;
        try {
          event = JSON.parse(line) as WatchEvent;
        } catch {
          // Its text is not logged: it may hold an object's data.
          logger.warn({ watch: this.name, bytes: Buffer.byteLength(line) }, 'unparsable watch line; reconnecting');
          break;
        }
        if (event.type === 'ERROR') {
          const status = event.object as unknown as { code?: number; message?: string };
          throw new ApiError('WATCH', client.path(), status.code ?? 500, JSON.stringify(status));
        }
        const rv = event.object.metadata?.resourceVersion;
        if (event.type !== 'BOOKMARK') {
          const object = event.object;
          object.apiVersion ??= client.type.group ? `${client.type.group}/${client.type.version}` : client.type.version;
          object.kind ??= client.type.kind;
          if (!(await guard(logger, this.name, 'event handler', () => handler.onEvent(event.type as ChangeType, object)))) {
            // The event is not lost: a relist routes the difference between the cluster and the store.
            this.resourceVersion = undefined;
            throw new Error('the event handler failed; relisting so that its event is not lost');
          }
        }
        if (rv) {
          this.resourceVersion = rv;
          handler.onResourceVersion?.(rv);
        }
      }
    } catch (err) {
      if (local.signal.aborted && !signal.aborted) return; // watchdog: reconnect at once
      if (signal.aborted) return;
      throw err;
    } finally {
      clearTimeout(watchdog);
      signal.removeEventListener('abort', abort);
      stream?.lines.close();
      stream?.res.destroy();
      local.abort();
    }
  }
}

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
