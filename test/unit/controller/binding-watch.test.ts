// kcp workspaces that bind and unbind the export, as the APIBinding watch
// sees them, over a real SQLite store: the logical clusters survive a
// restart, an unbinding queues that workspace's primaries (and no other's),
// and a relist that lacks a known workspace's binding counts as an unbind.
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import pino from 'pino';
import { bindingHandler } from '../../../src/controller/binding-watch.js';
import { LogicalClusters } from '../../../src/kube/logical-clusters.js';
import type { KubeObject } from '../../../src/core/object.js';
import { openStore } from '../../../src/store/database.js';
import type { ObjectIdentity } from '../../../src/core/identity.js';
import { LogicalClusterStore } from '../../../src/store/logical-cluster-store.js';
import { RelationStore } from '../../../src/store/relation-store.js';
import { FakeClock, settle } from '../../harness/fake-clock.js';

const logger = pino({ level: 'silent' });
const binding = (cluster: string, deleting = false): KubeObject => ({
  apiVersion: 'apis.kcp.io/v1alpha1',
  kind: 'APIBinding',
  metadata: { name: 'demo.relsync.dev', annotations: { 'kcp.io/cluster': cluster }, ...(deleting ? { deletionTimestamp: '2026-12-02T00:00:00Z' } : {}) },
});
const primary = (cluster: string, name: string): ObjectIdentity => ({ cluster, group: 'demo.relsync.dev', resource: 'databases', namespace: 'default', name });

