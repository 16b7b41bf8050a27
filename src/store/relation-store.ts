/**
 * The relationship store: what relsync knows between restarts. Reads answer
 * routing questions through indexes (no scan of all primaries per event);
 * each reconcile's writes happen in one transaction.
 */
import type { Kysely } from 'kysely';
import { columns, fromColumns, identityKey, sameIdentity, type IdentityColumns, type ObjectIdentity } from '../core/identity.js';
import { matchesSelector, selectorQuery, type LabelSelector, type SelectorRequirement } from '../core/label-selector.js';
import type { Database, PrimariesTable, PrimaryState, RelationState, RelationsTable } from './schema.js';
import { compositeKey } from '../core/composite-key.js';
import { TouchBatcher } from './touch-batcher.js';

export interface PrimaryRecord {
  readonly id: ObjectIdentity;
  readonly uid: string;
  readonly copy: ObjectIdentity;
  readonly state: PrimaryState;
  readonly message: string | null;
  readonly lastSyncedAt: string | null;
}

export interface RelationRecord {
  readonly primary: ObjectIdentity;
  readonly ruleId: string;
  readonly origin: 'platform' | 'service';
  readonly source: ObjectIdentity;
  readonly destination: ObjectIdentity;
  readonly state: RelationState;
  readonly contentHash: string | null;
  readonly message: string | null;
  readonly lastSyncedAt: string | null;
}

/** A primary's rendered selector for one rule, and where it applies. */
export interface SelectorRecord {
  readonly ruleId: string;
  /** Cluster, group, resource and namespace of the objects it selects (name unused). */
  readonly scope: Omit<ObjectIdentity, 'name'>;
  readonly selector: LabelSelector;
}

export type Clock = () => Date;

