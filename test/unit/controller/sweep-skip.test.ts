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

const context = (store: RelationStore, over: Partial<SkipContext> = {}): SkipContext => ({
  store,
  fingerprint,
  listed: listing(),
  dirty: new DirtyPrimaries(),
  serviceCluster: 'service',
  reachable: () => true,
  ...over,
});

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
    dirty.found([key], [primary]);
    assert.equal(await isUpToDate(context(store, { dirty }), key), true);
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
    for (const [what, change] of cases) assert.equal(await isUpToDate(context(store, { listed: listing(change) }), key), false, what);
  });

  it('reconciles when a selector or inverse rule finds a listed object the primary has no relation with', async () => {
    const store = await storeWith('synced', [synced]);
    const dirty = new DirtyPrimaries();
    dirty.found([key], []);
    assert.equal(await isUpToDate(context(store, { dirty }), key), false);
  });

  it("reconciles when a type its selector reads was not listed whole: a match may be on the page that is missing", async () => {
    const store = await storeWith('synced', [synced, pending]);
    assert.equal(await isUpToDate(context(store, { listed: listing({}, []) }), key), false);
  });

  it('reconciles a primary of a cluster relsync cannot read now, or whose relation reaches one', async () => {
    const store = await storeWith('synced', [synced, pending]);
    assert.equal(await isUpToDate(context(store, { reachable: (c) => c !== 'tenant-a' }), key), false);
    assert.equal(await isUpToDate(context(store, { reachable: (c) => c !== 'service' }), key), false);
  });

  it('reconciles a primary whose last reconcile was no complete sync, or was made under another config', async () => {
    assert.equal(await isUpToDate(context(await storeWith('error', [synced])), key), false, 'state error');
    assert.equal(await isUpToDate(context(await storeWith('synced', [synced], null)), key), false, 'no versions stored');
    assert.equal(await isUpToDate(context(await storeWith('synced', [synced]), { fingerprint: { of: () => 'config-2' } }), key), false, 'another config');
    assert.equal(await isUpToDate(context(await storeWith('synced', [{ ...synced, state: 'conflict' }])), key), false, 'a relation in conflict');
    assert.equal(await isUpToDate(context(await storeWith('synced', [{ ...synced, versions: null }])), key), false, 'a relation without versions');
    const unknown: PrimaryKey = { resource, id: id('tenant-a', 'databases', 'never-synced', 'demo.relsync.dev') };
    assert.equal(await isUpToDate(context(await storeWith('synced', [synced])), unknown), false, 'not in the store');
  });
});
