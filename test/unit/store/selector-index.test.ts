// The selector index against a real SQLite file: an object's labels route to
// exactly the primaries whose stored selectors match it, in its own scope,
// whether the selector is found through an indexed label or read as one
// without one; and what a reconcile replaces or a delete removes no longer routes.
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { ObjectIdentity } from '../../../src/core/identity.js';
import { matchesSelector, type SelectorRequirement } from '../../../src/core/label-selector.js';
import { openStore } from '../../../src/store/database.js';
import { RelationStore } from '../../../src/store/relation-store.js';
import type { SelectorRecord } from '../../../src/store/selector-index.js';
import type { AnchoredLabelKeys } from '../../../src/store/anchored-label-keys.js';

const dir = mkdtempSync(join(tmpdir(), 'relsync-selector-index-'));
const primary = (name: string): ObjectIdentity => ({ cluster: 'tenant-a', group: 'demo.relsync.dev', resource: 'databases', namespace: 'ns', name });
const configmaps = { cluster: 'tenant-a', group: '', resource: 'configmaps', namespace: 'ns' };
const selector = (ruleId: string, ...requirements: SelectorRequirement[]): SelectorRecord => ({ ruleId, scope: configmaps, selector: { requirements } });

async function storeWith(file: string, selectors: Record<string, SelectorRecord[]>) {
  const opened = await openStore(join(dir, file));
  const store = new RelationStore(opened);
  const save = (name: string, sel: SelectorRecord[]) => store.saveReconcile({ id: primary(name), uid: name, copy: { ...primary(name), cluster: 'service' }, state: 'synced', message: null }, [], sel);
  for (const [name, sel] of Object.entries(selectors)) await save(name, sel);
  const owners = async (labels: Record<string, string>, scope: Omit<ObjectIdentity, 'name'> = configmaps) => (await store.selectorOwners(scope, labels)).map((p) => p.name).sort();
  return { opened, store, save, owners };
}

