/**
 * The crash loop: relsync killed with SIGKILL at random moments while a
 * writer keeps changing, creating and deleting primaries and related objects
 * in two tenants (and service-side objects that flow back), then restarted.
 * At the end the writer stops, and the live clusters are checked against what
 * the rules say must hold — computed from the live source objects, so the
 * check does not trust anything relsync itself recorded:
 *
 * - lost: a destination that is missing or does not hold its source's content;
 * - orphans: a copy carrying relsync's marks that no live source accounts for,
 *   or a primary still stuck in deletion;
 * - crossTenant: a copy whose content or marks came from the other tenant;
 * - integrity: `PRAGMA integrity_check` of the store after every kill and at
 *   the end;
 * - storeMismatches: store rows (primaries and relations) that differ from
 *   the live relationships, after a clean stop.
 *
 * With replicas (`--replicas N`), N relsync processes share six tenants over
 * six shards (sharding.shards), and each kill is of one replica, at random.
 * Also checked then: every shard is held by exactly one replica at the end,
 * and no replica wrote for a shard it did not hold (the service cluster's
 * audit log against the replicas' logged holdings, test/harness/shard-holdings.ts);
 * the store rows compared are the union of the held shards' stores, read
 * before the replicas stop (a shard's store goes with the shard).
 *
 * Used by `npm run chaos -- --kills K [--replicas N]` (chaos/run.ts) and, with
 * a few kills, by the end-to-end test test/e2e/crash-loop.test.ts.
 */
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import type { V1ConfigMap, V1Secret } from '@kubernetes/client-node';
import { setTimeout as sleep } from 'node:timers/promises';
import { parse } from 'yaml';
import { acceptTokens, startControlPlane, startControlPlanes, type ControlPlane } from '../test/harness/control-plane.js';
import { installCrd } from '../test/harness/kube.js';
import { startRelsync, writeConfig, type RelsyncProcess } from '../test/harness/relsync-process.js';
import { holdingsFromLogs, shardsHeld, writesOutsideHoldings } from '../test/harness/shard-holdings.js';
import { ClusterClient, defaultCopyNamespace, GROUP, PLURAL, VERSION, type Database } from '../test/harness/tenant.js';
import { ShardMap } from '../src/config/shard-map.js';

export interface CrashLoopOptions {
  readonly kills: number;
  /** Seed of every random choice (kill moments, writer operations). */
  readonly seed: number;
  /** A kill comes this long after a start, at random: [min, max] ms. */
  readonly killAfterMs: readonly [number, number];
  /** How long convergence may take after the last restart. */
  readonly convergeTimeoutMs: number;
  readonly log: (line: string) => void;
  /** relsync processes; above 1 they share the tenants over as many shards as tenants. Default 1. */
  readonly replicas?: number;
  /** Platform clusters (tenants); default 2, or 6 with replicas. */
  readonly tenants?: number;
  /**
   * After each kill the victim's store is lost (its files deleted) or replaced by an older copy of
   * itself (one saved at an earlier kill), at random: relsync must be correct with any store.
   */
  readonly storeLoss?: boolean;
}

export interface CrashLoopResult {
  readonly kills: number;
  readonly changes: number;
  readonly lost: number;
  readonly orphans: number;
  readonly crossTenant: number;
  /** 'ok', or the first answer of integrity_check that was not. */
  readonly integrity: string;
  readonly integrityChecks: number;
  readonly storeMismatches: number;
  readonly convergeMs: number;
  /** What was wrong at the end, one line each (empty when nothing). */
  readonly problems: readonly string[];
  readonly seed: number;
  readonly replicas: number;
  /** With replicas: writes of copies checked against who held their shard (the audit log). */
  readonly writesChecked: number;
  /** Whether stores were lost or aged at the kills. */
  readonly storeLoss: boolean;
  /** Copies of the anchors (sources and primaries that live through the whole run) deleted or replaced (uid changed) at any kill. */
  readonly wronglyDeleted: number;
}

