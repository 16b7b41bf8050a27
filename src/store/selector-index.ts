/**
 * The selector index: the selectors each primary's selector rules rendered,
 * stored so that an event on any object finds the primaries whose selectors
 * match it through an index instead of evaluating every primary's rules.
 * A selector is indexed by the values of one `In` requirement (its anchor);
 * the few without one are read for every object of their scope.
 */
import type { Kysely } from 'kysely';
import { columns, fromColumns, identityKey, type IdentityColumns, type ObjectIdentity } from '../core/identity.js';
import { matchesSelector, type LabelSelector, type SelectorRequirement } from '../core/label-selector.js';
import { compositeKey } from '../core/composite-key.js';
import type { Database, SelectorsTable } from './schema.js';
import { preparedQuery, type PreparedQuery } from './prepared-query.js';
import { AnchoredLabelKeys, scopeKeyOf, UNANCHORED, type AnchoredKey, type LabelScope } from './anchored-label-keys.js';

/** A primary's rendered selector for one rule, and where it applies. */
export interface SelectorRecord {
  readonly ruleId: string;
  /** Cluster, group, resource and namespace of the objects it selects (name unused). */
  readonly scope: Omit<ObjectIdentity, 'name'>;
  readonly selector: LabelSelector;
}

/**
 * The stored selectors of a primary as comparison keys; selectorKeys() gives
 * the same keys for selectors about to be saved, so a reconcile that renders
 * what is stored can skip the write.
 */
export async function storedSelectorKeys(db: Kysely<Database>, primary: ObjectIdentity): Promise<string[]> {
  const rows = await queriesOf(db).ofPrimary(columns('primary_', primary));
  return rows.map(storedKey);
}

/** A stored selector's comparison key: the same as selectorKeys() gives for the selector it was saved from. */
function storedKey(r: Pick<SelectorsTable, 'rule_id' | 'source_cluster' | 'source_group' | 'source_resource' | 'source_namespace' | 'requirements'>): string {
  return JSON.stringify([r.rule_id, r.source_cluster, r.source_group, r.source_resource, r.source_namespace, r.requirements]);
}

export function selectorKeys(selectors: readonly SelectorRecord[]): string[] {
  // The row replaceSelectors() writes for the selector, keyed as a stored one.
  return selectors.map((x) => storedKey({ rule_id: x.ruleId, source_cluster: x.scope.cluster, source_group: x.scope.group, source_resource: x.scope.resource, source_namespace: x.scope.namespace, requirements: JSON.stringify(x.selector.requirements) }));
}

/**
 * The primaries whose selector (for some rule) matches these labels, for
 * an object in `scope`: candidates by indexed label terms, plus the few
 * selectors without one, then the whole selector evaluated.
 */
export async function selectorOwners(db: Kysely<Database>, scope: LabelScope, labels: Readonly<Record<string, string>> | undefined, keys: SelectorLabelKeys): Promise<ObjectIdentity[]> {
  const where = { source_cluster: scope.cluster, source_group: scope.group, source_resource: scope.resource, source_namespace: scope.namespace };
  const queries = queriesOf(db);
  const candidates = new Map<string, { primary: ObjectIdentity; requirements: string }>();
  const consider = (rows: Array<IdentityColumns<'primary_'> & { rule_id: string; requirements: string }>) => {
    for (const row of rows) candidates.set(compositeKey(identityKey(fromColumns('primary_', row)), row.rule_id), { primary: fromColumns('primary_', row), requirements: row.requirements });
  };
  const own = labels ?? {};
  const anchored = keys.keysIn(scopeKeyOf(scope));
  const lookUp = async (key: string, value: unknown) => {
    // A tenant's own API server may answer with labels that are not strings: no selector matches those.
    if (typeof value === 'string' && key !== UNANCHORED) consider(await queries.byTerm({ ...where, label_key: key, label_value: value }));
  };
  // Whichever is shorter: the scope's anchoring keys read off the labels (an object's thousands
  // of others then cost nothing), or the labels looked up among the keys. A few keys are read off
  // without counting the labels: walking or counting a map of thousands of keys costs milliseconds
  // before the first (V8 collects them all first).
  if (anchored.size <= FEW_ANCHORS || anchored.size <= Object.keys(own).length) {
    for (const key of anchored) if (Object.hasOwn(own, key)) await lookUp(key, own[key]);
  } else {
    for (const [key, value] of Object.entries(own)) if (anchored.has(key)) await lookUp(key, value);
  }
  if (anchored.has(UNANCHORED)) consider(await queries.unanchored(where));
  const owners = new Map<string, ObjectIdentity>();
  for (const { primary, requirements } of candidates.values()) {
    const selector: LabelSelector = { requirements: JSON.parse(requirements) as SelectorRequirement[] };
    if (matchesSelector(selector, labels)) owners.set(identityKey(primary), primary);
  }
  return [...owners.values()];
}

