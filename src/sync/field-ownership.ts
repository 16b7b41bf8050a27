/**
 * Copies written before relsync applied them (server-side apply) were
 * created and replaced by requests without a field manager: the API server
 * recorded their fields as owned by an Update of manager "unknown". An
 * apply never lets go of fields another entry still owns, so a key the
 * source drops would stay on such a copy for good. Before its first apply,
 * a copy that still carries the old bookkeeping annotation gets those
 * entries turned into relsync's apply entry (what client-go's csaupgrade
 * does for kubectl), in one JSON patch guarded by the resourceVersion — only
 * what relsync wrote: the old record names the labels and annotations that
 * came from the source.
 */
import { jsonText } from '../util/json-text.js';
import { COPIED_ANNOTATIONS_ANNOTATION, COPIED_LABELS_ANNOTATION, KEY_PREFIX } from '../core/relsync-keys.js';

/** The manager the API server names for requests without one (relsync before it applied its copies). */
const OLD_MANAGER = 'unknown';

interface ManagedFieldsEntry {
  readonly manager?: string;
  readonly operation?: string;
  readonly apiVersion?: string;
  readonly time?: string;
  readonly fieldsType?: string;
  readonly fieldsV1?: Record<string, unknown>;
  readonly subresource?: string;
}

/** The label and annotation keys a copy written before relsync applied its copies took from its source (its old record), or undefined. */
export function oldRecordOf(annotations: Readonly<Record<string, string>> | undefined): OldRecord | undefined {
  const labels = annotations?.[COPIED_LABELS_ANNOTATION];
  const annots = annotations?.[COPIED_ANNOTATIONS_ANNOTATION];
  if (labels === undefined && annots === undefined) return undefined;
  const keys = (list: string | undefined) => (list ?? '').split(',').filter(Boolean);
  return { labels: keys(labels), annotations: keys(annots) };
}

export interface OldRecord {
  readonly labels: readonly string[];
  readonly annotations: readonly string[];
}

/**
 * The managed fields with relsync's Update entries (main resource) folded into one Apply entry of
 * `manager`: always its own Update entries (a POST of relsync's, see copy-writer.ts), and, given
 * `old` (a copy written before relsync applied its copies), those of manager "unknown" — but of
 * their labels and annotations only the keys the old record names and relsync's own `relsync.dev/`
 * keys: whatever else "unknown" owns there (a webhook's label set at create) stays its own.
 * Undefined when there is nothing to fold (hasFieldsToFold() says whether there is). The Apply
 * entry is stamped `at` (ms since the epoch), as the API server stamps the entries it writes.
 */
export function upgradedManagedFields(managedFields: unknown, manager: string, at: number, old?: OldRecord): ManagedFieldsEntry[] | undefined {
  if (!Array.isArray(managedFields)) return undefined;
  const entries = managedFields as ManagedFieldsEntry[];
  const foldable = foldableBy(manager, old);
  const folded = entries.filter(foldable);
  if (folded.length === 0) return undefined;
  const applied = entries.find((e) => e.operation === 'Apply' && e.manager === manager && !e.subresource);
  let fields: Record<string, unknown> = applied?.fieldsV1 ?? {};
  const kept: ManagedFieldsEntry[] = [];
  for (const e of folded) {
    const { mine, theirs } = e.manager === manager || !old ? { mine: e.fieldsV1 ?? {}, theirs: undefined } : splitOldFields(e.fieldsV1 ?? {}, old);
    fields = unionFields(fields, mine);
    if (theirs) kept.push({ ...e, fieldsV1: theirs });
  }
  const entry: ManagedFieldsEntry = {
    manager,
    operation: 'Apply',
    apiVersion: applied?.apiVersion ?? folded[0]!.apiVersion,
    time: new Date(at).toISOString().replace(/\.\d+Z$/, 'Z'),
    fieldsType: 'FieldsV1',
    fieldsV1: fields,
  };
  return [...entries.filter((e) => !foldable(e) && e !== applied), ...kept, entry];
}

/** Whether upgradedManagedFields() would fold anything: relsync's Update entries are still there. */
export function hasFieldsToFold(managedFields: unknown, manager: string, old?: OldRecord): boolean {
  return Array.isArray(managedFields) && (managedFields as ManagedFieldsEntry[]).some(foldableBy(manager, old));
}

/** An Update entry of the main resource that is relsync's (or, given `old`, "unknown"'s). */
function foldableBy(manager: string, old: OldRecord | undefined): (e: ManagedFieldsEntry) => boolean {
  return (e) => e.operation === 'Update' && !e.subresource && e.fieldsType === 'FieldsV1' && (e.manager === manager || (old !== undefined && e.manager === OLD_MANAGER));
}

