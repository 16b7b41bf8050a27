import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import { Kysely, SqliteDialect } from 'kysely';
import { preparedQuery } from '../../../src/store/prepared-query.js';

interface Db {
  things: { kind: string; name: string; size: number };
}

function database(): Kysely<Db> {
  const sqlite = new BetterSqlite3(':memory:');
  sqlite.exec("create table things (kind text, name text, size integer); insert into things values ('a', 'x', 1), ('a', 'y', 2), ('b', 'x', 3), ('a', 'x', 4)");
  return new Kysely<Db>({ dialect: new SqliteDialect({ database: sqlite }) });
}

describe('prepared queries', () => {
  it('binds each call\'s values to the SQL compiled once, constants of the query kept', async () => {
    const db = database();
    const query = preparedQuery(db, ['name', 'kind'], (p) => db.selectFrom('things').select('size').where('kind', '=', p.kind).where('size', '>', 1).where('name', '=', p.name).orderBy('size'));
    assert.deepEqual((await query({ kind: 'a', name: 'x' })).map((r) => r.size), [4]);
    assert.deepEqual((await query({ kind: 'b', name: 'x' })).map((r) => r.size), [3]);
    assert.deepEqual((await query({ kind: 'a', name: 'y' })).map((r) => r.size), [2]);
    // A value that looks like SQL is a value; so is one that looks like a placeholder.
    assert.deepEqual(await query({ kind: "a' or '1'='1", name: 'x' }), []);
    assert.deepEqual(await query({ kind: '\u0000relsync-param:name', name: 'x' }), []);
    assert.deepEqual(await query({ kind: '\u0000relsync-param:kind', name: '\u0000relsync-param:kind' }), []);
    await db.destroy();
  });

  it('refuses a parameter the query does not use (a builder that dropped it would match everything)', async () => {
    const db = database();
    assert.throws(() => preparedQuery(db, ['kind', 'name'], (p) => db.selectFrom('things').selectAll().where('kind', '=', p.kind)), /parameter "name" is not used/);
    await db.destroy();
  });
});
