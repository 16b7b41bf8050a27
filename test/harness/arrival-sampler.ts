// How long one tenant's related changes take to arrive in the service cluster while another tenant
// does its worst: a steady stream of writes to one ConfigMap, each timed until relsync's copy holds
// it and until a floor client's copy does (floor-copier.ts, a process of its own), by watches on
// the service cluster. Samples are tagged with the phase they were written in, so one suite can
// compare each hostile input's p99 with the idle p99 and with the floor's in the same phase.
//
// Values are sequence numbers: relsync is level-based, so a value overtaken by a later one before
// it was copied arrives when any later one does.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { V1ConfigMap } from '@kubernetes/client-node';
import { lastingWatch } from './lasting-watch.js';
import type { ControlPlane } from './control-plane.js';
import type { ClusterClient } from './tenant.js';

export interface Figures {
  readonly samples: number;
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
  readonly floorP99: number;
  /** Samples that arrived through the floor client. */
  readonly floorSamples: number;
  /** Written, not arrived (through relsync) when the figures were taken. */
  readonly waiting: number;
  /**
   * The three slowest through relsync: written `atMs` after the phase's first sample (for a phase
   * pooled from several windows, the gaps between them count), and their latency through each.
   */
  readonly slowest: ReadonlyArray<{ readonly atMs: number; readonly relsync: number; readonly floor: number | undefined }>;
}

interface Sample {
  phase: string;
  readonly at: number;
  relsync?: number;
  floor?: number;
}

export interface ArrivalSampler {
  /** Samples written from now on count for `name`. */
  /**
   * Samples written from now on count for `name`; with `pendingToo`, also those written before that
   * have not arrived through relsync yet (relsync is about to be stopped: their wait is the restart's).
   */
  phase(name: string, pendingToo?: boolean): void;
  /** Samples written from `since` (a Date.now() reading, maybe past) on count for `name`: a phase that ended at a time learnt later. */
  phaseSince(name: string, since: number): void;
  /** One write now: resolves with the time it took to arrive through relsync (a marker that relsync went on working). */
  mark(timeoutMs?: number): Promise<number>;
  figures(phase: string): Figures;
  stop(): Promise<void>;
}

