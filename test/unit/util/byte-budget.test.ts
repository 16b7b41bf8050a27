// The byte budget's decisions alone: takers that fit go at once, others wait in the order they
// asked, a take larger than the whole budget waits for all of it instead of for ever, and an
// abort while waiting takes nothing and lets those behind go. With real answers and LIST pages:
// test/unit/kube/parse-budget.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ByteBudget } from '../../../src/util/byte-budget.js';
import { settle } from '../../harness/fake-clock.js';

describe('byte budget', () => {
  it('lets takers that fit go at once, and the others in the order they asked as bytes come back', async () => {
    const waits: number[] = [];
    const budget = new ByteBudget({ capacity: 100, onWaited: (ms) => void waits.push(ms) });
    const first = await budget.take(60);
    const order: string[] = [];
    const big = budget.take(70).then((r) => (order.push('big'), r));
    // Fits beside the first, but asked after big and not small (over an eighth): it does not overtake it.
    const small = budget.take(20).then((r) => (order.push('small'), r));
    await settle();
    assert.deepEqual(order, []);
    assert.equal(budget.queued, 2);
    first();
    first();
    await settle();
    assert.deepEqual(order, ['big', 'small'], 'in order, once both fit');
    assert.equal(budget.held, 90);
    (await big)();
    (await small)();
    assert.equal(budget.held, 0, 'a release twice gives back once');
    assert.equal(waits.length, 2, 'both waits told');
  });

  it("lets small takes go ahead of a large waiting one, within an eighth, and never for ever", async () => {
    const budget = new ByteBudget({ capacity: 800 });
    const held = await budget.take(500);
    let bigGranted = false;
    // Another tenant's relist: a large page waits for the held one.
    const big = budget.take(400).then((r) => ((bigGranted = true), r));
    await settle();
    // Small events of other clusters meanwhile: at most 100 (an eighth) of them go ahead.
    const a = await budget.take(60);
    const b = await budget.take(40);
    let thirdGranted = false;
    const third = budget.take(10).then((r) => ((thirdGranted = true), r));
    await settle();
    assert.equal(thirdGranted, false, 'past the eighth: it waits in line');
    a();
    // Room among the small ones again: the small one waiting goes, still ahead of big.
    await settle();
    assert.equal(thirdGranted, true, 'let in as room among the small ones came back');
    assert.equal(bigGranted, false);
    held();
    await settle();
    assert.ok(bigGranted, 'big goes once the holder before it gave back: the small ones ahead did not starve it');
    (await big)();
    (await third)();
    b();
    assert.equal(budget.held, 0);
  });

  it('gives a take larger than the budget all of it, once nothing else is taken', async () => {
    const budget = new ByteBudget({ capacity: 100 });
    const other = await budget.take(1);
    let got = false;
    const huge = budget.take(1_000).then((r) => ((got = true), r));
    await settle();
    assert.equal(got, false);
    other();
    await settle();
    assert.equal(got, true);
    assert.equal(budget.held, 100);
    (await huge)();
    assert.equal(budget.held, 0);
  });

  it('takes nothing for a waiter that was aborted, and lets those behind it go', async () => {
    const budget = new ByteBudget({ capacity: 100 });
    const first = await budget.take(50);
    const abort = new AbortController();
    const aborted = budget.take(80, abort.signal);
    const behind = budget.take(40);
    abort.abort(new Error('stopped'));
    await assert.rejects(aborted, /stopped/);
    await settle();
    assert.equal(budget.held, 90, 'the one behind went as soon as the one ahead left');
    first();
    (await behind)();
    assert.equal(budget.held, 0);
    assert.equal(budget.queued, 0);
  });
});
