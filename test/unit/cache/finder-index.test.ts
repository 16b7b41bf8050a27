// The finder index's contract: it proposes candidates only for a type whose
// watch listed it completely, never answers where it could miss an object
// (a relist under way, a LIST that failed, over its budget, a key it does
// not hold, a kcp workspace), and what it proposes is checked against the
// whole query, so a wrong candidate costs a read, never a wrong answer.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { KubeObject } from '../../../src/core/object.js';
import type { ResourceType } from '../../../src/core/resource-type.js';
import { inverseOwnerKey } from '../../../src/rules/inverse-owner.js';
import type { ResolvedRule } from '../../../src/rules/rule.js';
import { Template } from '../../../src/rules/template.js';
import { FinderIndex, MAX_CANDIDATES } from '../../../src/cache/finder-index.js';
import { finderIndexDefinitions, inverseIndexName } from '../../../src/sync/finder-definitions.js';
import { CachedReads, ObjectCache } from '../../../src/cache/object-cache.js';
import type { ListQuery, ObjectReads } from '../../../src/cache/object-reads.js';
import type { ResolvedResource } from '../../../src/sync/resolved-config.js';

const databases: ResourceType = { group: 'demo.relsync.dev', version: 'v1alpha1', resource: 'databases', kind: 'Database', namespaced: true };
const configMaps: ResourceType = { group: '', version: 'v1', resource: 'configmaps', kind: 'ConfigMap', namespaced: true };
const secrets: ResourceType = { group: '', version: 'v1', resource: 'secrets', kind: 'Secret', namespaced: true };
const serviceAccounts: ResourceType = { group: '', version: 'v1', resource: 'serviceaccounts', kind: 'ServiceAccount', namespaced: true };

const rule = (id: string, type: ResourceType, finder: ResolvedRule['finder'], origin: 'platform' | 'service' = 'platform'): ResolvedRule => ({
  id, origin, source: type, destination: type, finder, sourceNamespace: undefined, destinationNamespace: undefined, provenance: undefined, cleanup: 'MatchOrigin',
  where: `resources[0].related.${id}`, sourceType: type, destinationType: type,
});
const selectorRule = rule('extra', configMaps, {
  kind: 'selector', allowEmpty: false, rewrite: undefined,
  requirements: [{ key: Template.parse('app', []), operator: 'In', values: [Template.parse('{{ name }}', ['name'])], where: 'resources[0].related.extra.selector.matchLabels.app' }],
});
const templatedKeyRule = rule('templated', configMaps, {
  kind: 'selector', allowEmpty: false, rewrite: undefined,
  requirements: [{ key: Template.parse('{{ name }}.example.com/app', ['name']), operator: 'In', values: [Template.parse('yes', [])], where: 'resources[0].related.templated.selector.matchLabels' }],
});
const inverseFinder = { kind: 'inverse', owner: { kind: 'label', key: 'db-owner' }, namespaceFrom: undefined, rewrite: undefined } as const;
const inverseRule = rule('creds', secrets, inverseFinder);
// Inverse rules of the other kinds: an ownerReference (with the owner's uid), and a namespace read off the object.
const byReference = rule('sa', serviceAccounts, { kind: 'inverse', owner: { kind: 'ownerReference' }, namespaceFrom: undefined, rewrite: undefined });
const crossNamespace = rule('remote', configMaps, { kind: 'inverse', owner: { kind: 'annotation', key: 'db-owner' }, namespaceFrom: { kind: 'label', key: 'db-namespace' }, rewrite: undefined });
const serviceSide = rule('endpoint', secrets, { kind: 'inverse', owner: { kind: 'label', key: 'db-owner' }, namespaceFrom: undefined, rewrite: undefined }, 'service');
const resource: ResolvedResource = {
  type: databases, selector: undefined, where: 'resources[0]', primaryType: databases, copyType: databases,
  naming: { namespace: Template.parse('{{ namespace }}', ['namespace']), name: Template.parse('{{ name }}', ['name']) },
  related: [], rules: [selectorRule, templatedKeyRule, inverseRule, byReference, crossNamespace, serviceSide],
};

