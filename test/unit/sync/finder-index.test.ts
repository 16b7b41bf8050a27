// The finder index's contract: it proposes candidates only for a type whose
// watch listed it completely, never answers where it could miss an object
// (a relist under way, a LIST that failed, over its budget, a key it does
// not hold, a kcp workspace), and what it proposes is checked against the
// whole query, so a wrong candidate costs a read, never a wrong answer.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { KubeObject } from '../../../src/core/object.js';
import type { ResourceType } from '../../../src/core/resource-type.js';
import type { ResolvedRule } from '../../../src/rules/rule.js';
import { Template } from '../../../src/rules/template.js';
import { FinderIndex, inverseIndexName, MAX_CANDIDATES } from '../../../src/sync/finder-index.js';
import { CachedReads, ObjectCache } from '../../../src/sync/object-cache.js';
import type { ListQuery, ObjectReads } from '../../../src/sync/object-reads.js';
import type { ResolvedResource } from '../../../src/sync/resolved-config.js';

const databases: ResourceType = { group: 'demo.relsync.dev', version: 'v1alpha1', resource: 'databases', kind: 'Database', namespaced: true };
const configMaps: ResourceType = { group: '', version: 'v1', resource: 'configmaps', kind: 'ConfigMap', namespaced: true };
const secrets: ResourceType = { group: '', version: 'v1', resource: 'secrets', kind: 'Secret', namespaced: true };

const rule = (id: string, type: ResourceType, finder: ResolvedRule['finder'], origin: 'platform' | 'service' = 'platform'): ResolvedRule => ({
  id, origin, source: type, destination: type, finder, sourceNamespace: undefined, destinationNamespace: undefined, provenance: undefined,
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
const inverseRule = rule('creds', secrets, { kind: 'inverse', owner: { kind: 'label', key: 'db-owner' }, namespaceFrom: undefined, rewrite: undefined });
const resource: ResolvedResource = {
  type: databases, selector: undefined, where: 'resources[0]', primaryType: databases,
  naming: { namespace: Template.parse('{{ namespace }}', ['namespace']), name: Template.parse('{{ name }}', ['name']) },
  related: [], rules: [selectorRule, templatedKeyRule, inverseRule],
};

const isService = (c: string) => c === 'service';
const object = (namespace: string, name: string, labels: Record<string, string> = {}, rv = '1'): KubeObject => ({ metadata: { namespace, name, labels, resourceVersion: rv } });
const bySelector = (app: string, namespace = 'ns'): ListQuery => ({ namespace, selector: { requirements: [{ key: 'app', operator: 'In', values: [app] }] } });
const byOwner = (owner: string, namespace = 'ns'): ListQuery => ({
  namespace, selector: { requirements: [{ key: 'db-owner', operator: 'In', values: [owner] }] },
  indexed: { index: inverseIndexName(resource, inverseRule), of: () => undefined, value: `${namespace}/${owner}` },
});
/** An index with one complete LIST of `items` (ConfigMaps and Secrets) in cluster `a`. */
const listed = (items: { cms?: KubeObject[]; secrets?: KubeObject[] }, budget = 1024 * 1024) => {
  const index = new FinderIndex([resource], isService, budget);
  for (const [type, objects] of [[configMaps, items.cms ?? []], [secrets, items.secrets ?? []]] as const) {
    index.beginList('a', type);
    for (const o of objects) index.observe('a', type, o.metadata.namespace!, o.metadata.name!, o);
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
    index.observe('a', configMaps, 'ns', 'a', object('ns', 'a', { app: 'billing' }, '2'));
    assert.deepEqual(names(index.candidates('a', configMaps, bySelector('orders'))), []);
    assert.deepEqual(names(index.candidates('a', configMaps, bySelector('billing'))), ['ns/a']);
    index.observe('a', configMaps, 'ns', 'a', undefined);
    assert.deepEqual(names(index.candidates('a', configMaps, bySelector('billing'))), []);
    assert.equal(index.stats().objects, 0);
    assert.equal(index.stats().bytes, 0);
  });

  it('answers nothing for a type before its LIST ended, during a relist, and after a LIST failed midway', () => {
    const index = new FinderIndex([resource], isService, 1024 * 1024);
    index.observe('a', configMaps, 'ns', 'a', object('ns', 'a', { app: 'orders' }));
    assert.equal(index.candidates('a', configMaps, bySelector('orders')), undefined, 'no LIST yet');
    index.beginList('a', configMaps);
    index.observe('a', configMaps, 'ns', 'a', object('ns', 'a', { app: 'orders' }));
    assert.equal(index.candidates('a', configMaps, bySelector('orders')), undefined, 'the LIST has not ended');
    index.endList('a', configMaps);
    assert.deepEqual(names(index.candidates('a', configMaps, bySelector('orders'))), ['ns/a']);
    index.beginList('a', configMaps);
    assert.equal(index.candidates('a', configMaps, bySelector('orders')), undefined, 'a relist: what happened in the watch\'s gap is not known yet');
    index.abortList('a', configMaps);
    index.observe('a', configMaps, 'ns', 'a', object('ns', 'a', { app: 'orders' }));
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
    const index = new FinderIndex([resource], isService, 20_000, () => told++);
    index.beginList('a', secrets);
    index.observe('a', secrets, 'ns', 's', object('ns', 's', { 'db-owner': 'orders' }));
    index.endList('a', secrets);
    index.beginList('a', configMaps);
    for (let i = 0; i < 200; i++) index.observe('a', configMaps, 'ns', `flood-${i}`, object('ns', `flood-${i}`, { app: `x${i}` }));
    index.endList('a', configMaps);
    assert.equal(told, 1);
    assert.equal(index.candidates('a', configMaps, bySelector('x1')), undefined, 'answered by LISTs again');
    assert.deepEqual(names(index.candidates('a', secrets, byOwner('orders'))), ['ns/s']);
    assert.ok(index.stats().bytes <= 20_000);
    index.beginList('a', configMaps);
    index.observe('a', configMaps, 'ns', 'a', object('ns', 'a', { app: 'orders' }));
    index.endList('a', configMaps);
    assert.deepEqual(names(index.candidates('a', configMaps, bySelector('orders'))), ['ns/a'], 'the next LIST indexes it again');
  });

  it('indexes a type only on the side its rules read it, and only for unfiltered watches', () => {
    const index = new FinderIndex([resource], isService, 1024 * 1024);
    assert.equal(index.wants('a', configMaps, undefined), true);
    assert.equal(index.wants('a', configMaps, 'relsync.dev/agent=x'), false, 'a filtered watch cannot vouch for every object');
    assert.equal(index.wants('service', configMaps, undefined), false, 'platform-origin rules read the platforms');
    assert.equal(index.wants('a', databases, undefined), false);
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
    assert.deepEqual((await reads.list('a', configMaps, { ...bySelector('orders'), limit: 1 })).map((o) => o.metadata.name), ['a']);
    assert.deepEqual(calls, ['get ns/a']);
    await reads.list('b', configMaps, bySelector('orders'));
    assert.deepEqual(calls, ['get ns/a', 'list'], 'cluster b was never listed by a watch');
  });
});
