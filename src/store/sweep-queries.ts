/**
 * The store reads and deletes that only a sweep makes: whole-store questions
 * (every relation, every accounted-for copy) answered in a few reads instead
 * of a query per listed object, and the cleanup of types no longer
 * configured. Apart from the per-event routing reads so that neither hides
 * the cost of the other.
 */
import { sql, type Kysely } from 'kysely';
import { columns, fromColumns, identityKey, sameIdentity, type ObjectIdentity } from '../core/identity.js';
import { compositeKey } from '../core/composite-key.js';
import { copyOfRow, toPrimary, toRelation, type PrimaryRecord, type RelationRecord } from './records.js';
import type { Database } from './schema.js';

/** A relation's key (its table's primary key): what a sweep's before/after comparison compares. */
const relationKey = sql.raw(
  'primary_cluster, primary_group, primary_resource, primary_namespace, primary_name, rule_id, source_cluster, source_group, source_resource, source_namespace, source_name',
);

/**
 * Remembers every relation's key for relationChanges(), in a temporary
 * table of this connection (SQLite's temp store, not the store file): a
 * sweep compares the store before and after itself without holding a key
 * per relation in memory.
 */
export async function rememberRelations(db: Kysely<Database>): Promise<void> {
  await sql`DROP TABLE IF EXISTS temp.sweep_relations`.execute(db);
  await sql`CREATE TEMP TABLE sweep_relations (
    primary_cluster TEXT, primary_group TEXT, primary_resource TEXT, primary_namespace TEXT, primary_name TEXT, rule_id TEXT,
    source_cluster TEXT, source_group TEXT, source_resource TEXT, source_namespace TEXT, source_name TEXT,
    PRIMARY KEY (${relationKey})) WITHOUT ROWID`.execute(db);
  await sql`INSERT INTO temp.sweep_relations SELECT ${relationKey} FROM relations`.execute(db);
}

/** How many relations were added and removed since rememberRelations(); forgets what it remembered. */
export async function relationChanges(db: Kysely<Database>): Promise<{ added: number; removed: number }> {
  const count = async (query: ReturnType<typeof sql<{ n: number }>>) => Number((await query.execute(db)).rows[0]?.n ?? 0);
  const added = await count(sql<{ n: number }>`SELECT count(*) AS n FROM relations WHERE (${relationKey}) NOT IN (SELECT ${relationKey} FROM temp.sweep_relations)`);
  const removed = await count(sql<{ n: number }>`SELECT count(*) AS n FROM temp.sweep_relations WHERE (${relationKey}) NOT IN (SELECT ${relationKey} FROM relations)`);
  await sql`DROP TABLE temp.sweep_relations`.execute(db);
  return { added, removed };
}

/** A primary's row with its relations' rows. */
export interface PrimaryWithRelations {
  readonly primary: PrimaryRecord;
  readonly relations: RelationRecord[];
}

/**
 * Every primary with its relations, in pages of `pageSize` primaries in
 * primary-key order: two range reads per page (the relations' primary key
 * starts with their primary's), instead of two queries per primary, and no
 * more than one page in memory. For a sweep's skip checks (sweep-skip.ts).
 */
export async function* primariesWithRelations(db: Kysely<Database>, pageSize = 500): AsyncGenerator<PrimaryWithRelations[]> {
  let after: ObjectIdentity | undefined;
  for (;;) {
    let query = db.selectFrom('primaries').selectAll().orderBy('cluster').orderBy('group').orderBy('resource').orderBy('namespace').orderBy('name').limit(pageSize);
    if (after) {
      const a = after;
      query = query.where((eb) => eb(eb.refTuple('cluster', 'group', 'resource', 'namespace', 'name'), '>', eb.tuple(a.cluster, a.group, a.resource, a.namespace, a.name)));
    }
    const rows = await query.execute();
    if (rows.length === 0) return;
    const first = fromColumns('', rows[0]!);
    const last = fromColumns('', rows[rows.length - 1]!);
    const relationRows = await db
      .selectFrom('relations')
      .selectAll()
      .where((eb) =>
        eb.and([
          eb(eb.refTuple('primary_cluster', 'primary_group', 'primary_resource', 'primary_namespace', 'primary_name'), '>=', eb.tuple(first.cluster, first.group, first.resource, first.namespace, first.name)),
          eb(eb.refTuple('primary_cluster', 'primary_group', 'primary_resource', 'primary_namespace', 'primary_name'), '<=', eb.tuple(last.cluster, last.group, last.resource, last.namespace, last.name)),
        ]),
      )
      .execute();
    const page = new Map<string, PrimaryWithRelations>(rows.map((r) => {
      const primary = toPrimary(r);
      return [identityKey(primary.id), { primary, relations: [] }];
    }));
    for (const row of relationRows) {
      const relation = toRelation(row);
      page.get(identityKey(relation.primary))?.relations.push(relation);
    }
    yield [...page.values()];
    if (rows.length < pageSize) return;
    after = last;
  }
}

/**
 * Whether the store accounts for `copy` as the copy of `source`: a primary
 * whose copy it is, or a relation from that source to it. What the copy's
 * marks name decides, never the copy's type (a type may be a primary type
 * and a related type at once).
 */
export async function accounts(db: Kysely<Database>, source: ObjectIdentity, copy: ObjectIdentity): Promise<boolean> {
  const primary = await db.selectFrom('primaries').selectAll().where((eb) => eb.and(columns('', source))).executeTakeFirst();
  if (primary && sameIdentity(copyOfRow(primary), copy)) return true;
  const relation = await db
    .selectFrom('relations')
    .select('rule_id')
    .where((eb) => eb.and(columns('dest_', copy)))
    .where((eb) => eb.and(columns('source_', source)))
    .limit(1)
    .executeTakeFirst();
  return relation !== undefined;
}

/**
 * Every (source, copy) pair the store accounts for (see accounts()), in two
 * reads, as keys of copyPairKey(): for a sweep's orphan check, instead of a
 * query per listed copy.
 */
export async function accountedFor(db: Kysely<Database>): Promise<Set<string>> {
  const pairs = new Set<string>();
  for (const r of await db.selectFrom('primaries').selectAll().execute()) pairs.add(copyPairKey(fromColumns('', r), copyOfRow(r)));
  for (const r of await db.selectFrom('relations').select(['source_cluster', 'source_group', 'source_resource', 'source_namespace', 'source_name', 'dest_cluster', 'dest_group', 'dest_resource', 'dest_namespace', 'dest_name']).execute()) {
    pairs.add(copyPairKey(fromColumns('source_', r), fromColumns('dest_', r)));
  }
  return pairs;
}

/** The in-memory key of a (source, copy) pair, as accountedFor() returns them. */
export function copyPairKey(source: ObjectIdentity, copy: ObjectIdentity): string {
  return compositeKey(identityKey(source), identityKey(copy));
}

/** Drops primaries (and, by cascade, their relations) of types no longer configured. */
export async function forgetPrimariesOtherThan(db: Kysely<Database>, types: ReadonlyArray<{ group: string; resource: string }>): Promise<number> {
  let query = db.deleteFrom('primaries');
  for (const t of types) query = query.where((eb) => eb.not(eb.and([eb('group', '=', t.group), eb('resource', '=', t.resource)])));
  const result = await query.executeTakeFirst();
  return Number(result.numDeletedRows);
}
