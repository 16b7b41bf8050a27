import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { identityKey, type ObjectIdentity } from '../../../src/core/identity.js';
import { openStore } from '../../../src/store/database.js';
import { CopyBytesStore } from '../../../src/store/copy-bytes-store.js';
import { CopyBudget } from '../../../src/sync/copy-budget.js';
import { clockReading } from '../../harness/fake-clock.js';

const copy = (name: string): ObjectIdentity => ({ cluster: 'service', group: '', resource: 'configmaps', namespace: 'copies', name });
const src = (name: string): ObjectIdentity => ({ cluster: 'tenant-a', group: '', resource: 'configmaps', namespace: 'ns', name });

async function budgetOf(given: { bytesPerCluster: number; copiesPerCluster: number; bytes: number }) {
  const limits = { ...given, perCopy: 0 };
  const opened = await openStore(join(mkdtempSync(join(tmpdir(), 'relsync-budget-')), 'relsync.db'));
  const store = new CopyBytesStore(opened.db);
  const seen = new Map<string, { bytes: number; copies: number }>();
  let t = 0;
  const budget = new CopyBudget(limits, store, { gauge: (tenant, usage) => seen.set(tenant, { ...usage }), clock: clockReading(() => t) });
  return { budget, store, seen, later: () => (t += 60_000), close: () => opened.close() };
}

