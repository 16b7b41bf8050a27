/**
 * "Last synced" times in batches. Most reconciles (every one of a sweep
 * with nothing to do) find what the store already says: then only those
 * times move, and writing each in a transaction of its own would make a
 * sweep of 10,000 primaries 10,000 transactions. They are gathered and
 * written together: at 500 pending, after a second, and when asked (sweeps,
 * shutdown).
 */
import { sql, type Kysely } from 'kysely';
import { columns, identityKey, type IdentityColumns, type ObjectIdentity } from '../core/identity.js';
import { preparedQuery, type PreparedQuery } from './prepared-query.js';
import type { Database } from './schema.js';

const primaryColumns = ['cluster', 'group', 'resource', 'namespace', 'name'] as const;
const relationColumns = ['primary_cluster', 'primary_group', 'primary_resource', 'primary_namespace', 'primary_name'] as const;

export class TouchBatcher {
  private touched = new Map<string, { id: ObjectIdentity; at: string }>();
  private timer: NodeJS.Timeout | undefined;

  /** Built once (prepared-query.ts): a sweep with nothing to do runs them for every primary. */
  private readonly touchPrimary: PreparedQuery<IdentityColumns<''> & { at: string }, unknown>;
  private readonly touchRelations: PreparedQuery<IdentityColumns<'primary_'> & { at: string }, unknown>;

  constructor(private readonly db: Kysely<Database>) {
    // Never backwards: a full save since then wrote a later time.
    this.touchPrimary = preparedQuery(db, [...primaryColumns, 'at'], (p) =>
      db.updateTable('primaries').set({ last_synced_at: sql<string>`max(coalesce(last_synced_at, ''), ${p.at})` }).where((eb) => eb.and(primaryColumns.map((c) => eb(c, '=', p[c])))).where('state', '=', 'synced'),
    );
    this.touchRelations = preparedQuery(db, [...relationColumns, 'at'], (p) =>
      db.updateTable('relations').set({ last_synced_at: sql<string>`max(coalesce(last_synced_at, ''), ${p.at})` }).where((eb) => eb.and(relationColumns.map((c) => eb(c, '=', p[c])))).where('state', '=', 'synced'),
    );
  }

  /** Moves a primary's "last synced" (and its synced relations') to `at`, soon. */
  touch(id: ObjectIdentity, at: string): void {
    this.touched.set(identityKey(id), { id, at });
    if (this.touched.size >= 500) void this.flush();
    else this.timer ??= setTimeout(() => void this.flush(), 1000).unref();
  }

  /** Writes the pending times in one transaction. */
  async flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.touched.size === 0) return;
    const batch = this.touched;
    this.touched = new Map();
    try {
      await this.db.transaction().execute(async (trx) => {
        for (const { id, at } of batch.values()) {
          await this.touchPrimary({ ...columns('', id), at }, trx);
          await this.touchRelations({ ...columns('primary_', id), at }, trx);
        }
      });
    } catch {
      // Only "last synced" times, flushed from a timer too (where a rejection would end the process): kept for the next flush.
      for (const [key, touch] of batch) if (!this.touched.has(key)) this.touched.set(key, touch);
    }
  }
}
