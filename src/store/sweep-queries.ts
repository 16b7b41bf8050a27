/**
 * The store reads and deletes that only a sweep makes: the whole store read
 * a page of primaries at a time (two range reads per page, instead of a query
 * per primary or per listed object), the check of one copy before the sweep
 * deletes it, and the cleanup of types no longer configured. Apart from the
 * per-event routing reads so that neither hides the cost of the other.
 */
import type { ExpressionBuilder, Kysely } from 'kysely';
import { columns, fromColumns, identityKey, sameIdentity, type ObjectIdentity } from '../core/identity.js';
import { copyOfRow, toPrimary, toRelation, type PrimaryRecord, type RelationRecord } from './records.js';
import type { Database } from './schema.js';

/** A primary's row with its relations' rows. */
export interface PrimaryWithRelations {
  readonly primary: PrimaryRecord;
  readonly relations: RelationRecord[];
}

/**
 * Every primary with its relations, in pages of at most `pageSize` primaries
 * and about `relationsPerPage` relations (a page is halved until its
 * relations fit, down to one primary), in primary-key order: a count and two
 * range reads per page (the relations' primary key starts with their
 * primary's), instead of two queries per primary, and no more than one page
 * in memory. For a sweep's skip checks (sweep-skip.ts).
 */
export async function* primariesWithRelations(db: Kysely<Database>, pageSize = 500, relationsPerPage = 5_000): AsyncGenerator<PrimaryWithRelations[]> {
  let after: ObjectIdentity | undefined;
  let size = pageSize;
  for (;;) {
    let query = db.selectFrom('primaries').selectAll().orderBy('cluster').orderBy('group').orderBy('resource').orderBy('namespace').orderBy('name').limit(size);
    if (after) {
      const a = after;
      query = query.where((eb) => eb(eb.refTuple('cluster', 'group', 'resource', 'namespace', 'name'), '>', eb.tuple(a.cluster, a.group, a.resource, a.namespace, a.name)));
    }
    const queried = await query.execute();
    if (queried.length === 0) return;
    let rows = queried;
    const first = fromColumns('', rows[0]!);
    let last = fromColumns('', rows[rows.length - 1]!);
    while (rows.length > 1 && (await relationCount(db, first, last)) > relationsPerPage) {
      rows = rows.slice(0, Math.ceil(rows.length / 2));
      last = fromColumns('', rows[rows.length - 1]!);
    }
    // The last page: nothing beyond what was asked for, and all of it taken.
    const done = queried.length < size && rows.length === queried.length;
    // The next page: as many primaries as fitted, growing back by doubling.
    size = Math.min(pageSize, rows.length * 2);
    const relationRows = await db
      .selectFrom('relations')
      .selectAll()
      .where((eb) => inPrimaryRange(eb, first, last))
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
    if (done) return;
    after = last;
  }
}

/** Relations of the primaries from `first` to `last` (primary-key order), through the relations' primary key. */
function inPrimaryRange(eb: ExpressionBuilder<Database, 'relations'>, first: ObjectIdentity, last: ObjectIdentity) {
  const primaryKey = () => eb.refTuple('primary_cluster', 'primary_group', 'primary_resource', 'primary_namespace', 'primary_name');
  return eb.and([
    eb(primaryKey(), '>=', eb.tuple(first.cluster, first.group, first.resource, first.namespace, first.name)),
    eb(primaryKey(), '<=', eb.tuple(last.cluster, last.group, last.resource, last.namespace, last.name)),
  ]);
}

async function relationCount(db: Kysely<Database>, first: ObjectIdentity, last: ObjectIdentity): Promise<number> {
  const row = await db.selectFrom('relations').select((eb) => eb.fn.countAll<number>().as('n')).where((eb) => inPrimaryRange(eb, first, last)).executeTakeFirst();
  return Number(row?.n ?? 0);
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

/** Drops primaries (and, by cascade, their relations) of types no longer configured; says how many of each. */
export async function forgetPrimariesOtherThan(db: Kysely<Database>, types: ReadonlyArray<{ group: string; resource: string }>): Promise<{ primaries: number; relations: number }> {
  return db.transaction().execute(async (trx) => {
    let count = trx.selectFrom('relations').select((eb) => eb.fn.countAll<number>().as('n'));
    for (const t of types) count = count.where((eb) => eb.not(eb.and([eb('primary_group', '=', t.group), eb('primary_resource', '=', t.resource)])));
    const relations = Number((await count.executeTakeFirst())?.n ?? 0);
    let query = trx.deleteFrom('primaries');
    for (const t of types) query = query.where((eb) => eb.not(eb.and([eb('group', '=', t.group), eb('resource', '=', t.resource)])));
    const result = await query.executeTakeFirst();
    return { primaries: Number(result.numDeletedRows), relations };
  });
}
