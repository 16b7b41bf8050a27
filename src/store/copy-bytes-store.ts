/**
 * The `copy_bytes` table: the size of each copy relsync wrote into the service cluster, charged
 * to the tenant (platform cluster, or kcp workspace) whose object it copies. Read as sums per
 * tenant (an index range) for sync/copy-budget.ts; one row written per copy written, and a write
 * that changes nothing changes no row.
 */
import type { Kysely } from 'kysely';
import type { ObjectIdentity } from '../core/identity.js';
import type { Database } from './schema.js';

export interface CopyUsage {
  readonly bytes: number;
  readonly copies: number;
}

export class CopyBytesStore {
  constructor(private readonly db: Kysely<Database>) {}

  /** What all copies take, and how many tenants have any. */
  async total(): Promise<CopyUsage & { tenants: number }> {
    const row = await this.db
      .selectFrom('copy_bytes')
      .select((eb) => [eb.fn.coalesce(eb.fn.sum<number>('bytes'), eb.lit(0)).as('bytes'), eb.fn.countAll<number>().as('copies'), eb.fn.count<number>('tenant').distinct().as('tenants')])
      .executeTakeFirst();
    return { bytes: Number(row?.bytes ?? 0), copies: Number(row?.copies ?? 0), tenants: Number(row?.tenants ?? 0) };
  }

  /** What one tenant's copies take; `undefined` tenant: all of them. */
  async usage(tenant?: string): Promise<CopyUsage> {
    let q = this.db.selectFrom('copy_bytes').select((eb) => [eb.fn.coalesce(eb.fn.sum<number>('bytes'), eb.lit(0)).as('bytes'), eb.fn.countAll<number>().as('copies')]);
    if (tenant !== undefined) q = q.where('tenant', '=', tenant);
    const row = await q.executeTakeFirst();
    return { bytes: Number(row?.bytes ?? 0), copies: Number(row?.copies ?? 0) };
  }

  /** The size stored for one copy, whose it is and what it copies. */
  async of(copy: ObjectIdentity): Promise<{ tenant: string; source: string; bytes: number } | undefined> {
    return this.db.selectFrom('copy_bytes').select(['tenant', 'source', 'bytes']).where('cluster', '=', copy.cluster).where('group', '=', copy.group).where('resource', '=', copy.resource).where('namespace', '=', copy.namespace).where('name', '=', copy.name).executeTakeFirst();
  }

  /** `source`: the identity key of the object it copies. */
  async save(copy: ObjectIdentity, tenant: string, source: string, bytes: number): Promise<void> {
    await this.db
      .insertInto('copy_bytes')
      .values({ cluster: copy.cluster, group: copy.group, resource: copy.resource, namespace: copy.namespace, name: copy.name, tenant, source, bytes })
      .onConflict((oc) => oc.columns(['cluster', 'group', 'resource', 'namespace', 'name']).doUpdateSet({ tenant, source, bytes }))
      .execute();
  }

  /**
   * Rows for copies that have none (found in the service cluster by a LIST: a store lost or
   * restored from an older copy); a row there already stays. How many were added.
   */
  async saveMissing(rows: readonly { readonly copy: ObjectIdentity; readonly tenant: string; readonly source: string; readonly bytes: number }[]): Promise<number> {
    if (rows.length === 0) return 0;
    const result = await this.db
      .insertInto('copy_bytes')
      .values(rows.map(({ copy, tenant, source, bytes }) => ({ cluster: copy.cluster, group: copy.group, resource: copy.resource, namespace: copy.namespace, name: copy.name, tenant, source, bytes })))
      .onConflict((oc) => oc.columns(['cluster', 'group', 'resource', 'namespace', 'name']).doNothing())
      .executeTakeFirst();
    return Number(result.numInsertedOrUpdatedRows ?? 0);
  }

  /** The row of `copy`, when it is the copy of `source` (identity key). */
  async delete(copy: ObjectIdentity, source: string): Promise<void> {
    await this.db.deleteFrom('copy_bytes').where('cluster', '=', copy.cluster).where('group', '=', copy.group).where('resource', '=', copy.resource).where('namespace', '=', copy.namespace).where('name', '=', copy.name).where('source', '=', source).execute();
  }
}
