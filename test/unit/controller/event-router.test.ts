// The router with a real SQLite store: each watch event reaches exactly the
// primaries it concerns — a primary itself, the primary a copy's marks name,
// the owners of a related object by reference, selector or inverse rule —
// and nothing else: not another tenant's same-named object, not relsync's own
// copies as selector or inverse sources, not the event of relsync's own write.
// A complete LIST also queues the owners of what the store knows but the list
// no longer has.
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { LoopBreaks } from '../../../src/util/loop-breaks.js';
import { EventRouter, REFUSED } from '../../../src/controller/event-router.js';
import type { PrimaryKey } from '../../../src/controller/primary-key.js';
import type { ObjectIdentity } from '../../../src/core/identity.js';
import type { KubeObject } from '../../../src/core/object.js';
import type { ResourceType } from '../../../src/core/resource-type.js';
import { Template } from '../../../src/rules/template.js';
import type { ResolvedRule } from '../../../src/rules/rule.js';
import { openStore, type OpenedStore } from '../../../src/store/database.js';
import { RelationStore } from '../../../src/store/relation-store.js';
import { contentOf } from '../../../src/sync/content.js';
import { ContentHasher } from '../../../src/sync/content-hasher.js';
import { ObjectCache } from '../../../src/cache/object-cache.js';
import { OwnWrites } from '../../../src/cache/own-writes.js';
import type { ResolvedResource } from '../../../src/sync/resolved-config.js';

const databases: ResourceType = { group: 'demo.relsync.dev', version: 'v1alpha1', resource: 'databases', kind: 'Database', namespaced: true };
const configMaps: ResourceType = { group: '', version: 'v1', resource: 'configmaps', kind: 'ConfigMap', namespaced: true };
const secrets: ResourceType = { group: '', version: 'v1', resource: 'secrets', kind: 'Secret', namespaced: true };

const rule = (id: string, type: ResourceType, finder: ResolvedRule['finder']): ResolvedRule => ({
  id, origin: 'platform', source: type, destination: type, finder, sourceNamespace: undefined, destinationNamespace: undefined, provenance: undefined, cleanup: 'MatchOrigin', where: `resources[0].related.${id}`, sourceType: type, destinationType: type,
});
const resource: ResolvedResource = {
  type: databases, selector: undefined, where: 'resources[0]', primaryType: databases, copyType: databases,
  naming: { namespace: Template.parse('{{ cluster }}-{{ namespace }}', ['cluster', 'namespace']), name: Template.parse('{{ name }}', ['name']) },
  related: [],
  rules: [
    rule('config', configMaps, { kind: 'template', name: Template.parse('{{ name }}-config', ['name']), destinationName: undefined }),
    rule('extra', configMaps, { kind: 'selector', requirements: [], allowEmpty: false, rewrite: undefined }),
    rule('creds', secrets, { kind: 'inverse', owner: { kind: 'label', key: 'db-owner' }, namespaceFrom: undefined, rewrite: undefined }),
  ],
};

const id = (cluster: string, type: ResourceType, namespace: string, name: string): ObjectIdentity => ({ cluster, group: type.group, resource: type.resource, namespace, name });
const object = (namespace: string, name: string, labels: Record<string, string> = {}, annotations: Record<string, string> = {}): KubeObject => ({ metadata: { namespace, name, labels, annotations, resourceVersion: '1' } });

