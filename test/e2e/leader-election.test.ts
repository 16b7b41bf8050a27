// Two relsync replicas with the same config: only the leader reconciles; when
// it dies the standby takes over within the lease duration.
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startClusters, type Clusters } from '../harness/clusters.js';
import type { ControlPlane } from '../harness/control-plane.js';
import { eventually } from '../harness/kube.js';
import { metricGauge, metricTotal, runCli, startRelsync, writeConfig, type RelsyncProcess } from '../harness/relsync-process.js';
import { defaultCopyNamespace, type ClusterClient } from '../harness/tenant.js';

const LEASE_SECONDS = 4;

describe('leader election', () => {
  let clusters: Clusters<'tenant-a' | 'service'> | undefined;
  let a: ClusterClient;
  let svc: ClusterClient;
  let first: RelsyncProcess;
  let second: RelsyncProcess | undefined;
  let dir: string;

  const config = (name: string, pa: ControlPlane, ps: ControlPlane) =>
    writeConfig(dir, {
      agentName: 'e2e',
      platformClusters: [{ name: 'tenant-a', kubeconfig: pa.kubeconfigPath }],
      serviceCluster: { name: 'service', kubeconfig: ps.kubeconfigPath },
      // each replica has its own store, as each pod has its own volume
      store: { path: join(dir, `${name}.db`) },
      leaderElection: { leaseDurationSeconds: LEASE_SECONDS, renewDeadlineSeconds: 3, retryPeriodSeconds: 1 },
      resources: [{ group: 'demo.relsync.dev', resource: 'databases', related: [{ id: 'cfg', origin: 'platform', resource: 'configmaps', reference: { path: '.spec.configMapName' } }] }],
    }, `${name}.yaml`);

  const readyz = async (p: RelsyncProcess) => {
    const res = await fetch(`http://127.0.0.1:${p.httpPort}/readyz`);
    return `${res.status} ${await res.text()}`;
  };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'relsync-e2e-leader-'));
    clusters = await startClusters('tenant-a', 'service');
    const { 'tenant-a': pa, service: ps } = clusters.plane;
    ({ 'tenant-a': a, service: svc } = clusters.client);
    first = await startRelsync(config('first', pa, ps), join(dir, 'first.log'));
    await eventually('first replica leads', async () => /^200 ok: leader/.test(await readyz(first)));
    second = await startRelsync(config('second', pa, ps), join(dir, 'second.log'));
  });

  after(async () => {
    await first?.stop();
    await second?.stop();
    await clusters?.stop();
  });

  it('lets only the leader reconcile, and the standby take over when the leader dies', async () => {
    await eventually('second replica says it is a standby', async () => /^200 ok: standby \(leader: .+\)/.test(await readyz(second!)));
    await a.ensureNamespace('le');
    const ns = defaultCopyNamespace('tenant-a', 'le');
    await a.putConfigMap('le', 'cfg-1', { v: '1' });
    await a.createDatabase('le', 'one', { configMapName: 'cfg-1' });
    await eventually('the leader syncs', () => svc.configMap(ns, 'cfg-1'));
    assert.doesNotMatch(second!.log(), /"msg":"relsync started"/, 'the standby does not watch or reconcile');
    // The names controller-runtime and client-go export, which dashboards and alerts already use.
    const lease = (l: string) => l.includes('name="relsync-e2e"');
    assert.equal(await metricGauge(first.httpPort, 'leader_election_master_status', lease), 1, 'the leader says so');
    assert.equal(await metricGauge(second!.httpPort, 'leader_election_master_status', lease), 0, 'the standby says so');
    const queue = (l: string) => l.includes('name="relsync"');
    assert.ok((await metricTotal(first.httpPort, 'workqueue_adds_total', queue)) > 0);
    assert.ok((await metricTotal(first.httpPort, 'workqueue_work_duration_seconds_count', queue)) > 0);
    assert.ok((await metricTotal(first.httpPort, 'workqueue_queue_duration_seconds_count', queue)) > 0);
    assert.ok((await metricTotal(first.httpPort, 'rest_client_requests_total', (l) => l.includes('host="service"') && l.includes('code="200"'))) > 0);
    const text = await (await fetch(`http://127.0.0.1:${first.httpPort}/metrics`)).text();
    // Series lines, not their # HELP lines.
    for (const series of ['workqueue_depth{name="relsync",controller="relsync"}', 'workqueue_retries_total{', 'workqueue_unfinished_work_seconds{name="relsync",controller="relsync"}', 'workqueue_longest_running_processor_seconds{name="relsync",controller="relsync"}', 'process_cpu_seconds_total ', 'nodejs_heap_size_used_bytes ']) {
      assert.ok(text.split('\n').some((l) => l.startsWith(series)), `${series} is exported`);
    }
    assert.ok(!text.includes('relsync_process_process_'), 'the doubled prefix is gone');

    await first.kill();
    const killedAt = Date.now();
    await a.putConfigMap('le', 'cfg-2', { v: '2' });
    await a.createDatabase('le', 'two', { configMapName: 'cfg-2' });
    await eventually('the standby takes over and syncs', () => svc.configMap(ns, 'cfg-2'), (LEASE_SECONDS + 10) * 1000);
    const tookOver = Date.now() - killedAt;
    console.log(`standby took over and synced ${tookOver} ms after the leader was killed (lease ${LEASE_SECONDS} s)`);
    assert.ok(tookOver < (LEASE_SECONDS + 5) * 1000, `took over after ${tookOver} ms`);
    assert.match(second!.log(), /became the leader/);
    assert.equal(await metricGauge(second!.httpPort, 'leader_election_master_status', (l) => l.includes('name="relsync-e2e"')), 1, 'the new leader says so');
  });

  it('hands over at once when the leader stops cleanly', async () => {
    const { 'tenant-a': pa, service: ps } = clusters!.plane;
    first = await startRelsync(config('first', pa, ps), join(dir, 'first-2.log'));
    await eventually('restarted replica is a standby', async () => /standby/.test(await readyz(first)));
    const stoppedAt = Date.now();
    assert.equal(await second!.stop(), 0);
    second = undefined;
    await eventually('the other replica leads', async () => /^200 ok: leader/.test(await readyz(first)), 10_000);
    const handover = Date.now() - stoppedAt;
    console.log(`clean hand-over took ${handover} ms`);
    assert.ok(handover < LEASE_SECONDS * 1000, 'the released lease is taken without waiting for it to expire');
  });

  it('refuses a one-shot sweep beside the running leader, unless forced', async () => {
    const { 'tenant-a': pa, service: ps } = clusters!.plane;
    const path = config('sweeper', pa, ps);
    const refused = await runCli(['sweep', '--config', path]);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /holds the lease .* stop it first, or pass --force/);
    const forced = await runCli(['sweep', '--config', path, '--force']);
    assert.equal(forced.code, 0, forced.stderr);
  });
});
