// A sweep's reconciles read from its LISTs: the snapshot answers what it
// listed (and lists by selector or owner exactly as the API server would),
// asks the API server about everything it cannot vouch for, and a primary
// reads from it at most once per sweep and never after a watch event was
// routed to it.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { SweepReads, SweepSnapshot } from '../../../src/cache/sweep-snapshot.js';
import type { KubeObject } from '../../../src/core/object.js';
import { identityKey } from '../../../src/core/identity.js';
import { approximateHeapBytes } from '../../../src/util/heap-size.js';
import type { ResourceType } from '../../../src/core/resource-type.js';
import { matchesSelector, type LabelSelector } from '../../../src/core/label-selector.js';
import { ReadAgainLive, type ListQuery, type ObjectReads } from '../../../src/cache/object-reads.js';

const configMaps: ResourceType = { group: '', version: 'v1', resource: 'configmaps', kind: 'ConfigMap', namespaced: true };
const secrets: ResourceType = { group: '', version: 'v1', resource: 'secrets', kind: 'Secret', namespaced: true };
const namespaces: ResourceType = { group: '', version: 'v1', resource: 'namespaces', kind: 'Namespace', namespaced: false };

/** Stands in for the API servers and counts what is asked of them. */
class CountingReads implements ObjectReads {
  readonly asked: string[] = [];
  async get(cluster: string, type: ResourceType, namespace: string, name: string): Promise<KubeObject | undefined> {
    this.asked.push(`get ${cluster} ${type.resource} ${namespace}/${name}`);
    return { metadata: { name, namespace, labels: { live: 'true' } } };
  }
  async list<T>(cluster: string, type: ResourceType, _query: ListQuery<T>): Promise<T[]> {
    this.asked.push(`list ${cluster} ${type.resource}`);
    return [];
  }
}

const cm = (namespace: string, name: string, labels: Record<string, string> = {}): KubeObject => ({ metadata: { namespace, name, labels } });
const equals = (key: string, value: string): LabelSelector => ({ requirements: [{ key, operator: 'In', values: [value] }] });

