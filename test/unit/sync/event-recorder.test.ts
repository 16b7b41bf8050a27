import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pino from 'pino';
import type { KubeObject } from '../../../src/core/object.js';
import { AGGREGATE_PREFIX, EventCorrelator } from '../../../src/sync/event-correlator.js';
import { EventRecorder } from '../../../src/sync/event-recorder.js';
import { MemoryClusters } from '../../harness/memory-clusters.js';
import type { Clock } from '../../../src/util/clock.js';
import { clockReading, FakeClock } from '../../harness/fake-clock.js';

const events = { group: '', resource: 'events' };
const namespaces = { group: '', resource: 'namespaces' };
const db = (name = 'orders', uid = `uid-${name}`): KubeObject => ({ apiVersion: 'demo.relsync.dev/v1alpha1', kind: 'Database', metadata: { namespace: 'shop', name, uid, resourceVersion: '7' } });

function setup(options: { clock?: Clock; maxQueuedPerCluster?: number } = {}) {
  const world = new MemoryClusters('service', ['tenant-a', 'tenant-b']);
  for (const cluster of ['tenant-a', 'tenant-b']) {
    world.put(cluster, namespaces, { metadata: { name: 'shop' } });
    world.put(cluster, namespaces, { metadata: { name: 'default' } });
  }
  const counted: string[] = [];
  const recorder = new EventRecorder({ clusters: world, agentName: 'unit', logger: pino({ level: 'silent' }), events: { inc: (l) => void counted.push(`${l.type}/${l.result}`) }, ...options });
  const list = (namespace = 'shop', cluster = 'tenant-a') => world.list(cluster, events, namespace) as Array<KubeObject & { count: number; message: string; reason: string; involvedObject: Record<string, unknown> }>;
  return { world, recorder, list, counted };
}

