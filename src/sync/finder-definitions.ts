/**
 * What the finder index (cache/finder-index.ts) holds for the configured rules: for a selector
 * rule, each label it anchors on with a constant key and `In`; for an inverse rule, the owner it
 * reads off an object. Made here, where the rules are understood, so that the index itself knows
 * only labels, owners and names.
 */
import type { KubeObject } from '../core/object.js';
import { inverseOwnerKey } from '../rules/inverse-owner.js';
import type { IndexDefinition } from '../cache/finder-index.js';
import { ownerTypeOf, type ResolvedResource } from './resolved-config.js';

/** The name of an inverse rule's index, as a ListQuery's `indexed.index` carries it. */
export function inverseIndexName(resource: Pick<ResolvedResource, 'where'>, rule: { readonly id: string }): string {
  return `${resource.where}.related.${rule.id}`;
}

export function finderIndexDefinitions(resources: readonly ResolvedResource[]): IndexDefinition[] {
  const definitions: IndexDefinition[] = [];
  for (const resource of resources) {
    for (const rule of resource.rules) {
      const at = { side: rule.origin, type: rule.sourceType };
      const finder = rule.finder;
      if (finder.kind === 'selector') {
        for (const r of finder.requirements) {
          if (r.operator !== 'In' || !r.key.isConstant) continue;
          definitions.push({ ...at, by: { label: r.key.render({ cluster: '', namespace: '', name: '', object: { metadata: {} } as KubeObject }) } });
        }
      } else if (finder.kind === 'inverse') {
        const { kind, group } = ownerTypeOf(resource, rule);
        definitions.push({ ...at, by: { name: inverseIndexName(resource, rule), ownerOf: (o) => inverseOwnerKey(finder, o, kind, group) } });
      }
    }
  }
  return definitions;
}
