/**
 * `npm run bench -- --primaries N --related-per-primary M [--duration S] [--rates 5,20]`
 *
 * A benchmark, not a test: it prints figures and writes them to
 * bench/results/latest.json (and a timestamped copy); nothing is asserted.
 * Real control planes (a platform and a service cluster), relsync as a real
 * process, and beside it in the same run:
 *
 * - a floor client: the smallest program that watches the source ConfigMaps
 *   and writes each change straight to a destination — relsync's propagation
 *   latency is reported as a ratio to it;
 * - a floor bulk copier, at the end (relsync stopped): lists the same
 *   sources and creates their copies elsewhere, nothing else — relsync's
 *   initial sync is reported as a ratio to it.
 *
 * Related objects per primary, in this order (M ≤ 5): a ConfigMap by
 * reference, a ConfigMap by template, a ConfigMap by label selector, a Secret
 * by inverse label, and a Secret the service side creates (service origin).
 */
import { mkdirSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import BetterSqlite3 from 'better-sqlite3';
import { CoreV1Api, Watch, type KubeConfig, type V1ConfigMap } from '@kubernetes/client-node';
import { startControlPlanes, type ControlPlane } from '../test/harness/control-plane.js';
import { cpuSnapshot, cpuSpent, formatCpu, harnessNames } from './cpu-usage.js';
import { eventually, installCrd } from '../test/harness/kube.js';
import { startRelsync, runCli, writeConfig, type RelsyncProcess } from '../test/harness/relsync-process.js';
import { ClusterClient, defaultCopyNamespace, GROUP, PLURAL, VERSION } from '../test/harness/tenant.js';
import { Connection } from '../src/kube/connection.js';
import { ResourceClient } from '../src/kube/resource-client.js';
import type { ResourceType } from '../src/core/resource-type.js';
import type { KubeObject } from '../src/core/object.js';
import { contentOf } from '../src/sync/content.js';
import { AGENT_LABEL } from '../src/core/relsync-keys.js';

const { values: args } = parseArgs({
  options: {
    primaries: { type: 'string', default: '200' },
    'related-per-primary': { type: 'string', default: '5' },
    duration: { type: 'string', default: '15' },
    rates: { type: 'string', default: '5,20' },
    drift: { type: 'string', default: '20' },
    /** relsync's `workers` (the floor bulk copier's concurrency stays the client's cap, 32). */
    workers: { type: 'string', default: '8' },
    /** Accepted and ignored: the fan-out phase is gone (bench/README.md). */
    'skip-fanout': { type: 'boolean', default: false },
  },
});
const N = Number(args.primaries);
const M = Math.min(5, Math.max(1, Number(args['related-per-primary'])));
const DURATION_S = Number(args.duration);
const RATES = args.rates!.split(',').map(Number);
const K = Number(args.drift);
const NS = 'bench';
const OWNER = 'bench.relsync.dev/owner';
/** relsync's `workers` in the bench's config. */
const WORKERS = Number(args.workers);
/** Creates in flight in the floor bulk copier: relsync's cap on requests at once per cluster (its Connection's MAX_CONCURRENCY). */
const FLOOR_CONCURRENCY = 32;
/** Where the floor bulk copier writes, on both sides: it runs last, nothing reads it. */
const FLOOR_BULK_NS = 'floor-bulk';
const resultsDir = fileURLToPath(new URL('../../bench/results/', import.meta.url));

const log = (s: string) => console.log(s);
/** A sweep's phases, as its log line and `relsync sweep -o json` give them (controller/sweeper.ts). */
interface SweepPhasesFigure {
  listMs: number;
  reconcileMs: number;
  cleanupMs: number;
  skipped: number;
}
const pct = (xs: number[], p: number) => {
  if (xs.length === 0) return NaN;
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
};
const round = (x: number) => Math.round(x * 10) / 10;

async function pool<T>(items: readonly T[], width: number, fn: (item: T) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < items.length) await fn(items[next++]!);
  }));
}

