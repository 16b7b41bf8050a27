/**
 * The rows of one reconcile, written in one SQLite transaction: the
 * primary's row, exactly the given relations and selectors. When the caller
 * knows what the store holds for the primary (KnownRows), only the
 * difference is written — a new primary's reconcile saves three times (the
 * names it is about to read, what its selector and inverse rules found, the
 * outcome), and rewriting every row each time cost more than the SQL.
 *
 * Statements are prepared once on better-sqlite3 and run synchronously, not
 * built by kysely per call: in a profile of an initial sync of 1,000
 * primaries, building and running the saves through kysely took about 6 s of
 * relsync's 33 s of CPU. The caller runs write() while it holds kysely's
 * connection (Kysely.connection()), so no kysely transaction is open on the
 * same connection meanwhile.
 */
import type BetterSqlite3 from 'better-sqlite3';
import { columns, identityKey, type ObjectIdentity } from '../core/identity.js';
import { compositeKey } from '../core/composite-key.js';
import { selectorQuery } from '../core/label-selector.js';
import type { PrimaryRecord, RelationRecord } from './records.js';
import { anchorOf, selectorKeys, type SelectorRecord } from './selector-index.js';

type Relation = Omit<RelationRecord, 'lastSyncedAt' | 'primary'>;

/** What one reconcile leaves in the store: its primary's row, and exactly these relations and selectors. */
export interface ReconcileRows {
  readonly primary: Omit<PrimaryRecord, 'lastSyncedAt'>;
  readonly relations: readonly Relation[];
  readonly selectors: readonly SelectorRecord[];
}

/** What the store holds for the primary, when the caller knows it (relation-store.ts KnownRows). */

export interface HeldRows {
  readonly relations: readonly Relation[];
  readonly selectorKeys: readonly string[];
}

const IDENTITY = ['cluster', 'group', 'resource', 'namespace', 'name'] as const;
const prefixed = (prefix: string) => IDENTITY.map((c) => `${prefix}${c}`);
const quoted = (names: readonly string[]) => names.map((n) => `"${n}"`).join(', ');
const params = (names: readonly string[]) => names.map((n) => `@${n}`).join(', ');
const equal = (names: readonly string[]) => names.map((n) => `"${n}" = @${n}`).join(' AND ');

const PRIMARY_KEY = prefixed('');
const PRIMARY_COLUMNS = [...PRIMARY_KEY, 'uid', 'copy_cluster', 'copy_group', 'copy_resource', 'copy_namespace', 'copy_name', 'state', 'message', 'first_seen_at', 'last_synced_at', 'synced_version', 'copy_version', 'synced_config'];
const RELATION_OWNER = prefixed('primary_');
const RELATION_KEY = [...RELATION_OWNER, 'rule_id', ...prefixed('source_')];
const RELATION_VALUES = ['origin', ...prefixed('dest_'), 'state', 'content_hash', 'message', 'last_synced_at', 'source_version', 'dest_version'];
const SELECTOR_SCOPE = prefixed('source_').slice(0, 4);

export class ReconcileWrites {
  private readonly upsertPrimary: BetterSqlite3.Statement;
  private readonly primaryExists: BetterSqlite3.Statement;
  private readonly deleteRelations: BetterSqlite3.Statement;
  private readonly deleteRelation: BetterSqlite3.Statement;
  private readonly insertRelation: BetterSqlite3.Statement;
  private readonly updateRelation: BetterSqlite3.Statement;
  private readonly touchRelations: BetterSqlite3.Statement;
  private readonly deleteSelectors: BetterSqlite3.Statement;
  private readonly insertSelector: BetterSqlite3.Statement;
  private readonly insertTerm: BetterSqlite3.Statement;
  private readonly transaction: (rows: ReconcileRows, held: HeldRows | undefined, at: string) => void;

