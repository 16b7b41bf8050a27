// The rewrite pace on a fake clock: what a tenant's copies leave in etcd's history is charged to
// it; within its burst it writes at once, past it its writes are due when the debt is paid at its
// rate; tenants that rewrite at once share the total, none below the floor, and one tenant's debt
// never makes another wait.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BURST_SECONDS, RewritePace } from '../../../src/sync/rewrite-pace.js';
import { FakeClock } from '../../harness/fake-clock.js';

const KiB = 1024;

describe('RewritePace', () => {
  it(`lets a tenant leave ${BURST_SECONDS} seconds of its rate behind at once, then holds its writes until paid`, async () => {
    const clock = new FakeClock();
    const pace = new RewritePace({ bytesPerSecondPerCluster: 100 * KiB, bytesPerSecond: 1000 * KiB }, clock);
    assert.equal(pace.due('a'), 0, 'a tenant without debt writes at once (a first sync)');
    for (let i = 0; i < BURST_SECONDS; i++) {
      assert.equal(pace.due('a'), 0, `write ${i} is within the burst`);
      pace.charge('a', 100 * KiB);
    }
    pace.charge('a', 100 * KiB);
    assert.equal(pace.due('a'), 1000, 'one second of debt past the burst');
    await clock.advance(999);
    assert.equal(pace.due('a'), 1);
    await clock.advance(1);
    assert.equal(pace.due('a'), 0);
    assert.equal(pace.due('b'), 0, "another tenant never waits for a's debt");
  });

  it('shares the total among the tenants that rewrite, each at least the floor', async () => {
    const clock = new FakeClock();
    const pace = new RewritePace({ bytesPerSecondPerCluster: 1000 * KiB, bytesPerSecond: 200 * KiB }, clock);
    // Alone: the whole total, 200 KiB/s.
    pace.charge('a', (BURST_SECONDS + 1) * 200 * KiB);
    assert.equal(pace.due('a'), 1000);
    // Two at once: 100 KiB/s each.
    await clock.advance(2000);
    pace.charge('b', (BURST_SECONDS + 1) * 100 * KiB);
    assert.equal(pace.due('b'), 1000);
    // A hundred tenants (kcp workspaces) at once: 2 KiB/s each by share, 64 KiB/s by the floor.
    await clock.advance(2000);
    for (let i = 0; i < 100; i++) pace.charge(`w${i}`, 1);
    await clock.advance(1000);
    pace.charge('c', (BURST_SECONDS + 1) * 64 * KiB);
    assert.equal(pace.due('c'), 1000);
  });
});
