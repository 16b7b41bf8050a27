import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import { Kysely, SqliteDialect } from 'kysely';
import { migrateToLatest, migrationsDir } from '../../../src/store/migrations.js';
import { openStore } from '../../../src/store/database.js';
import type { ObjectIdentity } from '../../../src/core/identity.js';
import { RelationStore, type KnownRows } from '../../../src/store/relation-store.js';
import { selectorKeys } from '../../../src/store/selector-index.js';
import { CopyBytesStore } from '../../../src/store/copy-bytes-store.js';
import { heavyTurns } from '../../../src/util/heavy-turns.js';
import { clockReading, FakeClock, settle } from '../../harness/fake-clock.js';

const dir = mkdtempSync(join(tmpdir(), 'relsync-store-'));
const primary = (name: string): ObjectIdentity => ({ cluster: 'tenant-a', group: 'demo.relsync.dev', resource: 'databases', namespace: 'ns', name });
const cm = (cluster: string, name: string): ObjectIdentity => ({ cluster, group: '', resource: 'configmaps', namespace: 'ns', name });

describe('relation store', () => {
  it('applies migrations to a real file in WAL mode', async () => {
    const store = await openStore(join(dir, 'wal.db'));
    assert.equal(store.sqlite.pragma('journal_mode', { simple: true }), 'wal');
    const tables = store.sqlite.prepare("select name from sqlite_master where type in ('table','view') order by name").all() as Array<{ name: string }>;
    for (const t of ['primaries', 'relations', 'watch_checkpoints', 'relations_view', 'primaries_view']) assert.ok(tables.some((r) => r.name === t), t);
    await store.close();
    const again = await openStore(join(dir, 'wal.db'));
    await again.close();
  });

  it('drops the plain content hashes of a schema-4 store, from its pages too (migration 0005)', async () => {
    // A store as relsync 0.1 left it: migrations 0001-0004 and a relation whose content hash is the
    // plain sha256 of a Secret's content (a guessable value).
    const old = mkdtempSync(join(tmpdir(), 'relsync-migrations-4-'));
    for (const f of readdirSync(migrationsDir).filter((f) => f < '0005')) copyFileSync(join(migrationsDir, f), join(old, f));
    const path = join(dir, 'schema4.db');
    const sqlite = new BetterSqlite3(path);
    sqlite.pragma('journal_mode = WAL');
    const db = new Kysely<unknown>({ dialect: new SqliteDialect({ database: sqlite }) });
    assert.deepEqual(await migrateToLatest(db, old), ['0001_initial', '0002_selectors', '0003_sweeps_and_pending_work', '0004_logical_clusters']);
    // Many rows over several pages, so that an update in place cannot happen to overwrite every old hash.
    const plains = Array.from({ length: 300 }, (_, i) => createHash('sha256').update(`{"data":{"password":"${Buffer.from(`pw${i}`).toString('base64')}"},"type":"Opaque"}`).digest('hex'));
    sqlite.prepare("insert into primaries values ('tenant-a','demo.relsync.dev','databases','ns','db','u1','service','copy-ns','db','synced',null,'2026-01-01',null)").run();
    const insert = sqlite.prepare(`insert into relations values ('tenant-a','demo.relsync.dev','databases','ns','db','creds','platform','tenant-a','','secrets','ns',?,'service','','secrets','copy-ns',?,'synced',?,null,'2026-01-01')`);
    plains.forEach((h, i) => insert.run(`creds-${i}`, `creds-${i}`, h));
    await db.destroy();
    const before = Buffer.concat([readFileSync(path), existsSync(`${path}-wal`) ? readFileSync(`${path}-wal`) : Buffer.alloc(0)]);
    assert.ok(plains.every((h) => before.includes(h)), 'the old store holds the plain hashes');

    const opened = await openStore(path);
    const rows = opened.sqlite.prepare('select content_hash, state from relations').all() as Array<{ content_hash: string | null; state: string }>;
    assert.equal(rows.length, 300, 'the relations stay');
    assert.ok(rows.every((r) => r.content_hash === null && r.state === 'synced'), 'their hashes go');
    await opened.close();
    const after = Buffer.concat([readFileSync(path), existsSync(`${path}-wal`) ? readFileSync(`${path}-wal`) : Buffer.alloc(0)]);
    assert.deepEqual(plains.filter((h) => after.includes(h)).length, 0, 'no trace of a plain hash in the file or its WAL');
  });

  it('keeps a schema-5 store\'s rows and knows none of their versions (migration 0006): each primary is reconciled once', async () => {
    const old = mkdtempSync(join(tmpdir(), 'relsync-migrations-5-'));
    for (const f of readdirSync(migrationsDir).filter((f) => f < '0006')) copyFileSync(join(migrationsDir, f), join(old, f));
    const path = join(dir, 'schema5.db');
    const sqlite = new BetterSqlite3(path);
    const db = new Kysely<unknown>({ dialect: new SqliteDialect({ database: sqlite }) });
    assert.equal((await migrateToLatest(db, old)).at(-1), '0005_keyed_content_hashes');
    sqlite.prepare("insert into primaries values ('tenant-a','demo.relsync.dev','databases','ns','db','u1','service','copy-ns','db','synced',null,'2026-01-01','2026-01-02')").run();
    sqlite.prepare("insert into relations values ('tenant-a','demo.relsync.dev','databases','ns','db','config','platform','tenant-a','','configmaps','ns','c','service','','configmaps','copy-ns','c','synced','h1',null,'2026-01-02')").run();
    await db.destroy();

    const opened = await openStore(path);
    const store = new RelationStore(opened);
    const record = await store.primary(primary('db'));
    assert.deepEqual({ uid: record?.uid, state: record?.state, lastSyncedAt: record?.lastSyncedAt, versions: record?.versions }, { uid: 'u1', state: 'synced', lastSyncedAt: '2026-01-02', versions: null });
    const [relation] = await store.relationsOf(primary('db'));
    assert.deepEqual({ contentHash: relation?.contentHash, versions: relation?.versions }, { contentHash: 'h1', versions: null });
    // What a complete sync stores reads back; a state that is not one forgets it.
    const versions = { primary: '10', copy: '11', config: 'f' };
    await store.saveReconcile({ id: primary('db'), uid: 'u1', copy: record!.copy, state: 'synced', message: null, versions }, [{ ...relation!, versions: { source: '7', destination: '' } }]);
    assert.deepEqual((await store.primary(primary('db')))?.versions, versions);
    assert.deepEqual((await store.relationsOf(primary('db')))[0]?.versions, { source: '7', destination: '' });
    await store.setPrimaryState(primary('db'), 'error', 'cannot write');
    assert.equal((await store.primary(primary('db')))?.versions, null);
    await opened.close();
  });

  it('keeps a schema-6 store\'s primaries with copies of their own type (migration 0007), and finds a copy of another type by that type only', async () => {
    const old = mkdtempSync(join(tmpdir(), 'relsync-migrations-6-'));
    for (const f of readdirSync(migrationsDir).filter((f) => f < '0007')) copyFileSync(join(migrationsDir, f), join(old, f));
    const path = join(dir, 'schema6.db');
    const sqlite = new BetterSqlite3(path);
    const db = new Kysely<unknown>({ dialect: new SqliteDialect({ database: sqlite }) });
    assert.equal((await migrateToLatest(db, old)).at(-1), '0006_synced_versions');
    sqlite.prepare("insert into primaries values ('tenant-a','demo.relsync.dev','databases','ns','db','u1','service','copy-ns','db','synced',null,'2026-01-01','2026-01-02','5','6','f')").run();
    await db.destroy();

    const opened = await openStore(path);
    const store = new RelationStore(opened);
    const copy = { cluster: 'service', group: 'demo.relsync.dev', resource: 'databases', namespace: 'copy-ns', name: 'db' };
    const record = await store.primary(primary('db'));
    assert.deepEqual({ copy: record?.copy, versions: record?.versions }, { copy, versions: { primary: '5', copy: '6', config: 'f' } }, 'a copy of the primary\'s own type, as before');
    assert.equal((await store.primaryByCopy(copy))?.uid, 'u1');
    assert.equal(await store.accounts(primary('db'), copy), true);

    // A primary copied as another type: routed and accounted for by the copy's type, never by the primary's.
    const projected = { ...copy, group: 'service.example.com', resource: 'stores', name: 'other' };
    await store.saveReconcile({ id: primary('other'), uid: 'u2', copy: projected, state: 'synced', message: null }, []);
    assert.deepEqual((await store.primary(primary('other')))?.copy, projected);
    assert.equal((await store.primaryByCopy(projected))?.uid, 'u2');
    assert.equal(await store.primaryByCopy({ ...projected, group: 'demo.relsync.dev', resource: 'databases' }), undefined);
    assert.equal(await store.accounts(primary('other'), projected), true);
    assert.equal(await store.accounts(primary('other'), { ...projected, group: 'demo.relsync.dev', resource: 'databases' }), false, 'an object of the primary\'s type there is not its copy');
    assert.deepEqual((await store.primariesByCopyType('service', 'service.example.com', 'stores')).map((p) => [p.id.name, p.copy.resource]), [['other', 'stores']]);
    await opened.close();
  });

  it('cuts a schema-7 store\'s long messages once (migration 0008), and stores no long message since', async () => {
    // A store written before messages were capped: a tenant's 2 MB reference value quoted whole.
    const old = mkdtempSync(join(tmpdir(), 'relsync-migrations-7-'));
    for (const f of readdirSync(migrationsDir).filter((f) => f < '0008')) copyFileSync(join(migrationsDir, f), join(old, f));
    const path = join(dir, 'schema7.db');
    const sqlite = new BetterSqlite3(path);
    const db = new Kysely<unknown>({ dialect: new SqliteDialect({ database: sqlite }) });
    assert.equal((await migrateToLatest(db, old)).at(-1), '0007_copy_types');
    const huge = `rule config: source name "${'x'.repeat(2_000_000)}" is 2000000 characters long (at most 253)`;
    sqlite.prepare("insert into primaries values ('tenant-a','demo.relsync.dev','databases','ns','db','u1','service','copy-ns','db','error',?,'2026-01-01','2026-01-02',null,null,null,'demo.relsync.dev','databases')").run(huge);
    sqlite.prepare("insert into primaries values ('tenant-a','demo.relsync.dev','databases','ns','ok','u2','service','copy-ns','ok','error','short','2026-01-01','2026-01-02',null,null,null,'demo.relsync.dev','databases')").run();
    sqlite.prepare("insert into relations values ('tenant-a','demo.relsync.dev','databases','ns','db','config','platform','tenant-a','','configmaps','ns','c','service','','configmaps','copy-ns','c','error',null,?,'2026-01-02',null,null)").run(huge);
    await db.destroy();

    const opened = await openStore(path);
    const store = new RelationStore(opened);
    const message = (await store.primary(primary('db')))?.message ?? '';
    assert.ok(message.length < 1100, `the stored message is cut (${message.length} characters)`);
    assert.match(message, /^rule config: source name "x+… \(\d+ characters\)$/);
    assert.equal((await store.primary(primary('ok')))?.message, 'short', 'a short message is kept as it is');
    assert.ok(((await store.relationsOf(primary('db')))[0]?.message ?? '').length < 1100, 'the relation\'s message too');
    await store.setPrimaryState(primary('ok'), 'error', huge);
    assert.ok(((await store.primary(primary('ok')))?.message ?? '').length < 1100, 'a long message written since is cut');
    await store.saveReconcile({ id: primary('ok'), uid: 'u2', copy: { ...primary('ok'), cluster: 'service', namespace: 'copy-ns' }, state: 'error', message: huge }, []);
    assert.ok(((await store.primary(primary('ok')))?.message ?? '').length < 1100, 'and through a reconcile\'s save');
    await opened.close();
  });

  it('opens a schema-8 store with its rows (migration 0009): no copy is charged until written, then counted per tenant', async () => {
    const old = mkdtempSync(join(tmpdir(), 'relsync-migrations-8-'));
    for (const f of readdirSync(migrationsDir).filter((f) => f < '0009')) copyFileSync(join(migrationsDir, f), join(old, f));
    const path = join(dir, 'schema8.db');
    const sqlite = new BetterSqlite3(path);
    const db = new Kysely<unknown>({ dialect: new SqliteDialect({ database: sqlite }) });
    assert.equal((await migrateToLatest(db, old)).at(-1), '0008_capped_messages');
    sqlite.prepare("insert into primaries values ('tenant-a','demo.relsync.dev','databases','ns','db','u1','service','copy-ns','db','synced',null,'2026-01-01','2026-01-02',null,null,null,'demo.relsync.dev','databases')").run();
    await db.destroy();

    const opened = await openStore(path);
    const store = new RelationStore(opened);
    assert.equal((await store.primary(primary('db')))?.uid, 'u1', 'the rows are kept');
    const bytes = new CopyBytesStore(opened.db);
    assert.deepEqual(await bytes.usage('tenant-a'), { bytes: 0, copies: 0 });
    const copy = { cluster: 'service', group: 'demo.relsync.dev', resource: 'databases', namespace: 'copy-ns', name: 'db' };
    await bytes.save(copy, 'tenant-a', 'src-1', 1234);
    await bytes.save({ ...copy, name: 'other' }, 'tenant-b', 'src-2', 10);
    assert.deepEqual(await bytes.usage('tenant-a'), { bytes: 1234, copies: 1 });
    assert.deepEqual(await bytes.usage(), { bytes: 1244, copies: 2 });
    await bytes.delete(copy, 'src-other');
    assert.deepEqual(await bytes.usage('tenant-a'), { bytes: 1234, copies: 1 }, 'another source\'s removal keeps the row');
    await bytes.delete(copy, 'src-1');
    assert.deepEqual(await bytes.usage('tenant-a'), { bytes: 0, copies: 0 });
    await opened.close();
  });

  it('writes a reconcile of many relation rows at its turn on the event loop, one of few at once', async () => {
    const opened = await openStore(join(dir, 'turns.db'));
    const store = new RelationStore(opened);
    const relation = (name: string) => ({ ruleId: 'cfg', origin: 'platform' as const, source: cm('tenant-a', name), destination: { ...cm('service', name), namespace: 'copy-ns' }, state: 'synced' as const, contentHash: 'h', message: null });
    const save = (name: string, count: number) => store.saveReconcile({ id: primary(name), uid: name, copy: { ...primary(name), cluster: 'service' }, state: 'synced', message: null }, Array.from({ length: count }, (_, i) => relation(`${name}-${i}`)));
    const before = heavyTurns.turnsGranted;
    await save('few', 3);
    assert.equal(heavyTurns.turnsGranted, before, 'three rows: at once');
    await save('many', 500);
    assert.equal(heavyTurns.turnsGranted, before + 1, 'five hundred rows: at a turn');
    assert.equal((await store.relationsOf(primary('many'))).length, 500);
    await opened.close();
  });

  it('routes by source and by destination through the store, and cascades on delete', async () => {
    const opened = await openStore(join(dir, 'routing.db'));
    const store = new RelationStore(opened);
    const relation = (source: ObjectIdentity) => ({ ruleId: 'cfg', origin: 'platform' as const, source, destination: { ...source, cluster: 'service', namespace: 'copy-ns' }, state: 'synced' as const, contentHash: 'h', message: null });
    await store.saveReconcile({ id: primary('one'), uid: 'u1', copy: { ...primary('one'), cluster: 'service' }, state: 'synced', message: null }, [relation(cm('tenant-a', 'shared'))]);
    await store.saveReconcile({ id: primary('two'), uid: 'u2', copy: { ...primary('two'), cluster: 'service' }, state: 'synced', message: null }, [relation(cm('tenant-a', 'shared')), relation(cm('tenant-a', 'own'))]);

    assert.deepEqual((await store.ownersOf(cm('tenant-a', 'shared'))).map((p) => p.name).sort(), ['one', 'two']);
    assert.deepEqual((await store.ownersOf({ ...cm('service', 'own'), namespace: 'copy-ns' })).map((p) => p.name), ['two'], 'the copy routes to its owner');
    assert.deepEqual(await store.ownersOf(cm('tenant-b', 'shared')), [], 'another tenant\'s same-named object has no owner');
    const sharedCopy = { ...cm('service', 'shared'), namespace: 'copy-ns' };
    assert.equal(await store.otherClaimsOn(sharedCopy, cm('tenant-a', 'shared'), primary('one')), 1, 'two still copies the same source there');
    assert.equal(await store.otherClaimsOn(sharedCopy, cm('tenant-b', 'shared'), primary('one')), 0, 'a relation of another source to the same destination is no claim on this copy');
    assert.equal(await store.accounts(cm('tenant-a', 'shared'), sharedCopy), true);
    assert.equal(await store.accounts(cm('tenant-b', 'shared'), sharedCopy), false, 'a copy is accounted for only as the copy of the source its marks name');
    assert.equal(await store.accounts(primary('one'), { ...primary('one'), cluster: 'service' }), true, 'a primary accounts for its copy');

    // a reconcile that no longer resolves a relation drops its row
    await store.saveReconcile({ id: primary('two'), uid: 'u2', copy: { ...primary('two'), cluster: 'service' }, state: 'synced', message: null }, [relation(cm('tenant-a', 'shared'))]);
    assert.deepEqual(await store.ownersOf(cm('tenant-a', 'own')), []);

    await store.deletePrimary(primary('one'));
    assert.deepEqual((await store.ownersOf(cm('tenant-a', 'shared'))).map((p) => p.name), ['two'], 'relations cascade with their primary');
    assert.deepEqual(await store.counts(), { primaries: { synced: 1 }, relations: { synced: 1 } });
    await opened.close();
  });

  it('writes a reconcile that found nothing new as a batched "last synced" only, and every change in full', async () => {
    const opened = await openStore(join(dir, 'unchanged.db'));
    let clock = new Date('2026-12-02T10:00:00Z');
    // The time of day the store writes, set by the test (the touch batch's one-second timer stays the system's).
    const store = new RelationStore(opened, clockReading(() => clock.getTime()));
    const relation = (hash: string) => ({ ruleId: 'cfg', origin: 'platform' as const, source: cm('tenant-a', 'cfg'), destination: cm('service', 'cfg'), state: 'synced' as const, contentHash: hash, message: null });
    const record = { id: primary('one'), uid: 'u1', copy: { ...primary('one'), cluster: 'service' }, state: 'synced' as const, message: null };
    const selector = { ruleId: 'sel', scope: { cluster: 'tenant-a', group: '', resource: 'configmaps', namespace: 'ns' }, selector: { requirements: [{ key: 'app', operator: 'In' as const, values: ['one'] }] } };
    const rows = () => opened.sqlite.prepare('select content_hash, last_synced_at from relations').all() as Array<{ content_hash: string; last_synced_at: string }>;
    const changes = () => (opened.sqlite.prepare('select total_changes() as n').get() as { n: number }).n;
    await store.saveReconcile(record, [relation('h1')], [selector]);
    const first = rows();

    clock = new Date('2026-12-02T10:05:00Z');
    const before = changes();
    await store.saveReconcile(record, [relation('h1')], [selector]);
    assert.equal(changes(), before, 'the same outcome writes no row at once');
    assert.deepEqual(rows(), first);
    await store.flushTouches();
    assert.equal(changes(), before + 2, 'one primary row and its one synced relation, in the batch');
    assert.equal(rows()[0]!.last_synced_at, '2026-12-02T10:05:00.000Z', '"last synced" moves in the batch');
    assert.equal((await store.primary(primary('one')))?.lastSyncedAt, '2026-12-02T10:05:00.000Z');

    // Anything different is saved in full: content, a selector, the state.
    await store.saveReconcile(record, [relation('h2')], [selector]);
    assert.equal(rows()[0]!.content_hash, 'h2');
    await store.saveReconcile(record, [relation('h2')], [{ ...selector, selector: { requirements: [{ key: 'app', operator: 'In', values: ['two'] }] } }]);
    assert.deepEqual((await store.selectorsOf(primary('one'))).map((x) => x.selector), ['app=two']);
    await store.saveReconcile({ ...record, state: 'error', message: 'broken' }, [relation('h2')], []);
    assert.equal((await store.primary(primary('one')))?.state, 'error');
    assert.deepEqual(await store.selectorsOf(primary('one')), []);
    await opened.close();
  });

  it('writes only the difference from the rows a reconcile knows, and ends with exactly the rows a full write gives', async () => {
    const rowsOf = (opened: { sqlite: BetterSqlite3.Database }) => ({
      primaries: opened.sqlite.prepare('select * from primaries order by name').all(),
      relations: opened.sqlite.prepare('select * from relations order by rule_id, source_name').all(),
      selectors: opened.sqlite.prepare('select * from selectors order by rule_id').all(),
      terms: opened.sqlite.prepare('select * from selector_terms order by rule_id, label_value').all(),
    });
    const id = primary('diffed');
    const row = (state: 'synced' | 'error', versions?: { primary: string; copy: string; config: string }) => ({ id, uid: 'u1', copy: { ...id, cluster: 'service' }, state, message: state === 'error' ? 'boom' : null, versions });
    const rel = (ruleId: string, name: string, state: 'pending' | 'synced', hash: string | null, dest = name) =>
      ({ ruleId, origin: 'platform' as const, source: cm('tenant-a', name), destination: cm('service', dest), state, contentHash: hash, message: null, versions: state === 'synced' ? { source: '1', destination: '2' } : undefined });
    const sel = (value: string) => ({ ruleId: 'extra', scope: { cluster: 'tenant-a', group: '', resource: 'configmaps', namespace: 'ns' }, selector: { requirements: [{ key: 'app', operator: 'In' as const, values: [value] }] } });
    // A new primary's three saves (names, what selectors found, the outcome), then a reconcile that
    // drops one relation, moves a destination, changes a selector and fails.
    const saves = [
      { primary: row('synced'), relations: [rel('config', 'a', 'pending', null)], selectors: [sel('one')] },
      { primary: row('synced'), relations: [rel('config', 'a', 'pending', null), rel('extra', 'b', 'pending', null)], selectors: [sel('one')] },
      { primary: row('synced', { primary: '5', copy: '6', config: 'f' }), relations: [rel('config', 'a', 'synced', 'h1'), rel('extra', 'b', 'synced', 'h2')], selectors: [sel('one')] },
      { primary: row('error'), relations: [rel('config', 'a', 'synced', 'h1', 'a-moved'), rel('extra', 'c', 'pending', null)], selectors: [sel('two')] },
    ];
    const clock = new Date('2026-12-05T00:00:00Z');
    const diffed = await openStore(join(dir, 'diffed.db'));
    const full = await openStore(join(dir, 'full.db'));
    const byDiff = new RelationStore(diffed, clockReading(() => clock.getTime()));
    const byFull = new RelationStore(full, clockReading(() => clock.getTime()));
    let known: KnownRows | undefined;
    for (const [i, save] of saves.entries()) {
      clock.setTime(clock.getTime() + 1000);
      await byDiff.saveReconcile(save.primary, save.relations, save.selectors, known);
      await byFull.saveReconcile(save.primary, save.relations, save.selectors);
      known = { primary: save.primary, relations: save.relations, selectorKeys: selectorKeys(save.selectors) };
      assert.deepEqual(rowsOf(diffed), rowsOf(full), `after save ${i + 1}`);
    }
    assert.deepEqual((rowsOf(diffed).relations as Array<{ dest_name: string }>).map((r) => r.dest_name), ['a-moved', 'c']);
    assert.deepEqual(await byDiff.selectorOwners({ cluster: 'tenant-a', group: '', resource: 'configmaps', namespace: 'ns' }, { app: 'two' }), [id]);
    // KnownRows that the store no longer holds (the primary was forgotten meanwhile): the next
    // outcome is written in full, never as a difference from rows that are not there.
    await byDiff.deletePrimary(id);
    await byDiff.saveReconcile(row('synced'), saves[3]!.relations, saves[3]!.selectors, known);
    assert.equal((rowsOf(diffed).relations as unknown[]).length, 2);
    assert.equal((rowsOf(diffed).selectors as unknown[]).length, 1);
    await diffed.close();
    await full.close();
  });

  it('moves "last synced" of many primaries in one batch, each to its own time, never backwards, and only where synced', async () => {
    const opened = await openStore(join(dir, 'touches.db'));
    let clock = new Date('2026-12-02T10:00:00Z');
    const store = new RelationStore(opened, clockReading(() => clock.getTime()));
    const names = Array.from({ length: 450 }, (_, i) => `p${i}`);
    for (const [i, name] of names.entries()) {
      const state = i % 10 === 0 ? ('error' as const) : ('synced' as const);
      await store.saveReconcile({ id: primary(name), uid: name, copy: { ...primary(name), cluster: 'service' }, state, message: null }, [
        { ruleId: 'cfg', origin: 'platform', source: cm('tenant-a', name), destination: cm('service', name), state: 'synced', contentHash: 'h', message: null },
      ]);
    }
    // A later time was written by a full save: a touch with an earlier one must not move it back.
    opened.sqlite.prepare("update primaries set last_synced_at = '2030-01-01T00:00:00.000Z' where name = 'p1'").run();
    const touches = new Map(names.map((name, i) => [name, new Date(Date.UTC(2026, 11, 3, 0, 0, i)).toISOString()]));
    for (const [name, at] of touches) {
      clock = new Date(at);
      store.confirmSynced(primary(name));
    }
    await store.flushTouches();
    const rows = opened.sqlite.prepare('select name, state, last_synced_at from primaries').all() as Array<{ name: string; state: string; last_synced_at: string | null }>;
    for (const row of rows) {
      const expected = row.name === 'p1' ? '2030-01-01T00:00:00.000Z' : row.state === 'synced' ? touches.get(row.name) : null;
      assert.equal(row.last_synced_at, expected, row.name);
    }
    const relationTimes = opened.sqlite.prepare('select primary_name as name, last_synced_at as at from relations').all() as Array<{ name: string; at: string }>;
    assert.equal(relationTimes.length, 450);
    for (const r of relationTimes) assert.equal(r.at, touches.get(r.name), `relation of ${r.name}: its own primary's time`);
    await opened.close();
  });

  it('writes a batch of "last synced" times a second after its first touch, on the store\'s clock', async () => {
    const opened = await openStore(join(dir, 'touch-timer.db'));
    const clock = new FakeClock(Date.parse('2026-12-02T10:00:00Z'));
    const store = new RelationStore(opened, clock);
    await store.saveReconcile({ id: primary('t'), uid: 't', copy: { ...primary('t'), cluster: 'service' }, state: 'synced', message: null }, []);
    const lastSynced = () => (opened.sqlite.prepare("select last_synced_at as at from primaries where name = 't'").get() as { at: string }).at;
    await clock.advance(60_000);
    store.confirmSynced(primary('t'));
    await clock.advance(999);
    assert.equal(lastSynced(), '2026-12-02T10:00:00.000Z', 'not written before the second');
    await clock.advance(1);
    // The batch's transaction runs on real I/O: its end is waited for, no time passes on the clock.
    for (let i = 0; i < 100 && lastSynced() === '2026-12-02T10:00:00.000Z'; i++) await settle();
    assert.equal(lastSynced(), '2026-12-02T10:01:00.000Z', 'written at 1 s, with the time of the touch');
    await opened.close();
  });

  it('forgets the primaries of types no longer configured, with their relations, and says how many', async () => {
    const opened = await openStore(join(dir, 'forget.db'));
    const store = new RelationStore(opened);
    const rel = (name: string) => ({ ruleId: 'cfg', origin: 'platform' as const, source: cm('tenant-a', name), destination: cm('service', name), state: 'synced' as const, contentHash: 'h', message: null });
    const other = (name: string): ObjectIdentity => ({ ...primary(name), group: 'old.relsync.dev', resource: 'caches' });
    await store.saveReconcile({ id: primary('kept'), uid: 'k', copy: { ...primary('kept'), cluster: 'service' }, state: 'synced', message: null }, [rel('a')]);
    await store.saveReconcile({ id: other('gone'), uid: 'g', copy: { ...other('gone'), cluster: 'service' }, state: 'synced', message: null }, [rel('b'), rel('c')]);
    assert.deepEqual(await store.forgetPrimariesOtherThan([{ group: 'demo.relsync.dev', resource: 'databases' }]), { primaries: 1, relations: 2 });
    assert.deepEqual(await store.counts(), { primaries: { synced: 1 }, relations: { synced: 1 } });
    await opened.close();
  });

  it('refuses a store written by a newer relsync, and leaves it unchanged', async () => {
    const path = join(dir, 'newer.db');
    (await openStore(path)).close();
    const raw = new BetterSqlite3(path);
    const applied = (raw.prepare('select count(*) as n from kysely_migration').get() as { n: number }).n;
    raw.prepare("insert into kysely_migration (name, timestamp) values ('9999_from_the_future', '2030-01-01')").run();
    raw.close();
    await assert.rejects(openStore(path), /written by a newer relsync.*9999_from_the_future/);
    const check = new BetterSqlite3(path);
    assert.equal((check.prepare('select count(*) as n from kysely_migration').get() as { n: number }).n, applied + 1, 'no migration was applied or removed');
    check.close();
  });

  it('says clearly when the file is not a database', async () => {
    const path = join(dir, 'garbage.db');
    const { writeFileSync } = await import('node:fs');
    writeFileSync(path, 'this is not sqlite'.repeat(100));
    await assert.rejects(openStore(path), /cannot open store .*garbage\.db: file is not a database/);
  });

  it('refuses a read-only store file at start, and leaves it as it was', async () => {
    const path = join(dir, 'read-only.db');
    await (await openStore(path)).close();
    const before = readFileSync(path);
    // root ignores file modes; the immutable attribute stops root too
    const root = process.getuid?.() === 0;
    if (root) execFileSync('chattr', ['+i', path]);
    else chmodSync(path, 0o400);
    try {
      await assert.rejects(openStore(path), /cannot open store .*read-only\.db: the file is read-only/);
    } finally {
      if (root) execFileSync('chattr', ['-i', path]);
      else chmodSync(path, 0o600);
    }
    assert.deepEqual(readFileSync(path), before, 'the file is unchanged');
  });
});