type Tenant = string;
/** Identical namespace and primary names in both tenants, so that a crossing would collide. */
const NAMESPACES = ['shop', 'blog'];
const PRIMARIES = ['db-0', 'db-1', 'db-2', 'db-3', 'db-4'];
const EXTRAS = 2;
const AGENT = 'chaos';
/**
 * A primary per tenant that lives through the whole run, with related objects that are changed
 * but never deleted nor relabelled: its copies must keep their uids whatever happens to the store.
 */
const ANCHOR = { ns: 'shop', name: 'anchor', cfg: 'anchor-cfg', tls: 'anchor-tls', extra: 'anchor-extra' } as const;

/** mulberry32: small, seedable, good enough to pick operations. */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const code = (err: unknown) => (err as { code?: number }).code;

export async function runCrashLoop(options: CrashLoopOptions): Promise<CrashLoopResult> {
  const { log } = options;
  const rand = random(options.seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
  const dir = mkdtempSync(join(tmpdir(), 'relsync-chaos-'));
  const replicaCount = options.replicas ?? 1;
  const sharded = replicaCount > 1;
  const TENANTS: readonly Tenant[] = Array.from({ length: options.tenants ?? (sharded ? 6 : 2) }, (_, i) => `tenant-${String.fromCharCode(97 + i)}`);
  const REPLICAS = Array.from({ length: replicaCount }, (_, i) => `r${i + 1}`);
  // The service cluster keeps an audit log with replicas: who wrote what, checked against who held which shard.
  const [service, tenantPlanes] = await Promise.all([startControlPlane('service', { audit: sharded }), startControlPlanes(...TENANTS)]);
  const planes: ControlPlane[] = [service, ...tenantPlanes];
  const relsyncs = new Map<string, RelsyncProcess>();
  let writing = true;
  try {
    await Promise.all(planes.map((p) => installCrd(p.kubeConfig)));
    const tokens = Object.fromEntries(REPLICAS.map((r) => [`relsync-${r}`, `token-${r}-${options.seed}`]));
    if (sharded) await acceptTokens(service, tokens);
    const svc = new ClusterClient('service', service.kubeConfig);
    const platform: Record<Tenant, ClusterClient> = Object.fromEntries(tenantPlanes.map((p) => [p.name, new ClusterClient(p.name, p.kubeConfig)]));
    const storeDir = (r: string) => join(dir, r);
    const storePath = (r: string) => join(storeDir(r), 'relsync.db');
    const serviceKubeconfig = (r: string) => {
      if (!sharded) return service.kubeconfigPath;
      // This replica's own user, so that the audit log tells replicas apart.
      const kubeconfig = parse(readFileSync(service.kubeconfigPath, 'utf8')) as { users: Array<{ user: Record<string, string> }> };
      kubeconfig.users[0]!.user = { token: tokens[`relsync-${r}`]! };
      const path = join(dir, `service-${r}.yaml`);
      writeFileSync(path, JSON.stringify(kubeconfig));
      return path;
    };
    const configPath = (r: string) => writeConfig(dir, {
      agentName: AGENT,
      platformClusters: tenantPlanes.map((p) => ({ name: p.name, kubeconfig: p.kubeconfigPath })),
      serviceCluster: { name: 'service', kubeconfig: serviceKubeconfig(r) },
      store: { path: storePath(r) },
      ...(sharded ? { sharding: { shards: TENANTS.length } } : {}),
      // A killed leader holds the lease until it expires: keep that short.
      leaderElection: { leaseDurationSeconds: 3, renewDeadlineSeconds: 2, retryPeriodSeconds: 1 },
      resources: [
        {
          group: GROUP,
          resource: PLURAL,
          related: [
            { id: 'config', origin: 'platform', resource: 'configmaps', reference: { path: '.spec.configMapName' } },
            { id: 'tls', origin: 'platform', resource: 'secrets', reference: { path: '.spec.secretName' } },
            { id: 'extra', origin: 'platform', resource: 'configmaps', selector: { matchLabels: { app: '{{ name }}' } } },
            // Its "operator" writes these at random, also before a copy exists: no ownerReference to give.
            { id: 'conn', origin: 'service', resource: 'secrets', template: { name: '{{ name }}-conn' }, provenance: { anyInNamespace: true } },
          ],
        },
      ],
    }, `${r}.yaml`);
    for (const t of TENANTS) for (const ns of NAMESPACES) await platform[t]!.ensureNamespace(ns);
    for (const t of TENANTS) {
      const c = platform[t]!;
      await c.putConfigMap(ANCHOR.ns, ANCHOR.cfg, { v: `${t}:anchor` });
      await c.putSecret(ANCHOR.ns, ANCHOR.tls, { k: `${t}:anchor` });
      await c.putConfigMap(ANCHOR.ns, ANCHOR.extra, { v: `${t}:anchor` }, { app: ANCHOR.name });
      await c.createDatabase(ANCHOR.ns, ANCHOR.name, { configMapName: ANCHOR.cfg, secretName: ANCHOR.tls });
    }
    /** The anchors' copies in the service cluster, by `kind/ns/name`: their uids once synced. */
    const anchorCopies = async (): Promise<Map<string, string | undefined>> => {
      const found = new Map<string, string | undefined>();
      for (const t of TENANTS) {
        const ns = defaultCopyNamespace(t, ANCHOR.ns);
        found.set(`databases/${ns}/${ANCHOR.name}`, (await svc.database(ns, ANCHOR.name))?.metadata.uid);
        for (const name of [ANCHOR.cfg, ANCHOR.extra]) found.set(`configmaps/${ns}/${name}`, (await svc.configMap(ns, name))?.metadata?.uid);
        found.set(`secrets/${ns}/${ANCHOR.tls}`, (await svc.secret(ns, ANCHOR.tls))?.metadata?.uid);
      }
      return found;
    };
    let anchors = new Map<string, string | undefined>();
    /** Anchor copies seen deleted or replaced. */
    const wronglyDeleted = new Set<string>();
    const checkAnchors = async (when: string) => {
      const now = await anchorCopies();
      for (const [key, uid] of anchors) {
        if (now.get(key) === uid) continue;
        if (!wronglyDeleted.has(key)) log(`wrongly deleted (${when}): ${key} ${now.get(key) === undefined ? 'is gone' : `has a new uid (${now.get(key)}, was ${uid})`}`);
        wronglyDeleted.add(key);
        // Counted once; its new incarnation is what later checks compare with.
      }
      for (const [key, uid] of now) if (uid !== undefined) anchors.set(key, uid);
    };

    // ---- the writer --------------------------------------------------------
    let changes = 0;
    let seq = 0;
    const value = (who: string) => `${who}:${++seq}`;
    const tenantOps = async (t: Tenant) => {
      const c = platform[t]!;
      const ns = pick(NAMESPACES);
      const p = pick(PRIMARIES);
      const db = await c.database(ns, p);
      const live = db !== undefined && !db.metadata.deletionTimestamp;
      const r = rand();
      if (!db) {
        if (r < 0.5) {
          await c.putConfigMap(ns, `${p}-cfg`, { v: value(t) });
          await c.putSecret(ns, `${p}-tls`, { k: value(t) });
          await c.createDatabase(ns, p, { configMapName: `${p}-cfg`, secretName: `${p}-tls` });
          changes += 3;
        }
        return;
      }
      if (!live) return;
      if (r < 0.05) await c.putConfigMap(ANCHOR.ns, ANCHOR.cfg, { v: value(t) });
      else if (r < 0.3) await c.putConfigMap(ns, `${p}-cfg`, { v: value(t) });
      else if (r < 0.45) await c.putSecret(ns, `${p}-tls`, { k: value(t) });
      else if (r < 0.6) {
        // a selector match appears, changes, or loses its label
        const name = `${p}-extra-${Math.floor(rand() * EXTRAS)}`;
        const existing = await c.configMap(ns, name);
        const roll = rand();
        if (existing && roll < 0.25) await c.core.replaceNamespacedConfigMap({ namespace: ns, name, body: { ...existing, metadata: { ...existing.metadata, labels: {} } } });
        else if (existing && roll < 0.5) await c.deleteConfigMap(ns, name);
        else if (existing) await c.core.replaceNamespacedConfigMap({ namespace: ns, name, body: { ...existing, metadata: { ...existing.metadata, labels: { app: p } }, data: { v: value(t) } } });
        else await c.putConfigMap(ns, name, { v: value(t) }, { app: p });
      } else if (r < 0.7) await c.deleteConfigMap(ns, `${p}-cfg`).catch(ignoreNotFound);
      else if (r < 0.8) await c.deleteDatabase(ns, p);
      else if (r < 0.9) await c.updateDatabase(ns, p, (d) => (d.spec = { ...d.spec, size: value(t) }));
      else return;
      changes++;
    };
    const serviceOps = async () => {
      // The service side's operator writes connection Secrets next to the copies.
      const t = pick(TENANTS);
      const ns = defaultCopyNamespace(t, pick(NAMESPACES));
      const p = pick(PRIMARIES);
      if (!(await svc.database(ns, p))) return;
      if (rand() < 0.85) await svc.putSecret(ns, `${p}-conn`, { url: value(`svc-${t}`) });
      else await svc.deleteSecret(ns, `${p}-conn`).catch(ignoreNotFound);
      changes++;
    };
    const lane = async (op: () => Promise<void>) => {
      while (writing) {
        try {
          await op();
        } catch (err) {
          // 409s from racing our own earlier write, or a namespace relsync has
          // not created yet: the writer moves on; it never stops the run.
          if (![404, 409].includes(code(err) ?? 0)) log(`writer: ${(err as Error).message}`);
        }
        await sleep(10);
      }
    };
    const writers = [...TENANTS.map((t) => lane(() => tenantOps(t))), lane(serviceOps)];

    // ---- the kills ---------------------------------------------------------
    let runs = 0;
    let integrity = 'ok';
    let integrityChecks = 0;
    /** A replica's store and its shards' stores (those its last run left), each checked. */
    const checkIntegrity = (r: string) => {
      for (const path of storesOf(storeDir(r))) {
        const db = new BetterSqlite3(path);
        try {
          const answer = (db.pragma('integrity_check') as Array<{ integrity_check: string }>).map((row) => row.integrity_check).join('; ');
          integrityChecks++;
          if (answer !== 'ok' && integrity === 'ok') integrity = `${path}: ${answer}`;
        } finally {
          db.close();
        }
      }
    };
    const logs: Record<string, string[]> = Object.fromEntries(REPLICAS.map((r) => [r, []]));
    const killedAt: Record<string, number[]> = Object.fromEntries(REPLICAS.map((r) => [r, []]));
    const start = async (r: string) => {
      mkdirSync(storeDir(r), { recursive: true });
      const file = join(dir, `relsync-${r}-${++runs}.log`);
      logs[r]!.push(file);
      // killedAt is indexed by run: a run that is not killed ends at Infinity.
      killedAt[r]!.length = logs[r]!.length - 1;
      relsyncs.set(r, await startRelsync(configPath(r), file, ['--log-level', 'info']));
    };
    for (const r of REPLICAS) await start(r);
    const anchorsDeadline = Date.now() + 120_000;
    while ([...(anchors = await anchorCopies()).values()].some((uid) => uid === undefined)) {
      if (Date.now() > anchorsDeadline) throw new Error(`the anchors were not synced within 120 s: ${[...anchors].filter(([, uid]) => !uid).map(([k]) => k).join(', ')}`);
      await sleep(500);
    }
    log(`${anchors.size} anchor copies synced; their uids must not change`);
    /** Older copies of each replica's store, saved at earlier kills, for storeLoss. */
    const olderStores: Record<string, string[]> = Object.fromEntries(REPLICAS.map((r) => [r, []]));
    const loseOrAge = (r: string, k: number) => {
      const path = storePath(r);
      const older = olderStores[r]!;
      // This run's store (with its WAL: a consistent state) is kept as an older copy for a later kill.
      const saved = join(storeDir(r), `older-${k}`);
      mkdirSync(saved, { recursive: true });
      for (const suffix of ['', '-wal']) if (existsSync(path + suffix)) copyFileSync(path + suffix, join(saved, `relsync.db${suffix}`));
      const choice = older.length > 0 && rand() < 0.5 ? pick(older) : undefined;
      older.push(saved);
      for (const suffix of ['', '-wal', '-shm']) rmSync(path + suffix, { force: true });
      if (!choice) return 'lost (deleted)';
      for (const suffix of ['', '-wal']) if (existsSync(join(choice, `relsync.db${suffix}`))) copyFileSync(join(choice, `relsync.db${suffix}`), path + suffix);
      return `replaced by an older copy (${choice.slice(choice.lastIndexOf('older-'))})`;
    };
    for (let k = 1; k <= options.kills; k++) {
      const [min, max] = options.killAfterMs;
      const after = Math.round(min + rand() * (max - min));
      await sleep(after);
      const victim = pick(REPLICAS);
      await relsyncs.get(victim)!.kill();
      killedAt[victim]!.push(Date.now());
      checkIntegrity(victim);
      await checkAnchors(`kill ${k}`);
      const store = options.storeLoss ? `; store ${loseOrAge(victim, k)}` : '';
      log(`kill ${k}/${options.kills}: SIGKILL of ${victim} ${after} ms after the last start; ${changes} changes so far; store integrity ${integrity}${store}`);
      await start(victim);
    }
    await sleep(options.killAfterMs[1]);
    writing = false;
    await Promise.all(writers);
    log(`writer stopped after ${changes} changes; waiting for convergence`);

    // ---- convergence -------------------------------------------------------
    const stoppedAt = Date.now();
    let check = await liveCheck(platform, svc, TENANTS);
    while ((check.lost.length > 0 || check.orphans.length > 0) && Date.now() - stoppedAt < options.convergeTimeoutMs) {
      await sleep(500);
      check = await liveCheck(platform, svc, TENANTS);
    }
    const convergeMs = Date.now() - stoppedAt;
    await checkAnchors('the end');
    const shardProblems: string[] = [];
    let storeProblems: string[];
    if (sharded) {
      // Every shard held by exactly one replica, once they agree (a restarted one takes its share back).
      const deadline = Date.now() + 60_000;
      let held: Array<number[] | undefined> = [];
      for (;;) {
        held = await Promise.all(REPLICAS.map((r) => shardsHeld(relsyncs.get(r)!.httpPort).catch(() => undefined)));
        const all = held.flatMap((h) => h ?? []).sort((a, b) => a - b);
        if (held.every((h) => h !== undefined) && all.length === TENANTS.length && all.every((s, i) => s === i)) break;
        if (Date.now() > deadline) {
          shardProblems.push(`shards not held exactly once at the end: ${REPLICAS.map((r, i) => `${r}: ${held[i]?.join(',') ?? 'not ready'}`).join('; ')}`);
          break;
        }
        await sleep(500);
      }
      log(`shards at the end: ${REPLICAS.map((r, i) => `${r} holds ${held[i]?.join(',') ?? '?'}`).join('; ')}`);
      // A shard's store goes with the shard: read those held (as each replica says, relsync inspect shards) while they are.
      const heldStores = REPLICAS.flatMap((r) => (JSON.parse(readFileSync(`${storePath(r)}.shards.json`, 'utf8')) as { held: Array<{ store: string; phase: string }> }).held.filter((h) => h.phase === 'working' && existsSync(h.store)).map((h) => h.store));
      storeProblems = await compareStore(heldStores, platform, TENANTS, false);
    }
    const exits = await Promise.all(REPLICAS.map(async (r) => [r, await relsyncs.get(r)!.stop()] as const));
    relsyncs.clear();
    for (const r of REPLICAS) checkIntegrity(r);
    storeProblems ??= await compareStore([storePath(REPLICAS[0]!)], platform, TENANTS, true);
    let writesChecked = 0;
    if (sharded) {
      const map = new ShardMap(TENANTS.length, TENANTS.map((name) => ({ name, kubeconfig: name, context: undefined })));
      const shardOf = new Map(TENANTS.flatMap((t) => NAMESPACES.map((ns) => [defaultCopyNamespace(t, ns), map.shardOf(t)] as const)));
      const checked = writesOutsideHoldings(service.auditLogPath!, holdingsFromLogs(logs, killedAt), (ns) => shardOf.get(ns), (user) => (user.startsWith('relsync-r') ? user.slice('relsync-'.length) : undefined));
      writesChecked = checked.checked;
      shardProblems.push(...checked.problems);
      // An audit log without the copies' writes (not kept, or of other users) would check nothing and pass.
      if (writesChecked < changes / 10) shardProblems.push(`only ${writesChecked} writes of copies found in the audit log for ${changes} changes: the check saw too little to tell`);
      log(`${checked.checked} writes of copies checked against the replicas' holdings`);
    }
    const problems = [
      ...exits.filter(([, code]) => code !== 0).map(([r, code]) => `${r} exited with ${code} on SIGTERM`),
      ...shardProblems,
      ...check.lost.map((p) => `lost: ${p}`),
      ...check.orphans.map((p) => `orphan: ${p}`),
      ...check.crossTenant.map((p) => `crossTenant: ${p}`),
      ...storeProblems.map((p) => `store: ${p}`),
      ...[...wronglyDeleted].map((k) => `wrongly deleted: ${k}`),
    ];
    return {
      kills: options.kills,
      changes,
      lost: check.lost.length,
      orphans: check.orphans.length,
      crossTenant: check.crossTenant.length,
      integrity,
      integrityChecks,
      storeMismatches: storeProblems.length,
      convergeMs,
      problems,
      seed: options.seed,
      replicas: replicaCount,
      writesChecked,
      storeLoss: options.storeLoss ?? false,
      wronglyDeleted: wronglyDeleted.size,
    };
  } finally {
    writing = false;
    await Promise.all([...relsyncs.values()].map((p) => p.kill()));
    await Promise.all(planes.map((p) => p.stop()));
  }
}

/** A replica's store files: its own, and its shards' (`<store>.shard-…`). */
function storesOf(storeDir: string): string[] {
  if (!existsSync(storeDir)) return [];
  return readdirSync(storeDir).filter((f) => f.endsWith('.db') && f.startsWith('relsync')).map((f) => join(storeDir, f));
}

function ignoreNotFound(err: unknown): void {
  if (code(err) !== 404) throw err;
}

interface LiveCheck {
  lost: string[];
  orphans: string[];
  crossTenant: string[];
}

/** JSON with sorted keys, so that key order never counts as a difference. */
const canonical = (v: unknown): string =>
  v && typeof v === 'object' && !Array.isArray(v)
    ? `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`).join(',')}}`
    : JSON.stringify(v ?? null);
const same = (a: unknown, b: unknown) => canonical(a ?? {}) === canonical(b ?? {});
const source = (o: V1ConfigMap | V1Secret | Database) => `${o.metadata?.annotations?.['relsync.dev/source-cluster']}/${o.metadata?.annotations?.['relsync.dev/source-namespace']}/${o.metadata?.annotations?.['relsync.dev/source-name']}`;
const marked = (o: V1ConfigMap | V1Secret | Database) => o.metadata?.labels?.['relsync.dev/agent'] === AGENT;

/** What the rules say must exist, from the live sources, against what does. */
async function liveCheck(platform: Record<Tenant, ClusterClient>, svc: ClusterClient, TENANTS: readonly Tenant[]): Promise<LiveCheck> {
  const out: LiveCheck = { lost: [], orphans: [], crossTenant: [] };
  const svcConfigMaps = (await svc.core.listConfigMapForAllNamespaces({ labelSelector: `relsync.dev/agent=${AGENT}` })).items;
  const svcSecrets = (await svc.core.listSecretForAllNamespaces()).items;
  const svcDatabases = ((await svc.objects.listClusterCustomObject({ group: GROUP, version: VERSION, plural: PLURAL })) as { items: Database[] }).items;
  const at = (items: Array<V1ConfigMap | V1Secret | Database>, ns: string, name: string) => items.find((o) => o.metadata?.namespace === ns && o.metadata?.name === name);
  const expectedInService = new Set<string>();
  const expectedInPlatform = new Set<string>();

  for (const t of TENANTS) {
    const c = platform[t]!;
    const databases = ((await c.objects.listClusterCustomObject({ group: GROUP, version: VERSION, plural: PLURAL })) as { items: Database[] }).items;
    const configMaps = (await c.core.listConfigMapForAllNamespaces()).items;
    const secrets = (await c.core.listSecretForAllNamespaces()).items;
    for (const db of databases) {
      const ns = db.metadata.namespace!;
      const name = db.metadata.name;
      if (db.metadata.deletionTimestamp) {
        out.orphans.push(`${t}/${ns}/${name}: primary still being deleted`);
        continue;
      }
      const copyNs = defaultCopyNamespace(t, ns);
      const want = (kind: string, destNs: string, destName: string) => expectedInService.add(`${kind}/${destNs}/${destName}`);
      want('databases', copyNs, name);
      const copy = at(svcDatabases, copyNs, name) as Database | undefined;
      if (!copy || !same(copy.spec, db.spec)) out.lost.push(`${t}/${ns}/${name}: primary copy ${copy ? 'stale' : 'missing'}`);
      const cfgName = db.spec?.configMapName as string;
      const tlsName = db.spec?.secretName as string;
      const related: Array<{ kind: 'configmaps' | 'secrets'; src: V1ConfigMap | V1Secret }> = [];
      const cfg = at(configMaps, ns, cfgName) as V1ConfigMap | undefined;
      if (cfg) related.push({ kind: 'configmaps', src: cfg });
      const tls = at(secrets, ns, tlsName) as V1Secret | undefined;
      if (tls) related.push({ kind: 'secrets', src: tls });
      for (const extra of configMaps) if (extra.metadata?.namespace === ns && extra.metadata.labels?.app === name) related.push({ kind: 'configmaps', src: extra });
      for (const { kind, src } of related) {
        want(kind, copyNs, src.metadata!.name!);
        const dest = at(kind === 'configmaps' ? svcConfigMaps : svcSecrets, copyNs, src.metadata!.name!) as V1ConfigMap | V1Secret | undefined;
        if (!dest || !same(dest.data, src.data)) out.lost.push(`${t}/${ns}/${src.metadata!.name} (${kind}): copy ${dest ? 'stale' : 'missing'}`);
      }
      // service origin: the operator's connection Secret comes back to the tenant
      expectedInPlatform.add(`${t}/${ns}/${name}-conn`);
      const conn = at(svcSecrets, copyNs, `${name}-conn`) as V1Secret | undefined;
      const back = at(secrets, ns, `${name}-conn`) as V1Secret | undefined;
      if (conn && (!back || !same(back.data, conn.data))) out.lost.push(`service/${copyNs}/${name}-conn: copy in ${t} ${back ? 'stale' : 'missing'}`);
      if (!conn && back && marked(back)) out.orphans.push(`${t}/${ns}/${name}-conn: copy of a deleted service Secret`);
    }
    for (const s of secrets) {
      if (!marked(s)) continue;
      if (!expectedInPlatform.has(`${t}/${s.metadata!.namespace}/${s.metadata!.name}`)) out.orphans.push(`${t}/${s.metadata!.namespace}/${s.metadata!.name}: copy whose primary is gone`);
      const url = s.data?.url ? Buffer.from(s.data.url, 'base64').toString() : '';
      if (!url.startsWith(`svc-${t}:`)) out.crossTenant.push(`${t}/${s.metadata!.namespace}/${s.metadata!.name} holds ${url.split(':')[0]}'s data`);
    }
  }

  const tenantOf = (ns: string) => TENANTS.find((t) => NAMESPACES.some((n) => defaultCopyNamespace(t, n) === ns));
  const inService: Array<[string, V1ConfigMap | V1Secret | Database]> = [
    ...svcConfigMaps.map((o) => ['configmaps', o] as [string, V1ConfigMap]),
    ...svcSecrets.filter(marked).map((o) => ['secrets', o] as [string, V1Secret]),
    ...svcDatabases.filter(marked).map((o) => ['databases', o] as [string, Database]),
  ];
  for (const [kind, o] of inService) {
    const key = `${kind}/${o.metadata!.namespace}/${o.metadata!.name}`;
    if (!expectedInService.has(key)) out.orphans.push(`service ${key} (source ${source(o)})`);
    const t = tenantOf(o.metadata!.namespace!);
    const origin = o.metadata?.annotations?.['relsync.dev/source-cluster'];
    const payload = kind === 'databases' ? ((o as Database).spec as Record<string, unknown> | undefined) : (o as V1ConfigMap).data;
    const values = Object.values(payload ?? {}).map((v) => (kind === 'secrets' ? Buffer.from(String(v), 'base64').toString() : String(v)));
    if (origin !== t || values.some((v) => /^tenant-/.test(v) && !v.startsWith(`${t}:`))) out.crossTenant.push(`service ${key} in ${t}'s namespace comes from ${origin}`);
  }
  return out;
}