describe('event recorder: what client-go\'s recorder does, without waiting', () => {
  it('a repeat raises the count of the Event recorded before instead of creating another', async () => {
    const { recorder, list, world, counted } = setup();
    recorder.warn('tenant-a', db(), 'CopyConflict', 'taken');
    await recorder.idle();
    recorder.warn('tenant-a', db(), 'CopyConflict', 'taken');
    await recorder.idle();
    recorder.warn('tenant-a', db(), 'CopyConflict', 'taken');
    await recorder.idle();
    assert.equal(list().length, 1);
    assert.equal(list()[0]!.count, 3);
    assert.deepEqual(world.calls.filter((c) => c.resource === 'events').map((c) => c.verb), ['create', 'mergePatch', 'mergePatch']);
    assert.deepEqual(counted, ['Warning/created', 'Warning/counted', 'Warning/counted']);
  });

  it('repeats that meet in the queue are one write with their count', async () => {
    const { recorder, list, world } = setup();
    for (let i = 0; i < 5; i++) recorder.warn('tenant-a', db(), 'CopyConflict', 'taken');
    await recorder.idle();
    assert.equal(list()[0]!.count, 5);
    assert.equal(world.calls.filter((c) => c.resource === 'events').length, 1);
  });

  it('an error text that varies does not defeat it: from the 10th message within 10 minutes, similar Events are combined into one', async () => {
    const { recorder, list } = setup();
    for (let i = 0; i < 40; i++) {
      recorder.warn('tenant-a', db(), 'CopySyncFailed', `webhook denied the request (request id ${i})`);
      await recorder.idle();
    }
    const all = list();
    assert.equal(all.length, 10, 'nine as they came, then one combined (client-go\'s threshold)');
    const combined = all.find((e) => e.message.startsWith(AGGREGATE_PREFIX))!;
    assert.equal(combined.count, 16, 'the spam filter let 25 through: 9 + 16 combined; the 15 over it wait for the next write');
    assert.match(combined.message, /request id 24\)$/, 'the latest message written');
  });

  it('the spam filter: 25 writes of one object\'s Events at once, then one per 5 minutes; other objects are not held back', async () => {
    let now = 0;
    const { recorder, list, counted, world } = setup({ clock: clockReading(() => now) });
    for (let i = 0; i < 100; i++) {
      recorder.warn('tenant-a', db(), 'CopyConflict', 'taken');
      await recorder.idle();
    }
    recorder.warn('tenant-a', db('invoices'), 'CopyConflict', 'taken');
    await recorder.idle();
    const writes = () => world.calls.filter((c) => c.resource === 'events' && c.verb !== 'get').length;
    assert.equal(writes(), 26, '25 for orders, 1 for invoices');
    assert.equal(list().find((e) => e.involvedObject.name === 'orders')!.count, 25);
    assert.equal(list().find((e) => e.involvedObject.name === 'invoices')!.count, 1);
    assert.equal(counted.filter((c) => c === 'Warning/dropped_rate').length, 75);
    now += 299_000;
    recorder.warn('tenant-a', db(), 'CopyConflict', 'taken');
    await recorder.idle();
    assert.equal(writes(), 26, 'not before 5 minutes');
    now += 1_000;
    recorder.warn('tenant-a', db(), 'CopyConflict', 'taken');
    await recorder.idle();
    assert.equal(writes(), 27);
    assert.equal(list().find((e) => e.involvedObject.name === 'orders')!.count, 102, 'every repeat counted');
  });

  it('a slow Events API never slows the caller; what does not fit the queue is dropped and counted', async () => {
    const { recorder, world, counted, list } = setup({ maxQueuedPerCluster: 10 });
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const client = world.client.bind(world);
    world.client = (cluster, type) => {
      const c = client(cluster, type);
      if (type.resource === 'events') {
        const create = c.create.bind(c);
        c.create = async (...args) => {
          await held;
          return create(...args);
        };
      }
      return c;
    };
    const started = performance.now();
    for (let i = 0; i < 50; i++) recorder.warn('tenant-a', db(`db-${i}`), 'CopyConflict', 'taken');
    assert.ok(performance.now() - started < 50, 'recording returned at once');
    // Ten wait, the rest do not fit.
    assert.equal(counted.filter((c) => c === 'Warning/dropped_queue').length, 40);
    recorder.warn('tenant-a', db('db-5'), 'CopyConflict', 'taken');
    assert.equal(counted.filter((c) => c === 'Warning/dropped_queue').length, 40, 'a repeat of one waiting is counted there, not queued');
    // A Normal Event finds no room where Warnings fill most of the queue.
    recorder.normal('tenant-a', db('db-60'), 'Synced', 'synced');
    assert.deepEqual(counted.filter((c) => c.startsWith('Normal')), ['Normal/dropped_queue']);
    release();
    await recorder.idle();
    assert.equal(counted.filter((c) => c === 'Warning/created').length, 10);
    assert.equal(list().find((e) => e.involvedObject.name === 'db-5')?.count, 2);
  });

  it('one cluster\'s slow Events API does not delay another cluster\'s Events', async () => {
    const { recorder, world, list } = setup();
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const client = world.client.bind(world);
    world.client = (cluster, type) => {
      const c = client(cluster, type);
      if (cluster === 'tenant-a' && type.resource === 'events') {
        const create = c.create.bind(c);
        c.create = async (...args) => {
          await held;
          return create(...args);
        };
      }
      return c;
    };
    for (let i = 0; i < 50; i++) recorder.warn('tenant-a', db(`db-${i}`), 'CopyConflict', 'taken');
    recorder.warn('tenant-b', db(), 'CopyConflict', 'taken');
    for (let i = 0; i < 100 && list('shop', 'tenant-b').length === 0; i++) await new Promise((resolve) => setImmediate(resolve));
    assert.equal(list('shop', 'tenant-b').length, 1, 'written while tenant-a\'s writes hang');
    assert.equal(list('shop', 'tenant-a').length, 0);
    release();
    await recorder.idle();
    assert.equal(list('shop', 'tenant-a').length, 50);
  });

  it('an Event recorded just as the loop ends is written, not left waiting for the next one', async () => {
    for (let depth = 0; depth < 6; depth++) {
      const { recorder, world, list } = setup();
      const client = world.client.bind(world);
      let late = false;
      world.client = (cluster, type) => {
        const c = client(cluster, type);
        if (type.resource === 'events' && !late) {
          const create = c.create.bind(c);
          c.create = async (...args) => {
            const created = await create(...args);
            late = true;
            let step: Promise<unknown> = Promise.resolve();
            for (let i = 0; i < depth; i++) step = step.then(() => undefined);
            void step.then(() => recorder.warn('tenant-a', db('late'), 'CopyConflict', 'taken'));
            return created;
          };
        }
        return c;
      };
      recorder.warn('tenant-a', db(), 'CopyConflict', 'taken');
      await recorder.idle();
      await new Promise((resolve) => setTimeout(resolve, 5));
      await recorder.idle();
      assert.equal(list().length, 2, `depth ${depth}`);
    }
  });

  it('an Event that expired (deleted) is recorded anew at the next repeat', async () => {
    const { recorder, list, world } = setup();
    recorder.warn('tenant-a', db(), 'CopyConflict', 'taken');
    await recorder.idle();
    world.remove('tenant-a', events, 'shop', list()[0]!.metadata.name!);
    recorder.warn('tenant-a', db(), 'CopyConflict', 'taken');
    await recorder.idle();
    assert.equal(list().length, 1);
    assert.equal(list()[0]!.count, 1);
  });

  it('a cluster-scoped object gets its Events in the default namespace, as client-go puts them', async () => {
    const { recorder, list } = setup();
    recorder.normal('tenant-a', { apiVersion: 'demo.relsync.dev/v1alpha1', kind: 'Cluster', metadata: { name: 'big', uid: 'u-big' } }, 'Synced', 'relsync synced this object');
    await recorder.idle();
    const [event] = list('default');
    assert.equal(event?.reason, 'Synced');
    assert.deepEqual(event?.involvedObject, { apiVersion: 'demo.relsync.dev/v1alpha1', kind: 'Cluster', name: 'big', uid: 'u-big', resourceVersion: undefined });
  });

  it('a failing Events API is logged, counted, and does not stop later Events', async () => {
    const { recorder, world, list, counted } = setup();
    world.fail({ verb: 'create', cluster: 'tenant-a', resource: 'events', status: 500, reason: 'InternalError', message: 'etcd is away', times: 1 });
    recorder.warn('tenant-a', db('a'), 'CopyConflict', 'taken');
    recorder.warn('tenant-a', db('b'), 'CopyConflict', 'taken');
    await recorder.idle();
    assert.deepEqual(counted, ['Warning/failed', 'Warning/created']);
    assert.equal(list().length, 1);
  });
});

