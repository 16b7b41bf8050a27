// API faults while relsync keeps running: a paused API server, watches that
// expire under a running process, and a service cluster that goes away. Each
// converges without restarting relsync (the same process, checked by pid).
// The startup sweep is off, so that the watches themselves are proven.
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { startClusters, type Clusters } from '../harness/clusters.js';
import { compactEtcd, type ControlPlane } from '../harness/control-plane.js';
import { eventually } from '../harness/kube.js';
import { startRelsync, writeConfig, type RelsyncProcess } from '../harness/relsync-process.js';
import { defaultCopyNamespace, type ClusterClient } from '../harness/tenant.js';

const WATCH_TIMEOUT_S = 4;
const IDLE_TIMEOUT_S = 6;
const OUTAGE_MS = 15_000;

describe('API faults', () => {
  let clusters: Clusters<'tenant-a' | 'service'>;
  let platform: ControlPlane;
  let service: ControlPlane;
  let a: ClusterClient;
  let svc: ClusterClient;
  let relsync: RelsyncProcess;
  let pid: number;

  before(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'relsync-e2e-faults-'));
    clusters = await startClusters('tenant-a', 'service');
    ({ 'tenant-a': platform, service } = clusters.plane);
    ({ 'tenant-a': a, service: svc } = clusters.client);
    const configPath = writeConfig(dir, {
      agentName: 'e2e',
      platformClusters: [{ name: 'tenant-a', kubeconfig: platform.kubeconfigPath }],
      serviceCluster: { name: 'service', kubeconfig: service.kubeconfigPath },
      store: { path: join(dir, 'relsync.db') },
      resync: { schedule: '0 0 1 1 *', onStartup: false },
      watch: { timeoutSeconds: WATCH_TIMEOUT_S, idleTimeoutSeconds: IDLE_TIMEOUT_S },
      leaderElection: { leaseDurationSeconds: 4, renewDeadlineSeconds: 3, retryPeriodSeconds: 1 },
      resources: [{ group: 'demo.relsync.dev', resource: 'databases', related: [{ id: 'config', origin: 'platform', resource: 'configmaps', reference: { path: '.spec.configMapName' } }] }],
    });
    relsync = await startRelsync(configPath, join(dir, 'relsync.log'));
    pid = relsync.child.pid!;
  });

  after(async () => {
    await relsync?.stop();
    await clusters?.stop();
  });

  const stillTheSameProcess = () => {
    assert.equal(relsync.child.exitCode, null, 'relsync is still running');
    assert.equal(relsync.child.pid, pid);
  };

  async function synced(namespace: string, name: string): Promise<string> {
    await a.ensureNamespace(namespace);
    const ns = defaultCopyNamespace('tenant-a', namespace);
    await a.putConfigMap(namespace, `${name}-cfg`, { v: '1' });
    await a.createDatabase(namespace, name, { configMapName: `${name}-cfg` });
    await eventually(`${namespace}/${name} synced`, () => svc.configMap(ns, `${name}-cfg`), 30_000);
    return ns;
  }

  it('survives an API server paused (SIGSTOP) for longer than the watch timeout', async () => {
    const ns = await synced('pause', 'one');
    platform.signalApiServer('SIGSTOP');
    await sleep((IDLE_TIMEOUT_S + 4) * 1000);
    platform.signalApiServer('SIGCONT');
    const resumedAt = Date.now();
    await a.putConfigMap('pause', 'one-cfg', { v: 'after-pause' });
    await a.putConfigMap('pause', 'two-cfg', { v: '1' });
    await a.createDatabase('pause', 'two', { configMapName: 'two-cfg' });
    await eventually('change after the pause synced', async () => (await svc.configMap(ns, 'one-cfg'))?.data?.v === 'after-pause', 60_000);
    await eventually('primary created after the pause synced', () => svc.configMap(ns, 'two-cfg'), 60_000);
    console.log(`converged ${Date.now() - resumedAt} ms after SIGCONT (paused ${IDLE_TIMEOUT_S + 4} s; watch timeout ${WATCH_TIMEOUT_S} s)`);
    await relsync.waitForLog('the watchdog noticed the silent stream', /watch silent for too long; reconnecting/);
    await eventually('/readyz is 200 again', async () => (await fetch(`http://127.0.0.1:${relsync.httpPort}/readyz`)).status === 200, 30_000);
    stillTheSameProcess();
  });

  it('relists when its watches expired under it (etcd compacted, API server restarted)', async () => {
    const ns = await synced('expire', 'one');
    // Freeze relsync, change things, and expire every version it holds. The
    // first restart drops relsync's watch connections before the changes, so
    // no event of them waits in a socket buffer for relsync to read on SIGCONT.
    relsync.child.kill('SIGSTOP');
    try {
      await platform.restartApiServer();
      await a.putConfigMap('expire', 'one-cfg', { v: 'while-frozen' });
      await a.putConfigMap('expire', 'two-cfg', { v: '1' });
      await a.createDatabase('expire', 'two', { configMapName: 'two-cfg' });
      await compactEtcd(platform);
      await platform.restartApiServer();
    } finally {
      relsync.child.kill('SIGCONT');
    }
    const resumedAt = Date.now();
    await eventually('change made before the compaction synced', async () => (await svc.configMap(ns, 'one-cfg'))?.data?.v === 'while-frozen', 60_000);
    await eventually('primary created before the compaction synced', () => svc.configMap(ns, 'two-cfg'), 60_000);
    console.log(`converged ${Date.now() - resumedAt} ms after the watches expired`);
    await relsync.waitForLog('the watch relisted after 410 Gone', /resourceVersion expired \(410 Gone\); relisting/);
    stillTheSameProcess();
  });

  it('says on /readyz which watches are out of sync while a platform API server is down, and recovers', async () => {
    await synced('readyz', 'one');
    const readyz = async () => {
      const res = await fetch(`http://127.0.0.1:${relsync.httpPort}/readyz`);
      return { status: res.status, body: await res.text() };
    };
    assert.equal((await readyz()).status, 200);
    await platform.stopApiServer();
    const downAt = Date.now();
    try {
      // Each loop notices on its own schedule; in the end both of the platform's are named.
      const down = await eventually('/readyz is 503 and names both watches of the platform', async () => {
        const r = await readyz();
        return r.status === 503 && r.body.includes('watch tenant-a/databases.demo.relsync.dev is not in sync') && r.body.includes('watch tenant-a/configmaps is not in sync') ? r : undefined;
      }, 40_000);
      assert.doesNotMatch(down.body, /watch service\//, 'the service cluster’s watches are fine');
      console.log(`/readyz went 503 ${Date.now() - downAt} ms after the platform API server stopped`);
    } finally {
      await platform.startApiServer();
    }
    await eventually('/readyz is 200 again', async () => (await readyz()).status === 200, 60_000);
    await a.putConfigMap('readyz', 'one-cfg', { v: 'after' });
    await eventually('syncing again', async () => (await svc.configMap(defaultCopyNamespace('tenant-a', 'readyz'), 'one-cfg'))?.data?.v === 'after', 30_000);
    stillTheSameProcess();
  });

  it('keeps the work while the service cluster is unreachable and delivers it when it is back', async () => {
    const ns = await synced('outage', 'one');
    // Leadership before the outage (a lease renewal slow under load may have started a term of its own) is not this test's.
    const logBefore = relsync.log().length;
    await service.stopApiServer();
    const downAt = Date.now();
    await a.putConfigMap('outage', 'one-cfg', { v: 'during-outage' });
    await a.putConfigMap('outage', 'two-cfg', { v: '1' });
    await a.createDatabase('outage', 'two', { configMapName: 'two-cfg' });
    // Longer than the lease: the leader gives up its term and campaigns again.
    await eventually('the leader gave up its term', async () => /lost the leader lease: stopped all work/.test(relsync.log()), 20_000);
    await sleep(Math.max(0, OUTAGE_MS - (Date.now() - downAt)));
    await service.startApiServer();
    const backAt = Date.now();
    await eventually('change made during the outage synced', async () => (await svc.configMap(ns, 'one-cfg'))?.data?.v === 'during-outage', 90_000);
    await eventually('primary created during the outage synced', () => svc.configMap(ns, 'two-cfg'), 90_000);
    console.log(`service cluster down ${backAt - downAt} ms; converged ${Date.now() - backAt} ms after it was back`);
    assert.equal(relsync.log().slice(logBefore).match(/"msg":"became the leader"/g)?.length, 1, 'led again in a new term, once');
    await relsync.waitForLog('it kept trying while the service cluster was down', /could not wire up for a new term; will retry/);
    // The new term's reconciles waited for the watches they read to list (first-lists.ts): its
    // copies of the outage's changes were written (their own-write events logged) only after
    // tenant-a's primaries were released.
    const released = (l: string) => l.includes('"msg":"every watch its primaries read has listed once; their reconciles run"') && l.includes('"cluster":"tenant-a"');
    const copyWritten = (l: string) => l.includes('"cluster":"service"') && l.includes('"ownWrite":true') && l.includes('tenant-a-outage-');
    const term = await eventually('the new term logged the events of its copies', async () => {
      const log = relsync.log();
      const lines = log.slice(log.lastIndexOf('"msg":"became the leader"')).split('\n');
      return lines.some(copyWritten) ? lines : undefined;
    });
    const [releasedAt, writtenAt] = [term.findIndex(released), term.findIndex(copyWritten)];
    assert.ok(releasedAt >= 0 && releasedAt < writtenAt, `released at line ${releasedAt} of the new term, first copy written at line ${writtenAt}`);
    assert.equal(relsync.log().slice(logBefore).split('\n').filter(released).length, 1, 'said once in the new term');
    stillTheSameProcess();
  });
});
