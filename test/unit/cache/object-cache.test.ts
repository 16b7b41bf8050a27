// The object cache's contract: it answers with the latest version a watch
// delivered or not at all (a miss reads the API server), never with a version
// older than an event or a relist that came after it, and it stays within its
// byte budget.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ObjectIdentity } from '../../../src/core/identity.js';
import type { KubeObject } from '../../../src/core/object.js';
import type { ResourceType } from '../../../src/core/resource-type.js';
import { admissionOf, CachedReads, ObjectCache } from '../../../src/cache/object-cache.js';
import type { ObjectReads } from '../../../src/cache/object-reads.js';
import { approximateHeapBytes } from '../../../src/util/heap-size.js';

const configMaps: ResourceType = { group: '', version: 'v1', resource: 'configmaps', kind: 'ConfigMap', namespaced: true };
const secrets: ResourceType = { group: '', version: 'v1', resource: 'secrets', kind: 'Secret', namespaced: true };
const id = (cluster: string, type: ResourceType, name: string): ObjectIdentity => ({ cluster, group: type.group, resource: type.resource, namespace: 'ns', name });
const cm = (name: string, v: string, size = 0): KubeObject => ({ metadata: { namespace: 'ns', name, resourceVersion: v }, data: { v, pad: 'x'.repeat(size) } });