/** Counts of a metric family from relsync's /metrics. */
async function metric(p: RelsyncProcess, name: string, filter = ''): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${p.httpPort}/metrics`)).text();
  return text
    .split('\n')
    .filter((l) => l.startsWith(name) && (l[name.length] === ' ' || l[name.length] === '{') && l.includes(filter))
    .reduce((n, l) => n + Number(l.split(' ').pop()), 0);
}

/** relsync's API requests so far, by `cluster method code` (watches included). */
async function requestsByVerb(p: RelsyncProcess): Promise<Record<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${p.httpPort}/metrics`)).text();
  const counts: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const m = /^relsync_api_requests_total\{(.*)\} (\S+)$/.exec(line);
    if (!m) continue;
    const labels = Object.fromEntries([...m[1]!.matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    counts[`${labels.cluster} ${labels.method} ${labels.code}`] = Number(m[2]);
  }
  return counts;
}

function peakRssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? 0);
  return round(kb / 1024);
}

/** Watches ConfigMaps in a namespace and records when each `t` value arrives. */
async function arrivals(kc: KubeConfig, namespace: string): Promise<{ seen: Map<string, number>; stop: () => void }> {
  const seen = new Map<string, number>();
  // From now: a watch without a resourceVersion first sends every existing object (50,000 copies at
  // 10,000 x 5), and the arrivals measured behind that burst were late by its length (seen 2026-12-05).
  const { resourceVersion } = (await kc.makeApiClient(CoreV1Api).listNamespacedConfigMap({ namespace, limit: 1 })).metadata ?? {};
  const req = await new Watch(kc).watch(`/api/v1/namespaces/${namespace}/configmaps`, { resourceVersion }, (_type, obj: V1ConfigMap) => {
    const t = obj.data?.t;
    if (t && !seen.has(`${obj.metadata?.name}/${t}`)) seen.set(`${obj.metadata?.name}/${t}`, Date.now());
  }, () => undefined);
  return { seen, stop: () => req.abort() };
}

/** The floor client: watch the source ConfigMaps, write each change to the destination, nothing else. */
async function floorClient(from: KubeConfig, to: ClusterClient, namespace: string, destNamespace: string): Promise<() => void> {
  // Only changes: the initial ADDED burst (one per primary) would flood the API
  // server with writes at the moment latency is measured (seen at 10,000 primaries).
  const req = await new Watch(from).watch(`/api/v1/namespaces/${namespace}/configmaps`, { labelSelector: 'bench.relsync.dev/kind=ref' }, (type, obj: V1ConfigMap) => {
    if (type !== 'MODIFIED') return;
    void to.putConfigMap(destNamespace, obj.metadata!.name!, obj.data ?? {}).catch(() => undefined);
  }, () => undefined);
  return () => req.abort();
}

const databaseType: ResourceType = { group: GROUP, version: VERSION, resource: PLURAL, kind: 'Database', namespaced: true };
const configMapType: ResourceType = { group: '', version: 'v1', resource: 'configmaps', kind: 'ConfigMap', namespaced: true };
const secretType: ResourceType = { group: '', version: 'v1', resource: 'secrets', kind: 'Secret', namespaced: true };

/**
 * The floor bulk copier: lists the sources relsync copies at initial sync (on
 * the platform the primaries and their related ConfigMaps and Secrets, on the
 * service side the service-origin Secrets; relsync's own copies left out by
 * their label) and creates a copy of each on the other side in FLOOR_BULK_NS,
 * with the content relsync copies (contentOf: the same sizes, without
 * relsync's marks), nothing else. Through relsync's own REST client
 * (ResourceClient, one Connection per cluster, each with maxSockets 32).
 *
 * Concurrency: FLOOR_CONCURRENCY = 32 creates in flight, the most requests
 * relsync's client lets run at once against a cluster. relsync is often below
 * it (a worker's primary copy alone, reads between writes; with 8 workers at
 * most 8 × 4 writes, RELATIONS_AT_ONCE per worker); the floor never is.
 */
