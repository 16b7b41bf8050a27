/**
 * `node dist/bench/replicas.js [--tenants 6] [--primaries 100] [--rate 30] [--duration 20] [--replicas 1,2,3]`
 *
 * A benchmark, not a test: the same workload served by 1, 2 and 3 relsync
 * replicas, side by side in one run on the same control planes (ratios to
 * the one-replica figures, since these machines are noisy). One replica runs
 * without shards (leader election, today's default); more share the tenants
 * over as many shards as tenants (sharding.shards).
 *
 * Per replica count, in a namespace of its own on every tenant (so that no
 * phase starts from another's copies): P primaries per tenant, each with a
 * related ConfigMap by reference, created before the replicas start; then
 * - initial sync: from the replicas' start until every related copy is in the
 *   service cluster (primaries per second);
 * - propagation: ConfigMap changes spread over the tenants at a fixed rate for
 *   D seconds, each timed from its write to its arrival in the service cluster
 *   (p50, p99);
 * then the phase's primaries are deleted (the replicas remove the copies) and
 * the replicas stopped. Prints the figures and writes them to
 * bench/results/replicas-latest.json; asserts nothing.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { CoreV1Api, Watch, type V1ConfigMap } from '@kubernetes/client-node';
import { startControlPlanes, type ControlPlane } from '../test/harness/control-plane.js';
import { eventually, installCrd } from '../test/harness/kube.js';
import { startRelsync, writeConfig, type RelsyncProcess } from '../test/harness/relsync-process.js';
import { shardsHeld } from '../test/harness/shard-holdings.js';
import { ClusterClient, defaultCopyNamespace } from '../test/harness/tenant.js';
import { cpuSnapshot, cpuSpent, formatCpu } from './cpu-usage.js';

const { values: args } = parseArgs({
  options: {
    tenants: { type: 'string', default: '6' },
    primaries: { type: 'string', default: '100' },
    rate: { type: 'string', default: '30' },
    duration: { type: 'string', default: '20' },
    replicas: { type: 'string', default: '1,2,3' },
  },
});
const TENANTS = Array.from({ length: Number(args.tenants) }, (_, i) => `t${i + 1}`);
const P = Number(args.primaries);
const RATE = Number(args.rate);
const DURATION_S = Number(args.duration);
const COUNTS = args.replicas!.split(',').map(Number);
const log = (line: string) => console.log(`bench: ${line}`);
const pct = (xs: number[], p: number) => {
  if (xs.length === 0) return 0;
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
};
const round = (x: number) => Math.round(x * 100) / 100;

async function pool<T>(items: readonly T[], width: number, fn: (item: T) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < items.length) await fn(items[next++]!);
  }));
}

interface Phase {
  readonly replicas: number;
  readonly shards: number;
  readonly initialSyncMs: number;
  readonly primariesPerSecond: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly lost: number;
  readonly changes: number;
  readonly relsyncCpuSeconds: number;
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'relsync-bench-replicas-'));
  log(`${TENANTS.length} tenants × ${P} primaries, ${RATE} changes/s for ${DURATION_S} s, replicas ${COUNTS.join(', ')}; ${cpus().length} cores`);
  const planes = await startControlPlanes('service', ...TENANTS);
  const [service, ...tenantPlanes] = planes as [ControlPlane, ...ControlPlane[]];
  const phases: Phase[] = [];
  try {
    await Promise.all(planes.map((p) => installCrd(p.kubeConfig)));
    const tenants = tenantPlanes.map((p) => new ClusterClient(p.name, p.kubeConfig));
    for (const [index, count] of COUNTS.entries()) {
      const ns = `bench-${index + 1}`;
      const shards = count > 1 ? TENANTS.length : 1;
      log(`phase ${index + 1}: ${count} replica(s), ${shards} shard(s), namespace ${ns}`);
      await Promise.all(tenants.map(async (t) => {
        await t.ensureNamespace(ns);
        await pool(Array.from({ length: P }, (_, i) => i), 8, async (i) => {
          await t.putConfigMap(ns, `p${i}-ref`, { t: '0' });
          await t.createDatabase(ns, `p${i}`, { configMapName: `p${i}-ref` });
        });
      }));
      const configFor = (r: number) => {
        mkdirSync(join(dir, `${ns}-r${r}`), { recursive: true });
        return writeConfig(dir, {
          agentName: 'bench',
          platformClusters: tenantPlanes.map((p) => ({ name: p.name, kubeconfig: p.kubeconfigPath })),
          serviceCluster: { name: 'service', kubeconfig: service.kubeconfigPath },
          store: { path: join(dir, `${ns}-r${r}`, 'relsync.db') },
          sharding: { shards },
          workers: 8,
          resync: { schedule: '0 0 1 1 *', onStartup: false },
          leaderElection: { leaseDurationSeconds: 4, renewDeadlineSeconds: 3, retryPeriodSeconds: 1 },
          resources: [{ group: 'demo.relsync.dev', resource: 'databases', related: [{ id: 'ref', origin: 'platform', resource: 'configmaps', reference: { path: '.spec.configMapName' } }] }],
        }, `${ns}-r${r}.yaml`);
      };
      const cpuBefore = cpuSnapshot();
      const started = Date.now();
      const replicas: RelsyncProcess[] = [];
      for (let r = 1; r <= count; r++) replicas.push(await startRelsync(configFor(r), join(dir, `${ns}-r${r}.log`), ['--log-level', 'info']));
      const copyNamespaces = TENANTS.map((t) => defaultCopyNamespace(t, ns));
      const core = service.kubeConfig.makeApiClient(CoreV1Api);
      await eventually('every related copy', async () => {
        let n = 0;
        for (const c of copyNamespaces) n += (await core.listNamespacedConfigMap({ namespace: c }).catch(() => ({ items: [] }))).items.filter((cm) => cm.metadata?.name?.endsWith('-ref')).length;
        return n === TENANTS.length * P || undefined;
      }, 600_000);
      const initialSyncMs = Date.now() - started;
      if (count > 1) {
        const held = await Promise.all(replicas.map((p) => shardsHeld(p.httpPort).catch(() => undefined)));
        log(`shards: ${held.map((h, i) => `r${i + 1} ${h?.join(',') ?? '?'}`).join('; ')}`);
      }
      log(`initial sync: ${TENANTS.length * P} primaries in ${initialSyncMs} ms (${round((TENANTS.length * P) / (initialSyncMs / 1000))}/s)`);

      // Propagation: one watch per copy namespace, changes spread over the tenants.
      const seen = new Map<string, number>();
      const watches = await Promise.all(copyNamespaces.map(async (namespace) => {
        const { resourceVersion } = (await core.listNamespacedConfigMap({ namespace, limit: 1 })).metadata ?? {};
        return new Watch(service.kubeConfig).watch(`/api/v1/namespaces/${namespace}/configmaps`, { resourceVersion }, (_type, obj: V1ConfigMap) => {
          const key = `${namespace}/${obj.metadata?.name}/${obj.data?.t}`;
          if (!seen.has(key)) seen.set(key, Date.now());
        }, () => undefined);
      }));
      const sent = new Map<string, number>();
      const total = RATE * DURATION_S;
      const writeStart = Date.now();
      const pending: Array<Promise<unknown>> = [];
      for (let i = 0; i < total; i++) {
        const due = writeStart + (i * 1000) / RATE;
        const wait = due - Date.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        const tenant = i % TENANTS.length;
        const name = `p${Math.floor(i / TENANTS.length) % P}-ref`;
        const t = String(Date.now());
        sent.set(`${copyNamespaces[tenant]}/${name}/${t}`, Number(t));
        pending.push(tenants[tenant]!.core.replaceNamespacedConfigMap({ namespace: ns, name, body: { metadata: { name }, data: { t } } }).catch(() => undefined));
      }
      await Promise.all(pending);
      await new Promise((r) => setTimeout(r, 10_000));
      for (const w of watches) w.abort();
      const values: number[] = [];
      let lost = 0;
      for (const [key, at] of sent) {
        const arrived = seen.get(key);
        if (arrived === undefined) lost++;
        else values.push(arrived - at);
      }
      const cpu = cpuSpent(cpuBefore, cpuSnapshot());
      // The replicas are this process's children named node (the control planes are named by the harness).
      const relsyncCpu = cpu.node ?? 0;
      log(`propagation: p50 ${pct(values, 50)} ms, p99 ${pct(values, 99)} ms, lost ${lost} of ${sent.size}; CPU since the replicas started: ${formatCpu(cpu)}`);
      phases.push({ replicas: count, shards, initialSyncMs, primariesPerSecond: round((TENANTS.length * P) / (initialSyncMs / 1000)), p50Ms: pct(values, 50), p99Ms: pct(values, 99), lost, changes: sent.size, relsyncCpuSeconds: round(relsyncCpu) });

      // Clean up while the replicas run: they remove the copies and the finalizers.
      await Promise.all(tenants.map((t) => pool(Array.from({ length: P }, (_, i) => i), 8, (i) => t.deleteDatabase(ns, `p${i}`).catch(() => undefined))));
      await eventually('the phase\'s primaries gone', async () => {
        for (const t of tenants) if ((await t.objects.listNamespacedCustomObject({ group: 'demo.relsync.dev', version: 'v1alpha1', namespace: ns, plural: 'databases' }) as { items: unknown[] }).items.length > 0) return undefined;
        return true;
      }, 300_000);
      await Promise.all(replicas.map((p) => p.stop()));
    }
  } finally {
    await Promise.all(planes.map((p) => p.stop()));
  }
  const base = phases[0]!;
  console.log('\nreplicas  shards  initial sync (primaries/s)  ratio  p50 ms  p99 ms  p99 ratio  lost  relsync CPU s');
  for (const p of phases) {
    console.log(`${String(p.replicas).padEnd(9)} ${String(p.shards).padEnd(7)} ${String(p.primariesPerSecond).padEnd(27)} ${String(round(p.primariesPerSecond / base.primariesPerSecond)).padEnd(6)} ${String(p.p50Ms).padEnd(7)} ${String(p.p99Ms).padEnd(7)} ${String(round(p.p99Ms / Math.max(1, base.p99Ms))).padEnd(10)} ${String(p.lost).padEnd(5)} ${p.relsyncCpuSeconds}`);
  }
  const out = fileURLToPath(new URL('../../bench/results/replicas-latest.json', import.meta.url));
  writeFileSync(out, `${JSON.stringify({ at: new Date().toISOString(), cores: cpus().length, tenants: TENANTS.length, primariesPerTenant: P, rate: RATE, durationS: DURATION_S, phases }, null, 2)}\n`);
  log(`written to ${out}`);
}

await main();
