import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import cron from 'node-cron';
import { longestGapSeconds, scheduleSweeps } from '../../../src/controller/sweep-triggers.js';
import type { SweepResult } from '../../../src/controller/sweeper.js';
import type { SweepTrigger } from '../../../src/store/schema.js';

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
    assert.equal(longestGapSeconds([new Date()]), 0);
  });
});

describe('follow-up sweeps', () => {
  it('sweeps again soon after a sweep that left related copies it was unsure of, backing off while it still is, and stops once it is not', async () => {
    const triggers: string[] = [];
    // unsure in the first three sweeps, then none.
    const sweeper = {
      sweep: async (trigger: SweepTrigger): Promise<SweepResult> => {
        triggers.push(trigger);
        const unsure = triggers.length <= 3 ? 2 : 0;
        return { primariesSeen: 0, objectsListed: 0, relationsAdded: 0, relationsRemoved: 0, copiesRepaired: 0, copiesRemoved: 0, errors: 0, id: triggers.length, durationMs: 1, status: 'done', phases: { listMs: 0, reconcileMs: 0, cleanupMs: 0, skipped: 0, unsure } };
      },
    };
    const stop = new AbortController();
    const started = Date.now();
    const sweeps = scheduleSweeps(sweeper, { schedule: '0 0 1 1 *', onStartup: true, snapshotBytes: 0 }, stop.signal, undefined, [20, 60]);
    await new Promise((r) => setTimeout(r, 400));
    assert.deepEqual(triggers, ['startup', 'followup', 'followup', 'followup'], 'followed up while unsure, then no more');
    assert.ok(Date.now() - started >= 20 + 40 + 60, 'each follow-up waits longer');
    stop.abort();
    await sweeps.destroy();
  });
});

describe('follow-up sweeps that stay unsure', () => {
  it('stops after four follow-ups in a row (a primary that keeps failing), leaving it to the schedule', async () => {
    const triggers: string[] = [];
    const sweeper = {
      sweep: async (trigger: SweepTrigger): Promise<SweepResult> => {
        triggers.push(trigger);
        return { primariesSeen: 0, objectsListed: 0, relationsAdded: 0, relationsRemoved: 0, copiesRepaired: 0, copiesRemoved: 0, errors: 1, id: triggers.length, durationMs: 1, status: 'done', phases: { listMs: 0, reconcileMs: 0, cleanupMs: 0, skipped: 0, unsure: 1 } };
      },
    };
    const stop = new AbortController();
    const sweeps = scheduleSweeps(sweeper, { schedule: '0 0 1 1 *', onStartup: true, snapshotBytes: 0 }, stop.signal, undefined, [5, 5]);
    await new Promise((r) => setTimeout(r, 200));
    assert.deepEqual(triggers, ['startup', 'followup', 'followup', 'followup', 'followup']);
    stop.abort();
    await sweeps.destroy();
  });
});
