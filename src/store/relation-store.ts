/**
 * The relationship store: what relsync knows between restarts. Reads answer
 * routing questions through indexes (no scan of all primaries per event);
 * each reconcile's writes happen in one transaction. The one object the rest
 * of relsync holds: the selector index (selector-index.ts) and the sweep's
 * whole-store queries (sweep-queries.ts) are reached through it.
 */
import type { Kysely } from 'kysely';
import { columns, fromColumns, identityKey, sameIdentity, type IdentityColumns, type ObjectIdentity } from '../core/identity.js';
import type { Database, PrimariesTable, PrimaryState, RelationState, RelationsTable } from './schema.js';
import { copyOfRow, MAX_STORED_MESSAGE, storedMessage, toPrimary, toRelation, type PrimaryRecord, type PrimaryVersions, type RelationRecord } from './records.js';
import * as selectorIndex from './selector-index.js';
import type { SelectorLabelKeys, SelectorRecord } from './selector-index.js';
import { AnchoredLabelKeys, type AnchoredKey } from './anchored-label-keys.js';
import * as sweepQueries from './sweep-queries.js';
import { TouchBatcher } from './touch-batcher.js';
import { preparedQuery, type PreparedQuery } from './prepared-query.js';
import type { OpenedStore } from './database.js';
import { ReconcileWrites, sameKeys } from './reconcile-writes.js';
import { isoTime, systemClock, type Clock } from '../util/clock.js';
import { heavyTurns } from '../util/heavy-turns.js';

/**
 * What writing (or ending) one relation row costs, as bytes of JSON parsing would (heavy-turns.ts):
 * 150 µs a row in a profile of 500-row writes when rows were bound by name, the time parsing ~20
 * KiB takes; ~50 µs since (reconcile-writes.ts), kept so that a few rows make a turn.
 */
export const ROW_BYTES = 16 * 1024;

/**
 * What a reconcile knows the store holds for its primary, because it read or
 * wrote those rows itself: only the reconcile of a primary writes its rows
 * (the work queue never runs one primary twice at once), so saveReconcile can
 * compare against this instead of reading the rows again. The caller's rule:
 * every write to the primary's rows after it read them (other than "last
 * synced" times) is a saveReconcile whose arguments become the new KnownRows,
 * or ends the reconcile without the final save (setPrimaryState before a
 * throw or a return). A write that breaks it would leave stale rows in place.
 */
export interface KnownRows {
  readonly primary: Pick<PrimaryRecord, 'uid' | 'copy' | 'state' | 'message' | 'versions'> | undefined;
  readonly relations: ReadonlyArray<Omit<RelationRecord, 'lastSyncedAt' | 'primary'>>;
  /** Of selectorsOf() or selectorKeys(). */
  readonly selectorKeys: readonly string[];
}

/** Keys the anchored set may grow by past twice what the store held, before it is read afresh. */
const ANCHORED_SLACK = 4096;

export class RelationStore {
  /** "Last synced" times of reconciles that found nothing new, written in batches. */
  private readonly touches: TouchBatcher;

  /** What every watch event and every reconcile asks, built once (prepared-query.ts). */
  private readonly byId: PreparedQuery<IdentityColumns<''>, PrimariesTable>;
  private readonly keyOfId: PreparedQuery<IdentityColumns<''>, Pick<PrimariesTable, 'name'>>;
  private readonly byCopy: PreparedQuery<Pick<PrimariesTable, 'copy_cluster' | 'copy_group' | 'copy_resource' | 'copy_namespace' | 'copy_name'>, PrimariesTable>;
  private readonly byPrimary: PreparedQuery<IdentityColumns<'primary_'>, RelationsTable>;
  private readonly bySource: PreparedQuery<IdentityColumns<'source_'>, RelationsTable>;
  private readonly byDestination: PreparedQuery<IdentityColumns<'dest_'>, IdentityColumns<'primary_'>>;
  private readonly claimsBesides: PreparedQuery<IdentityColumns<'dest_'> & IdentityColumns<'source_'> & IdentityColumns<'primary_'>, { n: number }>;

  private readonly db: Kysely<Database>;
  /** A reconcile's rows, in one transaction of statements prepared once (reconcile-writes.ts). */
  private readonly writes: ReconcileWrites;
  /** anchoredKeys(): the label keys stored selectors are anchored on, by scope, once read. */
  private anchored: AnchoredLabelKeys | undefined;
  private anchoredLoading: Promise<AnchoredLabelKeys> | undefined;
  /** Keys stored while a selectorLabelKeys() reads the store afresh, one set per read: kept when its answer replaces `anchored`. */
  private readonly addedWhileReading = new Set<AnchoredLabelKeys>();
  /** How many keys the set held when last read from the store (addAnchored() bounds its growth by it). */
  private anchoredAtRead = 0;

