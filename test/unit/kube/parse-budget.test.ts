// limits.parsedBytesInFlight with real answers: LIST pages of the same process (any cluster) take
// what their text says they take once parsed, from before they are parsed until their consumer
// asks for the next page or stops; a page that does not fit beside those held waits (it does not
// fail), and goes once one is given back. A page's LIST never waits while it holds one, so no
// LIST waits for itself. Requests whose caller does not hold their answer (a GET) take nothing.
// Through the real Connection against a local HTTP server. A watch event holds its share until its
// handler returned (on a fake clock and a fake API).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { ListWatch, wholeList } from '../../../src/kube/list-watch.js';
import { FakeClock, settle } from '../../harness/fake-clock.js';
import { FakeApi } from '../../harness/fake-list-watch-source.js';
import { Connection } from '../../../src/kube/connection.js';
import { ResourceClient, type ListPage } from '../../../src/kube/resource-client.js';
import { ByteBudget } from '../../../src/util/byte-budget.js';
import { parsedBytesAtMost } from '../../../src/util/heap-size.js';
import { eventually } from '../../harness/kube.js';
import { objectText, startListServer, type ListServer } from '../../harness/list-server.js';

const MiB = 1024 * 1024;
const configMaps = { group: '', version: 'v1', resource: 'configmaps', kind: 'ConfigMap', namespaced: true };

describe('the parse budget of LIST pages', () => {
  let server: ListServer;
  /** Two objects of ~20 MiB said each (a page of both: ~40 MiB, under the 72 MiB cap). */
  const objects = [objectText('one', 170_000), objectText('two', 170_000)];

  before(async () => {
    server = await startListServer('/api/v1/configmaps');
    server.objects = objects;
    server.texts.set('/api/v1/namespaces/team/configmaps/one', objects[0]!);
  });
  after(async () => {
    await server.close();
  });

  it('holds a page until its consumer is done with it; a page that does not fit beside it waits, then goes', async () => {
    const budget = new ByteBudget({ capacity: 72 * MiB });
    const connect = () => new Connection({ name: 'c', kubeconfig: server.kubeconfig, parseBudget: budget });
    const [a, b] = [connect(), connect()];
    try {
      const pageSays = parsedBytesAtMost(`{"kind":"List","metadata":{"resourceVersion":"7","continue":""},"items":[${objects.join(',')}]}`);
      assert.ok(pageSays > 36 * MiB && pageSays < 72 * MiB, `a page says ${pageSays} bytes: one fits, two do not`);
      const first = new ResourceClient(a, configMaps).pages()[Symbol.asyncIterator]();
      const firstPage = await first.next();
      assert.equal((firstPage.value as ListPage).items.length, 2);
      assert.equal(budget.held, pageSays, 'the page is held while its consumer has it');

      const second: { page?: ListPage } = {};
      const secondList = (async () => {
        for await (const page of new ResourceClient(b, configMaps).pages()) second.page ??= page;
      })();
      // Its answer was read and told what it takes: it waits for the budget, not for the server.
      await eventually('the second page waits for the budget', async () => budget.queued === 1 || undefined, 5_000);
      assert.equal(second.page, undefined, 'not parsed beside the first');

      // A GET's answer is the reconcile's: it takes nothing, and does not wait.
      const got = await a.request<{ metadata: { name: string } }>('GET', '/api/v1/namespaces/team/configmaps/one');
      assert.equal(got.metadata.name, 'one');

      assert.equal((await first.next()).done, true, 'the first LIST is done with its page');
      await secondList;
      assert.equal((second as { page?: ListPage }).page?.items.length, 2, 'then the second page went');
      assert.equal(budget.held, 0, 'and every page was given back');
    } finally {
      a.close();
      b.close();
    }
  });

  it('gives a page back when its consumer stops early', async () => {
    const budget = new ByteBudget({ capacity: 72 * MiB });
    const connection = new Connection({ name: 'c', kubeconfig: server.kubeconfig, parseBudget: budget });
    try {
      for await (const page of new ResourceClient(connection, configMaps).pages()) {
        assert.ok(budget.held > 0);
        void page;
        break;
      }
      assert.equal(budget.held, 0);
    } finally {
      connection.close();
    }
  });
});

