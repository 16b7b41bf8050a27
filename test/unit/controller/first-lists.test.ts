// The informer contract, per cluster (controller/first-lists.ts): real
// list/watch loops on fake APIs and a fake clock feed FirstLists, whose gate
// the work queue consults. A primary's reconcile waits until the watches it
// reads from (its platform's and the service cluster's) have listed once;
// another cluster's primaries do not wait for it; a relist holds nothing
// again; stopping while primaries are held does not hang.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pino from 'pino';
import { FirstLists } from '../../../src/controller/first-lists.js';
import { primaryKeyString, type PrimaryKey } from '../../../src/controller/primary-key.js';
import { planWatches } from '../../../src/controller/watch-plan.js';
import { WorkQueue } from '../../../src/controller/work-queue.js';
import type { ResourceType } from '../../../src/core/resource-type.js';
import { ListWatch, wholeList } from '../../../src/kube/list-watch.js';
import type { ResolvedRule } from '../../../src/rules/rule.js';
import { Template } from '../../../src/rules/template.js';
import type { ResolvedResource } from '../../../src/sync/resolved-config.js';
import { FakeClock, settle } from '../../harness/fake-clock.js';
import { configMaps, deferred, FakeApi } from '../../harness/fake-list-watch-source.js';

const logger = pino({ level: 'silent' });
const databases: ResourceType = { group: 'demo.relsync.dev', version: 'v1alpha1', resource: 'databases', kind: 'Database', namespaced: true };
const secrets: ResourceType = { group: '', version: 'v1', resource: 'secrets', kind: 'Secret', namespaced: true };
const caches: ResourceType = { group: 'demo.relsync.dev', version: 'v1alpha1', resource: 'caches', kind: 'Cache', namespaced: true };

const rule = (id: string, type: ResourceType): ResolvedRule => ({
  id, origin: 'platform', source: type, destination: type, sourceNamespace: undefined, destinationNamespace: undefined, provenance: undefined, cleanup: 'MatchOrigin', where: `resources[0].related.${id}`, sourceType: type, destinationType: type,
  finder: { kind: 'template', name: Template.parse('{{ name }}', ['name']), destinationName: undefined },
});
const published = (primaryType: ResourceType, rules: ResolvedRule[]): ResolvedResource => ({
  type: primaryType, selector: undefined, where: 'resources[0]', primaryType, copyType: primaryType, related: [], rules,
  naming: { namespace: Template.parse('{{ cluster }}-{{ namespace }}', ['cluster', 'namespace']), name: Template.parse('{{ name }}', ['name']) },
});
/** Databases relate ConfigMaps; caches (a second resource) relate Secrets. */
const dbs = published(databases, [rule('config', configMaps)]);
const cachesResource = published(caches, [rule('creds', secrets)]);

const key = (resource: ResolvedResource, cluster: string, name: string): PrimaryKey => ({ resource, id: { cluster, group: resource.primaryType.group, resource: resource.primaryType.resource, namespace: 'team', name } });

/**
 * The watches of the plan, each a real ListWatch on a fake API whose LIST is held while
 * `holdLists` names its "cluster/resource"; FirstLists gates a queue of two workers.
 */
function setup(options: { resources?: ResolvedResource[]; platforms?: string[]; holdLists?: string[]; watchedAs?: (cluster: string) => string } = {}) {
  const resources = options.resources ?? [dbs];
  const platforms = options.platforms ?? ['a', 'b'];
  const clock = new FakeClock();
  const stop = new AbortController();
  const held = new Map((options.holdLists ?? []).map((name) => [name, deferred()]));
  const announced: Array<{ cluster: string; released: number }> = [];
  const ran: string[] = [];
  const plan = planWatches(resources, 'svc', platforms, 'e2e');
  const firstLists = new FirstLists({
    plan, resources, serviceCluster: 'svc', platforms, watchedAs: options.watchedAs,
    onListed: (ready) => {
      const released = queue.release();
      for (const cluster of ready) announced.push({ cluster, released: released.filter((k) => k.id.cluster === cluster || options.watchedAs?.(k.id.cluster) === cluster).length });
    },
  });
  const queue = new WorkQueue<PrimaryKey>({ key: primaryKeyString, concurrency: 2, lane: (k) => k.id.cluster, clock, gate: (k) => firstLists.ready(k.resource, k.id.cluster) });
  const apis = new Map<string, FakeApi>();
  const loops = plan.map((p) => {
    const api = new FakeApi(p.cluster, p.type);
    const name = `${p.cluster}/${p.type.resource}`;
    api.listHeld = held.get(name)?.promise;
    apis.set(name, api);
    const loop = new ListWatch({ client: api, logger, clock, handler: { onEvent: async () => undefined, beginList: () => wholeList(async () => undefined) }, onFirstSync: () => firstLists.listed(p) });
    return loop.start(stop.signal);
  });
  const working = queue.start(stop.signal, async (k) => {
    ran.push(`${k.id.cluster}/${k.id.name}`);
    return {};
  });
  return {
    queue, firstLists, clock, apis, announced, ran, working,
    list: (name: string) => held.get(name)!.resolve(),
    end: async () => {
      stop.abort();
      await working;
      for (const h of held.values()) h.resolve(); // a LIST the fake still holds ends, so the loops can stop
      await Promise.all(loops);
    },
  };
}

