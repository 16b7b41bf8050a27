// What a tenant can make relsync sweep (issue #36, point 10). A sweep that
// keeps related copies it cannot tell are orphans is followed by another
// soon; a tenant makes every sweep do so with one primary that keeps failing
// (too big to copy) and one object carrying forged marks in its cluster. Each
// sweep relists every cluster, so the follow-ups a tenant causes are bounded:
// at most one per interval between scheduled sweeps, backing off while the
// same copies stay unsure. Counted by relsync's own metric over four
// scheduled sweeps, relsync running as deployed (its heap), the follow-up
// delay cut to 1 s (RELSYNC_SWEEP_FOLLOW_UP_MS) so that the old behaviour —
// four follow-ups after every scheduled sweep — shows within a 15 s interval.
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startClusters, type Clusters } from '../harness/clusters.js';
import { eventually } from '../harness/kube.js';
import { asDeployed, metricTotal, startRelsync, writeConfig, type RelsyncProcess } from '../harness/relsync-process.js';
import type { ClusterClient } from '../harness/tenant.js';

const NS = 'amplify';
const SCHEDULED = 4;

describe('sweeps a tenant can cause', () => {
  let clusters: Clusters<'tenant-a' | 'service'> | undefined;
  let a: ClusterClient;
  let relsync: RelsyncProcess | undefined;

  before(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'relsync-e2e-sweep-follow-ups-'));
    clusters = await startClusters('tenant-a', 'service');
    const { 'tenant-a': pa, service: ps } = clusters.plane;
    a = clusters.client['tenant-a'];
    await a.ensureNamespace(NS);
    // The tenant's two moves: a primary over limits.copyBytes (kept as it was, its relations unknown,
    // at every sweep) and a Secret that claims to be relsync's copy of a service-side Secret.
    await a.createDatabase(NS, 'too-big', { blob: 'x'.repeat(8 * 1024) });
    await a.core.createNamespacedSecret({
      namespace: NS,
      body: {
        metadata: {
          name: 'forged',
          labels: { 'relsync.dev/agent': 'e2e' },
          annotations: { 'relsync.dev/source-cluster': 'service', 'relsync.dev/source-group': '', 'relsync.dev/source-resource': 'secrets', 'relsync.dev/source-namespace': 'nowhere', 'relsync.dev/source-name': 'forged' },
        },
        stringData: { v: 'mine' },
      },
    });
    const configPath = writeConfig(dir, {
      agentName: 'e2e',
      platformClusters: [{ name: 'tenant-a', kubeconfig: pa.kubeconfigPath }],
      serviceCluster: { name: 'service', kubeconfig: ps.kubeconfigPath },
      store: { path: join(dir, 'relsync.db') },
      limits: { copyBytes: 4096 },
      resync: { schedule: '*/15 * * * * *', onStartup: true },
      resources: [{ group: 'demo.relsync.dev', resource: 'databases', related: [{ id: 'creds', origin: 'service', resource: 'secrets', template: { name: '{{ name }}-creds' } }] }],
    });
    const deployed = asDeployed();
    relsync = await startRelsync(configPath, join(dir, 'relsync.log'), [], { ...deployed, env: { ...deployed.env, RELSYNC_SWEEP_FOLLOW_UP_MS: '1000' } });
  });

  after(async () => {
    await relsync?.stop();
    await clusters?.stop();
  });

  it(`adds at most one sweep per interval, backing off, over ${SCHEDULED} scheduled sweeps`, async () => {
    const r = relsync!;
    const sweeps = (trigger: string) => metricTotal(r.httpPort, 'relsync_sweeps_total', (l) => l.includes(`trigger="${trigger}"`));
    // The tenant's state is what it means to be: the startup sweep kept the forged Secret, unsure of it.
    const first = await r.waitForLog('the startup sweep finished', (l) => l.includes('"sweep finished"') && l.includes('"trigger":"startup"'), 30_000);
    assert.match(first, /"unsure":1[,}]/, first);
    await eventually(`${SCHEDULED} scheduled sweeps`, async () => (await sweeps('schedule')) >= SCHEDULED, (SCHEDULED + 2) * 15_000);
    const scheduled = await sweeps('schedule');
    const followUps = await sweeps('followup');
    console.log(`scheduled=${scheduled} followUps=${followUps} (startup 1)`);
    assert.ok(followUps >= 1, 'the startup sweep was followed up: the unsure state is real');
    // One per interval at most (1 + scheduled); backing off, here: after the startup sweep and the second scheduled one.
    assert.ok(followUps <= 2, `${followUps} follow-ups over ${scheduled} scheduled sweeps (and the startup sweep)`);
    assert.ok(await a.secret(NS, 'forged'), 'the forged Secret is still there: every sweep was unsure of it');
  });
});
