// A watch event too costly to parse (an object of tiny values; on a tenant's own API server,
// anything): the loop refuses that object by the name its line says, tells its handler, and goes
// on watching after it. Before, it listed again at each such event: a tenant that changed its
// object in a loop made each change cost a LIST of the whole type (on kcp, of every workspace),
// and the LIST itself failed on the object. A line that does not say which object it is about is
// still answered with a relist. On a fake clock and a fake API (the loop's ListWatchSource port); on a real API server:
// test/e2e/parse-cap.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pino from 'pino';
import type { KubeObject } from '../../../src/core/object.js';
import { ListWatch, wholeList, type ChangeType, type ListWatchOptions } from '../../../src/kube/list-watch.js';
import { FakeClock, settle } from '../../harness/fake-clock.js';
import { FakeApi } from '../../harness/fake-list-watch-source.js';

const MiB = 1024 * 1024;

/** An event line whose object holds `junk` empty arrays (~43 bytes said per character); its metadata first or last. */
function costlyLine(type: string, name: string, resourceVersion: string, junk: number, metadataLast = false): string {
  const metadata = `"metadata":{"name":"${name}","namespace":"team","resourceVersion":"${resourceVersion}","labels":{"app":"x"},"managedFields":[{"manager":"m"}]}`;
  const spec = `"spec":{"junk":[${'[],'.repeat(junk)}[]],"note":"a \\"quoted\\" ] } string"}`;
  return `{"type":"${type}","object":{"apiVersion":"v1","kind":"ConfigMap",${metadataLast ? `${spec},${metadata}` : `${metadata},${spec}`}}}`;
}

function setup(options: Partial<ListWatchOptions> = {}) {
  const clock = new FakeClock();
  const api = new FakeApi();
  const handled: string[] = [];
  const refused: Array<{ type: ChangeType; object: KubeObject }> = [];
  const versions: string[] = [];
  let refusals = 0;
  const logs: string[] = [];
  const logger = pino({ level: 'warn' }, { write: (line: string) => void logs.push(line) });
  const loop = new ListWatch({
    client: api,
    logger,
    clock,
    watchdogMs: 10_000,
    handler: {
      onEvent: async (_type, object) => void handled.push(object.metadata.name ?? ''),
      onRefused: async (type, object) => void refused.push({ type, object }),
      onResourceVersion: (rv) => void versions.push(rv),
      beginList: () => wholeList(async () => undefined),
    },
    onRefused: () => void refusals++,
    ...options,
  });
  const stop = new AbortController();
  const running = loop.start(stop.signal);
  return { clock, api, handled, refused, versions, logs, refusals: () => refusals, end: async () => (stop.abort(), await running) };
}

describe('a watch event too costly to parse', () => {
  it('is refused by the name its line says, its handler told, and the watch goes on after it without a relist', async () => {
    const { api, handled, refused, versions, logs, refusals, end } = setup();
    await settle();
    assert.equal(api.lists, 1);
    api.stream.pushLine(costlyLine('MODIFIED', 'costly', '11', 1_200_000));
    api.stream.push('ADDED', 'after', '12');
    await settle();
    assert.deepEqual(refused, [{ type: 'MODIFIED', object: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'costly', namespace: 'team', resourceVersion: '11' } } }], 'its identity, nothing else of its metadata');
    assert.deepEqual(handled, ['after'], 'the next event is handled');
    assert.deepEqual(versions, ['10', '11', '12'], 'the watch moved past it (10: its LIST)');
    assert.equal(api.lists, 1, 'no relist');
    assert.equal(api.watches.length, 1, 'the same watch');
    assert.equal(refusals(), 1);
    const line = logs.find((l) => l.includes('"object":"team/costly"'));
    assert.ok(line, 'a log line names the object');
    assert.match(line, /"change":"MODIFIED".*would take about \d+ MiB of memory once parsed, more than 72 MiB \(limits\.parsedBytes\)/);
    await end();
  });

  it('relists when its handler cannot be told of a refused object, rather than lose the change', async () => {
    const clock = new FakeClock();
    const api2 = new FakeApi();
    const seen: string[] = [];
    const loop = new ListWatch({
      client: api2,
      logger: pino({ level: 'silent' }),
      clock,
      watchdogMs: 10_000,
      handler: { onEvent: async (_type, object) => void seen.push(object.metadata.name ?? ''), onResourceVersion: () => undefined, beginList: () => wholeList(async () => undefined) },
    });
    const stop = new AbortController();
    const running = loop.start(stop.signal);
    await settle();
    api2.stream.pushLine(costlyLine('MODIFIED', 'costly', '11', 1_200_000));
    await settle();
    await clock.advance(60_000);
    await settle();
    assert.equal(api2.lists, 2, 'listed again');
    assert.deepEqual(seen, [], 'nothing handled as if it were read');
    stop.abort();
    await running;
  });

  it('finds the metadata after the costly part too, and refuses a deletion alike', async () => {
    const { api, refused, end } = setup();
    await settle();
    api.stream.pushLine(costlyLine('DELETED', 'gone', '11', 1_200_000, true));
    await settle();
    assert.deepEqual(refused.map((r) => [r.type, r.object.metadata.name]), [['DELETED', 'gone']]);
    assert.equal(api.lists, 1);
    await end();
  });

  it('holds to limits.parsedBytes as configured', async () => {
    const { api, handled, refused, end } = setup({ maxParsedBytes: 16 * MiB });
    await settle();
    // ~300,000 empty arrays: ~37 MiB said, under the default cap, over this one.
    api.stream.pushLine(costlyLine('ADDED', 'mid', '11', 300_000));
    await settle();
    assert.deepEqual(refused.map((r) => r.object.metadata.name), ['mid']);
    assert.deepEqual(handled, []);
    await end();
  });

  it('relists when the line does not say which object it is about', async () => {
    const { clock, api, refused, end } = setup();
    await settle();
    api.stream.pushLine(`{"type":"MODIFIED","object":{"spec":[${'[],'.repeat(1_200_000)}[]]}}`);
    await settle();
    await clock.advance(1_000);
    assert.deepEqual(refused, []);
    assert.equal(api.lists, 2, 'listed again, as before');
    await end();
  });
});
