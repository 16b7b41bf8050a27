/**
 * What of an object is copied, and when a copy is up to date. A copy gets
 * every top-level field except apiVersion/kind/metadata/status, plus the
 * source's labels and annotations (less server-set, kcp's and relsync's own).
 *
 * Up to date means: every field, key, label and annotation relsync applies
 * holds the value it applies, and the marks are equal — among them a hash of
 * what is applied, which changes when the source drops something (the next
 * apply then removes it). Fields only the copy has (server defaults, fields
 * and keys an operator added) are left alone — copy-writer.ts applies only
 * relsync's fields — so that defaulting can never cause a write loop.
 */
import type { KubeObject } from '../core/object.js';
import { isRelsyncKey } from '../core/marks.js';
import { sortedJsonText } from '../util/json-text.js';

const notCopied = new Set(['apiVersion', 'kind', 'metadata', 'status']);
const droppedAnnotations = new Set(['kubectl.kubernetes.io/last-applied-configuration']);

export interface CopyContent {
  readonly fields: Record<string, unknown>;
  readonly labels: Record<string, string>;
  readonly annotations: Record<string, string>;
}

/** What of an object's metadata is copied: the config's `copy` section (config/copy-policy.ts). */
export interface MetadataFilter {
  readonly copiesLabel: (key: string) => boolean;
  readonly copiesAnnotation: (key: string) => boolean;
}

const everything: MetadataFilter = { copiesLabel: () => true, copiesAnnotation: () => true };

export function contentOf(object: KubeObject, filter: MetadataFilter = everything): CopyContent {
  const fields: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(object)) if (!notCopied.has(key)) fields[key] = value;
  return {
    fields,
    labels: userMap(object.metadata.labels, (k) => filter.copiesLabel(k)),
    annotations: userMap(object.metadata.annotations, (k) => !droppedAnnotations.has(k) && filter.copiesAnnotation(k)),
  };
}

function userMap(map: Record<string, string> | undefined, keep: (key: string) => boolean): Record<string, string> {
  const out: Record<string, string> = {};
  // No array of entries (a tenant's 12,000 labels): walked by key. Parsed JSON has no inherited keys.
  for (const k in map) if (!isRelsyncKey(k) && !isKcpKey(k) && keep(k)) out[k] = map[k]!;
  return out;
}

/**
 * kcp's own metadata (`kcp.io/cluster`, `claimed.internal.apis.kcp.io/…`):
 * it says where an object lives in kcp, so it is never copied to the other side.
 */
function isKcpKey(key: string): boolean {
  const slash = key.indexOf('/');
  // The prefix is compared in place (no slice of every key).
  return slash >= 0 && (slash === 6 ? key.startsWith('kcp.io') : key.endsWith('.kcp.io', slash));
}

export function isUpToDate(desired: CopyContent, marks: { labels: Record<string, string>; annotations: Record<string, string> }, existing: KubeObject): boolean {
  // What relsync applies holds relsync's values; others' fields (keys of a payload map too) are
  // theirs, and stay. What the source dropped shows in the marks: their hash of what is applied changes.
  // The marks first: they carry the hash of what is applied, so on a real change they differ, and
  // the walk of a wide copy's fields is not needed to say so.
  const labels = existing.metadata.labels ?? {};
  const annotations = existing.metadata.annotations ?? {};
  if (!sameValues(labels, { ...desired.labels, ...marks.labels }) || !sameValues(annotations, { ...desired.annotations, ...marks.annotations })) return false;
  for (const [key, value] of Object.entries(desired.fields)) if (!isSubset(value, existing[key])) return false;
  return true;
}

/** Every key relsync applies holds its value; other keys are the destination's business. */
function sameValues(actual: Record<string, string>, want: Record<string, string>): boolean {
  for (const [k, v] of Object.entries(want)) if (actual[k] !== v) return false;
  return true;
}

export function deepEqual(a: unknown, b: unknown): boolean {
  return stableJson(a) === stableJson(b);
}

/**
 * Whether `actual` holds every value of `want` (others may hold more keys in maps). Walks with a
 * stack of its own: a copy in a tenant's reach can be nested deeper than the call stack goes.
 */
export function isSubset(want: unknown, actual: unknown): boolean {
  const pending: Array<readonly [unknown, unknown]> = [[want, actual]];
  while (pending.length > 0) {
    const [w, a] = pending.pop()!;
    if (w === null || typeof w !== 'object') {
      if (w !== a) return false;
    } else if (Array.isArray(w)) {
      if (!Array.isArray(a) || w.length !== a.length) return false;
      // A primitive member is compared where it is met: a list of 30,000 names pushes nothing.
      for (let i = 0; i < w.length; i++) if (!sameLeaf(w[i], a[i], pending)) return false;
    } else {
      if (a === null || typeof a !== 'object' || Array.isArray(a)) return false;
      for (const k in w) if (!sameLeaf((w as Record<string, unknown>)[k], (a as Record<string, unknown>)[k], pending)) return false;
    }
  }
  return true;
}

/** For isSubset: false when `w` is a primitive `a` does not equal; a container pair is left for the walk. */
function sameLeaf(w: unknown, a: unknown, pending: Array<readonly [unknown, unknown]>): boolean {
  if (w !== null && typeof w === 'object') pending.push([w, a]);
  else if (w !== a) return false;
  return true;
}

/** JSON with sorted keys (util/json-text.ts), at any depth: what content hashes and comparisons read. */
export function stableJson(value: unknown): string {
  return sortedJsonText(value);
}