describe('CopyBudget', () => {
  it('refuses a copy that would take a tenant past its bytes, and counts a rewrite by its difference', async () => {
    const { budget, seen, close } = await budgetOf({ bytesPerCluster: 1000, copiesPerCluster: 100, bytes: 1_000_000 });
    assert.equal(await budget.refusal('a', copy('x'), 600), undefined);
    await budget.wrote('a', copy('x'), src('x'), 600);
    assert.match((await budget.refusal('a', copy('y'), 500)) ?? '', /takes? 600 bytes.*at most 1000 \(limits\.copiedBytesPerCluster\)/);
    assert.equal(await budget.refusal('a', copy('x'), 900), undefined, 'x grows to 900: 900 in all');
    assert.ok(await budget.refusal('a', copy('x'), 1001));
    assert.equal(await budget.refusal('b', copy('z'), 1000), undefined, 'another tenant has its own budget');
    assert.deepEqual(seen.get('a'), { bytes: 600, copies: 1 });
    await close();
  });

  it('lets a tenant over a lowered budget update and shrink, never grow', async () => {
    const { budget, close } = await budgetOf({ bytesPerCluster: 100, copiesPerCluster: 100, bytes: 1_000_000 });
    await budget.wrote('a', copy('x'), src('x'), 500);
    assert.equal(await budget.refusal('a', copy('x'), 500), undefined, 'unchanged');
    assert.equal(await budget.refusal('a', copy('x'), 400), undefined, 'smaller');
    assert.ok(await budget.refusal('a', copy('x'), 501), 'bigger');
    await close();
  });

  it('counts copies, and frees what a deleted copy took', async () => {
    const { budget, close } = await budgetOf({ bytesPerCluster: 1_000_000, copiesPerCluster: 2, bytes: 1_000_000 });
    await budget.wrote('a', copy('x'), src('x'), 10);
    await budget.wrote('a', copy('y'), src('y'), 10);
    assert.match((await budget.refusal('a', copy('z'), 10)) ?? '', /limits\.copiesPerCluster/);
    await budget.removed(copy('x'), src('x'));
    assert.equal(await budget.refusal('a', copy('z'), 10), undefined);
    await close();
  });

  it('holds every tenant together to limits.copiedBytes, shared fairly: one tenant that filled it does not lock another out', async () => {
    const { budget, close } = await budgetOf({ bytesPerCluster: 10_000, copiesPerCluster: 100, bytes: 2500 });
    // The hog fills the total.
    let hog = 0;
    for (let i = 0; i < 10; i++) {
      if ((await budget.refusal('hog', copy(`h-${i}`), 500)) !== undefined) break;
      await budget.wrote('hog', copy(`h-${i}`), src(`h-${i}`), 500);
      hog++;
    }
    assert.equal(hog, 5);
    assert.match((await budget.refusal('hog', copy('h-more'), 500)) ?? '', /limits\.copiedBytes\)/);
    // Another tenant still gets its share (2500 / 2), however full the total is.
    assert.equal(await budget.refusal('other', copy('o-1'), 1000), undefined);
    await budget.wrote('other', copy('o-1'), src('o-1'), 1000);
    assert.ok(await budget.refusal('other', copy('o-2'), 500), 'past its share');
    // Many workspaces: never more than twice the total in all.
    let written = 0;
    for (let ws = 0; ws < 100; ws++) {
      if ((await budget.refusal(`ws-${ws}`, copy(`c-${ws}`), 100)) !== undefined) continue;
      await budget.wrote(`ws-${ws}`, copy(`c-${ws}`), src(`c-${ws}`), 100);
      written++;
    }
    assert.ok(3500 + written * 100 <= 5000, `at most twice the total (${3500 + written * 100})`);
    await close();
  });

  it('reads the sums again from the store after a while: a count kept in memory cannot drift for good', async () => {
    const { budget, store, later, close } = await budgetOf({ bytesPerCluster: 1000, copiesPerCluster: 100, bytes: 1_000_000 });
    await budget.wrote('a', copy('x'), src('x'), 900);
    assert.ok(await budget.refusal('a', copy('y'), 500));
    // Deleted behind the budget's back (a store repaired by hand, say): seen once the kept sum expires.
    await store.delete(copy('x'), identityKey(src('x')));
    assert.ok(await budget.refusal('a', copy('y'), 500), 'still the kept sum');
    later();
    assert.equal(await budget.refusal('a', copy('y'), 500), undefined);
    await close();
  });

  it('counts copies a LIST found that the store has no row for (a lost store), before judging a new one', async () => {
    const { budget, store, close } = await budgetOf({ bytesPerCluster: 1000, copiesPerCluster: 100, bytes: 1_000_000 });
    // Written before the store was lost: the new store knows nothing of it, so a new copy would fit.
    assert.equal(await budget.refusal('a', copy('new'), 500), undefined);
    await budget.listed([{ tenant: 'a', copy: copy('old'), source: src('old'), content: 700 }]);
    assert.match((await budget.refusal('a', copy('new'), 500)) ?? '', /take 700 bytes/);
    assert.equal(await budget.refusal('a', copy('old'), 700), undefined, 'the copy found is updated as it is');
    // A row the store has stays as it is (the copy's next write puts it right).
    await budget.wrote('a', copy('old'), src('old'), 300);
    await budget.listed([{ tenant: 'a', copy: copy('old'), source: src('old'), content: 700 }]);
    assert.deepEqual(await store.of(copy('old')), { tenant: 'a', source: identityKey(src('old')), bytes: 300 });
    await close();
  });

  it('a LIST page older than a delete does not bring its row back; once a sweep listed everything, LISTs add nothing', async () => {
    const { budget, store, close } = await budgetOf({ bytesPerCluster: 1000, copiesPerCluster: 100, bytes: 1_000_000 });
    await budget.wrote('a', copy('x'), src('x'), 600);
    const page = [{ tenant: 'a', copy: copy('x'), source: src('x'), content: 600 }];
    await budget.removed(copy('x'), src('x'), true);
    await budget.listed(page);
    assert.equal(await store.of(copy('x')), undefined, 'the deleted copy is not counted again');
    assert.equal(await budget.refusal('a', copy('y'), 900), undefined);
    budget.recounted();
    await budget.listed([{ tenant: 'a', copy: copy('z'), source: src('z'), content: 600 }]);
    assert.equal(await store.of(copy('z')), undefined, 'after the recount, LISTs add no rows');
    await close();
  });

  it("reads the total once: a tenant's first copy or last one is counted, not read again", async () => {
    const opened = await openStore(join(mkdtempSync(join(tmpdir(), 'relsync-budget-')), 'relsync.db'));
    const store = new CopyBytesStore(opened.db);
    let scans = 0;
    const counting = { usage: store.usage.bind(store), of: store.of.bind(store), save: store.save.bind(store), saveMissing: store.saveMissing.bind(store), delete: store.delete.bind(store), total: () => (scans++, store.total()) };
    const budget = new CopyBudget({ bytesPerCluster: 1000, copiesPerCluster: 100, bytes: 1000, perCopy: 0 }, counting, { clock: clockReading(() => 0) });
    // Tenant b makes and deletes its only copy in a loop, each time judged against the shares.
    await budget.wrote('a', copy('x'), src('x'), 600);
    for (let i = 0; i < 5; i++) {
      assert.equal(await budget.refusal('b', copy('y'), 400), undefined, 'b within its share');
      await budget.wrote('b', copy('y'), src('y'), 400);
      await budget.removed(copy('y'), src('y'), true);
    }
    assert.equal(scans, 1, 'the total was read once');
    // And it is still right: with b's copy, the total is full; a third tenant gets its share (1000 / 3).
    await budget.wrote('b', copy('y'), src('y'), 400);
    assert.match((await budget.refusal('c', copy('z'), 400)) ?? '', /limits\.copiedBytes/);
    assert.equal(await budget.refusal('c', copy('z'), 300), undefined);
    await opened.close();
  });
});