describe('event router (real SQLite store)', () => {
  let opened: OpenedStore;
  let store: RelationStore;
  let queued: string[];
  let keys: PrimaryKey[] = [];
  let router: EventRouter;
  const cache = new ObjectCache(16 * 1024 * 1024);
  const ownWrites = new OwnWrites();
  const route = async (cluster: string, type: ResourceType, o: KubeObject, change = 'MODIFIED') => {
    queued = [];
    keys = [];
    await router.route(cluster, type, o, { change });
    return [...queued].sort();
  };

  before(async () => {
    opened = await openStore(join(mkdtempSync(join(tmpdir(), 'relsync-router-')), 'router.db'));
    store = new RelationStore(opened);
    router = new EventRouter({
      agentName: 'e2e',
      serviceCluster: 'service',
      hasher: new ContentHasher(Buffer.from('k')),
      isPlatform: (c) => c === 'tenant-a' || c === 'tenant-b',
      resources: [resource],
      store,
      enqueue: (key: PrimaryKey) => {
        keys.push(key);
        queued.push(`${key.id.cluster}/${key.id.namespace}/${key.id.name}`);
      },
      logger: pino({ level: 'silent' }),
      cache,
      ownWrites,
    });
    // Tenant a's primary "orders": its template ConfigMap, a selector app=orders, and its copy.
    const orders = id('tenant-a', databases, 'shop', 'orders');
    const copy = id('service', databases, 'tenant-a-shop', 'orders');
    await store.saveReconcile(
      { id: orders, uid: 'u-orders', copy, state: 'synced', message: null },
      [{ ruleId: 'config', origin: 'platform', source: id('tenant-a', configMaps, 'shop', 'orders-config'), destination: id('service', configMaps, 'tenant-a-shop', 'orders-config'), state: 'synced', contentHash: 'h', message: null }],
      [{ ruleId: 'extra', scope: { cluster: 'tenant-a', group: '', resource: 'configmaps', namespace: 'shop' }, selector: { requirements: [{ key: 'app', operator: 'In', values: ['orders'] }] } }],
    );
  });
  after(async () => {
    await opened?.close();
  });

  it("lets the event loop go round between the items of a LIST page: another tenant's socket is not held for the whole page", async () => {
    const ITEMS = 50;
    /** How many times the loop went round while the page was routed. */
    const turnsWhileRouting = async (breaks: Pick<LoopBreaks, 'due'>) => {
      const router = new EventRouter({
        agentName: 'e2e', serviceCluster: 'service', hasher: new ContentHasher(Buffer.from('k')), isPlatform: (c) => c === 'tenant-a' || c === 'tenant-b',
        resources: [resource], store, enqueue: () => undefined, logger: pino({ level: 'silent' }), loopBreaks: breaks,
      });
      const sink = router.beginList('tenant-b', configMaps, undefined);
      let finished = false;
      let turns = 0;
      // A socket that keeps becoming readable: its callback runs each time the loop goes round.
      const turn = () => {
        if (finished) return;
        turns++;
        setImmediate(turn);
      };
      setImmediate(turn);
      await sink.page(Array.from({ length: ITEMS }, (_, i) => object('other', `cm-${i}`)), []);
      finished = true;
      return turns;
    };
    // Breaks due after every item (0 ms of work allowed), as on a machine where a page takes long:
    // a turn per item, not one before the page.
    assert.ok((await turnsWhileRouting(new LoopBreaks(0))) >= ITEMS, 'the loop went round between every two items');
    // The test can fail: with breaks that never fall due, the page holds the loop to its end.
    assert.equal(await turnsWhileRouting({ due: () => undefined }), 0);
  });

  it('sends a primary to itself, and a copy to the primary its marks name', async () => {
    assert.deepEqual(await route('tenant-a', databases, object('shop', 'orders')), ['tenant-a/shop/orders']);
    const marks = { 'relsync.dev/source-cluster': 'tenant-a', 'relsync.dev/source-group': 'demo.relsync.dev', 'relsync.dev/source-resource': 'databases', 'relsync.dev/source-namespace': 'shop', 'relsync.dev/source-name': 'orders', 'relsync.dev/source-uid': 'u-orders' };
    assert.deepEqual(await route('service', databases, object('tenant-a-shop', 'orders', { 'relsync.dev/agent': 'e2e' }, marks)), ['tenant-a/shop/orders']);
    // Marks edited away: the store still knows whose copy it is.
    assert.deepEqual(await route('service', databases, object('tenant-a-shop', 'orders')), ['tenant-a/shop/orders']);
  });

  it('ignores an object whose name no Kubernetes API server would hold (a tenant\'s own API server may send one)', async () => {
    assert.deepEqual(await route('tenant-a', databases, object('shop', 'x'.repeat(1_000_000))), []);
    assert.deepEqual(await route('tenant-a', databases, object('n'.repeat(64), 'orders')), []);
    assert.deepEqual(await route('tenant-a', databases, object('shop', '')), []);
  });

  it('sends a related object to its owners by reference, selector and inverse rule, and no further', async () => {
    assert.deepEqual(await route('tenant-a', configMaps, object('shop', 'orders-config')), ['tenant-a/shop/orders'], 'by its stored reference');
    assert.deepEqual(await route('service', configMaps, object('tenant-a-shop', 'orders-config')), ['tenant-a/shop/orders'], 'its copy, by destination');
    assert.deepEqual(await route('tenant-a', configMaps, object('shop', 'anything', { app: 'orders' })), ['tenant-a/shop/orders'], 'by the stored selector');
    assert.deepEqual(await route('tenant-a', configMaps, object('other-ns', 'anything', { app: 'orders' })), [], 'the selector is scoped to its namespace');
    assert.deepEqual(await route('tenant-b', configMaps, object('shop', 'orders-config', { app: 'orders' })), [], "another tenant's same names and labels reach nobody");
    // Inverse: the Secret names its owner; routed only while that primary is stored.
    assert.deepEqual(await route('tenant-a', secrets, object('shop', 'creds', { 'db-owner': 'orders' })), ['tenant-a/shop/orders']);
    assert.deepEqual(await route('tenant-a', secrets, object('shop', 'creds', { 'db-owner': 'nobody' })), []);
    assert.deepEqual(await route('tenant-b', secrets, object('shop', 'creds', { 'db-owner': 'orders' })), [], "tenant b naming tenant a's primary reaches nothing");
  });

  it('names the one relation a changed referenced object concerns (an edge); a deletion, a LIST item, or a selector match of the same primary asks for the full reconcile', async () => {
    const edgesOf = () => keys.map((k) => k.edges?.map((e) => `${e.ruleId} ${e.source.name} -> ${e.destination.namespace}/${e.destination.name}`) ?? 'full');
    await route('tenant-a', configMaps, object('shop', 'orders-config'), 'MODIFIED');
    assert.deepEqual(edgesOf(), [['config orders-config -> tenant-a-shop/orders-config']]);
    await route('tenant-a', configMaps, object('shop', 'orders-config'), 'ADDED');
    assert.deepEqual(edgesOf(), [['config orders-config -> tenant-a-shop/orders-config']]);
    await route('tenant-a', configMaps, object('shop', 'orders-config'), 'DELETED');
    assert.deepEqual(edgesOf(), ['full']);
    keys = [];
    await router.route('tenant-a', configMaps, object('shop', 'orders-config'), { change: 'LIST' });
    assert.deepEqual(edgesOf(), ['full']);
    await route('tenant-a', configMaps, object('shop', 'orders-config', { app: 'orders' }), 'MODIFIED');
    assert.deepEqual(edgesOf(), ['full'], 'the same object now matches the primary\'s selector too: one full reconcile');
    await route('service', configMaps, object('tenant-a-shop', 'orders-config'), 'MODIFIED');
    assert.deepEqual(edgesOf(), ['full'], 'a change of the copy (drift) is reconciled in full');
  });

  it("never takes relsync's own copies for selector or inverse sources", async () => {
    const marks = { 'relsync.dev/source-cluster': 'tenant-b', 'relsync.dev/source-group': '', 'relsync.dev/source-resource': 'configmaps', 'relsync.dev/source-namespace': 'x', 'relsync.dev/source-name': 'y', 'relsync.dev/source-uid': 'u' };
    assert.deepEqual(await route('tenant-a', configMaps, object('shop', 'copied', { app: 'orders', 'relsync.dev/agent': 'e2e' }, marks)), []);
    assert.deepEqual(await route('tenant-a', secrets, object('shop', 'copied', { 'db-owner': 'orders', 'relsync.dev/agent': 'e2e' }, marks)), []);
  });

  it("does not route the event of relsync's own write to a related copy (its content hash matches)", async () => {
    const hasher = new ContentHasher(Buffer.from('k'));
    const marks = { 'relsync.dev/source-cluster': 'tenant-a', 'relsync.dev/source-group': '', 'relsync.dev/source-resource': 'configmaps', 'relsync.dev/source-namespace': 'shop', 'relsync.dev/source-name': 'orders-config', 'relsync.dev/source-uid': 'u-cfg' };
    const written: KubeObject = { ...object('tenant-a-shop', 'orders-config', { 'relsync.dev/agent': 'e2e' }, marks), data: { v: '1' } };
    written.metadata.annotations!['relsync.dev/content-hash'] = hasher.hash(contentOf(written));
    assert.deepEqual(await route('service', configMaps, written), [], 'its own write: nobody');
    assert.deepEqual(await route('service', configMaps, { ...written, data: { v: 'changed by someone' } }), ['tenant-a/shop/orders'], 'drift is routed to the owner');
  });

  it('among 1,000 primaries with a selector each, sends an object to exactly the primaries whose selectors match it', async () => {
    // One owner per app label, two for an object both tiers select, none for a label no selector names.
    for (let i = 0; i < 1000; i++) {
      const name = `p${i}`;
      const tiers = i === 7 || i === 8 ? [{ ruleId: 'tier', scope: { cluster: 'tenant-a', group: '', resource: 'configmaps', namespace: 'many' }, selector: { requirements: [{ key: 'tier', operator: 'In' as const, values: ['shared'] }] } }] : [];
      await store.saveReconcile(
        { id: id('tenant-a', databases, 'many', name), uid: `u-${name}`, copy: id('service', databases, 'tenant-a-many', name), state: 'synced', message: null },
        [],
        [{ ruleId: 'extra', scope: { cluster: 'tenant-a', group: '', resource: 'configmaps', namespace: 'many' }, selector: { requirements: [{ key: 'app', operator: 'In', values: [name] }] } }, ...tiers],
      );
    }
    assert.deepEqual(await route('tenant-a', configMaps, object('many', 'cm', { app: 'p5' })), ['tenant-a/many/p5']);
    assert.deepEqual(await route('tenant-a', configMaps, object('many', 'cm', { app: 'p999', tier: 'other' })), ['tenant-a/many/p999']);
    assert.deepEqual(await route('tenant-a', configMaps, object('many', 'shared', { tier: 'shared' })), ['tenant-a/many/p7', 'tenant-a/many/p8']);
    assert.deepEqual(await route('tenant-a', configMaps, object('many', 'both', { app: 'p7', tier: 'shared' })), ['tenant-a/many/p7', 'tenant-a/many/p8'], 'one primary matched twice is queued once');
    assert.deepEqual(await route('tenant-a', configMaps, object('many', 'none', { app: 'p1000' })), []);
    assert.deepEqual(await route('tenant-b', configMaps, object('many', 'cm', { app: 'p5' })), [], "another tenant's object with the same label reaches nobody");
  });

  it('keeps for reconciles what concerns relsync, at its latest version, and nothing else', async () => {
    const cached = (cluster: string, type: ResourceType, namespace: string, name: string) => cache.get(cluster, type, namespace, name)?.metadata.resourceVersion;
    const v = (o: KubeObject, rv: string): KubeObject => ({ ...o, metadata: { ...o.metadata, resourceVersion: rv } });
    await route('tenant-a', databases, v(object('shop', 'orders'), '5'));
    assert.equal(cached('tenant-a', databases, 'shop', 'orders'), '5', 'a primary');
    await route('tenant-a', configMaps, v(object('shop', 'orders-config'), '6'));
    assert.equal(cached('tenant-a', configMaps, 'shop', 'orders-config'), '6', 'a related source (by its stored reference)');
    await route('tenant-a', configMaps, v(object('shop', 'unrelated'), '7'));
    assert.equal(cached('tenant-a', configMaps, 'shop', 'unrelated'), undefined, 'an object routed to nobody');
    await route('tenant-a', configMaps, v(object('shop', 'picked', { app: 'orders' }), '8'));
    assert.equal(cached('tenant-a', configMaps, 'shop', 'picked'), '8', 'a selector match');
    await route('tenant-a', configMaps, v(object('shop', 'picked', { app: 'none' }), '9'));
    assert.equal(cached('tenant-a', configMaps, 'shop', 'picked'), undefined, 'no longer a match: its older version is not kept either');
    await route('tenant-a', configMaps, v(object('shop', 'orders-config'), '10'), 'DELETED');
    assert.equal(cached('tenant-a', configMaps, 'shop', 'orders-config'), undefined, 'deleted');
    const marks = { 'relsync.dev/source-cluster': 'tenant-a', 'relsync.dev/source-group': '', 'relsync.dev/source-resource': 'configmaps', 'relsync.dev/source-namespace': 'shop', 'relsync.dev/source-name': 'nothing-copies-this', 'relsync.dev/source-uid': 'u' };
    await route('tenant-b', configMaps, v(object('shop', 'forged', { 'relsync.dev/agent': 'e2e' }, marks), '12'));
    assert.equal(cached('tenant-b', configMaps, 'shop', 'forged'), undefined, "an object that merely carries relsync's marks (a tenant can fill the cache with those)");
  });

  it("keeps the version of relsync's own write, whose event is not routed", async () => {
    const hasher = new ContentHasher(Buffer.from('k'));
    const marks = { 'relsync.dev/source-cluster': 'tenant-a', 'relsync.dev/source-group': '', 'relsync.dev/source-resource': 'configmaps', 'relsync.dev/source-namespace': 'shop', 'relsync.dev/source-name': 'orders-config', 'relsync.dev/source-uid': 'u-cfg' };
    const written: KubeObject = { ...object('tenant-a-shop', 'orders-config', { 'relsync.dev/agent': 'e2e' }, marks), data: { v: 'own' } };
    written.metadata.resourceVersion = '42';
    written.metadata.annotations!['relsync.dev/content-hash'] = hasher.hash(contentOf(written));
    ownWrites.record(id('service', configMaps, 'tenant-a-shop', 'orders-config'), '42');
    assert.deepEqual(await route('service', configMaps, written), [], 'not routed');
    assert.equal(cache.get('service', configMaps, 'tenant-a-shop', 'orders-config')?.metadata.resourceVersion, '42');
    // The same unchanged content under another name (a tenant can clone a copy it sees): not kept.
    const clone: KubeObject = { ...written, metadata: { ...written.metadata, name: 'clone', resourceVersion: '43' } };
    assert.deepEqual(await route('service', configMaps, clone), []);
    assert.equal(cache.get('service', configMaps, 'tenant-a-shop', 'clone'), undefined);
  });

  it("takes a heavy own write by its identity alone: not routed, its cached version let go; another's version of it is left to be read and routed", async () => {
    const copy = id('service', databases, 'tenant-a-shop', 'orders');
    const head = (rv: string): KubeObject => ({ apiVersion: 'demo.relsync.dev/v1alpha1', kind: 'Database', metadata: { name: 'orders', namespace: 'tenant-a-shop', resourceVersion: rv } });
    cache.observe(copy, { ...head('50'), spec: { v: 'before' } }, 'owner');
    ownWrites.record(copy, '51');
    queued = [];
    assert.equal(await router.ownWrite('service', databases, head('51'), 'MODIFIED'), true);
    assert.deepEqual(queued, [], 'not routed');
    assert.equal(cache.get('service', databases, 'tenant-a-shop', 'orders'), undefined, 'the older version is not read back');
    assert.equal(await router.ownWrite('service', databases, head('51'), 'MODIFIED'), false, 'consumed once');
    // A version relsync did not write: nothing is taken, and the full event still routes it (asked once).
    assert.equal(await router.ownWrite('service', databases, head('52'), 'MODIFIED'), false);
    queued = [];
    await router.route('service', databases, { ...head('52'), spec: { v: 'theirs' } }, { change: 'MODIFIED', ownChecked: true });
    assert.deepEqual(queued, ['tenant-a/shop/orders'], "another's change of the copy reaches its primary");
  });

  it('queues, at the end of a complete LIST, the owners of what the store knows but the list no longer has', async () => {
    queued = [];
    const sink = router.beginList('tenant-a', configMaps, undefined);
    await sink.page([object('shop', 'unrelated-1')], []);
    await sink.page([object('shop', 'unrelated-2')], []);
    assert.deepEqual(queued, [], 'unrelated objects reach nobody');
    await sink.end();
    assert.deepEqual(queued, ['tenant-a/shop/orders'], 'orders-config was not listed: gone while nobody watched');
    queued = [];
    const complete = router.beginList('tenant-a', configMaps, undefined);
    await complete.page([object('shop', 'orders-config')], []);
    queued = [];
    await complete.end();
    assert.deepEqual(queued, [], 'listed: nothing missing');
  });

  it('routes an object too costly to read (its metadata only) to its owners, keeps no version of it, and never takes it for gone', async () => {
    const cached = () => cache.get('tenant-a', configMaps, 'shop', 'orders-config')?.metadata.resourceVersion;
    await route('tenant-a', configMaps, { ...object('shop', 'orders-config'), metadata: { ...object('shop', 'orders-config').metadata, resourceVersion: '20' } });
    assert.equal(cached(), '20');
    assert.deepEqual(await route('tenant-a', configMaps, object('shop', 'orders-config'), REFUSED), ['tenant-a/shop/orders'], 'its owner reads it again');
    assert.equal(keys[0]?.edges, undefined, 'in full: no edge is synced on content nobody read');
    assert.equal(cached(), undefined, 'what it held before is not read for it');
    assert.deepEqual(await route('tenant-a', configMaps, object('shop', 'costly', { app: 'orders' }), REFUSED), ['tenant-a/shop/orders'], 'a selector match by its labels');
    queued = [];
    const sink = router.beginList('tenant-a', configMaps, undefined);
    await sink.page([], [object('shop', 'orders-config')]);
    assert.deepEqual(queued, ['tenant-a/shop/orders'], 'refused in a LIST: routed as such');
    queued = [];
    await sink.end();
    assert.deepEqual(queued, [], 'and not missing at the end');
    assert.equal(cached(), undefined);
  });
});

