import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ObjectIdentity } from '../../../src/core/identity.js';
import { PrimaryAdmission, REFUSED_IN_FLIGHT, type AdmissionStore } from '../../../src/sync/primary-admission.js';

const id = (cluster: string, name: string): ObjectIdentity => ({ cluster, group: 'demo.relsync.dev', resource: 'databases', namespace: 'ns', name });

/** A store of primaries by cluster, counted as the real one counts them. */
function storeOf(held: ObjectIdentity[]): AdmissionStore & { held: ObjectIdentity[]; counts: number } {
  const s = {
    held,
    counts: 0,
    countPrimaries: async (cluster: string) => {
      s.counts++;
      return s.held.filter((p) => p.cluster === cluster).length;
    },
    countAllPrimaries: async () => {
      s.counts++;
      return s.held.length;
    },
    hasPrimary: async (p: ObjectIdentity) => s.held.some((h) => h.cluster === p.cluster && h.name === p.name),
  };
  return s;
}

describe('PrimaryAdmission', () => {
  it('refuses a new primary at its cluster\'s limit and at the total, naming the limit', async () => {
    const store = storeOf([id('a', 'p1'), id('a', 'p2'), id('b', 'p1')]);
    const admission = new PrimaryAdmission({ perCluster: 2, total: 4 }, store);
    assert.deepEqual(await admission.room('a'), { limit: 'primariesPerCluster', value: 2 });
    assert.equal(await admission.room('b'), undefined);
    admission.admitted('b');
    // b now holds 2 (counted up, not read again): its own limit, and 4 in all.
    assert.deepEqual(await admission.room('c'), { limit: 'primaries', value: 4 });
    assert.deepEqual(await admission.room('b'), { limit: 'primariesPerCluster', value: 2 });
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
    const store = storeOf([id('a', 'held')]);
    const admission = new PrimaryAdmission({ perCluster: 10, total: 1000 }, store);
    let queued = 0;
    for (let i = 0; i < 100_000; i++) if (await admission.mayQueue(id('a', `new-${i}`))) queued++;
    assert.equal(queued, 9 + REFUSED_IN_FLIGHT, 'the room (10 less the one held) and the verdict slots');
    assert.equal(await admission.mayQueue(id('a', 'held')), true, 'a held primary is always queued');
    assert.equal(await admission.mayQueue(id('a', 'new-0')), true, 'one queued already is queued again (merged in the queue)');
    // A reconcile settles its key: one more refused one may be queued.
    assert.equal(await admission.mayQueue(id('a', 'late')), false);
    admission.settled(id('a', 'new-50'));
    assert.equal(await admission.mayQueue(id('a', 'late')), true);
  });

  it('counts every cluster\'s queued new primaries against the total (many workspaces of one tenant)', async () => {
    const admission = new PrimaryAdmission({ perCluster: 20_000, total: 50 }, storeOf([]));
    let queued = 0;
    for (let ws = 0; ws < 1000; ws++) for (let i = 0; i < 10; i++) if (await admission.mayQueue(id(`ws-${ws}`, `p-${i}`))) queued++;
    assert.equal(queued, 50 + REFUSED_IN_FLIGHT);
  });

  it('a sweep takes every listed primary within the room, held ones always, and new ones past it never', async () => {
    const held = Array.from({ length: 5 }, (_, i) => id('a', `held-${i}`));
    const admission = new PrimaryAdmission({ perCluster: 8, total: 1000 }, storeOf(held));
    const sweep = admission.forSweep();
    const decisions: string[] = [];
    // New ones listed first: three fit (8 - 5 held), then the held ones, then new ones that do not.
    for (const name of ['n-0', 'n-1', 'n-2']) decisions.push(await sweep.decide(id('a', name)));
    for (const p of held) decisions.push(await sweep.decide(p));
    for (let i = 3; i < 500; i++) decisions.push(await sweep.decide(id('a', `n-${i}`)));
    assert.equal(decisions.filter((d) => d === 'take').length, 8);
    assert.deepEqual(decisions.slice(0, 8), Array(8).fill('take'));
    assert.equal(decisions.filter((d) => d === 'verdict').length, REFUSED_IN_FLIGHT);
    assert.equal(decisions.filter((d) => d === 'skip').length, 505 - 8 - REFUSED_IN_FLIGHT);
  });

  it('a sweep never takes more new primaries than the room, whatever the order', async () => {
    const held = Array.from({ length: 5 }, (_, i) => id('a', `held-${i}`));
    for (const order of ['held first', 'mixed']) {
      const admission = new PrimaryAdmission({ perCluster: 8, total: 1000 }, storeOf(held));
      const sweep = admission.forSweep();
      const listed = order === 'held first' ? [...held, ...Array.from({ length: 50 }, (_, i) => id('a', `n-${i}`))] : Array.from({ length: 50 }, (_, i) => (i % 10 === 0 && i / 10 < 5 ? held[i / 10]! : id('a', `n-${i}`)));
      let fresh = 0;
      for (const p of listed) if ((await sweep.decide(p)) === 'take' && !p.name.startsWith('held')) fresh++;
      assert.ok(fresh <= 3, `${order}: at most the room of new ones (${fresh})`);
    }
  });
});
