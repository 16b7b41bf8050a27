// Leader election's decisions in time, on a fake clock and an in-memory Lease
// API (the elector's LeaseClient port), without sleeps: when a candidate may
// take a lease over, when a leader must step down, and that a clean stop hands
// the lease on at once. Between real replicas: test/e2e/leader-election.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pino from 'pino';
import type { KubeObject } from '../../../src/core/object.js';
import { ApiError } from '../../../src/kube/api-error.js';
import { LeaderElector, type LeaseClient } from '../../../src/controller/leader-election.js';
import { FakeClock, settle } from '../../harness/fake-clock.js';

const logger = pino({ level: 'silent' });
const path = '/apis/coordination.k8s.io/v1/namespaces/relsync/leases/relsync';

interface Spec {
  holderIdentity?: string;
  leaseDurationSeconds?: number;
  renewTime?: string;
  leaseTransitions?: number;
}

/** One Lease, with resourceVersions and their conflicts as an API server keeps them. */
class FakeLeases implements LeaseClient {
  lease: KubeObject | undefined;
  private version = 0;
  /** 'down': every request fails; 'hang': no request is ever answered. */
  mode: 'up' | 'down' | 'hang' = 'up';

  get spec(): Spec {
    return (this.lease?.spec ?? {}) as Spec;
  }

  async get(): Promise<KubeObject | undefined> {
    await this.answer();
    return this.lease && structuredClone(this.lease);
  }

  async create(namespace: string, object: KubeObject): Promise<KubeObject> {
    await this.answer();
    if (this.lease) throw new ApiError('POST', path, 409, JSON.stringify({ kind: 'Status', reason: 'AlreadyExists' }));
    return this.store({ ...object, metadata: { ...object.metadata, namespace } });
  }

  async replace(object: KubeObject): Promise<KubeObject> {
    await this.answer();
    if (!this.lease) throw new ApiError('PUT', path, 404, JSON.stringify({ kind: 'Status', reason: 'NotFound' }));
    if (object.metadata.resourceVersion !== this.lease.metadata.resourceVersion) throw new ApiError('PUT', path, 409, JSON.stringify({ kind: 'Status', reason: 'Conflict' }));
    return this.store(object);
  }

  /** Another replica writes the lease: holds it, or renews it. */
  writeAs(holder: string, leaseDurationSeconds = 15): void {
    this.store({ metadata: { name: 'relsync', namespace: 'relsync' }, spec: { ...this.spec, holderIdentity: holder, leaseDurationSeconds } });
  }

  private store(object: KubeObject): KubeObject {
    this.lease = structuredClone({ ...object, metadata: { ...object.metadata, resourceVersion: String(++this.version) } });
    return structuredClone(this.lease);
  }

  private answer(): Promise<void> {
    if (this.mode === 'down') return Promise.reject(new ApiError('GET', path, 503, 'unavailable'));
    if (this.mode === 'hang') return new Promise<void>(() => undefined);
    return Promise.resolve();
  }
}

function candidate(leases: FakeLeases, clock: FakeClock, identity: string) {
  const events: Array<{ what: 'started' | 'lost'; at: number }> = [];
  const elector = new LeaderElector({
    client: leases,
    namespace: 'relsync',
    name: 'relsync',
    identity,
    leaseDurationMs: 15_000,
    renewDeadlineMs: 10_000,
    retryPeriodMs: 2_000,
    logger,
    clock,
    onStarted: () => events.push({ what: 'started', at: clock.now() }),
    onLost: () => events.push({ what: 'lost', at: clock.now() }),
  });
  const stop = new AbortController();
  const running = elector.start(stop.signal);
  return { elector, events, stop, running };
}

