// Retries (watches, reconciles, leader election) back off exponentially, never
// beyond the cap, with jitter so that many loops do not retry in step.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { Backoff } from '../../../src/util/backoff.js';

describe('backoff', () => {
  it('doubles from the first delay up to the cap, and starts over after reset', () => {
    const top = new Backoff({ initialMs: 500, maxMs: 4_000, random: () => 1 });
    assert.deepEqual(Array.from({ length: 6 }, () => top.next()), [500, 1000, 2000, 4000, 4000, 4000]);
    top.reset();
    assert.equal(top.next(), 500);
  });

  it('stays within [ceiling/2, ceiling] for any attempt and any random value', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 10_000 }), fc.integer({ min: 1, max: 5_000 }), fc.integer({ min: 1, max: 120_000 }), fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), (attempt, initialMs, maxMs, r) => {
        const ceiling = Math.min(maxMs, initialMs * 2 ** Math.min(attempt, 30));
        const d = Backoff.delay(attempt, initialMs, maxMs, () => r);
        assert.ok(d >= Math.floor(ceiling / 2) && d <= Math.ceil(ceiling), `${d} outside [${ceiling / 2}, ${ceiling}]`);
        assert.ok(d <= Math.max(maxMs, 1));
      }),
    );
  });
});
