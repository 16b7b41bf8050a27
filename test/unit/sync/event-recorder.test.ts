import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pino from 'pino';
import type { KubeObject } from '../../../src/core/object.js';
import { AGGREGATE_PREFIX, EventCorrelator } from '../../../src/sync/event-correlator.js';
import { EventRecorder } from '../../../src/sync/event-recorder.js';
import { MemoryClusters } from '../../harness/memory-clusters.js';

const events = { group: '', resource: 'events' };
const namespaces = { group: '', resource: 'namespaces' };
const db = (name = 'orders', uid = `uid-${name}`): KubeObject => ({ apiVersion: 'demo.relsync.dev/v1alpha1', kind: 'Database', metadata: { namespace: 'shop', name, uid, resourceVersion: '7' } });

function setup(options: { now?: () => number; maxQueued?: number } = {}) {
  const world = new MemoryClusters('service', ['tenant-a']);
  world.put('tenant-a', namespaces, { metadata: { name: 'shop' } });
  world.put('tenant-a', namespaces, { metadata: { name: 'default' } });
  const counted: string[] = [];
  const recorder = new EventRecorder({ clusters: world, agentName: 'unit', logger: pino({ level: 'silent' }), events: { inc: (l) => void counted.push(`${l.type}/${l.result}`) }, ...options });
  const list = (namespace = 'shop') => world.list('tenant-a', events, namespace) as Array<KubeObject & { count: number; message: string; reason: string; involvedObject: Record<string, unknown> }>;
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

  it('an error text that varies does not defeat it: past 10 messages within 10 minutes, similar Events are combined into one', async () => {
    const { recorder, list } = setup();
    for (let i = 0; i < 40; i++) {
      recorder.warn('tenant-a', db(), 'CopySyncFailed', `webhook denied the request (request id ${i})`);
      await recorder.idle();
    }
    const all = list();
    assert.equal(all.length, 11, 'ten as they came, then one combined');
    const combined = all.find((e) => e.message.startsWith(AGGREGATE_PREFIX))!;
    assert.equal(combined.count, 15, 'the spam filter let 25 through: 10 + 15 combined');
    assert.match(combined.message, /request id 24\)$/, 'the latest message');
  });

  it('the spam filter: 25 Events of one object at once, then one per 5 minutes; other objects are not held back', async () => {
    let now = 0;
    const { recorder, list, counted } = setup({ now: () => now });
    for (let i = 0; i < 100; i++) recorder.warn('tenant-a', db(), 'CopyConflict', 'taken');
    recorder.warn('tenant-a', db('invoices'), 'CopyConflict', 'taken');
    await recorder.idle();
    assert.equal(list().find((e) => e.involvedObject.name === 'orders')!.count, 25);
    assert.equal(list().find((e) => e.involvedObject.name === 'invoices')!.count, 1);
    assert.equal(counted.filter((c) => c === 'Warning/dropped_rate').length, 75);
    now += 299_000;
    recorder.warn('tenant-a', db(), 'CopyConflict', 'taken');
    now += 1_000;
    recorder.warn('tenant-a', db(), 'CopyConflict', 'taken');
    await recorder.idle();
    assert.equal(list().find((e) => e.involvedObject.name === 'orders')!.count, 26, 'one more after 5 minutes, not before');
  });

  it('a slow Events API never slows the caller; what does not fit the queue is dropped and counted', async () => {
    const { recorder, world, counted } = setup({ maxQueued: 10 });
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
    await new Promise((resolve) => setTimeout(resolve, 20));
    recorder.warn('tenant-a', db('db-5'), 'CopyConflict', 'taken');
    assert.equal(counted.filter((c) => c === 'Warning/dropped_queue').length, 40, 'a repeat of one waiting is counted there, not queued');
    release();
    await recorder.idle();
    assert.equal(counted.filter((c) => c === 'Warning/created').length, 10);
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
  it('keeps the types and reasons of one object apart', () => {
    const c = new EventCorrelator({ maxSimilar: 2 });
    const keys = ['a', 'b', 'c'].map((m) => c.correlate({ object: 'o', type: 'Warning', reason: 'R1', message: m }, 0));
    assert.deepEqual(keys.map((k) => k.action === 'record' && k.message.startsWith(AGGREGATE_PREFIX)), [false, false, true]);
    const other = c.correlate({ object: 'o', type: 'Warning', reason: 'R2', message: 'c' }, 0);
    assert.ok(other.action === 'record' && !other.message.startsWith(AGGREGATE_PREFIX), 'another reason is not combined with R1');
    // After the window, messages are counted afresh.
    const later = c.correlate({ object: 'o', type: 'Warning', reason: 'R1', message: 'd' }, 600_001);
    assert.ok(later.action === 'record' && !later.message.startsWith(AGGREGATE_PREFIX));
  });
});