/**
 * Store rows against the live relationships: of one store after a clean stop, or of every held
 * shard's store together while running (`stopped` false: work may still be pending there).
 */
async function compareStore(storePaths: readonly string[], platform: Record<Tenant, ClusterClient>, TENANTS: readonly Tenant[], stopped: boolean): Promise<string[]> {
  const want = { primaries: new Set<string>(), relations: new Set<string>() };
  for (const t of TENANTS) {
    const c = platform[t]!;
    const databases = ((await c.objects.listClusterCustomObject({ group: GROUP, version: VERSION, plural: PLURAL })) as { items: Database[] }).items;
    const configMaps = (await c.core.listConfigMapForAllNamespaces()).items;
    for (const db of databases) {
      const ns = db.metadata.namespace!;
      const name = db.metadata.name;
      want.primaries.add(`${t}/${ns}/${name}`);
      want.relations.add(`${t}/${ns}/${name} config ${t}/${ns}/${db.spec?.configMapName}`);
      want.relations.add(`${t}/${ns}/${name} tls ${t}/${ns}/${db.spec?.secretName}`);
      want.relations.add(`${t}/${ns}/${name} conn service/${defaultCopyNamespace(t, ns)}/${name}-conn`);
      for (const cm of configMaps) if (cm.metadata?.namespace === ns && cm.metadata.labels?.app === name) want.relations.add(`${t}/${ns}/${name} extra ${t}/${ns}/${cm.metadata.name}`);
    }
  }
  const have = { primaries: new Set<string>(), relations: new Set<string>() };
  const problems: string[] = [];
  for (const path of storePaths) {
    const db = new BetterSqlite3(path, { readonly: true });
    try {
      for (const r of db.prepare('select cluster, namespace, name from primaries').all() as Array<Record<string, string>>) have.primaries.add(`${r.cluster}/${r.namespace}/${r.name}`);
      for (const r of db.prepare('select primary_cluster, primary_namespace, primary_name, rule_id, source_cluster, source_namespace, source_name from relations').all() as Array<Record<string, string>>) {
        have.relations.add(`${r.primary_cluster}/${r.primary_namespace}/${r.primary_name} ${r.rule_id} ${r.source_cluster}/${r.source_namespace}/${r.source_name}`);
      }
      const pending = (db.prepare('select count(*) as n from pending_primaries').get() as { n: number }).n;
      if (stopped && pending > 0) problems.push(`pending_primaries: ${pending} rows left after a clean stop`);
    } finally {
      db.close();
    }
  }
  for (const table of ['primaries', 'relations'] as const) {
    for (const k of want[table]) if (!have[table].has(k)) problems.push(`${table}: missing row ${k}`);
    for (const k of have[table]) if (!want[table].has(k)) problems.push(`${table}: row for a relationship that is not live: ${k}`);
  }
  return problems;
}

/** The one line the issue asks for. */
export function summaryLine(r: CrashLoopResult): string {
  return `${r.replicas > 1 ? `replicas=${r.replicas} writesChecked=${r.writesChecked} ` : ''}${r.storeLoss ? 'storeLoss=yes ' : ''}kills=${r.kills} changes=${r.changes} lost=${r.lost} orphans=${r.orphans} wronglyDeleted=${r.wronglyDeleted} crossTenant=${r.crossTenant} integrity=${r.integrity === 'ok' ? 'ok' : 'failed'} convergeMs=${r.convergeMs}`;
}