describe('event router with a copy type of its own (copyAs)', () => {
  const stores: ResourceType = { group: 'platform.relsync.dev', version: 'v1', resource: 'stores', kind: 'Store', namespaced: true };
  const projected: ResolvedResource = { ...resource, type: stores, primaryType: stores, copyType: databases, rules: [] };
  let opened: OpenedStore;
  let queued: string[] = [];
  let router: EventRouter;

  before(async () => {
    opened = await openStore(join(mkdtempSync(join(tmpdir(), 'relsync-router-copyas-')), 'router.db'));
    const store = new RelationStore(opened);
    router = new EventRouter({
      agentName: 'e2e', serviceCluster: 'service', hasher: new ContentHasher(Buffer.from('k')), isPlatform: (c) => c === 'tenant-a',
      resources: [projected], store, enqueue: (key) => queued.push(`${key.id.cluster}/${key.id.group}/${key.id.namespace}/${key.id.name}`), logger: pino({ level: 'silent' }),
    });
    await store.saveReconcile({ id: id('tenant-a', stores, 'shop', 'orders'), uid: 'u', copy: id('service', databases, 'tenant-a-shop', 'orders'), state: 'synced', message: null }, []);
  });
  after(async () => opened?.close());

  const marks = { 'relsync.dev/source-cluster': 'tenant-a', 'relsync.dev/source-group': stores.group, 'relsync.dev/source-resource': stores.resource, 'relsync.dev/source-namespace': 'shop', 'relsync.dev/source-name': 'orders' };

  it('sends a copy of the copy type to the primary its marks name, and one whose marks were edited away to the primary the store names', async () => {
    queued = [];
    await router.route('service', databases, object('tenant-a-shop', 'orders', { 'relsync.dev/agent': 'e2e' }, marks));
    assert.deepEqual(queued, ['tenant-a/platform.relsync.dev/shop/orders']);
    queued = [];
    await router.route('service', databases, object('tenant-a-shop', 'orders'));
    assert.deepEqual(queued, ['tenant-a/platform.relsync.dev/shop/orders']);
  });

  it('queues, at the end of a relist of the copy type, the primary whose copy the list no longer has', async () => {
    queued = [];
    const sink = router.beginList('service', databases, 'relsync.dev/agent=e2e');
    await sink.page([], []);
    await sink.end();
    assert.deepEqual(queued, ['tenant-a/platform.relsync.dev/shop/orders']);
  });

  it('takes no object of the copy type on a platform, nor of the primary type in the service cluster, for a primary or a copy', async () => {
    queued = [];
    await router.route('tenant-a', databases, object('shop', 'orders', { 'relsync.dev/agent': 'e2e' }, marks));
    await router.route('service', stores, object('tenant-a-shop', 'orders', { 'relsync.dev/agent': 'e2e' }, marks));
    assert.deepEqual(queued, []);
  });
});
