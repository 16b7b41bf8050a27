/**
 * What `relsync sweep --dry-run` prints of each change it would make: created, updated (each
 * changed field, old → new) or deleted. Values of Secrets, and of copies made from Secrets, are
 * never printed, only that they change; fields the API server sets at every write (resourceVersion, managedFields, …) are left out.
 */
import type { KubeObject } from '../core/object.js';
import { typeName } from '../core/resource-type.js';
import type { IntendedChange } from '../kube/dry-run-client.js';
import { printable } from './printable.js';
import { SOURCE_ANNOTATIONS } from '../core/relsync-keys.js';

export interface FieldChange {
  readonly path: string;
  readonly before?: unknown;
  readonly after?: unknown;
}

export interface ChangeView {
  readonly action: 'create' | 'update' | 'delete';
  readonly object: string;
  readonly fields: readonly FieldChange[];
}

const VOLATILE = new Set(['metadata.resourceVersion', 'metadata.uid', 'metadata.generation', 'metadata.creationTimestamp', 'metadata.managedFields', 'metadata.selfLink']);
const HIDDEN = '(a Secret\'s value: not shown)';
/** Never printed, of any type: kubectl's copy of a whole applied object (a Secret's data in it). */
const LAST_APPLIED = 'metadata.annotations.kubectl.kubernetes.io/last-applied-configuration';

export function viewOf(change: IntendedChange): ChangeView {
  const { cluster, type, namespace, name, before, after } = change;
  const object = `${cluster}:${typeName(type)}:${namespace ? `${namespace}/` : ''}${name}`;
  // A Secret, or a copy of one (a rule may copy a Secret's content into a ConfigMap): its marks name the source's type.
  const fromSecret = (o: KubeObject | undefined) => o?.metadata.annotations?.[SOURCE_ANNOTATIONS.resource] === 'secrets' && (o.metadata.annotations[SOURCE_ANNOTATIONS.group] ?? '') === '';
  const secret = (type.group === '' && type.resource === 'secrets') || fromSecret(before) || fromSecret(after);
  const action = before === undefined ? 'create' : after === undefined ? 'delete' : 'update';
  const was = leaves(before);
  const now = leaves(after);
  const fields: FieldChange[] = [];
  for (const path of [...new Set([...was.keys(), ...now.keys()])].sort()) {
    if (VOLATILE.has(path) || [...VOLATILE].some((v) => path.startsWith(`${v}.`))) continue;
    const [b, a] = [was.get(path), now.get(path)];
    if (b === a) continue;
    const hide = (secret && /^(data|stringData|binaryData)\./.test(path)) || path === LAST_APPLIED;
    fields.push({ path, ...(b !== undefined ? { before: hide ? HIDDEN : JSON.parse(b) } : {}), ...(a !== undefined ? { after: hide ? HIDDEN : JSON.parse(a) } : {}) });
  }
  // A delete is the object going: its fields are not news.
  return { action, object, fields: action === 'delete' ? [] : action === 'update' ? fields : fields.filter((f) => !f.path.startsWith('metadata.') || /^metadata\.(labels|annotations)\./.test(f.path)) };
}

/** Every leaf (a scalar, or a list as a whole) by dotted path, as JSON. */
function leaves(object: KubeObject | undefined): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (value: unknown, path: string) => {
    if (typeof value === 'object' && value !== null && !Array.isArray(value)) {
      for (const [k, v] of Object.entries(value)) walk(v, path ? `${path}.${k}` : k);
    } else if (value !== undefined) out.set(path, JSON.stringify(value));
  };
  walk(object, '');
  return out;
}

export function printChanges(views: readonly ChangeView[]): void {
  const mark = { create: '+', update: '~', delete: '-' } as const;
  for (const v of views) {
    console.log(printable(`${mark[v.action]} ${v.action} ${v.object}`));
    for (const f of v.fields) console.log(printable(`    ${f.path}: ${'before' in f ? JSON.stringify(f.before) : '(none)'} → ${'after' in f ? JSON.stringify(f.after) : '(none)'}`));
  }
  const count = (a: ChangeView['action']) => views.filter((v) => v.action === a).length;
  console.log(`${views.length} change${views.length === 1 ? '' : 's'} (${count('create')} create, ${count('update')} update, ${count('delete')} delete); nothing was written`);
}