/** Up to this many anchoring keys in a scope, they are read off an object's labels without counting them. */
const FEW_ANCHORS = 64;

/**
 * Which label keys anchor some stored selector, per scope, and which scopes have selectors without
 * an anchor: a caller that looks up many objects at once (a sweep) passes them to selectorOwners,
 * which then asks nothing about the labels no selector is anchored on. A snapshot: the caller
 * compares it with a fresh one when it is done, since a reconcile may store new selectors meanwhile.
 */
export type SelectorLabelKeys = AnchoredLabelKeys;

export async function selectorLabelKeys(db: Kysely<Database>): Promise<SelectorLabelKeys> {
  const keys = new AnchoredLabelKeys();
  const terms = await db.selectFrom('selector_terms').select(['source_cluster', 'source_group', 'source_resource', 'source_namespace', 'label_key']).distinct().execute();
  for (const t of terms) keys.add({ scope: scopeKeyOf({ cluster: t.source_cluster, group: t.source_group, resource: t.source_resource, namespace: t.source_namespace }), labelKey: t.label_key });
  const unanchored = await db.selectFrom('selectors').select(['source_cluster', 'source_group', 'source_resource', 'source_namespace']).where('anchored', '=', 0).distinct().execute();
  for (const u of unanchored) keys.add({ scope: scopeKeyOf({ cluster: u.source_cluster, group: u.source_group, resource: u.source_resource, namespace: u.source_namespace }), labelKey: UNANCHORED });
  return keys;
}

/** The keys selectorLabelKeys() would hold for these selectors once they are stored. */
export function labelKeysOf(selectors: readonly SelectorRecord[]): AnchoredKey[] {
  return selectors.map(({ scope, selector }) => ({ scope: scopeKeyOf(scope), labelKey: anchorOf(selector)?.key ?? UNANCHORED }));
}

/** A primary's stored selectors in their query form (`app=one`), by rule. */
export async function selectorsOf(db: Kysely<Database>, primary: ObjectIdentity): Promise<Array<{ ruleId: string; selector: string; scope: string; key: string }>> {
  const rows = await queriesOf(db).ofPrimary(columns('primary_', primary));
  return rows.map((r) => ({ ruleId: r.rule_id, selector: r.selector_text, scope: `${r.source_cluster}:${r.source_namespace}`, key: storedKey(r) }));
}

/** The requirement whose values index a selector: its first `In` with values (matchLabels are `In` with one value). */
export function anchorOf(selector: LabelSelector): SelectorRequirement | undefined {
  return selector.requirements.find((r) => r.operator === 'In' && r.values.length > 0);
}

type Scope = Pick<SelectorsTable, 'source_cluster' | 'source_group' | 'source_resource' | 'source_namespace'>;
type OwnerRow = IdentityColumns<'primary_'> & { rule_id: string; requirements: string };
interface SelectorQueries {
  readonly ofPrimary: PreparedQuery<IdentityColumns<'primary_'>, SelectorsTable>;
  readonly byTerm: PreparedQuery<Scope & { label_key: string; label_value: string }, OwnerRow>;
  readonly unanchored: PreparedQuery<Scope, OwnerRow>;
}

/** The selector queries every event and reconcile runs, built once per database (prepared-query.ts). */
const prepared = new WeakMap<Kysely<Database>, SelectorQueries>();

function queriesOf(db: Kysely<Database>): SelectorQueries {
  let queries = prepared.get(db);
  if (queries) return queries;
  const scope = ['source_cluster', 'source_group', 'source_resource', 'source_namespace'] as const;
  queries = {
    ofPrimary: preparedQuery(db, ['primary_cluster', 'primary_group', 'primary_resource', 'primary_namespace', 'primary_name'], (p) => db.selectFrom('selectors').selectAll().where((eb) => eb.and(p))),
    byTerm: preparedQuery(db, [...scope, 'label_key', 'label_value'], (p) =>
      db
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
        .where('t.source_cluster', '=', p.source_cluster)
        .where('t.source_group', '=', p.source_group)
        .where('t.source_resource', '=', p.source_resource)
        .where('t.source_namespace', '=', p.source_namespace)
        .where('t.label_key', '=', p.label_key)
        .where('t.label_value', '=', p.label_value),
    ),
    unanchored: preparedQuery(db, [...scope], (p) =>
      db
        .selectFrom('selectors')
        .select(['primary_cluster', 'primary_group', 'primary_resource', 'primary_namespace', 'primary_name', 'rule_id', 'requirements'])
        .where((eb) => eb.and(p))
        .where('anchored', '=', 0),
    ),
  };
  prepared.set(db, queries);
  return queries;
}
