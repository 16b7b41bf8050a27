import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { WorkQueue } from '../../../src/controller/work-queue.js';

const tick = (ms = 5) => new Promise((r) => setTimeout(r, ms));

describe('work queue', () => {
  it('dedupes queued keys and never runs one key on two workers at once', async () => {
    const running = new Set<string>();
    const runs: string[] = [];
    let overlap = false;
    const queue = new WorkQueue<string>({ key: (s) => s, concurrency: 4 });
    const ac = new AbortController();
    const done = queue.start(ac.signal, async (key) => {
      if (running.has(key)) overlap = true;
      running.add(key);
      runs.push(key);
      await tick(20);
      running.delete(key);
      return {};
    });
    queue.add('a');
    queue.add('a');
    queue.add('b');
    await tick(5);
    queue.add('a'); // while processing: runs once more afterwards
    queue.add('a');
    await tick(80);
    ac.abort();
    await done;
    assert.equal(overlap, false);
    assert.deepEqual(runs.filter((r) => r === 'a').length, 2);
    assert.deepEqual(runs.filter((r) => r === 'b').length, 1);
  });

  it('retries failures with backoff and honours requeueAfter', async () => {
    let attempts = 0;
    let requeued = 0;
    const queue = new WorkQueue<string>({ key: (s) => s, concurrency: 1, backoffInitialMs: 10, backoffMaxMs: 20 });
    const ac = new AbortController();
    const done = queue.start(ac.signal, async (key) => {
      if (key === 'flaky') {
        attempts++;
        if (attempts < 3) throw new Error('boom');
        return {};
      }
      requeued++;
      return requeued < 2 ? { requeueAfterMs: 10 } : {};
    });
    queue.add('flaky');
    queue.add('again');
    await tick(150);
    ac.abort();
    await done;
    assert.equal(attempts, 3);
    assert.equal(requeued, 2);
  });
});

describe('work queue addAndWait', () => {
  it('resolves after a run that started after the call, with its outcome', async () => {
    const order: string[] = [];
    const queue = new WorkQueue<string>({ key: (s) => s, concurrency: 2, backoffInitialMs: 1000 });
    const ac = new AbortController();
    const done = queue.start(ac.signal, async (key) => {
      order.push(`run ${key}`);
      await tick(20);
      if (key === 'bad') throw new Error('boom');
      return {};
    });
    queue.add('a');
    await tick(5); // 'a' is running now
    const waited = queue.addAndWait('a').then((o) => order.push(`waited a ${o}`));
    const bad = await queue.addAndWait('bad');
    await waited;
    ac.abort();
    await done;
    assert.equal(bad, 'error');
    assert.deepEqual(order.filter((o) => o.includes(' a')), ['run a', 'run a', 'waited a ok'], 'the waiter waited for the second run');
  });
});
