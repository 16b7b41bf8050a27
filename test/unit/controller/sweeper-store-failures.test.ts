// A sweep whose store fails (a full disk, here a real SQLite file at its
// max_page_count) ends as 'failed', logged, with nothing deleted, and never
// leaves the sweeper stuck: the next sweep runs (issue #35, point 5).
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import pino from 'pino';
import { Sweeper, type SweeperOptions } from '../../../src/controller/sweeper.js';
import { Metrics } from '../../../src/server/metrics.js';
import { openStore } from '../../../src/store/database.js';
import { SweepStore } from '../../../src/store/sweep-store.js';

describe('a sweep whose store fails', () => {
  it('resolves as failed on a full disk, deletes nothing, and the next sweep runs', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'relsync-sweep-full-'));
    const store = await openStore(join(dir, 'relsync.db'));
    try {
      const deletes: string[] = [];
      let runs = 0;
      const options = {
        agentName: 'unit',
        clusters: { service: { name: 'service' }, isPlatform: () => false, client: () => ({ delete: async (ns: string, name: string) => void deletes.push(`${ns}/${name}`) }) },
        resources: [],
        plan: [],
        sweeps: new SweepStore(store.db),
        // The run itself: reached only when the store took the sweep's row.
        reads: { begin: () => { runs++; throw new Error('the run began'); }, end: () => undefined },
        metrics: new Metrics(),
        logger: pino({ level: 'silent' }),
      } as unknown as SweeperOptions;
      const sweeper = new Sweeper(options);

      // Full: not one more page, and the pages it has filled with rows.
      const pages = store.sqlite.pragma('page_count', { simple: true }) as number;
      store.sqlite.pragma(`max_page_count = ${pages}`);
      const filler = store.sqlite.prepare("insert into sweeps (trigger, status, started_at, primaries_seen, objects_listed, relations_added, relations_removed, copies_repaired, copies_removed, errors) values ('schedule', 'done', ?, 0, 0, 0, 0, 0, 0, 0)");
      // Large rows, then the smallest, until not even one of those fits.
      for (const size of [500, 24, 0]) {
        assert.throws(() => {
          for (let i = 0; i < 100_000; i++) filler.run('x'.repeat(size));
        }, /full/, 'the file is full');
      }
      const first = await sweeper.sweep('schedule').catch((err: unknown) => assert.fail(`the sweep rejected: ${(err as Error).message}`));
      assert.equal(first.status, 'failed');
      assert.equal(runs, 0, 'nothing ran: no sweep without its row');
      assert.equal(sweeper.busy, false, 'not stuck as running');

      // Space again: the next sweep gets its row and runs (failing here on purpose, in its run).
      store.sqlite.pragma('max_page_count = 1073741823');
      const second = await sweeper.sweep('schedule');
      assert.equal(second.status, 'failed');
      assert.equal(runs, 1, 'the next sweep ran');
      assert.deepEqual(deletes, [], 'nothing deleted');
      const last = store.sqlite.prepare('select status, message from sweeps order by id desc limit 1').get() as { status: string; message: string };
      assert.deepEqual(last, { status: 'failed', message: 'the run began' }, 'the second sweep recorded as failed, with its reason');
    } finally {
      await store.close();
    }
  });
});
