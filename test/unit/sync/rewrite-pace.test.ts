// The rewrite pace on a fake clock: a tenant within its burst does not wait, past it waits for its
// rate, and tenants that rewrite at once share the total without waiting on each other.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BURST_SECONDS, RewritePace } from '../../../src/sync/rewrite-pace.js';
import { FakeClock, settle } from '../../harness/fake-clock.js';

const KiB = 1024;

describe('RewritePace', () => {
  it(`lets a tenant rewrite ${BURST_SECONDS} seconds of its rate at once, then paces it`, async () => {
    const clock = new FakeClock();
    const pace = new RewritePace({ bytesPerSecondPerCluster: 100 * KiB, bytesPerSecond: 1000 * KiB }, clock);
    for (let i = 0; i < BURST_SECONDS; i++) assert.equal(await pace.take('a', 100 * KiB), 0, `rewrite ${i} is within the burst`);
    let waited: number | undefined;
    void pace.take('a', 100 * KiB).then((w) => (waited = w));
    await settle();
    assert.equal(waited, undefined, 'the next one waits');
    await clock.advance(999);
    assert.equal(waited, undefined, 'for its rate: not before a second');
    await clock.advance(1);
    assert.equal(waited, 1000);
  });

  it("shares the total among tenants that rewrite, and one tenant's debt never delays another", async () => {
    const clock = new FakeClock();
    const pace = new RewritePace({ bytesPerSecondPerCluster: 1000 * KiB, bytesPerSecond: 200 * KiB }, clock);
    // Tenant a alone gets the whole total: 200 KiB/s.
    for (let i = 0; i < BURST_SECONDS * 2; i++) await pace.take('a', 100 * KiB);
    let aWaited: number | undefined;
    void pace.take('a', 100 * KiB).then((w) => (aWaited = w));
    await settle();
    assert.equal(aWaited, undefined, 'a is past its burst');
    // Tenant b rewrites meanwhile: its own burst, at once.
    assert.equal(await pace.take('b', 100 * KiB), 0, "b does not wait behind a's debt");
    await clock.advance(500);
    assert.equal(aWaited, 500);
    // Two rewrite now: each at half the total (100 KiB/s), counted again within a second.
    await clock.advance(1000);
    for (let i = 0; i < BURST_SECONDS; i++) await pace.take('b', 100 * KiB);
    let bWaited: number | undefined;
    void pace.take('b', 100 * KiB).then((w) => (bWaited = w));
    await settle();
    await clock.advance(999);
    assert.equal(bWaited, undefined, 'b at half the total: 100 KiB take a second');
    await clock.advance(1);
    assert.ok(bWaited !== undefined);
  });
});
