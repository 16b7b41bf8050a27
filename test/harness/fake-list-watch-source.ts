/**
 * One resource type's API as the list/watch loop sees it (its
 * ListWatchSource port), for unit tests on a fake clock: a one-page LIST at
 * resourceVersion 10 (held back while `listHeld` is pending), and watches
 * that open, hang, fail or answer 410 Gone (once) as `mode` says.
 */
import { ApiError } from '../../src/kube/api-error.js';
import type { ListWatchSource } from '../../src/kube/list-watch.js';
import type { ListPage, WatchRequest, WatchStream } from '../../src/kube/resource-client.js';
import type { ResourceType } from '../../src/core/resource-type.js';

export const configMaps: ResourceType = { group: '', version: 'v1', resource: 'configmaps', kind: 'ConfigMap', namespaced: true };

/** A watch answer: lines pushed by the test; the request's signal ends it as an aborted HTTP response does. */
export class FakeStream implements WatchStream {
  private readonly lines: string[] = [];
  private wake: (() => void) | undefined;
  private closed = false;
  private ended = false;

  constructor(private readonly signal: AbortSignal) {
    signal.addEventListener('abort', () => this.wake?.());
  }

  push(type: string, name: string, resourceVersion: string, labels?: Record<string, string>): void {
    this.lines.push(JSON.stringify({ type, object: { metadata: { name, namespace: 'team', resourceVersion, ...(labels ? { labels } : {}) } } }));
    this.wake?.();
  }

  /** A line as it is, e.g. an event too costly to parse. */
  pushLine(line: string): void {
    this.lines.push(line);
    this.wake?.();
  }

  /** The server ends the watch (its timeout): the answer ends without an error. */
  end(): void {
    this.ended = true;
    this.wake?.();
  }

  close(): void {
    this.closed = true;
    this.wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<string> {
    for (;;) {
      if (this.signal.aborted || this.closed) throw new Error('aborted');
      const line = this.lines.shift();
      if (line !== undefined) {
        yield line;
        continue;
      }
      if (this.ended) return;
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
  }
}

export class FakeApi implements ListWatchSource {
  readonly connection: { readonly name: string };
  lists = 0;
  readonly watches: WatchRequest[] = [];
  readonly streams: FakeStream[] = [];
  /**
   * What a watch request gets: an open stream, no answer at all, an error, or 410 Gone (then `mode`
   * is 'open' again; 'always-gone': every time); 'empty': a stream that ends at once; 'one-line': one
   * that ends after a bookmark; 'garbage': one whose first line does not parse; 'forbidden': LISTs answer 403.
   */
  mode: 'open' | 'hang' | 'down' | 'gone' | 'always-gone' | 'empty' | 'one-line' | 'garbage' | 'forbidden' = 'open';
  /** While set, a LIST's page is answered only once this resolves (a slow or stalled LIST). */
  listHeld: Promise<void> | undefined;

  constructor(name = 'fake', readonly type: ResourceType = configMaps) {
    this.connection = { name };
  }

  path(): string {
    return `/api/v1/${this.type.resource}`;
  }

  async *pages(): AsyncGenerator<ListPage> {
    this.lists++;
    await this.listHeld;
    if (this.mode === 'down') throw new ApiError('GET', this.path(), 503, 'unavailable');
    if (this.mode === 'forbidden') throw new ApiError('GET', this.path(), 403, JSON.stringify({ kind: 'Status', reason: 'Forbidden', message: 'configmaps is forbidden' }));
    yield { items: [], resourceVersion: '10', continueToken: undefined };
  }

  watch(request: WatchRequest): Promise<WatchStream> {
    this.watches.push(request);
    if (this.mode === 'down') return Promise.reject(new ApiError('GET', this.path(), 503, 'unavailable'));
    if (this.mode === 'gone' || this.mode === 'always-gone') {
      if (this.mode === 'gone') this.mode = 'open';
      return Promise.reject(new ApiError('GET', this.path(), 410, 'too old resource version'));
    }
    if (this.mode === 'hang') return new Promise((_, reject) => request.signal.addEventListener('abort', () => reject(new Error('aborted'))));
    const stream = new FakeStream(request.signal);
    this.streams.push(stream);
    if (this.mode === 'one-line') stream.push('BOOKMARK', '', '10');
    if (this.mode === 'empty' || this.mode === 'one-line') stream.end();
    if (this.mode === 'garbage') stream.pushLine('{"type":"ADDED","object":');
    return Promise.resolve(stream);
  }

  get stream(): FakeStream {
    return this.streams.at(-1)!;
  }
}

/** A promise and the function that resolves it. */
export function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}
