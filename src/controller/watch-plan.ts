/**
 * Which (cluster, type, label selector) watches relsync needs, each once
 * however many rules use it:
 *
 * - every primary type, unfiltered, on every platform cluster;
 * - every copy type (the primary type unless `copyAs` names another) on the
 *   service cluster, filtered to this agent's copies;
 * - the platforms' namespaces, unfiltered, where a namespace selector reads them;
 * - every related source type on its origin side, unfiltered;
 * - every related destination type on the other side, filtered to this
 *   agent's copies (so that a copy edited or deleted by hand is repaired).
 *
 * An unfiltered watch of a (cluster, type) makes a filtered one redundant.
 * The same list, per primary, names the watches its reconcile reads from
 * (watchedTypes), which must have listed once before it runs (first-lists.ts).
 */
import type { ResourceType } from '../core/resource-type.js';
import { agentSelector } from '../core/marks.js';
import { platformNamespaceType } from '../sync/primary-selection.js';
import type { ResolvedResource } from '../sync/resolved-config.js';
import { compositeKey } from '../core/composite-key.js';

export interface PlannedWatch {
  readonly cluster: string;
  readonly type: ResourceType;
  readonly labelSelector: string | undefined;
}

/** A (cluster, type) that a reconcile reads; `filtered`: only this agent's copies of it are watched. */
export interface WatchedType {
  readonly cluster: string;
  readonly type: ResourceType;
  readonly filtered: boolean;
}

export function planWatches(resources: readonly ResolvedResource[], serviceCluster: string, platformClusters: readonly string[], agentName: string): PlannedWatch[] {
  const wanted = new Map<string, PlannedWatch>();
  for (const res of resources) {
    for (const p of platformClusters) {
      for (const { cluster, type, filtered } of watchedTypes(res, serviceCluster, p)) {
        const key = watchKey(cluster, type);
        const existing = wanted.get(key);
        if (existing && existing.labelSelector === undefined) continue;
        wanted.set(key, { cluster, type, labelSelector: filtered ? agentSelector(agentName) : undefined });
      }
    }
  }
  return [...wanted.values()];
}

/**
 * What the reconciles of `resource`'s primaries on `platform` read, and so which watches must have
 * listed before they run (first-lists.ts): the primary type and the related types on both sides.
 */
export function watchedTypes(resource: ResolvedResource, serviceCluster: string, platform: string): WatchedType[] {
  const types: WatchedType[] = [
    { cluster: platform, type: resource.primaryType, filtered: false },
    { cluster: serviceCluster, type: resource.copyType, filtered: true },
  ];
  // A namespace selector reads the primaries' namespaces (sync/primary-selection.ts).
  if (resource.namespaceSelector) types.push({ cluster: platform, type: platformNamespaceType, filtered: false });
  for (const rule of resource.rules) {
    const fromPlatform = rule.origin === 'platform';
    types.push(
      { cluster: fromPlatform ? platform : serviceCluster, type: rule.sourceType, filtered: false },
      { cluster: fromPlatform ? serviceCluster : platform, type: rule.destinationType, filtered: true },
    );
  }
  return types;
}

/** One watch per (cluster, group, resource), whatever its version or filter. */
export function watchKey(cluster: string, type: Pick<ResourceType, 'group' | 'resource'>): string {
  return compositeKey(cluster, type.group, type.resource);
}
