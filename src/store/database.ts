/**
 * Opens the SQLite store: WAL mode, foreign keys on (relations cascade with
 * their primary), migrations applied. Errors say which file and what to do.
 */
import { closeSync, existsSync, mkdirSync, openSync } from 'node:fs';
import { dirname } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { Kysely, SqliteDialect } from 'kysely';
import { migrateToLatest, StoreSchemaError } from './migrations.js';
import type { Database } from './schema.js';
import { withStatementCache } from './statement-cache.js';

export interface OpenedStore {
  readonly db: Kysely<Database>;
  readonly sqlite: BetterSqlite3.Database;
  readonly path: string;
  close(): Promise<void>;
}

export interface OpenStoreOptions {
  /** Open without writing (inspect commands); migrations are not applied. */
  readonly readonly?: boolean;
}

export async function openStore(path: string, options: OpenStoreOptions = {}): Promise<OpenedStore> {
  let sqlite: BetterSqlite3.Database;
  try {
    if (!options.readonly && path !== ':memory:') {
      mkdirSync(dirname(path), { recursive: true });
      // Only relsync's user may read the store (SQLite gives -wal and -shm the same mode).
      if (!existsSync(path)) closeSync(openSync(path, 'a', 0o600));
    }
    if (options.readonly && !existsSync(path)) throw new Error('the file does not exist');
    sqlite = new BetterSqlite3(path, { readonly: options.readonly ?? false, fileMustExist: options.readonly ?? false });
    sqlite.pragma('busy_timeout = 5000');
    if (!options.readonly) {
      sqlite.pragma('journal_mode = WAL');
      sqlite.pragma('synchronous = NORMAL');
    }
    sqlite.pragma('foreign_keys = ON');
    // What relsync deletes or overwrites (content hashes, identities of deleted objects) is zeroed on disk, not left in free pages.
    if (!options.readonly) sqlite.pragma('secure_delete = ON');
    // Fails fast on a file that is not a SQLite database.
    sqlite.prepare('select count(*) from sqlite_master').get();
    if (!options.readonly) probeWritable(sqlite);
  } catch (err) {
    throw new StoreSchemaError(`cannot open store ${path}: ${(err as Error).message}`, { cause: err });
  }
  const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: withStatementCache(sqlite) }) });
  try {
    if (!options.readonly) {
      const applied = await migrateToLatest(db as Kysely<unknown>);
      // Values a migration removed (plain content hashes) must not linger in free pages or the WAL.
      if (applied.includes('0005_keyed_content_hashes')) {
        sqlite.exec('VACUUM');
        sqlite.pragma('wal_checkpoint(TRUNCATE)');
      }
    }
  } catch (err) {
    await db.destroy();
    if (err instanceof StoreSchemaError) throw new StoreSchemaError(`store ${path}: ${err.message}`, { cause: err });
    throw new StoreSchemaError(`store ${path}: ${(err as Error).message}`, { cause: err });
  }
  return { db, sqlite, path, close: () => db.destroy() };
}

/**
 * SQLite quietly opens a file it cannot write read-only, and relsync would
 * fail at its first write, long after start. A write that is rolled back
 * says so now, and leaves the file as it was.
 */
function probeWritable(sqlite: BetterSqlite3.Database): void {
  try {
    sqlite.exec('BEGIN IMMEDIATE; CREATE TABLE relsync_write_probe (x); ROLLBACK');
  } catch (err) {
    if (sqlite.inTransaction) sqlite.exec('ROLLBACK');
    if (/readonly|read-only/i.test((err as Error).message)) throw new Error('the file is read-only (check its permissions, attributes and the volume mount)', { cause: err });
    throw err;
  }
}
