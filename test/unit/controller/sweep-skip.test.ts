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
import { DirtyPrimaries, isUpToDate, type SkipContext } from '../../../src/controller/sweep-skip.js';
import type { PrimaryKey } from '../../../src/controller/primary-key.js';
import { openStore } from '../../../src/store/database.js';
import type { RelationRecord } from '../../../src/store/records.js';
import { RelationStore } from '../../../src/store/relation-store.js';
import type { ResolvedResource } from '../../../src/sync/resolved-config.js';

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
  dirty: new DirtyPrimaries(),
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
  const store = new RelationStore(opened.db);
  await store.saveReconcile({ id: primary, uid: 'u', copy, state, message: null, versions }, relations);
  return store;
}

describe('sweep skip', () => {
  it('skips a primary whose every object is as its last complete sync left it', async () => {
    const store = await storeWith('synced', [synced, pending]);
    const dirty = new DirtyPrimaries();
    // Its selector finds its own source, which it relates to already.
    dirty.found([key], source);
    assert.equal(await check(store, { dirty }), true);
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
    const dirty = new DirtyPrimaries();
    dirty.found([key], source);
    dirty.found([key], id('tenant-a', 'configmaps', 'new-match'));
    assert.equal(await check(store, { dirty }), false);
    // A relation of another primary with that object is not this primary's.
    const other: PrimaryKey = { resource, id: id('tenant-a', 'databases', 'other', 'demo.relsync.dev') };
    const onlyOther = new DirtyPrimaries();
    onlyOther.found([other], id('tenant-a', 'configmaps', 'new-match'));
    assert.equal(await check(store, { dirty: onlyOther }), true, 'what rules of another primary find does not concern this one');
  });

  it('reconciles a primary found for more objects than the budget remembers, and keeps to the budget', async () => {
    const store = await storeWith('synced', [synced, pending]);
    const dirty = new DirtyPrimaries(1_000);
    // Another primary's matches fill the budget; this one's match, which it relates to already, no longer fits.
    const other: PrimaryKey = { resource, id: id('tenant-a', 'databases', 'flood', 'demo.relsync.dev') };
    for (let i = 0; i < 100; i++) dirty.found([other], id('tenant-a', 'configmaps', `flood-${i}`));
    dirty.found([key], source);
    assert.equal(await check(store, { dirty }), false, 'not remembered: reconciled, not skipped');
    assert.equal(dirty.isDirty(other, []), true);
  });

  it('reads every primary with exactly its own relations, across page boundaries', async () => {
    const opened = await openStore(join(dir, 'pages.db'));
    const store = new RelationStore(opened.db);
    // Names that sort next to each other and a prefix of another: a page's range must not take a neighbour's rows.
    const names = ['db', 'db-a', 'db2', 'dc', 'e'];
    for (const [i, name] of names.entries()) {
      const p = id('tenant-a', 'databases', name, 'demo.relsync.dev');
      const relations = Array.from({ length: i % 3 }, (_, j): Relation => ({ ...synced, ruleId: `r${j}`, source: id('tenant-a', 'configmaps', `${name}-${j}`), destination: { ...dest, name: `${name}-${j}` } }));
      await store.saveReconcile({ id: p, uid: `u-${name}`, copy: { ...p, cluster: 'service' }, state: 'synced', message: null, versions: null }, relations);
    }
    for (const pageSize of [1, 2, 3, 500]) {
      const seen: string[] = [];
      for await (const page of store.primariesWithRelations(pageSize)) {
        assert.ok(page.length <= pageSize);
        for (const { primary: p, relations } of page) {
          seen.push(p.id.name);
          assert.deepEqual(relations.map((r) => r.source.name).sort(), Array.from({ length: names.indexOf(p.id.name) % 3 }, (_, j) => `${p.id.name}-${j}`), `relations of ${p.id.name} (pages of ${pageSize})`);
          assert.ok(relations.every((r) => identityKey(r.primary) === identityKey(p.id)));
        }
      }
      assert.deepEqual(seen.sort(), [...names].sort(), `every primary once (pages of ${pageSize})`);
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
});
