// Hostile tenants, round two (issue #36): every byte and every name a tenant controls has a bounded
// cost. One relsync runs as deploy/ runs it (its heap cap and allocator settings, deploy's rules:
// `.spec.configMapName` and examples/'s wildcard `.spec.tlsSecrets[*]`) through every case in turn;
// tenant-a plays the hostile tenant — its objects, and its own API server (reached through a fault
// proxy that can rewrite what it answers) — and tenant-b the one who must not notice. Each case
// checks what relsync spends — heap, store rows, requests, service-cluster bytes — and the last one
// that tenant-b's related changes, written every SAMPLE_EVERY_MS all along, arrived with a p99
// within twice its idle p99 or a floor client's in the same phase. A negative claim is checked
// after a marker change of tenant-b's has provably been processed.
//
// The cases: a flood of primaries past the limit (and a restart that lists them all at once); long
// strings in a reference; a backtracking rewrite regex; a wildcard reference of 30,000 names;
// labels past the heap that one selector matches; objects nested 9,000 levels deep (and a relist
// that meets them again); a probe of the provider's names in the service cluster; an API server
// that answers every LIST page with another continue token; a byte budget, and a store lost
// beside it (the budget is counted again from the copies the startup sweep meets).
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { Watch, type V1ConfigMap } from '@kubernetes/client-node';
import BetterSqlite3 from 'better-sqlite3';
import { startArrivalSampler, type ArrivalSampler, type Figures } from '../harness/arrival-sampler.js';
import { startClusters, type Clusters } from '../harness/clusters.js';
import type { ControlPlane } from '../harness/control-plane.js';
import { startFaultProxy, type FaultProxy } from '../harness/fault-proxy.js';
import { eventually, installCrd } from '../harness/kube.js';
import { BURST_SECONDS } from '../../src/sync/rewrite-pace.js';
import { asDeployed, startRelsync, writeConfig, type RelsyncProcess } from '../harness/relsync-process.js';
import { defaultCopyNamespace, type ClusterClient, type Database } from '../harness/tenant.js';

type Names = 'tenant-a' | 'tenant-b' | 'service';
const DEPLOYED = asDeployed();
const HEAP_MB = Number(DEPLOYED.nodeArgs.find((a) => a.startsWith('--max-old-space-size='))?.split('=')[1]);
/** Primaries of tenant-a whose reference holds LONG characters: more than the heap, if relsync kept them. */
const LONG_PRIMARIES = 300;
const LONG = 900 * 1024;
/** Primaries of tenant-a whose wildcard reference lists NAMES names each. */
const WIDE_PRIMARIES = 8;
const NAMES = 30_000;
const RELATED_PER_PRIMARY = 500;
/** ConfigMaps of tenant-a that one selector matches, each with LABEL_BYTES of labels: more than the heap, held together. */
const LABELLED = 300;
// Over limits.copyBytes (1 MiB) with the rest of the ConfigMap: held by the selector, never copied
// (300 MB of copies would only load the machine: the copy limit has its own test).
const LABEL_BYTES = 1200 * 1024;
/** What tenant-a's copies may take in the service cluster; BIG ConfigMaps of BIG_BYTES each are copied past it. */
const BUDGET = 48 * 1024 * 1024;
const BIG_BYTES = 900 * 1024;
const BIG = 80;
/** Primaries tenant-a may have synced; FLOOD more of them are created past it. */
const PER_CLUSTER = 500;
const FLOOD = 3000;
/** A ConfigMap of REWRITE_BYTES that tenant-a changes REWRITES times as fast as it can; relsync may rewrite its copy at REWRITE_RATE bytes a second. */
const REWRITE_BYTES = 900 * 1024;
const REWRITES = 40;
const REWRITE_RATE = 512 * 1024;
/** A pace no case but the rewrite case meets. */
const UNPACED = 1024 ** 3;
/** Pages one LIST may take (limits.listPages): the labelled case's LIST takes ~50 (8 MiB pages). */
const LIST_PAGES = 200;
/** Tenant-b writes its ConfigMap this often, all through the suite (arrival-sampler.ts). */
const SAMPLE_EVERY_MS = 100;
/**
 * Issue #36's target: in every phase tenant-b's p99 within this many times its idle p99 or the floor
 * client's p99 of that phase (docs/guarantees.md "All of issue #36's hostile inputs in one suite").
 */
const TARGET_RATIO = 2;
/**
 * A phase is held, its hostile input in place, until tenant-b has this many samples in it: from 100
 * on a p99 is not the phase's maximum (below, one stall of the machine's decided a short phase such
 * as a probe or the first seconds after a restart: 2.8× once, with 22 samples). Not more: in a phase
 * whose hostile work is a burst, more samples would only add quiet ones and let the burst's worst
 * sample pass as an outlier (its p99 would be the third largest, not the second).
 */
const P99_SAMPLES = 100;
/** A phase named with this at its end is a case's setup before its hostile input: not compared. */
const SETUP = ' (setup)';
/** The phase compared after a restart under the flood: only while the startup sweep runs, pooled over restarts. */
const AFTER_RESTART = 'flood after a restart';
/** At most this many restarts to give it its samples (about 5 a restart on this machine: 21 restarts alone). */
const MAX_RESTARTS = 40;
/** Asserted in every phase: tenant-b's median stays under this, whatever tenant-a does. */
const GUARD_P50_MS = 3000;
/** Samples of tenant-b's idle latency taken before the first case: as many as a phase's. */
const IDLE_SAMPLES = P99_SAMPLES;
/**
 * Levels of a nested field: kube-apiserver v1.36.3 accepts a custom resource whose spec holds up to
 * 9,993 (its managed fields reach 10,000, Go's JSON limit); V8's JSON.stringify overflows the stack
 * at about 4,500, relsync's recursive walks sooner.
 */
const DEPTH = 9_000;
/** A related type of tenant-a's own making that keeps whatever it is given (the example CRD's spec does too). */
const SETTINGS = { group: 'hostile.relsync.dev', version: 'v1', plural: 'settings' };
const CONDITION = 'relsync.dev/Synced';

type Condition = { type: string; status: string; reason?: string; message?: string };
const verdict = (o: Database | undefined) => (o?.status?.conditions as Condition[] | undefined)?.find((c) => c.type === CONDITION);

/** `{"a":{"a":…{"a":"bottom"}…}}`, `depth` objects deep, as text: JSON.stringify (client-node's too) overflows the stack on it. */
function nested(depth: number): string {
  return `${'{"a":'.repeat(depth - 1)}{"a":"bottom"}${'}'.repeat(depth - 1)}`;
}

/** A request with the control plane's admin token, the body as text (client-node would serialize and walk it). */
async function request(plane: ControlPlane, method: string, path: string, text?: string, contentType = 'application/json'): Promise<{ status: number; body: string }> {
  const ca = readFileSync(join(plane.dir, 'certs', 'apiserver.crt'));
  return new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = https.request(`${plane.url}${path}`, { method, ca, headers: { authorization: `Bearer ${plane.token}`, 'content-type': contentType } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
    });
    req.once('error', reject);
    req.end(text);
  });
}

async function createFromText(plane: ControlPlane, path: string, text: string): Promise<void> {
  const answer = await request(plane, 'POST', path, text);
  if (answer.status !== 201) throw new Error(`POST ${path}: ${answer.status} ${answer.body.slice(0, 300)}`);
}

/** A JSON merge patch of the object at `path` (a Database's spec or anything's annotations), its answer not parsed. */
async function mergePatch(plane: ControlPlane, path: string, patch: unknown): Promise<void> {
  const answer = await request(plane, 'PATCH', path, JSON.stringify(patch), 'application/merge-patch+json');
  if (answer.status !== 200) throw new Error(`PATCH ${path}: ${answer.status} ${answer.body.slice(0, 300)}`);
}

/** The merge patch that touches an object: an annotation set to `round`, so that it changes and its watch event comes. */
const touch = (round: number) => ({ metadata: { annotations: { 'budget.example/round': String(round) } } });
const databasePath = (namespace: string, name: string) => `/apis/demo.relsync.dev/v1alpha1/namespaces/${namespace}/databases/${name}`;
const configMapPath = (namespace: string, name: string) => `/api/v1/namespaces/${namespace}/configmaps/${name}`;

/** A Database read as text and parsed by JSON.parse, which does not recurse. */
async function databaseOf(plane: ControlPlane, namespace: string, name: string): Promise<Database | undefined> {
  const answer = await request(plane, 'GET', `/apis/demo.relsync.dev/v1alpha1/namespaces/${namespace}/databases/${name}`);
  return answer.status === 200 ? (JSON.parse(answer.body) as Database) : undefined;
}

