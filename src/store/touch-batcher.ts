/**
 * "Last synced" times in batches. Most reconciles (every one of a sweep
 * with nothing to do) find what the store already says: then only those
 * times move, and writing each in a transaction of its own would make a
 * sweep of 10,000 primaries 10,000 transactions. They are gathered and
 * written together: at 500 pending, after a second, and when asked (sweeps,
 * shutdown).
 */
import { sql, type Kysely } from 'kysely';
import { identityKey, type ObjectIdentity } from '../core/identity.js';
import type { Database } from './schema.js';
import type { Clock, Timer } from '../util/clock.js';

/** Touches per statement. */
const CHUNK = 500;

export class TouchBatcher {
  private touched = new Map<string, { id: ObjectIdentity; at: string }>();
  private timer: Timer | undefined;

  constructor(
    private readonly db: Kysely<Database>,
    /** Whose second a batch waits at most. */
    private readonly clock: Clock,
  ) {}

  /** Moves a primary's "last synced" (and its synced relations') to `at`, soon. */
  touch(id: ObjectIdentity, at: string): void {
    this.touched.set(identityKey(id), { id, at });
    if (this.touched.size >= 500) void this.flush();
    else this.timer ??= this.clock.after(1000, () => void this.flush());
  }

  /** Writes the pending times in one transaction. */
  async flush(): Promise<void> {
    this.timer?.cancel();
    this.timer = undefined;
    if (this.touched.size === 0) return;
    const batch = this.touched;
    this.touched = new Map();
    try {
      await this.db.transaction().execute(async (trx) => {
        const touches = [...batch.values()];
        for (let i = 0; i < touches.length; i += CHUNK) {
          // One statement per table per chunk (a sweep with nothing to do touches every primary), through
          // the primary key, of one shape whatever the chunk's length (a JSON array, one parameter: the
          // statement cache keeps one statement); never backwards: a full save since then wrote a later time.
          const rows = JSON.stringify(touches.slice(i, i + CHUNK).map(({ id, at }) => [id.cluster, id.group, id.resource, id.namespace, id.name, at]));
          await sql`WITH t AS (SELECT value ->> 0 AS cluster, value ->> 1 AS grp, value ->> 2 AS resource, value ->> 3 AS namespace, value ->> 4 AS name, value ->> 5 AS at FROM json_each(${rows}))
            UPDATE primaries SET last_synced_at = max(coalesce(primaries.last_synced_at, ''), t.at) FROM t
            WHERE primaries.cluster = t.cluster AND primaries."group" = t.grp AND primaries.resource = t.resource AND primaries.namespace = t.namespace AND primaries.name = t.name
              AND primaries.state = 'synced'`.execute(trx);
          await sql`WITH t AS (SELECT value ->> 0 AS cluster, value ->> 1 AS grp, value ->> 2 AS resource, value ->> 3 AS namespace, value ->> 4 AS name, value ->> 5 AS at FROM json_each(${rows}))
            UPDATE relations SET last_synced_at = max(coalesce(relations.last_synced_at, ''), t.at) FROM t
            WHERE relations.primary_cluster = t.cluster AND relations.primary_group = t.grp AND relations.primary_resource = t.resource
              AND relations.primary_namespace = t.namespace AND relations.primary_name = t.name AND relations.state = 'synced'`.execute(trx);
        }
      });
    } catch {
      // Only "last synced" times, flushed from a timer too (where a rejection would end the process): kept for the next flush.
      for (const [key, touch] of batch) if (!this.touched.has(key)) this.touched.set(key, touch);
    }
  }
}