export function percentile(xs: readonly number[], p: number): number {
  if (xs.length === 0) return NaN;
  const sorted = [...xs].sort((x, y) => x - y);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

/**
 * Starts writing `namespace/name` on `platform` every `everyMs`, the data `{ v: <sequence> }`;
 * relsync's copy is looked for in `copyNamespace`, the floor's in `floorNamespace` of the service.
 */
export async function startArrivalSampler(options: {
  readonly platform: { readonly client: ClusterClient; readonly plane: ControlPlane };
  readonly service: { readonly client: ClusterClient; readonly plane: ControlPlane };
  readonly namespace: string;
  readonly name: string;
  readonly copyNamespace: string;
  readonly floorNamespace: string;
  readonly everyMs: number;
}): Promise<ArrivalSampler> {
  const { platform, service, namespace, name, copyNamespace, floorNamespace, everyMs } = options;
  const samples: Sample[] = [];
  let seq = 0;
  let phase = 'idle';
  const arrivals = new Set<(n: number) => void>();
  /** The highest value seen so far in each copy: every sample at or below it has arrived. */
  const seen = { relsync: -1, floor: -1 };
  const arrived = (side: 'relsync' | 'floor', object: V1ConfigMap) => {
    const n = Number(object.data?.v);
    if (object.metadata?.name !== name || !Number.isInteger(n) || n <= seen[side]) return;
    const now = Date.now();
    for (let i = seen[side] + 1; i <= n && i < samples.length; i++) samples[i]![side] = now - samples[i]!.at;
    seen[side] = n;
    if (side === 'relsync') for (const tell of arrivals) tell(n);
  };
  const watches = await Promise.all(([['relsync', copyNamespace], ['floor', floorNamespace]] as const).map(([side, ns]) =>
    lastingWatch(service.plane.kubeConfig, `/api/v1/namespaces/${ns}/configmaps`, {}, (_type, object: V1ConfigMap) => arrived(side, object))));
  await service.client.ensureNamespace(floorNamespace);
  const floor: ChildProcess = spawn(process.execPath, [fileURLToPath(new URL('./floor-copier.js', import.meta.url)), platform.plane.kubeconfigPath, service.plane.kubeconfigPath, namespace, name, floorNamespace], { stdio: ['ignore', 'pipe', 'inherit'] });
  await once(floor.stdout!, 'data');

  // Writes one at a time (a marker's among them), each after the previous one's answer.
  let writes = Promise.resolve();
  const write = (): Promise<number> => {
    const done = writes.then(async () => {
      const n = seq++;
      samples.push({ phase, at: Date.now() });
      try {
        await platform.client.putConfigMap(namespace, name, { v: String(n) });
      } catch (err) {
        // Never written: not a sample (a later value's arrival would be counted as its).
        samples[n] = { phase: 'failed writes', at: Date.now(), relsync: 0, floor: 0 };
        throw err;
      }
      return n;
    });
    writes = done.then(() => undefined, () => undefined);
    return done;
  };
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      await write().catch(() => undefined);
      await new Promise((resolve) => setTimeout(resolve, everyMs));
    }
  })();

  return {
    phase(name, pendingToo = false) {
      phase = name;
      if (pendingToo) for (const s of samples) if (s.relsync === undefined && s.phase !== 'failed writes') s.phase = name;
    },
    phaseSince(name, since) {
      phase = name;
      for (let i = samples.length - 1; i >= 0 && samples[i]!.at >= since; i--) if (samples[i]!.phase !== 'failed writes') samples[i]!.phase = name;
    },
    async mark(timeoutMs = 30_000) {
      const n = await write();
      if (seen.relsync >= n) return samples[n]!.relsync!;
      return new Promise<number>((resolve, reject) => {
        const timer = setTimeout(() => {
          arrivals.delete(tell);
          reject(new Error(`value ${n} of ${namespace}/${name} did not arrive through relsync within ${timeoutMs} ms`));
        }, timeoutMs);
        const tell = (at: number) => {
          if (at < n) return;
          clearTimeout(timer);
          arrivals.delete(tell);
          resolve(samples[n]!.relsync!);
        };
        arrivals.add(tell);
      });
    },
    figures(name) {
      const of = samples.filter((s) => s.phase === name);
      const through = of.flatMap((s) => (s.relsync === undefined ? [] : [s.relsync]));
      const floors = of.flatMap((s) => (s.floor === undefined ? [] : [s.floor]));
      const first = of[0]?.at ?? 0;
      const slowest = of.filter((s) => s.relsync !== undefined).sort((x, y) => y.relsync! - x.relsync!).slice(0, 3).map((s) => ({ atMs: s.at - first, relsync: s.relsync!, floor: s.floor }));
      return { samples: through.length, p50: percentile(through, 50), p99: percentile(through, 99), max: Math.max(...through), floorP99: percentile(floors, 99), floorSamples: floors.length, waiting: of.length - through.length, slowest };
    },
    async stop() {
      stopped = true;
      await loop;
      for (const w of watches) w.abort();
      floor.kill();
      // Beside relsync's CPU profiles (RELSYNC_TEST_PROFILE_DIR, docs/testing.md): the samples with a
      // pair of clock readings, so a slow sample can be laid on the profile's monotonic timeline.
      const dir = process.env.RELSYNC_TEST_PROFILE_DIR;
      if (dir) mkdirSync(dir, { recursive: true });
      // The test process's pid (relsync's is in its profile's name).
      if (dir) writeFileSync(join(dir, `samples-${process.pid}.json`), JSON.stringify({ samples, wallNow: Date.now(), monoNowUs: Number(process.hrtime.bigint() / 1000n) }));
    },
  };
}
