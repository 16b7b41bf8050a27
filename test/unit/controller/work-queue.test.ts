import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { WorkQueue } from '../../../src/controller/work-queue.js';
import { LoopBreaks } from '../../../src/util/loop-breaks.js';
import { FakeClock, settle } from '../../harness/fake-clock.js';

const tick = (ms = 5) => new Promise((r) => setTimeout(r, ms));
/**
 * Waits until `done()` holds (at most 5 s): what a test waits for is a state of the queue, never a
 * number of milliseconds, which a loaded machine may not keep (a run not started yet after 5 ms).
 */
async function until(what: string, done: () => boolean): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (done()) return;
    await tick(10);
  }
  assert.fail(`waited 5 s for ${what}`);
}

describe('work queue', () => {
  it('lets the event loop go round during a run of reconciles that wait for nothing, whatever the workers', async () => {
    // Each handler "takes" 3 ms of the breaks' clock and returns without I/O: without breaks, all
    // forty would run before anything else on the loop (one microtask chain).
    let now = 0;
    const breaks = new LoopBreaks(8, { now: () => now });
    const queue = new WorkQueue<string>({ key: (s) => s, concurrency: 4, loopBreaks: breaks });
    const ac = new AbortController();
    let ran = 0;
    let before = -1;
    const done = queue.start(ac.signal, async () => {
      now += 3;
      ran++;
      // Something that becomes ready on the loop once the run has begun (a socket's data, say).
      if (ran === 1) setImmediate(() => (before = ran));
      return {};
    });
    for (let i = 0; i < 40; i++) queue.add(`k${i}`);
    while (ran < 40) await new Promise((resolve) => setImmediate(resolve));
    ac.abort();
    await done;
    // 8 ms of budget shared by the four workers: a few runs of 3 ms, then the loop goes round.
    assert.ok(before >= 1 && before <= 5, `runs before the loop went round: ${before} of 40`);
  });

  it('started with a signal aborted already, stops at once instead of running forever', async () => {
    // A shard given up while its term was starting: its queue started after the abort, and the term
    // waited on it for good (the shard never released; the sharded crash-loop run found it).
    const queue = new WorkQueue<string>({ key: (s) => s, concurrency: 2 });
    const stop = new AbortController();
    stop.abort();
    const ended = await Promise.race([queue.start(stop.signal, async () => ({})).then(() => 'stopped'), new Promise((resolve) => setTimeout(resolve, 2000, 'still running'))]);
    assert.equal(ended, 'stopped');
  });

  it('dedupes queued keys and never runs one key on two workers at once', async () => {
    const running = new Set<string>();
    const runs: string[] = [];
    let overlap = false;
    const queue = new WorkQueue<string>({ key: (s) => s, concurrency: 4 });
    const ac = new AbortController();
    // The first run of 'a' holds until the adds below were made while it ran (no timing window:
    // a loaded machine once started it after a 5 ms wait had passed).
    let aRunning!: () => void;
    const aStarted = new Promise<void>((resolve) => (aRunning = resolve));
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const done = queue.start(ac.signal, async (key) => {
      if (running.has(key)) overlap = true;
      running.add(key);
      runs.push(key);
      if (key === 'a' && runs.filter((r) => r === 'a').length === 1) {
        aRunning();
        await held;
      } else await tick(5);
      running.delete(key);
      return {};
    });
    queue.add('a');
    queue.add('a');
    queue.add('b');
    await aStarted;
    queue.add('a'); // while processing: runs once more afterwards
    queue.add('a');
    release();
    // Done when nothing runs or waits: then no third run of 'a' is due.
    for (let i = 0; i < 500 && (running.size > 0 || queue.depth > 0 || runs.filter((r) => r === 'a').length < 2); i++) await tick(10);
    ac.abort();
    await done;
    assert.equal(overlap, false);
    assert.deepEqual(runs.filter((r) => r === 'a').length, 2);
    assert.deepEqual(runs.filter((r) => r === 'b').length, 1);
  });

  it('merges what waits for one key (a full run absorbs partial ones); what arrives during a run is the next run alone, never lost', async () => {
    type Item = { key: string; parts?: string[] };
    // As the primary keys merge: no parts means the whole.
    const merge = (a: Item, b: Item): Item => (!a.parts || !b.parts ? { key: b.key } : { key: b.key, parts: [...new Set([...a.parts, ...b.parts])] });
    const runs: Array<string[] | 'whole'> = [];
    let release: (() => void) | undefined;
    const queue = new WorkQueue<Item>({ key: (i) => i.key, concurrency: 1, merge });
    const ac = new AbortController();
    const done = queue.start(ac.signal, async (item) => {
      runs.push(item.parts ? [...item.parts].sort() : 'whole');
      if (runs.length === 1) await new Promise<void>((r) => (release = r));
      return {};
    });
    queue.add({ key: 'p', parts: ['x'] });
    queue.add({ key: 'p', parts: ['y'] });
    await until('the first run', () => release !== undefined);
    // The first run (x, y) is in progress: z arrives, then w.
    queue.add({ key: 'p', parts: ['z'] });
    queue.add({ key: 'p', parts: ['w'] });
    release!();
    await until('the second run', () => runs.length === 2);
    queue.add({ key: 'p', parts: ['v'] });
    queue.add({ key: 'p' });
    queue.add({ key: 'p', parts: ['u'] });
    await until('the third run', () => runs.length === 3);
    ac.abort();
    await done;
    assert.deepEqual(runs, [['x', 'y'], ['w', 'z'], 'whole']);
  });

  it('a run asked for past the gate while the key runs is not held when the gate has closed meanwhile (a sweep waiting for it finishes)', async () => {
    let open = true;
    let release: (() => void) | undefined;
    const runs: string[] = [];
    const queue = new WorkQueue<string>({ key: (s) => s, concurrency: 1, gate: () => open });
    const ac = new AbortController();
    const done = queue.start(ac.signal, async (key) => {
      runs.push(key);
      if (runs.length === 1) await new Promise<void>((r) => (release = r));
      return {};
    });
    queue.add('p');
    await until('the first run', () => release !== undefined);
    open = false;
    const swept = queue.addAndWait('p', { ignoreGate: true });
    release!();
    assert.equal((await swept).outcome, 'ok');
    assert.deepEqual(runs, ['p', 'p']);
    ac.abort();
    await done;
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
    await until('two of a running', () => started.length === 2);
    queue.add('b/1');
    await until('b/1 running', () => started.includes('b/1'));
    // b/1 went to the third worker, which a third item of a would have taken had the cap let it.
    assert.deepEqual(started, ['a/0', 'a/1', 'b/1'], 'a stalled lane holds at most maxPerLane workers; another lane still runs');
    assert.equal(queue.depth, 8);
    for (const r of release.splice(0)) r();
    await until('two more of a', () => started.length === 5);
    assert.deepEqual(started.slice(3, 5), ['a/2', 'a/3'], 'a lane below its cap takes work again');
    ac.abort();
    for (const r of release.splice(0)) r();
    await done;
  });

  it('a retry scheduled later merges into an earlier one: the earlier timer runs both (a full retry is never narrowed to a partial one)', async () => {
    type Item = { key: string; parts?: string[] };
    const merge = (a: Item, b: Item): Item => (!a.parts || !b.parts ? { key: b.key } : { key: b.key, parts: [...new Set([...a.parts, ...b.parts])] });
    const clock = new FakeClock();
    const runs: Array<string[] | 'whole'> = [];
    const queue = new WorkQueue<Item>({ key: (i) => i.key, concurrency: 1, merge, clock });
    const ac = new AbortController();
    const done = queue.start(ac.signal, async (item) => {
      runs.push(item.parts ? [...item.parts] : 'whole');
      return {};
    });
    queue.addAfter({ key: 'p', parts: ['x'] }, 50);
    queue.addAfter({ key: 'p' }, 100);
    await clock.advance(60);
    assert.deepEqual(runs, ['whole'], 'the 50 ms timer ran the whole item');
    await clock.advance(100);
    assert.deepEqual(runs, ['whole'], 'and the later one was not scheduled on its own');
    ac.abort();
    await done;
  });

  it('retries failures with backoff and honours requeueAfter', async () => {
    const clock = new FakeClock();
    let attempts = 0;
    let requeued = 0;
    const queue = new WorkQueue<string>({ key: (s) => s, concurrency: 1, backoffInitialMs: 10, backoffMaxMs: 20, clock });
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
    await settle();
    assert.equal(attempts, 1);
    assert.equal(requeued, 1);
    // Backoff capped at 20 ms, requeueAfter 10 ms: by 50 ms everything has run its course.
    await clock.advance(50);
    assert.equal(attempts, 3);
    assert.equal(requeued, 2);
    await clock.advance(1_000);
    assert.equal(attempts + requeued, 5, 'and nothing after');
    ac.abort();
    await done;
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
    await until("'a' running", () => order.length === 1);
    const waited = queue.addAndWait('a').then((o) => order.push(`waited a ${o.outcome}`));
    const bad = await queue.addAndWait('bad');
    await waited;
    ac.abort();
    await done;
    assert.equal(bad.outcome, 'error');
    assert.deepEqual(order.filter((o) => o.includes(' a')), ['run a', 'run a', 'waited a ok'], 'the waiter waited for the second run');
  });

  it("hands the waiter the handler's result", async () => {
    const queue = new WorkQueue<string>({ key: (s) => s, concurrency: 1 });
    const ac = new AbortController();
    const done = queue.start(ac.signal, async () => ({ relationsUnknown: true }));
    const finished = await queue.addAndWait('a');
    ac.abort();
    await done;
    assert.deepEqual(finished, { outcome: 'ok', result: { relationsUnknown: true } });
  });
});

