// `relsync sweep` must not run beside a live replica, and must not take a
// replica for dead because of another machine's clock: a Lease record names a
// live holder while its resourceVersion moves, whatever its renewTime says.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { KubeObject } from '../../../src/core/object.js';
import { ApiError } from '../../../src/kube/api-error.js';
import { liveHolder, LeaseListForbiddenError } from '../../../src/controller/live-holders.js';
import { FakeClock, settle } from '../../harness/fake-clock.js';
import { LEASE_KIND_LABEL, LEASE_SET_LABEL } from '../../../src/core/relsync-keys.js';

class Leases {
  readonly leases = new Map<string, KubeObject>();
  forbidList = false;
  private version = 0;
  put(name: string, holder: string, labels: Record<string, string> = {}): void {
    // renewTime far in the past on purpose: another machine's clock decides nothing.
    this.leases.set(name, { metadata: { name, labels, resourceVersion: String(++this.version) }, spec: { holderIdentity: holder, leaseDurationSeconds: 15, renewTime: '1970-01-01T00:00:00.000000Z' } });
  }
  async get(_ns: string, name: string) {
    return this.leases.get(name);
  }
  async listAll(options: { labelSelector?: string } = {}) {
    if (this.forbidList) throw new ApiError('GET', '/leases', 403, JSON.stringify({ kind: 'Status', reason: 'Forbidden' }));
    const wanted = (options.labelSelector ?? '').split(',').map((t) => t.split('='));
    return { items: [...this.leases.values()].filter((l) => wanted.every(([k, v]) => l.metadata.labels?.[k!] === v)), resourceVersion: '' };
  }
}

const shardLabels = { [LEASE_SET_LABEL]: 'relsync', [LEASE_KIND_LABEL]: 'shard' };

describe('live holder (for one-shot commands)', () => {
  it('is none at once when no record names a holder', async () => {
    const leases = new Leases();
    leases.put('relsync', '');
    assert.equal(await liveHolder(leases, 'ns', 'relsync', new FakeClock()), undefined);
  });

  it('is the leader while its record is renewed, though its renewTime is decades old by this clock', async () => {
    const leases = new Leases();
    const clock = new FakeClock();
    leases.put('relsync', 'leader-1');
    const answer = liveHolder(leases, 'ns', 'relsync', clock);
    await settle();
    await clock.advance(2_000);
    leases.put('relsync', 'leader-1'); // renewed
    await clock.advance(1_000);
    assert.deepEqual(await answer, { holder: 'leader-1', lease: 'ns/relsync' });
  });

  it('is a shard holder that renews, and none once every record stood still for its lease duration', async () => {
    const leases = new Leases();
    const clock = new FakeClock();
    leases.put('relsync-shard-0', 'r1', shardLabels);
    let done = false;
    const answer = liveHolder(leases, 'ns', 'relsync', clock).finally(() => (done = true));
    for (let t = 0; t < 14_000; t += 1_000) await clock.advance(1_000);
    assert.equal(done, false, 'still watching before the lease duration');
    await clock.advance(2_000);
    assert.equal(await answer, undefined, 'unchanged for 15 s: no one holds it');

    const renewed = liveHolder(leases, 'ns', 'relsync', clock);
    await settle();
    await clock.advance(1_000);
    leases.put('relsync-shard-0', 'r2', shardLabels); // taken by another
    await clock.advance(1_000);
    assert.deepEqual(await renewed, { holder: 'r2', lease: 'ns/relsync-shard-0' });
  });

  it('refuses to guess when it may not list Leases', async () => {
    const leases = new Leases();
    leases.forbidList = true;
    await assert.rejects(liveHolder(leases, 'ns', 'relsync', new FakeClock()), LeaseListForbiddenError);
  });
});
