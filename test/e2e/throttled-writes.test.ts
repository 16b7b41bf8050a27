// A service cluster that throttles: a fault proxy answers relsync's writes of
// related copies 429 with Retry-After for a while. relsync must keep the whole
// cluster back for Retry-After after a 429 (only the writes already in flight
// may still arrive), not only the one reconcile that met it, and every change
// must land once the API server takes writes again. The limit's decisions on
// a fake clock: test/unit/kube/adaptive-limit.test.ts.
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startClusters, type Clusters } from '../harness/clusters.js';
import { startFaultProxy, type FaultProxy } from '../harness/fault-proxy.js';
import { eventually } from '../harness/kube.js';
import { startRelsync, writeConfig, type RelsyncProcess } from '../harness/relsync-process.js';
import { defaultCopyNamespace, GROUP, type ClusterClient } from '../harness/tenant.js';

const PRIMARIES = 60;
const WORKERS = 4;
const RETRY_AFTER_SECONDS = 3;

describe('a service cluster that answers 429 with Retry-After', () => {
  let clusters: Clusters<'tenant-a' | 'service'>;
  let a: ClusterClient;
  let svc: ClusterClient;
  let proxy: FaultProxy;
  let relsync: RelsyncProcess;
  const ns = defaultCopyNamespace('tenant-a', 'throttled');
  const names = Array.from({ length: PRIMARIES }, (_, i) => `db-${i}`);

  before(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'relsync-e2e-throttled-'));
    clusters = await startClusters('tenant-a', 'service');
    ({ 'tenant-a': a, service: svc } = clusters.client);
    proxy = await startFaultProxy(clusters.plane.service);
    const config = writeConfig(dir, {
      agentName: 'e2e',
      platformClusters: [{ name: 'tenant-a', kubeconfig: clusters.plane['tenant-a'].kubeconfigPath }],
      serviceCluster: { name: 'service', kubeconfig: proxy.kubeconfigPath },
      store: { path: join(dir, 'relsync.db') },
      // Sweeps off: every retry below is the reconciler's own.
      resync: { schedule: '0 0 1 1 *', onStartup: false },
      workers: WORKERS,
      resources: [{ group: GROUP, resource: 'databases', related: [{ id: 'config', origin: 'platform', resource: 'configmaps', reference: { path: '.spec.configMapName' } }] }],
    });
    relsync = await startRelsync(config, join(dir, 'relsync.log'));
    await a.ensureNamespace('throttled');
    for (const name of names) {
      await a.putConfigMap('throttled', `${name}-cfg`, { v: '1' });
      await a.createDatabase('throttled', name, { configMapName: `${name}-cfg` });
    }
    await eventually('every related object copied', async () => {
      const copies = await svc.core.listNamespacedConfigMap({ namespace: ns });
      return copies.items.filter((c) => c.data?.v === '1').length === PRIMARIES;
    }, 60_000);
  });

  after(async () => {
    await relsync?.stop();
    await proxy?.close();
    await clusters?.stop();
  });

  it('sends no write to the cluster during Retry-After beyond those in flight, and every change lands after', async () => {
    const copyWrite = (r: { method: string; path: string }) => r.method !== 'GET' && r.path.startsWith(`/api/v1/namespaces/${ns}/configmaps`);
    const from = proxy.requests.length;
    const throttle = { kind: 'status', status: 429, retryAfterSeconds: RETRY_AFTER_SECONDS } as const;
    const path = new RegExp(`^/api/v1/namespaces/${ns}/configmaps(/|$)`);
    const removes = ['PUT', 'POST', 'PATCH'].map((method) => proxy.inject({ method, path, action: throttle }));
    const changedAt = Date.now();
    // Many more changes than workers: relsync has far more writes to send than it has in flight.
    for (const name of names) await a.putConfigMap('throttled', `${name}-cfg`, { v: '2' });

    const first = await eventually('a write is throttled', async () => proxy.requests.slice(from).find((r) => copyWrite(r) && r.status === 429));
    // The fault stays until relsync has come back after the pause and been throttled again.
    await eventually('a write after the first pause is throttled too', async () => proxy.requests.slice(from).some((r) => copyWrite(r) && r.status === 429 && r.at >= first.at + RETRY_AFTER_SECONDS * 1000), 30_000);
    for (const remove of removes) remove();

    await eventually('every change lands once the cluster takes writes again', async () => {
      const copies = await svc.core.listNamespacedConfigMap({ namespace: ns });
      return copies.items.filter((c) => c.data?.v === '2').length === PRIMARIES;
    }, 90_000);
    const landedMs = Date.now() - changedAt;

    const writes = proxy.requests.slice(from).filter(copyWrite);
    // relsync pauses from when it reads the 429, no sooner than the proxy sent it; 50 ms for timers
    // that fire a little early against the wall clock.
    const windowEnd = first.at + RETRY_AFTER_SECONDS * 1000 - 50;
    const inWindow = writes.filter((r) => r.at > first.at && r.at < windowEnd);
    const throttled = writes.filter((r) => r.status === 429).length;
    console.log(`first 429 at +${first.at - changedAt} ms; ${inWindow.length} writes arrived in the next ${RETRY_AFTER_SECONDS} s; ${throttled} writes throttled of ${writes.length}; every change landed ${landedMs} ms after the changes were made`);
    console.log(`  writes by 100 ms since the first 429: ${JSON.stringify(histogram(writes.map((r) => r.at - first.at)))}`);
    // One write per reconcile and one reconcile per worker: at most WORKERS writes were in flight
    // when relsync read the 429. Without the cluster-wide pause every worker would go on to the
    // next of the 60 changes and meet a 429 of its own within the window.
    assert.ok(inWindow.length <= WORKERS - 1, `only writes already in flight arrive during Retry-After (${inWindow.length} did, the first at ${inWindow.slice(0, 8).map((r) => `+${r.at - first.at} ms`).join(', ')})`);
    assert.ok(throttled < PRIMARIES, `fewer 429s than changes (${throttled}): relsync did not send every change into the throttle`);

    const metrics = await (await fetch(`http://127.0.0.1:${relsync.httpPort}/metrics`)).text();
    const count = Number(/relsync_client_throttled_total\{cluster="service"\} (\d+)/.exec(metrics)?.[1]);
    assert.equal(count, throttled, 'each throttled answer counted');
    assert.match(metrics, /relsync_client_concurrency_limit\{cluster="service"\} \d+/);
    assert.match(metrics, /relsync_client_concurrency_limit\{cluster="tenant-a"\} 32/, 'the tenant\'s limit untouched');
  });
});

/** Counts of values by 100 ms bucket (key: the bucket's start). */
function histogram(values: number[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const v of values) {
    const key = String(Math.floor(v / 100) * 100);
    out[key] = (out[key] ?? 0) + 1;
  }
  return out;
}
