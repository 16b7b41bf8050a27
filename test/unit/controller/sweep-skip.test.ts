// When a sweep may skip a primary: only when every version its last complete
// sync acted on is what the LISTs show, under the same config, and no listed
// object that its selector or inverse rules find is missing from its
// relations. Each case below changes one thing and must not be skipped.
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { identityKey, type ObjectIdentity } from '../../../src/core/identity.js';
import { FoundMatches, isUpToDate, type SkipContext } from '../../../src/controller/sweep-skip.js';
import type { PrimaryKey } from '../../../src/controller/primary-key.js';
import { openStore } from '../../../src/store/database.js';
import type { RelationRecord } from '../../../src/store/records.js';
import { RelationStore } from '../../../src/store/relation-store.js';
import type { ResolvedResource } from '../../../src/sync/resolved-config.js';
import { selectionFingerprint } from '../../../src/sync/primary-selection.js';

const dir = mkdtempSync(join(tmpdir(), 'relsync-sweep-skip-'));
const id = (cluster: string, resource: string, name: string, group = ''): ObjectIdentity => ({ cluster, group, resource, namespace: 'ns', name });
const primary = id('tenant-a', 'databases', 'db', 'demo.relsync.dev');
const copy = { ...primary, cluster: 'service', namespace: 'copy-ns' };
const source = id('tenant-a', 'configmaps', 'cfg');
const dest = { ...source, cluster: 'service', namespace: 'copy-ns' };
const waiting = id('tenant-a', 'configmaps', 'not-yet');
const waitingDest = { ...waiting, cluster: 'service', namespace: 'copy-ns' };
const selectorRule = { id: 'extra', origin: 'platform', finder: { kind: 'selector' }, sourceType: { group: '', resource: 'configmaps' } };
const resource = { where: 'resources[0]', rules: [selectorRule] } as unknown as ResolvedResource;
const key: PrimaryKey = { resource, id: primary };
const fingerprint = { of: () => 'config-1' };
/** Within the budget nothing is read from the store. */
const noStoreRead = async (): Promise<ObjectIdentity[]> => assert.fail('read the store within the budget');

type Relation = Omit<RelationRecord, 'lastSyncedAt' | 'primary'>;
const synced: Relation = { ruleId: 'config', origin: 'platform', source, destination: dest, state: 'synced', contentHash: 'h', message: null, versions: { source: '5/u5', destination: '6/u6' } };
const pending: Relation = { ruleId: 'config2', origin: 'platform', source: waiting, destination: waitingDest, state: 'pending', contentHash: null, message: 'waiting', versions: { source: '', destination: '' } };

/**
 * The LISTs as a sweep saw them: a version, '' (listed whole, not there), or absent from the map
 * (cannot tell); `whole`: the (cluster, type)s listed whole and unfiltered.
 */
const listing = (changes: Record<string, string | undefined> = {}, whole = ['tenant-a/configmaps']) => {
  const versions = new Map<string, string | undefined>([
    [identityKey(primary), '3/u3'],
    [identityKey(copy), '4/u4'],
    [identityKey(source), '5/u5'],
    [identityKey(dest), '6/u6'],
    [identityKey(waiting), ''],
    [identityKey(waitingDest), ''],
  ]);
  for (const [k, v] of Object.entries(changes)) versions.set(k, v);
  return { versionOf: (x: ObjectIdentity) => versions.get(identityKey(x)), listedWhole: (cluster: string, type: { resource: string }) => whole.includes(`${cluster}/${type.resource}`) };
};

const context = (over: Partial<SkipContext> = {}): SkipContext => ({
  fingerprint,
  listed: listing(),
  found: new FoundMatches(),
  serviceCluster: 'service',
  reachable: () => true,
  ...over,
});

/** What a sweep decides for `k`, from the store as the sweep reads it (a page of primaries at a time). */
async function check(store: RelationStore, over: Partial<SkipContext> = {}, k: PrimaryKey = key): Promise<boolean> {
  for await (const page of store.primariesWithRelations(1)) {
    const found = page.find((p) => identityKey(p.primary.id) === identityKey(k.id));
    if (found) return isUpToDate(context(over), k, found.primary, found.relations);
  }
  return isUpToDate(context(over), k, undefined, []);
}

async function storeWith(state: 'synced' | 'error', relations: Relation[], versions: { primary: string; copy: string; config: string } | null = { primary: '3/u3', copy: '4/u4', config: 'config-1' }) {
  const opened = await openStore(join(dir, `${Math.random().toString(36).slice(2)}.db`));
  const store = new RelationStore(opened);
  await store.saveReconcile({ id: primary, uid: 'u', copy, state, message: null, versions }, relations);
  return store;
}

