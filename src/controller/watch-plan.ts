/**
 * Which (cluster, type, label selector) watches relsync needs, each once
 * however many rules use it:
 *
 * - every primary type, unfiltered, on every platform cluster;
 * - every primary type on the service cluster, filtered to this agent's copies;
 * - every related source type on its origin side, unfiltered;
 * - every related destination type on the other side, filtered to this
 *   agent's copies (so that a copy edited or deleted by hand is repaired).
 *
 * An unfiltered watch of a (cluster, type) makes a filtered one redundant.
 */
import type { ResourceType } from '../core/resource-type.js';
import { agentSelector } from '../sync/marks.js';
import type { ResolvedResource } from '../sync/resolved-config.js';
import { compositeKey } from '../core/composite-key.js';

export interface PlannedWatch {
  readonly cluster: string;
  readonly type: ResourceType;
  readonly labelSelector: string | undefined;
}

export function planWatches(resources: readonly ResolvedResource[], serviceCluster: string, platformClusters: readonly string[], agentName: string): PlannedWatch[] {
  const wanted = new Map<string, PlannedWatch>();
  const add = (cluster: string, type: ResourceType, filtered: boolean) => {
    const key = compositeKey(cluster, type.group, type.resource);
    const existing = wanted.get(key);
    if (existing && existing.labelSelector === undefined) return;
    wanted.set(key, { cluster, type, labelSelector: filtered ? agentSelector(agentName) : undefined });
  };
  for (const res of resources) {
    for (const p of platformClusters) add(p, res.primaryType, false);
    add(serviceCluster, res.primaryType, true);
    for (const rule of res.rules) {
      if (rule.origin === 'platform') {
        for (const p of platformClusters) add(p, rule.sourceType, false);
        add(serviceCluster, rule.destinationType, true);
      } else {
        add(serviceCluster, rule.sourceType, false);
        for (const p of platformClusters) add(p, rule.destinationType, true);
      }
    }
  }
  return [...wanted.values()];
}