describe('work queue: when is a key done', () => {
  // The checkpointer deletes a primary's pending row on a run that is not followed by another:
  // a run that an event dirtied, that failed or that asked to run again must say so, or a crash
  // before the next run resumes the watch past the event with nothing pending.
  it('says a run is followed by another when its key was added while it ran, failed or requeued', async () => {
    const seen: string[] = [];
    let release: (() => void) | undefined;
    let runs = 0;
    const queue = new WorkQueue<string>({
      key: (s) => s,
      concurrency: 1,
      backoffInitialMs: 5,
      onProcessed: (key, _ms, outcome, runsAgain) => seen.push(`${key} ${outcome} ${runsAgain}`),
    });
    const ac = new AbortController();
    const done = queue.start(ac.signal, async (key) => {
      runs++;
      if (key === 'dirtied' && runs === 1) await new Promise<void>((r) => (release = r));
      if (key === 'fails' && seen.filter((s) => s.startsWith('fails')).length === 0) throw new Error('boom');
      if (key === 'requeues' && seen.filter((s) => s.startsWith('requeues')).length === 0) return { requeueAfterMs: 5 };
      return {};
    });
    queue.add('dirtied');
    await until('the first run', () => release !== undefined);
    queue.add('dirtied'); // an event while it runs
    release!();
    await until('the run after', () => seen.length === 2);
    queue.add('fails');
    await until('the retry', () => seen.length === 4);
    queue.add('requeues');
    await until('the requeued run', () => seen.length === 6);
    ac.abort();
    await done;
    assert.deepEqual(seen, ['dirtied ok true', 'dirtied ok false', 'fails error true', 'fails ok false', 'requeues requeue true', 'requeues ok false']);
  });
});