describe('the parse budget of watch events', () => {
  it('holds what an event says from before it is parsed until its handler returned', async () => {
    const budget = new ByteBudget({ capacity: 72 * MiB });
    const api = new FakeApi();
    let heldInHandler = 0;
    let finish!: () => void;
    const loop = new ListWatch({
      client: api,
      logger: pino({ level: 'silent' }),
      clock: new FakeClock(),
      parseBudget: budget,
      handler: {
        onEvent: async () => {
          heldInHandler = budget.held;
          await new Promise<void>((resolve) => (finish = resolve));
        },
        beginList: () => wholeList(async () => undefined),
      },
    });
    const stop = new AbortController();
    const running = loop.start(stop.signal);
    await settle();
    api.stream.push('ADDED', 'a', '11');
    await settle();
    assert.ok(heldInHandler > 0, 'taken while the handler runs');
    assert.equal(budget.held, heldInHandler, 'still taken while the handler waits');
    finish();
    await settle();
    assert.equal(budget.held, 0, 'given back when it returned');
    stop.abort();
    await running;
  });

  it("a deletion is charged its metadata and delivered as its metadata, not a megabyte of content (an object watch's)", async () => {
    const content = Object.fromEntries(Array.from({ length: 40_000 }, (_, i) => [`k${i}`, 'v'.repeat(20)]));
    const line = (type: string) => JSON.stringify({ type, object: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'wide', namespace: 'ns', resourceVersion: type === 'DELETED' ? '12' : '11', labels: { a: 'b' } }, data: content } });
    for (const deletedAsMetadata of [true, false]) {
      const budget = new ByteBudget({ capacity: 72 * MiB });
      const api = new FakeApi();
      const seen: Array<{ change: string; held: number; object: Record<string, unknown> }> = [];
      const loop = new ListWatch({
        client: api,
        logger: pino({ level: 'silent' }),
        clock: new FakeClock(),
        parseBudget: budget,
        deletedAsMetadata,
        handler: {
          onEvent: async (change, object) => void seen.push({ change, held: budget.held, object: object as unknown as Record<string, unknown> }),
          beginList: () => wholeList(async () => undefined),
        },
      });
      const stop = new AbortController();
      const running = loop.start(stop.signal);
      await settle();
      api.stream.pushLine(line('MODIFIED'));
      api.stream.pushLine(line('DELETED'));
      // Heavy lines take turns on the event loop, and a long turn is followed by a rest (heavy-turns.ts).
      await eventually('both lines handled', async () => seen.length >= 2 || undefined, 10_000);
      assert.deepEqual(seen.map((e) => e.change), ['MODIFIED', 'DELETED']);
      assert.ok(seen[0]!.held > MiB && seen[0]!.object.data !== undefined, 'a change is read whole');
      if (deletedAsMetadata) {
        assert.ok(seen[1]!.held < 1024, `the deletion holds ${seen[1]!.held} bytes`);
        assert.deepEqual(seen[1]!.object, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'wide', namespace: 'ns', resourceVersion: '12', labels: { a: 'b' } } });
      } else assert.ok(seen[1]!.held > MiB && seen[1]!.object.data !== undefined, 'without the option (the APIBinding watch), read whole');
      stop.abort();
      await running;
    }
  });

  it("a heavy change that is relsync's own write is taken by its identity, never parsed; one that is not is parsed and said to be checked", async () => {
    const content = Object.fromEntries(Array.from({ length: 5_000 }, (_, i) => [`k${i}`, 'v'.repeat(20)]));
    // What follows the metadata is not JSON (its brackets balance): a line that were parsed would end the watch.
    const heavy = (rv: string) => `${JSON.stringify({ type: 'MODIFIED', object: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'wide', namespace: 'ns', resourceVersion: rv }, data: content } }).slice(0, -2)},"broken":[{]}}}`;
    const budget = new ByteBudget({ capacity: 72 * MiB });
    const api = new FakeApi();
    const asked: string[] = [];
    const seen: Array<{ rv: string | undefined; ownChecked: boolean | undefined }> = [];
    const versions: string[] = [];
    const loop = new ListWatch({
      client: api,
      logger: pino({ level: 'silent' }),
      clock: new FakeClock(),
      parseBudget: budget,
      handler: {
        ownWrite: async (change, object) => {
          asked.push(`${change} ${object.metadata.namespace}/${object.metadata.name}@${object.metadata.resourceVersion}`);
          return object.metadata.resourceVersion === '20';
        },
        onEvent: async (_change, object, ownChecked) => void seen.push({ rv: object.metadata.resourceVersion, ownChecked }),
        onResourceVersion: (rv) => void versions.push(rv),
        beginList: () => wholeList(async () => undefined),
      },
    });
    const stop = new AbortController();
    const running = loop.start(stop.signal);
    await settle();
    api.stream.pushLine(heavy('20'));
    api.stream.push('ADDED', 'small', '21');
    api.stream.pushLine(JSON.stringify({ type: 'MODIFIED', object: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'wide', namespace: 'ns', resourceVersion: '22' }, data: content } }));
    // Heavy lines take turns on the event loop, and a long turn is followed by a rest (heavy-turns.ts).
    await eventually('every line handled', async () => versions.length >= 4 || undefined, 10_000);
    assert.deepEqual(asked, ['MODIFIED ns/wide@20', 'MODIFIED ns/wide@22'], 'asked of heavy changes only');
    assert.deepEqual(seen, [{ rv: '21', ownChecked: false }, { rv: '22', ownChecked: true }], 'the own write was not parsed (its broken content did not end the watch)');
    assert.deepEqual(versions, ['10', '20', '21', '22'], 'the loop went on past it (10: the LIST)');
    assert.equal(api.watches.length, 1, 'no reconnect');
    stop.abort();
    await running;
  });
});