describe('sweep snapshot', () => {
  it('holds no more than its budget: a type that does not fit, or whose LIST failed midway, is read live', async () => {
    const live = new CountingReads();
    const small = cm('team', 'small');
    // Room for big-2 after small: only the rule "a type that did not fit stays incomplete" keeps it out.
    const snapshot = new SweepSnapshot(live, [], undefined, approximateHeapBytes(small) + approximateHeapBytes(cm('team', 'big-2', { app: 'a' })) + 1);
    snapshot.add({ cluster: 'tenant-a', type: secrets, filtered: false, items: [small] });
    // A page that does not fit: not held, and the type's later pages neither, even small ones.
    snapshot.add({ cluster: 'tenant-a', type: configMaps, filtered: false, items: [cm('team', 'big-1', { app: 'a', pad: 'x'.repeat(200) })] });
    snapshot.add({ cluster: 'tenant-a', type: configMaps, filtered: false, items: [cm('team', 'big-2', { app: 'a' })] });
    assert.equal(snapshot.heldSize, approximateHeapBytes(small));
    assert.deepEqual(snapshot.overBudget, ['tenant-a/configmaps']);
    assert.equal((await snapshot.get('tenant-a', secrets, 'team', 'small'))?.metadata.labels?.live, undefined, 'held: answered from memory');
    await snapshot.get('tenant-a', configMaps, 'team', 'big-2');
    // A selector over an incomplete type cannot be answered from what is held.
    assert.deepEqual(await snapshot.list('tenant-a', configMaps, { namespace: 'team', selector: equals('app', 'a') }), []);
    // The listed namespace still counts as existing, whether or not its objects were held.
    assert.equal((await snapshot.get('tenant-a', namespaces, '', 'team'))?.kind, 'Namespace');
    snapshot.incomplete('tenant-a', secrets);
    await snapshot.list('tenant-a', secrets, { namespace: 'team' });
    assert.deepEqual(live.asked, ['get tenant-a configmaps team/big-2', 'list tenant-a configmaps', 'list tenant-a secrets']);
  });

  it('tells an object\'s listed version, "" only where a whole LIST lacks it, and nothing it cannot vouch for', () => {
    const v = (namespace: string, name: string, resourceVersion?: string): KubeObject => ({ metadata: { namespace, name, resourceVersion, uid: `uid-${name}` } });
    const changed = new Set<string>();
    const snapshot = new SweepSnapshot(new CountingReads(), [], (k) => changed.has(k));
    snapshot.add({ cluster: 'a', type: configMaps, filtered: false, items: [v('ns', 'x', '5'), v('ns', 'no-version')] });
    snapshot.add({ cluster: 'a', type: secrets, filtered: true, items: [v('ns', 's', '6')] });
    snapshot.add({ cluster: 'b', type: configMaps, filtered: false, items: [v('ns', 'y', '7')] });
    const at = (cluster: string, resource: string, name: string, copy = false) => snapshot.versionOf({ cluster, group: '', resource, namespace: 'ns', name }, copy);
    assert.equal(at('a', 'configmaps', 'x'), '5/uid-x', 'its resourceVersion and uid');
    assert.equal(at('a', 'configmaps', 'no-version'), undefined, 'listed without a resourceVersion: nothing to compare, not "absent"');
    assert.equal(at('a', 'configmaps', 'gone'), '', 'a whole, unfiltered LIST without it: it does not exist');
    assert.equal(at('a', 'secrets', 's'), '6/uid-s');
    assert.equal(at('a', 'secrets', 'other'), undefined, 'a filtered LIST says nothing of what it lacks');
    assert.equal(at('a', 'secrets', 'other', true), '', "but it does say that it is not relsync's copy");
    assert.equal(at('c', 'configmaps', 'x'), undefined, 'a cluster not listed');
    assert.equal(snapshot.listedWhole('a', configMaps), true);
    assert.equal(snapshot.listedWhole('a', secrets), false, 'filtered');
    snapshot.incomplete('b', configMaps);
    assert.equal(snapshot.listedWhole('b', configMaps), false, 'a LIST that failed midway');
    assert.equal(at('b', 'configmaps', 'y'), '7/uid-y');
    assert.equal(at('b', 'configmaps', 'gone', true), undefined, 'a LIST that failed midway says nothing of what it lacks');
    changed.add(identityKey({ cluster: 'a', group: '', resource: 'configmaps', namespace: 'ns', name: 'x' }));
    assert.equal(at('a', 'configmaps', 'x'), undefined, 'a watch event arrived for it since its LIST');
  });

  it('says nothing of what it lacks in a type marked incomplete before its first page (a refused object of a kcp workspace)', async () => {
    const live = new CountingReads();
    const snapshot = new SweepSnapshot(live);
    // The refused object came on a page before any readable object of its workspace.
    snapshot.incomplete('ws', configMaps);
    snapshot.add({ cluster: 'ws', type: configMaps, filtered: false, items: [cm('ns', 'readable')] });
    assert.equal(snapshot.listedWhole('ws', configMaps), false);
    assert.equal(snapshot.versionOf({ cluster: 'ws', group: '', resource: 'configmaps', namespace: 'ns', name: 'refused' }), undefined, 'not "it does not exist"');
    await snapshot.get('ws', configMaps, 'ns', 'refused');
    assert.deepEqual(live.asked, ['get ws configmaps ns/refused'], 'read live');
  });

  it('keeps versions within a budget of their own: a type whose versions do not fit counts as not listed whole', () => {
    const v = (name: string): KubeObject => ({ metadata: { namespace: 'ns', name, resourceVersion: '1', uid: `uid-${name}` } });
    const small = v('s');
    // Room for one version, and for no object at all: versions are kept beside objects the snapshot does not hold.
    const snapshot = new SweepSnapshot(new CountingReads(), [], undefined, 150);
    snapshot.add({ cluster: 'a', type: secrets, filtered: false, items: [small] });
    snapshot.add({ cluster: 'a', type: configMaps, filtered: false, items: [v('x'), v('y')] });
    assert.equal(snapshot.heldSize, 0, 'no object fits');
    assert.equal(snapshot.versionOf({ cluster: 'a', group: '', resource: 'secrets', namespace: 'ns', name: 's' }), '1/uid-s', 'its version does');
    assert.equal(snapshot.listedWhole('a', secrets), true);
    assert.equal(snapshot.versionOf({ cluster: 'a', group: '', resource: 'configmaps', namespace: 'ns', name: 'x' }), undefined, 'over the budget: nothing vouched for');
    assert.equal(snapshot.versionOf({ cluster: 'a', group: '', resource: 'configmaps', namespace: 'ns', name: 'gone' }), undefined, 'nor any absence');
    assert.equal(snapshot.listedWhole('a', configMaps), false);
  });

  it('answers a list with what the query accepts, up to its limit, as the API server would', async () => {
    const live = new CountingReads();
    const items = ['a', 'b', 'c', 'd'].map((n) => cm('team', n, { app: 'x', keep: n === 'b' ? 'no' : 'yes' }));
    const snapshot = new SweepSnapshot(live, [{ cluster: 'c', type: configMaps, filtered: false, items }]);
    const found = await snapshot.list('c', configMaps, { namespace: 'team', selector: equals('app', 'x'), accept: (o) => o.metadata.labels?.keep === 'yes', limit: 2 });
    assert.deepEqual(found.map((o) => o.metadata.name), ['a', 'c']);
    assert.equal(live.asked.length, 0);
  });

  it('counts what objects take in memory, not their JSON: many tiny keys cost several times their text', () => {
    const keys = Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`k${i}`, '']));
    const manyKeys: KubeObject = { metadata: { name: 'keys', namespace: 'team' }, data: keys };
    const oneString: KubeObject = { metadata: { name: 'blob', namespace: 'team' }, data: { blob: 'x'.repeat(100_000) } };
    assert.ok(approximateHeapBytes(manyKeys) > 5 * JSON.stringify(manyKeys).length, 'key-heavy: over 5× its text');
    assert.ok(approximateHeapBytes(oneString) < 1.1 * JSON.stringify(oneString).length, 'one long string: about its text');
    const wide: KubeObject = { metadata: { name: 'wide', namespace: 'team' }, data: { text: '€'.repeat(1000) } };
    assert.ok(approximateHeapBytes(wide) > 2000, 'text beyond Latin-1 takes two bytes a character');
  });

  it('answers what was listed and asks the API server about the rest', async () => {
    const live = new CountingReads();
    const snapshot = new SweepSnapshot(live, [
      { cluster: 'tenant-a', type: configMaps, filtered: false, items: [cm('team', 'app-config', { app: 'a' })] },
      { cluster: 'service', type: secrets, filtered: true, items: [cm('copies', 'db')] },
    ]);
    assert.deepEqual((await snapshot.get('tenant-a', configMaps, 'team', 'app-config'))?.metadata.labels, { app: 'a' });
    assert.equal(live.asked.length, 0);
    // Absent from an unfiltered list: maybe created since; never decided on the snapshot.
    assert.equal((await snapshot.get('tenant-a', configMaps, 'team', 'new'))?.metadata.labels?.live, 'true');
    // Another cluster, a type not listed, and a listed copy's namespace.
    await snapshot.get('tenant-b', configMaps, 'team', 'app-config');
    await snapshot.get('tenant-a', secrets, 'team', 'x');
    assert.deepEqual(await snapshot.get('service', namespaces, '', 'copies'), { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'copies' } });
    await snapshot.get('service', namespaces, '', 'elsewhere');
    // A list through the agent filter cannot answer a selector: it only holds relsync's copies.
    await snapshot.list('service', secrets, { namespace: 'copies', selector: equals('app', 'a') });
    assert.deepEqual(live.asked, [
      'get tenant-a configmaps team/new',
      'get tenant-b configmaps team/app-config',
      'get tenant-a secrets team/x',
      'get service namespaces /elsewhere',
      'list service secrets',
    ]);
  });

  it('lists by selector and by owner exactly like a filter over the whole list', () => {
    const label = fc.constantFrom('a', 'b', 'c');
    const object = fc.record({ namespace: fc.constantFrom('n1', 'n2'), name: fc.string({ minLength: 1, maxLength: 3 }), app: fc.option(label), tier: fc.option(label), owner: fc.option(label) });
    const requirement = fc.record({ key: fc.constantFrom('app', 'tier'), operator: fc.constantFrom('In' as const, 'NotIn' as const, 'Exists' as const, 'DoesNotExist' as const), values: fc.array(label, { minLength: 1, maxLength: 2 }) });
    return fc.assert(
      fc.asyncProperty(fc.array(object, { maxLength: 30 }), fc.array(requirement, { maxLength: 3 }), fc.option(fc.constantFrom('n1', 'n2')), label, async (raw, requirements, namespace, ownerName) => {
        const items = raw.map((o) => cm(o.namespace, o.name, Object.fromEntries(Object.entries({ app: o.app, tier: o.tier, owner: o.owner }).filter(([, v]) => v !== null)) as Record<string, string>));
        const seen = new Set<string>();
        const unique = items.filter((i) => !seen.has(`${i.metadata.namespace}/${i.metadata.name}`) && seen.add(`${i.metadata.namespace}/${i.metadata.name}`));
        const live = new CountingReads();
        const snapshot = new SweepSnapshot(live, [{ cluster: 'c', type: configMaps, filtered: false, items }]);
        const selector = { requirements: requirements.map((r) => ({ ...r, values: r.operator === 'Exists' || r.operator === 'DoesNotExist' ? [] : r.values })) };
        const names = (list: KubeObject[]) => list.map((o) => `${o.metadata.namespace}/${o.metadata.name}`).sort();
        const inNamespace = (o: KubeObject) => namespace === null || o.metadata.namespace === namespace;

        const bySelector = await snapshot.list('c', configMaps, { namespace: namespace ?? undefined, selector });
        assert.deepEqual(names(bySelector), names(unique.filter((o) => inNamespace(o) && matchesSelector(selector, o.metadata.labels))));
        const of = (o: KubeObject) => o.metadata.labels?.owner;
        const byOwner = await snapshot.list('c', configMaps, { namespace: namespace ?? undefined, indexed: { index: 'owner', of, value: ownerName } });
        assert.deepEqual(names(byOwner), names(unique.filter((o) => inNamespace(o) && of(o) === ownerName)));
        assert.deepEqual(live.asked, []);
      }),
      { numRuns: 300 },
    );
  });
});

