// The adaptive concurrency limit in Connection's real request path, against a
// local HTTP server and a fake clock for the pauses: a 429 still fails its
// caller (the work queue retries it) and holds back the cluster's next
// requests, through derived connections too, until Retry-After; a 503 cuts
// only with Retry-After; the leader's unlimited() connection and watches are
// not held back; no slot is lost to a reset, a timeout, an oversized answer
// or an abort. The limit's decisions alone: adaptive-limit.test.ts.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import { ApiError } from '../../../src/kube/api-error.js';
import { AnswerTooCostlyError, AnswerTooLargeError, Connection, MAX_ANSWER_BYTES } from '../../../src/kube/connection.js';
import { FakeClock, settle } from '../../harness/fake-clock.js';

/** What the server does with the next request to a path; default: 200 `{}`. */
type Answer = { status: number; retryAfter?: number } | 'reset' | 'hang' | 'large' | 'huge object' | 'huge error' | 'trickle' | 'many values' | 'etcd worst';

describe('connection concurrency limit', () => {
  let server: http.Server;
  let kubeconfig: string;
  const answers = new Map<string, Answer>();
  const seen: string[] = [];
  const hanging: http.ServerResponse[] = [];
  /** Bytes the trickling answers sent so far. */
  let trickled = 0;

  before(async () => {
    server = http.createServer((req, res) => {
      const path = req.url!.split('?')[0]!;
      seen.push(path);
      const answer = answers.get(path);
      if (answer === 'reset') return void req.socket.destroy();
      if (answer === 'hang') return void hanging.push(res);
      if (answer === 'large') return void res.end(JSON.stringify({ data: 'x'.repeat(10_000) }));
      // An object no etcd holds: a tenant's own API server may answer every GET so.
      if (answer === 'huge object') return void res.end(JSON.stringify({ data: 'x'.repeat(MAX_ANSWER_BYTES) }));
      // 7 MiB of empty objects: under MAX_ANSWER_BYTES, but ~150 MiB of heap once parsed.
      if (answer === 'many values') return void res.end(`[${'{},'.repeat((7 * 1024 * 1024) / 3)}{}]`);
      // The costliest object a kube-apiserver stores: 1.5 MiB (etcd's limit) of empty arrays.
      if (answer === 'etcd worst') return void res.end(`{"spec":[${'[],'.repeat((1.5 * 1024 * 1024) / 3 - 6)}[]]}`);
      // A byte at a time, never idle for long, never done.
      if (answer === 'trickle') {
        res.writeHead(200, { 'content-type': 'application/json' });
        const timer = setInterval(() => (trickled++, res.write(' ')), 20);
        res.on('close', () => clearInterval(timer));
        return;
      }
      // A 500 whose body never ends: a tenant's own API server may answer so.
      if (answer === 'huge error') {
        res.writeHead(500, { 'content-type': 'text/plain' });
        const chunk = 'e'.repeat(64 * 1024);
        const more = () => {
          while (!res.destroyed && res.write(chunk));
          if (!res.destroyed) res.once('drain', more);
        };
        res.on('close', () => undefined);
        return more();
      }
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (answer?.retryAfter !== undefined) headers['retry-after'] = String(answer.retryAfter);
      res.writeHead(answer?.status ?? 200, headers);
      res.end(JSON.stringify(answer ? { kind: 'Status', code: answer.status } : {}));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const dir = mkdtempSync(join(tmpdir(), 'relsync-connection-limit-'));
    kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(kubeconfig, JSON.stringify({
      apiVersion: 'v1', kind: 'Config', 'current-context': 'c',
      clusters: [{ name: 'c', cluster: { server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, 'insecure-skip-tls-verify': true } }],
      users: [{ name: 'u', user: { token: 't' } }],
      contexts: [{ name: 'c', context: { cluster: 'c', user: 'u' } }],
    }));
  });

  beforeEach(() => {
    answers.clear();
    seen.length = 0;
  });

  after(async () => {
    for (const res of hanging) res.destroy();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  function connect(options: { requestTimeoutMs?: number } = {}) {
    const clock = new FakeClock();
    const connection = new Connection({ name: 'c', kubeconfig, clock, ...options });
    const limits: Array<[number, boolean]> = [];
    connection.limitObserver = (_cluster, limit, throttled) => limits.push([limit, throttled]);
    return { clock, connection, limits };
  }

  it('reads at most MAX_ERROR_BYTES of an error answer that never ends, and fails with it', async () => {
    answers.set('/huge', 'huge error');
    const { connection } = connect();
    const err = await connection.request('GET', '/huge').then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof ApiError, String(err));
    assert.equal(err.statusCode, 500);
    assert.ok(err.message.length < 200 * 1024, `the error holds a bounded part of the answer (${err.message.length} characters)`);
  });

  it('gives an answer trickled a byte at a time a deadline, not only an idle timeout', async () => {
    answers.set('/trickle', 'trickle');
    // An idle timeout of 5 s, never reached (a byte every 20 ms); the whole answer's deadline, 4 × 5 s, is on the connection's clock.
    const { clock, connection } = connect({ requestTimeoutMs: 5_000 });
    trickled = 0;
    let err: Error | undefined;
    const failed = connection.request('GET', '/trickle').then(() => undefined, (e: unknown) => (err = e as Error));
    while (trickled < 3 && err === undefined) await new Promise((r) => setTimeout(r, 10));
    assert.equal(err, undefined, 'the answer is being read');
    await clock.advance(19_999);
    assert.equal(err, undefined, 'not before the deadline');
    await clock.advance(1);
    // The request's end runs on real I/O: waited for (briefly; the deadline itself is 20 s away on the real clock).
    for (let i = 0; i < 100 && err === undefined; i++) await new Promise((r) => setTimeout(r, 10));
    assert.match((err as Error | undefined)?.message ?? 'no failure', /no complete answer from c within 20000 ms/);
    await failed;
  });

  it('fails a 429 to its caller and starts no request of the cluster, derived ones included, until Retry-After', async (t) => {
    const { clock, connection, limits } = connect();
    t.after(() => connection.close());
    const child = connection.derive('c/child', () => Promise.resolve(connection.baseUrl!));
    answers.set('/throttled', { status: 429, retryAfter: 3 });
    const err = await connection.request('PUT', '/throttled', { body: {} }).catch((e: unknown) => e);
    assert.ok(err instanceof ApiError && err.statusCode === 429 && err.retryAfterSeconds === 3, 'the caller sees the 429 and its Retry-After');
    assert.deepEqual(seen, ['/throttled'], 'not retried here');
    assert.deepEqual(limits, [[32, false], [16, true]], 'told at once, then the cut');

    const next = child.request('GET', '/next');
    await settle();
    assert.equal(connection.concurrency.queued, 1, 'the derived connection waits too');
    await clock.advance(2_999);
    assert.equal(connection.concurrency.queued, 1);
    assert.deepEqual(seen, ['/throttled']);
    await clock.advance(1);
    await next;
    assert.deepEqual(seen, ['/throttled', '/next']);
    assert.equal(connection.concurrency.inFlight, 0);
  });

  it('cuts for a 503 only with Retry-After, and not for a 500', async (t) => {
    const { clock, connection } = connect();
    t.after(() => connection.close());
    answers.set('/down', { status: 503 });
    answers.set('/broken', { status: 500 });
    await assert.rejects(connection.request('GET', '/down'), ApiError);
    await assert.rejects(connection.request('GET', '/broken'), ApiError);
    assert.equal(connection.concurrency.limit, 32);
    answers.set('/down', { status: 503, retryAfter: 1 });
    await assert.rejects(connection.request('GET', '/down'), ApiError);
    assert.equal(connection.concurrency.limit, 16);
    await clock.advance(1_000);
  });

  it('does not hold back the unlimited connection (the lease) or watches during a pause', async (t) => {
    const { connection } = connect();
    t.after(() => connection.close());
    answers.set('/throttled', { status: 429, retryAfter: 30 });
    await assert.rejects(connection.request('PUT', '/throttled', { body: {} }), ApiError);
    await connection.unlimited().request('PUT', '/lease', { body: {} });
    const watch = await connection.stream('/watch', {});
    watch.destroy();
    assert.deepEqual(seen, ['/throttled', '/lease', '/watch']);
    assert.equal(connection.concurrency.limit, 16, 'their answers did not move the limit');
    assert.equal(connection.concurrency.inFlight, 0);
  });

  it('frees the slot when there is no answer: a reset, a timeout, an oversized answer, an abort', async (t) => {
    const { connection } = connect({ requestTimeoutMs: 50 });
    t.after(() => connection.close());
    answers.set('/reset', 'reset');
    answers.set('/hang', 'hang');
    answers.set('/large', 'large');
    await assert.rejects(connection.request('GET', '/reset'));
    await assert.rejects(connection.request('GET', '/hang'), /no answer from c within 50 ms/);
    await assert.rejects(connection.request('GET', '/large', { maxBytes: 100 }), AnswerTooLargeError);
    const controller = new AbortController();
    const aborted = connection.request('GET', '/hang', { signal: controller.signal });
    await settle();
    controller.abort();
    await assert.rejects(aborted);
    assert.equal(connection.concurrency.inFlight, 0, 'every slot came back');
    assert.equal(connection.concurrency.limit, 32, 'and none of them moved the limit');
  });

  it('drops an object answer past MAX_ANSWER_BYTES when the caller chose no size', async (t) => {
    const { connection } = connect();
    t.after(() => connection.close());
    answers.set('/huge', 'huge object');
    await assert.rejects(connection.request('GET', '/huge'), /GET \/huge: the answer is longer than 8388608 bytes/);
    assert.equal(connection.concurrency.inFlight, 0);
  });

  it('drops an answer that would take more than MAX_PARSED_BYTES once parsed, before parsing it', async (t) => {
    const { connection } = connect();
    t.after(() => connection.close());
    answers.set('/many', 'many values');
    const before = process.memoryUsage().heapUsed;
    const err = await connection.request('GET', '/many').then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof AnswerTooCostlyError, String(err));
    // A LIST takes it as an answer too long: it asks again for fewer objects per page.
    assert.ok(err instanceof AnswerTooLargeError);
    assert.match(err.message, /GET \/many: .* would take about \d+ MiB of memory once parsed, more than 72 MiB \(limits\.parsedBytes\): it holds too many small values/);
    // Parsed, it would have held ~150 MiB until the next collection; its text (7 MiB) is all it cost.
    assert.ok(process.memoryUsage().heapUsed - before < 64 * 1024 * 1024, `heap grew by ${process.memoryUsage().heapUsed - before} bytes`);
    assert.equal(connection.concurrency.inFlight, 0);
  });

  it('parses the costliest object a kube-apiserver can hold', async (t) => {
    const { connection } = connect();
    t.after(() => connection.close());
    answers.set('/worst', 'etcd worst');
    const object = await connection.request<{ spec: unknown[] }>('GET', '/worst');
    assert.equal(object.spec.length, (1.5 * 1024 * 1024) / 3 - 5);
  });
});
