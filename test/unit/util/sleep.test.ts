// A retry wait ends when its loop is stopped, also when the stop came just
// before the wait began (leader election: the term ends during a lease
// request, then the loop waits its retry period), so a shutdown never waits
// out a retry period.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sleep } from '../../../src/util/sleep.js';
import { FakeClock, settle } from '../../harness/fake-clock.js';

const outcome = (wait: Promise<void>) => Promise.race([wait.then(() => 'ended'), settle().then(() => 'still waiting')]);

for (const [name, wait] of [
  ['system sleep', sleep],
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
