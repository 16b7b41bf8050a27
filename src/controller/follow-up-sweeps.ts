/**
 * When a sweep is followed by another before the next scheduled one. A sweep
 * that leaves related copies in place because it could not tell whether they
 * are orphans (sweeper.ts, `unsure`) should not leave them until the next
 * scheduled sweep, which may be hours away: a follow-up looks again soon. So
 * should copies a reconcile leaves in place after a sweep, while their
 * cluster's claims are not known (waiting(); claim-knowledge.ts).
 *
 * A tenant can make every sweep unsure: one primary that keeps failing (too
 * big to copy, over a limit) and one object with forged marks in its cluster.
 * Each follow-up is a full relist of every cluster, so what a tenant adds is
 * bounded here, whatever the triggers:
 *
 * - at most one follow-up per interval (from one scheduled sweep, or the
 *   startup sweep, to the next), and none after a follow-up;
 * - a follow-up still due when a scheduled sweep starts is dropped (that
 *   sweep looks anyway);
 * - a follow-up that keeps copies for the same clusters as the sweep that
 *   called for it found nothing new: the next 1, 2, 4, then 8 intervals get
 *   none, until a sweep keeps none or keeps them for other clusters.
 *
 * So a tenant adds at most one sweep per interval, and while the same thing
 * stays unsure, one per nine intervals. Time is the injected clock's.
 */
import { systemClock, type Clock, type Timer } from '../util/clock.js';
import type { SweepResult } from './sweeper.js';

/** After the sweep that calls for it (at most half the schedule's shortest gap: it must come before the next). */
export const FOLLOW_UP_MS = 30_000;
/** What a follow-up called for by waiting copies looks for: whatever it finds still unsure (ended()). */
const WAITING = '\u0000waiting';
/** Intervals without a follow-up, at most, after follow-ups that found the same. */
export const MAX_SKIPPED_INTERVALS = 8;

export interface FollowUpOptions {
  /** Delay of a follow-up after the sweep that calls for it. */
  readonly delayMs: number;
  /** Default: the system's. */
  readonly clock?: Clock;
}

export class FollowUpSweeps {
  private due: Timer | undefined;
  /** A follow-up is due or ran in this interval. */
  private used = false;
  /** What the sweep that called for the latest follow-up kept copies for (SweepPhases.unsureOf). */
  private calledFor: string | undefined;
  /** Intervals still to go without a follow-up, and how many the next back-off skips. */
  private skipping = 0;
  private nextSkip = 1;

  /** `start`: starts a follow-up sweep (its end is told back through ended()). */
  constructor(
    private readonly start: () => void,
    private readonly options: FollowUpOptions,
  ) {}

  /** A scheduled (or the startup) sweep starts: a new interval; a follow-up still due is dropped. */
  intervalStarts(): void {
    this.cancel();
    this.used = false;
  }

  /** A sweep ended: a follow-up is due after it, or not. */
  ended(trigger: 'startup' | 'schedule' | 'followup', result: Pick<SweepResult, 'status' | 'phases'>): void {
    // A sweep skipped (one ran) or failed (before its deletes) tells nothing of what is unsure.
    if (result.status !== 'done') return;
    const found = (result.phases?.unsure ?? 0) > 0 ? (result.phases?.unsureOf ?? '') : undefined;
    // A follow-up called for copies left waiting was called for whatever it still finds unsure: the
    // same as it looked for, so that waiting copies cannot keep the back-off from starting.
    const calledFor = trigger === 'followup' && this.calledFor === WAITING ? found : this.calledFor;
    if (found === undefined || found !== calledFor) {
      // Nothing unsure, or other clusters: whatever comes next is not more of the same.
      this.skipping = 0;
      this.nextSkip = 1;
    }
    if (trigger === 'followup') {
      if (found !== undefined && found === calledFor) {
        this.calledFor = found;
        this.skipping = this.nextSkip;
        this.nextSkip = Math.min(this.nextSkip * 2, MAX_SKIPPED_INTERVALS);
      }
      return;
    }
    if (found === undefined || this.used || this.due) return;
    if (this.skipping > 0) {
      this.skipping--;
      // The interval's follow-up is the one skipped: a copy left waiting in it gets none either.
      this.used = true;
      return;
    }
    this.schedule(found);
  }

  private schedule(calledFor: string): void {
    this.used = true;
    this.calledFor = calledFor;
    this.due = (this.options.clock ?? systemClock).after(this.options.delayMs, () => {
      this.due = undefined;
      this.start();
    });
  }

  /**
   * A related copy was left in place after a sweep ended, waiting for a sweep that completes its
   * cluster's claims (a primary deleted while a failed reconcile kept them unknown:
   * claim-knowledge.ts): a follow-up looks soon, within the same bounds as one a sweep calls for (at
   * most one per interval, none while backing off; a follow-up that still finds copies unsure backs
   * off as one a sweep called for). Not while a sweep runs (sweep-triggers.ts tells it after).
   */
  waiting(): void {
    if (this.used || this.due || this.skipping > 0) return;
    this.schedule(WAITING);
  }

  /** No follow-up due any more (the term ends). */
  cancel(): void {
    this.due?.cancel();
    this.due = undefined;
  }
}

/** The delay of follow-ups for a schedule whose shortest gap between runs is `gapMs`: at most half of it. */
export function followUpDelay(gapMs: number, preferredMs = FOLLOW_UP_MS): number {
  return gapMs > 0 ? Math.min(preferredMs, Math.floor(gapMs / 2)) : preferredMs;
}