describe('leader election on a fake clock', () => {
  it('takes a lease held by another only after it went a whole lease duration unchanged', async () => {
    const clock = new FakeClock();
    const leases = new FakeLeases();
    leases.writeAs('other');
    const me = candidate(leases, clock, 'me');
    await settle();
    assert.equal(me.elector.isLeader, false);
    assert.equal(me.elector.currentHolder, 'other');
    // Attempts every 2 s; the record was first seen at 0 and has not changed since.
    await clock.advance(15_000);
    assert.equal(me.elector.isLeader, false, 'not while the lease may still be alive (15 s, as seen on this clock)');
    assert.equal(leases.spec.holderIdentity, 'other');
    await clock.advance(1_000);
    assert.equal(me.elector.isLeader, true, 'the first attempt after the duration takes it');
    assert.deepEqual(me.events, [{ what: 'started', at: 16_000 }]);
    assert.equal(leases.spec.holderIdentity, 'me');
    assert.equal(leases.spec.leaseTransitions, 1);
    assert.equal(leases.spec.renewTime, '1970-01-01T00:00:16.000000Z', 'stamped with the clock, in MicroTime');
    me.stop.abort();
    await me.running;
  });

  it('does not take a lease its holder keeps renewing, and takes it a lease duration after the renewals stop', async () => {
    const clock = new FakeClock();
    const leases = new FakeLeases();
    leases.writeAs('other');
    const me = candidate(leases, clock, 'me');
    await settle();
    for (let i = 0; i < 12; i++) {
      await clock.advance(5_000);
      leases.writeAs('other'); // renewed every 5 s, for a minute
    }
    assert.equal(me.elector.isLeader, false, 'never taken while renewed');
    assert.deepEqual(me.events, []);
    // The last renewal, written at 60 s, is first seen at the attempt at 62 s: the
    // lease is free once that record stood unchanged for 15 s on this clock.
    await clock.advance(17_000);
    assert.equal(me.elector.isLeader, false, 'at 77 s it stood 15 s, not more');
    await clock.advance(1_000);
    assert.equal(me.elector.isLeader, true);
    assert.deepEqual(me.events, [{ what: 'started', at: 78_000 }]);
    me.stop.abort();
    await me.running;
  });

  it('keeps leading while it renews, and steps down when it could not renew within the renew deadline', async () => {
    const clock = new FakeClock();
    const leases = new FakeLeases();
    const me = candidate(leases, clock, 'me');
    await settle();
    assert.deepEqual(me.events, [{ what: 'started', at: 0 }], 'no lease yet: created at once');
    await clock.advance(60_000);
    assert.equal(me.elector.isLeader, true);
    assert.equal(leases.spec.renewTime, '1970-01-01T00:01:00.000000Z', 'renewed every retry period');
    // The API server goes away after the renewal at 60 s.
    leases.mode = 'down';
    await clock.advance(10_000);
    assert.equal(me.elector.isLeader, true, 'exactly the renew deadline is not past it');
    await clock.advance(2_000);
    assert.equal(me.elector.isLeader, false, 'the first attempt past the deadline steps down');
    assert.deepEqual(me.events, [{ what: 'started', at: 0 }, { what: 'lost', at: 72_000 }]);
    await me.running; // the loop ends with the leadership
    await clock.advance(60_000);
    assert.equal(me.events.length, 2, 'and lost is said once');
  });

  it('steps down at the renew deadline against an API server that never answers', async () => {
    const clock = new FakeClock();
    const leases = new FakeLeases();
    const me = candidate(leases, clock, 'me');
    await settle();
    await clock.advance(2_000); // renewed at 2 s
    leases.mode = 'hang';
    // The attempt at 4 s hangs; it is given up at the deadline, 10 s after it began.
    await clock.advance(11_999);
    assert.equal(me.elector.isLeader, true);
    await clock.advance(1);
    assert.equal(me.elector.isLeader, false);
    assert.deepEqual(me.events.at(-1), { what: 'lost', at: 14_000 });
    await me.running;
  });

  it('releases the lease on stop, so that a standby takes over at its next attempt, not a lease duration later', async () => {
    const clock = new FakeClock();
    const leases = new FakeLeases();
    const leader = candidate(leases, clock, 'leader');
    await settle();
    const standby = candidate(leases, clock, 'standby');
    await clock.advance(10_000);
    assert.equal(standby.elector.isLeader, false);
    assert.equal(standby.elector.currentHolder, 'leader');
    leader.stop.abort();
    await leader.running;
    await leader.elector.release();
    assert.equal(leader.elector.isLeader, false);
    assert.equal(leases.spec.holderIdentity, '', 'the lease names no holder');
    assert.deepEqual(leader.events, [{ what: 'started', at: 0 }], 'a release is no loss');
    await clock.advance(2_000);
    assert.equal(standby.elector.isLeader, true, 'taken one retry period later');
    assert.deepEqual(standby.events, [{ what: 'started', at: 12_000 }]);
    standby.stop.abort();
    await standby.running;
  });
});

