/** Read-only questions people ask of the store (the `inspect` commands). */
import type { Kysely } from 'kysely';
import { columns, fromColumns } from '../core/identity.js';
import type { Database, RelationsTable, PrimariesTable } from './schema.js';

export interface ObjectQuery {
  readonly cluster?: string | undefined;
  readonly group: string;
  readonly resource: string;
  readonly namespace: string;
  readonly name: string;
}

/** Relations in which the object is the related source or its copy. */
export async function relationsOfObject(db: Kysely<Database>, q: ObjectQuery): Promise<RelationsTable[]> {
  const side = async (p: 'source_' | 'dest_') => {
    let query = db
      .selectFrom('relations')
      .selectAll()
      .where(`${p}group`, '=', q.group)
      .where(`${p}resource`, '=', q.resource)
      .where(`${p}namespace`, '=', q.namespace)
      .where(`${p}name`, '=', q.name);
    if (q.cluster) query = query.where(`${p}cluster`, '=', q.cluster);
    return query.execute();
  };
  return [...(await side('source_')), ...(await side('dest_'))];
}

export async function primariesMatching(db: Kysely<Database>, q: ObjectQuery): Promise<PrimariesTable[]> {
  let query = db.selectFrom('primaries').selectAll().where('group', '=', q.group).where('resource', '=', q.resource).where('namespace', '=', q.namespace).where('name', '=', q.name);
  if (q.cluster) query = query.where('cluster', '=', q.cluster);
  return query.execute();
}

export async function relationsOfPrimary(db: Kysely<Database>, p: PrimariesTable): Promise<RelationsTable[]> {
  return db
    .selectFrom('relations')
    .selectAll()
    .where((eb) => eb.and(columns('primary_', fromColumns('', p))))
    .orderBy('rule_id')
    .execute();
}

export async function selectorsOfPrimary(db: Kysely<Database>, p: PrimariesTable): Promise<Array<{ rule: string; selector: string; scope: string }>> {
  const rows = await db
    .selectFrom('selectors')
    .selectAll()
    .where((eb) => eb.and(columns('primary_', fromColumns('', p))))
    .orderBy('rule_id')
    .execute();
  return rows.map((r) => ({
    rule: r.rule_id,
    selector: r.selector_text || '(empty: every object)',
    scope: `${r.source_cluster}:${r.source_group ? `${r.source_resource}.${r.source_group}` : r.source_resource}:${r.source_namespace}`,
  }));
}

/** kcp: each known workspace (logical cluster), the platform that reaches it, its state, and its primaries in the store. */
export async function logicalClustersWithPrimaries(db: Kysely<Database>): Promise<Array<{ name: string; platform: string; state: string; primaries: number; firstSeenAt: string }>> {
  const rows = await db
    .selectFrom('logical_clusters as l')
    .leftJoin('primaries as p', 'p.cluster', 'l.name')
    .select((eb) => ['l.name', 'l.platform', 'l.state', 'l.first_seen_at', eb.fn.count<number>('p.name').as('primaries')])
    .groupBy(['l.name', 'l.platform', 'l.state', 'l.first_seen_at'])
    .orderBy('l.platform')
    .orderBy('l.name')
    .execute();
  return rows.map((r) => ({ name: r.name, platform: r.platform, state: r.state, primaries: Number(r.primaries), firstSeenAt: r.first_seen_at }));
}
