import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ObjectIdentity } from '../../../src/core/identity.js';
import { PrimaryAdmission, REFUSED_IN_FLIGHT, REFUSED_IN_FLIGHT_PER_CLUSTER, type AdmissionStore } from '../../../src/sync/primary-admission.js';

const id = (cluster: string, name: string): ObjectIdentity => ({ cluster, group: 'demo.relsync.dev', resource: 'databases', namespace: 'ns', name });

/** A store of primaries by cluster, counted as the real one counts them. */
function storeOf(held: ObjectIdentity[]): AdmissionStore & { held: ObjectIdentity[] } {
  const s = {
    held,
    countPrimaries: async (cluster: string) => s.held.filter((p) => p.cluster === cluster).length,
    countAllPrimaries: async () => ({ primaries: s.held.length, clusters: new Set(s.held.map((p) => p.cluster)).size }),
    hasPrimary: async (p: ObjectIdentity) => s.held.some((h) => h.cluster === p.cluster && h.name === p.name),
  };
  return s;
}

const many = (cluster: string, n: number, prefix = 'p') => Array.from({ length: n }, (_, i) => id(cluster, `${prefix}-${i}`));

describe('PrimaryAdmission', () => {
  it('refuses a new primary at its cluster\'s limit, naming the limit; counts a primary taken on at once', async () => {
    const admission = new PrimaryAdmission({ perCluster: 2, total: 100 }, storeOf([id('a', 'p1'), id('a', 'p2'), id('b', 'p1')]));
    assert.deepEqual(await admission.room('a'), { limit: 'primariesPerCluster', value: 2 });
    assert.equal(await admission.room('b'), undefined);
    admission.admitted('b');
    assert.deepEqual(await admission.room('b'), { limit: 'primariesPerCluster', value: 2 }, 'counted up, not read again');
  });

  it('shares limits.primaries fairly: one tenant that filled it does not lock another out', async () => {
    // Tenant a holds the whole total; b and c hold a few.
    const store = storeOf([...many('a', 90), ...many('b', 5), ...many('c', 5)]);
    const admission = new PrimaryAdmission({ perCluster: 1000, total: 100 }, store);
    assert.deepEqual(await admission.room('a'), { limit: 'primaries', value: 100 }, 'a is above its share (100 / 3)');
    assert.equal(await admission.room('b'), undefined, 'b is below its share');
    assert.equal(await admission.room('new'), undefined, 'a cluster with none yet is below its share (100 / 4)');
    // However many clusters come: never more than twice the limit.
    const crowded = new PrimaryAdmission({ perCluster: 1000, total: 100 }, storeOf([...many('a', 100), ...Array.from({ length: 100 }, (_, i) => id(`ws-${i}`, 'p'))]));
    assert.ok(await crowded.room('ws-0'), 'at twice the limit everyone is refused');
  });

  it('counts afresh once a primary is let go', async () => {
    const store = storeOf([id('a', 'p1'), id('a', 'p2')]);
    const admission = new PrimaryAdmission({ perCluster: 2, total: 100 }, store);
    assert.ok(await admission.room('a'));
    store.held.pop();
    admission.released('a');
    assert.equal(await admission.room('a'), undefined);
  });

  it('queues no more new primaries than the room, plus a bounded number of refused ones for their verdict', async () => {
    const admission = new PrimaryAdmission({ perCluster: 10, total: 1000 }, storeOf([id('a', 'held')]));
    const decisions = { take: 0, verdict: 0, skip: 0 };
    for (const p of many('a', 100_000)) decisions[await admission.decide(p)]++;
    assert.deepEqual(decisions, { take: 9, verdict: REFUSED_IN_FLIGHT_PER_CLUSTER, skip: 100_000 - 9 - REFUSED_IN_FLIGHT_PER_CLUSTER });
    assert.equal(await admission.decide(id('a', 'held')), 'take', 'a held primary is always taken');
    assert.equal(await admission.decide(id('a', 'p-0')), 'take', 'one taken already is taken again (merged in the queue)');
    assert.notEqual(await admission.decide(id('a', 'gone')), 'take', 'one being deleted that the store does not hold takes no room past the limits');
    // The queue is done with a refused one: its slot is free for another.
    assert.equal(await admission.decide(id('a', 'late')), 'skip');
    admission.settled(id('a', 'p-50'));
    assert.equal(await admission.decide(id('a', 'late')), 'skip', 'p-50 held nothing');
    admission.settled(id('a', 'p-9'));
    assert.equal(await admission.decide(id('a', 'late')), 'verdict');
    // And a new one taken gives its room back when the queue is done with it unstored (a refusal, a failure).
    admission.settled(id('a', 'p-0'));
    assert.equal(await admission.decide(id('a', 'later')), 'take');
  });

  it('keeps verdict slots for every tenant: one tenant\'s refused primaries take at most its share', async () => {
    const admission = new PrimaryAdmission({ perCluster: 1, total: 1_000_000 }, storeOf([]));
    for (let t = 0; t < 30; t++) for (const p of many(`t-${t}`, 50)) await admission.decide(p);
    let verdicts = 0;
    for (let t = 0; t < 30; t++) for (const p of many(`t-${t}`, 50, 'more')) if ((await admission.decide(p)) === 'verdict') verdicts++;
    assert.equal(verdicts, 0, 'all slots taken');
    const fresh = new PrimaryAdmission({ perCluster: 1, total: 1_000_000 }, storeOf([]));
    for (const p of many('hog', 1000)) await fresh.decide(p);
    assert.equal(await fresh.decide(id('other', 'a')), 'take');
    assert.equal(await fresh.decide(id('other', 'b')), 'verdict', 'the hog took only its share of the slots');
    assert.ok(REFUSED_IN_FLIGHT >= 10 * REFUSED_IN_FLIGHT_PER_CLUSTER);
  });

  it('counts every cluster\'s queued new primaries against the total (many workspaces of one tenant)', async () => {
    const admission = new PrimaryAdmission({ perCluster: 20_000, total: 50 }, storeOf([]));
    let taken = 0;
    for (let ws = 0; ws < 1000; ws++) for (const p of many(`ws-${ws}`, 10)) if ((await admission.decide(p)) === 'take') taken++;
    // Each workspace is below its share when it starts (50 / clusters), up to twice the total.
    assert.ok(taken >= 50 && taken <= 100, `between the limit and twice it (${taken})`);
  });
});