function settingsCrd(dir: string): URL {
  const path = join(dir, 'settings-crd.json');
  const open = { type: 'object', 'x-kubernetes-preserve-unknown-fields': true };
  writeFileSync(path, JSON.stringify({
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${SETTINGS.plural}.${SETTINGS.group}` },
    spec: {
      group: SETTINGS.group,
      scope: 'Namespaced',
      names: { plural: SETTINGS.plural, singular: 'setting', kind: 'Setting', listKind: 'SettingList' },
      versions: [{ name: SETTINGS.version, served: true, storage: true, schema: { openAPIV3Schema: { type: 'object', properties: { spec: open } } } }],
    },
  }));
  return pathToFileURL(path);
}


describe('hostile tenants, round two: a bounded cost for every input', () => {
  let clusters: Clusters<Names>;
  let a: ClusterClient;
  let b: ClusterClient;
  let svc: ClusterClient;
  let proxy: FaultProxy;
  let sampler: ArrivalSampler;
  let dir: string;
  let configPath: string;
  let config: { limits: Record<string, number> } & Record<string, unknown>;
  let relsync: RelsyncProcess;
  /** The phases of tenant-b's samples, in order, each with what it compares to ('restart' phases are not compared). */
  const phases: string[] = [];
  /** The longest the event loop of relsync was held, by phase (nodejs_eventloop_lag_max_seconds, read every second). */
  const loopLag = new Map<string, number>();
  let lagReader: NodeJS.Timeout | undefined;
  /** tenant-a's limits.copiedBytesPerCluster, once the rewrite case has set it. */
  let budget = Infinity;
  /** tenant-a's big ConfigMaps (namespace/name) that the byte budget refused, and the names of those it copied, once its case has run. */
  let refusedBig: string[] = [];
  let copiedBig: string[] = [];
  /**
   * A step of sustain(): tenant-a changes two of its ConfigMaps that the budget refused (900 KiB each
   * through relsync's watch, and a copy refused again), every 250 ms.
   */
  const touchRefused = async (round: number) => {
    for (const at of [(2 * round) % refusedBig.length, (2 * round + 1) % refusedBig.length]) {
      const [namespace, name] = refusedBig[at]!.split('/') as [string, string];
      await mergePatch(clusters.plane['tenant-a'], configMapPath(namespace, name), touch(round));
    }
    await sleep(250);
  };
  const storePath = () => join(dir, 'relsync.db');
  const query = <T>(sql: string, ...params: unknown[]): T => {
    const db = new BetterSqlite3(storePath(), { readonly: true });
    try {
      return db.prepare(sql).get(...params) as T;
    } finally {
      db.close();
    }
  };
  const queryAll = <T>(sql: string, ...params: unknown[]): T[] => {
    const db = new BetterSqlite3(storePath(), { readonly: true });
    try {
      return db.prepare(sql).all(...params) as T[];
    } finally {
      db.close();
    }
  };
  const start = async () => (relsync = await startRelsync(configPath, join(dir, 'relsync.log'), [], DEPLOYED));
  /** Restart phases (relsync down or starting) and a case's setup (`… (setup)`) are printed, not compared. */
  const compared = (name: string) => name !== 'idle' && !name.startsWith('restart') && !name.endsWith(SETUP);
  /**
   * Waits until the current phase, if compared, has P99_SAMPLES samples of tenant-b's. A case calls
   * it while its hostile objects are still there, before it deletes them or takes a fault away (the
   * deletion is the phase's too); phase() calls it for the cases that leave theirs in place.
   */
  const hold = async () => {
    const current = phases.at(-1);
    if (current === undefined || !compared(current)) return;
    await eventually(`${P99_SAMPLES} samples of tenant-b's in "${current}"`, async () => sampler.figures(current).samples >= P99_SAMPLES || undefined, 120_000);
  };
  /**
   * Keeps tenant-a's hostile input coming, `step` after `step` (round 1, 2, …), until the current
   * phase has its samples: a phase whose input is a burst, then quiet, would be mostly a quiet
   * relsync, and the burst's worst sample would pass as the p99's one outlier. A step either waits
   * until relsync has handled it (a closed loop: relsync is kept busy at its own pace) or paces
   * itself (an open loop at a rate stated where it is used). Returns the rounds it took.
   */
  const sustain = async (step: (round: number) => Promise<void>, deadlineMs = 180_000): Promise<number> => {
    const current = phases.at(-1)!;
    const deadline = Date.now() + deadlineMs;
    let round = 0;
    while (sampler.figures(current).samples < P99_SAMPLES) {
      assert.ok(Date.now() < deadline, `${P99_SAMPLES} samples of tenant-b's in "${current}" within ${deadlineMs / 1000} s of tenant-a's input (${sampler.figures(current).samples} after ${round} rounds)`);
      await step(++round);
    }
    return round;
  };
  /** Tenant-b's samples from now on count for `name`, once the phase before has its samples. */
  const phase = async (name: string, pendingToo?: boolean) => {
    await hold();
    // A name used twice would pool two phases' samples, and its hold would end at once.
    assert.ok(!phases.includes(name), `phase "${name}" is new`);
    phases.push(name);
    sampler.phase(name, pendingToo);
  };
  /** Tenant-b changes its ConfigMap; resolves with the time it took to arrive in the service cluster. */
  const bArrives = (timeoutMs?: number) => sampler.mark(timeoutMs);
  /**
   * relsync killed (or stopped) and started again; tenant-b's samples meanwhile, and until its first
   * change arrives through the new process, are the restart's (not compared). `before`: done while it is down.
   */
  const restart = async (next: string, how: { readonly kill?: boolean; readonly before?: () => void | Promise<void> } = {}) => {
    // Everything written so far arrives first; what is written from the marker on and has not
    // arrived once the phase before has its samples waits for the restart, not for that phase.
    await bArrives(120_000);
    await phase(`restart before ${next}`, true);
    if (how.kill) {
      relsync.child.kill('SIGKILL');
      await new Promise((resolve) => relsync.child.once('exit', resolve));
    } else {
      await relsync.stop();
    }
    await how.before?.();
    await start();
    await bArrives(120_000);
    await phase(next);
  };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'relsync-e2e-tenant-budget-'));
    clusters = await startClusters('tenant-a', 'tenant-b', 'service');
    ({ 'tenant-a': a, 'tenant-b': b, service: svc } = clusters.client);
    const crd = settingsCrd(dir);
    await Promise.all(Object.values(clusters.plane).map((p) => installCrd(p.kubeConfig, crd)));
    proxy = await startFaultProxy(clusters.plane['tenant-a'], 'tenant-a');
    config = {
      agentName: 'e2e',
      platformClusters: [
        { name: 'tenant-a', kubeconfig: proxy.kubeconfigPath },
        { name: 'tenant-b', kubeconfig: clusters.plane['tenant-b'].kubeconfigPath },
      ],
      serviceCluster: { name: 'service', kubeconfig: clusters.plane.service.kubeconfigPath },
      store: { path: storePath() },
      resync: { schedule: '0 0 1 1 *', onStartup: true },
      // The other cases' copies take ~600 MB: the byte budget is set for its own case (a restart);
      // the rewrite pace too (deleting the long strings' 270 MB of copies would hold tenant-a's
      // writes for minutes at a pace the rewrite case can measure).
      limits: { relatedPerPrimary: RELATED_PER_PRIMARY, primariesPerCluster: PER_CLUSTER, copiedBytesPerCluster: 4 * 1024 ** 3, copiedBytes: 8 * 1024 ** 3, listPages: LIST_PAGES, rewriteBytesPerSecondPerCluster: UNPACED, rewriteBytesPerSecond: UNPACED } as Record<string, number>,
      resources: [{
        group: 'demo.relsync.dev', resource: 'databases',
        related: [
          { id: 'config', origin: 'platform', resource: 'configmaps', reference: { path: '.spec.configMapName' } },
          { id: 'tls', origin: 'platform', resource: 'secrets', reference: { path: '.spec.tlsSecrets[*]', rewrite: { regex: { pattern: '^(.*)$', replacement: '$1-tls' } } } },
          { id: 'labelled', origin: 'platform', resource: 'configmaps', selector: { matchLabels: { 'budget.example/app': '{{ name }}' } } },
          // A rewrite as a PublishedResource written for Go's RE2 may have it: it backtracks on a
          // value that almost matches, with JavaScript's default engine.
          { id: 'renamed', origin: 'platform', resource: 'configmaps', reference: { path: '.spec.aliasName', rewrite: { regex: { pattern: '^([a-z0-9]+-?)*$', replacement: 'alias-$1' } } } },
          // A type of the tenant's own making that keeps whatever it is given.
          { id: 'setting', origin: 'platform', group: SETTINGS.group, resource: SETTINGS.plural, reference: { path: '.spec.settingName' } },
        ],
      }],
    };
    configPath = writeConfig(dir, config);
    await b.ensureNamespace('app');
    await b.putConfigMap('app', 'cfg', { v: 'start' });
    await b.createDatabase('app', 'orders', { configMapName: 'cfg' });
    for (const ns of ['long', 'wide']) await a.ensureNamespace(ns);
    await start();
    await svc.copyOf(defaultCopyNamespace('tenant-b', 'app'), 'orders', 60_000);
    sampler = await startArrivalSampler({
      platform: { client: b, plane: clusters.plane['tenant-b'] },
      service: { client: svc, plane: clusters.plane.service },
      namespace: 'app', name: 'cfg', copyNamespace: defaultCopyNamespace('tenant-b', 'app'), floorNamespace: 'floor-b',
      everyMs: SAMPLE_EVERY_MS,
    });
    await phase('idle');
    // prom-client's loop delay is the largest since the last scrape: read once a second, the largest per phase.
    lagReader = setInterval(() => {
      const during = phases.at(-1)!;
      void fetch(`http://127.0.0.1:${relsync.httpPort}/metrics`).then((r) => r.text()).then((text) => {
        const lag = Number(/^nodejs_eventloop_lag_max_seconds (\S+)/m.exec(text)?.[1]);
        if (Number.isFinite(lag)) loopLag.set(during, Math.max(loopLag.get(during) ?? 0, Math.round(lag * 1000)));
      }, () => undefined);
    }, 1000);
    await eventually('the idle samples', async () => sampler.figures('idle').samples >= IDLE_SAMPLES || undefined, 120_000);
  });

  after(async () => {
    clearInterval(lagReader);
    await sampler?.stop();
    if (relsync?.child.exitCode === null) await relsync.stop();
    await proxy?.close();
    await clusters?.stop();
  });

  it(`${FLOOD} primaries past limits.primariesPerCluster (${PER_CLUSTER}) cost a count, not a queue of ${FLOOD}, also at a restart`, async () => {
    await phase('flood');
    await a.ensureNamespace('flood');
    await Promise.all(Array.from({ length: 8 }, async (_, w) => {
      for (let i = w; i < FLOOD; i += 8) {
        for (let attempt = 1; ; attempt++) {
          try {
            await a.createDatabase('flood', `f-${String(i).padStart(4, '0')}`, {});
            break;
          } catch (err) {
            if ((err as { code?: number }).code === 409) break;
            if (attempt >= 4) throw err;
          }
        }
      }
    }));
    const during = await bArrives();
    const storedA = () => query<{ n: number }>("select count(*) as n from primaries where cluster = 'tenant-a'").n;
    // Concurrent workers may pass the limit by a few.
    assert.ok(storedA() <= PER_CLUSTER + 8, `tenant-a has at most its limit synced (${storedA()})`);
    // The flood goes on: tenant-a touches its primaries past the limit, a hundred a round (8 at a
    // time, as fast as its API server answers), each a change relsync looks at and refuses again.
    const synced = new Set(queryAll<{ name: string }>("select name from primaries where cluster = 'tenant-a' and namespace = 'flood'").map((r) => r.name));
    const past = Array.from({ length: FLOOD }, (_, i) => `f-${String(i).padStart(4, '0')}`).filter((n) => !synced.has(n));
    const touchedRounds = await sustain(async (round) => {
      const names = Array.from({ length: 100 }, (_, i) => past[((round - 1) * 100 + i) % past.length]!);
      await Promise.all(Array.from({ length: 8 }, async (_, w) => {
        for (let i = w; i < names.length; i += 8) await mergePatch(clusters.plane['tenant-a'], databasePath('flood', names[i]!), touch(round));
      }));
    });
    console.log(`the flood held: ${touchedRounds * 100} touches of the ${past.length} primaries past the limit`);

    // Restarts: each one's first LIST delivers every primary at once (no checkpoint to resume the
    // watches from, as after a lost store), and its startup sweep lists them again. The phase
    // compared is tenant-b's samples written from its first change through the new process until
    // that startup sweep finished, and no others: about a second a restart, so restarts follow one
    // another until it has its samples (a phase of the 10 s that 100 samples take would be mostly
    // a quiet relsync: tried, the sweep finished 780 ms into it).
    let deepest = 0;
    const sample = async () => {
      // Not listening yet right after the start: no figure.
      const text = await fetch(`http://127.0.0.1:${relsync.httpPort}/metrics`).then((r) => r.text(), () => '');
      const depth = Number(/^relsync_queue_depth (\S+)/m.exec(text)?.[1] ?? 0);
      deepest = Math.max(deepest, depth);
      return text;
    };
    const restarting = `restart before ${AFTER_RESTART}`;
    /**
     * Per restart: how long its startup sweep ran past tenant-b's first change through the new
     * process (the compared window), the sweep's whole duration, and how long that first change took.
     * The window is the sweep's tail: its start and the first LIST of the 3,000 run before tenant-b's
     * first change arrives, while relsync is still starting (not compared: the floor does not restart).
     */
    const windows: Array<{ inPhaseMs: number; sweepMs: number; firstMs: number }> = [];
    const restartUnderFlood = async () => {
      // Everything written so far arrives first; what has not when relsync is killed waits for the restart.
      await bArrives(120_000);
      sampler.phase(restarting, true);
      relsync.child.kill('SIGKILL');
      await new Promise((resolve) => relsync.child.once('exit', resolve));
      const db = new BetterSqlite3(storePath());
      try {
        db.prepare('delete from watch_checkpoints').run();
      } finally {
        db.close();
      }
      const depths = setInterval(() => void sample(), 50);
      try {
        await start();
        const first = await bArrives(120_000);
        const opened = Date.now();
        sampler.phase(AFTER_RESTART);
        // The whole line (pino writes msg before the closing brace: a line cut short does not match).
        const finished = await relsync.waitForLog('the startup sweep', (l) => l.includes('"msg":"sweep finished"') && l.endsWith('}'), 300_000);
        const line = JSON.parse(finished) as { time: string; durationMs: number };
        const end = Date.parse(line.time);
        sampler.phaseSince(restarting, Math.max(opened, end));
        windows.push({ inPhaseMs: end - opened, sweepMs: line.durationMs, firstMs: first });
      } finally {
        clearInterval(depths);
      }
    };
    await hold();
    for (const name of [restarting, AFTER_RESTART]) assert.ok(!phases.includes(name), `phase "${name}" is new`);
    phases.push(restarting, AFTER_RESTART);
    await restartUnderFlood();
    const after = await bArrives();
    const text = await sample();
    const reconciles = [...text.matchAll(/^relsync_reconciles_total\{[^}]*\} (\S+)/gm)].reduce((n, m) => n + Number(m[1]), 0);
    const held = storedA();
    console.log(`${FLOOD} primaries past a limit of ${PER_CLUSTER}: ${held} of tenant-a's synced; after a restart ${reconciles} reconciles until the startup sweep finished, queue depth at most ${deepest}; tenant-b's change arrived in ${during} ms during the flood, ${after} ms after the restart`);
    assert.equal(relsync.child.exitCode, null, 'relsync is still running');
    // Each synced primary is reconciled at its first LIST and in the startup sweep; the refused ones
    // only a hundred at a time (their verdict), never each of the flood.
    assert.ok(reconciles < FLOOD / 2, `reconciles after the restart follow the limit, not the flood (${reconciles})`);
    assert.ok(deepest < PER_CLUSTER + 100 + 50, `the queue holds no more than the limit leaves (deepest ${deepest})`);
    assert.ok(held <= PER_CLUSTER + 8, `still at most the limit synced (${held})`);
    const written = () => sampler.figures(AFTER_RESTART).samples + sampler.figures(AFTER_RESTART).waiting;
    while (written() < P99_SAMPLES && windows.length < MAX_RESTARTS) await restartUnderFlood();
    await bArrives(120_000);
    console.log(`${windows.length} restarts under the flood, ${written()} samples in '${AFTER_RESTART}'; per restart, ms the startup sweep ran past tenant-b's first change / the sweep's duration / that first change's latency: ${windows.map((w) => `${w.inPhaseMs}/${w.sweepMs}/${w.firstMs}`).join(', ')}`);
    // The phase is made of those windows only: its samples were written under the sweep's load.
    assert.ok(written() >= P99_SAMPLES, `${P99_SAMPLES} samples within ${MAX_RESTARTS} restarts' startup sweeps (${written()})`);

    // The flood goes, so that the cases after it have tenant-a's room (and its relists stay small).
    await phase('flood deleted');
    await Promise.all(Array.from({ length: 8 }, async (_, w) => {
      for (let i = w; i < FLOOD; i += 8) await a.deleteDatabase('flood', `f-${String(i).padStart(4, '0')}`);
    }));
    await eventually('the flood finalized', async () => query<{ n: number }>("select count(*) as n from primaries where namespace = 'flood'").n === 0 || undefined, 300_000);
  });
  it(`one long string: ${LONG_PRIMARIES} references of ${LONG / 1024} KiB each cost neither the heap (${HEAP_MB} MB) nor a restart`, async () => {
    await phase('long strings');
    const value = 'x'.repeat(LONG);
    // Written in parallel, and again on a timeout: the setup is not what is tested.
    await Promise.all([0, 1, 2, 3].map(async (w) => {
      for (let i = w; i < LONG_PRIMARIES; i += 4) {
        for (let attempt = 1; ; attempt++) {
          try {
            await a.createDatabase('long', `long-${String(i).padStart(3, '0')}`, { configMapName: value });
            break;
          } catch (err) {
            if ((err as { code?: number }).code === 409) break;
            if (attempt >= 4) throw err;
          }
        }
      }
    }));
    await eventually('every long primary reconciled (a problem on each)', async () => query<{ n: number }>("select count(*) as n from primaries where namespace = 'long' and state = 'error'").n === LONG_PRIMARIES || undefined, 600_000);
    const during = await bArrives();

    // The restart that died with "JavaScript heap out of memory" before: every row is read at start.
    await restart('long strings after a restart', { kill: true });
    await relsync.waitForLog('the startup sweep', (l) => l.includes('"msg":"sweep finished"'), 600_000);
    const after = await bArrives();
    assert.equal(relsync.child.exitCode, null, 'relsync is still running');
    const lines = relsync.log().split('\n');
    const widest = Math.max(...lines.map((l) => l.length));
    assert.ok(widest < 16 * 1024, `no log line quotes the value whole (the longest: ${widest} characters)`);
    assert.doesNotMatch(relsync.log(), /heap out of memory/);
    const longest = query<{ n: number }>("select max(length(message)) as n from primaries where namespace = 'long'").n;
    assert.ok(longest <= 2048, `a stored message is at most 2 KiB (the longest: ${longest} characters)`);
    // Until the phase has its samples, tenant-a goes on writing long strings: four primaries a round get another 900 KiB value.
    const rewritten = await sustain(async (round) => {
      const value = String.fromCharCode(97 + (round % 26)).repeat(LONG);
      await Promise.all([0, 1, 2, 3].map((k) => mergePatch(clusters.plane['tenant-a'], databasePath('long', `long-${String((4 * round + k) % LONG_PRIMARIES).padStart(3, '0')}`), { spec: { configMapName: value } })));
    });
    console.log(`${LONG_PRIMARIES} primaries × ${LONG / 1024} KiB references, heap ${HEAP_MB} MB: longest stored message ${longest} characters, longest log line ${widest}; tenant-b's change arrived in ${during} ms after the flood, ${after} ms after the restart; ${rewritten * 4} long values written after the startup sweep`);
    // They go, so that later relists of tenant-a's primaries (a lost store's) stay small.
    await Promise.all([0, 1, 2, 3].map(async (w) => {
      for (let i = w; i < LONG_PRIMARIES; i += 4) await a.deleteDatabase('long', `long-${String(i).padStart(3, '0')}`);
    }));
    await eventually('the long primaries finalized', async () => query<{ n: number }>("select count(*) as n from primaries where namespace = 'long'").n === 0 || undefined, 300_000);
    // relsync's finalizer came and went as patches of the finalizers alone, answered with metadata
    // only: a PUT would have sent and read back each primary's 900 KiB (a 406 would show the fallback).
    const finalizerWrites = proxy.requests.filter((r) => /\/namespaces\/long\/databases\/long-\d+$/.test(r.path) && (r.method === 'PUT' || r.method === 'PATCH'));
    assert.deepEqual(finalizerWrites.filter((r) => r.method !== 'PATCH' || !/merge-patch/.test(r.contentType ?? '') || !/as=PartialObjectMetadata;/.test(r.accept ?? '') || r.status !== 200).map((r) => `${r.method} ${r.path} ${r.status} ${r.contentType} ${r.accept}`).slice(0, 5), [], 'every finalizer write a merge patch answered with metadata');
    assert.ok(finalizerWrites.length >= 2 * LONG_PRIMARIES, `relsync's finalizer added to and removed from each long primary (${finalizerWrites.length} writes)`);
  });

  it('a rewrite regex that backtracks meets a tenant\'s value in linear time', async () => {
    await phase(`backtracking regex${SETUP}`);
    await a.ensureNamespace('regex');
    // 'aaa…' and a character the pattern cannot end on: exponential for a backtracking engine.
    const value = `${'a'.repeat(40)}!`;
    for (let i = 0; i < 4; i++) await a.createDatabase('regex', `r-${i}`, { aliasName: value });
    await eventually('every regex primary reconciled', async () => query<{ n: number }>("select count(*) as n from primaries where namespace = 'regex'").n === 4 || undefined, 60_000);
    const during = await bArrives();
    // The phase compared: each round gives the four another value of the same kind, every 250 ms.
    await phase('backtracking regex');
    const rounds = await sustain(async (round) => {
      await Promise.all([0, 1, 2, 3].map((i) => mergePatch(clusters.plane['tenant-a'], databasePath('regex', `r-${i}`), { spec: { aliasName: `${'a'.repeat(40 + (round % 8))}!` } })));
      await sleep(250);
    });
    assert.equal(relsync.child.exitCode, null, 'relsync is still running');
    console.log(`a backtracking rewrite over ${value.length}-character values: 4 primaries reconciled, then changed ${rounds} times each; tenant-b's change arrived in ${during} ms after the first`);
  });

  it(`a wildcard reference of ${NAMES} names is capped in the resolver: store rows stay at the limit`, async () => {
    await phase(`wildcard${SETUP}`);
    const names = Array.from({ length: NAMES }, (_, i) => `s-${String(i).padStart(5, '0')}`);
    for (let i = 0; i < WIDE_PRIMARIES; i++) await a.createDatabase('wide', `wide-${i}`, { tlsSecrets: names });
    await eventually('every wide primary reconciled (the limit said on each)', async () => query<{ n: number }>("select count(*) as n from primaries where namespace = 'wide' and message like '%limits.relatedPerPrimary%'").n === WIDE_PRIMARIES || undefined, 120_000);
    // A marker after: anything the wide primaries' reconciles were to store is stored.
    const during = await bArrives();
    const rows = query<{ n: number }>("select count(*) as n from relations where primary_namespace = 'wide'").n;
    assert.ok(rows <= WIDE_PRIMARIES * RELATED_PER_PRIMARY, `at most ${RELATED_PER_PRIMARY} relations per primary are stored (${rows} for ${WIDE_PRIMARIES} primaries)`);
    // Each lists 30,000 other names now: once the store holds the new ones, every primary's reconcile
    // of the change has run (the proof), and nothing grew.
    const others = names.map((n) => n.replace('s-', 't-'));
    for (let i = 0; i < WIDE_PRIMARIES; i++) await a.updateDatabase('wide', `wide-${i}`, (db) => void (db.spec = { ...db.spec, tlsSecrets: others }));
    // Done when the new names are claimed and the old ones ended (claims are stored before the old go).
    const byName = () => query<{ t: number; s: number }>("select sum(source_name like 't-%') as t, sum(source_name like 's-%') as s from relations where primary_namespace = 'wide'");
    const claimed = (prefix: 's' | 't') => {
      const n = byName();
      return (prefix === 't' ? n.t === WIDE_PRIMARIES * RELATED_PER_PRIMARY && !n.s : n.s === WIDE_PRIMARIES * RELATED_PER_PRIMARY && !n.t) || undefined;
    };
    await eventually('every wide primary reconciled with its new names', async () => claimed('t'), 120_000);
    const again = await bArrives();
    const rowsAgain = query<{ n: number }>("select count(*) as n from relations where primary_namespace = 'wide'").n;
    assert.ok(rowsAgain <= WIDE_PRIMARIES * RELATED_PER_PRIMARY, `still at most the limit after every primary changed (${rowsAgain})`);
    // The phase compared: back and forth, each round flips every primary's 30,000 names and waits
    // until relsync has claimed the new ones and ended the old.
    await phase('wildcard');
    const flips = await sustain(async (round) => {
      const prefix = round % 2 === 1 ? 's' : 't';
      const list = prefix === 's' ? names : others;
      for (let i = 0; i < WIDE_PRIMARIES; i++) await a.updateDatabase('wide', `wide-${i}`, (db) => void (db.spec = { ...db.spec, tlsSecrets: list }));
      await eventually(`every wide primary reconciled with its ${prefix}- names (round ${round})`, async () => claimed(prefix), 120_000);
    });
    const rowsAfter = query<{ n: number }>("select count(*) as n from relations where primary_namespace = 'wide'").n;
    assert.ok(rowsAfter <= WIDE_PRIMARIES * RELATED_PER_PRIMARY, `still at most the limit after ${flips} more changes of each (${rowsAfter})`);
    assert.equal(relsync.child.exitCode, null, 'relsync is still running');
    console.log(`${WIDE_PRIMARIES} primaries × ${NAMES} names: ${rows} relations stored (${rowsAgain} after a change of each, ${rowsAfter} after ${flips} more); tenant-b's change arrived in ${during} ms during, ${again} ms after the first change`);
    // They go, so that later LISTs of tenant-a's primaries (the endless one's 200 pages) stay small.
    for (let i = 0; i < WIDE_PRIMARIES; i++) await a.deleteDatabase('wide', `wide-${i}`);
    await eventually('the wide primaries finalized', async () => query<{ n: number }>("select count(*) as n from primaries where namespace = 'wide'").n === 0 || undefined, 120_000);
  });

  it(`"only metadata" is small: a selector matching ${LABELLED} ConfigMaps with ${LABEL_BYTES / 1024} KiB of labels each`, async () => {
    await phase('labels');
    await a.ensureNamespace('labels');
    // Labels of 63 characters, as many as fit: a ConfigMap with nothing else in it.
    const count = Math.floor(LABEL_BYTES / 100);
    const labels = Object.fromEntries(Array.from({ length: count }, (_, i) => [`k${i}.budget.example/l`, 'v'.repeat(63)]));
    labels['budget.example/app'] = 'heavy';
    await Promise.all([0, 1, 2, 3].map(async (w) => {
      for (let i = w; i < LABELLED; i += 4) {
        for (let attempt = 1; ; attempt++) {
          try {
            await a.putConfigMap('labels', `heavy-${String(i).padStart(3, '0')}`, { v: '1' }, labels);
            break;
          } catch (err) {
            if (attempt >= 4) throw err;
          }
        }
      }
    }));
    await a.createDatabase('labels', 'heavy', {});
    // Every match is found (and capped at the limit): then the primary's rows say so.
    await eventually('the selector rule resolved', async () => query<{ n: number }>("select count(*) as n from relations where primary_namespace = 'labels' and rule_id = 'labelled'").n === LABELLED || undefined, 600_000);
    const during = await bArrives();
    assert.equal(relsync.child.exitCode, null, 'relsync is still running');
    assert.doesNotMatch(relsync.log(), /heap out of memory/);
    console.log(`a selector matching ${LABELLED} ConfigMaps × ${LABEL_BYTES / 1024} KiB of labels under a ${HEAP_MB} MB heap: all ${LABELLED} related; tenant-b's change arrived in ${during} ms after`);
    // They go (never copied: each is over limits.copyBytes), so that later relists of tenant-a's
    // ConfigMaps (a lost store's) do not pass 360 MB through the test's proxy.
    await eventually('the labelled relations settled', async () => query<{ n: number }>("select count(*) as n from relations where primary_namespace = 'labels' and state != 'pending'").n === LABELLED || undefined, 600_000);
    await hold();
    await a.deleteDatabase('labels', 'heavy');
    // A marker on the same watch: a ConfigMap of tenant-a's whose copy is up to date before the deletions…
    const markerNs = defaultCopyNamespace('tenant-a', 'labels');
    await a.putConfigMap('labels', 'marker', { v: '1' });
    await a.createDatabase('labels', 'marker', { configMapName: 'marker' });
    await eventually('the marker copied', async () => (await svc.configMap(markerNs, 'marker'))?.data?.v === '1' || undefined, 120_000);
    await Promise.all([0, 1, 2, 3].map(async (w) => {
      for (let i = w; i < LABELLED; i += 4) await a.deleteConfigMap('labels', `heavy-${String(i).padStart(3, '0')}`);
    }));
    // …changed after them: its change reaches the copy once relsync's ConfigMap watch of tenant-a has
    // handled every deletion before it (each a megabyte of labels to read), so their cost is this
    // case's, not the next one's.
    await a.putConfigMap('labels', 'marker', { v: '2' });
    await eventually('the marker after the deletions', async () => (await svc.configMap(markerNs, 'marker'))?.data?.v === '2' || undefined, 300_000);
    await a.deleteDatabase('labels', 'marker');
    await a.deleteConfigMap('labels', 'marker');
  });

  it(`objects nested ${DEPTH} levels deep, a primary and a related object: each is refused on its own, the watches go on`, async () => {
    await phase(`deep nesting${SETUP}`);
    await a.ensureNamespace('deep');
    const plane = clusters.plane['tenant-a'];
    await createFromText(plane, `/apis/${SETTINGS.group}/${SETTINGS.version}/namespaces/deep/${SETTINGS.plural}`, `{"apiVersion":"${SETTINGS.group}/${SETTINGS.version}","kind":"Setting","metadata":{"name":"deep-setting"},"spec":${nested(DEPTH)}}`);
    await a.createDatabase('deep', 'holder', { settingName: 'deep-setting' });
    await createFromText(plane, '/apis/demo.relsync.dev/v1alpha1/namespaces/deep/databases', `{"apiVersion":"demo.relsync.dev/v1alpha1","kind":"Database","metadata":{"name":"deep"},"spec":{"nested":${nested(DEPTH)}}}`);
    // Each says what is wrong on its own primary: the deep one, and the one whose related object is deep.
    const deep = await eventually('the deep primary says why it is not synced', async () => {
      const shown = verdict(await databaseOf(plane, 'deep', 'deep'));
      return shown?.status === 'False' && shown;
    }, 60_000);
    assert.match(deep.message ?? '', /nested deeper than \d+ levels/);
    const holder = await eventually('the primary of the deep related object says why', async () => {
      const shown = verdict(await a.database('deep', 'holder'));
      return shown?.status === 'False' && shown;
    }, 60_000);
    assert.equal(holder.reason, 'RelatedSyncFailed');
    assert.match(holder.message ?? '', /deep-setting.*nested deeper than \d+ levels/);
    const events = [...(await a.events('deep', 'deep')), ...(await a.events('deep', 'holder'))];
    assert.ok(events.some((e) => /nested deeper than/.test(e.message ?? '')), `an Event says so (${JSON.stringify(events.map((e) => e.reason))})`);
    // The marker: tenant-b's change made after both were refused arrives, through the same watches.
    const during = await bArrives();
    // A relist meets both again (a watch cut with 410 Gone): still refused, and the watch goes on.
    const relisted = () => relsync.log().split('\n').filter((l) => l.includes('"watch":"tenant-a/databases.demo.relsync.dev"') && l.includes('resourceVersion expired (410 Gone); relisting')).length;
    const relist = async () => {
      const since = Date.now();
      const relistsBefore = relisted();
      const cut = proxy.inject({ method: 'GET', path: /\/apis\/demo\.relsync\.dev\/v1alpha1\/databases$/, query: /watch=true/, times: 1, action: { kind: 'status', status: 410 } });
      proxy.cut(/\/apis\/demo\.relsync\.dev\/v1alpha1\/databases$/);
      await eventually("the relist of tenant-a's primaries after this 410", async () => relisted() > relistsBefore || undefined, 30_000);
      cut();
      // Its watch is open again: a next cut meets the watch, not the relist's LIST.
      const watching = (r: (typeof proxy.requests)[number]) => r.at >= since && r.path === '/apis/demo.relsync.dev/v1alpha1/databases' && /watch=true/.test(r.query) && r.fault === undefined;
      await eventually('the watch after the relist', async () => proxy.requests.some(watching) || undefined, 30_000);
    };
    await relist();
    await a.putConfigMap('deep', 'after', { v: '1' });
    await a.createDatabase('deep', 'after', { configMapName: 'after' });
    await eventually("tenant-a's next primary is synced after the relist", () => svc.configMap(defaultCopyNamespace('tenant-a', 'deep'), 'after'), 60_000);
    const afterRelist = await bArrives();
    const log = relsync.log();
    assert.equal(relsync.child.exitCode, null, 'relsync is still running');
    assert.doesNotMatch(log, /Maximum call stack size exceeded/);
    assert.doesNotMatch(log, /handler threw/, 'no watch handler failed');
    assert.doesNotMatch(log, /"msg":"reconcile failed.*deep/, 'neither refusal is retried as a failure');
    // The phase compared: tenant-a changes both deep objects, and the primary that names the deep
    // one, every 250 ms (each event of a deep object carries all 9,000 levels, and each reconcile of
    // the holder reads its deep related object again).
    await phase('deep nesting');
    const changes = await sustain(async (round) => {
      await mergePatch(plane, databasePath('deep', 'deep'), touch(round));
      await mergePatch(plane, `/apis/${SETTINGS.group}/${SETTINGS.version}/namespaces/deep/${SETTINGS.plural}/deep-setting`, touch(round));
      await mergePatch(plane, databasePath('deep', 'holder'), touch(round));
      await sleep(250);
    });
    assert.equal(relsync.child.exitCode, null, 'relsync is still running after the changes');
    assert.doesNotMatch(relsync.log(), /Maximum call stack size exceeded/);
    console.log(`depth ${DEPTH}: both refused with a reason on their primaries; tenant-b's change arrived in ${during} ms after, ${afterRelist} ms after a relist; ${changes} rounds of changes`);
    // They go (deleted as text: a client that parses and walks them overflows), so that the endless
    // LIST's proxy, which rewrites each page through JSON.stringify, meets neither.
    await request(plane, 'DELETE', '/apis/demo.relsync.dev/v1alpha1/namespaces/deep/databases/deep');
    await request(plane, 'DELETE', `/apis/${SETTINGS.group}/${SETTINGS.version}/namespaces/deep/${SETTINGS.plural}/deep-setting`);
    await eventually('the deep primary finalized', async () => (await request(plane, 'GET', '/apis/demo.relsync.dev/v1alpha1/namespaces/deep/databases/deep')).status === 404 || undefined, 60_000);
  });

  it("a probe: a destination name the provider's own object holds reads to the tenant as a name refused for another reason", async () => {
    await phase(`probe${SETUP}`);
    const copyNs = defaultCopyNamespace('tenant-a', 'probe');
    // The provider reserves names for its operator: a ValidatingAdmissionPolicy forbids ConfigMaps named reserved-* (403).
    const policy = { apiVersion: 'admissionregistration.k8s.io/v1', kind: 'ValidatingAdmissionPolicy', metadata: { name: 'reserved-names' },
      spec: { failurePolicy: 'Fail', matchConstraints: { resourceRules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['configmaps'] }] },
        validations: [{ expression: "!object.metadata.name.startsWith('reserved-')", message: 'names reserved-* are the operator\'s', reason: 'Forbidden' }] } };
    const binding = { apiVersion: 'admissionregistration.k8s.io/v1', kind: 'ValidatingAdmissionPolicyBinding', metadata: { name: 'reserved-names' }, spec: { policyName: 'reserved-names', validationActions: ['Deny'] } };
    const plural = (kind: string) => (kind === 'ValidatingAdmissionPolicy' ? 'validatingadmissionpolicies' : 'validatingadmissionpolicybindings');
    for (const body of [policy, binding]) await svc.objects.createClusterCustomObject({ group: 'admissionregistration.k8s.io', version: 'v1', plural: plural(body.kind), body });
    try {
      await a.ensureNamespace('probe');
      await a.createDatabase('probe', 'anchor', {});
      await svc.copyOf(copyNs, 'anchor', 60_000);
      // The operator's own object in the tenant's copy namespace, without relsync's marks.
      await svc.putConfigMap(copyNs, 'provider-cfg', { password: 'operator' });
      await eventually('the policy is in force', async () => {
        try {
          await svc.putConfigMap(copyNs, 'reserved-probe', { v: '1' });
          await svc.deleteConfigMap(copyNs, 'reserved-probe');
          return false;
        } catch (err) {
          return (err as { code?: number }).code === 403;
        }
      });
      for (const name of ['provider-cfg', 'reserved-cfg']) await a.putConfigMap('probe', name, { v: 'tenant' });
      await a.createDatabase('probe', 'p-exists', { configMapName: 'provider-cfg' });
      await a.createDatabase('probe', 'p-reserved', { configMapName: 'reserved-cfg' });
      // What the tenant can see of each: its primary's verdict and Events, and the relation as stored (names replaced).
      const seen = async (primary: string, name: string) => {
        const norm = (text: string | undefined) => (text ?? '').replaceAll(name, '<name>').replaceAll(primary, '<primary>');
        const shown = await eventually(`${primary}'s verdict`, async () => {
          const v = verdict(await a.database('probe', primary));
          return v?.status === 'False' && v;
        }, 60_000);
        const events = await eventually(`${primary}'s Event`, async () => {
          const warnings = (await a.events('probe', primary)).filter((e) => e.reason !== 'Synced');
          return warnings.length > 0 && warnings;
        }, 30_000);
        // The outcome is saved after the verdict and the Event are sent.
        const row = await eventually(`${primary}'s outcome stored`, async () => {
          const stored = query<{ state: string; message: string } | undefined>("select state, message from relations where primary_namespace = 'probe' and primary_name = ? and rule_id = 'config'", primary);
          return stored?.state !== 'pending' && stored;
        }, 30_000);
        return { state: row.state, relation: norm(row.message), reason: shown.reason, condition: norm(shown.message), events: events.map((e) => `${e.reason}: ${norm(e.message)}`) };
      };
      const exists = await seen('p-exists', 'provider-cfg');
      const reserved = await seen('p-reserved', 'reserved-cfg');
      assert.deepEqual(exists, reserved, 'an existing object of the provider\'s and a name the service cluster refuses read the same');
      assert.equal((await svc.configMap(copyNs, 'provider-cfg'))?.data?.password, 'operator', "the operator's object is untouched");
      assert.equal(await svc.configMap(copyNs, 'reserved-cfg'), undefined);
      // The provider's log says which.
      await relsync.waitForLog('why provider-cfg was refused', (l) => l.includes(`${copyNs}/provider-cfg`) && l.includes('"why":') && /relsync's copy/.test(l));
      await relsync.waitForLog('why reserved-cfg was refused', (l) => l.includes(`${copyNs}/reserved-cfg`) && l.includes('"why":') && /reserved-\* are the operator's/.test(l));
      // The phase compared: the tenant goes on probing, each round swaps the two names between its primaries, every 250 ms.
      await phase('probe');
      const probes = await sustain(async (round) => {
        const [first, second] = round % 2 === 1 ? ['reserved-cfg', 'provider-cfg'] : ['provider-cfg', 'reserved-cfg'];
        await mergePatch(clusters.plane['tenant-a'], databasePath('probe', 'p-exists'), { spec: { configMapName: first } });
        await mergePatch(clusters.plane['tenant-a'], databasePath('probe', 'p-reserved'), { spec: { configMapName: second } });
        await sleep(250);
      });
      assert.equal((await svc.configMap(copyNs, 'provider-cfg'))?.data?.password, 'operator', "the operator's object is untouched after the probes");
      console.log(`what tenant-a sees of either: ${JSON.stringify(exists)}; ${probes} probes more`);
    } finally {
      await svc.objects.deleteClusterCustomObject({ group: 'admissionregistration.k8s.io', version: 'v1', plural: plural(binding.kind), name: 'reserved-names' });
      await svc.objects.deleteClusterCustomObject({ group: 'admissionregistration.k8s.io', version: 'v1', plural: plural(policy.kind), name: 'reserved-names' });
    }
  });

  it(`an API server that answers every LIST page with another continue token: each LIST ends at limits.listPages (${LIST_PAGES}) and is taken again with backoff`, async () => {
    await phase('endless LIST');
    const databases = '/apis/demo.relsync.dev/v1alpha1/databases';
    await a.ensureNamespace('endless');
    // The watch is cut with 410 Gone, so it lists again (the proxy applies the first fault that
    // matches: this one before the next); every LIST of tenant-a's primaries from now on is endless.
    const gone = proxy.inject({ method: 'GET', path: /\/apis\/demo\.relsync\.dev\/v1alpha1\/databases$/, query: /watch=true/, times: 1, action: { kind: 'status', status: 410 } });
    const endless = proxy.inject({ method: 'GET', path: /\/apis\/demo\.relsync\.dev\/v1alpha1\/databases$/, action: { kind: 'endless' } });
    try {
      proxy.cut(/\/apis\/demo\.relsync\.dev\/v1alpha1\/databases$/);
      const capped = (l: string) => l.includes('"msg":"list/watch failed; retrying"') && l.includes(`tenant-a/databases.demo.relsync.dev"`) && l.includes(`not complete after ${LIST_PAGES} pages`);
      await relsync.waitForLog('the LIST of databases ended at the cap', capped, 60_000);
      gone();
      const during = await bArrives();
      // A second attempt, after the backoff, ends the same way.
      await eventually('a second LIST ended at the cap', async () => relsync.log().split('\n').filter(capped).length >= 2 || undefined, 60_000);
      const failures = relsync.log().split('\n').filter(capped);
      const lists = relsync.log().split('\n').filter((l) => l.includes(`LIST ${databases} of tenant-a: not complete after ${LIST_PAGES} pages`)).length;
      const pages = proxy.requests.filter((r) => r.path === databases && r.fault === 'endless' && !/watch=/.test(r.query)).length;
      // Each LIST takes at most LIST_PAGES pages; the watch's next one may be on its way.
      assert.ok(pages <= (lists + 1) * LIST_PAGES, `${pages} pages for ${lists} capped LISTs`);
      const delays = failures.map((l) => (JSON.parse(l) as { retryInMs: number }).retryInMs);
      assert.equal(relsync.child.exitCode, null, 'relsync is still running');
      // The API server answers again: a primary made meanwhile is synced once the LIST ends (not
      // compared: relsync waits for its backoff, quiet).
      await phase(`endless LIST ended${SETUP}`);
      await a.putConfigMap('endless', 'cfg', { v: '1' });
      await a.createDatabase('endless', 'orders', { configMapName: 'cfg' });
      endless();
      await eventually("tenant-a's related ConfigMap copied once its LISTs end", () => svc.configMap(defaultCopyNamespace('tenant-a', 'endless'), 'cfg'), 90_000);
      console.log(`limits.listPages ${LIST_PAGES}: ${failures.length} LISTs ended at the cap (${pages} pages through the proxy, retried after ${delays.join(', ')} ms); tenant-b's change arrived in ${during} ms meanwhile`);
    } finally {
      endless();
    }
  });


  it(`a tenant that changes a ${REWRITE_BYTES / 1024} KiB source in a loop: relsync's updates of its copy follow limits.rewriteBytesPerSecondPerCluster`, async () => {
    // From here on tenant-a has a byte budget (its copies so far, this case's copy and BUDGET more:
    // the next case fills it) and the rewrite pace this case measures: both need a restart.
    await eventually('the labelled primary finalized', async () => query<{ n: number }>("select count(*) as n from primaries where namespace = 'labels'").n === 0 || undefined, 120_000);
    const used = query<{ n: number | null }>("select sum(bytes) as n from copy_bytes where tenant = 'tenant-a'").n ?? 0;
    budget = used + BUDGET + REWRITE_BYTES + 64 * 1024;
    config.limits = { ...config.limits, copiedBytesPerCluster: budget, rewriteBytesPerSecondPerCluster: REWRITE_RATE, rewriteBytesPerSecond: 2 * REWRITE_RATE };
    writeConfig(dir, config);
    // The restart's startup sweep and the big ConfigMap's first copy are the setup; the phase
    // compared is the changes, from the first on.
    await restart(`rewrites${SETUP}`);
    await a.ensureNamespace('rewrite');
    const copyNs = defaultCopyNamespace('tenant-a', 'rewrite');
    await a.putConfigMap('rewrite', 'big', { v: '0'.repeat(REWRITE_BYTES), n: '0' });
    await a.createDatabase('rewrite', 'big', { configMapName: 'big' });
    await eventually("the big ConfigMap's copy", () => svc.configMap(copyNs, 'big'), 60_000);
    // Every version of the copy the service cluster's etcd gets (each update leaves one behind until compaction).
    const versions = new Set<string>();
    /** The watch saw the last change's copy, and never ended before: it counted every update (a watch that dropped would count fewer). */
    let sawLast = false;
    let ended: unknown;
    const watch = await new Watch(clusters.plane.service.kubeConfig).watch(`/api/v1/namespaces/${copyNs}/configmaps`, { fieldSelector: 'metadata.name=big' }, (type, o: V1ConfigMap) => {
      if (type === 'MODIFIED') versions.add(o.metadata?.resourceVersion ?? '');
      if (o.data?.n === String(REWRITES)) sawLast = true;
    }, (err) => void (ended = err ?? 'closed'));
    try {
      await phase('rewrites');
      const started = Date.now();
      for (let i = 1; i <= REWRITES; i++) await a.putConfigMap('rewrite', 'big', { v: String(i % 10).repeat(REWRITE_BYTES), n: String(i) });
      const changing = Date.now() - started;
      // The last change arrives: level-based, the changes that waited are written once, with the latest content.
      await eventually('the last change copied', async () => (await svc.configMap(copyNs, 'big'))?.data?.n === String(REWRITES) || undefined, 120_000);
      const seconds = (Date.now() - started) / 1000;
      const during = await bArrives();
      await eventually("the versions watch saw the last change's copy", async () => sawLast || undefined, 10_000);
      assert.equal(ended, undefined, 'the versions watch ran throughout');
      const writes = versions.size;
      // What the pace lets through: its burst and its rate over the time it took, each update replacing the copy's size.
      const bound = Math.ceil((BURST_SECONDS * REWRITE_RATE + REWRITE_RATE * seconds) / REWRITE_BYTES) + 1;
      const metric = await fetch(`http://127.0.0.1:${relsync.httpPort}/metrics`).then((r) => r.text());
      const paced = Number(/^relsync_copy_writes_paced_total (\S+)/m.exec(metric)?.[1] ?? 0);
      const swept = relsync.log().split('\n').find((l) => l.includes('"msg":"sweep finished"') && l.endsWith('}'));
      const sweptBefore = swept === undefined ? undefined : started - Date.parse((JSON.parse(swept) as { time: string }).time);
      console.log(sweptBefore === undefined ? 'the startup sweep had not finished when the changes began' : `the startup sweep finished ${(sweptBefore / 1000).toFixed(1)} s ${sweptBefore >= 0 ? 'before' : 'after'} the changes began`);
      console.log(`${REWRITES} changes of a ${REWRITE_BYTES / 1024} KiB ConfigMap in ${changing} ms: ${writes} updates of its copy until the last arrived ${seconds.toFixed(1)} s after the first change (the pace allows ${bound}); ${paced} writes held back; tenant-b's change arrived in ${during} ms`);
      assert.ok(writes <= bound, `the copy was updated at most as the pace allows (${writes} updates, ${bound} allowed)`);
      assert.ok(paced > 0, 'writes were held back by the pace');
    } finally {
      watch.abort();
    }
    // The phase is held under the same changes: tenant-a goes on changing its source as fast as it
    // can until tenant-b has its samples (a phase that went on after them would be half a quiet relsync).
    const more = await sustain(async (round) => {
      const n = REWRITES + round;
      await a.putConfigMap('rewrite', 'big', { v: String(n % 10).repeat(REWRITE_BYTES), n: String(n) });
    }, 120_000);
    console.log(`the rewrite phase held under ${REWRITES + more} changes in all`);
  });

  it(`a byte budget per tenant: ${BIG} related ConfigMaps of ${BIG_BYTES / 1024} KiB fill no more than ${BUDGET / 1024 / 1024} MiB more of the service cluster`, async () => {
    // tenant-a's budget (set by the rewrite case): BUDGET more than its copies take now.
    await phase(`byte budget${SETUP}`);
    const used = query<{ n: number | null }>("select sum(bytes) as n from copy_bytes where tenant = 'tenant-a'").n ?? 0;
    await a.ensureNamespace('bytes');
    const payload = 'b'.repeat(BIG_BYTES);
    await Promise.all([0, 1, 2, 3].map(async (w) => {
      for (let i = w; i < BIG; i += 4) {
        const name = `big-${String(i).padStart(2, '0')}`;
        await a.putConfigMap('bytes', name, { v: payload });
        await a.createDatabase('bytes', name, { configMapName: name });
      }
    }));
    // Every primary reconciled: synced, or refused by the budget (its own copy's, or its ConfigMap's).
    const budgetSaid = "message like '%limits.copiedBytesPerCluster%'";
    const settled = () => query<{ n: number }>(`select count(*) as n from primaries p where namespace = 'bytes' and (state = 'synced' or ${budgetSaid} or exists (select 1 from relations r where r.primary_namespace = 'bytes' and r.primary_name = p.name and r.${budgetSaid}))`).n;
    await eventually('every big primary synced or refused', async () => settled() === BIG || undefined, 600_000);
    const during = await bArrives();
    const synced = query<{ n: number }>("select count(*) as n from relations where primary_namespace = 'bytes' and rule_id = 'config' and state = 'synced'").n;
    const refused = BIG - synced;
    // What the service cluster holds, read there: the copies of tenant-a's big ConfigMaps.
    let held = 0;
    let bytes = 0;
    for (let i = 0; i < BIG; i++) {
      const copy = await svc.configMap(defaultCopyNamespace('tenant-a', 'bytes'), `big-${String(i).padStart(2, '0')}`);
      if (copy) {
        held++;
        bytes += copy.data?.v?.length ?? 0;
      }
    }
    const metric = await fetch(`http://127.0.0.1:${relsync.httpPort}/metrics`).then((r) => r.text());
    const counted = Number(/^relsync_tenant_copy_bytes\{cluster="tenant-a"\} (\S+)/m.exec(metric)?.[1]);
    console.log(`${BIG} ConfigMaps × ${BIG_BYTES / 1024} KiB under ${BUDGET / 1024 / 1024} MiB of budget left: ${held} copied (${(bytes / 1024 / 1024).toFixed(1)} MiB of values), ${refused} refused; relsync counts ${((counted - used) / 1024 / 1024).toFixed(1)} MiB more; tenant-b's change arrived in ${during} ms after`);
    assert.equal(synced, held, 'the relations stored synced are the copies in the service cluster');
    assert.ok(refused > 0, 'the budget refused some');
    // As many as fit were written (each primary's own copy takes ~1 KiB too), and concurrent workers may pass it by a copy or a few.
    assert.ok(held >= Math.floor(BUDGET / (BIG_BYTES + 4096)) - 2, `the budget was used, not just refused (${held} copied)`);
    assert.ok(bytes <= BUDGET + 4 * BIG_BYTES, `the service cluster holds no more than the budget of tenant-a's (${bytes} bytes)`);
    assert.ok(counted <= budget + 4 * BIG_BYTES && counted - used >= bytes, `the metric counts what the copies take (${counted})`);
    const refusedOne = Array.from({ length: BIG }, (_, i) => `big-${String(i).padStart(2, '0')}`).reverse();
    let event: { reason?: string; message?: string } | undefined;
    for (const name of refusedOne) {
      if (await svc.configMap(defaultCopyNamespace('tenant-a', 'bytes'), name)) continue;
      event = (await a.events('bytes', name)).find((e) => e.reason === 'CopyBudgetReached');
      break;
    }
    assert.match(event?.message ?? '', /limits\.copiedBytesPerCluster/, 'a refused primary has an Event that names the limit');
    // The phase compared: tenant-a goes on changing what was refused (that none of it was copied
    // meanwhile is checked by the next case, after its startup sweep: copiedBig).
    refusedBig = [];
    copiedBig = [];
    for (let i = 0; i < BIG; i++) {
      const name = `big-${String(i).padStart(2, '0')}`;
      if (await svc.configMap(defaultCopyNamespace('tenant-a', 'bytes'), name)) copiedBig.push(name);
      else refusedBig.push(`bytes/${name}`);
    }
    await phase('byte budget');
    const rounds = await sustain(touchRefused);
    console.log(`the byte budget held under ${rounds * 2} changes of refused ConfigMaps`);
  });

  it('a lost store: the copies in the service cluster are counted again before any is judged; none still wanted goes', async () => {
    const copyNs = defaultCopyNamespace('tenant-a', 'bytes');
    const copiesThere = async () => {
      const names: string[] = [];
      for (let i = 0; i < BIG; i++) if (await svc.configMap(copyNs, `big-${String(i).padStart(2, '0')}`)) names.push(`big-${String(i).padStart(2, '0')}`);
      return names;
    };
    const before = await copiesThere();
    // A primary made while relsync is down, in a namespace reconciled before the others: with a store
    // that knew nothing of the copies there, its copy fitted a budget that counted from zero.
    const lateNs = defaultCopyNamespace('tenant-a', 'aaa-late');
    await restart(`a lost store${SETUP}`, {
      kill: true,
      before: async () => {
        for (const suffix of ['', '-wal', '-shm']) rmSync(`${storePath()}${suffix}`, { force: true });
        await a.ensureNamespace('aaa-late');
        await a.putConfigMap('aaa-late', 'late', { v: 'l'.repeat(BIG_BYTES) });
        await a.createDatabase('aaa-late', 'late', { configMapName: 'late' });
      },
    });
    await relsync.waitForLog('the startup sweep', (l) => l.includes('"msg":"sweep finished"'), 600_000);
    // Refused by the budget: its own copy (a few bytes, when the budget is full to the byte), or its ConfigMap's.
    const refusal = () => query<{ message: string | null } | undefined>(
      "select coalesce((select message from relations where primary_namespace = 'aaa-late' and rule_id = 'config' and message like '%limits.copiedBytesPerCluster%'), (select message from primaries where namespace = 'aaa-late' and message like '%limits.copiedBytesPerCluster%')) as message",
    )?.message;
    const said = await eventually('the late primary refused by the budget', async () => refusal() ?? undefined, 120_000);
    const during = await bArrives();
    const after = await copiesThere();
    const counted = query<{ n: number }>("select coalesce(sum(bytes), 0) as n from copy_bytes where tenant = 'tenant-a'").n;
    console.log(`a lost store: ${after.length} of ${before.length} copies still there; tenant-a's copies counted again at ${(counted / 1024 / 1024).toFixed(1)} MiB; the late primary refused (${said.slice(0, 160)}); tenant-b's change arrived in ${during} ms`);
    assert.deepEqual(after, before, 'no copy still wanted was deleted, none refused before was written');
    // What the byte budget's case copied, and no more: its changes of refused ConfigMaps wrote none
    // (read after a restart and its startup sweep: every reconcile of those changes is over).
    assert.deepEqual(after, copiedBig, 'the copies the byte budget let through, and none of the ConfigMaps it refused');
    assert.equal(await svc.configMap(lateNs, 'late'), undefined, 'the late copy is not written past the budget');
    assert.ok(counted >= before.length * BIG_BYTES, `the copies there are counted (${counted} bytes)`);
    // The phase compared: tenant-a goes on changing what was refused, the late ConfigMap too; still
    // nothing goes, nothing more is written.
    refusedBig = [...refusedBig, 'aaa-late/late'];
    await phase('a lost store');
    const rounds = await sustain(touchRefused);
    assert.deepEqual(await copiesThere(), before, `the same copies after ${rounds * 2} changes of refused ConfigMaps`);
    assert.equal(await svc.configMap(lateNs, 'late'), undefined, 'the late copy is still not written');
  });

  it(`tenant-b's related changes kept arriving all along: a p99 within ${TARGET_RATIO}× its idle p99 or the floor client's in every phase, a median under ${GUARD_P50_MS} ms in all`, async () => {
    // Every sample written so far has arrived once this one has (values are a sequence); those
    // written from here on (the marker among them) count for no phase.
    await hold();
    sampler.phase('end');
    await bArrives();
    const idle = sampler.figures('idle');
    const rows = phases.filter((p, i) => phases.indexOf(p) === i && compared(p)).map((p) => ({ phase: p, ...sampler.figures(p) }));
    const restarts = phases.filter((p) => p !== 'idle' && !compared(p)).map((p) => ({ phase: p, ...sampler.figures(p) }));
    const ratio = (r: { p99: number; floorP99: number }) => r.p99 / Math.max(idle.p99, r.floorP99);
    const line = (r: { phase: string; samples: number; p50: number; p99: number; max: number; floorP99: number; slowest: Figures['slowest'] }, compared = true) =>
      `  ${r.phase.padEnd(44)} ${String(r.samples).padStart(5)} samples  p50 ${String(r.p50).padStart(5)} ms  p99 ${String(r.p99).padStart(5)} ms  max ${String(r.max).padStart(6)} ms  floor p99 ${String(r.floorP99).padStart(5)} ms  loop held ${String(loopLag.get(r.phase) ?? '-').padStart(5)} ms${compared ? `  ${ratio(r).toFixed(1).padStart(4)}×${ratio(r) > TARGET_RATIO ? ' over the target' : ''}` : ''}  slowest ${r.slowest.map((x) => `${x.relsync}/${x.floor ?? '-'} ms at +${(x.atMs / 1000).toFixed(1)} s`).join(', ')}`;
    console.log([`tenant-b's change, written every ${SAMPLE_EVERY_MS} ms, to its copy in the service cluster (× : p99 / max(idle p99, the floor's p99 in the phase); loop held: the longest relsync's event loop was busy without a break, nodejs_eventloop_lag_max_seconds):`, line({ phase: 'idle', ...idle }, false), ...rows.map((r) => line(r)), 'not compared (relsync down or starting, a case\'s setup):', ...restarts.map((r) => line(r, false))].join('\n'));
    const over = rows.filter((r) => ratio(r) > TARGET_RATIO);
    console.log(`issue #36's target (${TARGET_RATIO}×) met in ${rows.length - over.length} of ${rows.length} phases`);
    assert.ok(idle.samples >= IDLE_SAMPLES);
    // Every phase compared has its samples through relsync and through the floor (a NaN would pass any comparison).
    for (const r of [idle, ...rows]) assert.ok(r.samples >= P99_SAMPLES && r.floorSamples >= P99_SAMPLES && Number.isFinite(r.p99) && Number.isFinite(r.floorP99), `${P99_SAMPLES} samples in every phase, through relsync and the floor (${JSON.stringify(r)})`);
    // Every case ran (a filtered run, --test-name-pattern, would compare fewer).
    assert.equal(rows.length, 14, `the phases compared: ${rows.map((r) => r.phase).join(', ')}`);
    assert.deepEqual(over.map((r) => `${r.phase}: p99 ${r.p99} ms of ${r.samples} samples, ${ratio(r).toFixed(1)}× (idle p99 ${idle.p99} ms, the floor's ${r.floorP99} ms)`), [], `the p99 of every phase within ${TARGET_RATIO}× the idle p99 or the floor's`);
    const slow = rows.filter((r) => !(r.p50 <= GUARD_P50_MS));
    assert.deepEqual(slow.map((r) => `${r.phase}: p50 ${r.p50} ms (idle ${idle.p50} ms)`), [], `every phase's median under ${GUARD_P50_MS} ms`);
  });
});
