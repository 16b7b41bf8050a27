/**
 * Migrations are plain SQL files in `migrations/` (`0001_initial.sql`, ...),
 * applied in name order by kysely's Migrator, which records them in
 * `kysely_migration`. A store that has a migration this build does not know
 * was written by a newer relsync: opening it is an error, never a downgrade.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Migrator, sql, type Kysely, type Migration, type MigrationProvider } from 'kysely';

export const migrationsDir = fileURLToPath(new URL('../../../migrations', import.meta.url));

export class SqlFileMigrationProvider implements MigrationProvider {
  constructor(private readonly dir: string = migrationsDir) {}

  async getMigrations(): Promise<Record<string, Migration>> {
    const migrations: Record<string, Migration> = {};
    for (const file of readdirSync(this.dir).filter((f) => f.endsWith('.sql')).sort()) {
      const text = readFileSync(join(this.dir, file), 'utf8');
      migrations[file.replace(/\.sql$/, '')] = {
        async up(db) {
          for (const statement of splitStatements(text)) await sql.raw(statement).execute(db);
        },
      };
    }
    return migrations;
  }
}

/** Splits a SQL file on top-level semicolons (the files hold no triggers or string literals with `;`). */
function splitStatements(text: string): string[] {
  return text
    .split('\n')
    .filter((line) => !line.trim().startsWith('--'))
    .join('\n')
    .split(';')
    .map((s) => s.trim())
    .filter(Boolean);
}

export class StoreSchemaError extends Error {
  override name = 'StoreSchemaError';
}

export async function migrateToLatest(db: Kysely<unknown>, dir: string = migrationsDir): Promise<string[]> {
  if (!existsSync(dir)) throw new StoreSchemaError(`migrations folder ${dir} is missing from this installation`);
  const provider = new SqlFileMigrationProvider(dir);
  const known = new Set(Object.keys(await provider.getMigrations()));
  const applied = await appliedMigrations(db);
  const unknown = applied.filter((m) => !known.has(m));
  if (unknown.length > 0) {
    throw new StoreSchemaError(
      `the store was written by a newer relsync (it has migration(s) ${unknown.join(', ')} that this build does not know); ` +
        'upgrade relsync or point it at another store file; the store was not changed',
    );
  }
  const { error, results } = await new Migrator({ db, provider }).migrateToLatest();
  if (error) throw new StoreSchemaError(`store migration failed: ${(error as Error).message}`, { cause: error });
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}

async function appliedMigrations(db: Kysely<unknown>): Promise<string[]> {
  const exists = await sql<{ n: number }>`select count(*) as n from sqlite_master where type = 'table' and name = 'kysely_migration'`.execute(db);
  if (!exists.rows[0]?.n) return [];
  const rows = await sql<{ name: string }>`select name from kysely_migration order by name`.execute(db);
  return rows.rows.map((r) => r.name);
}
