// Heavy work takes turns on the event loop: a socket that became readable while one heavy task
// ran is read before the next heavy task starts (another tenant's small change is not held
// behind a burst of large ones), light work never waits, and heavy tasks run in order.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, connect, type Socket, type AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { systemClock, type Clock } from '../../../src/util/clock.js';
import { HeavyTurns } from '../../../src/util/heavy-turns.js';

const iteration = () => new Promise((resolve) => setImmediate(resolve));

/** A clock whose time the test moves, and whose waits (the rests) the test ends. */
function restClock() {
  const state = { now: 0, rests: [] as Array<{ ms: number; end: () => void }> };
  const clock: Clock = { ...systemClock, now: () => state.now, sleep: (ms) => new Promise<void>((end) => state.rests.push({ ms, end })) };
  return { state, clock };
}

/**
 * Turns on the rest clock (large from 4096, a rest after 20 ms), and a heavy task that, at its turn
 * in `lane`, says its name in `order` and keeps the loop for `takesMs` of the clock's time.
 */
function restingTurns() {
  const { state, clock } = restClock();
  const turns = new HeavyTurns(1024, clock, 20);
  const order: string[] = [];
  const heavy = async (lane: string, name: string, cost: number, takesMs: number) => {
    await turns.turn(cost, lane);
    order.push(name);
    state.now += takesMs;
  };
  return { state, order, heavy };
}

/** The CPU busy for `ms`, as parsing a large text keeps it. */
function busy(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until);
}

