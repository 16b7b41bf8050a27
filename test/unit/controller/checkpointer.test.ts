import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { Checkpointer } from '../../../src/controller/checkpointer.js';
import { CheckpointStore } from '../../../src/store/checkpoint-store.js';
import { openStore } from '../../../src/store/database.js';
import { FakeClock, settle } from '../../harness/fake-clock.js';

const key = { cluster: 'tenant-a', group: '', resource: 'configmaps', labelSelector: '' };
const id = (name: string) => ({ cluster: 'tenant-a', group: 'demo.relsync.dev', resource: 'databases', namespace: 'ns', name });

describe('checkpointer', () => {
  it('writes versions and pending work together, in batches, and forgets finished work', async () => {
    const opened = await openStore(join(mkdtempSync(join(tmpdir(), 'relsync-ckpt-')), 'store.db'));
    const store = new CheckpointStore(opened.db);
    const cp = new Checkpointer(store, pino({ level: 'silent' }), new FakeClock());
    cp.noteQueued(id('a'));
    cp.noteQueued(id('b'));
    cp.noteVersion(key, '10');
    cp.noteVersion(key, '11');
    assert.equal(await store.resourceVersion(key), undefined, 'nothing is written before a flush');
    await cp.flush();
    assert.equal(await store.resourceVersion(key), '11', 'only the newest version of a batch is written');
    assert.deepEqual((await store.pending()).map((p) => p.name).sort(), ['a', 'b']);
    cp.noteDone(id('a'));
    cp.noteQueued(id('c'));
    cp.noteDone(id('c')); // queued and done within one batch: never written
    await cp.flush();
    assert.deepEqual((await store.pending()).map((p) => p.name), ['b']);
    await opened.close();
  });

  it('flushes every interval on its clock while it runs, and once more when stopped', async () => {
    const opened = await openStore(join(mkdtempSync(join(tmpdir(), 'relsync-ckpt-')), 'store.db'));
    const store = new CheckpointStore(opened.db);
    const clock = new FakeClock();
    // A minute (production's is 1 s): on the real clock, no flush would happen within the test.
    const cp = new Checkpointer(store, pino({ level: 'silent' }), clock, 60_000);
    const stop = new AbortController();
    const running = cp.start(stop.signal);
    cp.noteVersion(key, '20');
    await clock.advance(59_999);
    assert.equal(await store.resourceVersion(key), undefined, 'not before the interval');
    await clock.advance(1);
    // The flush's transaction runs on real I/O: its end is waited for, no time passes on the clock.
    for (let i = 0; i < 100 && (await store.resourceVersion(key)) === undefined; i++) await settle();
    assert.equal(await store.resourceVersion(key), '20', 'flushed after the interval');
    cp.noteVersion(key, '21');
    stop.abort();
    await running;
    assert.equal(await store.resourceVersion(key), '21', 'flushed once more when stopped');
    await opened.close();
  });
});
