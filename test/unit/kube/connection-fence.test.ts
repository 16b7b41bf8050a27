// The write fence in Connection's real request path, against a local HTTP
// server: a refused write never reaches the server, reads pass, the Lease's
// unlimited() connection is not held back, and the fence is asked at the last
// moment (after the waits before sending, and again once a socket is free),
// so that a term that lost its Lease while a write waited does not send it;
// Events go through an unfenced connection.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import { Connection, FencedWriteError } from '../../../src/kube/connection.js';

describe('connection write fence', () => {
  let server: http.Server;
  let kubeconfig: string;
  let url: string;
  const seen: string[] = [];

  before(async () => {
    server = http.createServer((req, res) => {
      seen.push(`${req.method} ${req.url}`);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const dir = mkdtempSync(join(tmpdir(), 'relsync-connection-fence-'));
    kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(kubeconfig, JSON.stringify({
      apiVersion: 'v1', kind: 'Config', 'current-context': 'c',
      clusters: [{ name: 'c', cluster: { server: url, 'insecure-skip-tls-verify': true } }],
      users: [{ name: 'u', user: { token: 't' } }],
      contexts: [{ name: 'c', context: { cluster: 'c', user: 'u' } }],
    }));
  });
  beforeEach(() => void (seen.length = 0));
  after(() => server.close());

  it('refuses writes the fence refuses, before they are sent; reads and the Lease connection pass', async () => {
    const connection = new Connection({ name: 'service', kubeconfig });
    const fence: { reason?: string } = {};
    connection.setWriteFence(() => fence.reason);
    await connection.request('PUT', '/api/v1/namespaces/a/configmaps/x', { body: {} });
    fence.reason = 'the Lease was lost';
    await assert.rejects(connection.request('PUT', '/api/v1/namespaces/a/configmaps/y', { body: {} }), (err: unknown) => err instanceof FencedWriteError && /the Lease was lost/.test(err.message));
    await assert.rejects(connection.request('DELETE', '/api/v1/namespaces/a/configmaps/y'), FencedWriteError);
    await connection.request('GET', '/api/v1/namespaces/a/configmaps/y');
    await connection.unlimited().request('PUT', '/apis/coordination.k8s.io/v1/namespaces/a/leases/l', { body: {} });
    assert.deepEqual(seen, ['PUT /api/v1/namespaces/a/configmaps/x', 'GET /api/v1/namespaces/a/configmaps/y', 'PUT /apis/coordination.k8s.io/v1/namespaces/a/leases/l']);
    connection.close();
  });

  it('asks the fence after the waits before sending, also for derived connections', async () => {
    const connection = new Connection({ name: 'kcp', kubeconfig });
    const fence: { reason?: string } = {};
    connection.setWriteFence(() => fence.reason);
    let resolveServer: (url: string) => void = () => undefined;
    const derived = connection.derive('kcp/ws', () => new Promise((resolve) => (resolveServer = resolve)));
    const write = derived.request('PATCH', '/api/v1/namespaces/a/configmaps/z', { body: {} });
    // The write waits for its server's URL; meanwhile the term loses its Lease.
    await new Promise((r) => setImmediate(r));
    fence.reason = 'lost while it waited';
    resolveServer(url);
    await assert.rejects(write, /lost while it waited/);
    assert.deepEqual(seen, []);
    connection.close();
  });

  it('asks the fence again once the request has its socket, and lets an unfenced connection (Events) through', async () => {
    const connection = new Connection({ name: 'service', kubeconfig });
    // Open when the write is prepared, shut by the time a socket is free for it (a wait in the agent's queue).
    let asked = 0;
    connection.setWriteFence(() => (++asked >= 2 ? 'lost while it waited for a socket' : undefined));
    await assert.rejects(connection.request('PUT', '/api/v1/namespaces/a/configmaps/w', { body: {} }), /lost while it waited for a socket/);
    assert.equal(asked, 2);
    await connection.unfenced().request('POST', '/api/v1/namespaces/a/events', { body: {} });
    assert.deepEqual(seen, ['POST /api/v1/namespaces/a/events']);
    connection.close();
  });
});
