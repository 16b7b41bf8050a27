/**
 * What the process must not forget across a crash: the last resourceVersion
 * of each watch and the primaries routed but not reconciled yet. Both are
 * written together, in one transaction per batch (see controller/checkpointer.ts).
 */
import type { Kysely } from 'kysely';
import { columns, fromColumns, type ObjectIdentity } from '../core/identity.js';
import { isoTime, systemClock, type Clock } from '../util/clock.js';
import type { Database } from './schema.js';

export interface WatchKey {
  readonly cluster: string;
  readonly group: string;
  readonly resource: string;
  /** '' for an unfiltered watch. */
  readonly labelSelector: string;
}

export interface CheckpointBatch {
  readonly versions: ReadonlyArray<{ key: WatchKey; resourceVersion: string }>;
  readonly queued: readonly ObjectIdentity[];
  readonly done: readonly ObjectIdentity[];
}

export class CheckpointStore {
  constructor(
    private readonly db: Kysely<Database>,
    /** The time of day written down; default systemClock. */
    private readonly clock: Clock = systemClock,
  ) {}

  async resourceVersion(key: WatchKey): Promise<string | undefined> {
    const row = await this.db
      .selectFrom('watch_checkpoints')
      .select('resource_version')
      .where('cluster', '=', key.cluster)
      .where('group', '=', key.group)
      .where('resource', '=', key.resource)
      .where('label_selector', '=', key.labelSelector)
      .executeTakeFirst();
    return row?.resource_version;
  }

  async pending(): Promise<ObjectIdentity[]> {
    const rows = await this.db.selectFrom('pending_primaries').selectAll().execute();
    return rows.map((r) => fromColumns('', r));
  }

  /** Writes one batch in one transaction. */
  async write(batch: CheckpointBatch): Promise<void> {
    if (batch.versions.length === 0 && batch.queued.length === 0 && batch.done.length === 0) return;
    const at = isoTime(this.clock);
    await this.db.transaction().execute(async (trx) => {
      for (const id of batch.done) await trx.deleteFrom('pending_primaries').where((eb) => eb.and(columns('', id))).execute();
      for (let i = 0; i < batch.queued.length; i += 100) {
        await trx
          .insertInto('pending_primaries')
          .values(batch.queued.slice(i, i + 100).map((id) => ({ ...columns('', id), queued_at: at })))
          .onConflict((oc) => oc.doNothing())
          .execute();
      }
      for (const { key, resourceVersion } of batch.versions) {
        await trx
          .insertInto('watch_checkpoints')
          .values({ cluster: key.cluster, group: key.group, resource: key.resource, label_selector: key.labelSelector, resource_version: resourceVersion, updated_at: at })
          .onConflict((oc) => oc.columns(['cluster', 'group', 'resource', 'label_selector']).doUpdateSet({ resource_version: resourceVersion, updated_at: at }))
          .execute();
      }
    });
  }
}
