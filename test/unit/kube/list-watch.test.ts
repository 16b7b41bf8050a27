// The list/watch loop's decisions in time, on a fake clock and a fake API
// (the loop's ListWatchSource port), without sleeps: when the idle watchdog
// reconnects, when retries come, when the loop stops counting as in sync
// (readiness), when it counts as stuck (liveness), and when it first holds the
// current state (onFirstSync, what readers wait for). On a real API server:
// test/e2e/list-watch.test.ts and test/e2e/watch-liveness.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pino from 'pino';
import type { KubeObject } from '../../../src/core/object.js';
import { ListWatch, wholeList, type ListWatchOptions, type WatchHandler } from '../../../src/kube/list-watch.js';
import { FakeClock, settle } from '../../harness/fake-clock.js';
import { deferred, FakeApi } from '../../harness/fake-list-watch-source.js';

const logger = pino({ level: 'silent' });

function setup(options: Partial<Omit<ListWatchOptions, 'handler'>> & { handler?: Partial<WatchHandler>; listHeld?: Promise<void> } = {}) {
  const clock = new FakeClock();
  const api = new FakeApi();
  const reconnects: Array<{ reason: string; at: number }> = [];
  const handled: string[] = [];
  const { handler, listHeld, ...rest } = options;
  api.listHeld = listHeld;
  const loop = new ListWatch({
    client: api,
    logger,
    clock,
    watchdogMs: 10_000,
    handler: {
      onEvent: async (_type, object: KubeObject) => void handled.push(object.metadata.name ?? ''),
      beginList: () => wholeList(async () => undefined),
      ...handler,
    },
    onReconnect: (reason) => reconnects.push({ reason, at: clock.now() }),
    ...rest,
  });
  const stop = new AbortController();
  const running = loop.start(stop.signal);
  const end = async () => {
    stop.abort();
    await running;
  };
  return { clock, api, loop, reconnects, handled, end };
}

describe('list/watch idle timer', () => {
  it('reconnects a silent watch after the idle period, not before, and resumes without a LIST', async () => {
    const { clock, api, reconnects, end } = setup();
    await settle();
    assert.equal(api.lists, 1);
    assert.equal(api.watches.length, 1);
    assert.equal(api.watches[0]!.resourceVersion, '10', 'watches from the list');
    await clock.advance(9_999);
    assert.deepEqual(reconnects, [], 'not a millisecond before the idle period');
    await clock.advance(1);
    assert.deepEqual(reconnects, [{ reason: 'watchdog', at: 10_000 }]);
    assert.equal(api.watches.length, 2, 'reconnected at once');
    assert.equal(api.watches[0]!.signal.aborted, true, 'the silent request was dropped');
    assert.equal(api.watches[1]!.resourceVersion, '10', 'from where it was');
    assert.equal(api.lists, 1, 'no LIST');
    await end();
  });

  it('counts any line, a bookmark too, as life: each one restarts the idle period', async () => {
    const { clock, api, reconnects, handled, end } = setup();
    await settle();
    await clock.advance(8_000);
    api.stream.push('BOOKMARK', '', '11');
    await clock.advance(8_000);
    api.stream.push('ADDED', 'a', '12');
    await clock.advance(9_999);
    assert.deepEqual(reconnects, [], 'silent 9.999 s at most');
    assert.deepEqual(handled, ['a'], 'the bookmark is no event');
    await clock.advance(1);
    assert.deepEqual(reconnects, [{ reason: 'watchdog', at: 26_000 }], '10 s after the last line');
    assert.equal(api.watches[1]!.resourceVersion, '12', 'resumes after the last line seen');
    await end();
  });

  it('against a server that never answers: reconnects every idle period, and is not in sync after the grace period', async () => {
    const { clock, api, loop, reconnects, end } = setup({ failureGraceMs: 15_000 });
    await settle();
    assert.equal(loop.synced, true);
    // The server ends the watch after a while (one that ends at once is a failure: below); the next request is never answered.
    await clock.advance(1_000);
    api.mode = 'hang';
    api.stream.end();
    await settle();
    assert.equal(api.watches.length, 2);
    await clock.advance(10_000);
    assert.deepEqual(reconnects.map((r) => r.at), [11_000]);
    assert.equal(loop.synced, true, 'one silent request is within the grace period');
    await clock.advance(14_999);
    assert.equal(loop.synced, true);
    await clock.advance(1);
    assert.equal(loop.synced, false, 'failing since the first watchdog, 15 s ago');
    assert.deepEqual(reconnects.map((r) => r.at), [11_000, 21_000]);
    assert.equal(loop.problem(), undefined, 'a hanging server is not a reason to restart: each reconnect is progress');
    api.mode = 'open';
    await clock.advance(10_000);
    assert.equal(loop.synced, true, 'in sync as soon as a stream opens');
    await end();
  });
});

