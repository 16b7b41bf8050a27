// The adaptive concurrency limit's decisions on a fake clock, without I/O or
// sleeps: a burst of 429s cuts once, not to the floor; nothing starts before
// Retry-After (capped; a default without one); answers grow the limit back
// one slot per limit's worth; requests that wait when the limit drops get in
// in arrival order; no slot is lost to a double release, an abort or a close.
// The same limit in a real request path: connection-limit.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AdaptiveLimit, type AdaptiveLimitOptions, type Slot } from '../../../src/kube/adaptive-limit.js';
import { FakeClock, settle } from '../../harness/fake-clock.js';

function setup(options: Omit<AdaptiveLimitOptions, 'clock' | 'onChange'> = {}) {
  const clock = new FakeClock();
  const changes: Array<[number, boolean]> = [];
  const limit = new AdaptiveLimit({ ...options, clock, onChange: (value, throttled) => changes.push([value, throttled]) });
  /** Asks for `n` slots; each entry is the slot once granted, in the order granted. */
  const granted: Array<{ id: number; slot: Slot }> = [];
  let next = 0;
  const ask = (n: number, signal?: AbortSignal) =>
    Array.from({ length: n }, () => {
      const id = next++;
      const p = limit.acquire(signal).then((slot) => {
        granted.push({ id, slot });
        return slot;
      });
      p.catch(() => undefined);
      return p;
    });
  return { clock, limit, changes, granted, ask };
}

