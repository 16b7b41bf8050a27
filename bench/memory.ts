/**
 * `npm run build && node dist/bench/memory.js [--configmaps N] [--mib M] [--before /path/to/old/dist/src/cli/main.js]`
 *
 * A benchmark, not a test: it prints figures, asserts nothing. One tenant
 * keeps N ConfigMaps of M MiB each (default 1,000 × 1 MiB) in a namespace no
 * rule points at — but ConfigMaps are a related type, so relsync watches and
 * sweeps them — after 200 small ones in a namespace that sorts first (so a
 * list's first pages say "small objects"). One primary with a related
 * ConfigMap shows that syncing goes on. relsync starts (its watches list
 * everything, and it sweeps at start), then sweeps once more by schedule.
 * Printed per build: peak RSS (VmHWM), the start sweep's and the scheduled
 * sweep's durations, and whether the related change arrived.
 *
 * With --before, the same clusters are first run with another build (e.g. a
 * worktree of an older commit), so that both figures come from one run.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { startClusters } from '../test/harness/clusters.js';
import { eventually } from '../test/harness/kube.js';
import { cliPath, startRelsync, writeConfig } from '../test/harness/relsync-process.js';
import { defaultCopyNamespace, GROUP, PLURAL } from '../test/harness/tenant.js';

const { values: args } = parseArgs({ options: { configmaps: { type: 'string', default: '1000' }, mib: { type: 'string', default: '1' }, before: { type: 'string' } } });
const N = Number(args.configmaps);
const blob = 'x'.repeat(Math.floor(Number(args.mib) * 1024 * 1024) - 1024);
const log = (s: string) => console.log(s);

async function pool<T>(items: readonly T[], n: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: n }, async () => {
    while (next < items.length) await fn(items[next++]!);
  }));
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'relsync-bench-mem-'));
  // A service cluster per build, so that each starts from nothing there.
  const clusters = await startClusters('tenant-a', 'service', 'service-before');
  const a = clusters.client['tenant-a'];
  try {
    const t0 = Date.now();
    await a.ensureNamespace('aaa-small');
    await a.ensureNamespace('bulk');
    await a.ensureNamespace('app');
    await pool(Array.from({ length: 200 }, (_, i) => i), 8, (i) => a.putConfigMap('aaa-small', `small-${i}`, { v: String(i) }));
    await pool(Array.from({ length: N }, (_, i) => i), 4, (i) => a.putConfigMap('bulk', `big-${String(i).padStart(5, '0')}`, { blob }));
    await a.putConfigMap('app', 'cfg', { v: 'start' });
    await a.createDatabase('app', 'orders', { configMapName: 'cfg' });
    log(`tenant-a holds ${N} ConfigMaps of ${(blob.length / 1024 / 1024).toFixed(2)} MiB and 200 small ones (created in ${((Date.now() - t0) / 1000).toFixed(0)} s)`);

    const builds: Array<[string, string]> = [...(args.before ? [['before', args.before] as [string, string]] : []), ['after', cliPath]];
    const rows: string[] = [];
    let round = 0;
    for (const [label, cli] of builds) {
      round++;
      const service = label === 'before' ? 'service-before' : 'service';
      const svc = clusters.client[service];
      const config = writeConfig(dir, {
        agentName: 'bench',
        platformClusters: [{ name: 'tenant-a', kubeconfig: clusters.plane['tenant-a'].kubeconfigPath }],
        serviceCluster: { name: 'service', kubeconfig: clusters.plane[service].kubeconfigPath },
        store: { path: join(dir, `${label}.db`) },
        leaderElection: { enabled: false },
        // at start, then every 20 s from second 10
        resync: { schedule: '10,30,50 * * * * *', onStartup: true },
        resources: [{ group: GROUP, resource: PLURAL, related: [
          { id: 'config', origin: 'platform', resource: 'configmaps', reference: { path: '.spec.configMapName' } },
          { id: 'extra', origin: 'platform', resource: 'configmaps', selector: { matchLabels: { app: '{{ name }}' } } },
        ] }],
      }, `${label}.yaml`);
      const logFile = join(dir, `${label}.log`);
      const started = Date.now();
      const relsync = await startRelsync(config, logFile, ['--log-level', 'info'], { cli });
      const pid = relsync.child.pid!;
      const peakMb = () => {
        try {
          return Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN) / 1024;
        } catch {
          return NaN; // exited
        }
      };
      let peak = 0;
      const sampler = setInterval(() => (peak = Math.max(peak, peakMb() || 0)), 200);
      const sweeps = () => relsync.log().split('\n').filter((l) => l.includes('"sweep finished"')).map((l) => JSON.parse(l) as { durationMs: number; trigger: string });
      let outcome = 'ok';
      try {
        await eventually('two sweeps finished', async () => {
          if (relsync.child.exitCode !== null) throw new Error(`exited with ${relsync.child.exitCode}`);
          return sweeps().length >= 2 || undefined;
        }, 600_000);
        const v = `r${round}`;
        await a.putConfigMap('app', 'cfg', { v });
        await eventually('the related change', async () => (await svc.configMap(defaultCopyNamespace('tenant-a', 'app'), 'cfg'))?.data?.v === v || undefined, 120_000);
      } catch (err) {
        outcome = `failed: ${(err as Error).message.split('\n')[0]}`;
      }
      clearInterval(sampler);
      peak = Math.max(peak, peakMb() || 0);
      const [first, second] = sweeps();
      rows.push(`| ${label} | ${peak.toFixed(0)} | ${first ? (first.durationMs / 1000).toFixed(1) : '-'} | ${second ? (second.durationMs / 1000).toFixed(1) : '-'} | ${((Date.now() - started) / 1000).toFixed(0)} | ${outcome} |`);
      if (relsync.child.exitCode === null) await relsync.stop();
    }
    log('\n| build | peak RSS MB | start sweep s | next sweep s | run s | related change |');
    log('|---|---|---|---|---|---|');
    for (const r of rows) log(r);
  } finally {
    await clusters.stop();
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