describe('sweep skip', () => {
  it('skips a primary whose every object is as its last complete sync left it', async () => {
    const store = await storeWith('synced', [synced, pending]);
    const found = new FoundMatches();
    // Its selector finds its own source, which it relates to already.
    await found.found([key], source, noStoreRead);
    assert.equal(await check(store, { found }), true);
  });

  it('reconciles when any one version differs, or the LISTs cannot tell', async () => {
    const store = await storeWith('synced', [synced, pending]);
    const cases: Array<[string, Record<string, string | undefined>]> = [
      ['the primary changed', { [identityKey(primary)]: '30/u3' }],
      ['the primary was made again (same resourceVersion, another uid)', { [identityKey(primary)]: '3/other' }],
      ['the primary is gone', { [identityKey(primary)]: '' }],
      ['its copy changed', { [identityKey(copy)]: '40/u4' }],
      ['its copy is gone', { [identityKey(copy)]: '' }],
      ['a source changed', { [identityKey(source)]: '50/u5' }],
      ['a source is gone', { [identityKey(source)]: '' }],
      ['a related copy changed', { [identityKey(dest)]: '60/u6' }],
      ['a related copy is gone', { [identityKey(dest)]: '' }],
      ['the source a relation waits for appeared', { [identityKey(waiting)]: '70/u7' }],
      ["a copy took the waiting relation's name", { [identityKey(waitingDest)]: '71/u7' }],
      ['a LIST that cannot tell', { [identityKey(source)]: undefined }],
    ];
    for (const [what, change] of cases) assert.equal(await check(store, { listed: listing(change) }), false, what);
  });

  it('reconciles when a selector or inverse rule finds a listed object the primary has no relation with', async () => {
    const store = await storeWith('synced', [synced]);
    const found = new FoundMatches();
    await found.found([key], source, noStoreRead);
    await found.found([key], id('tenant-a', 'configmaps', 'new-match'), noStoreRead);
    assert.equal(await check(store, { found }), false);
    // A relation of another primary with that object is not this primary's.
    const other: PrimaryKey = { resource, id: id('tenant-a', 'databases', 'other', 'demo.relsync.dev') };
    const onlyOther = new FoundMatches();
    await onlyOther.found([other], id('tenant-a', 'configmaps', 'new-match'), noStoreRead);
    assert.equal(await check(store, { found: onlyOther }), true, 'what rules of another primary find does not concern this one');
  });

  it("reconciles when a selector relation's source is listed at its stored version but its rules no longer find it (a label removed: a stale relation the versions alone cannot tell)", async () => {
    const stale: Relation = { ...synced, ruleId: 'extra' };
    const store = await storeWith('synced', [stale]);
    const found = new FoundMatches();
    assert.equal(await check(store, { found }), false, 'found by no rule now');
    await found.found([key], source, noStoreRead);
    assert.equal(await check(store, { found }), true, 'found: up to date');
  });

  it("past its budget checks a found object against the store at once: another tenant's flood costs no primary its skip", async () => {
    const store = await storeWith('synced', [synced, pending]);
    const found = new FoundMatches(2_000);
    // A flood of another tenant's primary's matches fills the budget first.
    const flood: PrimaryKey = { resource, id: id('tenant-b', 'databases', 'flood', 'demo.relsync.dev') };
    for (let i = 0; i < 100; i++) await found.found([flood], id('tenant-b', 'configmaps', `flood-${i}`), async () => [flood.id]);
    const floodRelations = Array.from({ length: 100 }, (_, i) => ({ source: id('tenant-b', 'configmaps', `flood-${i}`) }));
    assert.equal(found.isDirty(flood, floodRelations), false, 'the flood primary relates to each of its matches: not dirty either');
    // This primary's match no longer fits: the store is read, and says they relate.
    let reads = 0;
    await found.found([key], source, async () => {
      reads++;
      return [primary];
    });
    assert.equal(reads, 1, 'read from the store, past the budget');
    assert.equal(await check(store, { found }), true, 'still skipped');
    // A new match past the budget that the store does not relate: dirty.
    await found.found([key], id('tenant-a', 'configmaps', 'new-match'), async () => []);
    assert.equal(await check(store, { found }), false);
  });

  it('reconciles a primary that rules find more objects for than it may relate to, and lets its pairs go', async () => {
    const found = new FoundMatches(Infinity, 3);
    for (let i = 0; i < 3; i++) await found.found([key], id('tenant-a', 'configmaps', `m${i}`), noStoreRead);
    const related = [0, 1, 2].map((i) => ({ source: id('tenant-a', 'configmaps', `m${i}`) }));
    assert.equal(found.isDirty(key, related), false, 'at the limit, and related to each');
    await found.found([key], id('tenant-a', 'configmaps', 'm3'), noStoreRead);
    assert.equal(found.isDirty(key, related), true, 'one more than it may relate to');
  });

  it('reads every primary with exactly its own relations, across page boundaries', async () => {
    const opened = await openStore(join(dir, 'pages.db'));
    const store = new RelationStore(opened);
    // Names that sort next to each other or are a prefix of another; the same names in two clusters;
    // cluster "a" name "z" next to cluster "b" name "a"; a cluster-scoped type (namespace ''). A page's
    // range must take no neighbour's rows, whichever column tells them apart.
    const primaries: ObjectIdentity[] = [];
    for (const cluster of ['a', 'b', 'tenant-a']) {
      for (const name of ['a', 'db', 'db-a', 'db2', 'dc', 'z']) primaries.push(id(cluster, 'databases', name, 'demo.relsync.dev'));
      primaries.push({ cluster, group: 'demo.relsync.dev', resource: 'clusterdatabases', namespace: '', name: 'db' });
    }
    const expected = new Map<string, string[]>();
    for (const [i, p] of primaries.entries()) {
      const relations = Array.from({ length: i % 4 }, (_, j): Relation => ({ ...synced, ruleId: `r${j}`, source: { ...source, cluster: p.cluster, name: `${p.resource}-${p.name}-${j}` }, destination: { ...dest, name: `${p.cluster}-${p.resource}-${p.name}-${j}` } }));
      expected.set(identityKey(p), relations.map((r) => identityKey(r.source)).sort());
      await store.saveReconcile({ id: p, uid: `u-${i}`, copy: { ...p, cluster: 'service' }, state: 'synced', message: null, versions: null }, relations);
    }
    for (const [pageSize, relationsPerPage] of [[1, 5000], [2, 5000], [3, 5000], [500, 5000], [500, 4]] as const) {
      const seen: string[] = [];
      for await (const page of store.primariesWithRelations(pageSize, relationsPerPage)) {
        assert.ok(page.length <= pageSize);
        for (const { primary: p, relations } of page) {
          seen.push(identityKey(p.id));
          assert.deepEqual(relations.map((r) => identityKey(r.source)).sort(), expected.get(identityKey(p.id)), `relations of ${identityKey(p.id)} (pages of ${pageSize})`);
        }
        if (relationsPerPage === 4) assert.ok(page.reduce((n, p) => n + p.relations.length, 0) <= 4, 'no more relations in a page than asked for (none has more alone)');
      }
      assert.deepEqual(seen.sort(), [...expected.keys()].sort(), `every primary once (pages of ${pageSize}, ${relationsPerPage} relations)`);
    }
    await opened.close();
  });

  it("reconciles when a type its selector reads was not listed whole: a match may be on the page that is missing", async () => {
    const store = await storeWith('synced', [synced, pending]);
    assert.equal(await check(store, { listed: listing({}, []) }), false);
  });

  it('reconciles a primary of a cluster relsync cannot read now, or whose relation reaches one', async () => {
    const store = await storeWith('synced', [synced, pending]);
    assert.equal(await check(store, { reachable: (c) => c !== 'tenant-a' }), false);
    assert.equal(await check(store, { reachable: (c) => c !== 'service' }), false);
  });

  it('reconciles a primary whose last reconcile was no complete sync, or was made under another config', async () => {
    assert.equal(await check(await storeWith('error', [synced])), false, 'state error');
    assert.equal(await check(await storeWith('synced', [synced], null)), false, 'no versions stored');
    assert.equal(await check(await storeWith('synced', [synced]), { fingerprint: { of: () => 'config-2' } }), false, 'another config');
    assert.equal(await check(await storeWith('synced', [{ ...synced, state: 'conflict' }])), false, 'a relation in conflict');
    assert.equal(await check(await storeWith('synced', [{ ...synced, versions: null }])), false, 'a relation without versions');
    const unknown: PrimaryKey = { resource, id: id('tenant-a', 'databases', 'never-synced', 'demo.relsync.dev') };
    assert.equal(await check(await storeWith('synced', [synced]), {}, unknown), false, 'not in the store');
  });

  it('with a namespace selector, reconciles a primary whose namespace changed since its last complete sync (a relabel an event missed)', async () => {
    const filtered = { ...resource, namespaceSelector: { requirements: [] } } as unknown as ResolvedResource;
    const k: PrimaryKey = { resource: filtered, id: primary };
    const namespace = { cluster: 'tenant-a', group: '', resource: 'namespaces', namespace: '', name: 'ns' };
    const store = await storeWith('synced', [synced], { primary: '3/u3', copy: '4/u4', config: selectionFingerprint(filtered, 'config-1', '7/u7') });
    assert.equal(await check(store, { listed: listing({ [identityKey(namespace)]: '7/u7' }) }, k), true, 'the namespace as the sync read it');
    assert.equal(await check(store, { listed: listing({ [identityKey(namespace)]: '8/u7' }) }, k), false, 'the namespace changed since');
    assert.equal(await check(store, { listed: listing({ [identityKey(namespace)]: '' }) }, k), false, 'the namespace is gone');
    assert.equal(await check(store, {}, k), false, 'namespaces not listed: cannot tell');
  });
});