  constructor(private readonly sqlite: BetterSqlite3.Database) {
    const updates = PRIMARY_COLUMNS.filter((c) => !PRIMARY_KEY.includes(c) && c !== 'first_seen_at' && c !== 'last_synced_at');
    this.upsertPrimary = sqlite.prepare(
      `INSERT INTO primaries (${quoted(PRIMARY_COLUMNS)}) VALUES (${params(PRIMARY_COLUMNS)})
       ON CONFLICT (${quoted(PRIMARY_KEY)}) DO UPDATE SET ${updates.map((c) => `"${c}" = excluded."${c}"`).join(', ')},
         last_synced_at = coalesce(excluded.last_synced_at, primaries.last_synced_at)`,
    );
    this.primaryExists = sqlite.prepare(`SELECT 1 FROM primaries WHERE ${equal(PRIMARY_KEY)}`).pluck();
    this.deleteRelations = sqlite.prepare(`DELETE FROM relations WHERE ${equal(RELATION_OWNER)}`);
    // A relation's statements take their values by position (relationKey(), relationValues()): named
    // values meant an object of 23 properties per row, built with computed keys and looked up by
    // name, which took ~3 times SQLite's own time in a 500-row write.
    this.deleteRelation = sqlite.prepare(`DELETE FROM relations WHERE ${RELATION_KEY.map((c) => `"${c}" = ?`).join(' AND ')}`);
    this.insertRelation = sqlite.prepare(`INSERT INTO relations (${quoted([...RELATION_KEY, ...RELATION_VALUES])}) VALUES (${[...RELATION_KEY, ...RELATION_VALUES].map(() => '?').join(', ')})`);
    this.updateRelation = sqlite.prepare(`UPDATE relations SET ${RELATION_VALUES.map((c) => `"${c}" = ?`).join(', ')} WHERE ${RELATION_KEY.map((c) => `"${c}" = ?`).join(' AND ')}`);
    // What a full rewrite did to the rows it found unchanged: "last synced" moves for the synced ones.
    this.touchRelations = sqlite.prepare(`UPDATE relations SET last_synced_at = @at WHERE ${equal(RELATION_OWNER)} AND state = 'synced' AND last_synced_at IS NOT @at`);
    // Their terms go with them (ON DELETE CASCADE).
    this.deleteSelectors = sqlite.prepare(`DELETE FROM selectors WHERE ${equal(RELATION_OWNER)}`);
    const selectorColumns = [...RELATION_OWNER, 'rule_id', ...SELECTOR_SCOPE, 'requirements', 'selector_text', 'anchored'];
    this.insertSelector = sqlite.prepare(`INSERT INTO selectors (${quoted(selectorColumns)}) VALUES (${params(selectorColumns)})`);
    const termColumns = [...SELECTOR_SCOPE, 'label_key', 'label_value', ...RELATION_OWNER, 'rule_id'];
    this.insertTerm = sqlite.prepare(`INSERT INTO selector_terms (${quoted(termColumns)}) VALUES (${params(termColumns)})`);
    this.transaction = sqlite.transaction(({ primary, relations, selectors }: ReconcileRows, given: HeldRows | undefined, at: string) => {
      // Rows the caller believes held but whose primary is gone (nothing deletes a primary beside its
      // own reconcile today): written in full, so that the diff can never leave rows out.
      const held = given && this.primaryExists.get(columns('', primary.id)) !== undefined ? given : undefined;
      this.writePrimary(primary, at);
      this.writeRelations(primary.id, relations, held?.relations, at);
      if (!held || !sameKeys(held.selectorKeys, selectorKeys(selectors))) this.writeSelectors(primary.id, selectors);
    });
  }

  /** Writes the primary's row, exactly `relations` and exactly `selectors`; `held`: what the store holds now, if known. */
  write(rows: ReconcileRows, held: HeldRows | undefined, at: string): void {
    // Inside another transaction better-sqlite3 would quietly make this a savepoint of it: never expected.
    if (this.sqlite.inTransaction) throw new Error('a reconcile\'s rows are written in a transaction of their own, and another is open on the connection');
    this.transaction(rows, held, at);
  }

