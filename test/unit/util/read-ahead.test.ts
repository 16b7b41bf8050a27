// A sweep reads its LIST pages one ahead (util/read-ahead.ts): the next page
// is requested while the caller works on the current one, no more than one
// ahead, a failed page surfaces where the caller reaches it (not as an
// unhandled rejection that would end the process), and a caller that stops
// early closes the source.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { readAhead } from '../../../src/util/read-ahead.js';

/** A source whose every item is requested (logged) and then released by hand. */
function source(count: number, failAt?: number) {
  const requested: number[] = [];
  const release: Array<() => void> = [];
  let closed = false;
  async function* pages(): AsyncGenerator<number> {
    try {
      for (let i = 0; i < count; i++) {
        requested.push(i);
        await new Promise<void>((resolve) => release.push(resolve));
        if (i === failAt) throw new Error(`page ${i} failed`);
        yield i;
      }
    } finally {
      closed = true;
    }
  }
  return { pages: pages(), requested, release: (i: number) => release[i]!(), closed: () => closed };
}

const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

/** A plain iterator (not a generator, which would queue return() behind a pending next()): records when it is closed. */
function plainSource(count: number) {
  const events: string[] = [];
  const release: Array<() => void> = [];
  let i = 0;
  const iterator: AsyncIterator<number> = {
    next: async () => {
      if (i >= count) return { value: undefined, done: true };
      const n = i++;
      events.push(`asked ${n}`);
      await new Promise<void>((resolve) => release.push(resolve));
      events.push(`got ${n}`);
      return { value: n, done: false };
    },
    return: async () => {
      events.push('closed');
      throw new Error('closing failed');
    },
  };
  return { pages: { [Symbol.asyncIterator]: () => iterator }, events, release: (n: number) => release[n]!() };
}

describe('readAhead', () => {
  it('asks for the next item while the caller holds the current one, and never two ahead', async () => {
    const s = source(3);
    const it = readAhead(s.pages);
    const first = it.next();
    await tick();
    s.release(0);
    assert.deepEqual(await first, { value: 0, done: false });
    await tick();
    assert.deepEqual(s.requested, [0, 1], 'item 1 is requested before the caller asked for it');
    s.release(1);
    await tick();
    assert.deepEqual(s.requested, [0, 1], 'item 2 waits until the caller takes item 1');
    assert.deepEqual(await it.next(), { value: 1, done: false });
    await tick();
    assert.deepEqual(s.requested, [0, 1, 2]);
    s.release(2);
    assert.deepEqual(await it.next(), { value: 2, done: false });
    assert.deepEqual(await it.next(), { value: undefined, done: true });
    assert.equal(s.closed(), true);
  });

  it('surfaces a failure of the item read ahead where the caller reaches it', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const s = source(3, 1);
      const it = readAhead(s.pages);
      const first = it.next();
      await tick();
      s.release(0);
      assert.equal((await first).value, 0);
      await tick();
      s.release(1); // fails while the caller still works on item 0
      await tick();
      await tick();
      assert.deepEqual(unhandled, []);
      await assert.rejects(it.next(), /page 1 failed/);
      assert.deepEqual(s.requested, [0, 1]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it('closes the source when the caller stops early, after the item read ahead arrived', async () => {
    const s = source(5);
    const seen: number[] = [];
    const loop = (async () => {
      for await (const page of readAhead(s.pages)) {
        seen.push(page);
        break;
      }
    })();
    await tick();
    s.release(0);
    await tick();
    await tick();
    assert.equal(s.closed(), false, 'the request ahead is still out');
    s.release(1);
    await loop;
    assert.deepEqual(seen, [0]);
    assert.deepEqual(s.requested, [0, 1], 'nothing asked beyond the one ahead');
    assert.equal(s.closed(), true);
  });

  it('closes a plain iterator only after the request ahead settled, and keeps the caller\'s error over a failed close', async () => {
    const s = plainSource(5);
    const loop = (async () => {
      for await (const page of readAhead(s.pages)) {
        if (page === 0) throw new Error('the caller failed');
      }
    })();
    await tick();
    s.release(0);
    await tick();
    await tick();
    assert.deepEqual(s.events, ['asked 0', 'got 0', 'asked 1'], 'not closed while page 1 is still being read');
    s.release(1);
    await assert.rejects(loop, /the caller failed/);
    assert.deepEqual(s.events, ['asked 0', 'got 0', 'asked 1', 'got 1', 'closed']);
  });
});
