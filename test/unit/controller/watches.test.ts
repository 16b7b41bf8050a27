// What the finder index's safety argument rests on (src/cache/finder-index.ts):
// a watch feeds the index an object before the router routes the same
// event, so a reconcile that asks the index after its own store write
// either finds the object or is queued again by the router.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pino from 'pino';
import type { KubeObject } from '../../../src/core/object.js';
import type { ResourceType } from '../../../src/core/resource-type.js';
import { watchFor } from '../../../src/controller/watches.js';
import type { Wiring } from '../../../src/controller/wiring.js';
import type { ResolvedRule } from '../../../src/rules/rule.js';
import { Template } from '../../../src/rules/template.js';
import { FinderIndex } from '../../../src/cache/finder-index.js';
import { finderIndexDefinitions } from '../../../src/sync/finder-definitions.js';
import type { ResolvedResource } from '../../../src/sync/resolved-config.js';
import { configMaps, FakeApi } from '../../harness/fake-list-watch-source.js';
import { systemClock } from '../../../src/util/clock.js';

const databases: ResourceType = { group: 'demo.relsync.dev', version: 'v1alpha1', resource: 'databases', kind: 'Database', namespaced: true };
const selectorRule: ResolvedRule = {
  id: 'extra', origin: 'platform', source: configMaps, destination: configMaps, sourceNamespace: undefined, destinationNamespace: undefined, provenance: undefined, cleanup: 'MatchOrigin',
  where: 'resources[0].related.extra', sourceType: configMaps, destinationType: configMaps,
  finder: { kind: 'selector', allowEmpty: false, rewrite: undefined, requirements: [{ key: Template.parse('app', []), operator: 'In', values: [Template.parse('{{ name }}', ['name'])], where: 'resources[0].related.extra.selector.matchLabels.app' }] },
};
const resource: ResolvedResource = {
  type: databases, selector: undefined, where: 'resources[0]', primaryType: databases, copyType: databases, related: [], rules: [selectorRule],
  naming: { namespace: Template.parse('{{ namespace }}', ['namespace']), name: Template.parse('{{ name }}', ['name']) },
};
const counter = { inc: () => undefined };

describe('watches feed the finder index', () => {
  it('before the router sees the same event, deletions too', async () => {
    const api = new FakeApi('a', configMaps);
    const index = new FinderIndex('e2e', finderIndexDefinitions([resource]), { isService: (c) => c === 'svc', budgetBytes: 1024 * 1024 });
    /** Whether the index proposed the routed object when the router got it. */
    const proposedAtRoute: boolean[] = [];
    const proposed = (o: KubeObject) =>
      index.candidates('a', configMaps, { namespace: 'team', selector: { requirements: [{ key: 'app', operator: 'In', values: [o.metadata.labels?.app ?? ''] }] } })?.some((c) => c.name === o.metadata.name) === true;
    let listed = false;
    const wiring = {
      clusters: { client: () => api, get: () => ({ kind: 'kubernetes' }), isUnbound: () => false },
      scope: { of: (cluster: string) => cluster, split: (cluster: string, items: KubeObject[]) => new Map([[cluster, items]]) },
      sweepReads: { noteObject: () => undefined },
      router: {
        route: async (_cluster: string, _type: ResourceType, object: KubeObject) => {
          proposedAtRoute.push(proposed(object));
          return 0;
        },
        beginList: () => ({ page: async () => undefined, end: async () => undefined }),
      },
      checkpoints: { resourceVersion: async () => undefined },
      checkpointer: { noteVersion: () => undefined },
      cache: undefined,
      finderIndex: index,
      firstLists: { listed: () => void (listed = true) },
    } as unknown as Wiring;
    const options = { logger: pino({ level: 'silent' }), metrics: { watchReconnects: counter, watchRelists: counter } as never, watch: { timeoutSeconds: 300, idleTimeoutSeconds: 300 } as never, clock: systemClock };
    const watch = await watchFor(wiring, options, { cluster: 'a', type: configMaps, labelSelector: undefined });
    const stop = new AbortController();
    const running = watch.start(stop.signal);
    const until = async (what: string, ok: () => boolean) => {
      for (let i = 0; i < 200 && !ok(); i++) await new Promise((r) => setTimeout(r, 10));
      assert.ok(ok(), what);
    };
    await until('the LIST ended and the watch opened', () => listed && api.streams.length > 0);
    api.stream.push('ADDED', 'x', '11', { app: 'orders' });
    api.stream.push('MODIFIED', 'y', '12', { app: 'billing' });
    await until('both events routed', () => proposedAtRoute.length === 2);
    assert.deepEqual(proposedAtRoute, [true, true], 'the index had each object when the router got it');
    api.stream.push('DELETED', 'x', '13', { app: 'orders' });
    await until('the deletion routed', () => proposedAtRoute.length === 3);
    assert.equal(proposedAtRoute[2], false, 'a deletion leaves the index before it is routed');
    stop.abort();
    await running;
  });
});
