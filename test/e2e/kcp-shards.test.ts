// kcp with two shards (test/harness/kcp-sharded.ts: the root shard, shard-1,
// the cache server and the front-proxy, as kcp's own sharded test server runs
// them). The provider's APIExportEndpointSlice lists one virtual workspace URL
// per shard that serves a bound workspace: relsync serves each URL as a
// platform of its own, follows URLs that appear (a workspace of shard-1 binds)
// and disappear (it unbinds) while it runs, and each workspace's copies go
// through the URL of its shard.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startClusters, type Clusters } from '../harness/clusters.js';
import { bindDatabaseExport, createDatabaseExport, DATABASE_EXPORT, grantAgentAccess, workspaceClient } from '../harness/kcp.js';
import { createWorkspacesOn, startShardedKcp, type ShardedKcp } from '../harness/kcp-sharded.js';
import { eventually } from '../harness/kube.js';
import { startRelsync, writeConfig, type RelsyncProcess } from '../harness/relsync-process.js';
import { shardsHeld } from '../harness/shard-holdings.js';
import { defaultCopyNamespace, type ClusterClient } from '../harness/tenant.js';
import { ShardMap } from '../../src/config/shard-map.js';
import { parse } from 'yaml';

describe('kcp with two shards', () => {
  let kcp: ShardedKcp | undefined;
  let service: Clusters<'service'> | undefined;
  let relsync: RelsyncProcess | undefined;
  let replicas: RelsyncProcess[] = [];
  let dir: string;
  let lc: Record<string, string>;
  let a: ClusterClient;
  let b: ClusterClient;
  let svc: ClusterClient;

  const sliceUrls = async () => {
    const slice = await kcp!.request<{ status?: { endpoints?: Array<{ url: string }> } }>('GET', `/clusters/root:provider/apis/apis.kcp.io/v1alpha1/apiexportendpointslices/${DATABASE_EXPORT}`);
    return (slice.body.status?.endpoints ?? []).map((e) => e.url).sort();
  };
  const copyNs = (workspace: string) => defaultCopyNamespace(lc[workspace]!, 'default');

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'relsync-e2e-kcp-shards-'));
    const startedAt = Date.now();
    const [k, s] = await Promise.allSettled([startShardedKcp(), startClusters('service')]);
    if (k.status === 'fulfilled') kcp = k.value;
    if (s.status === 'fulfilled') service = s.value;
    for (const x of [k, s]) if (x.status === 'rejected') throw x.reason;
    console.log(`kcp with two shards and the service cluster ready in ${Date.now() - startedAt} ms`);
    lc = { ...(await createWorkspacesOn(kcp!, 'root', 'provider', 'consumer-a')), ...(await createWorkspacesOn(kcp!, 'shard-1', 'consumer-b')) };
    await createDatabaseExport(kcp!, 'root:provider');
    await grantAgentAccess(kcp!, 'root:provider');
    await bindDatabaseExport(kcp!, 'root:consumer-a', 'root:provider');
    a = workspaceClient(kcp!, 'root:consumer-a', dir);
    b = workspaceClient(kcp!, 'root:consumer-b', dir);
    svc = service!.client.service;
    await eventually('the slice lists the root shard', async () => (await sliceUrls()).length === 1 || undefined, 60_000);
    const configPath = writeConfig(dir, {
      agentName: 'e2e',
      platformClusters: [{ name: 'kcp', kubeconfig: kcp!.kubeconfig(join(dir, 'provider.kubeconfig'), `${kcp!.url}/clusters/root:provider`, kcp!.agentToken), kcp: { apiExportEndpointSlice: DATABASE_EXPORT } }],
      serviceCluster: { name: 'service', kubeconfig: service!.plane.service.kubeconfigPath },
      store: { path: join(dir, 'relsync.db') },
      leaderElection: { enabled: false },
      resources: [{ group: 'demo.relsync.dev', kind: 'Database', related: [{ id: 'config', origin: 'platform', resource: 'configmaps', reference: { path: '.spec.configMapName' } }] }],
    });
    // The endpoint slice read again every second instead of every 30.
    relsync = await startRelsync(configPath, join(dir, 'relsync.log'), [], { env: { RELSYNC_KCP_SLICE_FOLLOW_MS: '1000' } });
  });

  after(async () => {
    await relsync?.stop();
    for (const p of replicas) await p.stop();
    await service?.stop();
    await kcp?.stop();
  });

  it('serves a workspace of the root shard, and one of shard-1 once the slice lists its URL too', async () => {
    await a.ensureNamespace('default');
    await a.putConfigMap('default', 'settings', { v: 'a1' });
    await a.createDatabase('default', 'orders', { configMapName: 'settings' });
    await eventually('consumer-a (root shard) synced', async () => (await svc.configMap(copyNs('consumer-a'), 'settings'))?.data?.v === 'a1' || undefined, 60_000);

    await bindDatabaseExport(kcp!, 'root:consumer-b', 'root:provider');
    const urls = await eventually('the slice lists both shards', async () => ((await sliceUrls()).length === 2 ? sliceUrls() : undefined), 60_000);
    assert.deepEqual(urls.map((u) => new URL(u).origin).sort(), [kcp!.shards.root, kcp!.shards['shard-1']].sort(), 'one URL per shard, each the shard\'s own');
    await relsync!.waitForLog('relsync follows the new shard', /kcp shards changed: this term ends and is wired afresh/, 30_000);
    await b.ensureNamespace('default');
    await b.putConfigMap('default', 'settings', { v: 'b1' });
    await b.createDatabase('default', 'orders', { configMapName: 'settings' });
    await eventually('consumer-b (shard-1) synced', async () => (await svc.configMap(copyNs('consumer-b'), 'settings'))?.data?.v === 'b1' || undefined, 60_000);
    await a.putConfigMap('default', 'settings', { v: 'a2' });
    await eventually('consumer-a still synced after the rewiring', async () => (await svc.configMap(copyNs('consumer-a'), 'settings'))?.data?.v === 'a2' || undefined, 60_000);
    // Each workspace through its own shard's URL: two platforms, named by host.
    for (const shard of [kcp!.shards.root, kcp!.shards['shard-1']]) {
      await relsync!.waitForLog(`a watch through ${shard}`, (l) => l.includes('"msg":"relsync started"') && l.includes(`kcp@${new URL(shard).host}`), 10_000);
    }
  });

  it('follows a shard URL that leaves the slice: the workspace that unbound there loses its copies, the other stays synced', async () => {
    const res = await kcp!.request('DELETE', `/clusters/root:consumer-b/apis/apis.kcp.io/v2alpha1/apibindings/${DATABASE_EXPORT}`);
    const gone = res.status === 404 ? await kcp!.request('DELETE', `/clusters/root:consumer-b/apis/apis.kcp.io/v1alpha2/apibindings/${DATABASE_EXPORT}`) : res;
    assert.equal(gone.status, 200, JSON.stringify(gone.body));
    await eventually('the slice lists the root shard only', async () => ((await sliceUrls()).length === 1 ? true : undefined), 60_000);
    // relsync follows: wired afresh with the one URL left (its second rewiring), the workspace's platform gone with it.
    const rewirings = () => relsync!.log().split('\n').filter((l) => l.includes('"msg":"kcp shards changed')).length;
    await eventually('relsync wired afresh with one URL', async () => (rewirings() >= 2 && relsync!.log().split('\n').filter((l) => l.includes('"msg":"relsync started"')).length >= 3) || undefined, 30_000);
    await eventually('consumer-b\'s copies removed', async () => (!(await svc.database(copyNs('consumer-b'), 'orders')) && !(await svc.configMap(copyNs('consumer-b'), 'settings'))) || undefined, 90_000);
    await a.putConfigMap('default', 'settings', { v: 'a3' });
    await eventually('consumer-a synced through the one URL left', async () => (await svc.configMap(copyNs('consumer-a'), 'settings'))?.data?.v === 'a3' || undefined, 60_000);
    assert.ok(await svc.database(copyNs('consumer-a'), 'orders'), 'consumer-a\'s copy stayed');
  });

  it('spreads the workspaces over two relsync replicas by shard (sharding.shards), each served by exactly one of them', async () => {
    await relsync!.stop();
    relsync = undefined;
    await bindDatabaseExport(kcp!, 'root:consumer-b', 'root:provider');
    await eventually('the slice lists both shards again', async () => ((await sliceUrls()).length === 2 ? true : undefined), 60_000);
    const base = parse(readFileSync(join(dir, 'relsync.yaml'), 'utf8')) as Record<string, unknown>;
    const start = async (r: string) => {
      const path = join(dir, `${r}.yaml`);
      writeFileSync(path, JSON.stringify({ ...base, store: { path: join(dir, r, 'relsync.db') }, sharding: { shards: 2 }, leaderElection: { leaseDurationSeconds: 4, renewDeadlineSeconds: 3, retryPeriodSeconds: 1 } }));
      return startRelsync(path, join(dir, `${r}.log`), [], { env: { RELSYNC_KCP_SLICE_FOLLOW_MS: '1000' } });
    };
    replicas = [await start('r1'), await start('r2')];
    const held = await eventually('one shard each', async () => {
      const h = await Promise.all(replicas.map((p) => shardsHeld(p.httpPort).catch(() => undefined)));
      return h.every((x) => x?.length === 1) ? h.map((x) => x![0]!) : undefined;
    }, 60_000);
    await b.ensureNamespace('default');
    await a.putConfigMap('default', 'settings', { v: 'a4' });
    await b.putConfigMap('default', 'settings', { v: 'b4' });
    await b.createDatabase('default', 'orders', { configMapName: 'settings' }).catch(() => undefined);
    await eventually('both workspaces synced by the replicas', async () => ((await svc.configMap(copyNs('consumer-a'), 'settings'))?.data?.v === 'a4' && (await svc.configMap(copyNs('consumer-b'), 'settings'))?.data?.v === 'b4') || undefined, 90_000);
    // Each workspace is known only to the terms of its own shard (whichever replica held it: the first to start held both for a moment).
    const map = new ShardMap(2, [{ name: 'kcp', kubeconfig: '', context: undefined, kcp: { endpointSlice: DATABASE_EXPORT, url: undefined } }]);
    for (const ws of ['consumer-a', 'consumer-b']) {
      const lines = replicas.flatMap((p) => p.log().split('\n').filter((l) => l.includes('"msg":"a workspace binds the export"') && l.includes(lc[ws]!)));
      assert.ok(lines.length > 0, `${ws} became known`);
      for (const l of lines) assert.match(l, new RegExp(`"shard":${map.shardOf(lc[ws]!)},`), `${ws} (${lc[ws]}) known only to its shard ${map.shardOf(lc[ws]!)}'s terms`);
    }
    // And now each replica holds one shard, served by it alone.
    assert.deepEqual([...held].sort(), [0, 1]);
  });
});