const isService = (c: string) => c === 'service';
const object = (namespace: string, name: string, labels: Record<string, string> = {}, rv = '1', more: Partial<KubeObject['metadata']> = {}): KubeObject => ({ metadata: { namespace, name, labels, resourceVersion: rv, ...more } });
const bySelector = (app: string, namespace = 'ns'): ListQuery => ({ namespace, selector: { requirements: [{ key: 'app', operator: 'In', values: [app] }] } });
const byOwner = (owner: string, namespace = 'ns'): ListQuery => ({
  namespace, selector: { requirements: [{ key: 'db-owner', operator: 'In', values: [owner] }] },
  indexed: { index: inverseIndexName(resource, inverseRule), of: (o) => inverseOwnerKey(inverseFinder, o, 'Database', databases.group), value: `${namespace}/${owner}` },
});
/** An index with one complete LIST of `items` (ConfigMaps and Secrets) in cluster `a`. */
const listed = (items: { cms?: KubeObject[]; secrets?: KubeObject[] }, budget = 1024 * 1024) => {
  const index = new FinderIndex('e2e', finderIndexDefinitions([resource]), { isService, budgetBytes: budget });
  for (const [type, objects] of [[configMaps, items.cms ?? []], [secrets, items.secrets ?? []]] as const) {
    index.beginList('a', type, () => true);
    for (const o of objects) index.observe({ cluster: 'a', ...type, namespace: o.metadata.namespace!, name: o.metadata.name! }, o);
    index.endList('a', type);
  }
  return index;
};
const names = (found: Array<{ namespace: string; name: string }> | undefined) => found?.map((f) => `${f.namespace}/${f.name}`);

