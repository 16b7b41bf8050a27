/**
 * `npm run build && node dist/bench/fairness.js --primaries N [--samples S]`
 *
 * A benchmark, not a test: it prints figures, asserts nothing. Two tenants,
 * one service cluster, relsync as a real process (4 workers). Tenant B
 * changes one related ConfigMap of one primary, S times while nothing else
 * happens (idle), then S times while tenant A creates N primaries, each with a
 * related ConfigMap (burst). Printed: B's propagation latency in both phases
 * (p50, p99, max) and their ratio, the same for a floor client (the smallest
 * program that copies B's change straight into the service cluster) on the
 * same writes, the queue depth relsync reported during the burst, how fast
 * A's copies arrived, and relsync's peak RSS.
 *
 * `RELSYNC_CLI=/path/to/dist/src/cli/main.js` runs another build of relsync
 * (e.g. a worktree of an older commit) for a before/after comparison.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Watch, type V1ConfigMap } from '@kubernetes/client-node';
import { startClusters, twoTenantConfig } from '../test/harness/clusters.js';
import { eventually } from '../test/harness/kube.js';
import { startRelsync, writeConfig } from '../test/harness/relsync-process.js';
import { GROUP, PLURAL, VERSION } from '../test/harness/tenant.js';

const { values: args } = parseArgs({ options: { primaries: { type: 'string', default: '2000' }, samples: { type: 'string', default: '20' } } });
const N = Number(args.primaries);
const S = Number(args.samples);
const log = (s: string) => console.log(s);
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.ceil((p / 100) * xs.length) - 1)] ?? NaN;
const NAMING = '{{ cluster }}-{{ namespace }}-{{ hash cluster namespace | trunc 16 }}';
const copyNamespace = (cluster: string, namespace: string) => `${cluster}-${namespace}-${createHash('sha256').update(`${cluster}/${namespace}`).digest('hex').slice(0, 16)}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function pool<T>(items: readonly T[], n: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: n }, async () => {
    while (next < items.length) await fn(items[next++]!);
  }));
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'relsync-bench-fair-'));
  const clusters = await startClusters('tenant-a', 'tenant-b', 'service');
  const { 'tenant-a': a, 'tenant-b': b, service: svc } = clusters.client;
  const config = writeConfig(dir, {
    ...twoTenantConfig(clusters, dir),
    resync: { schedule: '0 0 1 1 *', onStartup: false },
    leaderElection: { enabled: false },
    // An explicit naming that builds from before and after 64-bit default hashes both use.
    resources: [{ group: GROUP, resource: PLURAL, naming: { namespace: NAMING }, related: [{ id: 'config', origin: 'platform', resource: 'configmaps', reference: { path: '.spec.configMapName' } }] }],
  });
  const relsync = await startRelsync(config, join(dir, 'relsync.log'), ['--log-level', 'info']);
  const pid = relsync.child.pid!;
  const rssPeakMb = () => Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN) / 1024;
  const metric = async (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(await (await fetch(`http://127.0.0.1:${relsync.httpPort}/metrics`)).text())?.[1] ?? NaN);
  try {
    await a.ensureNamespace('a');
    await b.ensureNamespace('b');
    await b.putConfigMap('b', 'cfg', { v: 'start' });
    await b.createDatabase('b', 'orders', { configMapName: 'cfg' });
    const nsB = copyNamespace('tenant-b', 'b');
    await eventually("tenant B's copy", () => svc.configMap(nsB, 'cfg'), 60_000);

    // Arrival times of B's values in the service cluster, from a watch (no polling load on the API server).
    const arrived = new Map<string, number>();
    const watch = await new Watch(clusters.plane.service.kubeConfig).watch(`/api/v1/namespaces/${nsB}/configmaps`, {}, (_type, obj: V1ConfigMap) => {
      const v = obj.data?.v;
      if (v && !arrived.has(v)) arrived.set(v, Date.now());
    }, () => undefined);
    // The floor: the smallest client that watches B's ConfigMap and writes each change straight into
    // the service cluster (no queue, no store, no related rules), measured on the same writes: how
    // much of B's slowdown during A's burst the shared API servers and cores cause by themselves.
    await svc.ensureNamespace('floor-b');
    const floorArrived = new Map<string, number>();
    const floorSeen = await new Watch(clusters.plane.service.kubeConfig).watch('/api/v1/namespaces/floor-b/configmaps', {}, (_type, obj: V1ConfigMap) => {
      const v = obj.data?.v;
      if (v && !floorArrived.has(v)) floorArrived.set(v, Date.now());
    }, () => undefined);
    const floor = await new Watch(clusters.plane['tenant-b'].kubeConfig).watch('/api/v1/namespaces/b/configmaps', {}, (type, obj: V1ConfigMap) => {
      if (type === 'MODIFIED' && obj.metadata?.name === 'cfg') void svc.putConfigMap('floor-b', 'cfg', obj.data ?? {}).catch(() => undefined);
    }, () => undefined);
    let seq = 0;
    /** B's latency through relsync and through the floor client, for one write. */
    const sample = async (): Promise<{ relsync: number; floor: number }> => {
      const v = `s${seq++}`;
      const at = Date.now();
      await b.putConfigMap('b', 'cfg', { v });
      const deadline = at + 120_000;
      while (!arrived.has(v) || !floorArrived.has(v)) {
        if (Date.now() > deadline) return { relsync: arrived.has(v) ? arrived.get(v)! - at : Infinity, floor: floorArrived.has(v) ? floorArrived.get(v)! - at : Infinity };
        await sleep(5);
      }
      return { relsync: arrived.get(v)! - at, floor: floorArrived.get(v)! - at };
    };

    const idle: number[] = [];
    const floorIdle: number[] = [];
    for (let i = 0; i < S; i++) {
      const x = await sample();
      idle.push(x.relsync);
      floorIdle.push(x.floor);
      await sleep(200);
    }

    // Burst: tenant A creates N primaries (16 clients), B keeps changing its ConfigMap meanwhile.
    const names = Array.from({ length: N }, (_, i) => `p${i}`);
    const started = Date.now();
    let created = false;
    const creating = pool(names, 16, async (name) => {
      await a.core.createNamespacedConfigMap({ namespace: 'a', body: { metadata: { name: `${name}-cfg` }, data: { v: name } } });
      await a.objects.createNamespacedCustomObject({ group: GROUP, version: VERSION, plural: PLURAL, namespace: 'a', body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'Database', metadata: { name }, spec: { configMapName: `${name}-cfg` } } });
    }).then(() => (created = true));
    const burst: number[] = [];
    const floorBurst: number[] = [];
    let maxDepth = 0;
    const nsA = copyNamespace('tenant-a', 'a');
    // Sample while A's creation runs and its queue drains; at least S samples.
    for (let i = 0; burst.length < S || !created; i++) {
      await sleep(300);
      maxDepth = Math.max(maxDepth, await metric('relsync_queue_depth'));
      const x = await sample();
      burst.push(x.relsync);
      floorBurst.push(x.floor);
      if (burst.length > 10 * S) break;
    }
    await creating;
    const createdMs = Date.now() - started;
    const copies = await eventually(`all ${N} of A's copies`, async () => {
      const list = await svc.objects.listNamespacedCustomObject({ group: GROUP, version: VERSION, plural: PLURAL, namespace: nsA });
      return (list as { items: unknown[] }).items.length >= N ? true : undefined;
    }, 30 * 60_000).then(() => Date.now() - started);
    watch.abort();
    floor.abort();
    floorSeen.abort();

    const fmt = (xs: number[]) => `p50 ${pct(xs, 50)} ms, p99 ${pct(xs, 99)} ms, max ${Math.max(...xs)} ms (${xs.length} samples)`;
    log(`relsync: ${process.env.RELSYNC_CLI ?? 'this build'}`);
    log(`tenant B idle:  ${fmt(idle)}`);
    log(`tenant B burst: ${fmt(burst)}  (while tenant A created ${N} primaries in ${createdMs} ms)`);
    log(`ratio burst/idle: p50 ${(pct(burst, 50) / pct(idle, 50)).toFixed(2)}, p99 ${(pct(burst, 99) / pct(idle, 99)).toFixed(2)}`);
    log(`floor client idle:  ${fmt(floorIdle)}`);
    log(`floor client burst: ${fmt(floorBurst)}`);
    log(`floor ratio burst/idle: p50 ${(pct(floorBurst, 50) / pct(floorIdle, 50)).toFixed(2)}, p99 ${(pct(floorBurst, 99) / pct(floorIdle, 99)).toFixed(2)}`);
    log(`queue depth seen during the burst: up to ${maxDepth}`);
    log(`tenant A: ${N} copies in ${copies} ms (${(N / (copies / 1000)).toFixed(1)} copies/s)`);
    log(`relsync peak RSS: ${rssPeakMb().toFixed(0)} MB`);
  } finally {
    await relsync.stop();
    await clusters.stop();
  }
}

await main();
