// The work queue's keys of primaries as wiring.ts sets the queue up (primaryKeyPolicy): a failed run
// is retried as the whole primary, read live after a 409; the hint merges into what is added while
// the retry waits, and goes with the run that used it.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ObjectIdentity } from '../../../src/core/identity.js';
import { ApiError } from '../../../src/kube/api-error.js';
import { primaryKeyPolicy, type PrimaryKey } from '../../../src/controller/primary-key.js';
import { WorkQueue } from '../../../src/controller/work-queue.js';
import type { ResolvedResource } from '../../../src/sync/resolved-config.js';
import { FakeClock, settle } from '../../harness/fake-clock.js';

const id: ObjectIdentity = { cluster: 'tenant-a', group: 'demo.relsync.dev', resource: 'databases', namespace: 'shop', name: 'orders' };
const resource = {} as ResolvedResource;
const edge = { ruleId: 'config', source: { ...id, group: '', resource: 'configmaps', name: 'cfg' }, destination: { ...id, cluster: 'service', group: '', resource: 'configmaps', name: 'cfg' } };
const conflict = () => new ApiError('PATCH', '/api/v1/namespaces/x/configmaps/cfg', 409, '{"kind":"Status","reason":"Conflict","message":"the object has been modified"}');

/** A queue as wiring.ts makes it; `answer` decides each run's outcome. */
function queueWith(answer: (run: number) => { requeueAfterMs?: number } | Error) {
  const clock = new FakeClock();
  const runs: Array<{ edges: number | 'whole'; readLive: boolean }> = [];
  const queue = new WorkQueue<PrimaryKey>({ ...primaryKeyPolicy, concurrency: 1, clock, random: () => 1, backoffInitialMs: 500 });
  const ac = new AbortController();
  const done = queue.start(ac.signal, async (key) => {
    runs.push({ edges: key.edges ? key.edges.length : 'whole', readLive: key.readLive === true });
    const a = answer(runs.length);
    if (a instanceof Error) throw a;
    return a;
  });
  return { clock, runs, queue, stop: async () => (ac.abort(), await done) };
}

describe('primary keys in the work queue', () => {
  it('retries a failed edge run as the whole primary, read live after a 409 only', async () => {
    const q = queueWith((run) => (run === 1 ? conflict() : run === 3 ? new Error('503') : {}));
    q.queue.add({ resource, id, edges: [edge] });
    await settle();
    await q.clock.advance(500);
    q.queue.add({ resource, id, edges: [edge] });
    await settle();
    await q.clock.advance(1000);
    await q.clock.advance(2000);
    assert.deepEqual(q.runs, [
      { edges: 1, readLive: false },
      { edges: 'whole', readLive: true },
      { edges: 1, readLive: false },
      { edges: 'whole', readLive: false },
    ], 'a 409 is retried live, another failure in full from what the watches delivered');
    await q.stop();
  });

  it('merges the retry into an event that comes while it waits, and drops readLive from a run that asks to be looked at again', async () => {
    const q = queueWith((run) => (run === 1 ? conflict() : run === 2 ? { requeueAfterMs: 100 } : {}));
    q.queue.add({ resource, id });
    await settle();
    q.queue.add({ resource, id, edges: [edge] });
    await settle();
    await q.clock.advance(100);
    await q.clock.advance(1000);
    assert.deepEqual(q.runs.slice(0, 3), [
      { edges: 'whole', readLive: false },
      { edges: 'whole', readLive: true },
      { edges: 'whole', readLive: false },
    ], 'the event ran at once as the retry (whole, live); its requeue and the retry\'s timer read what the watches delivered');
    assert.ok(q.runs.slice(2).every((r) => !r.readLive), JSON.stringify(q.runs));
    await q.stop();
  });
});