  constructor(
    store: Pick<OpenedStore, 'db' | 'sqlite'>,
    /** The time of day written down ("last synced", changes); default systemClock. */
    private readonly clock: Clock = systemClock,
  ) {
    const db = store.db;
    this.db = db;
    this.writes = new ReconcileWrites(store.sqlite);
    this.touches = new TouchBatcher(db, clock);
    this.byId = preparedQuery(db, identityParams(''), (p) => db.selectFrom('primaries').selectAll().where((eb) => eb.and(p)));
    this.keyOfId = preparedQuery(db, identityParams(''), (p) => db.selectFrom('primaries').select('name').where((eb) => eb.and(p)));
    this.byCopy = preparedQuery(db, ['copy_cluster', 'copy_group', 'copy_resource', 'copy_namespace', 'copy_name'], (p) => db.selectFrom('primaries').selectAll().where((eb) => eb.and(p)));
    this.byPrimary = preparedQuery(db, identityParams('primary_'), (p) => db.selectFrom('relations').selectAll().where((eb) => eb.and(p)));
    this.bySource = preparedQuery(db, identityParams('source_'), (p) => db.selectFrom('relations').selectAll().where((eb) => eb.and(p)));
    this.byDestination = preparedQuery(db, identityParams('dest_'), (p) =>
      db.selectFrom('relations').select(['primary_cluster', 'primary_group', 'primary_resource', 'primary_namespace', 'primary_name']).where((eb) => eb.and(p)),
    );
    // Asked once per relation a reconcile ends (a primary deleted with its 500 relations: 500 times).
    const pick = <K extends string>(p: Record<string, string>, keys: readonly K[]) => Object.fromEntries(keys.map((k) => [k, p[k]!])) as Record<K, string>;
    this.claimsBesides = preparedQuery(db, [...identityParams('dest_'), ...identityParams('source_'), ...identityParams('primary_')], (p) =>
      db
        .selectFrom('relations')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where((eb) => eb.and(pick(p, identityParams('dest_'))))
        .where((eb) => eb.and(pick(p, identityParams('source_'))))
        .where((eb) => eb.not(eb.and(pick(p, identityParams('primary_'))))),
    );
  }

  async primary(id: ObjectIdentity): Promise<PrimaryRecord | undefined> {
    const [row] = await this.byId(columns('', id));
    return row ? toPrimary(row) : undefined;
  }

  /** The primaries of one type in one cluster, their identities only (used on relist, never per event). */
  async primariesOfType(cluster: string, group: string, resource: string): Promise<ObjectIdentity[]> {
    const rows = await this.db.selectFrom('primaries').select(['cluster', 'group', 'resource', 'namespace', 'name']).where('cluster', '=', cluster).where('group', '=', group).where('resource', '=', resource).execute();
    return rows.map((row) => fromColumns('', row));
  }

  /** The stored primaries of a type in one namespace (by the primary key's prefix): a namespace's labels changed. */
  async primariesInNamespace(cluster: string, group: string, resource: string, namespace: string): Promise<ObjectIdentity[]> {
    const rows = await this.db.selectFrom('primaries').select(['cluster', 'group', 'resource', 'namespace', 'name']).where('cluster', '=', cluster).where('group', '=', group).where('resource', '=', resource).where('namespace', '=', namespace).execute();
    return rows.map((row) => fromColumns('', row));
  }

  /** Every primary of a cluster (or of all clusters), their identities only: a workspace bound again or unbound. */
  async primariesOfCluster(cluster: string | undefined): Promise<ObjectIdentity[]> {
    let query = this.db.selectFrom('primaries').select(['cluster', 'group', 'resource', 'namespace', 'name']);
    if (cluster !== undefined) query = query.where('cluster', '=', cluster);
    return (await query.execute()).map((row) => fromColumns('', row));
  }

  /** How many primaries of this cluster the store holds (a range of the primary key). */
  async countPrimaries(cluster: string): Promise<number> {
    const row = await this.db.selectFrom('primaries').select((eb) => eb.fn.countAll<number>().as('n')).where('cluster', '=', cluster).executeTakeFirst();
    return Number(row?.n ?? 0);
  }