describe('list/watch retries', () => {
  it('retries a failed request after its backoff, and stays in sync within the grace period', async () => {
    const { clock, api, loop, reconnects, end } = setup({ failureGraceMs: 2_000 });
    await settle();
    await clock.advance(1_000);
    api.mode = 'down';
    api.stream.end();
    await settle();
    assert.deepEqual(reconnects, [{ reason: 'error', at: 1_000 }]);
    assert.equal(api.watches.length, 2);
    await clock.advance(249);
    assert.equal(api.watches.length, 2, 'the first backoff is at least 250 ms');
    await clock.advance(251);
    assert.equal(api.watches.length, 3, 'and at most 500 ms');
    assert.equal(loop.synced, true, 'a failed reconnect alone is not out of sync');
    await clock.advance(1_500);
    assert.equal(loop.synced, false, 'failing for the whole grace period');
    // Down for ten minutes: retries, never more than 30 s apart, keep it alive.
    const before = api.watches.length;
    await clock.advance(600_000);
    assert.ok(api.watches.length - before >= 600 / 30, `${api.watches.length - before} retries in 10 minutes`);
    assert.equal(loop.problem(), undefined, 'an outage is not a reason to restart');
    assert.equal(api.lists, 1, 'a failed watch resumes; it does not list');
    api.mode = 'open';
    await clock.advance(30_000);
    assert.equal(loop.synced, true, 'in sync again once the server answers');
    await end();
  });
});

describe('list/watch liveness', () => {
  it('is stuck once a handler made no progress for stuckAfterMs (default: idle period + 60 s), and only then', async () => {
    const { clock, api, loop, handled, end } = setup({
      handler: {
        onEvent: (_type, object) => {
          handled.push(object.metadata.name ?? '');
          return object.metadata.name === 'hang' ? new Promise<void>(() => undefined) : Promise.resolve();
        },
      },
    });
    await settle();
    // Quiet for ten minutes: only watchdog reconnects, which are progress.
    await clock.advance(600_000);
    assert.equal(loop.problem(), undefined, 'a quiet watch is not stuck');
    api.stream.push('ADDED', 'hang', '11');
    await clock.advance(70_000);
    assert.deepEqual(handled.slice(-1), ['hang']);
    assert.equal(loop.problem(), undefined, 'exactly the limit is not past it');
    await clock.advance(1);
    assert.match(loop.problem() ?? '', /^watch fake\/configmaps made no progress for 70 s$/);
    // Handled before `end` resolves: the hanging handler never returns, so the loop is not awaited.
    void end();
  });

  it('honours an explicit stuckAfterMs, and a stopped loop is no problem', async () => {
    const { clock, api, loop, end } = setup({ stuckAfterMs: 5_000, handler: { onEvent: () => new Promise<void>(() => undefined) } });
    await settle();
    api.stream.push('ADDED', 'hang', '11');
    await clock.advance(5_000);
    assert.equal(loop.problem(), undefined);
    await clock.advance(1);
    assert.match(loop.problem() ?? '', /made no progress for 5 s/);
    void end();
    await settle();
    const { loop: stopped, end: stopIt } = setup();
    await settle();
    await stopIt();
    assert.equal(stopped.problem(), undefined, 'stopped on purpose');
  });
});

describe('list/watch stop', () => {
  it('stopped while its LIST is on its way: ends after the LIST without opening a watch', async () => {
    const held = deferred();
    const { api, end } = setup({ listHeld: held.promise });
    await settle();
    const ended = end();
    held.resolve();
    await ended;
    assert.equal(api.lists, 1);
    assert.equal(api.watches.length, 0, 'a watch opened after the stop would not see it, and hold the loop until its timeout');
  });
});

