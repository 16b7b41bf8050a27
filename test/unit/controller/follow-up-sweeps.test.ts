// Follow-up sweeps on a fake clock: at most one per interval between scheduled
// sweeps, whatever the triggers, and backing off while a tenant keeps the same
// copies unsure (a primary that keeps failing plus a forged mark).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FollowUpSweeps, followUpDelay } from '../../../src/controller/follow-up-sweeps.js';
import type { SweepResult } from '../../../src/controller/sweeper.js';
import { FakeClock } from '../../harness/fake-clock.js';

const DELAY = 1000;

/** A done sweep that kept `unsure` copies for the clusters `of` stands for. */
const done = (unsure: number, of = unsure > 0 ? 'tenant-a' : ''): Pick<SweepResult, 'status' | 'phases'> => ({ status: 'done', phases: { listMs: 0, reconcileMs: 0, cleanupMs: 0, skipped: 0, unsure, unsureOf: of } });

/**
 * Plays `intervals` scheduled sweeps, each followed by DELAY of time; every sweep, scheduled or
 * follow-up, ends with what `found(interval)` says. Returns the intervals in which a follow-up ran.
 */
async function play(intervals: number, found: (interval: number, trigger: 'schedule' | 'followup') => Pick<SweepResult, 'status' | 'phases'>): Promise<number[]> {
  const clock = new FakeClock();
  const ran: number[] = [];
  let interval = 0;
  const followUps = new FollowUpSweeps(() => {
    ran.push(interval);
    followUps.ended('followup', found(interval, 'followup'));
  }, { delayMs: DELAY, clock });
  for (; interval < intervals; interval++) {
    followUps.intervalStarts();
    followUps.ended(interval === 0 ? 'startup' : 'schedule', found(interval, 'schedule'));
    await clock.advance(DELAY * 10);
  }
  return ran;
}

describe('follow-up sweeps', () => {
  it('follow a sweep that kept copies unsure once, after the delay, and not a sweep that kept none', async () => {
    const clock = new FakeClock();
    let started = 0;
    const followUps = new FollowUpSweeps(() => void started++, { delayMs: DELAY, clock });
    followUps.intervalStarts();
    followUps.ended('startup', done(2));
    await clock.advance(DELAY - 1);
    assert.equal(started, 0, 'not before the delay');
    await clock.advance(1);
    assert.equal(started, 1);
    followUps.ended('followup', done(0));
    await clock.advance(DELAY * 100);
    assert.equal(started, 1, 'none after a follow-up, and none while nothing is unsure');
    followUps.intervalStarts();
    followUps.ended('schedule', done(0));
    await clock.advance(DELAY * 100);
    assert.equal(started, 1);
  });

  it('add at most one sweep per interval for a tenant that keeps the same copies unsure, and back off to one per nine', async () => {
    const ran = await play(40, () => done(1));
    // One, then 1, 2, 4 and 8 intervals skipped: the intervals that still get one.
    assert.deepEqual(ran, [0, 2, 5, 10, 19, 28, 37]);
  });

  it('do not back off when what is unsure changes: another cluster\'s copies are looked at again in its interval', async () => {
    // tenant-a stays unsure throughout; from interval 6 on tenant-b too.
    const ran = await play(10, (i) => done(1, i >= 6 ? 'tenant-a,tenant-b' : 'tenant-a'));
    assert.deepEqual(ran, [0, 2, 5, 6, 8]);
  });

  it('end the back-off once a sweep keeps nothing unsure', async () => {
    // Unsure until interval 5, nothing in 5, unsure again from 6.
    const ran = await play(10, (i) => done(i === 5 ? 0 : 1));
    assert.deepEqual(ran, [0, 2, 6, 8]);
  });

  it('are dropped when a scheduled sweep starts before they are due: that sweep looks instead', async () => {
    const clock = new FakeClock();
    let started = 0;
    const followUps = new FollowUpSweeps(() => void started++, { delayMs: DELAY, clock });
    followUps.intervalStarts();
    followUps.ended('schedule', done(1));
    await clock.advance(DELAY / 2);
    followUps.intervalStarts();
    await clock.advance(DELAY * 10);
    assert.equal(started, 0);
    assert.equal(clock.pending, 0, 'no timer left');
  });

  it('follow a copy left in place after a sweep once, after the delay, and no more often than a sweep calls for them', async () => {
    const clock = new FakeClock();
    let started = 0;
    const followUps = new FollowUpSweeps(() => void started++, { delayMs: DELAY, clock });
    followUps.intervalStarts();
    followUps.ended('startup', done(0));
    await clock.advance(DELAY * 10);
    assert.equal(started, 0, 'a sweep that kept nothing unsure calls for none');
    // A primary deleted after the sweep, its cluster's claims unknown: its copy waits.
    followUps.waiting();
    followUps.waiting();
    await clock.advance(DELAY - 1);
    assert.equal(started, 0, 'not before the delay');
    await clock.advance(1);
    assert.equal(started, 1, 'one follow-up for every copy waiting');
    followUps.ended('followup', done(1, 'tenant-b'));
    followUps.waiting();
    await clock.advance(DELAY * 10);
    assert.equal(started, 1, 'none more in the interval');
    // That follow-up found the same still waiting: as for one a sweep called for, the next interval
    // gets none, whatever waits, and the one after it does.
    followUps.intervalStarts();
    followUps.ended('schedule', done(1, 'tenant-b'));
    followUps.waiting();
    await clock.advance(DELAY * 10);
    assert.equal(started, 1, 'backing off: an interval without one');
    followUps.intervalStarts();
    followUps.ended('schedule', done(1, 'tenant-b'));
    await clock.advance(DELAY);
    assert.equal(started, 2);
  });

  it('back off as before for a tenant that leaves copies waiting after every sweep, beside other clusters kept unsure', async () => {
    // A review's attack: one cluster kept unsure by a primary that always fails, copies left waiting
    // after each sweep (a primary deleted each interval), another cluster unsure too.
    const clock = new FakeClock();
    const ran: number[] = [];
    let interval = 0;
    const followUps = new FollowUpSweeps(() => {
      ran.push(interval);
      followUps.ended('followup', done(1, 'tenant-a,tenant-b'));
    }, { delayMs: DELAY, clock });
    for (; interval < 40; interval++) {
      followUps.intervalStarts();
      followUps.ended(interval === 0 ? 'startup' : 'schedule', done(1, 'tenant-a,tenant-b'));
      followUps.waiting();
      await clock.advance(DELAY * 10);
    }
    assert.deepEqual(ran, [0, 2, 5, 10, 19, 28, 37], 'the same intervals as without waiting copies');
  });

  it('take nothing from a sweep that was skipped or failed', async () => {
    const clock = new FakeClock();
    let started = 0;
    const followUps = new FollowUpSweeps(() => void started++, { delayMs: DELAY, clock });
    followUps.intervalStarts();
    followUps.ended('schedule', { status: 'skipped' });
    followUps.ended('schedule', { status: 'failed' });
    await clock.advance(DELAY * 10);
    assert.equal(started, 0);
  });

  it('come within half the schedule\'s shortest gap, so before the next scheduled sweep', () => {
    assert.equal(followUpDelay(3600_000), 30_000);
    assert.equal(followUpDelay(20_000), 10_000);
    assert.equal(followUpDelay(0), 30_000, 'a schedule with fewer than two runs ahead');
    assert.equal(followUpDelay(3600_000, 500), 500);
  });
});