describe('event correlator', () => {
  const combined = (c: { message: string }) => c.message.startsWith(AGGREGATE_PREFIX);

  it('keeps the types and reasons of one object apart', () => {
    const c = new EventCorrelator({ maxSimilar: 3 }, new FakeClock());
    const results = ['a', 'b', 'c', 'a'].map((m) => c.correlate({ object: 'o', type: 'Warning', reason: 'R1', message: m }, 0));
    assert.deepEqual(results.map(combined), [false, false, true, true], 'from the 3rd message on, every one is combined, an earlier one too');
    assert.ok(!combined(c.correlate({ object: 'o', type: 'Warning', reason: 'R2', message: 'c' }, 0)), 'another reason is not combined with R1');
    assert.ok(!combined(c.correlate({ object: 'o', type: 'Normal', reason: 'R1', message: 'c' }, 0)), 'nor another type');
  });

  it('the window moves with each message: messages 9 minutes apart are still similar; after 10 quiet minutes they count afresh', () => {
    const c = new EventCorrelator({}, new FakeClock());
    const results = Array.from({ length: 10 }, (_, i) => c.correlate({ object: 'o', type: 'Warning', reason: 'R', message: `m${i}` }, i * 540_000));
    assert.deepEqual(results.map(combined), [...Array(9).fill(false), true]);
    assert.ok(!combined(c.correlate({ object: 'o', type: 'Warning', reason: 'R', message: 'new' }, 9 * 540_000 + 600_001)));
  });
});