export class RelationStore {
  /** "Last synced" times of reconciles that found nothing new, written in batches. */
  private readonly touches: TouchBatcher;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly now: Clock = () => new Date(),
  ) {
    this.touches = new TouchBatcher(db);
  }

  async primary(id: ObjectIdentity): Promise<PrimaryRecord | undefined> {
    const row = await this.db.selectFrom('primaries').selectAll().where((eb) => eb.and(columns('', id))).executeTakeFirst();
    return row ? toPrimary(row) : undefined;
  }

  /** The primaries of one type in one cluster (used on relist, never per event). */
  async primariesOfType(cluster: string, group: string, resource: string): Promise<PrimaryRecord[]> {
    const rows = await this.db.selectFrom('primaries').selectAll().where('cluster', '=', cluster).where('group', '=', group).where('resource', '=', resource).execute();
    return rows.map(toPrimary);
  }

  /** Every primary of a cluster (or of all clusters): only for the bench's fan-out comparison. */
  async primariesOfCluster(cluster: string | undefined): Promise<PrimaryRecord[]> {
    let query = this.db.selectFrom('primaries').selectAll();
    if (cluster !== undefined) query = query.where('cluster', '=', cluster);
    return (await query.execute()).map(toPrimary);
  }

  /** Whether any primary of this cluster is stored (for forgetting an unbound kcp workspace). */
  /** How many primaries of this cluster the store holds (a range of the primary key). */
  async countPrimaries(cluster: string): Promise<number> {
    const row = await this.db.selectFrom('primaries').select((eb) => eb.fn.countAll<number>().as('n')).where('cluster', '=', cluster).executeTakeFirst();
    return Number(row?.n ?? 0);
  }

  async hasPrimaries(cluster: string): Promise<boolean> {
    return (await this.db.selectFrom('primaries').select('name').where('cluster', '=', cluster).limit(1).executeTakeFirst()) !== undefined;
  }

  /** Primaries whose copies are of this type in this cluster (used on relist of copies, never per event). */
  async primariesByCopyType(copyCluster: string, group: string, resource: string): Promise<PrimaryRecord[]> {
    const rows = await this.db.selectFrom('primaries').selectAll().where('copy_cluster', '=', copyCluster).where('group', '=', group).where('resource', '=', resource).execute();
    return rows.map(toPrimary);
  }

  /**
   * Relations whose source or destination is of this type in this cluster
   * (used on relist to find objects that vanished while nobody watched).
   */
  async relationsTouchingType(cluster: string, group: string, resource: string): Promise<RelationRecord[]> {
    const bySource = await this.db.selectFrom('relations').selectAll().where('source_cluster', '=', cluster).where('source_group', '=', group).where('source_resource', '=', resource).execute();
    const byDest = await this.db.selectFrom('relations').selectAll().where('dest_cluster', '=', cluster).where('dest_group', '=', group).where('dest_resource', '=', resource).execute();
    return [...bySource, ...byDest].map(toRelation);
  }

  /** The primary whose copy is this object, found by index on the copy's location. */
  async primaryByCopy(copy: ObjectIdentity): Promise<PrimaryRecord | undefined> {
    const row = await this.db
      .selectFrom('primaries')
      .selectAll()
      .where('copy_cluster', '=', copy.cluster)
      .where('copy_namespace', '=', copy.namespace)
      .where('copy_name', '=', copy.name)
      .where('group', '=', copy.group)
      .where('resource', '=', copy.resource)
      .executeTakeFirst();
    return row ? toPrimary(row) : undefined;
  }

  async relationsOf(primary: ObjectIdentity): Promise<RelationRecord[]> {
    const rows = await this.db.selectFrom('relations').selectAll().where((eb) => eb.and(columns('primary_', primary))).execute();
    return rows.map(toRelation);
  }

  /**
   * The primaries that own `id` as a related source or as a related copy,
   * through the by-source and by-destination indexes.
   */
  async ownersOf(id: ObjectIdentity): Promise<ObjectIdentity[]> {
    const bySource = await this.db
      .selectFrom('relations')
      .select(['primary_cluster', 'primary_group', 'primary_resource', 'primary_namespace', 'primary_name'])
      .where((eb) => eb.and(columns('source_', id)))
      .execute();
    const byDest = await this.db
      .selectFrom('relations')
      .select(['primary_cluster', 'primary_group', 'primary_resource', 'primary_namespace', 'primary_name'])
      .where((eb) => eb.and(columns('dest_', id)))
      .execute();
    const seen = new Map<string, ObjectIdentity>();
    for (const row of [...bySource, ...byDest]) {
      const p = fromColumns('primary_', row);
      seen.set(identityKey(p), p);
    }
    return [...seen.values()];
  }

  /**
   * How many relations of primaries other than `except` copy this same
   * `source` to this destination: the claims that keep its copy alive. A
   * relation of another source that names the same destination (a conflict:
   * the copy's marks name a different source) never does.
   */
  async otherClaimsOn(dest: ObjectIdentity, source: ObjectIdentity, except: ObjectIdentity): Promise<number> {
    const row = await this.db
      .selectFrom('relations')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where((eb) => eb.and(columns('dest_', dest)))
      .where((eb) => eb.and(columns('source_', source)))
      .where((eb) => eb.not(eb.and(columns('primary_', except))))
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  /**
   * Whether the store accounts for `copy` as the copy of `source`: a primary
   * whose copy it is, or a relation from that source to it. What the copy's
   * marks name decides, never the copy's type (a type may be a primary type
   * and a related type at once).
   */
  async accounts(source: ObjectIdentity, copy: ObjectIdentity): Promise<boolean> {
    const record = await this.primary(source);
    if (record && sameIdentity(record.copy, copy)) return true;
    const relation = await this.db
      .selectFrom('relations')
      .select('rule_id')
      .where((eb) => eb.and(columns('dest_', copy)))
      .where((eb) => eb.and(columns('source_', source)))
      .limit(1)
      .executeTakeFirst();
    return relation !== undefined;
  }

  /**
   * Records one reconcile of a primary: its row and exactly these relations
   * (rows of the primary not listed here are removed), in one transaction.
   */
  async saveReconcile(
    primary: Omit<PrimaryRecord, 'lastSyncedAt'>,
    relations: ReadonlyArray<Omit<RelationRecord, 'lastSyncedAt' | 'primary'>>,
    selectors: readonly SelectorRecord[] = [],
  ): Promise<void> {
    const at = this.now().toISOString();
    // Most reconciles (every one of a sweep with nothing to do) find what the
    // store already says: then only "last synced" moves, in a batch.
    if (await this.holds(primary, relations, selectors)) {
      if (primary.state === 'synced') this.touches.touch(primary.id, at);
      return;
    }
    await this.db.transaction().execute(async (trx) => {
      await trx
        .insertInto('primaries')
        .values({
          ...columns('', primary.id),
          uid: primary.uid,
          copy_cluster: primary.copy.cluster,
          copy_namespace: primary.copy.namespace,
          copy_name: primary.copy.name,
          state: primary.state,
          message: primary.message,
          first_seen_at: at,
          last_synced_at: primary.state === 'synced' ? at : null,
        })
        .onConflict((oc) =>
          oc.columns(['cluster', 'group', 'resource', 'namespace', 'name']).doUpdateSet((eb) => ({
            uid: eb.ref('excluded.uid'),
            copy_cluster: eb.ref('excluded.copy_cluster'),
            copy_namespace: eb.ref('excluded.copy_namespace'),
            copy_name: eb.ref('excluded.copy_name'),
            state: eb.ref('excluded.state'),
            message: eb.ref('excluded.message'),
            last_synced_at: primary.state === 'synced' ? at : eb.ref('primaries.last_synced_at'),
          })),
        )
        .execute();
      await trx.deleteFrom('relations').where((eb) => eb.and(columns('primary_', primary.id))).execute();
      await trx.deleteFrom('selectors').where((eb) => eb.and(columns('primary_', primary.id))).execute();
      for (const sel of selectors) {
        const scope = { source_cluster: sel.scope.cluster, source_group: sel.scope.group, source_resource: sel.scope.resource, source_namespace: sel.scope.namespace };
        const anchor = anchorOf(sel.selector);
        await trx
          .insertInto('selectors')
          .values({
            ...columns('primary_', primary.id),
            rule_id: sel.ruleId,
            ...scope,
            requirements: JSON.stringify(sel.selector.requirements),
            selector_text: selectorQuery(sel.selector),
            anchored: anchor ? 1 : 0,
          })
          .execute();
        for (const value of anchor?.values ?? []) {
          await trx.insertInto('selector_terms').values({ ...scope, label_key: anchor!.key, label_value: value, ...columns('primary_', primary.id), rule_id: sel.ruleId }).execute();
        }
      }
      if (relations.length === 0) return;
      const rows: RelationsTable[] = relations.map((r) => ({
        ...columns('primary_', primary.id),
        rule_id: r.ruleId,
        origin: r.origin,
        ...columns('source_', r.source),
        ...columns('dest_', r.destination),
        state: r.state,
        content_hash: r.contentHash,
        message: r.message,
        last_synced_at: r.state === 'synced' ? at : null,
      }));
      // SQLite limits bound parameters per statement; insert in chunks.
      for (let i = 0; i < rows.length; i += 40) await trx.insertInto('relations').values(rows.slice(i, i + 40)).execute();
    });
  }

  /** True when the store holds exactly this reconcile's outcome already. */
  private async holds(
    primary: Omit<PrimaryRecord, 'lastSyncedAt'>,
    relations: ReadonlyArray<Omit<RelationRecord, 'lastSyncedAt' | 'primary'>>,
    selectors: readonly SelectorRecord[],
  ): Promise<boolean> {
    const stored = await this.primary(primary.id);
    if (!stored || stored.uid !== primary.uid || !sameIdentity(stored.copy, primary.copy) || stored.state !== primary.state || stored.message !== primary.message) return false;
    const relationKey = (r: Omit<RelationRecord, 'lastSyncedAt' | 'primary'>) => JSON.stringify([r.ruleId, r.origin, identityKey(r.source), identityKey(r.destination), r.state, r.contentHash, r.message]);
    if (!sameKeys((await this.relationsOf(primary.id)).map(relationKey), relations.map(relationKey))) return false;
    const rows = await this.db.selectFrom('selectors').selectAll().where((eb) => eb.and(columns('primary_', primary.id))).execute();
    return sameKeys(
      rows.map((r) => JSON.stringify([r.rule_id, r.source_cluster, r.source_group, r.source_resource, r.source_namespace, r.requirements])),
      selectors.map((x) => JSON.stringify([x.ruleId, x.scope.cluster, x.scope.group, x.scope.resource, x.scope.namespace, JSON.stringify(x.selector.requirements)])),
    );
  }

  /** Writes the pending "last synced" times in one transaction (also called by sweeps and at shutdown). */
  flushTouches(): Promise<void> {
    return this.touches.flush();
  }

  /**
   * The primaries whose selector (for some rule) matches these labels, for
   * an object in `scope`: candidates by indexed label terms, plus the few
   * selectors without one, then the whole selector evaluated.
   */
  async selectorOwners(scope: Omit<ObjectIdentity, 'name'>, labels: Readonly<Record<string, string>> | undefined): Promise<ObjectIdentity[]> {
    const where = { source_cluster: scope.cluster, source_group: scope.group, source_resource: scope.resource };
    const namespaces = scope.namespace ? [scope.namespace] : [''];
    const candidates = new Map<string, { primary: ObjectIdentity; requirements: string }>();
    const consider = (rows: Array<IdentityColumns<'primary_'> & { rule_id: string; requirements: string }>) => {
      for (const row of rows) candidates.set(compositeKey(identityKey(fromColumns('primary_', row)), row.rule_id), { primary: fromColumns('primary_', row), requirements: row.requirements });
    };
    for (const [key, value] of Object.entries(labels ?? {})) {
      consider(
        await this.db
          .selectFrom('selector_terms as t')
          .innerJoin('selectors as s', (join) =>
            join
              .onRef('s.primary_cluster', '=', 't.primary_cluster')
              .onRef('s.primary_group', '=', 't.primary_group')
              .onRef('s.primary_resource', '=', 't.primary_resource')
              .onRef('s.primary_namespace', '=', 't.primary_namespace')
              .onRef('s.primary_name', '=', 't.primary_name')
              .onRef('s.rule_id', '=', 't.rule_id'),
          )
          .select(['s.primary_cluster', 's.primary_group', 's.primary_resource', 's.primary_namespace', 's.primary_name', 's.rule_id', 's.requirements'])
          .where('t.source_cluster', '=', where.source_cluster)
          .where('t.source_group', '=', where.source_group)
          .where('t.source_resource', '=', where.source_resource)
          .where('t.source_namespace', 'in', namespaces)
          .where('t.label_key', '=', key)
          .where('t.label_value', '=', value)
          .execute(),
      );
    }
    consider(
      await this.db
        .selectFrom('selectors')
        .select(['primary_cluster', 'primary_group', 'primary_resource', 'primary_namespace', 'primary_name', 'rule_id', 'requirements'])
        .where('source_cluster', '=', where.source_cluster)
        .where('source_group', '=', where.source_group)
        .where('source_resource', '=', where.source_resource)
        .where('source_namespace', 'in', namespaces)
        .where('anchored', '=', 0)
        .execute(),
    );
    const owners = new Map<string, ObjectIdentity>();
    for (const { primary, requirements } of candidates.values()) {
      const selector: LabelSelector = { requirements: JSON.parse(requirements) as SelectorRequirement[] };
      if (matchesSelector(selector, labels)) owners.set(identityKey(primary), primary);
    }
    return [...owners.values()];
  }

  async selectorsOf(primary: ObjectIdentity): Promise<Array<{ ruleId: string; selector: string; scope: string }>> {
    const rows = await this.db.selectFrom('selectors').selectAll().where((eb) => eb.and(columns('primary_', primary))).execute();
    return rows.map((r) => ({ ruleId: r.rule_id, selector: r.selector_text, scope: `${r.source_cluster}:${r.source_namespace}` }));
  }

  /** Every relation's (primary, rule, source): for a sweep's before/after comparison. */
  async allRelationKeys(): Promise<Array<{ primary: ObjectIdentity; ruleId: string; source: ObjectIdentity }>> {
    const rows = await this.db.selectFrom('relations').selectAll().execute();
    return rows.map((r) => ({ primary: fromColumns('primary_', r), ruleId: r.rule_id, source: fromColumns('source_', r) }));
  }

  /**
   * Every (source, copy) pair the store accounts for (see accounts()), in two
   * reads, as keys of copyPairKey(): for a sweep's orphan check, instead of a
   * query per listed copy.
   */
  async accountedFor(): Promise<Set<string>> {
    const pairs = new Set<string>();
    for (const r of await this.db.selectFrom('primaries').selectAll().execute()) {
      pairs.add(copyPairKey(fromColumns('', r), { cluster: r.copy_cluster, group: r.group, resource: r.resource, namespace: r.copy_namespace, name: r.copy_name }));
    }
    for (const r of await this.db.selectFrom('relations').select(['source_cluster', 'source_group', 'source_resource', 'source_namespace', 'source_name', 'dest_cluster', 'dest_group', 'dest_resource', 'dest_namespace', 'dest_name']).execute()) {
      pairs.add(copyPairKey(fromColumns('source_', r), fromColumns('dest_', r)));
    }
    return pairs;
  }

  /** Drops primaries (and, by cascade, their relations) of types no longer configured. */
  async forgetPrimariesOtherThan(types: ReadonlyArray<{ group: string; resource: string }>): Promise<number> {
    let query = this.db.deleteFrom('primaries');
    for (const t of types) query = query.where((eb) => eb.not(eb.and([eb('group', '=', t.group), eb('resource', '=', t.resource)])));
    const result = await query.executeTakeFirst();
    return Number(result.numDeletedRows);
  }

  async setPrimaryState(id: ObjectIdentity, state: PrimaryState, message: string | null): Promise<void> {
    await this.db.updateTable('primaries').set({ state, message }).where((eb) => eb.and(columns('', id))).execute();
  }

  /** Forgets a primary; its relations go with it (ON DELETE CASCADE). */
  async deletePrimary(id: ObjectIdentity): Promise<void> {
    await this.db.deleteFrom('primaries').where((eb) => eb.and(columns('', id))).execute();
  }

  async counts(): Promise<{ primaries: number; relations: number }> {
    const p = await this.db.selectFrom('primaries').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
    const r = await this.db.selectFrom('relations').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
    return { primaries: Number(p.n), relations: Number(r.n) };
  }
}

