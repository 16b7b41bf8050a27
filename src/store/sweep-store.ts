/** Sweep history: one row per sweep, for people (`select * from sweeps_view`). */
import type { Kysely } from 'kysely';
import { isoTime, systemClock, type Clock } from '../util/clock.js';
import type { Database, SweepStatus, SweepTrigger } from './schema.js';

export interface SweepCounts {
  primariesSeen: number;
  objectsListed: number;
  relationsAdded: number;
  relationsRemoved: number;
  copiesRepaired: number;
  copiesRemoved: number;
  errors: number;
}

export class SweepStore {
  constructor(
    private readonly db: Kysely<Database>,
    /** The time of day written down; default systemClock. */
    private readonly clock: Clock = systemClock,
  ) {}

  async start(trigger: SweepTrigger): Promise<number> {
    const row = await this.db
      .insertInto('sweeps')
      .values({ trigger, status: 'running', started_at: isoTime(this.clock), finished_at: null, message: null, primaries_seen: 0, objects_listed: 0, relations_added: 0, relations_removed: 0, copies_repaired: 0, copies_removed: 0, errors: 0 })
      .returning('id')
      .executeTakeFirstOrThrow();
    return row.id;
  }

  async finish(id: number, status: SweepStatus, counts: SweepCounts, message: string | null = null): Promise<void> {
    await this.db
      .updateTable('sweeps')
      .set({
        status,
        finished_at: isoTime(this.clock),
        primaries_seen: counts.primariesSeen,
        objects_listed: counts.objectsListed,
        relations_added: counts.relationsAdded,
        relations_removed: counts.relationsRemoved,
        copies_repaired: counts.copiesRepaired,
        copies_removed: counts.copiesRemoved,
        errors: counts.errors,
        message,
      })
      .where('id', '=', id)
      .execute();
  }

  async skipped(trigger: SweepTrigger, message: string): Promise<void> {
    const at = isoTime(this.clock);
    await this.db
      .insertInto('sweeps')
      .values({ trigger, status: 'skipped', started_at: at, finished_at: at, message, primaries_seen: 0, objects_listed: 0, relations_added: 0, relations_removed: 0, copies_repaired: 0, copies_removed: 0, errors: 0 })
      .execute();
  }
}
