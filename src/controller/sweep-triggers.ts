/**
 * When sweeps run: on the leader's schedule (and at startup if configured),
 * or once by hand (`relsync sweep`) without watches. What a sweep does is
 * sweeper.ts's; this file holds the two ways of starting one because each
 * must keep a sweep from running beside a term's reconciles elsewhere.
 */
import { setMaxListeners } from 'node:events';
import cron from 'node-cron';
import type { Config } from '../config/config.js';
import { leaseType } from './leader-election.js';
import { liveHolder } from './live-holders.js';
import { prepareReconciles, type PrerequisiteOptions } from './reconcile-prerequisites.js';
import type { Sweeper, SweepResult } from './sweeper.js';
import type { Wiring } from './wiring.js';

/** `relsync sweep` refused: a leader is running. */
export class LeaderRunningError extends Error {
  override name = 'LeaderRunningError';
}

export interface OneShotSweep {
  /** Wires the parts of a one-shot sweep (wiring.ts). */
  readonly wire: (signal: AbortSignal) => Promise<Wiring>;
  readonly leaderElection: Config['leaderElection'];
  readonly prerequisites: PrerequisiteOptions;
}

/** One sweep without watches (`relsync sweep`); resolves with its summary. */
export async function sweepOnce(sweep: OneShotSweep, options: { force?: boolean; dryRun?: unknown }): Promise<SweepResult> {
  const w = await sweep.wire(AbortSignal.timeout(60_000));
  const le = sweep.leaderElection;
  // A dry run writes nothing (its store is a copy): it may run beside a leader.
  if (le.enabled && !options.force && !options.dryRun) {
    // A sweep beside a running leader would race its reconciles (and, on a shared volume, its store).
    const leases = w.clusters.client(w.clusters.service.name, leaseType);
    // The leader, or with shards any shard's holder (a shard's sweeps are its holder's): a record
    // that names one is watched for up to its lease duration (live-holders.ts).
    const running = await liveHolder(leases, le.namespace, le.name).catch((err: Error) => {
      w.clusters.close();
      throw err;
    });
    if (running) {
      w.clusters.close();
      throw new LeaderRunningError(`relsync "${running.holder}" holds the lease ${running.lease} and sweeps on its own schedule; stop it first, or pass --force`);
    }
  }
  const stop = new AbortController();
  setMaxListeners(0, stop.signal);
  // A sweep against API servers that do not answer gives up instead of hanging.
  const setup = AbortSignal.any([stop.signal, AbortSignal.timeout(60_000)]);
  await prepareReconciles(w, sweep.prerequisites, setup)
    .then(() => {
      if (setup.aborted) throw new Error('the service cluster did not answer within 60 s');
    })
    .catch((err: unknown) => {
      w.clusters.close();
      throw err;
    });
  const workers = w.queue.start(stop.signal, (key) => w.reconciler.reconcile(key.resource, key.id));
  try {
    return await w.sweeper.sweep('cli');
  } finally {
    stop.abort();
    await workers;
    await w.checkpointer.flush();
    await w.store.flushTouches();
    // The sweep's Warnings are written before the connections close (not for long).
    await w.recorder.idle(5000);
    w.clusters.close();
  }
}

/** The longest gap between consecutive runs, in seconds (0 for fewer than two). */
export function longestGapSeconds(runs: readonly Date[]): number {
  let longest = 0;
  for (let i = 1; i < runs.length; i++) longest = Math.max(longest, (runs[i]!.getTime() - runs[i - 1]!.getTime()) / 1000);
  return longest;
}

/** After a sweep that left related copies it was unsure of: the next one, doubling from 30 s to 5 min while it still is. */
const FOLLOW_UP_MS = [30_000, 300_000] as const;
/** Then the schedule's sweeps again (each may start another few). */
const MAX_FOLLOW_UPS = 4;

export interface ScheduledSweeps {
  /** The latest sweep started (resolved when none was). */
  readonly last: () => Promise<unknown>;
  /** Removes the schedule; call once the term's work has ended. */
  readonly destroy: () => Promise<void>;
}

/**
 * The leader's sweeps: on `resync.schedule`, and one at once if `resync.onStartup`; none start after
 * `signal` aborts. `onInterval` is told the longest gap between two of the schedule's next runs
 * (in seconds), for the alert on sweeps that do not happen.
 */
export function scheduleSweeps(sweeper: Pick<Sweeper, 'sweep'>, resync: Config['resync'], signal: AbortSignal, onInterval?: (seconds: number) => void, followUpMs: readonly [number, number] = FOLLOW_UP_MS): ScheduledSweeps {
  let sweeping: Promise<unknown> = Promise.resolve();
  let followUp: { timer: NodeJS.Timeout; ms: number } | undefined;
  let nextFollowUpMs = followUpMs[0];
  /** Follow-ups in a row that still left copies unsure: a primary that keeps failing would make them endless. */
  let followUps = 0;
  const sweep = (trigger: 'startup' | 'schedule' | 'followup') => {
    if (signal.aborted) return;
    sweeping = sweeper.sweep(trigger).then((result) => {
      // Related copies it could not tell were orphans (sweeper.ts, unsure): looked at again soon, not at the next scheduled sweep.
      if (result.status === 'skipped' || signal.aborted) return;
      followUps = trigger === 'followup' ? followUps + 1 : 0;
      if ((result.phases?.unsure ?? 0) === 0 || followUps >= MAX_FOLLOW_UPS) {
        nextFollowUpMs = followUpMs[0];
        return;
      }
      if (followUp) return;
      const ms = nextFollowUpMs;
      nextFollowUpMs = Math.min(ms * 2, followUpMs[1]);
      followUp = { ms, timer: setTimeout(() => ((followUp = undefined), sweep('followup')), ms) };
    });
  };
  signal.addEventListener('abort', () => followUp && clearTimeout(followUp.timer), { once: true });
  const task = cron.schedule(resync.schedule, () => sweep('schedule'), { name: 'relsync-sweep' });
  onInterval?.(longestGapSeconds(task.getNextRuns(25)));
  signal.addEventListener('abort', () => void task.stop(), { once: true });
  if (resync.onStartup) sweep('startup');
  return {
    last: () => sweeping,
    destroy: async () => {
      if (followUp) clearTimeout(followUp.timer);
      await task.destroy();
    },
  };
}