describe('first lists gate the work queue', () => {
  it('runs a primary enqueued before its cluster listed only after every watch it reads from has; another listed cluster runs at once', async () => {
    const { queue, ran, announced, list, end } = setup({ holdLists: ['a/configmaps', 'svc/configmaps'] });
    queue.add(key(dbs, 'a', 'x'));
    await settle();
    assert.deepEqual(ran, [], 'a: its ConfigMaps (and the service cluster\'s) are not listed yet');
    assert.equal(queue.waiting, 1, 'held');
    assert.equal(queue.depth, 0, 'not queued');
    list('svc/configmaps');
    await settle();
    assert.deepEqual(ran, [], 'a\'s own ConfigMaps are still listing');
    assert.deepEqual(announced, [{ cluster: 'b', released: 0 }], 'b: every watch it reads has listed');
    queue.add(key(dbs, 'b', 'y'));
    await settle();
    assert.deepEqual(ran, ['b/y'], 'b does not wait for a');
    list('a/configmaps');
    await settle();
    assert.deepEqual(ran, ['b/y', 'a/x'], 'released once a listed');
    assert.equal(queue.waiting, 0);
    assert.deepEqual(announced, [{ cluster: 'b', released: 0 }, { cluster: 'a', released: 1 }], 'said once per cluster, with what it held');
    await end();
  });

  it('does not hold anything again while a watch relists after 410 Gone', async () => {
    const { queue, ran, apis, clock, announced, end } = setup();
    await settle();
    assert.equal(announced.length, 2, 'a and b listed');
    const api = apis.get('a/configmaps')!;
    const relist = deferred();
    api.listHeld = relist.promise;
    api.mode = 'gone';
    api.stream.end();
    await clock.advance(1_000);
    assert.equal(api.lists, 2, 'relisting, and the relist is still on its way');
    queue.add(key(dbs, 'a', 'x'));
    await settle();
    assert.deepEqual(ran, ['a/x'], 'the informer contract is about the first list only');
    assert.equal(announced.length, 2, 'nothing said again');
    relist.resolve();
    await end();
  });

  it('stops while primaries are held, without hanging; their waiters get "error"', async () => {
    const { queue, ran, end } = setup({ holdLists: ['svc/databases'] });
    const waited = queue.addAndWait(key(dbs, 'a', 'x'));
    await settle();
    assert.equal(queue.waiting, 1);
    await end();
    assert.equal((await waited).outcome, 'error');
    assert.deepEqual(ran, []);
  });

  it('lets a sweep\'s reconcile past the gate (it reads the sweep\'s own LISTs), and holds what the watches queue meanwhile', async () => {
    const { queue, ran, list, end } = setup({ holdLists: ['a/databases'] });
    queue.add(key(dbs, 'a', 'x'));
    await settle();
    assert.equal((await queue.addAndWait(key(dbs, 'a', 'x'), { ignoreGate: true })).outcome, 'ok');
    assert.deepEqual(ran, ['a/x'], 'the held primary ran once, for the sweep');
    queue.add(key(dbs, 'a', 'x'));
    await settle();
    assert.deepEqual(ran, ['a/x'], 'a watch event after it waits for the list again');
    list('a/databases');
    await settle();
    assert.deepEqual(ran, ['a/x', 'a/x']);
    await end();
  });

  it('holds a kcp workspace that binds while the watches run until its own list, not the other workspaces of its platform', async () => {
    const workspaces: Record<string, string> = { ws1: 'kcp', ws2: 'kcp' };
    const { queue, firstLists, ran, announced, end } = setup({ platforms: ['kcp'], watchedAs: (c) => workspaces[c] ?? c });
    await settle();
    assert.deepEqual(announced, [{ cluster: 'kcp', released: 0 }]);
    firstLists.listing('ws1');
    queue.add(key(dbs, 'ws1', 'x'));
    queue.add(key(dbs, 'ws2', 'y'));
    await settle();
    assert.deepEqual(ran, ['ws2/y'], 'ws1 waits for its own list');
    firstLists.workspaceListed('ws1');
    await settle();
    assert.deepEqual(ran, ['ws2/y', 'ws1/x']);
    assert.deepEqual(announced.at(-1), { cluster: 'ws1', released: 1 });
    await end();
  });

  it('holds a primary only behind the types its own resource reads', async () => {
    const { queue, ran, announced, list, end } = setup({ resources: [dbs, cachesResource], platforms: ['a'], holdLists: ['a/secrets'] });
    queue.add(key(dbs, 'a', 'db'));
    queue.add(key(cachesResource, 'a', 'cache'));
    await settle();
    assert.deepEqual(ran, ['a/db'], 'databases read no Secrets');
    assert.deepEqual(announced, [], 'a is not ready for every resource yet');
    list('a/secrets');
    await settle();
    assert.deepEqual(ran, ['a/db', 'a/cache']);
    assert.deepEqual(announced, [{ cluster: 'a', released: 1 }]);
    await end();
  });
});
