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

  it("serves lanes in turn: one tenant's burst does not queue another tenant's item behind it", async () => {
    const order: string[] = [];
    const queue = new WorkQueue<string>({ key: (s) => s, concurrency: 1, lane: (s) => s.split('/')[0]! });
    for (let i = 0; i < 1000; i++) queue.add(`a/${i}`);
    queue.add('b/1');
    queue.add('b/2');
    queue.add('c/1');
    const ac = new AbortController();
    const done = queue.start(ac.signal, async (key) => {
      order.push(key);
      if (order.length === 1003) ac.abort();
      return {};
    });
    await done;
    assert.deepEqual(order.slice(0, 6), ['a/0', 'b/1', 'c/1', 'a/1', 'b/2', 'a/2'], 'round-robin over the lanes with work');
    assert.equal(order.length, 1003, 'and every item runs');
    assert.deepEqual(order.filter((k) => k.startsWith('a/')), Array.from({ length: 1000 }, (_, i) => `a/${i}`), 'each lane in its own order');
  });

  it('keeps a worker for the other lanes when one lane is slow (maxPerLane)', async () => {
    const release: Array<() => void> = [];
    const started: string[] = [];
    const queue = new WorkQueue<string>({ key: (s) => s, concurrency: 3, lane: (s) => s.split('/')[0]!, maxPerLane: 2 });
    const ac = new AbortController();
    const done = queue.start(ac.signal, async (key) => {
      started.push(key);
      // Tenant a's reconciles stall until released; b's are quick.
      if (key.startsWith('a/')) await new Promise<void>((r) => release.push(r));
      return {};
    });
    for (let i = 0; i < 10; i++) queue.add(`a/${i}`);
    await tick(20);
    assert.deepEqual(started, ['a/0', 'a/1'], 'a stalled lane holds at most maxPerLane workers');
    queue.add('b/1');
    await tick(20);
    assert.ok(started.includes('b/1'), 'another lane still runs at once');
    assert.equal(queue.depth, 8);
    for (const r of release.splice(0)) r();
    await tick(20);
    assert.deepEqual(started.slice(3, 5), ['a/2', 'a/3'], 'a lane below its cap takes work again');
    ac.abort();
    for (const r of release.splice(0)) r();
    await done;
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