  private writePrimary(primary: Omit<PrimaryRecord, 'lastSyncedAt'>, at: string): void {
    this.upsertPrimary.run({
      ...columns('', primary.id),
      uid: primary.uid,
      copy_cluster: primary.copy.cluster,
      copy_group: primary.copy.group,
      copy_resource: primary.copy.resource,
      copy_namespace: primary.copy.namespace,
      copy_name: primary.copy.name,
      state: primary.state,
      message: primary.message,
      first_seen_at: at,
      last_synced_at: primary.state === 'synced' ? at : null,
      synced_version: primary.versions?.primary ?? null,
      copy_version: primary.versions?.copy ?? null,
      synced_config: primary.versions?.config ?? null,
    });
  }

  private writeRelations(primary: ObjectIdentity, relations: readonly Relation[], held: readonly Relation[] | undefined, at: string): void {
    const owner = columns('primary_', primary);
    const ownerValues = identityValues(primary);
    if (!held) {
      this.deleteRelations.run(owner);
      for (const r of relations) this.insertRelation.run(...relationKey(ownerValues, r), ...relationValues(r, at));
      return;
    }
    const before = new Map(held.map((r) => [keyOf(r), r]));
    for (const r of relations) {
      const had = before.get(keyOf(r));
      before.delete(keyOf(r));
      if (!had) this.insertRelation.run(...relationKey(ownerValues, r), ...relationValues(r, at));
      else if (valuesOf(had) !== valuesOf(r)) this.updateRelation.run(...relationValues(r, at), ...relationKey(ownerValues, r));
    }
    for (const gone of before.values()) this.deleteRelation.run(...relationKey(ownerValues, gone));
    this.touchRelations.run({ ...owner, at });
  }

  private writeSelectors(primary: ObjectIdentity, selectors: readonly SelectorRecord[]): void {
    const owner = columns('primary_', primary);
    this.deleteSelectors.run(owner);
    for (const sel of selectors) {
      const scope = { source_cluster: sel.scope.cluster, source_group: sel.scope.group, source_resource: sel.scope.resource, source_namespace: sel.scope.namespace };
      const anchor = anchorOf(sel.selector);
      this.insertSelector.run({ ...owner, rule_id: sel.ruleId, ...scope, requirements: JSON.stringify(sel.selector.requirements), selector_text: selectorQuery(sel.selector), anchored: anchor ? 1 : 0 });
      for (const value of anchor?.values ?? []) this.insertTerm.run({ ...scope, label_key: anchor!.key, label_value: value, ...owner, rule_id: sel.ruleId });
    }
  }
}

/** An identity's five columns' values, in IDENTITY's order. */
function identityValues(id: ObjectIdentity): string[] {
  return [id.cluster, id.group, id.resource, id.namespace, id.name];
}

/** The values of RELATION_KEY's columns, in order. */
function relationKey(owner: readonly string[], r: Relation): Array<string> {
  return [...owner, r.ruleId, ...identityValues(r.source)];
}

/** The values of RELATION_VALUES' columns, in order. */
function relationValues(r: Relation, at: string): Array<string | null> {
  return [
    r.origin,
    ...identityValues(r.destination),
    r.state,
    r.contentHash,
    r.message,
    r.state === 'synced' ? at : null,
    r.versions?.source ?? null,
    r.versions?.destination ?? null,
  ];
}

/** A relation's primary key within its primary's rows: the rule and the source. */
function keyOf(r: Relation): string {
  return compositeKey(r.ruleId, identityKey(r.source));
}

/** What an update would write, "last synced" aside. */
function valuesOf(r: Relation): string {
  return JSON.stringify([r.origin, identityKey(r.destination), r.state, r.contentHash, r.message, r.versions?.source ?? null, r.versions?.destination ?? null]);
}

/** The same keys, in any order. */
export function sameKeys(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  const sortedA = [...a].sort();
  const sortedB = [...b].sort();
  return sortedA.every((k, i) => k === sortedB[i]);
}