  /** How many primaries the store holds in all, and how many clusters hold them. */
  async countAllPrimaries(): Promise<{ primaries: number; clusters: number }> {
    const row = await this.db.selectFrom('primaries').select((eb) => [eb.fn.countAll<number>().as('n'), eb.fn.count<number>('cluster').distinct().as('clusters')]).executeTakeFirst();
    return { primaries: Number(row?.n ?? 0), clusters: Number(row?.clusters ?? 0) };
  }

  /** Whether the store holds this primary (its key only: no row is read). */
  async hasPrimary(id: ObjectIdentity): Promise<boolean> {
    return (await this.keyOfId(columns('', id))).length > 0;
  }

  /** Whether any primary of this cluster is stored (for forgetting an unbound kcp workspace). */
  /** Whether the store knows any primary at all (a new or lost store knows none). */
  async knowsAnyPrimary(): Promise<boolean> {
    return (await this.db.selectFrom('primaries').select('name').limit(1).executeTakeFirst()) !== undefined;
  }

  async hasPrimaries(cluster: string): Promise<boolean> {
    return (await this.db.selectFrom('primaries').select('name').where('cluster', '=', cluster).limit(1).executeTakeFirst()) !== undefined;
  }

  /** Primaries whose copies are of this type in this cluster, and those copies (used on relist of copies, never per event). */
  async primariesByCopyType(copyCluster: string, group: string, resource: string): Promise<Array<{ id: ObjectIdentity; copy: ObjectIdentity }>> {
    const rows = await this.db.selectFrom('primaries').select(['cluster', 'group', 'resource', 'namespace', 'name', 'copy_cluster', 'copy_group', 'copy_resource', 'copy_namespace', 'copy_name']).where('copy_cluster', '=', copyCluster).where('copy_group', '=', group).where('copy_resource', '=', resource).execute();
    return rows.map((row) => ({ id: fromColumns('', row), copy: copyOfRow(row) }));
  }

  /**
   * Relations whose source or destination is of this type in this cluster, their three identities
   * only (used on relist to find objects that vanished while nobody watched).
   */
  async relationsTouchingType(cluster: string, group: string, resource: string): Promise<Array<Pick<RelationRecord, 'primary' | 'source' | 'destination'>>> {
    const endpoints = [...identityParams('primary_'), ...identityParams('source_'), ...identityParams('dest_')];
    const bySource = await this.db.selectFrom('relations').select(endpoints).where('source_cluster', '=', cluster).where('source_group', '=', group).where('source_resource', '=', resource).execute();
    const byDest = await this.db.selectFrom('relations').select(endpoints).where('dest_cluster', '=', cluster).where('dest_group', '=', group).where('dest_resource', '=', resource).execute();
    return [...bySource, ...byDest].map((row) => ({ primary: fromColumns('primary_', row), source: fromColumns('source_', row), destination: fromColumns('dest_', row) }));
  }


  /** The primary whose copy is this object, found by index on the copy's location. */
  async primaryByCopy(copy: ObjectIdentity): Promise<PrimaryRecord | undefined> {
    const [row] = await this.byCopy({ copy_cluster: copy.cluster, copy_group: copy.group, copy_resource: copy.resource, copy_namespace: copy.namespace, copy_name: copy.name });
    return row ? toPrimary(row) : undefined;
  }

  async relationsOf(primary: ObjectIdentity): Promise<RelationRecord[]> {
    return (await this.byPrimary(columns('primary_', primary))).map(toRelation);
  }

  /**
   * The primaries that own `id` as a related source or as a related copy,
   * through the by-source and by-destination indexes.
   */
  async ownersOf(id: ObjectIdentity): Promise<ObjectIdentity[]> {
    const seen = new Map<string, ObjectIdentity>();
    for (const r of await this.relationsBySource(id)) seen.set(identityKey(r.primary), r.primary);
    for (const p of await this.ownersByDestination(id)) seen.set(identityKey(p), p);
    return [...seen.values()];
  }

  /** The relations that copy `id` (by-source index): the event router tells which of them one change concerns. */
  async relationsBySource(id: ObjectIdentity): Promise<RelationRecord[]> {
    return (await this.bySource(columns('source_', id))).map(toRelation);
  }

  /** The primaries with a relation whose copy is `id` (by-destination index). */
  async ownersByDestination(id: ObjectIdentity): Promise<ObjectIdentity[]> {
    return (await this.byDestination(columns('dest_', id))).map((row) => fromColumns('primary_', row));
  }