describe('sweep reads', () => {
  const primary = (name: string) => ({ cluster: 'tenant-a', group: 'demo.relsync.dev', resource: 'databases', namespace: 'team', name });

  it('hands a primary the snapshot once per sweep, and never after a watch event was routed to it', () => {
    const live = new CountingReads();
    const reads = new SweepReads(live);
    assert.equal(reads.readsFor(primary('one')), live, 'no sweep running');

    const sweep = reads.begin();
    reads.noteChanged(primary('changed-while-listing'));
    assert.equal(reads.readsFor(primary('one')), live, 'not before the sweep says its snapshot is read');
    sweep.reconcileFromSnapshot();
    reads.noteChanged(primary('changed-after-listing'));
    assert.equal(reads.readsFor(primary('one')), sweep.snapshot);
    assert.equal(reads.readsFor(primary('one')), live, 'a retry or a second run reads live');
    assert.equal(reads.readsFor(primary('changed-while-listing')), live);
    assert.equal(reads.readsFor(primary('changed-after-listing')), live);
    assert.equal(reads.readsFor(primary('two')), sweep.snapshot);
    sweep.end();
    assert.equal(reads.readsFor(primary('three')), live, 'the sweep is over');

    reads.noteChanged(primary('four')); // not tracked outside a sweep
    const next = reads.begin();
    next.reconcileFromSnapshot();
    assert.equal(reads.readsFor(primary('four')), next.snapshot);
    assert.equal(reads.readsFor(primary('one')), next.snapshot, 'a new sweep, a new snapshot read');
    // A window that ended (a sweep that was superseded) changes nothing of the one after it.
    const third = reads.begin();
    next.end();
    assert.throws(() => next.reconcileFromSnapshot(), /has ended/);
    assert.equal(reads.readsFor(primary('five')), live, 'the old window neither ends nor starts the new one');
    third.reconcileFromSnapshot();
    assert.equal(reads.readsFor(primary('five')), third.snapshot);
  });

  it("a reconcile's session: its first reads, live after a conflict, and live from the start when a step asks to read again live", async () => {
    const live = new CountingReads();
    const everyday = new CountingReads();
    const reads = new SweepReads(live, everyday);
    assert.equal(reads.sessionFor(primary('one')).first, everyday, 'outside a sweep: the watches\' cache');
    assert.equal(reads.sessionFor(primary('one'), true).first, live, 'after a 409: live');
    const seen: ObjectReads[] = [];
    const session = reads.sessionFor(primary('one'));
    const result = await session.run(async (r) => {
      seen.push(r);
      if (r !== live) throw new ReadAgainLive('about to delete on cached reads');
      return 'decided live';
    });
    assert.equal(result, 'decided live');
    assert.deepEqual(seen, [everyday, live], 'the step ran again from the start, live');
    // Any other failure is the step's own: not run again.
    let runs = 0;
    await assert.rejects(session.run(async () => {
      runs++;
      throw new Error('403');
    }), /403/);
    assert.equal(runs, 1);
  });

  it('reads an object live, for every primary, once a watch event arrived for it after its LIST', async () => {
    const live = new CountingReads();
    const reads = new SweepReads(live);
    const sweep = reads.begin(Infinity, [{ cluster: 'service', type: configMaps, filtered: true, items: [cm('copies', 'shared'), cm('copies', 'other')] }]);
    sweep.reconcileFromSnapshot();
    const snapshot = sweep.snapshot;
    // e.g. another primary's reconcile deleted the copy: its DELETED event was routed to that primary only
    reads.noteObject({ cluster: 'service', group: '', resource: 'configmaps', namespace: 'copies', name: 'shared' });
    assert.equal((await snapshot.get('service', configMaps, 'copies', 'shared'))?.metadata.labels?.live, 'true', 'the changed object is read live');
    assert.equal((await snapshot.get('service', configMaps, 'copies', 'other'))?.metadata.labels?.live, undefined, 'the others still come from the LIST');
    assert.deepEqual(live.asked, ['get service configmaps copies/shared']);
    sweep.end();
    const next = reads.begin(Infinity, [{ cluster: 'service', type: configMaps, filtered: true, items: [cm('copies', 'shared')] }]).snapshot;
    assert.equal((await next.get('service', configMaps, 'copies', 'shared'))?.metadata.labels?.live, undefined, 'a new sweep forgets the changes of the last');
  });
});