async function floorBulkCopy(pp: ControlPlane, ps: ControlPlane, copyNs: string): Promise<{ copies: number }> {
  const platform = new Connection({ name: 'platform', kubeconfig: pp.kubeconfigPath });
  const service = new Connection({ name: 'service', kubeconfig: ps.kubeconfigPath });
  const sources: Array<readonly [from: Connection, to: Connection, type: ResourceType, namespace: string]> = [
    [platform, service, databaseType, NS],
    [platform, service, configMapType, NS],
    ...(M >= 4 ? [[platform, service, secretType, NS] as const] : []),
    ...(M >= 5 ? [[service, platform, secretType, copyNs] as const] : []),
  ];
  const lists = await Promise.all(sources.map(async ([from, to, type, namespace]) => {
    const { items } = await new ResourceClient(from, type).listAll({ namespace, labelSelector: `!${AGENT_LABEL}` });
    return items.map((item) => ({ to: new ResourceClient(to, type), item }));
  }));
  const work = lists.flat();
  await pool(work, FLOOR_CONCURRENCY, async ({ to, item }) => {
    const { fields, labels, annotations } = contentOf(item);
    await to.create(FLOOR_BULK_NS, { ...fields, metadata: { name: item.metadata.name, labels, annotations } } as KubeObject);
  });
  platform.close();
  service.close();
  return { copies: work.length };
}

async function writer(a: ClusterClient, ratePerSecond: number, seconds: number, sent: Map<string, number>): Promise<void> {
  const total = ratePerSecond * seconds;
  const started = Date.now();
  const pending: Array<Promise<unknown>> = [];
  for (let i = 0; i < total; i++) {
    const due = started + (i * 1000) / ratePerSecond;
    const wait = due - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const name = `p${i % N}-ref`;
    const t = String(Date.now());
    sent.set(`${name}/${t}`, Number(t));
    pending.push(a.core.replaceNamespacedConfigMap({ namespace: NS, name, body: { metadata: { name, labels: { 'bench.relsync.dev/kind': 'ref' } }, data: { t } } }).catch(() => undefined));
  }
  await Promise.all(pending);
}

