import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { Checkpointer } from '../../../src/controller/checkpointer.js';
import { CheckpointStore } from '../../../src/store/checkpoint-store.js';
import { openStore } from '../../../src/store/database.js';

const key = { cluster: 'tenant-a', group: '', resource: 'configmaps', labelSelector: '' };
const id = (name: string) => ({ cluster: 'tenant-a', group: 'demo.relsync.dev', resource: 'databases', namespace: 'ns', name });

describe('checkpointer', () => {
  it('writes versions and pending work together, in batches, and forgets finished work', async () => {
    const opened = await openStore(join(mkdtempSync(join(tmpdir(), 'relsync-ckpt-')), 'store.db'));
    const store = new CheckpointStore(opened.db);
    const cp = new Checkpointer(store, pino({ level: 'silent' }));
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
});