describe('heavy turns', () => {
  it('reads a socket that became readable during one heavy task before the next one starts', async () => {
    let serverSide: Socket | undefined;
    const server = createServer((s) => void (serverSide = s));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const client = connect((server.address() as AddressInfo).port, '127.0.0.1');
    await once(client, 'connect');
    while (!serverSide) await new Promise((resolve) => setImmediate(resolve));
    try {
      const order: string[] = [];
      client.on('data', () => order.push('small change'));
      const turns = new HeavyTurns(1024);
      const heavy = async (name: string, during?: () => void) => {
        await turns.turn(1024 * 1024);
        order.push(`${name} starts`);
        during?.();
        busy(30);
      };
      // Three large watch lines at once; the other tenant's bytes arrive while the first is parsed.
      await Promise.all([heavy('a', () => serverSide!.write('x')), heavy('b'), heavy('c')]);
      while (!order.includes('small change')) await new Promise((resolve) => setImmediate(resolve));
      assert.deepEqual(order, ['a starts', 'small change', 'b starts', 'c starts']);
      assert.equal(turns.turnsGranted, 3);
    } finally {
      client.destroy();
      server.close();
    }
  });

  it('takes lanes in turn: a lane with many heavy tasks queued delays another lane\'s by one turn each', async () => {
    const turns = new HeavyTurns(1024);
    const order: string[] = [];
    const heavy = async (lane: string, n: number) => {
      await turns.turn(4096, lane);
      order.push(`${lane}${n}`);
    };
    await Promise.all([...[1, 2, 3, 4, 5].map((n) => heavy('a', n)), heavy('b', 1), heavy('b', 2)]);
    assert.deepEqual(order, ['a1', 'b1', 'a2', 'b2', 'a3', 'a4', 'a5']);
  });

  it('lets light work go on at once, and runs heavy work in the order it asked', async () => {
    const turns = new HeavyTurns(1024);
    assert.equal(turns.turn(1023), undefined, 'light: no promise, no wait');
    const order: number[] = [];
    await Promise.all([5, 1, 4, 2, 3].map(async (n) => {
      await turns.turn(4096);
      order.push(n);
    }));
    assert.deepEqual(order, [5, 1, 4, 2, 3]);
    assert.equal(turns.queued, 0);
  });

  it("rests heavy work after a long turn, as long as its loop iteration took (at most 100 ms), whatever lane asks next", async () => {
    const { state, clock } = restClock();
    const turns = new HeavyTurns(1024, clock, 20);
    const order: string[] = [];
    // A tenant's megabyte parsed on a loaded machine (50 ms), then more of its own; another lane's page (5 ms).
    const heavy = async (lane: string, name: string, takesMs: number) => {
      await turns.turn(4096, lane);
      order.push(name);
      state.now += takesMs;
    };
    const all = Promise.all([heavy('a', 'a1', 50), heavy('a', 'a2', 500), heavy('b', 'b1', 5), heavy('a', 'a3', 1)]);
    for (let i = 0; i < 10; i++) await iteration();
    assert.deepEqual(order, ['a1'], 'the next heavy turn, of any lane, waits out the rest: light work has the loop');
    assert.deepEqual(state.rests.map((r) => r.ms), [50]);
    state.now = 100;
    state.rests[0]!.end();
    for (let i = 0; i < 10; i++) await iteration();
    assert.deepEqual(order, ['a1', 'b1', 'a2'], 'lanes still take turns; a short turn (b1) is not followed by a rest');
    assert.deepEqual(state.rests.map((r) => r.ms), [50, 100], 'a turn of 500 ms rests heavy work 100 ms, not 500');
    state.now = 705;
    state.rests[1]!.end();
    await all;
    assert.deepEqual(order, ['a1', 'b1', 'a2', 'a3']);
  });

  it('lets smaller turns through a rest: a reconcile\'s few rows are not held behind a tenant\'s large line', async () => {
    const { state, order, heavy } = restingTurns();
    // Large: 4 × 1024 or more. a1 is long; a2 (large) waits out the rest, b1 (small) does not.
    const all = Promise.all([heavy('a', 'a1', 8192, 50), heavy('a', 'a2', 8192, 1), heavy('b', 'b1', 2048, 1)]);
    for (let i = 0; i < 10; i++) await iteration();
    assert.deepEqual(order, ['a1', 'b1']);
    assert.equal(state.rests.length, 1);
    state.now = 200;
    state.rests[0]!.end();
    await all;
    assert.deepEqual(order, ['a1', 'b1', 'a2']);
  });

  it("a stream of smaller long turns starts no rest: another lane's large work is not starved", async () => {
    const { state, order, heavy } = restingTurns();
    // A tenant's medium objects (under the large size), each 25 ms to parse, without end; another lane's large one.
    const mediums = Array.from({ length: 20 }, (_, i) => heavy('a', `a${i}`, 2048, 25));
    const large = heavy('b', 'b-large', 8192, 1);
    for (let i = 0; i < 10; i++) await iteration();
    assert.ok(order.includes('b-large'), `the large turn was granted among the medium ones (${order.join(' ')})`);
    assert.ok(order.indexOf('b-large') <= 2, 'at its lane\'s turn');
    assert.equal(state.rests.length, 0, 'no rest was started by a turn under the large size');
    await Promise.all([...mediums, large]);
  });

  it('rests only between heavy turns: short turns follow each other, and a turn asked long after a long one starts at once', async () => {
    const { state, clock } = restClock();
    const turns = new HeavyTurns(1024, clock, 20);
    const order: number[] = [];
    await Promise.all([1, 2, 3].map(async (n) => {
      await turns.turn(4096, 'a');
      order.push(n);
      state.now += 19;
    }));
    assert.deepEqual(order, [1, 2, 3]);
    assert.equal(state.rests.length, 0, 'turns under 20 ms are not followed by a rest');
    await turns.turn(4096, 'a');
    state.now += 100;
    for (let i = 0; i < 5; i++) await iteration();
    let started = false;
    void turns.turn(4096, 'a')!.then(() => void (started = true));
    for (let i = 0; i < 5; i++) await iteration();
    assert.equal(started, true);
    assert.equal(state.rests.length, 0);
  });

  it('meters small pieces: a turn once their costs come to the heavy size, then counts afresh', () => {
    const turns = new HeavyTurns(1024);
    const lines = turns.meter('a');
    const waited = [400, 400, 300, 100, 1000, 2000].map((cost) => lines.add(cost) !== undefined);
    // 400+400+300 = 1100 waits; then 100+1000 waits; 2000 alone waits.
    assert.deepEqual(waited, [false, false, true, false, true, true]);
    assert.equal(turns.queued, 3);
  });
});