describe('list/watch first sync', () => {
  it('says once that it holds the current state: when its first LIST was handed over, not again after a relist', async () => {
    let listEnded = false;
    const firstSyncs: boolean[] = [];
    const held = deferred();
    const { clock, api, end } = setup({
      handler: { beginList: () => wholeList(async () => void (listEnded = true)) },
      onFirstSync: () => firstSyncs.push(listEnded),
      listHeld: held.promise,
    });
    await settle();
    assert.deepEqual(firstSyncs, [], 'not while the first LIST is still on its way');
    held.resolve();
    await settle();
    assert.deepEqual(firstSyncs, [true], 'once, after the list was handed over');
    // The resourceVersion expires: the loop lists again, which is not a first sync.
    api.mode = 'gone';
    api.stream.end();
    await clock.advance(1_000);
    assert.equal(api.lists, 2, 'relisted');
    assert.deepEqual(firstSyncs, [true], 'and said nothing again');
    await end();
  });

  it('a server that answers every watch with 410 Gone is relisted with the backoff, not in a loop', async () => {
    const { clock, api, end } = setup();
    await settle();
    assert.equal(api.lists, 1);
    await clock.advance(1_000);
    api.mode = 'always-gone';
    api.stream.end();
    await settle();
    // The first 410 relists at once; the next ones, moments later, wait 0.5 s, 1 s, 2 s, ...
    assert.equal(api.lists, 2, 'the first at once');
    // Jittered to half to whole: by 10 s at least 0.5 + 1 + 2 + 4 s have passed, at most 0.25 + 0.5 + 1 + 2 + 4 + 8.
    // A backoff past 5 s once made the next 410 look like the first and relist at once (8 in 10 s).
    await clock.advance(10_000);
    assert.ok(api.lists >= 6 && api.lists <= 7, `a few relists in 10 s, not thousands (${api.lists})`);
    await end();
  });

  for (const mode of ['empty', 'garbage'] as const) {
    it(`a server whose every watch ${mode === 'empty' ? 'ends at once without a line' : 'sends a line that does not parse'} is reconnected to with the backoff, not in a loop`, async () => {
      const { clock, api, reconnects, end } = setup();
      await settle();
      api.mode = mode;
      api.stream.end();
      await settle();
      await clock.advance(10_000);
      // 0.25–0.5 s, then 0.5–1, 1–2, 2–4, 4–8 s: at most 6 watches more in 10 s (thousands before).
      assert.ok(api.watches.length >= 4 && api.watches.length <= 7, `a few watches in 10 s, not thousands (${api.watches.length})`);
      assert.equal(api.lists, 1, 'no relist: the resourceVersion is kept');
      // (The first: the open watch ended by the test at once, itself a short one.)
      assert.ok(reconnects.length >= 4 && reconnects.slice(1).every((r) => r.reason === (mode === 'empty' ? 'short' : 'unparsable')), JSON.stringify(reconnects));
      // A watch that lasts resets the backoff: the next short one waits its first step again.
      api.mode = 'open';
      await clock.advance(16_000);
      const lasting = api.watches.length;
      api.stream.push('ADDED', 'a', '11');
      await settle();
      await clock.advance(2_000);
      api.mode = mode;
      api.stream.end();
      await settle();
      await clock.advance(600);
      assert.equal(api.watches.length, lasting + 2, 'the next short watch came after the first step of the backoff (0.25–0.5 s)');
      await end();
    });
  }

  it('a server whose every watch sends one line and ends is watched at most once a second', async () => {
    const { clock, api, end } = setup();
    await settle();
    api.mode = 'one-line';
    api.stream.end();
    await settle();
    await clock.advance(10_000);
    assert.ok(api.watches.length >= 10 && api.watches.length <= 12, `about one watch a second (${api.watches.length} in 10 s)`);
    await end();
  });

  it('a LIST the API server forbids says it too (readers would otherwise wait in silence), once, and the loop keeps trying', async () => {
    const firstSyncs: number[] = [];
    const { clock, api, end } = setup({ onFirstSync: () => firstSyncs.push(api.lists) });
    api.mode = 'forbidden';
    await settle();
    await clock.advance(60_000);
    assert.ok(api.lists > 1, 'retried');
    assert.deepEqual(firstSyncs, [1], 'said once, at the first refusal');
    await end();
  });

  it('a LIST that fails before its end tells its sink to let go of what its pages delivered, and never ends it', async () => {
    const calls: string[] = [];
    const { clock, api, end } = setup({
      handler: {
        beginList: () => ({
          page: async () => {
            calls.push('page');
            throw new Error('a handler that fails');
          },
          end: async () => void calls.push('end'),
          abort: () => void calls.push('abort'),
        }),
      },
    });
    await settle();
    assert.deepEqual(calls, ['page', 'abort']);
    api.mode = 'down';
    await clock.advance(1_000);
    assert.ok(calls.length > 2 && calls.slice(2).every((c) => c === 'abort'), `a LIST request that fails aborts too: ${calls.join(', ')}`);
    await end();
  });

  it('a first LIST that keeps failing says it after the grace period, not before, once, and the loop keeps trying', async () => {
    const firstSyncs: number[] = [];
    const { clock, api, end } = setup({ firstListGraceMs: 60_000, onFirstSync: () => firstSyncs.push(clock.now()) });
    api.mode = 'down';
    await settle();
    await clock.advance(59_000);
    assert.deepEqual(firstSyncs, [], 'readers wait while a failing LIST may still succeed');
    await clock.advance(60_000);
    assert.equal(firstSyncs.length, 1, 'then they go on reading live');
    assert.ok(firstSyncs[0]! >= 60_000, `said after the grace period (at ${firstSyncs[0]} ms)`);
    const lists = api.lists;
    api.mode = 'open';
    await clock.advance(60_000);
    assert.ok(api.lists > lists, 'kept trying, and listed once the server answered');
    assert.equal(firstSyncs.length, 1, 'said once');
    await end();
  });

  it('resumed from a checkpoint: says it at once, also when its watch request is never answered', async () => {
    const firstSyncs: number[] = [];
    const api0 = { watches: [] as unknown[] };
    const { api, end } = setup({ resumeFrom: '5', onFirstSync: () => firstSyncs.push(api0.watches.length) });
    api.mode = 'hang';
    await settle();
    assert.equal(api.lists, 0, 'no LIST');
    assert.deepEqual(firstSyncs, [0], 'before any watch answered');
    await end();
  });
});