/**
 * An old "unknown" entry's fields as relsync's (every field outside metadata — relsync wrote
 * them all — and of the labels and annotations the keys the old record names or relsync's own)
 * and the rest (undefined when nothing is left).
 */
function splitOldFields(fieldsV1: Record<string, unknown>, old: OldRecord): { mine: Record<string, unknown>; theirs: Record<string, unknown> | undefined } {
  const mine: Record<string, unknown> = {};
  const theirs: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(fieldsV1)) {
    if (k !== 'f:metadata' || !isObject(v)) {
      mine[k] = v;
      continue;
    }
    const metaMine: Record<string, unknown> = {};
    const metaTheirs: Record<string, unknown> = {};
    for (const [mk, mv] of Object.entries(v)) {
      const record = mk === 'f:labels' ? old.labels : mk === 'f:annotations' ? old.annotations : undefined;
      if (!record || !isObject(mv)) {
        metaTheirs[mk] = mv;
        continue;
      }
      const ours: Record<string, unknown> = {};
      const others: Record<string, unknown> = {};
      for (const [key, leaf] of Object.entries(mv)) {
        const name = key.startsWith('f:') ? key.slice(2) : undefined;
        if (name !== undefined && (record.includes(name) || name.startsWith(KEY_PREFIX))) ours[key] = leaf;
        else others[key] = leaf;
      }
      if (Object.keys(ours).length > 0) metaMine[mk] = ours;
      if (Object.keys(others).length > 0) metaTheirs[mk] = others;
    }
    if (Object.keys(metaMine).length > 0) mine['f:metadata'] = metaMine;
    if (Object.keys(metaTheirs).length > 0) theirs['f:metadata'] = metaTheirs;
  }
  return { mine, theirs: Object.keys(theirs).length > 0 ? theirs : undefined };
}

/**
 * An adopted object's managed fields once relsync owns alone what it applies (sync/adoption.ts):
 * every other entry of the main resource loses the fields of `manager`'s Apply entry, and an
 * entry left with nothing goes. Without this the previous owner (an older agent, kubectl) would
 * keep co-owning what relsync copies, and a field the source drops later would stay on the copy
 * for good. Undefined when there is nothing to take over.
 */
export function takenOverManagedFields(managedFields: unknown, manager: string): ManagedFieldsEntry[] | undefined {
  if (!Array.isArray(managedFields)) return undefined;
  const entries = managedFields as ManagedFieldsEntry[];
  const applied = entries.find((e) => e.operation === 'Apply' && e.manager === manager && !e.subresource);
  if (!applied?.fieldsV1) return undefined;
  let changed = false;
  const out: ManagedFieldsEntry[] = [];
  for (const e of entries) {
    // Another version's field paths may differ (a CRD's schemas): only entries of the applied version are trimmed.
    if (e === applied || e.subresource || e.fieldsType !== 'FieldsV1' || !e.fieldsV1 || e.apiVersion !== applied.apiVersion) {
      out.push(e);
      continue;
    }
    const left = subtractFields(e.fieldsV1, applied.fieldsV1);
    if (stable(left) === stable(e.fieldsV1)) {
      out.push(e);
      continue;
    }
    changed = true;
    if (Object.keys(left).length > 0) out.push({ ...e, fieldsV1: left });
  }
  return changed ? out : undefined;
}

/**
 * `theirs` without what `mine` owns, in FieldsV1's trie (`f:`/`k:`/`v:`/`i:` keys, `.` for the
 * node itself, `{}` for a field owned whole): a field mine owns whole, or that theirs owns whole
 * and mine owns any of, goes from theirs.
 */
function subtractFields(theirs: Record<string, unknown>, mine: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(theirs)) {
    const m = mine[k];
    if (m === undefined) {
      out[k] = v;
      continue;
    }
    if (!isObject(v) || !isObject(m) || Object.keys(v).length === 0 || Object.keys(m).length === 0) continue;
    const left = subtractFields(v, m);
    if (Object.keys(left).length > 0) out[k] = left;
  }
  return out;
}

/** An adopted object's managed fields mirror its fields: at any depth (util/json-text.ts). */
function stable(v: unknown): string {
  return jsonText(v);
}

/** The union of two FieldsV1 sets (nested objects whose keys are `f:name`, `k:{…}`, `v:…`, `.`). */
function unionFields(a: Record<string, unknown>, b: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...a };
  for (const [k, v] of Object.entries(b)) {
    const mine = out[k];
    out[k] = isObject(mine) && isObject(v) ? unionFields(mine, v) : (mine ?? v);
  }
  return out;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