describe('APIBinding watch', () => {
  it('records bound workspaces, queues an unbound one’s primaries only, and keeps it all across a restart', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'relsync-bindings-')), 'relsync.db');
    const opened = await openStore(path);
    const store = new RelationStore(opened);
    for (const id of [primary('ws-a', 'orders'), primary('ws-b', 'orders'), primary('ws-b', 'invoices')]) {
      await store.saveReconcile({ id, uid: `${id.cluster}-${id.name}`, copy: { ...id, cluster: 'service' }, state: 'synced', message: null }, []);
    }
    const logical = await LogicalClusters.load(new LogicalClusterStore(opened.db));
    const queued: string[] = [];
    const forgotten: string[] = [];
    /** What the store's claim knowledge was told (a workspace unbound: its claims are all known; bound: they may not be), and forgets, in order. */
    const told: string[] = [];
    const forget = async (name: string) => void (forgotten.push(name), told.push(`forget ${name}`));
    // what each workspace says when asked directly
    const binds = new Set<string>();
    /** Workspaces no URL could answer for (a 404 of a path, an outage). */
    const unanswered = new Set<string>();
    const stillBound = async (name: string) => (binds.has(name) ? 'bound' : unanswered.has(name) ? 'unknown' : 'unbound') as 'bound' | 'unbound' | 'unknown';
    const relisted: string[] = [];
    const relist = async (name: string) => void relisted.push(name);
    const reserved = (name: string) => name === 'service';
    const term = new AbortController();
    const claims = { unbound: async (c: string) => void told.push(`unbound ${c}`), bound: (c: string) => void told.push(`bound ${c}`) };
    const handler = bindingHandler({ platform: 'kcp', logical, store, enqueue: (id) => queued.push(`${id.cluster}/${id.name}`), forget, stillBound, relist, reserved, logger, signal: term.signal, claims });

    await handler.onList([binding('ws-a'), binding('ws-b'), binding('service')]);
    assert.deepEqual(logical.of('kcp').sort(), ['ws-a', 'ws-b'], 'a logical cluster named like a configured cluster is refused');
    assert.equal(queued.length, 0, 'a binding seen queues nothing');
    assert.deepEqual(told, ['bound ws-a', 'bound ws-b'], 'workspaces that bind: whatever they hold may claim copies');
    told.length = 0;
    assert.deepEqual(relisted, [], 'the first LIST comes before the object watches, whose own LIST covers these');

    // A binding that leaves this URL's list is not an unbind on its own: the workspace moved to
    // another shard's URL (it says it binds), or no URL could answer (a 404 proves nothing).
    binds.add('ws-a');
    await handler.onEvent('DELETED', binding('ws-a'));
    assert.equal(logical.isUnbound('ws-a'), false, 'still bound through another URL: not unbound');
    binds.delete('ws-a');
    unanswered.add('ws-a');
    await handler.onEvent('DELETED', binding('ws-a'));
    assert.equal(logical.isUnbound('ws-a'), false, 'unknown: not unbound');
    term.abort(); // its re-check (the next test) does not run past here
    unanswered.delete('ws-a');
    assert.equal(queued.length, 0, 'no copy removed on a guess');
    assert.deepEqual(told, [], 'a workspace that may still bind: its claims stay as they were');

    await handler.onEvent('MODIFIED', binding('ws-b', true));
    assert.equal(logical.isUnbound('ws-b'), false, 'a terminating binding is still bound: kcp deletes the objects, relsync follows');
    assert.deepEqual(told, [], 'a terminating binding is not an unbind: it may be a second binding of the export, or one that orphans the objects');
    await handler.onEvent('DELETED', binding('ws-b', true));
    assert.equal(logical.isUnbound('ws-b'), true);
    assert.deepEqual(queued.sort(), ['ws-b/invoices', 'ws-b/orders']);
    assert.deepEqual(forgotten, [], 'a workspace with primaries left is kept until they are cleaned up');

    // a workspace with nothing in the store is forgotten at once
    await handler.onEvent('ADDED', binding('ws-empty'));
    assert.deepEqual(relisted, ['ws-empty'], 'a workspace that binds while the object watches run is listed');
    await handler.onEvent('DELETED', binding('ws-empty'));
    assert.deepEqual(forgotten, ['ws-empty']);
    assert.deepEqual(told, ['unbound ws-b', 'bound ws-empty', 'unbound ws-empty', 'forget ws-empty'], 'an unbind that every URL answered: the workspace\'s claims are all known, and its copies left in place decided, before it is forgotten');
    await logical.forget('ws-empty');

    // after a restart: the store still knows both, and which one is unbound
    const again = await LogicalClusters.load(new LogicalClusterStore(opened.db));
    assert.deepEqual(again.records().map((r) => `${r.name}=${r.state}`).sort(), ['ws-a=bound', 'ws-b=unbound']);

    // a relist without ws-a's binding, but ws-a says it still binds (it bound while the LIST was paged)
    queued.length = 0;
    told.length = 0;
    const restarted = bindingHandler({ platform: 'kcp', logical: again, store, enqueue: (id) => queued.push(`${id.cluster}/${id.name}`), forget, stillBound, relist, reserved, logger, claims });
    binds.add('ws-a');
    await restarted.onList([]);
    assert.equal(again.isUnbound('ws-a'), false, 'not unbound on a snapshot alone');
    assert.equal(queued.length, 0);

    // a relist without ws-a's binding, and ws-a no longer binds (it went while nobody watched)
    binds.delete('ws-a');
    await restarted.onList([]);
    assert.deepEqual(queued, ['ws-a/orders']);
    assert.equal(again.isUnbound('ws-a'), true);

    // another kcp platform's binding of the same workspace does not take it over
    const other = bindingHandler({ platform: 'kcp-2', logical: again, store, enqueue: () => assert.fail('nothing to queue'), forget, stillBound, relist, reserved, logger, claims });
    await other.onEvent('ADDED', binding('ws-a'));
    await other.onEvent('DELETED', binding('ws-a'));
    assert.equal(again.platformOf('ws-a'), 'kcp');

    // binding again: its primaries are looked at afresh
    queued.length = 0;
    told.length = 0;
    await restarted.onEvent('ADDED', binding('ws-a'));
    assert.equal(again.isUnbound('ws-a'), false);
    assert.deepEqual(queued, ['ws-a/orders']);
    assert.deepEqual(told, ['bound ws-a'], 'bound again: objects kcp kept (deletionPolicy Orphan) may claim copies the store does not know');
    await again.forget('ws-b');
    assert.deepEqual((await new LogicalClusterStore(opened.db).all()).map((r) => r.name), ['ws-a']);
    await opened.close();
  });

  it('asks again soon when no URL could answer, and unbinds once one does; a binding listed again stops it', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'relsync-bindings-recheck-')), 'relsync.db');
    const opened = await openStore(path);
    const store = new RelationStore(opened);
    await store.saveReconcile({ id: primary('ws-a', 'orders'), uid: 'u', copy: { ...primary('ws-a', 'orders'), cluster: 'service' }, state: 'synced', message: null }, []);
    const logical = await LogicalClusters.load(new LogicalClusterStore(opened.db));
    const queued: string[] = [];
    let answer: 'bound' | 'unbound' | 'unknown' = 'unknown';
    let asked = 0;
    const term = new AbortController();
    const clock = new FakeClock();
    const handler = bindingHandler({
      platform: 'kcp', logical, store, enqueue: (id) => queued.push(id.name), forget: async () => undefined,
      stillBound: async () => (asked++, answer), relist: () => undefined, reserved: () => false, logger, signal: term.signal, recheckMs: 10, clock,
      claims: { unbound: async () => undefined, bound: () => undefined },
    });
    await handler.onList([binding('ws-a'), binding('ws-b')]);
    // A virtual workspace torn down with the binding answers 404 for a moment.
    await handler.onEvent('DELETED', binding('ws-a'));
    assert.equal(logical.isUnbound('ws-a'), false);
    assert.equal(asked, 1);
    await clock.advance(9);
    assert.equal(asked, 1, 'not asked again before 10 ms');
    await clock.advance(1);
    assert.equal(asked, 2, 'asked again after 10 ms');
    await clock.advance(20);
    assert.equal(asked, 3, 'then after 20 ms more (doubling)');
    answer = 'unbound';
    await clock.advance(40);
    for (let i = 0; i < 100 && !logical.isUnbound('ws-a'); i++) await settle();
    assert.equal(logical.isUnbound('ws-a'), true, 'unbound once the platform answered');
    assert.deepEqual(queued, ['orders']);
    assert.equal(clock.pending, 0, 'no re-check left');

    // Listed again while unanswered: the re-checks stop.
    answer = 'unknown';
    await handler.onEvent('DELETED', binding('ws-b'));
    assert.equal(clock.pending, 1, 'a re-check waits');
    const before = asked;
    await handler.onEvent('ADDED', binding('ws-b'));
    assert.equal(clock.pending, 0, 'its timer is gone');
    await clock.advance(60_000);
    assert.equal(asked, before, 'not asked again once the binding is listed');
    // And none after the term ends.
    await handler.onEvent('DELETED', binding('ws-b'));
    assert.equal(clock.pending, 1);
    term.abort();
    const atAbort = asked;
    assert.equal(clock.pending, 0, 'the term\'s end took its timer');
    await clock.advance(60_000);
    assert.equal(asked, atAbort, 'not asked after the term ended');
    await opened.close();
  });
});
