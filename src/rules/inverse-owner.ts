/**
 * Inverse rules: a related object names its owner itself. The owner is
 * computed from the object alone — a label or annotation value, an
 * ownerReference to the owner's kind, or a named group of a regex over the
 * object's name — so routing needs no lookup. The owner is always in the
 * object's own cluster: inverse rules never cross clusters.
 */

import type { KubeObject } from '../core/object.js';
import type { LabelSelector } from '../core/label-selector.js';
import type { OwnerPointer } from './rule.js';

export interface OwnerRef {
  readonly namespace: string;
  readonly name: string;
  /** Set for ownerReferences: the owner's uid, to be checked against the object found. */
  readonly uid?: string | undefined;
}

export interface InverseFinder {
  readonly owner: OwnerPointer;
  readonly namespaceFrom: { readonly kind: 'label' | 'annotation'; readonly key: string } | undefined;
}

/** Longer than an object's name or a namespace's may be: no object is named so. */
const MAX_NAME = 253;
const MAX_NAMESPACE = 63;

/**
 * The owner `object` names, or undefined; `ownerKind`/`ownerGroup` are the owner's type. A name
 * or namespace no object can have is no owner: an annotation of 256 KiB names nothing, and must
 * cost the finder index (cache/finder-index.ts) no more than a real name does.
 */
export function inverseOwner(finder: InverseFinder, object: KubeObject, ownerKind: string, ownerGroup: string): OwnerRef | undefined {
  const ref = namedOwner(finder, object, ownerKind, ownerGroup);
  return ref && ref.name.length <= MAX_NAME && ref.namespace.length <= MAX_NAMESPACE ? ref : undefined;
}

function namedOwner(finder: InverseFinder, object: KubeObject, ownerKind: string, ownerGroup: string): OwnerRef | undefined {
  const meta = object.metadata;
  let namespace = meta.namespace ?? '';
  if (finder.namespaceFrom) {
    const map = finder.namespaceFrom.kind === 'label' ? meta.labels : meta.annotations;
    const v = map?.[finder.namespaceFrom.key];
    if (!v) return undefined;
    namespace = v;
  }
  const o = finder.owner;
  switch (o.kind) {
    case 'label':
    case 'annotation': {
      const name = (o.kind === 'label' ? meta.labels : meta.annotations)?.[o.key];
      return name ? { namespace, name } : undefined;
    }
    case 'ownerReference': {
      const ref = meta.ownerReferences?.find((r) => r.kind === ownerKind && groupOf(r.apiVersion) === ownerGroup);
      return ref ? { namespace, name: ref.name, uid: ref.uid } : undefined;
    }
    case 'namePattern': {
      const name = o.pattern.exec(meta.name ?? '')?.groups?.name;
      return name ? { namespace, name } : undefined;
    }
  }
}

/** The owner `object` names as `namespace/name` (what an inverse rule's LIST keeps, and its finder index holds), or undefined. */
export function inverseOwnerKey(finder: InverseFinder, object: KubeObject, ownerKind: string, ownerGroup: string): string | undefined {
  const ref = inverseOwner(finder, object, ownerKind, ownerGroup);
  return ref && `${ref.namespace}/${ref.name}`;
}

/** The server-side label selector that narrows the LIST for an owner, when there is one. */
export function inverseListSelector(finder: InverseFinder, ownerName: string): LabelSelector | undefined {
  return finder.owner.kind === 'label' ? { requirements: [{ key: finder.owner.key, operator: 'In', values: [ownerName] }] } : undefined;
}

function groupOf(apiVersion: string): string {
  const slash = apiVersion.indexOf('/');
  return slash < 0 ? '' : apiVersion.slice(0, slash);
}