describe('finder index', () => {
  it('proposes the objects that carry the selector\'s anchored label value, or name the owner, in the query\'s namespace', () => {
    const index = listed({
      cms: [object('ns', 'b', { app: 'orders' }), object('ns', 'a', { app: 'orders' }), object('other', 'c', { app: 'orders' }), object('ns', 'd', { app: 'billing' })],
      secrets: [object('ns', 's', { 'db-owner': 'orders' }), object('ns', 't', { 'db-owner': 'billing' })],
    });
    assert.deepEqual(names(index.candidates('a', configMaps, bySelector('orders'))), ['ns/a', 'ns/b'], 'sorted as the API server lists, other namespaces left out');
    assert.deepEqual(names(index.candidates('a', secrets, byOwner('orders'))), ['ns/s']);
    assert.deepEqual(index.candidates('a', configMaps, bySelector('nobody')), [], 'an empty answer is an answer');
    assert.equal(index.candidates('b', configMaps, bySelector('orders')), undefined, 'another cluster was never listed');
  });

  it('follows events: a changed label moves the object, a deletion removes it', () => {
    const index = listed({ cms: [object('ns', 'a', { app: 'orders' })] });
    index.observe({ cluster: 'a', ...configMaps, namespace: 'ns', name: 'a' }, object('ns', 'a', { app: 'billing' }, '2'));
    assert.deepEqual(names(index.candidates('a', configMaps, bySelector('orders'))), []);
    assert.deepEqual(names(index.candidates('a', configMaps, bySelector('billing'))), ['ns/a']);
    index.observe({ cluster: 'a', ...configMaps, namespace: 'ns', name: 'a' }, undefined);
    assert.deepEqual(names(index.candidates('a', configMaps, bySelector('billing'))), []);
    assert.equal(index.stats().objects, 0);
    assert.equal(index.stats().bytes, 0);
  });

  it('answers nothing for a type before its LIST ended, during a relist, and after a LIST failed midway', () => {
    const index = new FinderIndex('e2e', finderIndexDefinitions([resource]), { isService, budgetBytes: 1024 * 1024 });
    index.observe({ cluster: 'a', ...configMaps, namespace: 'ns', name: 'a' }, object('ns', 'a', { app: 'orders' }));
    assert.equal(index.candidates('a', configMaps, bySelector('orders')), undefined, 'no LIST yet');
    index.beginList('a', configMaps, () => true);
    index.observe({ cluster: 'a', ...configMaps, namespace: 'ns', name: 'a' }, object('ns', 'a', { app: 'orders' }));
    assert.equal(index.candidates('a', configMaps, bySelector('orders')), undefined, 'the LIST has not ended');
    index.endList('a', configMaps);
    assert.deepEqual(names(index.candidates('a', configMaps, bySelector('orders'))), ['ns/a']);
    index.beginList('a', configMaps, () => true);
    assert.equal(index.candidates('a', configMaps, bySelector('orders')), undefined, 'a relist: what happened in the watch\'s gap is not known yet');
    index.abortList('a', configMaps);
    index.observe({ cluster: 'a', ...configMaps, namespace: 'ns', name: 'a' }, object('ns', 'a', { app: 'orders' }));
    index.endList('a', configMaps);
    assert.equal(index.candidates('a', configMaps, bySelector('orders')), undefined, 'a failed LIST leaves the type unanswered until the next one ends');
  });

  it('answers nothing for a query without a key it holds: a templated label key, no In requirement, an unknown index', () => {
    const index = listed({ cms: [object('ns', 'a', { app: 'orders', 'orders.example.com/app': 'yes' })] });
    assert.equal(index.candidates('a', configMaps, { namespace: 'ns', selector: { requirements: [{ key: 'orders.example.com/app', operator: 'In', values: ['yes'] }] } }), undefined);
    assert.equal(index.candidates('a', configMaps, { namespace: 'ns', selector: { requirements: [{ key: 'app', operator: 'Exists', values: [] }] } }), undefined);
    assert.equal(index.candidates('a', configMaps, { namespace: 'ns', indexed: { index: 'resources[9].related.x', of: () => undefined, value: 'ns/orders' } }), undefined);
  });

  it('leaves more candidates than a few reads are worth to a LIST', () => {
    const many = Array.from({ length: MAX_CANDIDATES + 1 }, (_, i) => object('ns', `cm-${i}`, { app: 'orders' }));
    assert.equal(listed({ cms: many }).candidates('a', configMaps, bySelector('orders')), undefined);
    assert.equal(listed({ cms: many.slice(1) }).candidates('a', configMaps, bySelector('orders'))?.length, MAX_CANDIDATES);
  });

  it('lets a type go when a tenant\'s objects would pass the budget, until its next LIST; other types keep answering', () => {
    let told = 0;
    const index = new FinderIndex('e2e', finderIndexDefinitions([resource]), { isService, budgetBytes: 20_000, onOverBudget: () => told++ });
    index.beginList('a', secrets, () => true);
    index.observe({ cluster: 'a', ...secrets, namespace: 'ns', name: 's' }, object('ns', 's', { 'db-owner': 'orders' }));
    index.endList('a', secrets);
    index.beginList('a', configMaps, () => true);
    for (let i = 0; i < 200; i++) index.observe({ cluster: 'a', ...configMaps, namespace: 'ns', name: `flood-${i}` }, object('ns', `flood-${i}`, { app: `x${i}` }));
    index.endList('a', configMaps);
    assert.equal(told, 1);
    assert.equal(index.candidates('a', configMaps, bySelector('x1')), undefined, 'answered by LISTs again');
    assert.deepEqual(names(index.candidates('a', secrets, byOwner('orders'))), ['ns/s']);
    assert.ok(index.stats().bytes <= 20_000);
    index.beginList('a', configMaps, () => true);
    index.observe({ cluster: 'a', ...configMaps, namespace: 'ns', name: 'a' }, object('ns', 'a', { app: 'orders' }));
    index.endList('a', configMaps);
    assert.deepEqual(names(index.candidates('a', configMaps, bySelector('orders'))), ['ns/a'], 'the next LIST indexes it again');
  });

  it('never indexes relsync\'s own copies (a tenant writes their labels; they are never sources)', () => {
    const marks = { 'relsync.dev/source-cluster': 'a', 'relsync.dev/source-group': '', 'relsync.dev/source-resource': 'configmaps', 'relsync.dev/source-namespace': 'ns', 'relsync.dev/source-name': 'x', 'relsync.dev/agent': 'e2e' };
    const index = listed({ cms: [object('ns', 'copy', { app: 'orders', ...marks }, '1', { annotations: marks }), object('ns', 'real', { app: 'orders' })] });
    assert.deepEqual(names(index.candidates('a', configMaps, bySelector('orders'))), ['ns/real']);
    assert.equal(index.stats().objects, 1);
  });

  it('keys labels by namespace: a value common to many namespaces costs a query only its own', () => {
    const elsewhere = Array.from({ length: MAX_CANDIDATES + 10 }, (_, i) => object(`other-${i}`, 'web', { app: 'web' }));
    const index = listed({ cms: [...elsewhere, object('ns', 'web', { app: 'web' })] });
    assert.deepEqual(names(index.candidates('a', configMaps, bySelector('web'))), ['ns/web']);
    assert.equal(index.candidates('a', configMaps, { selector: { requirements: [{ key: 'app', operator: 'In', values: ['web'] }] } }), undefined, 'a selector over all namespaces is listed');
  });

  it('proposes the union of several In values', () => {
    const index = listed({ cms: [object('ns', 'x', { app: 'orders' }), object('ns', 'y', { app: 'billing' }), object('ns', 'z', { app: 'other' })] });
    assert.deepEqual(names(index.candidates('a', configMaps, { namespace: 'ns', selector: { requirements: [{ key: 'app', operator: 'In', values: ['orders', 'billing'] }] } })), ['ns/x', 'ns/y']);
  });

  it('indexes no owner a name could not be: a tenant\'s 200 KiB owner annotations cost it nothing and let no type go', () => {
    let told = 0;
    const index = new FinderIndex('e2e', finderIndexDefinitions([resource]), { isService, budgetBytes: 64 * 1024, onOverBudget: () => told++ });
    index.beginList('a', configMaps, () => true);
    const huge = 'x'.repeat(200 * 1024);
    for (let i = 0; i < 50; i++) index.observe({ cluster: 'a', ...configMaps, namespace: 'ns', name: `big-${i}` }, object('ns', `big-${i}`, { 'db-namespace': 'home' }, '1', { annotations: { 'db-owner': `${huge}${i}` } }));
    index.observe({ cluster: 'a', ...configMaps, namespace: 'ns', name: 'long-ns' }, object('ns', 'long-ns', { 'db-namespace': 'n'.repeat(64) }, '1', { annotations: { 'db-owner': 'orders' } }));
    index.observe({ cluster: 'a', ...configMaps, namespace: 'ns', name: 'real' }, object('ns', 'real', { 'db-namespace': 'home' }, '1', { annotations: { 'db-owner': 'o'.repeat(253) } }));
    index.endList('a', configMaps);
    assert.equal(told, 0, 'no type was let go');
    assert.equal(index.stats().objects, 1, 'only the object whose owner could exist is indexed');
    assert.ok(index.stats().bytes < 2048, `${index.stats().bytes} bytes`);
    const remote = (value: string) => ({ index: inverseIndexName(resource, crossNamespace), of: () => value, value });
    assert.deepEqual(names(index.candidates('a', configMaps, { indexed: remote(`home/${'o'.repeat(253)}`) })), ['ns/real']);
    assert.equal(inverseOwnerKey({ owner: { kind: 'annotation', key: 'db-owner' }, namespaceFrom: { kind: 'label', key: 'db-namespace' } }, object('ns', 'x', { 'db-namespace': 'home' }, '1', { annotations: { 'db-owner': `${huge}` } }), 'Database', databases.group), undefined, 'routing finds no owner either');
  });

  it('finds by ownerReference and by a namespace read off the object, sorted as the API server lists them', () => {
    const index = new FinderIndex('e2e', finderIndexDefinitions([resource]), { isService, budgetBytes: 1024 * 1024 });
    const owned = object('ns', 'sa', {}, '1', { ownerReferences: [{ apiVersion: 'demo.relsync.dev/v1alpha1', kind: 'Database', name: 'orders', uid: 'u1' }] });
    index.beginList('a', serviceAccounts, () => true);
    index.observe({ cluster: 'a', ...serviceAccounts, namespace: 'ns', name: 'sa' }, owned);
    index.endList('a', serviceAccounts);
    const ownerOf = (o: KubeObject) => inverseOwnerKey({ owner: { kind: 'ownerReference' }, namespaceFrom: undefined }, o, 'Database', databases.group);
    assert.deepEqual(names(index.candidates('a', serviceAccounts, { namespace: 'ns', indexed: { index: inverseIndexName(resource, byReference), of: ownerOf, value: 'ns/orders' } })), ['ns/sa']);
    index.beginList('a', configMaps, () => true);
    for (const ns of ['a-b', 'a', 'b']) index.observe({ cluster: 'a', ...configMaps, namespace: ns, name: 'cm' }, object(ns, 'cm', { 'db-namespace': 'home' }, '1', { annotations: { 'db-owner': 'orders' } }));
    index.endList('a', configMaps);
    const remote = { index: inverseIndexName(resource, crossNamespace), of: () => 'home/orders', value: 'home/orders' };
    assert.deepEqual(names(index.candidates('a', configMaps, { indexed: remote })), ['a/cm', 'a-b/cm', 'b/cm'], 'namespace "a" before "a-b", as the API server orders its keys');
  });

  it('answers nothing while its watch is not synced', () => {
    let synced = true;
    const index = new FinderIndex('e2e', finderIndexDefinitions([resource]), { isService, budgetBytes: 1024 * 1024 });
    index.beginList('a', configMaps, () => synced);
    index.observe({ cluster: 'a', ...configMaps, namespace: 'ns', name: 'x' }, object('ns', 'x', { app: 'orders' }));
    index.endList('a', configMaps);
    assert.deepEqual(names(index.candidates('a', configMaps, bySelector('orders'))), ['ns/x']);
    synced = false;
    assert.equal(index.candidates('a', configMaps, bySelector('orders')), undefined, 'a stalled or failing watch may have missed objects');
  });

  it('lets the largest type go when the budget is passed, not the one that happened to come next', () => {
    const dropped: string[] = [];
    const index = new FinderIndex('e2e', finderIndexDefinitions([resource]), { isService, budgetBytes: 40_000, onOverBudget: (cluster, type) => dropped.push(`${cluster}/${type.resource}`) });
    index.beginList('flooder', configMaps, () => true);
    for (let i = 0; i < 130; i++) index.observe({ cluster: 'flooder', ...configMaps, namespace: 'ns', name: `f${i}` }, object('ns', `f${i}`, { app: `x${i}` }));
    index.endList('flooder', configMaps);
    assert.deepEqual(dropped, []);
    assert.ok(index.stats().bytes > 30_000, `the flood fills most of the budget (${index.stats().bytes} bytes)`);
    // Another tenant's few objects tip it over: the flooder's type goes.
    index.beginList('quiet', secrets, () => true);
    for (let i = 0; i < 40; i++) index.observe({ cluster: 'quiet', ...secrets, namespace: 'ns', name: `s${i}` }, object('ns', `s${i}`, { 'db-owner': `p${i}` }));
    index.endList('quiet', secrets);
    assert.deepEqual(dropped, ['flooder/configmaps']);
    assert.deepEqual(names(index.candidates('quiet', secrets, byOwner('p1'))), ['ns/s1']);
    assert.equal(index.candidates('flooder', configMaps, bySelector('x1')), undefined);
  });

  it('indexes a type only on the side its rules read it, and only for unfiltered watches', () => {
    const index = new FinderIndex('e2e', finderIndexDefinitions([resource]), { isService, budgetBytes: 1024 * 1024 });
    assert.equal(index.wants('a', configMaps, undefined), true);
    assert.equal(index.wants('a', configMaps, 'relsync.dev/agent=x'), false, 'a filtered watch cannot vouch for every object');
    assert.equal(index.wants('service', configMaps, undefined), false, 'platform-origin rules read the platforms');
    assert.equal(index.wants('a', databases, undefined), false);
    assert.equal(index.wants('service', secrets, undefined), true, 'a service-origin inverse rule reads the service cluster');
  });
});

