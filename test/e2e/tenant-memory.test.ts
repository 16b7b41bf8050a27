// A tenant that stores more than relsync has memory, in the shapes and order
// that cost it most: small ConfigMaps first (so a LIST's first pages say
// "small"), then 10 ConfigMaps of 1 MiB made of tiny keys (several times
// their text once parsed), then 200 ConfigMaps of 1 MiB, all in a watched
// type. relsync runs as deploy/ runs
// it (deploy/statefulset.yaml's NODE_OPTIONS and MALLOC_ARENA_MAX, the default resync.snapshotBytes); it lists, watches and
// sweeps them (at start and on schedule) and keeps syncing. Before LISTs were
// streamed and the sweep's snapshot bounded, a sweep held every listed object
// and the process died out of memory.
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startClusters, type Clusters } from '../harness/clusters.js';
import { eventually } from '../harness/kube.js';
import { asDeployed, startRelsync, writeConfig, type RelsyncProcess } from '../harness/relsync-process.js';
import { defaultCopyNamespace, GROUP, PLURAL } from '../harness/tenant.js';

const BIG = 200;
const KEYED = 10;
/** deploy/statefulset.yaml's Node.js flags (a 256 MB heap, 8 MiB semi-spaces) and MALLOC_ARENA_MAX. */
const DEPLOYED = asDeployed();
const HEAP_MB = Number(DEPLOYED.nodeArgs.find((a) => a.startsWith('--max-old-space-size='))?.split('=')[1]);

describe('a tenant with more data than relsync has memory', () => {
  let clusters: Clusters<'tenant-a' | 'service'>;
  let relsync: RelsyncProcess;

  before(async () => {
    clusters = await startClusters('tenant-a', 'service');
    const a = clusters.client['tenant-a'];
    for (const ns of ['aaa-small', 'aab-keys', 'bulk', 'app']) await a.ensureNamespace(ns);
    const blob = 'x'.repeat(1024 * 1024 - 1024);
    // Writes this big can time out in the API server (504) on a loaded 2-core machine; the
    // setup is not what is tested: try again (putConfigMap replaces one a timed-out create made).
    const put = async (ns: string, name: string, data: Record<string, string>) => {
      for (let attempt = 1; ; attempt++) {
        try {
          return await a.putConfigMap(ns, name, data);
        } catch (err) {
          if (attempt >= 4) throw err;
        }
      }
    };
    for (let i = 0; i < 50; i++) await a.putConfigMap('aaa-small', `small-${i}`, { v: String(i) });
    await Promise.all([0, 1, 2, 3].map(async (w) => {
      for (let i = w; i < BIG; i += 4) await put('bulk', `big-${String(i).padStart(3, '0')}`, { blob });
    }));
    const tiny = Object.fromEntries(Array.from({ length: 90_000 }, (_, i) => [`k${i}`, '']));
    await Promise.all([0, 1, 2, 3].map(async (w) => {
      for (let i = w; i < KEYED; i += 4) await put('aab-keys', `keys-${String(i).padStart(3, '0')}`, tiny);
    }));
    await a.putConfigMap('app', 'cfg', { v: 'start' });
    await a.createDatabase('app', 'orders', { configMapName: 'cfg' });
  });

  after(async () => {
    if (relsync?.child.exitCode === null) await relsync.stop();
    await clusters?.stop();
  });

  it(`lists, sweeps and syncs with a ${HEAP_MB} MB heap beside ${BIG + KEYED} MiB of ConfigMaps`, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'relsync-e2e-memory-'));
    const { 'tenant-a': pa, service: ps } = clusters.plane;
    const config = writeConfig(dir, {
      agentName: 'e2e',
      platformClusters: [{ name: 'tenant-a', kubeconfig: pa.kubeconfigPath }],
      serviceCluster: { name: 'service', kubeconfig: ps.kubeconfigPath },
      store: { path: join(dir, 'relsync.db') },
      leaderElection: { enabled: false },
      resync: { schedule: '*/5 * * * * *', onStartup: true },
      resources: [{ group: GROUP, resource: PLURAL, related: [
        { id: 'config', origin: 'platform', resource: 'configmaps', reference: { path: '.spec.configMapName' } },
        // A selector rule: ConfigMaps are watched and swept unfiltered, all of them.
        { id: 'extra', origin: 'platform', resource: 'configmaps', selector: { matchLabels: { app: '{{ name }}' } } },
      ] }],
    });
    relsync = await startRelsync(config, join(dir, 'relsync.log'), ['--log-level', 'info'], DEPLOYED);
    const svc = clusters.client.service;
    const alive = () => {
      const { exitCode, signalCode } = relsync.child;
      if (exitCode !== null || signalCode !== null) throw new Error(`relsync exited (${exitCode ?? signalCode}):\n${relsync.log().slice(-2000)}`);
    };
    const sweeps = () => relsync.log().split('\n').filter((l) => l.includes('"sweep finished"')).map((l) => JSON.parse(l) as { objectsListed: number });
    await eventually('two sweeps that listed the big ConfigMaps', async () => {
      alive();
      return sweeps().filter((s) => s.objectsListed > BIG + KEYED).length >= 2 || undefined;
    }, 180_000);
    assert.match(relsync.log(), /resync\.snapshotBytes/, 'the sweep says it read the rest live');
    // Syncing goes on: a related change arrives.
    await clusters.client['tenant-a'].putConfigMap('app', 'cfg', { v: 'after-sweeps' });
    await eventually('the related change', async () => {
      alive();
      return (await svc.configMap(defaultCopyNamespace('tenant-a', 'app'), 'cfg'))?.data?.v === 'after-sweeps' || undefined;
    }, 60_000);
    alive();
  });
});
