/**
 * When sweeps run: on the leader's schedule (and at startup if configured),
 * or once by hand (`relsync sweep`) without watches. What a sweep does is
 * sweeper.ts's; this file holds the two ways of starting one because each
 * must keep a sweep from running beside a term's reconciles elsewhere.
 */
import { setMaxListeners } from 'node:events';
import cron from 'node-cron';
import type { Config } from '../config/config.js';
import { timeoutSignal, type Clock } from '../util/clock.js';
import { FOLLOW_UP_MS, FollowUpSweeps, followUpDelay } from './follow-up-sweeps.js';
import { leaseType } from './leader-election.js';
import { liveHolder } from './live-holders.js';
import { prepareReconciles, type PrerequisiteOptions } from './reconcile-prerequisites.js';
import type { Sweeper, SweepResult } from './sweeper.js';
import type { Wiring } from './wiring.js';
import { onAbort } from '../util/on-abort.js';

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
  const clock = sweep.prerequisites.clock;
  const w = await sweep.wire(timeoutSignal(clock, 60_000));
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
  const setup = AbortSignal.any([stop.signal, timeoutSignal(clock, 60_000)]);
  await prepareReconciles(w, sweep.prerequisites, setup)
    .then(() => {
      if (setup.aborted) throw new Error('the service cluster did not answer within 60 s');
    })
    .catch((err: unknown) => {
      w.clusters.close();
      throw err;
    });
  const workers = w.queue.start(stop.signal, (key) => w.reconciler.reconcile(key.resource, key.id, key));
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

/** The shortest gap between consecutive runs, in seconds (0 for fewer than two). */
export function shortestGapSeconds(runs: readonly Date[]): number {
  let shortest = Infinity;
  for (let i = 1; i < runs.length; i++) shortest = Math.min(shortest, (runs[i]!.getTime() - runs[i - 1]!.getTime()) / 1000);
  return Number.isFinite(shortest) ? shortest : 0;
}

/**
 * RELSYNC_SWEEP_FOLLOW_UP_MS: the delay of a follow-up sweep (default 30 s), for tests that watch
 * follow-ups within a short schedule; it is cut to half the schedule's shortest gap either way.
 */
const PREFERRED_FOLLOW_UP_MS = Number(process.env.RELSYNC_SWEEP_FOLLOW_UP_MS) || FOLLOW_UP_MS;

export interface ScheduledSweeps {
  /** The latest sweep started (resolved when none was). */
  readonly last: () => Promise<unknown>;
  /** A related copy was left in place for a sweep to decide (claim-knowledge.ts): a follow-up looks soon. */
  readonly copyWaiting: () => void;
  /** Removes the schedule; call once the term's work has ended. */
  readonly destroy: () => Promise<void>;
}

export interface ScheduleOptions {
  readonly clock: Clock;
  /** The longest gap between two of the schedule's next runs, in seconds (the alert on sweeps that do not happen). */
  readonly onInterval?: (seconds: number) => void;
  /** The preferred delay of a follow-up sweep (follow-up-sweeps.ts); default PREFERRED_FOLLOW_UP_MS. */
  readonly followUpMs?: number;
}

/**
 * The leader's sweeps: on `resync.schedule`, and one at once if `resync.onStartup`; none start after
 * `signal` aborts. A sweep that left related copies it could not tell were orphans is followed by
 * another soon, and so is a copy a reconcile left for a sweep to decide (copyWaiting), at most once
 * per interval between scheduled sweeps (follow-up-sweeps.ts).
 * `onInterval` is told the longest gap between two of the schedule's next runs (in seconds), for
 * the alert on sweeps that do not happen. Follow-ups wait on `options.clock`; the schedule itself is
 * node-cron's, on the machine's time of day, which is what a cron expression names.
 */
export function scheduleSweeps(sweeper: Pick<Sweeper, 'sweep'>, resync: Config['resync'], signal: AbortSignal, options: ScheduleOptions): ScheduledSweeps {
  const { onInterval } = options;
  let sweeping: Promise<unknown> = Promise.resolve();
  /** Sweeps running now (one, or a second that will be skipped), and whether a copy was left waiting meanwhile. */
  let running = 0;
  let waitedWhileRunning = false;
  const sweep = (trigger: 'startup' | 'schedule' | 'followup') => {
    if (signal.aborted) return;
    if (trigger !== 'followup') followUps.intervalStarts();
    running++;
    sweeping = sweeper.sweep(trigger).finally(() => running--).then((result) => {
      if (signal.aborted) return;
      followUps.ended(trigger, result);
      // A copy left waiting while the sweep ran: its end may have counted it (it calls for a
      // follow-up then), or not (left after its clean-up): a follow-up due 30 s from now, while
      // the sweep still ran, would have been skipped.
      if (running === 0 && waitedWhileRunning) {
        waitedWhileRunning = false;
        followUps.waiting();
      }
    });
  };
  const task = cron.schedule(resync.schedule, () => sweep('schedule'), { name: 'relsync-sweep' });
  const runs = task.getNextRuns(25);
  const followUps = new FollowUpSweeps(() => sweep('followup'), { delayMs: followUpDelay(shortestGapSeconds(runs) * 1000, options.followUpMs ?? PREFERRED_FOLLOW_UP_MS), clock: options.clock });
  onInterval?.(longestGapSeconds(runs));
  onAbort(signal, () => {
    followUps.cancel();
    void task.stop();
  });
  if (resync.onStartup) sweep('startup');
  return {
    last: () => sweeping,
    copyWaiting: () => {
      if (signal.aborted) return;
      if (running > 0) waitedWhileRunning = true;
      else followUps.waiting();
    },
    destroy: async () => {
      followUps.cancel();
      await task.destroy();
    },
  };
}