describe('selector index', () => {
  it('answers the same with a snapshot of the anchoring label keys as without, for any labels', async () => {
    const { opened, store, save } = await storeWith('keys.db', {
      web: [selector('cfg', { key: 'app', operator: 'In', values: ['web'] })],
      tiered: [selector('cfg', { key: 'tier', operator: 'In', values: ['gold'] }, { key: 'env', operator: 'NotIn', values: ['prod'] })],
    });
    const keys = await store.selectorLabelKeys();
    const both = async (labels: Record<string, string>) => {
      const all = (await store.selectorOwners(configmaps, labels)).map((p) => p.name).sort();
      const filtered = (await store.selectorOwners(configmaps, labels, keys)).map((p) => p.name).sort();
      assert.deepEqual(filtered, all, JSON.stringify(labels));
      return all;
    };
    assert.deepEqual(await both({ app: 'web', other: 'x' }), ['web']);
    assert.deepEqual(await both({ tier: 'gold', env: 'dev' }), ['tiered']);
    assert.deepEqual(await both({ other: 'x' }), []);
    // A selector without an anchor (or one on a new key) changes the snapshot: a sweep compares it at its end.
    await save('not-legacy', [selector('cfg', { key: 'legacy', operator: 'DoesNotExist', values: [] })]);
    const after = await store.selectorLabelKeys();
    assert.ok(!after.equals(keys), 'a new scope key');
    assert.ok(after.equals(await store.selectorLabelKeys()), 'read twice, the same');
    assert.deepEqual((await store.selectorOwners(configmaps, { other: 'x' }, after)).map((p) => p.name), ['not-legacy'], 'read as one without an anchor');
    await opened.close();
  });

  it('answers the same whether a scope has few anchoring keys (read off the labels) or many (the labels walked)', async () => {
    // 40 selectors on 40 keys: more than the few a lookup reads off an object's labels.
    const many = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`p${i}`, [selector('cfg', { key: `key-${i}`, operator: 'In', values: [`v${i}`] })]]));
    const { opened, store } = await storeWith('many-keys.db', { ...many, web: [selector('cfg', { key: 'app', operator: 'In', values: ['web'] })] });
    const keys = await store.selectorLabelKeys();
    assert.equal(keys.size, 41);
    // Fewer labels than the scope's 41 keys (the labels walked), and more (the keys read off them).
    const filler = Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`filler-${i}`, `v${i}`]));
    const lookups: Array<Record<string, string>> = [{ 'key-7': 'v7', app: 'web', other: 'x' }, { 'key-7': 'v8' }, { 'key-39': 'v39', 'key-0': 'v0' }, {}, { ...filler, 'key-7': 'v7' }, { ...filler, app: 'web', 'key-39': 'v39' }, filler];
    for (const labels of lookups) {
      const walked = (await store.selectorOwners(configmaps, labels, keys)).map((p) => p.name).sort();
      // Brute force: every stored selector evaluated against the labels.
    const expected = Object.entries({ ...many, web: [selector('cfg', { key: 'app', operator: 'In', values: ['web'] })] }).filter(([, [sel]]) => matchesSelector(sel!.selector, labels)).map(([name]) => name).sort();
      assert.deepEqual(walked, expected, JSON.stringify(labels));
    }
    // Labels a tenant's own API server sent as something else than strings match nothing, and fail nothing.
    assert.deepEqual(await store.selectorOwners(configmaps, { app: {} as unknown as string, 'key-1': 'v1' }, keys).then((o) => o.map((p) => p.name)), ['p1']);
    // Another namespace of the same type has none of these keys: nothing is looked up there.
    assert.deepEqual(await store.selectorOwners({ ...configmaps, namespace: 'other' }, { app: 'web' }, keys), []);
    await opened.close();
  });

  it('without a snapshot, finds a selector stored after its first lookup (the store keeps its anchoring keys)', async () => {
    const { opened, save, owners } = await storeWith('live-keys.db', {});
    // A tenant's object with ten thousand labels: only keys some selector is anchored on are looked up.
    const many = Object.fromEntries(Array.from({ length: 10_000 }, (_, i) => [`k${i}.example/l`, 'v']));
    assert.deepEqual(await owners({ ...many, app: 'web' }), [], 'nothing stored yet: the keys are read, and none is there');
    await save('web', [selector('cfg', { key: 'app', operator: 'In', values: ['web'] })]);
    await save('not-legacy', [selector('cfg', { key: 'legacy', operator: 'DoesNotExist', values: [] })]);
    assert.deepEqual(await owners({ ...many, app: 'web' }), ['not-legacy', 'web']);
    await opened.close();
  });

  it("forgets the anchoring keys of a tenant's namespaces made and deleted at the next sweep's read, and keeps one stored meanwhile", async () => {
    const opened = await openStore(join(dir, 'churn.db'));
    const store = new RelationStore(opened);
    const inNamespace = (ns: string) => ({ ...primary(`p-${ns}`), namespace: ns });
    const heldKeys = () => (store as unknown as { anchored?: AnchoredLabelKeys }).anchored?.size ?? 0;
    for (let i = 0; i < 200; i++) {
      const id = inNamespace(`ns-${i}`);
      await store.saveReconcile({ id, uid: id.name, copy: { ...id, cluster: 'service' }, state: 'synced', message: null }, [], [{ ruleId: 'cfg', scope: { ...configmaps, namespace: id.namespace }, selector: { requirements: [{ key: 'app', operator: 'In', values: ['web'] }] } }]);
      await store.deletePrimary(id);
    }
    assert.equal(heldKeys(), 200, 'the keys of selectors stored since the start');
    // A selector stored while the sweep reads the keys afresh is not lost with the old set.
    const reading = store.selectorLabelKeys();
    const late = inNamespace('late');
    const saving = store.saveReconcile({ id: late, uid: 'late', copy: { ...late, cluster: 'service' }, state: 'synced', message: null }, [], [{ ruleId: 'cfg', scope: { ...configmaps, namespace: 'late' }, selector: { requirements: [{ key: 'app', operator: 'In', values: ['late'] }] } }]);
    await Promise.all([reading, saving]);
    assert.equal(heldKeys(), 1, 'only the key a stored selector is anchored on');
    assert.deepEqual((await store.selectorOwners({ ...configmaps, namespace: 'late' }, { app: 'late' })).map((p) => p.name), ['p-late']);
    // The other order: the read starts after a reconcile has added its key, before its rows are written.
    const later = inNamespace('later');
    const savingLater = store.saveReconcile({ id: later, uid: 'later', copy: { ...later, cluster: 'service' }, state: 'synced', message: null }, [], [{ ruleId: 'cfg', scope: { ...configmaps, namespace: 'later' }, selector: { requirements: [{ key: 'app', operator: 'In', values: ['later'] }] } }]);
    await Promise.resolve();
    await Promise.all([store.selectorLabelKeys(), savingLater]);
    assert.deepEqual((await store.selectorOwners({ ...configmaps, namespace: 'later' }, { app: 'later' })).map((p) => p.name), ['p-later']);
    await opened.close();
  });

  it("holds the anchoring keys of a tenant's ever-changing selectors within twice what is stored, and still finds the current ones", async () => {
    const { opened, store, save, owners } = await storeWith('churn.db', { web: [selector('cfg', { key: 'app', operator: 'In', values: ['web'] })] });
    await owners({ app: 'web' });
    // One primary whose selector is anchored on a new label key at every reconcile: one key stored at any time.
    let most = 0;
    for (let i = 0; i < 12_000; i++) {
      await save('churn', [selector('cfg', { key: `key-${i}`, operator: 'In', values: ['x'] })]);
      most = Math.max(most, store.anchoredKeysHeld);
    }
    // Without a bound it would hold all 12,001; the slack is 4,096 keys.
    assert.ok(most < 4200, `at most ${most} keys held for 2 stored`);
    assert.deepEqual(await owners({ 'key-11999': 'x' }), ['churn'], 'the current selector is found');
    assert.deepEqual(await owners({ 'key-5000': 'x' }), [], 'a replaced one is not');
    assert.deepEqual(await owners({ app: 'web' }), ['web']);
    await opened.close();
  });

  it("reads only the labels selectors are anchored on: a tenant's thousands of others are never walked", async () => {
    const { opened, owners } = await storeWith('walk.db', { web: [selector('cfg', { key: 'app', operator: 'In', values: ['web'] })] });
    // Labels that refuse to be walked (for-in, Object.keys, Object.entries): only looked up by key.
    const plain: Record<string, string> = { app: 'web', other: 'x' };
    const unwalkable = new Proxy(plain, { ownKeys: () => assert.fail('the labels were walked') });
    assert.deepEqual(await owners(unwalkable), ['web']);
    await opened.close();
  });

  it('routes an object to the primaries whose selectors match its labels, indexed or not', async () => {
    const { opened, owners } = await storeWith('routing.db', {
      web: [selector('cfg', { key: 'app', operator: 'In', values: ['web'] })],
      'not-legacy': [selector('cfg', { key: 'legacy', operator: 'DoesNotExist', values: [] })],
      tiered: [selector('cfg', { key: 'tier', operator: 'In', values: ['gold', 'silver'] }, { key: 'env', operator: 'NotIn', values: ['prod'] })],
      both: [selector('a', { key: 'app', operator: 'In', values: ['web'] }), selector('b', { key: 'tier', operator: 'Exists', values: [] })],
    });
    assert.deepEqual(await owners({ app: 'web' }), ['both', 'not-legacy', 'web'], 'by an indexed label, and the selector without one');
    assert.deepEqual(await owners({ app: 'web', legacy: 'yes' }), ['both', 'web'], 'the whole selector decides, not only its index term');
    assert.deepEqual(await owners({ tier: 'silver', env: 'dev', legacy: 'yes' }), ['both', 'tiered'], 'any value of an In requirement finds it');
    assert.deepEqual(await owners({ tier: 'silver', env: 'prod', legacy: 'yes' }), ['both'], 'a matching index term with a failing NotIn is no match');
    assert.deepEqual(await owners({ app: 'api', legacy: 'yes' }), [], 'no selector matches');
    assert.deepEqual(await owners({ app: 'web' }, { ...configmaps, cluster: 'tenant-b' }), [], 'another tenant\'s object never routes here');
    assert.deepEqual(await owners({ app: 'web' }, { ...configmaps, namespace: 'other' }), [], 'nor one in another namespace');
    assert.deepEqual(await owners({ app: 'web' }, { ...configmaps, resource: 'secrets' }), [], 'nor one of another type');
    await opened.close();
  });

  it('forgets what a reconcile replaced and what a deleted primary had', async () => {
    const { opened, store, save, owners } = await storeWith('replaced.db', {
      one: [selector('cfg', { key: 'app', operator: 'In', values: ['web'] })],
      two: [selector('cfg', { key: 'app', operator: 'In', values: ['web'] })],
    });
    await save('one', [selector('cfg', { key: 'app', operator: 'In', values: ['api'] })]);
    assert.deepEqual(await owners({ app: 'web' }), ['two'], 'the old index term is gone');
    assert.deepEqual(await owners({ app: 'api' }), ['one']);
    assert.deepEqual((await store.selectorsOf(primary('one'))).map((s) => s.selector), ['app=api']);
    await save('two', []);
    assert.deepEqual(await owners({ app: 'web' }), [], 'a reconcile that renders no selector leaves none');
    await store.deletePrimary(primary('one'));
    assert.deepEqual(await owners({ app: 'api' }), [], 'selectors go with their primary');
    assert.deepEqual(await store.selectorsOf(primary('one')), []);
    await opened.close();
  });
});