describe('object cache', () => {
  it('answers with the latest version delivered, as a copy the caller may change', () => {
    const cache = new ObjectCache(1024 * 1024);
    cache.observe(id('a', configMaps, 'x'), cm('x', '1'));
    cache.observe(id('a', configMaps, 'x'), cm('x', '2'));
    const read = cache.get('a', configMaps, 'ns', 'x')!;
    assert.equal(read.metadata.resourceVersion, '2');
    (read.data as Record<string, string>).v = 'changed by the caller';
    assert.equal((cache.get('a', configMaps, 'ns', 'x')!.data as Record<string, string>).v, '2');
    assert.equal(cache.get('b', configMaps, 'ns', 'x'), undefined, 'another cluster');
    assert.equal(cache.get('a', secrets, 'ns', 'x'), undefined, 'another type');
  });

  it('forgets an object that was deleted or no longer concerns relsync', () => {
    const cache = new ObjectCache(1024 * 1024);
    cache.observe(id('a', configMaps, 'x'), cm('x', '1'));
    cache.observe(id('a', configMaps, 'x'), undefined);
    assert.equal(cache.get('a', configMaps, 'ns', 'x'), undefined);
    assert.equal(cache.stats().bytes, 0);
  });

  it("drops the listed clusters' objects of a type when a watch begins to LIST it, and only that type", () => {
    const cache = new ObjectCache(1024 * 1024);
    cache.observe(id('a', configMaps, 'x'), cm('x', '1'));
    cache.observe(id('a2', configMaps, 'x'), cm('x', '1'));
    cache.observe(id('b', configMaps, 'x'), cm('x', '1'));
    cache.observe(id('a', secrets, 's'), cm('s', '1'));
    // A watch that lists clusters a and a2 (a kcp platform's workspaces).
    cache.listed(configMaps, (cluster) => cluster.startsWith('a'));
    assert.equal(cache.get('a', configMaps, 'ns', 'x'), undefined);
    assert.equal(cache.get('a2', configMaps, 'ns', 'x'), undefined);
    assert.ok(cache.get('b', configMaps, 'ns', 'x'), "another tenant's cluster, whose watch did not list: kept");
    assert.ok(cache.get('a', secrets, 'ns', 's'));
  });

  it('holds small objects as text: a budget that their parsed size would overflow holds them all', () => {
    // ConfigMaps like a tenant's usual ones (and the bench's): a few labels, a short value.
    const small = (i: number): KubeObject => ({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { namespace: 'ns', name: `p${i}-ref`, uid: `0b7f3c2e-5d1a-4c8e-9f6b-${String(i).padStart(12, '0')}`, resourceVersion: String(1000 + i), creationTimestamp: '2026-12-04T19:00:00Z', labels: { app: `p${i}`, 'bench.relsync.dev/kind': 'ref' } }, data: { t: '0' } });
    const budget = 1024 * 1024;
    const n = 2_000;
    assert.ok(n * approximateHeapBytes(small(0)) > 1.5 * budget, 'parsed, they would take more than half again the budget');
    const cache = new ObjectCache(budget);
    for (let i = 0; i < n; i++) cache.observe(id('a', configMaps, `p${i}-ref`), small(i));
    for (let i = 0; i < n; i++) assert.deepEqual(cache.get('a', configMaps, 'ns', `p${i}-ref`), small(i), `p${i}-ref`);
    assert.ok(cache.stats().bytes <= budget);
  });

  it('counts text beyond Latin-1 at two bytes a character, as the heap holds it', () => {
    const cache = new ObjectCache(1024 * 1024);
    cache.observe(id('a', configMaps, 'latin'), cm('latin', '1', 0));
    const base = cache.stats().bytes;
    cache.observe(id('a', configMaps, 'euro'), { metadata: { namespace: 'ns', name: 'euro', resourceVersion: '1' }, data: { v: '€'.repeat(300_000) } });
    assert.ok(cache.stats().bytes - base >= 600_000, `${cache.stats().bytes - base} bytes for 300,000 characters beyond Latin-1`);
    cache.observe(id('a', configMaps, 'euro2'), { metadata: { namespace: 'ns', name: 'euro2', resourceVersion: '1' }, data: { v: '€'.repeat(300_000) } });
    assert.ok(cache.stats().bytes <= 1024 * 1024);
    assert.equal(cache.get('a', configMaps, 'ns', 'euro'), undefined, 'two of them do not fit in 1 MiB: the older went');
  });

  it('stays within its byte budget: the least recently read go first, and an object over the whole budget is not kept', () => {
    const cache = new ObjectCache(100_000);
    for (let i = 0; i < 10; i++) cache.observe(id('a', configMaps, `o${i}`), cm(`o${i}`, '1', 15_000));
    assert.ok(cache.stats().bytes <= 100_000, `${cache.stats().bytes} bytes`);
    assert.equal(cache.get('a', configMaps, 'ns', 'o0'), undefined, 'the oldest went');
    assert.ok(cache.get('a', configMaps, 'ns', 'o9'));
    // Reading o5 makes it recent: the next ones push out o6 before it.
    assert.ok(cache.get('a', configMaps, 'ns', 'o5'));
    for (let i = 10; i < 12; i++) cache.observe(id('a', configMaps, `o${i}`), cm(`o${i}`, '1', 15_000));
    assert.ok(cache.get('a', configMaps, 'ns', 'o5'), 'recently read: kept');
    cache.observe(id('a', configMaps, 'huge'), cm('huge', '1', 200_000));
    assert.equal(cache.get('a', configMaps, 'ns', 'huge'), undefined);
    assert.ok(cache.get('a', configMaps, 'ns', 'o11'), 'and it pushed nothing out');
  });

  it('keeps primaries and their copies ahead of related objects: under pressure related entries go first, however recently read', () => {
    const databases: ResourceType = { group: 'demo.relsync.dev', version: 'v1alpha1', resource: 'databases', kind: 'Database', namespaced: true };
    // Room for ten entries of about 15 KB; owners may hold half of it against related entries.
    const cache = new ObjectCache(160_000);
    for (let i = 0; i < 3; i++) cache.observe(id('a', databases, `p${i}`), cm(`p${i}`, '1', 15_000), 'owner');
    for (let i = 0; i < 7; i++) cache.observe(id('a', configMaps, `r${i}`), cm(`r${i}`, '1', 15_000));
    for (let i = 0; i < 7; i++) assert.ok(cache.get('a', configMaps, 'ns', `r${i}`), 'read after every primary');
    cache.observe(id('a', databases, 'p3'), cm('p3', '1', 15_000), 'owner');
    for (let i = 0; i <= 3; i++) assert.ok(cache.get('a', databases, 'ns', `p${i}`), `p${i} stays`);
    assert.equal(cache.get('a', configMaps, 'ns', 'r0'), undefined, 'the least recently read related entry went');
    assert.ok(cache.stats().bytes <= 160_000);
    // A tenant's many primaries hold at most half the room against related objects.
    const fair = new ObjectCache(80_000);
    fair.observe(id('a', configMaps, 'related-1'), cm('related-1', '1', 15_000));
    fair.observe(id('a', configMaps, 'related-2'), cm('related-2', '1', 15_000));
    for (let i = 0; i < 10; i++) fair.observe(id('b', databases, `flood${i}`), cm(`flood${i}`, '1', 15_000), 'owner');
    assert.ok(fair.get('a', configMaps, 'ns', 'related-2'), 'the newest related entry stays');
    assert.ok(fair.get('b', databases, 'ns', 'flood9') && !fair.get('b', databases, 'ns', 'flood0'), 'owners past half the room go, the least recently read first');
    // An object that turns from owner to related (or back) is held once.
    const before = cache.stats().entries;
    cache.observe(id('a', databases, 'p3'), cm('p3', '2', 15_000));
    assert.equal(cache.get('a', databases, 'ns', 'p3')?.metadata.resourceVersion, '2');
    assert.equal(cache.stats().entries, before);
  });

  it('keeps a LIST\'s objects that concern nobody yet only in room the others leave: they never push one out, and go first, those read first', () => {
    const cache = new ObjectCache(100_000);
    for (let i = 0; i < 4; i++) cache.observe(id('a', configMaps, `routed${i}`), cm(`routed${i}`, '1', 15_000));
    // A LIST's objects (a tenant's many objects that nothing relates to yet): room for two is left.
    for (let i = 0; i < 20; i++) cache.observe(id('a', configMaps, `junk${i}`), cm(`junk${i}`, '1', 15_000), 'tentative');
    assert.ok(cache.stats().bytes <= 100_000, `${cache.stats().bytes} bytes`);
    assert.equal(cache.stats().entries, 6, 'four routed, and the first two listed');
    for (let i = 0; i < 4; i++) assert.ok(cache.get('a', configMaps, 'ns', `routed${i}`), `routed${i} kept`);
    assert.equal(cache.get('a', configMaps, 'ns', 'junk19'), undefined, 'no room left for the last listed');
    // New primaries are reconciled in about the order of the LIST: the first listed are read first, and
    // an object two new primaries share is read by both.
    assert.ok(cache.get('a', configMaps, 'ns', 'junk0'), 'the first listed fill the room left');
    assert.ok(cache.get('a', configMaps, 'ns', 'junk0'), 'read again (a primary that shares it)');
    // An object that concerns a primary pushes tentative ones out before any other: the one read first.
    cache.observe(id('a', configMaps, 'routed4'), cm('routed4', '1', 15_000));
    assert.equal(cache.get('a', configMaps, 'ns', 'junk0'), undefined, 'read already: it went first');
    assert.ok(cache.get('a', configMaps, 'ns', 'junk1'), 'not read yet: kept');
    cache.observe(id('a', configMaps, 'routed5'), cm('routed5', '1', 15_000));
    for (let i = 0; i < 6; i++) assert.ok(cache.get('a', configMaps, 'ns', `routed${i}`), `routed${i} kept`);
    assert.equal(cache.stats().entries, 6, 'every tentative entry went, for the routed ones');
    // An event that routes a tentative object to a primary makes it an ordinary entry.
    cache.observe(id('a', configMaps, 'routed0'), undefined);
    cache.observe(id('a', configMaps, 'junk-a'), cm('junk-a', '1', 1_000), 'tentative');
    cache.observe(id('a', configMaps, 'junk-a'), cm('junk-a', '2', 1_000));
    cache.observe(id('a', configMaps, 'routed6'), cm('routed6', '1', 15_000));
    assert.equal(cache.get('a', configMaps, 'ns', 'junk-a')?.metadata.resourceVersion, '2', 'no longer tentative: an ordinary entry (a tentative one would have gone for routed6)');
    // When every room is taken by objects that concern primaries, a tentative one is not kept at all.
    for (let i = 7; i < 12; i++) cache.observe(id('a', configMaps, `routed${i}`), cm(`routed${i}`, '1', 15_000));
    cache.observe(id('a', configMaps, 'late'), cm('late', '1', 15_000), 'tentative');
    assert.equal(cache.get('a', configMaps, 'ns', 'late'), undefined);
    assert.ok(cache.get('a', configMaps, 'ns', 'routed11'));
  });

  it('never reads a tentative entry behind a version relsync saw, and lets tentative entries go in order after a relist', () => {
    const cache = new ObjectCache(50_000);
    cache.observe(id('a', configMaps, 'x'), cm('x', '5'), 'tentative');
    cache.saw(id('a', configMaps, 'x'), '10');
    assert.equal(cache.get('a', configMaps, 'ns', 'x'), undefined, 'version 5 is behind version 10, which a live read saw');
    for (let i = 0; i < 3; i++) cache.observe(id('a', configMaps, `s${i}`), cm(`s${i}`, '1', 15_000), 'tentative');
    cache.listed(configMaps, () => true);
    assert.equal(cache.stats().entries, 0);
    for (let i = 0; i < 3; i++) cache.observe(id('a', configMaps, `t${i}`), cm(`t${i}`, '1', 15_000), 'tentative');
    cache.observe(id('a', configMaps, 'routed'), cm('routed', '1', 15_000));
    assert.equal(cache.get('a', configMaps, 'ns', 't2'), undefined, 'the last listed went');
    assert.ok(cache.get('a', configMaps, 'ns', 't0') && cache.get('a', configMaps, 'ns', 't1'));
  });

  it('keeps its list of tentative keys bounded when they come and go without pressure', () => {
    const cache = new ObjectCache(10 * 1024 * 1024);
    const order = () => (cache as unknown as { tentativeOrder: string[] }).tentativeOrder.length;
    for (let round = 0; round < 50; round++) {
      for (let i = 0; i < 1_000; i++) cache.observe(id('a', configMaps, `t${i}`), cm(`t${i}`, String(round)), 'tentative');
      for (let i = 0; i < 1_000; i++) assert.ok(cache.get('a', configMaps, 'ns', `t${i}`));
    }
    assert.ok(order() <= 3_024, `${order()} keys remembered for 1,000 tentative entries`);
    // The same objects listed again and again (relists) while they stay tentative.
    for (let round = 0; round < 50; round++) for (let i = 0; i < 1_000; i++) cache.observe(id('a', configMaps, `t${i}`), cm(`t${i}`, String(round)), 'tentative');
    assert.ok(order() <= 3_024, `${order()} keys remembered for 1,000 tentative entries`);
    // An object listed again is the last listed: it goes first under pressure.
    const small = new ObjectCache(50_000);
    for (let i = 0; i < 3; i++) small.observe(id('a', configMaps, `s${i}`), cm(`s${i}`, '1', 15_000), 'tentative');
    small.observe(id('a', configMaps, 's0'), cm('s0', '2', 15_000), 'tentative');
    small.observe(id('a', configMaps, 'routed'), cm('routed', '1', 15_000));
    assert.equal(small.get('a', configMaps, 'ns', 's0'), undefined, 'listed last: went first');
    assert.ok(small.get('a', configMaps, 'ns', 's1') && small.get('a', configMaps, 'ns', 's2') && small.get('a', configMaps, 'ns', 'routed'));
  });

  it("forgets one cluster's objects (a kcp workspace that binds again), and everything (a sweep)", () => {
    const cache = new ObjectCache(1024 * 1024);
    cache.observe(id('ws-1', configMaps, 'x'), cm('x', '1'));
    cache.observe(id('ws-10', configMaps, 'x'), cm('x', '1'));
    cache.dropCluster('ws-1');
    assert.equal(cache.get('ws-1', configMaps, 'ns', 'x'), undefined);
    assert.ok(cache.get('ws-10', configMaps, 'ns', 'x'), 'a cluster whose name starts the same stays');
    cache.clear();
    assert.equal(cache.get('ws-10', configMaps, 'ns', 'x'), undefined);
    assert.equal(cache.stats().bytes, 0);
  });

  it('never reads back a version older than one relsync wrote or read live, until the watch catches up', () => {
    const cache = new ObjectCache(1024 * 1024);
    cache.observe(id('a', configMaps, 'x'), cm('x', '5'));
    cache.saw(id('a', configMaps, 'x'), '7');
    assert.equal(cache.get('a', configMaps, 'ns', 'x'), undefined, 'relsync wrote version 7: 5 is not read back');
    cache.observe(id('a', configMaps, 'x'), cm('x', '6'));
    assert.equal(cache.get('a', configMaps, 'ns', 'x'), undefined, 'an older event still on its way is not kept');
    cache.observe(id('a', configMaps, 'x'), cm('x', '7'));
    assert.equal(cache.get('a', configMaps, 'ns', 'x')?.metadata.resourceVersion, '7', 'caught up');
    cache.observe(id('a', configMaps, 'x'), cm('x', '8'));
    assert.equal(cache.get('a', configMaps, 'ns', 'x')?.metadata.resourceVersion, '8');
    cache.saw(id('a', configMaps, 'x'), '8', true); // relsync deleted version 8
    cache.observe(id('a', configMaps, 'x'), cm('x', '8'));
    assert.equal(cache.get('a', configMaps, 'ns', 'x'), undefined, 'the deleted version is not read back');
  });

  it('reads what it lacks from the API server, and only that', async () => {
    const cache = new ObjectCache(1024 * 1024);
    const asked: string[] = [];
    const live: ObjectReads = {
      get: async (_c, _t, _ns, name) => {
        asked.push(name);
        return cm(name, 'live');
      },
      list: async () => [],
    };
    const reads = new CachedReads(cache, live);
    cache.observe(id('a', configMaps, 'cached'), cm('cached', '7'));
    assert.equal((await reads.get('a', configMaps, 'ns', 'cached'))?.metadata.resourceVersion, '7');
    assert.equal((await reads.get('a', configMaps, 'ns', 'absent'))?.metadata.resourceVersion, 'live');
    assert.deepEqual(asked, ['absent']);
    // A GET's answer is not kept: an event older than it may still be on its way.
    await reads.get('a', configMaps, 'ns', 'absent');
    assert.deepEqual(asked, ['absent', 'absent']);
    assert.deepEqual({ hits: cache.stats().hits, misses: cache.stats().misses }, { hits: 1, misses: 2 });
    assert.equal(reads.cached, true, 'a deletion decided on these reads is confirmed live');
  });

  it("keeps an object's managedFields only where they will be read, and leaves the watch's object as it was", () => {
    // What the predicate is given decides: here, entries of manager "relsync-x" that are Updates.
    const cache = new ObjectCache(1024 * 1024, undefined, (mf) => (mf as { manager: string; operation: string }[]).some((e) => e.manager === 'relsync-x' && e.operation === 'Update'));
    const others = [{ manager: 'kubectl', operation: 'Update', fieldsV1: { 'f:data': { 'f:v': {} } } }];
    const own = [{ manager: 'relsync-x', operation: 'Update', fieldsV1: { 'f:data': { 'f:v': {} } } }];
    const delivered = { ...cm('a', '1'), metadata: { ...cm('a', '1').metadata, managedFields: others } };
    cache.observe(id('a', configMaps, 'a'), delivered);
    cache.observe(id('a', configMaps, 'b'), { ...cm('b', '1'), metadata: { ...cm('b', '1').metadata, managedFields: own } });
    assert.equal(cache.get('a', configMaps, 'ns', 'a')!.metadata.managedFields, undefined, 'nobody reads them: dropped');
    assert.deepEqual(cache.get('a', configMaps, 'ns', 'a')!.data, { v: '1', pad: '' }, 'the rest is kept');
    assert.deepEqual(cache.get('a', configMaps, 'ns', 'b')!.metadata.managedFields, own, 'a copy write folds these: kept');
    assert.deepEqual(delivered.metadata.managedFields, others, "the watch's object is not changed");
    const slim = cache.stats().bytes;
    const whole = new ObjectCache(1024 * 1024);
    whole.observe(id('a', configMaps, 'a'), delivered);
    whole.observe(id('a', configMaps, 'b'), { ...cm('b', '1'), metadata: { ...cm('b', '1').metadata, managedFields: own } });
    assert.ok(slim < whole.stats().bytes, `${slim} bytes slimmed, ${whole.stats().bytes} whole`);
  });

  it('keeps an object nested deeper than JSON.stringify goes (a tenant\'s custom resource) and reads it back', () => {
    const cache = new ObjectCache(1024 * 1024);
    const spec = JSON.parse(`${'{"a":'.repeat(20_000)}1${'}'.repeat(20_000)}`) as unknown;
    cache.observe(id('a', configMaps, 'deep'), { metadata: { namespace: 'ns', name: 'deep', resourceVersion: '1' }, spec });
    const read = cache.get('a', configMaps, 'ns', 'deep');
    assert.equal(read?.metadata.resourceVersion, '1');
    let depth = 0;
    for (let at = read?.spec as { a?: unknown } | undefined; typeof at === 'object' && at !== null; at = at.a as { a?: unknown }) depth++;
    assert.equal(depth, 20_000);
  });
});

