/**
 * Whether an object is one of relsync's copies, and of what: decided by the
 * source its marks name and by where it lives, never by its type alone (a
 * type can be a primary type and a related type at once).
 *
 * Marks can be wrong: a tenant writes any marks it likes on its own objects,
 * and an operator in the service cluster may copy a copy's labels and
 * annotations onto objects it creates. So an object counts as a copy only
 * where relsync could have written it:
 *
 * - a copy of a primary lives in the service cluster, has the copy type of
 *   a resource whose primary type its marks name, and names a source on a
 *   platform;
 * - a related copy is one that some rule could have written: a rule copies
 *   the type its marks name, from the side they name, to this object's type
 *   on this side (platform → service for `origin: platform`, service →
 *   platform for `origin: service`);
 * - where both are possible, the content hash (on related copies only)
 *   decides.
 */
import type { KubeObject } from '../core/object.js';
import { sameType, type ResourceType } from '../core/resource-type.js';
import { identityOf, type ObjectIdentity } from '../core/identity.js';
import { jsonText } from '../util/json-text.js';
import { heavyTurns } from '../util/heavy-turns.js';
import { contentOf } from './content.js';
import { isRelatedCopy, markedSource } from '../core/marks.js';
import type { ResolvedResource } from './resolved-config.js';

export interface CopyContext {
  readonly agentName: string;
  readonly serviceCluster: string;
  readonly isPlatform: (cluster: string) => boolean;
  readonly resources: readonly ResolvedResource[];
}

export interface CopyOf {
  readonly source: ObjectIdentity;
  readonly kind: 'primary' | 'related';
}

/** The source `object` (of `type`, in `cluster`) is a copy of, or undefined when it cannot be one of relsync's copies. */
export function copyOf(context: CopyContext, cluster: string, type: ResourceType, object: KubeObject): CopyOf | undefined {
  const source = markedSource(object, context.agentName);
  if (!source) return undefined;
  const toService = cluster === context.serviceCluster && context.isPlatform(source.cluster);
  const toPlatform = context.isPlatform(cluster) && source.cluster === context.serviceCluster;
  if (!toService && !toPlatform) return undefined;
  const primaryPossible = toService && context.resources.some((r) => sameType(r.primaryType, source) && sameType(r.copyType, type));
  const origin = toService ? 'platform' : 'service';
  const relatedPossible = context.resources.some((r) => r.rules.some((rule) => rule.origin === origin && sameType(rule.sourceType, source) && sameType(rule.destinationType, type)));
  // Where both are possible (a rule copies a primary type to itself), the content hash, which only
  // related copies carry, tells them apart.
  if (primaryPossible && relatedPossible) return { source, kind: isRelatedCopy(object) ? 'related' : 'primary' };
  if (primaryPossible) return { source, kind: 'primary' };
  if (relatedPossible) return { source, kind: 'related' };
  return undefined;
}

/** A copy of relsync's that a LIST found in the service cluster, charged to `tenant` (copy-budget.ts). */
export interface CopySize {
  readonly tenant: string;
  readonly copy: ObjectIdentity;
  readonly source: ObjectIdentity;
  /** Bytes of its content as JSON, as the writer weighs it (content.ts: the copy holds the fields and labels it was given). */
  readonly content: number;
}

/**
 * relsync's copies among a page the service cluster listed, each charged to its source's cluster.
 * Weighing a large copy means writing its content as JSON: once the copies weighed come to 64 KiB,
 * the rest of the page waits for a turn on the event loop (heavy-turns.ts), or a page of 900 KiB
 * copies would hold every other tenant's work for ~100 ms.
 */
export async function copySizes(context: CopyContext, type: ResourceType, items: readonly KubeObject[]): Promise<CopySize[]> {
  const found: CopySize[] = [];
  const weighed = heavyTurns.meter(context.serviceCluster);
  let content = 0;
  for (const item of items) {
    // The cost of the item weighed before: the next one waits for a turn once they come to 64 KiB.
    await weighed.add(content);
    content = 0;
    const copy = copyOf(context, context.serviceCluster, type, item);
    if (copy?.source.cluster === undefined || !context.isPlatform(copy.source.cluster)) continue;
    content = Buffer.byteLength(jsonText(contentOf(item)));
    found.push({ tenant: copy.source.cluster, copy: identityOf(context.serviceCluster, type, item), source: copy.source, content });
  }
  return found;
}

/**
 * Whether an object on a platform is relsync's copy of something in the
 * service cluster (a service-origin copy): such an object is never a
 * primary, whatever its type. Marks that name anything else (a tenant's
 * forgery, say) do not make a primary stop being one.
 */
export function isServiceOriginCopy(agentName: string, serviceCluster: string, object: KubeObject): boolean {
  return markedSource(object, agentName)?.cluster === serviceCluster;
}
