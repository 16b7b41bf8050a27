import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import cron from 'node-cron';
import { longestGapSeconds, scheduleSweeps, shortestGapSeconds } from '../../../src/controller/sweep-triggers.js';
import type { SweepResult } from '../../../src/controller/sweeper.js';
import type { SweepTrigger } from '../../../src/store/schema.js';
import { FakeClock } from '../../harness/fake-clock.js';

describe('sweep interval, for the alert on sweeps that do not happen', () => {
  const gapOf = (schedule: string) => {
    const task = cron.createTask(schedule, () => undefined);
    try {
      return longestGapSeconds(task.getNextRuns(25));
    } finally {
      void task.destroy();
    }
  };

  it('is the schedule\'s longest gap: every 10 minutes, hourly, and an uneven schedule\'s longest', () => {
    assert.equal(gapOf('*/10 * * * *'), 600);
    assert.equal(gapOf('0 * * * *'), 3600);
    // 02:00 and 03:00 each day: gaps of 1 h and 23 h.
    assert.equal(gapOf('0 2,3 * * *'), 23 * 3600);
  });

  it('is 0 with fewer than two runs', () => {
    assert.equal(longestGapSeconds([]), 0);
    assert.equal(longestGapSeconds([new Date(0)]), 0);
  });
});

describe('scheduled sweeps and their follow-ups', () => {
  it('follow a startup sweep that kept copies unsure once, after the delay, however often it stays unsure', async () => {
    const triggers: string[] = [];
    const sweeper = {
      sweep: async (trigger: SweepTrigger): Promise<SweepResult> => {
        triggers.push(trigger);
        return { primariesSeen: 0, objectsListed: 0, relationsAdded: 0, relationsRemoved: 0, copiesRepaired: 0, copiesRemoved: 0, errors: 1, id: triggers.length, durationMs: 1, status: 'done', phases: { listMs: 0, reconcileMs: 0, cleanupMs: 0, skipped: 0, unsure: 1, unsureOf: 'a' } };
      },
    };
    const clock = new FakeClock();
    const stop = new AbortController();
    const sweeps = scheduleSweeps(sweeper, { schedule: '0 0 1 1 *', onStartup: true, snapshotBytes: 0 }, stop.signal, { followUpMs: 5000, clock });
    await sweeps.last();
    await clock.advance(4999);
    assert.deepEqual(triggers, ['startup']);
    await clock.advance(1);
    await sweeps.last();
    await clock.advance(3600_000);
    // Before: four follow-ups in a row after each scheduled sweep (issue #36).
    assert.deepEqual(triggers, ['startup', 'followup'], 'one follow-up in the interval');
    stop.abort();
    await sweeps.destroy();
  });

  it('follow a copy left waiting while a sweep ran once that sweep ends, not while it runs (where it would be skipped)', async () => {
    const triggers: string[] = [];
    let finish: (() => void) | undefined;
    const result = (unsure: number): SweepResult => ({ primariesSeen: 0, objectsListed: 0, relationsAdded: 0, relationsRemoved: 0, copiesRepaired: 0, copiesRemoved: 0, errors: 0, id: triggers.length, durationMs: 1, status: 'done', phases: { listMs: 0, reconcileMs: 0, cleanupMs: 0, skipped: 0, unsure, unsureOf: unsure > 0 ? 'a' : '' } });
    const sweeper = {
      // The startup sweep runs until finish(); it kept nothing unsure (the copy was left after its clean-up).
      sweep: async (trigger: SweepTrigger): Promise<SweepResult> => {
        triggers.push(trigger);
        if (trigger === 'startup') await new Promise<void>((resolve) => (finish = resolve));
        return result(0);
      },
    };
    const clock = new FakeClock();
    const stop = new AbortController();
    const sweeps = scheduleSweeps(sweeper, { schedule: '0 0 1 1 *', onStartup: true, snapshotBytes: 0 }, stop.signal, { followUpMs: 5000, clock });
    sweeps.copyWaiting();
    await clock.advance(10_000);
    assert.deepEqual(triggers, ['startup'], 'no follow-up while the sweep runs');
    assert.equal(clock.pending, 0, 'none due either (it would come while the sweep still ran, and be skipped)');
    finish!();
    await sweeps.last();
    await clock.advance(5000);
    await sweeps.last();
    assert.deepEqual(triggers, ['startup', 'followup'], 'one follow-up after the sweep ended');
    sweeps.copyWaiting();
    await clock.advance(3600_000);
    assert.deepEqual(triggers, ['startup', 'followup'], 'one in the interval');
    stop.abort();
    await sweeps.destroy();
  });

  it('measure the schedule\'s shortest gap, which follow-ups come within half of', () => {
    const task = cron.createTask('*/20 * * * * *', () => undefined);
    try {
      assert.equal(shortestGapSeconds(task.getNextRuns(25)), 20);
    } finally {
      void task.destroy();
    }
    assert.equal(shortestGapSeconds([]), 0);
  });
});
