// The clock module. A retry wait ends when its loop is stopped, also when the stop came just
// before the wait began (leader election: the term ends during a lease
// request, then the loop waits its retry period), so a shutdown never waits
// out a retry period.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { every, isoTime, systemClock, timeoutSignal } from '../../../src/util/clock.js';
import { FakeClock, settle } from '../../harness/fake-clock.js';

const outcome = (wait: Promise<void>) => Promise.race([wait.then(() => 'ended'), settle().then(() => 'still waiting')]);

for (const [name, wait] of [
  ['system clock sleep', (ms: number, signal: AbortSignal) => systemClock.sleep(ms, signal)],
  ['fake clock sleep', (ms: number, signal: AbortSignal) => new FakeClock().sleep(ms, signal)],
] as const) {
  describe(name, () => {
    it('ends at once when its signal aborts while it waits', async () => {
      const stop = new AbortController();
      const waiting = wait(5_000, stop.signal);
      assert.equal(await outcome(waiting), 'still waiting');
      stop.abort();
      assert.equal(await outcome(waiting), 'ended');
    });

    it('ends at once when its signal aborted before it began', async () => {
      const stop = new AbortController();
      stop.abort();
      assert.equal(await outcome(wait(5_000, stop.signal)), 'ended');
    });
  });
}

describe('clock helpers', () => {
  it('every(): calls at each interval until cancelled, and leaves no timer behind', async () => {
    const clock = new FakeClock();
    const calls: number[] = [];
    const timer = every(clock, 200, () => calls.push(clock.now()));
    await clock.advance(199);
    assert.deepEqual(calls, []);
    await clock.advance(401);
    assert.deepEqual(calls, [200, 400, 600]);
    timer.cancel();
    assert.equal(clock.pending, 0);
    await clock.advance(1000);
    assert.deepEqual(calls, [200, 400, 600], 'none after cancel');
  });

  it('timeoutSignal(): aborts after its time on the clock, with a TimeoutError', async () => {
    const clock = new FakeClock();
    const signal = timeoutSignal(clock, 60_000);
    await clock.advance(59_999);
    assert.equal(signal.aborted, false);
    await clock.advance(1);
    assert.equal(signal.aborted, true);
    assert.equal((signal.reason as DOMException).name, 'TimeoutError');
  });

  it('isoTime(): the clock\'s time of day as the store writes it', () => {
    assert.equal(isoTime(new FakeClock(Date.parse('2026-12-02T10:00:00Z'))), '2026-12-02T10:00:00.000Z');
  });
});