describe('what the cache admits', () => {
  it('keeps what concerns a primary, a namespace selectors read, and tentatively what a LIST may hold for new primaries; nothing unread', () => {
    const cases: Array<[string, Parameters<typeof admissionOf>[0], ReturnType<typeof admissionOf>]> = [
      ['a primary queued', { readable: true, concerns: true, owner: true }, { keep: true, standing: 'owner' }],
      ['a related object a relation names', { readable: true, concerns: true, owner: false }, { keep: true, standing: 'related' }],
      ['deleted, or not read', { readable: false, concerns: true, owner: true }, { keep: false, standing: 'owner' }],
      ['a LIST run beside the watch, its object of concern', { readable: false, concerns: true, owner: false, maySource: true }, { keep: false, standing: 'related' }],
      ['of no concern', { readable: true, concerns: false, owner: false }, { keep: false, standing: 'related' }],
      ['a first LIST\'s possible source', { readable: true, concerns: false, owner: false, maySource: true }, { keep: true, standing: 'tentative' }],
      ['a possible source that concerns a primary already', { readable: true, concerns: true, owner: false, maySource: true }, { keep: true, standing: 'related' }],
      ['a namespace selectors read', { readable: true, concerns: false, owner: false, selectedNamespace: true }, { keep: true, standing: 'related' }],
    ];
    for (const [what, routed, expected] of cases) assert.deepEqual(admissionOf(routed), expected, what);
  });

  it('lets go of a version it does not admit: an older one is never read back', async () => {
    const cache = new ObjectCache(1024 * 1024);
    const id: ObjectIdentity = { cluster: 'a', group: '', resource: 'configmaps', namespace: 'ns', name: 'x' };
    const object = (rv: string): KubeObject => ({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { namespace: 'ns', name: 'x', resourceVersion: rv } });
    cache.admit(id, object('1'), { readable: true, concerns: true, owner: false });
    assert.equal(cache.stats().entries, 1);
    cache.admit(id, object('2'), { readable: true, concerns: false, owner: false });
    assert.equal(cache.stats().entries, 0, 'a version that concerns nobody replaces none');
  });
});
