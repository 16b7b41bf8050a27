// An APIExportEndpointSlice of several virtual workspace URLs (one per kcp
// shard): each URL a platform of its own, named after its host (one URL keeps
// the configured name, as before); workspaces follow the URL that serves them
// within one configured platform, never across two; and a term sees the
// slice list other URLs (a shard added or gone), against a local HTTP server
// that answers as kcp does; the follower's reads are spaced on a fake clock.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { configuredPlatformOf, endpointPlatformNames } from '../../../src/kube/kcp-endpoint.js';
import { LogicalClusters } from '../../../src/kube/logical-clusters.js';
import { endpointSlicesChanged, expandKcpEndpoints } from '../../../src/controller/kcp-workspaces.js';
import type { ClusterConfig } from '../../../src/kube/cluster-config.js';
import { FakeClock, settle } from '../../harness/fake-clock.js';

const logger = pino({ level: 'silent' });

describe('kcp endpoint slices of several shards', () => {
  let server: http.Server;
  let kubeconfig: string;
  let endpoints: string[] = [];
  /** Reads of the slice the server answered. */
  let reads = 0;

  before(async () => {
    server = http.createServer((req, res) => {
      reads++;
      if (req.url !== '/apis/apis.kcp.io/v1alpha1/apiexportendpointslices/databases') {
        res.writeHead(404, { 'content-type': 'application/json' });
        return void res.end(JSON.stringify({ kind: 'Status', reason: 'NotFound', code: 404 }));
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ status: { endpoints: endpoints.map((url) => ({ url })) } }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const dir = mkdtempSync(join(tmpdir(), 'relsync-kcp-slices-'));
    kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(kubeconfig, JSON.stringify({
      apiVersion: 'v1', kind: 'Config', 'current-context': 'c',
      clusters: [{ name: 'c', cluster: { server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, 'insecure-skip-tls-verify': true } }],
      users: [{ name: 'u', user: { token: 't' } }],
      contexts: [{ name: 'c', context: { cluster: 'c', user: 'u' } }],
    }));
  });
  after(() => server.close());

  const platform = (): ClusterConfig => ({ name: 'kcp', kubeconfig, context: undefined, kcp: { endpointSlice: 'databases', url: undefined } });

  it('names one platform per URL after its host, and keeps the configured name for one URL', () => {
    assert.deepEqual(endpointPlatformNames('kcp', ['https://root:6443/services/apiexport/a/x']), ['kcp']);
    assert.deepEqual(endpointPlatformNames('kcp', ['https://root:6443/services/apiexport/a/x', 'https://shard-1:6443/services/apiexport/a/x']), ['kcp@root:6443', 'kcp@shard-1:6443']);
    assert.deepEqual(endpointPlatformNames('kcp', ['https://h/a', 'https://h/b']), ['kcp@h#1', 'kcp@h#2']);
    assert.equal(configuredPlatformOf('kcp@shard-1:6443'), 'kcp');
    assert.equal(configuredPlatformOf('kcp'), 'kcp');
  });

  it('expands a slice of two shards into two platforms, each with its URL; refuses a URL that is not https', async () => {
    endpoints = ['https://shard-1:6443/services/apiexport/root/databases/', 'https://root:6443/services/apiexport/root/databases'];
    const expanded = await expandKcpEndpoints([platform()], logger, AbortSignal.timeout(5_000), new FakeClock());
    assert.deepEqual(expanded.map((c) => [c.name, c.kcp?.url]), [
      ['kcp@root:6443', 'https://root:6443/services/apiexport/root/databases'],
      ['kcp@shard-1:6443', 'https://shard-1:6443/services/apiexport/root/databases'],
    ]);
    endpoints = ['http://root:6443/services/apiexport/root/databases'];
    await assert.rejects(expandKcpEndpoints([platform()], logger, AbortSignal.timeout(5_000), new FakeClock()), /not an https URL/);
  });

  it('moves a workspace to the URL that serves it within one platform, never to another configured platform', async () => {
    const logical = await LogicalClusters.load(undefined);
    assert.equal(await logical.bound('ws1', 'kcp'), 'new');
    // The slice grew to two shards: the workspace is served by one of them now.
    assert.equal(await logical.bound('ws1', 'kcp@root:6443'), undefined);
    assert.equal(logical.platformOf('ws1'), 'kcp@root:6443');
    assert.equal(await logical.bound('ws1', 'other'), undefined, 'another configured platform does not take it');
    assert.equal(logical.platformOf('ws1'), 'kcp@root:6443');
    await logical.unbound('ws1', 'kcp@root:6443');
    assert.equal(await logical.bound('ws1', 'kcp@shard-1:6443'), 'rebound', 'bound again, on the other shard');
  });

  const root = 'https://root:6443/services/apiexport/root/databases';
  const shard1 = 'https://shard-1:6443/services/apiexport/root/databases';

  /** A follower of the slice on a fake clock, and a step that lets exactly one read happen. */
  const follow = async () => {
    const clock = new FakeClock();
    const wired = await expandKcpEndpoints([platform()], logger, AbortSignal.timeout(5_000), clock);
    const stop = new AbortController();
    const state: { said: string | undefined; ended: boolean } = { said: undefined, ended: false };
    // Every 30 s (production's): on the real clock, no read would happen within the test.
    const changed = endpointSlicesChanged(wired, logger, stop.signal, { clock, everyMs: 30_000 }).then((why) => {
      state.said = why;
      state.ended = true;
    });
    /** One read: the wait ends, the server answers, and the follower waits again (or has ended). */
    const read = async () => {
      const before = reads;
      await clock.advance(30_000);
      for (let i = 0; i < 1000 && !(reads > before && (clock.pending === 1 || state.ended)); i++) await settle();
      assert.equal(reads, before + 1, 'one read per 30 s');
    };
    return { state, read, stop: async () => (stop.abort(), await changed) };
  };

  it('tells a term when the slice lists other URLs, and not while it lists the same', async () => {
    endpoints = [root];
    const { state, read, stop } = await follow();
    for (let i = 0; i < 10; i++) await read();
    assert.equal(state.said, undefined, 'the same URL for 10 reads: nothing to do');
    // A URL that comes and goes is no reason to rewire.
    endpoints = [root, shard1];
    await read();
    await read();
    endpoints = [root];
    await read();
    assert.equal(state.said, undefined, 'a URL listed for two reads only');
    endpoints = [root, shard1];
    await read();
    await read();
    assert.equal(state.said, undefined, 'seen alike in two reads in a row: not yet');
    await read();
    assert.match(state.said ?? '', /lists https:\/\/root:6443.*, https:\/\/shard-1:6443/, 'acted on once seen alike in three reads in a row');
    await stop();
  });

  it('acts on no change before the term has lived ten reads', async () => {
    endpoints = [root];
    const { state, read, stop } = await follow();
    endpoints = [root, shard1];
    for (let i = 0; i < 9; i++) await read();
    assert.equal(state.said, undefined, 'stable for nine reads, but the term is nine reads old');
    await read();
    assert.match(state.said ?? '', /lists https:\/\/root:6443.*, https:\/\/shard-1:6443/);
    await stop();
  });
});

describe('a term that ends before it began', () => {
  it('has its slice follower end at once, with or without slices to follow (an abort event is not sent twice)', async () => {
    const stopped = AbortSignal.abort();
    assert.equal(await endpointSlicesChanged([], logger, stopped, { clock: new FakeClock() }), undefined);
    assert.equal(await endpointSlicesChanged([{ name: 'kcp', kubeconfig: '/nowhere', context: undefined, kcp: { endpointSlice: 's', url: 'https://h/x' } }], logger, stopped, { clock: new FakeClock() }), undefined);
  });
});

describe('logical clusters of one shard', () => {
  it('knows only the workspaces its shard owns, from the store and from bindings', async () => {
    const saved: Array<{ name: string; platform: string; state: 'bound' | 'unbound' }> = [
      { name: 'ws-mine', platform: 'kcp', state: 'bound' },
      { name: 'ws-theirs', platform: 'kcp', state: 'bound' },
    ];
    const storage = { all: async () => saved, save: async () => undefined, delete: async () => undefined };
    const owns = (name: string) => name.endsWith('-mine') || name === 'new-mine';
    const logical = await LogicalClusters.load(storage, owns);
    assert.equal(logical.platformOf('ws-mine'), 'kcp');
    assert.equal(logical.platformOf('ws-theirs'), undefined, "another shard's workspace is never known here");
    assert.equal(await logical.bound('new-theirs', 'kcp'), undefined, "another shard's binding is ignored");
    assert.equal(logical.platformOf('new-theirs'), undefined);
    assert.equal(await logical.bound('new-mine', 'kcp'), 'new');
  });
});