/** The in-memory key of a (source, copy) pair, as accountedFor() returns them. */
export function copyPairKey(source: ObjectIdentity, copy: ObjectIdentity): string {
  return compositeKey(identityKey(source), identityKey(copy));
}

/** The requirement whose values index a selector: the first `In` (matchLabels are `In` with one value). */
function anchorOf(selector: LabelSelector): SelectorRequirement | undefined {
  return selector.requirements.find((r) => r.operator === 'In' && r.values.length > 0);
}

function toPrimary(row: PrimariesTable): PrimaryRecord {
  return {
    id: fromColumns('', row),
    uid: row.uid,
    copy: { cluster: row.copy_cluster, group: row.group, resource: row.resource, namespace: row.copy_namespace, name: row.copy_name },
    state: row.state,
    message: row.message,
    lastSyncedAt: row.last_synced_at,
  };
}

function toRelation(row: RelationsTable): RelationRecord {
  return {
    primary: fromColumns('primary_', row),
    ruleId: row.rule_id,
    origin: row.origin,
    source: fromColumns('source_', row),
    destination: fromColumns('dest_', row),
    state: row.state,
    contentHash: row.content_hash,
    message: row.message,
    lastSyncedAt: row.last_synced_at,
  };
}

/** The same keys, in any order. */
function sameKeys(a: string[], b: string[]): boolean {
  if (a.length !== b.length) return false;
  a.sort();
  b.sort();
  return a.every((k, i) => k === b[i]);
}