describe('work queue on a fake clock', () => {
  it('retries a failed item after its backoff, not sooner, and never sooner than Retry-After', async () => {
    const clock = new FakeClock();
    const runs: Array<{ key: string; at: number }> = [];
    const failing = new Map([['a', 2], ['b', 1]]);
    // Jitter fixed at its top: the delay is exactly the ceiling (500 ms, then 1 s).
    const queue = new WorkQueue<string>({ key: (s) => s, concurrency: 2, clock, random: () => 1, backoffInitialMs: 500 });
    const ac = new AbortController();
    const done = queue.start(ac.signal, async (key) => {
      runs.push({ key, at: clock.now() });
      const left = failing.get(key) ?? 0;
      if (left > 0) {
        failing.set(key, left - 1);
        // b's API server said when to come back: 3 s.
        throw key === 'b' ? Object.assign(new Error('429'), { retryAfterSeconds: 3 }) : new Error('503');
      }
      return {};
    });
    queue.add('a');
    queue.add('b');
    await settle();
    assert.deepEqual(runs, [{ key: 'a', at: 0 }, { key: 'b', at: 0 }]);
    await clock.advance(499);
    assert.equal(runs.length, 2, 'not a millisecond before the backoff');
    await clock.advance(1);
    assert.deepEqual(runs[2], { key: 'a', at: 500 }, 'first retry after 500 ms');
    await clock.advance(999);
    assert.equal(runs.length, 3, 'the second backoff doubles');
    await clock.advance(1);
    assert.deepEqual(runs[3], { key: 'a', at: 1500 });
    await clock.advance(1499);
    assert.equal(runs.filter((r) => r.key === 'b').length, 1, 'b waits for its Retry-After, longer than its backoff');
    await clock.advance(1);
    assert.deepEqual(runs[4], { key: 'b', at: 3000 });
    await clock.advance(60_000);
    assert.equal(runs.length, 5, 'nothing more once both succeeded');
    assert.equal(clock.pending, 0);
    ac.abort();
    await done;
  });

  it('retries a failed item as retryAs makes it, merged with what is added for its key meanwhile', async () => {
    // Items "key:hint"; a retry carries "retry", a merge joins the hints.
    const clock = new FakeClock();
    const runs: string[] = [];
    const key = (s: string) => s.split(':')[0]!;
    const queue = new WorkQueue<string>({
      key, concurrency: 1, clock, random: () => 1, backoffInitialMs: 500,
      retryAs: (item, err) => `${key(item)}:retry-after-${(err as Error).message}`,
      merge: (earlier, later) => `${key(later)}:${[earlier, later].map((i) => i.split(':')[1]).join('+')}`,
    });
    const ac = new AbortController();
    const done = queue.start(ac.signal, async (item) => {
      runs.push(item);
      if (runs.length === 1) throw new Error('409');
      return {};
    });
    queue.add('p:edge');
    await settle();
    await clock.advance(100);
    // An event for the primary while its retry waits: it runs at once, as the retry's item merged with it.
    queue.add('p:edge2');
    await settle();
    assert.deepEqual(runs, ['p:edge', 'p:retry-after-409+edge2'], 'the retry hint is not lost to the event');
    // The retry's timer still runs its item once (as client-go's AddRateLimited does).
    await clock.advance(1000);
    assert.deepEqual(runs.slice(2), ['p:retry-after-409']);
    ac.abort();
    await done;
  });

  it('keeps the earlier of two delays for one item, and a fresh add runs at once', async () => {
    const clock = new FakeClock();
    const runs: number[] = [];
    const queue = new WorkQueue<string>({ key: (s) => s, concurrency: 1, clock });
    const ac = new AbortController();
    const done = queue.start(ac.signal, async () => {
      runs.push(clock.now());
      return {};
    });
    queue.addAfter('a', 30_000);
    queue.addAfter('a', 10_000);
    queue.addAfter('a', 20_000);
    await clock.advance(9_999);
    assert.deepEqual(runs, []);
    await clock.advance(1);
    assert.deepEqual(runs, [10_000], 'the earliest delay wins');
    await clock.advance(60_000);
    assert.deepEqual(runs, [10_000], 'and the later ones were dropped');
    queue.addAfter('a', 30_000);
    queue.add('a');
    await settle();
    assert.deepEqual(runs, [10_000, 70_000], 'a change does not wait for a pending retry');
    ac.abort();
    await done;
  });

  it('backs off to its far ceiling what keeps being refused, to 60 s an outage, and runs a fresh change at once', async () => {
    const clock = new FakeClock();
    const runs: Array<{ key: string; at: number }> = [];
    let fixed = false;
    // As wiring.ts: a lasting refusal (here any error named "refused") may wait 1,000 s; anything else 60 s.
    const queue = new WorkQueue<string>({ key: (s) => s, concurrency: 2, clock, random: () => 1, backoffInitialMs: 500, backoffMaxMsFor: (err) => ((err as Error).message === 'refused' ? 1_000_000 : undefined) });
    const ac = new AbortController();
    const done = queue.start(ac.signal, async (key) => {
      runs.push({ key, at: clock.now() });
      if (key === 'refused' && !fixed) throw new Error('refused');
      if (key === 'outage') throw new Error('503');
      return {};
    });
    queue.add('refused');
    queue.add('outage');
    await settle();
    // 14 failures each: 500 ms doubling, capped.
    for (let i = 0; i < 40; i++) await clock.advance(60_000);
    const gaps = (key: string) => runs.filter((r) => r.key === key).map((r, i, all) => (i === 0 ? 0 : r.at - all[i - 1]!.at));
    assert.ok(Math.max(...gaps('outage')) <= 60_000, `an outage's retries stay within 60 s (${gaps('outage').join(', ')})`);
    assert.ok(Math.max(...gaps('refused')) > 60_000, `a lasting refusal's go past 60 s (${gaps('refused').join(', ')})`);
    // The cause fixed (the primary changed): the change runs now, not at the pending retry.
    fixed = true;
    const before = runs.length;
    queue.add('refused');
    await settle();
    assert.deepEqual(runs.slice(before).filter((r) => r.key === 'refused'), [{ key: 'refused', at: clock.now() }]);
    ac.abort();
    await done;
  });

  it('tells how long a run waited in the queue, and how long the runs in progress have run', async () => {
    const clock = new FakeClock();
    const waited: number[] = [];
    let release!: () => void;
    let adds = 0;
    const queue = new WorkQueue<string>({ key: (s) => s, concurrency: 1, clock, onAdded: () => adds++, onStarted: (_item, ms) => waited.push(ms) });
    const ac = new AbortController();
    const done = queue.start(ac.signal, async (key) => {
      if (key === 'slow') await new Promise<void>((r) => (release = r));
      return {};
    });
    queue.add('slow');
    await settle();
    queue.add('next');
    queue.add('next');
    queue.add('slow');
    queue.add('slow');
    assert.equal(adds, 3, 'slow, next, and slow again while it runs; not what waits already');
    await clock.advance(2_000);
    assert.deepEqual(queue.running(), [2_000], 'slow has run 2 s');
    release();
    await settle();
    await settle();
    assert.deepEqual(waited, [0, 2_000, 2_000], 'next waited 2 s behind slow, and slow\'s second run from its add during the first');
    assert.deepEqual(queue.running(), [0], 'slow\'s second run has just begun');
    release();
    await settle();
    assert.deepEqual(queue.running(), []);
    assert.equal(adds, 3, 'the run after a run is the add made during it, not another');
    ac.abort();
    await done;
  });
});