  /**
   * How many relations of primaries other than `except` copy this same
   * `source` to this destination: the claims that keep its copy alive. A
   * relation of another source that names the same destination (a conflict:
   * the copy's marks name a different source) never does.
   */
  async otherClaimsOn(dest: ObjectIdentity, source: ObjectIdentity, except: ObjectIdentity): Promise<number> {
    const [row] = await this.claimsBesides({ ...columns('dest_', dest), ...columns('source_', source), ...columns('primary_', except) });
    if (!row) throw new Error('count(*) answered no row');
    return Number(row.n);
  }

  /**
   * Whether other primaries copy this same `source` to this destination (otherClaimsOn); if so the
   * copy is left to them, and those whose rows say they found nothing there (records.ts
   * leftNothing) are told otherwise — their destination's version unknown — so that their next
   * reconcile, and the end of their claim, read the copy instead of skipping it.
   */
  async handOver(dest: ObjectIdentity, source: ObjectIdentity, except: ObjectIdentity): Promise<boolean> {
    if ((await this.otherClaimsOn(dest, source, except)) === 0) return false;
    await this.unknownAt({ dest, source, except });
    return true;
  }

  /**
   * Rows that say they found nothing at `dest` (state pending, destination version '') say
   * "unknown" instead: of one primary's relation (`primary`, `ruleId`), or of every primary but
   * `except`. For a copy about to be written there, or handed over (handOver).
   */
  async unknownAt(at: { readonly dest: ObjectIdentity; readonly source: ObjectIdentity } & ({ readonly primary: ObjectIdentity; readonly ruleId: string } | { readonly except: ObjectIdentity })): Promise<void> {
    await this.db
      .updateTable('relations')
      .set({ dest_version: null })
      .where((eb) => eb.and({ ...columns('dest_', at.dest), ...columns('source_', at.source), state: 'pending', dest_version: '' }))
      .where((eb) => ('primary' in at ? eb.and({ ...columns('primary_', at.primary), rule_id: at.ruleId }) : eb.not(eb.and(columns('primary_', at.except)))))
      .execute();
  }

  /** Whether the store accounts for `copy` as the copy of `source` (see sweep-queries.ts). */
  accounts(source: ObjectIdentity, copy: ObjectIdentity): Promise<boolean> {
    return sweepQueries.accounts(this.db, source, copy);
  }

  /**
   * Records one reconcile of a primary: its row and exactly these relations
   * (rows of the primary not listed here are removed), in one transaction.
   */
  async saveReconcile(
    primary: Omit<PrimaryRecord, 'lastSyncedAt'>,
    relations: ReadonlyArray<Omit<RelationRecord, 'lastSyncedAt' | 'primary'>>,
    selectors: readonly SelectorRecord[] = [],
    known?: KnownRows,
  ): Promise<void> {
    const at = isoTime(this.clock);
    primary = { ...primary, message: storedMessage(primary.message) };
    relations = relations.map((r) => (r.message !== null && r.message.length > MAX_STORED_MESSAGE ? { ...r, message: storedMessage(r.message) } : r));
    // Known before the rows are: an event right after the write looks its labels up by them.
    const keys = selectorIndex.labelKeysOf(selectors);
    if (keys.length > 0) {
      await this.anchoredKeys();
      this.addAnchored(keys);
    }
    // Most reconciles (every one of a sweep with nothing to do) find what the
    // store already says: then only "last synced" moves, in a batch.
    if (await this.holds(primary, relations, selectors, known)) {
      if (primary.state === 'synced') this.touches.touch(primary.id, at);
      return;
    }
    // Hundreds of rows take tens of ms in one transaction: at the write's turn on the event loop (heavy-turns.ts).
    await heavyTurns.turn(relations.length * ROW_BYTES, primary.id.cluster);
    // Only this reconcile writes these rows (KnownRows): with `known`, only what differs is written.
    await this.db.connection().execute(async () => this.writes.write({ primary, relations, selectors }, known, at));
    // Again now that the rows are there: a sweep's read that began after the keys were added above
    // and read the store before the rows were written has replaced the set without them.
    this.addAnchored(keys);
  }

  /** Anchoring keys held in memory now (a superset of the store's, bounded by addAnchored()). */
  get anchoredKeysHeld(): number {
    return this.anchored?.size ?? 0;
  }

