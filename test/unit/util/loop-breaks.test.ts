import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LoopBreaks } from '../../../src/util/loop-breaks.js';

describe('LoopBreaks', () => {
  it('asks nothing of work that lets the loop go round, and a break of a run that holds it past the budget', async () => {
    let now = 0;
    const breaks = new LoopBreaks(8, { now: () => now });
    // Light work, the loop idle between pieces: never a break.
    for (let i = 0; i < 3; i++) {
      assert.equal(breaks.due(), undefined);
      now += 5;
      await new Promise((resolve) => setImmediate(resolve));
    }
    // A run that never lets the loop go round: the piece after 8 ms waits for the check phase.
    assert.equal(breaks.due(), undefined);
    now += 5;
    await Promise.resolve();
    assert.equal(breaks.due(), undefined, '5 ms: within the budget');
    now += 5;
    await Promise.resolve();
    // What became ready on the loop meanwhile (an immediate, as a socket's data would be polled).
    let ready = false;
    setImmediate(() => (ready = true));
    const due = breaks.due();
    assert.ok(due, '10 ms without a break: the next piece waits');
    assert.equal(ready, false);
    await due;
    assert.ok(ready, 'what was ready on the loop ran first');
    assert.equal(breaks.due(), undefined, 'the budget starts again after the break');
  });
});
