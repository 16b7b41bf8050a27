/**
 * Copies written before relsync applied them (server-side apply) were
 * created and replaced by requests without a field manager: the API server
 * recorded their fields as owned by an Update of manager "unknown". An
 * apply never lets go of fields another entry still owns, so a key the
 * source drops would stay on such a copy for good. Before its first apply,
 * a copy that still carries the old bookkeeping annotation gets those
 * entries turned into relsync's apply entry (what client-go's csaupgrade
 * does for kubectl), in one JSON patch guarded by the resourceVersion.
 */
import { COPIED_ANNOTATIONS_ANNOTATION, COPIED_LABELS_ANNOTATION } from './marks.js';

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

/** Whether a copy was written before relsync applied its copies (it carries the old record of copied keys). */
export function writtenBeforeApply(annotations: Readonly<Record<string, string>> | undefined): boolean {
  return annotations?.[COPIED_LABELS_ANNOTATION] !== undefined || annotations?.[COPIED_ANNOTATIONS_ANNOTATION] !== undefined;
}

/**
 * The managed fields with the entries of relsync's old writes (Update, manager "unknown" or
 * `manager` itself, main resource) folded into one Apply entry of `manager`; undefined when there
 * is none to fold (already done, or never written that way).
 */
export function upgradedManagedFields(managedFields: unknown, manager: string): ManagedFieldsEntry[] | undefined {
  if (!Array.isArray(managedFields)) return undefined;
  const entries = managedFields as ManagedFieldsEntry[];
  const old = (e: ManagedFieldsEntry) => e.operation === 'Update' && (e.manager === OLD_MANAGER || e.manager === manager) && !e.subresource && e.fieldsType === 'FieldsV1';
  const folded = entries.filter(old);
  if (folded.length === 0) return undefined;
  const applied = entries.find((e) => e.operation === 'Apply' && e.manager === manager && !e.subresource);
  let fields: Record<string, unknown> = applied?.fieldsV1 ?? {};
  for (const e of folded) fields = unionFields(fields, e.fieldsV1 ?? {});
  const entry: ManagedFieldsEntry = {
    manager,
    operation: 'Apply',
    apiVersion: applied?.apiVersion ?? folded[0]!.apiVersion,
    time: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
    fieldsType: 'FieldsV1',
    fieldsV1: fields,
  };
  return [...entries.filter((e) => !old(e) && e !== applied), entry];
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
