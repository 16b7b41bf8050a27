import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import cron from 'node-cron';
import { longestGapSeconds } from '../../../src/controller/sweep-triggers.js';

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