  /** Adds to the set current now (a sweep may have replaced it since the caller's await), and to each read in flight. */
  private addAnchored(keys: readonly AnchoredKey[]): void {
    for (const key of keys) {
      this.anchored?.add(key);
      for (const added of this.addedWhileReading) added.add(key);
    }
    // Keys of selectors removed since the last read stay in the set: a tenant that keeps changing
    // the label keys its selectors are anchored on would grow it until the next sweep. Past twice
    // what the store held at that read (and a slack), the next lookup reads the store afresh.
    if (this.anchored && this.anchored.size > 2 * this.anchoredAtRead + ANCHORED_SLACK) this.anchored = undefined;
  }

  /** True when the store holds exactly this reconcile's outcome already. */
  private async holds(
    primary: Omit<PrimaryRecord, 'lastSyncedAt'>,
    relations: ReadonlyArray<Omit<RelationRecord, 'lastSyncedAt' | 'primary'>>,
    selectors: readonly SelectorRecord[],
    known: KnownRows | undefined,
  ): Promise<boolean> {
    const stored = known ? known.primary : await this.primary(primary.id);
    if (!stored || stored.uid !== primary.uid || !sameIdentity(stored.copy, primary.copy) || stored.state !== primary.state || stored.message !== primary.message) return false;
    if (versionsKey(stored.versions) !== versionsKey(primary.versions)) return false;
    const relationKey = (r: Omit<RelationRecord, 'lastSyncedAt' | 'primary'>) =>
      JSON.stringify([r.ruleId, r.origin, identityKey(r.source), identityKey(r.destination), r.state, r.contentHash, r.message, r.versions?.source ?? null, r.versions?.destination ?? null]);
    if (!sameKeys((known?.relations ?? (await this.relationsOf(primary.id))).map(relationKey), relations.map(relationKey))) return false;
    return sameKeys([...(known?.selectorKeys ?? (await selectorIndex.storedSelectorKeys(this.db, primary.id)))], selectorIndex.selectorKeys(selectors));
  }

  /** A sweep found the primary as its last complete sync left it (controller/sweep-skip.ts): "last synced" moves, in a batch. */
  confirmSynced(id: ObjectIdentity): void {
    this.touches.touch(id, isoTime(this.clock));
  }

  /** Writes the pending "last synced" times in one transaction (also called by sweeps and at shutdown). */
  flushTouches(): Promise<void> {
    return this.touches.flush();
  }

  /**
   * The primaries whose selector (for some rule) matches these labels, for an object in `scope`;
   * only labels some selector is anchored on are looked up (`keys`, a sweep's snapshot of
   * selectorLabelKeys(), or the store's own): a tenant's object with ten thousand labels costs
   * lookups of the keys selectors use, not ten thousand queries.
   */
  async selectorOwners(scope: Omit<ObjectIdentity, 'name'>, labels: Readonly<Record<string, string>> | undefined, keys?: SelectorLabelKeys): Promise<ObjectIdentity[]> {
    return selectorIndex.selectorOwners(this.db, scope, labels, keys ?? (await this.anchoredKeys()));
  }

  /**
   * selectorLabelKeys(), read once and added to as this process stores selectors: a superset of
   * what is stored (keys of selectors removed since stay until the next sweep reads them afresh,
   * below), which costs at most a lookup that finds nothing. Only this process writes its store's
   * selectors.
   */
  private anchoredKeys(): Promise<AnchoredLabelKeys> {
    if (this.anchored) return Promise.resolve(this.anchored);
    if (this.anchoredLoading) return this.anchoredLoading;
    const loading = this.readAnchored(false).then((read) => read.current);
    // A failed read is tried again by the next caller.
    const forget = () => void (this.anchoredLoading === loading && (this.anchoredLoading = undefined));
    loading.then(forget, forget);
    return (this.anchoredLoading = loading);
  }

  /**
   * Which label keys anchor stored selectors, by scope (selector-index.ts): a snapshot for a
   * sweep's many lookups. It also replaces what anchoredKeys() holds, so that keys of selectors
   * gone since (a tenant's namespaces made and deleted) do not pile up between restarts.
   */
  async selectorLabelKeys(): Promise<SelectorLabelKeys> {
    return (await this.readAnchored(true)).stored;
  }

