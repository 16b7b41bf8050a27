/**
 * The `logical_clusters` table: which kcp platform connection reaches each
 * logical cluster relsync has seen. Written once when a workspace first
 * shows up and when it unbinds, so single-row writes are fine here.
 */
import type { Kysely } from 'kysely';
import type { LogicalClusterRecord } from '../core/logical-cluster.js';
import { isoTime, systemClock, type Clock } from '../util/clock.js';
import type { Database } from './schema.js';

export class LogicalClusterStore {
  constructor(
    private readonly db: Kysely<Database>,
    /** The time of day written down; default systemClock. */
    private readonly clock: Clock = systemClock,
  ) {}

  async all(): Promise<LogicalClusterRecord[]> {
    return this.db.selectFrom('logical_clusters').select(['name', 'platform', 'state']).orderBy('name').execute();
  }

  async save(record: LogicalClusterRecord): Promise<void> {
    const at = isoTime(this.clock);
    await this.db
      .insertInto('logical_clusters')
      .values({ ...record, first_seen_at: at, changed_at: at })
      .onConflict((oc) => oc.column('name').doUpdateSet({ platform: record.platform, state: record.state, changed_at: at }))
      .execute();
  }

  async delete(name: string): Promise<void> {
    await this.db.deleteFrom('logical_clusters').where('name', '=', name).execute();
  }
}