function latencies(sent: Map<string, number>, seen: Map<string, number>): { values: number[]; lost: number } {
  const values: number[] = [];
  let lost = 0;
  for (const [key, t] of sent) {
    const at = seen.get(key);
    if (at === undefined) lost++;
    else values.push(at - t);
  }
  return { values, lost };
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'relsync-bench-'));
  log(`relsync bench: ${N} primaries × ${M} related, writes at ${RATES.join(', ')}/s for ${DURATION_S} s each; relsync workers ${WORKERS}; ${cpus().length} cores, ${Math.round(totalmem() / 2 ** 30)} GiB`);
  // The harness names the processes it starts there, so that CPU counts each cluster apart (cpu-usage.ts).
  process.env.RELSYNC_PID_DIR ??= mkdtempSync(join(tmpdir(), 'relsync-bench-pids-'));
  const planes = await startControlPlanes('platform', 'service');
  const [pp, ps] = planes as [ControlPlane, ControlPlane];
  let relsync: RelsyncProcess | undefined;
  try {
    await Promise.all(planes.map((p) => installCrd(p.kubeConfig)));
    const a = new ClusterClient('platform', pp.kubeConfig);
    const s = new ClusterClient('service', ps.kubeConfig);
    const copyNs = defaultCopyNamespace('platform', NS);
    await a.ensureNamespace(NS);
    await s.ensureNamespace(copyNs, { cluster: 'platform', namespace: NS });
    await s.ensureNamespace('floor');
    await Promise.all([a.ensureNamespace(FLOOR_BULK_NS), s.ensureNamespace(FLOOR_BULK_NS)]);

    const related = [
      { id: 'ref', origin: 'platform', resource: 'configmaps', reference: { path: '.spec.configMapName' } },
      { id: 'tmpl', origin: 'platform', resource: 'configmaps', template: { name: '{{ name }}-tmpl' } },
      { id: 'sel', origin: 'platform', resource: 'configmaps', selector: { matchLabels: { app: '{{ name }}' } } },
      { id: 'inv', origin: 'platform', resource: 'secrets', inverse: { label: OWNER } },
      // The bench's "operator" writes these before the copies exist, so it cannot own them by reference.
      { id: 'svc', origin: 'service', resource: 'secrets', template: { name: '{{ name }}-creds' }, provenance: { anyInNamespace: true } },
    ].slice(0, M);
    const storePath = join(dir, 'relsync.db');
    const config = {
      agentName: 'bench',
      platformClusters: [{ name: 'platform', kubeconfig: pp.kubeconfigPath }],
      serviceCluster: { name: 'service', kubeconfig: ps.kubeconfigPath },
      store: { path: storePath },
      workers: WORKERS,
      resync: { schedule: '0 0 1 1 *', onStartup: false },
      leaderElection: { enabled: false },
      // One tenant holds every primary here: past 20,000 (the default cap per platform cluster) it would be refused.
      limits: { primariesPerCluster: Math.max(20_000, N) },
      resources: [{ group: GROUP, resource: PLURAL, related }],
    };
    const configPath = writeConfig(dir, config);

    log(`creating ${N} primaries and ${N * M} related objects ...`);
    const names = Array.from({ length: N }, (_, i) => `p${i}`);
    const createStarted = Date.now();
    // Through relsync's REST client, 32 at once (what one of its connections allows): at 30,000
    // primaries, client-node's typed calls 16 at a time took most of an hour.
    const platform = new Connection({ name: 'platform', kubeconfig: pp.kubeconfigPath });
    const service = new Connection({ name: 'service', kubeconfig: ps.kubeconfigPath });
    const [cms, secrets, dbs, serviceSecrets] = [new ResourceClient(platform, configMapType), new ResourceClient(platform, secretType), new ResourceClient(platform, databaseType), new ResourceClient(service, secretType)];
    const creates: Array<() => Promise<unknown>> = [];
    for (const name of names) {
      creates.push(() => cms.create(NS, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `${name}-ref`, labels: { 'bench.relsync.dev/kind': 'ref' } }, data: { t: '0' } }));
      if (M >= 2) creates.push(() => cms.create(NS, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `${name}-tmpl` }, data: { v: name } }));
      if (M >= 3) creates.push(() => cms.create(NS, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `${name}-sel`, labels: { app: name } }, data: { v: name } }));
      if (M >= 4) creates.push(() => secrets.create(NS, { apiVersion: 'v1', kind: 'Secret', metadata: { name: `${name}-inv`, labels: { [OWNER]: name } }, stringData: { v: name } }));
      if (M >= 5) creates.push(() => serviceSecrets.create(copyNs, { apiVersion: 'v1', kind: 'Secret', metadata: { name: `${name}-creds` }, stringData: { v: name } }));
      creates.push(() => dbs.create(NS, { apiVersion: `${GROUP}/${VERSION}`, kind: 'Database', metadata: { name }, spec: { configMapName: `${name}-ref` } }));
    }
    await pool(creates, 32, (create) => create());
    platform.close();
    service.close();
    log(`  created in ${Date.now() - createStarted} ms`);

    // --- initial sync
    const expectedCopies = N * (1 + Math.min(M, 4));
    const countCopies = async () => {
      const dbs = ((await s.objects.listNamespacedCustomObject({ group: GROUP, version: VERSION, plural: PLURAL, namespace: copyNs })) as { items: unknown[] }).items.length;
      const cms = (await s.core.listNamespacedConfigMap({ namespace: copyNs, labelSelector: 'relsync.dev/agent=bench' })).items.length;
      const secrets = (await s.core.listNamespacedSecret({ namespace: copyNs, labelSelector: 'relsync.dev/agent=bench' })).items.length;
      const back = M >= 5 ? (await a.core.listNamespacedSecret({ namespace: NS, labelSelector: 'relsync.dev/agent=bench' })).items.length : 0;
      return dbs + cms + secrets + back;
    };
    const initialStarted = Date.now();
    const initialCpuBefore = cpuSnapshot();
    // RELSYNC_RUN_NODE_ARGS, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof", profiles the relsync that does the initial sync and the propagation phases.
    relsync = await startRelsync(configPath, join(dir, 'relsync.log'), ['--log-level', 'info'], { nodeArgs: process.env.RELSYNC_RUN_NODE_ARGS?.split(' ').filter(Boolean) });
    const totalCopies = expectedCopies + (M >= 5 ? N : 0);
    // The end is read from relsync's own count of the copies it created (its /metrics costs the
    // API servers nothing), then confirmed by counting the copies with LISTs. Counting by LIST
    // every 2 s, as the bench did before 2026-12-05, listed every copy made so far at each poll:
    // at 10,000 x 5 that is hundreds of LISTs of up to 60,000 objects, load on the API servers
    // that relsync's figure then paid for.
    await eventually('initial sync', async () => {
      await new Promise((r) => setTimeout(r, 250));
      return (await metric(relsync!, 'relsync_copies_written_total', 'action="create"')) >= totalCopies;
    }, 60 * 60 * 1000);
    const initialSyncMs = Date.now() - initialStarted;
    const initialCpu = cpuSpent(initialCpuBefore, cpuSnapshot(new Map([...harnessNames(), [relsync.child.pid!, 'relsync']])));
    await eventually('every copy listed', async () => (await countCopies()) >= totalCopies, 10 * 60 * 1000);
    log(`initial sync: ${totalCopies} copies in ${initialSyncMs} ms (${round((totalCopies * 1000) / initialSyncMs)} objects/s, including process start)`);
    log(`  CPU: ${formatCpu(initialCpu)} (by process; -platform and -service: each cluster's)`);
    const initialRequests = await requestsByVerb(relsync);
    const initialRequestsTotal = Object.values(initialRequests).reduce((n, v) => n + v, 0);
    log(`  API requests: ${initialRequestsTotal} (${round((initialRequestsTotal / totalCopies) * 100) / 100} per copy): ${Object.entries(initialRequests).map(([k, v]) => `${k} ${v}`).join(', ')}`);

    // --- propagation latency, relsync beside the floor client
    const propagation: Array<Record<string, number>> = [];
    let enqueuedPerEvent = NaN;
    let apiRequestsPerEvent = NaN;
    const drained = async (p: RelsyncProcess) => {
      await eventually('relsync queue drained', async () => (await metric(p, 'relsync_queue_depth')) === 0, 10 * 60 * 1000);
      await new Promise((r) => setTimeout(r, 2000));
      await eventually('relsync queue drained', async () => (await metric(p, 'relsync_queue_depth')) === 0, 10 * 60 * 1000);
    };
    for (const rate of RATES) {
      await drained(relsync);
      const relsyncSeen = await arrivals(ps.kubeConfig, copyNs);
      const floorSeen = await arrivals(ps.kubeConfig, 'floor');
      const stopFloor = await floorClient(pp.kubeConfig, s, NS, 'floor');
      await new Promise((r) => setTimeout(r, 1000));
      // precision: routed events of the source side (the platform), the writer's changes
      const sourceEvents = 'cluster="platform",own_write="false"';
      const routedBefore = await metric(relsync, 'relsync_routed_primaries_sum', sourceEvents);
      const countBefore = await metric(relsync, 'relsync_routed_primaries_count', sourceEvents);
      const eventsBefore = await metric(relsync, 'relsync_watch_events_total', 'change="MODIFIED"');
      const requestsBefore = await metric(relsync, 'relsync_api_requests_total');
      const verbsBefore = await requestsByVerb(relsync);
      const sent = new Map<string, number>();
      await writer(a, rate, DURATION_S, sent);
      await new Promise((r) => setTimeout(r, 3000));
      stopFloor();
      relsyncSeen.stop();
      floorSeen.stop();
      const r = latencies(sent, relsyncSeen.seen);
      const f = latencies(sent, floorSeen.seen);
      const routed = (await metric(relsync, 'relsync_routed_primaries_sum', sourceEvents)) - routedBefore;
      const routedCount = (await metric(relsync, 'relsync_routed_primaries_count', sourceEvents)) - countBefore;
      const events = (await metric(relsync, 'relsync_watch_events_total', 'change="MODIFIED"')) - eventsBefore;
      const requests = (await metric(relsync, 'relsync_api_requests_total')) - requestsBefore;
      const verbs = Object.entries(await requestsByVerb(relsync)).map(([k, v]) => [k, v - (verbsBefore[k] ?? 0)] as const).filter(([, v]) => v > 0);
      enqueuedPerEvent = round((routed / Math.max(1, routedCount)) * 100) / 100;
      apiRequestsPerEvent = round(requests / Math.max(1, sent.size));
      const row = {
        rate,
        writes: sent.size,
        p50Ms: pct(r.values, 50), p95Ms: pct(r.values, 95), p99Ms: pct(r.values, 99), maxMs: pct(r.values, 100), lost: r.lost,
        floorP50Ms: pct(f.values, 50), floorP99Ms: pct(f.values, 99), floorLost: f.lost,
        p99Ratio: round((pct(r.values, 99) / Math.max(1, pct(f.values, 99))) * 100) / 100,
      };
      propagation.push(row);
      log(`propagation at ${rate}/s: relsync p50 ${row.p50Ms} p95 ${row.p95Ms} p99 ${row.p99Ms} max ${row.maxMs} ms (lost ${row.lost}); floor p50 ${row.floorP50Ms} p99 ${row.floorP99Ms} ms; p99 ratio ${row.p99Ratio}`);
      log(`  routing: ${enqueuedPerEvent} primaries enqueued per source event (${routedCount} source events routed; ${events} MODIFIED watch events in all, copies included); ${apiRequestsPerEvent} API requests per write (${verbs.map(([k, v]) => `${k} ${v}`).join(', ')})`);
    }

    // --- sweep: no-op, with K drifted copies, and the bare LIST floor
    const sweepOnce = async () => {
      const out = await runCli(['sweep', '--config', configPath, '-o', 'json']);
      return JSON.parse(out.stdout) as { durationMs: number; copiesRepaired: number; objectsListed: number; phases: SweepPhasesFigure };
    };
    const cache = { objects: await metric(relsync, 'relsync_cache_objects'), mb: round((await metric(relsync, 'relsync_cache_bytes')) / 2 ** 20), hits: await metric(relsync, 'relsync_cache_reads_total', 'result="hit"'), misses: await metric(relsync, 'relsync_cache_reads_total', 'result="miss"') };
    log(`object cache: ${cache.objects} objects, ${cache.mb} MiB (cache.bytes); reads so far: ${cache.hits} hits, ${cache.misses} misses`);
    const rssMb = peakRssMb(relsync.child.pid!);
    await relsync.stop();
    relsync = undefined;
    const noop = await sweepOnce();
    for (let i = 0; i < K; i++) await s.putConfigMap(copyNs, `p${i}-ref`, { t: 'drift' });
    const drifted = await sweepOnce();
    // The floor: one paginated LIST of every type the sweep lists, nothing
    // else — raw JSON over the same REST client and transport relsync uses
    // (client-node's typed deserialization would make the floor slower).
    const floorTypes: ResourceType[] = [databaseType, configMapType, secretType];
    const connections = [new Connection({ name: 'platform', kubeconfig: pp.kubeconfigPath }), new Connection({ name: 'service', kubeconfig: ps.kubeconfigPath })];
    const listStarted = Date.now();
    let listed = 0;
    // What the sweep lists: everything on the platform; on the service side
    // relsync's copies, and every Secret (the source of the service-origin rule).
    for (const [connection, filtered] of [[connections[0]!, false], [connections[1]!, true]] as const) {
      for (const type of floorTypes) {
        const labelSelector = filtered && type.resource !== 'secrets' ? 'relsync.dev/agent=bench' : undefined;
        listed += (await new ResourceClient(connection, type).listAll({ labelSelector })).items.length;
      }
    }
    const listFloorMs = Date.now() - listStarted;
    for (const c of connections) c.close();
    log(`sweep: no-op ${noop.durationMs} ms (${noop.objectsListed} objects listed), with ${K} drifted copies ${drifted.durationMs} ms (repaired ${drifted.copiesRepaired}); bare paginated LIST of the same types ${listFloorMs} ms (${listed} objects); no-op/LIST ratio ${round((noop.durationMs / Math.max(1, listFloorMs)) * 100) / 100}`);
    log(`  no-op sweep phases: LISTs ${noop.phases.listMs} ms, reconciles ${noop.phases.reconcileMs} ms, orphan clean-up ${noop.phases.cleanupMs} ms`);

    // --- store against live relationships
    const db = new BetterSqlite3(storePath, { readonly: true });
    const rows = (sql: string) => (db.prepare(sql).get() as { n: number }).n;
    const storeRows = rows('select count(*) as n from relations');
    const primaryRows = rows('select count(*) as n from primaries');
    db.close();
    const liveRelations = N * M;
    const storeBytes = statSync(storePath).size;
    log(`store: ${primaryRows} primaries, ${storeRows} relations (live: ${N} primaries, ${liveRelations} relations), ${round(storeBytes / 2 ** 20)} MiB; relsync peak RSS ${rssMb} MB`);

    // --- restart with K changes made while down
    for (let i = 0; i < K; i++) await a.putConfigMap(NS, `p${i}-ref`, { t: `restart-${i}` });
    const restartStarted = Date.now();
    relsync = await startRelsync(configPath, join(dir, 'relsync-restart.log'), ['--log-level', 'info']);
    await eventually('changes made while down arrive', async () => {
      for (let i = 0; i < K; i++) if ((await s.configMap(copyNs, `p${i}-ref`))?.data?.t !== `restart-${i}`) return false;
      return true;
    }, 10 * 60 * 1000);
    const restartConvergeMs = Date.now() - restartStarted;
    log(`restart: ${K} changes made while down converged ${restartConvergeMs} ms after start`);
    await relsync.stop();

    // --- a scheduled no-op sweep in a warm process (beside its watches, as users run it): the
    // one-shot `relsync sweep` above pays a cold start (JIT, store pages). Every 20 s; the second
    // sweep that ran to the end is reported (a sweep due while one runs is skipped).
    const scheduledConfig = writeConfig(dir, { ...config, resync: { schedule: '*/20 * * * * *', onStartup: false } }, 'relsync-scheduled.yaml');
    const scheduled = (relsync = await startRelsync(scheduledConfig, join(dir, 'relsync-scheduled.log'), ['--log-level', 'info']));
    const finished = () => scheduled.log().split('\n').filter((l) => l.includes('"msg":"sweep finished"')).map((l) => JSON.parse(l) as { durationMs: number; phases: SweepPhasesFigure });
    const warm = (await eventually('two scheduled sweeps', async () => (finished().length >= 2 ? finished() : undefined), 10 * 60 * 1000))[1]!;
    await relsync.stop();
    relsync = undefined;
    log(`scheduled no-op sweep in a warm process: ${warm.durationMs} ms (LISTs ${warm.phases.listMs}, reconciles ${warm.phases.reconcileMs}, clean-up ${warm.phases.cleanupMs} ms; ${warm.phases.skipped} primaries skipped); / bare LIST ${round((warm.durationMs / Math.max(1, listFloorMs)) * 100) / 100}`);

    // --- the floor bulk copier, last, when relsync no longer runs: nothing measured after it, so its
    // copies need not go (deleting 60,000 of them took the API server over ten minutes). From the
    // same starting point as relsync's initial sync (every source exists, no copy of it in
    // FLOOR_BULK_NS) until its last create is answered; its clusters hold relsync's copies too by
    // then, a little more for the API servers to keep than relsync had. relsync's figure ends at
    // the first 250 ms poll of its metrics that counts every copy created.
    const floorStarted = Date.now();
    const floorCpuBefore = cpuSnapshot();
    const floorBulk = await floorBulkCopy(pp, ps, copyNs);
    const floorMs = Date.now() - floorStarted;
    const floorCpu = cpuSpent(floorCpuBefore, cpuSnapshot());
    if (floorBulk.copies !== totalCopies) throw new Error(`floor bulk copier: ${floorBulk.copies} copies, relsync ${totalCopies}`);
    const ratioToFloor = round((initialSyncMs / Math.max(1, floorMs)) * 100) / 100;
    log(`floor bulk copier: ${floorBulk.copies} copies in ${floorMs} ms (${round((floorBulk.copies * 1000) / floorMs)} objects/s, ${FLOOR_CONCURRENCY} creates at once); relsync's initial sync / floor ratio ${ratioToFloor}`);
    log(`  CPU: ${formatCpu(floorCpu)} (the floor copier runs in the bench process)`);

    const first = propagation[0]!;
    const result = {
      date: new Date().toISOString(),
      machine: { cores: cpus().length, memoryGiB: Math.round(totalmem() / 2 ** 30) },
      primaries: N,
      relatedPerPrimary: M,
      workers: WORKERS,
      initialSync: { ms: initialSyncMs, copies: totalCopies, objectsPerSecond: round((totalCopies * 1000) / initialSyncMs), floorMs, ratioToFloor, cpuSeconds: initialCpu, floorCpuSeconds: floorCpu, requests: initialRequestsTotal, requestsByVerb: initialRequests },
      propagation: { p50Ms: first.p50Ms, p95Ms: first.p95Ms, p99Ms: first.p99Ms, maxMs: first.maxMs, byRate: propagation },
      floor: { p50Ms: first.floorP50Ms, p99Ms: first.floorP99Ms },
      enqueuedPerEvent,
      apiRequestsPerEvent,
      sweep: { noopMs: noop.durationMs, driftedMs: drifted.durationMs, drifted: K, listFloorMs, noopPhases: noop.phases, scheduledWarmMs: warm.durationMs, scheduledWarmPhases: warm.phases },
      peakRssMb: rssMb,
      cache,
      storeRows,
      storeBytes,
      liveRelations,
      restartConvergeMs,
    };
    mkdirSync(resultsDir, { recursive: true });
    writeFileSync(join(resultsDir, 'latest.json'), `${JSON.stringify(result, null, 2)}\n`);
    writeFileSync(join(resultsDir, `${result.date.replace(/[:.]/g, '-')}-${N}x${M}.json`), `${JSON.stringify(result, null, 2)}\n`);
    log(`\nwritten to bench/results/latest.json`);
  } finally {
    await relsync?.stop();
    await Promise.all(planes.map((p) => p.stop()));
  }
}

main().catch((err: unknown) => {
  console.error(`bench failed: ${(err as Error).stack ?? String(err)}`);
  process.exit(1);
});