  /**
   * Reads the keys the store holds and installs them with the keys stored while it read (a
   * reconcile that added its keys before its rows were written, and adds them again after, may
   * have done both while the read was under way, its rows not in what the read found), in the same
   * step as the read's end: no key added in between is lost. `replace`: over what is held (a
   * sweep's read); otherwise only where nothing is held (another read got there first).
   */
  private async readAnchored(replace: boolean): Promise<{ stored: SelectorLabelKeys; current: AnchoredLabelKeys }> {
    const added = new AnchoredLabelKeys();
    this.addedWhileReading.add(added);
    try {
      const stored = await selectorIndex.selectorLabelKeys(this.db);
      const read = new AnchoredLabelKeys([...stored, ...added]);
      if (replace || !this.anchored) {
        this.anchored = read;
        this.anchoredAtRead = read.size;
      }
      return { stored, current: this.anchored! };
    } finally {
      this.addedWhileReading.delete(added);
    }
  }

  /** A primary's stored selectors: by rule, in their query form (`app=one`), and as keys for KnownRows. */
  selectorsOf(primary: ObjectIdentity): Promise<Array<{ ruleId: string; selector: string; scope: string; key: string }>> {
    return selectorIndex.selectorsOf(this.db, primary);
  }

  /** Every primary with its relations, a page at a time (for a sweep's skip checks). */
  primariesWithRelations(pageSize?: number, relationsPerPage?: number): AsyncGenerator<sweepQueries.PrimaryWithRelations[]> {
    return sweepQueries.primariesWithRelations(this.db, pageSize, relationsPerPage);
  }

  /** Drops primaries (and, by cascade, their relations) of types no longer configured. */
  forgetPrimariesOtherThan(types: ReadonlyArray<{ group: string; resource: string }>): Promise<{ primaries: number; relations: number }> {
    return sweepQueries.forgetPrimariesOtherThan(this.db, types);
  }

  /**
   * Records the outcome of one relation of a primary synced on its own (a change that concerned
   * only it: sync/edge-sync.ts); false when the store has no such relation (the primary's rows
   * changed meanwhile: the caller falls back to the full reconcile).
   */
  async saveRelationOutcome(
    relation: Pick<RelationRecord, 'primary' | 'ruleId' | 'source' | 'destination'>,
    outcome: Pick<RelationRecord, 'state' | 'contentHash' | 'message' | 'versions'>,
  ): Promise<boolean> {
    const at = isoTime(this.clock);
    const result = await this.db
      .updateTable('relations')
      .set({
        state: outcome.state,
        content_hash: outcome.contentHash,
        message: storedMessage(outcome.message),
        source_version: outcome.versions?.source ?? null,
        dest_version: outcome.versions?.destination ?? null,
        ...(outcome.state === 'synced' ? { last_synced_at: at } : {}),
      })
      .where((eb) => eb.and({ ...columns('primary_', relation.primary), ...columns('source_', relation.source), ...columns('dest_', relation.destination), rule_id: relation.ruleId }))
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  /** A state other than a complete sync's: the versions of the last one no longer vouch for anything. */
  async setPrimaryState(id: ObjectIdentity, state: PrimaryState, message: string | null): Promise<void> {
    await this.db.updateTable('primaries').set({ state, message: storedMessage(message), synced_version: null, copy_version: null, synced_config: null }).where((eb) => eb.and(columns('', id))).execute();
  }

  /** Forgets a primary; its relations go with it (ON DELETE CASCADE). */
  async deletePrimary(id: ObjectIdentity): Promise<void> {
    await this.db.deleteFrom('primaries').where((eb) => eb.and(columns('', id))).execute();
  }

  /** Rows of each table, by state (one scan of each, at a scrape). */
  async counts(): Promise<{ primaries: Partial<Record<PrimaryState, number>>; relations: Partial<Record<RelationState, number>> }> {
    const p = await this.db.selectFrom('primaries').select((eb) => ['state', eb.fn.countAll<number>().as('n')]).groupBy('state').execute();
    const r = await this.db.selectFrom('relations').select((eb) => ['state', eb.fn.countAll<number>().as('n')]).groupBy('state').execute();
    return {
      primaries: Object.fromEntries(p.map((row) => [row.state, Number(row.n)])),
      relations: Object.fromEntries(r.map((row) => [row.state, Number(row.n)])),
    };
  }
}

function versionsKey(v: PrimaryVersions | null | undefined): string {
  return v ? JSON.stringify([v.primary, v.copy, v.config]) : '';
}


/** The column names of an identity with a prefix, as parameters of a prepared query. */
function identityParams<P extends string>(prefix: P): Array<keyof IdentityColumns<P> & string> {
  return Object.keys(columns(prefix, { cluster: '', group: '', resource: '', namespace: '', name: '' })) as Array<keyof IdentityColumns<P> & string>;
}
