/**
 * Whether a primary is one relsync syncs: its labels match the resource's
 * `selector`, and the labels of its namespace the `namespaceSelector`
 * (api-syncagent's `filter.resource` and `filter.namespace`). A primary that
 * stops being selected is treated as deleted: its copies go.
 */
import { matchesSelector } from '../core/label-selector.js';
import type { KubeObject } from '../core/object.js';
import type { ResourceType } from '../core/resource-type.js';
import type { ResolvedResource } from './resolved-config.js';

/** The core Namespace type, which a namespace selector reads on the platforms. */
export const platformNamespaceType: ResourceType = { group: '', version: 'v1', resource: 'namespaces', kind: 'Namespace', namespaced: false };

/**
 * What a complete sync is stored with in place of the config fingerprint: with a namespace
 * selector, the fingerprint and the version of the namespace the selection was read from, so that
 * a sweep reconciles a primary whose namespace changed since (sweep-skip.ts), whatever missed it.
 */
export function selectionFingerprint(resource: Pick<ResolvedResource, 'namespaceSelector'>, config: string, namespaceVersion: string | undefined): string {
  return resource.namespaceSelector ? `${config} ns:${namespaceVersion ?? '?'}` : config;
}

/** `namespaceOf`: the primary's namespace as the caller reads it (undefined: gone, which selects nothing). */
export async function isSelected(resource: Pick<ResolvedResource, 'selector' | 'namespaceSelector'>, primary: KubeObject, namespaceOf: (name: string) => Promise<KubeObject | undefined>): Promise<boolean> {
  if (resource.selector && !matchesSelector(resource.selector, primary.metadata.labels)) return false;
  if (!resource.namespaceSelector) return true;
  const namespace = await namespaceOf(primary.metadata.namespace ?? '');
  return namespace !== undefined && matchesSelector(resource.namespaceSelector, namespace.metadata.labels);
}
