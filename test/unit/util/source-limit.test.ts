// One caller's share of reviews: one at a time, a burst then a steady rate, on a clock the test moves.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SourceLimit } from '../../../src/util/source-limit.js';
import { FakeClock } from '../../harness/fake-clock.js';

describe('source limit', () => {
  it('one in flight per source, a burst then a rate, each source on its own', async () => {
    const clock = new FakeClock();
    const limit = new SourceLimit({ inFlight: 1, burst: 3, perSecond: 2, maxSources: 10, clock });
    const a = limit.tryStart('a')!;
    assert.equal(limit.tryStart('a'), undefined, 'one at a time');
    assert.ok(limit.tryStart('b'), 'another source is not held back');
    a();
    a(); // released twice: counted once
    limit.tryStart('a')!();
    limit.tryStart('a')!();
    assert.equal(limit.tryStart('a'), undefined, 'the burst of 3 is spent');
    await clock.advance(499);
    assert.equal(limit.tryStart('a'), undefined, 'not yet a whole start back');
    await clock.advance(1);
    assert.ok(limit.tryStart('a'), '2 a second: one after 500 ms');
  });

  it('remembers at most maxSources, the least recently seen forgotten first', () => {
    const limit = new SourceLimit({ inFlight: 1, burst: 1, perSecond: 0.001, maxSources: 2, clock: new FakeClock() });
    limit.tryStart('a')!();
    limit.tryStart('b')!();
    assert.equal(limit.tryStart('a'), undefined, 'a is remembered (and now seen last)');
    limit.tryStart('c')!();
    assert.equal(limit.tryStart('a'), undefined, 'a was seen after b: b went');
    assert.ok(limit.tryStart('b'), 'b forgotten: a full bucket again');
  });
});