describe('cached reads answer a rule\'s list from the finder index', () => {
  /** A live side that records what it was asked. */
  const liveWith = (objects: KubeObject[]) => {
    const calls: string[] = [];
    const live: ObjectReads = {
      get: async (_c, _t, namespace, name) => {
        calls.push(`get ${namespace}/${name}`);
        return objects.find((o) => o.metadata.namespace === namespace && o.metadata.name === name);
      },
      list: async () => {
        calls.push('list');
        return [];
      },
    };
    return { live, calls };
  };

  it('reads each candidate and keeps only what answers the whole query, live or cached', async () => {
    const relabelled = object('ns', 'moved', { app: 'billing' }, '2');
    const mine = object('ns', 'mine', { app: 'orders' });
    const copy = object('ns', 'copy', { app: 'orders', 'relsync.dev/agent': 'x' });
    const index = listed({ cms: [object('ns', 'moved', { app: 'orders' }), mine, copy, object('ns', 'gone', { app: 'orders' })] });
    const cache = new ObjectCache(1024 * 1024);
    cache.observe({ cluster: 'a', group: '', resource: 'configmaps', namespace: 'ns', name: 'mine' }, mine);
    // 'moved' lost the label since the index saw it; 'gone' was deleted; 'copy' is refused by the caller.
    const { live, calls } = liveWith([relabelled, copy]);
    const reads = new CachedReads(cache, live, index);
    const found = await reads.list('a', configMaps, { ...bySelector('orders'), accept: (o) => o.metadata.labels?.['relsync.dev/agent'] === undefined });
    assert.deepEqual(found.map((o) => o.metadata.name), ['mine']);
    assert.deepEqual(calls.sort(), ['get ns/copy', 'get ns/gone', 'get ns/moved'], 'the cached one was not read again; nothing was listed');
  });

  it('lists when the index cannot answer, and stops at the query\'s limit', async () => {
    const { live, calls } = liveWith([object('ns', 'a', { app: 'orders' }), object('ns', 'b', { app: 'orders' })]);
    const index = listed({ cms: [object('ns', 'a', { app: 'orders' }), object('ns', 'b', { app: 'orders' })] });
    const reads = new CachedReads(new ObjectCache(1024 * 1024), live, index);
    assert.deepEqual((await reads.list('a', configMaps, { ...bySelector('orders'), limit: 1 })).map((o) => o.metadata.name), ['a'], 'the first in the API server\'s order');
    assert.deepEqual(calls.sort(), ['get ns/a', 'get ns/b'], 'the candidates (at most MAX_CANDIDATES) are read at once');
    await reads.list('b', configMaps, bySelector('orders'));
    assert.deepEqual(calls, ['get ns/a', 'get ns/b', 'list'], 'cluster b was never listed by a watch');
  });
});