describe('adaptive concurrency limit', () => {
  it('lets `max` requests run at once and the next in when one ends', async () => {
    const { limit, granted, ask } = setup({ max: 4 });
    ask(5);
    await settle();
    assert.equal(granted.length, 4);
    assert.equal(limit.queued, 1);
    granted[0]!.slot.answered();
    await settle();
    assert.deepEqual(granted.map((g) => g.id), [0, 1, 2, 3, 4]);
    assert.equal(limit.inFlight, 4);
  });

  it('halves once for a burst of 429s to requests sent together, and starts nothing before Retry-After', async () => {
    const { clock, limit, changes, granted, ask } = setup();
    ask(32);
    await settle();
    ask(40);
    await settle();
    assert.equal(granted.length, 32);
    for (const { slot } of granted.slice(0, 32)) slot.throttled(2);
    await settle();
    assert.equal(limit.limit, 16, 'one cut for one burst (they were all sent under the old limit)');
    assert.equal(changes.filter(([, t]) => t).length, 32, 'every throttled answer counted');
    assert.equal(limit.inFlight, 0);
    assert.equal(granted.length, 32, 'no slot during the pause, though all 32 are free');
    await clock.advance(1_999);
    assert.equal(granted.length, 32, 'not a millisecond early');
    await clock.advance(1);
    assert.equal(granted.length, 48, 'then as many as the new limit');
    assert.equal(limit.queued, 24);
  });

  it('cuts again for 429s to requests sent after the cut, down to 1 and never 0', async () => {
    const { clock, limit, granted, ask } = setup({ max: 8 });
    ask(100);
    await settle();
    const seen: number[] = [];
    for (let round = 0; round < 6; round++) {
      const running = granted.slice(-limit.inFlight);
      for (const { slot } of running) slot.throttled(1);
      seen.push(limit.limit);
      await clock.advance(1_000);
    }
    assert.deepEqual(seen, [4, 2, 1, 1, 1, 1]);
    assert.equal(limit.inFlight, 1, 'one request still probes the cluster');
  });

  it('caps a long Retry-After, pauses a short default without one, and does not pause for Retry-After: 0', async () => {
    const { clock, limit, granted, ask } = setup({ max: 2, maxPauseMs: 30_000, defaultPauseMs: 1_000 });
    ask(10);
    await settle();
    granted[0]!.slot.throttled(3600);
    await clock.advance(29_999);
    assert.equal(granted.length, 2, 'paused');
    await clock.advance(1);
    assert.equal(granted.length, 2, 'the limit is now 1 and the other request still runs');
    granted[1]!.slot.release();
    await settle();
    assert.equal(granted.length, 3, 'after 30 s, not an hour');

    granted[2]!.slot.throttled(undefined);
    await clock.advance(999);
    assert.equal(granted.length, 3);
    await clock.advance(1);
    assert.equal(granted.length, 4, 'one second without a Retry-After');

    granted[3]!.slot.throttled(0);
    await settle();
    assert.equal(granted.length, 5, 'Retry-After: 0 cuts but does not wait');
    assert.equal(limit.limit, 1);
  });

  it('keeps the longest pause when 429s ask for different ones', async () => {
    const { clock, granted, ask } = setup({ max: 4 });
    ask(6);
    await settle();
    granted[0]!.slot.throttled(5);
    granted[1]!.slot.throttled(1);
    granted[2]!.slot.release();
    granted[3]!.slot.release();
    await clock.advance(1_000);
    assert.equal(granted.length, 4, 'the shorter pause ending does not end the longer one');
    await clock.advance(4_000);
    assert.equal(granted.length, 6);
  });

  it('grows back by one slot per limit\'s worth of answers, up to the ceiling, with successes between 429s', async () => {
    const { clock, limit, changes, granted, ask } = setup({ max: 4 });
    ask(1);
    await settle();
    granted[0]!.slot.throttled(1);
    await clock.advance(1_000);
    assert.equal(limit.limit, 2);
    changes.length = 0;
    const answer = async (n: number) => {
      for (let i = 0; i < n; i++) {
        ask(1);
        await settle();
        granted.at(-1)!.slot.answered();
      }
    };
    await answer(1);
    assert.equal(limit.limit, 2, 'half a slot');
    await answer(1);
    assert.equal(limit.limit, 3);
    await answer(3);
    assert.equal(limit.limit, 4);
    await answer(50);
    assert.equal(limit.limit, 4, 'never above the ceiling');
    assert.deepEqual(changes, [[3, false], [4, false]], 'told only when the whole part changes');

    // A 429 between answers: the cut stands and growth starts again from it.
    ask(1);
    await settle();
    granted.at(-1)!.slot.throttled(1);
    await clock.advance(1_000);
    assert.equal(limit.limit, 2);
    await answer(2);
    assert.equal(limit.limit, 3);
  });

  it('does not grow on answers to requests sent before the last cut', async () => {
    const { clock, limit, granted, ask } = setup({ max: 8 });
    ask(8);
    await settle();
    granted[0]!.slot.throttled(1);
    for (const { slot } of granted.slice(1)) slot.answered();
    assert.equal(limit.limit, 4, 'seven answers sent under the old limit moved nothing');
    await clock.advance(1_000);
  });

  it('holds back requests that wait when the limit drops, then lets them in oldest first, a newcomer after them', async () => {
    const { clock, limit, granted, ask } = setup({ max: 4 });
    ask(4);
    await settle();
    ask(6); // ids 4..9 wait
    await settle();
    // id 10 arrives the moment the pause ends, before the limit's own timer lets the others in.
    clock.after(1_000, () => void ask(1));
    granted[0]!.slot.throttled(1); // limit 2, paused 1 s
    granted[1]!.slot.answered();
    granted[2]!.slot.answered();
    await clock.advance(1_000);
    assert.deepEqual(granted.map((g) => g.id), [0, 1, 2, 3, 4], 'id 3 still runs: one more makes the new limit of 2, and the newcomer waits its turn');
    let peak = 0;
    for (let next = 3; limit.queued > 0 || limit.inFlight > 0; next++) {
      peak = Math.max(peak, limit.inFlight);
      granted.find((g) => g.id === next)!.slot.answered();
      await settle();
    }
    assert.deepEqual(granted.map((g) => g.id), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 'every waiter got in, in arrival order');
    assert.ok(peak <= 3, `never more at once than the limit as it grew back (peak ${peak})`);
  });

  it('loses no slot to a second release, an error after an answer, or an abort while waiting', async () => {
    const { limit, granted, ask } = setup({ max: 2 });
    ask(2);
    await settle();
    const [a, b] = granted.map((g) => g.slot) as [Slot, Slot];
    a.answered();
    a.release(); // the `finally` after an answer
    a.throttled(1); // and anything else: the first call counts
    b.release();
    b.release();
    assert.equal(limit.inFlight, 0);
    assert.equal(limit.limit, 2, 'the late throttled() did nothing');

    ask(2);
    await settle();
    const controller = new AbortController();
    const [waiting] = ask(1, controller.signal);
    await settle();
    assert.equal(limit.queued, 1);
    controller.abort(new Error('gave up'));
    await assert.rejects(waiting!, /gave up/);
    assert.equal(limit.queued, 0, 'the aborted request left the queue');
    granted.at(-1)!.slot.release();
    granted.at(-2)!.slot.release();
    assert.equal(limit.inFlight, 0, 'and was never given a slot');
    await assert.rejects(limit.acquire(AbortSignal.abort(new Error('already'))), /already/);
    assert.equal(limit.inFlight, 0);
  });

  it('fails waiting requests on close and leaves no timer behind', async () => {
    const { clock, limit, granted, ask } = setup({ max: 1 });
    ask(1);
    await settle();
    granted[0]!.slot.throttled(30);
    const [waiting] = ask(1);
    assert.equal(clock.pending, 1, 'the pause');
    limit.close();
    await assert.rejects(waiting!, /closed/);
    await settle();
    assert.equal(clock.pending, 0, 'the pause ended with the connection');
    await assert.rejects(limit.acquire(), /closed/);
  });
});
