/**
 * What a sweep compares to tell that an object is the one a sync acted on
 * (controller/sweep-skip.ts): its resourceVersion and its uid. The uid makes
 * an object created again under a name — in a rebuilt cluster whose
 * resourceVersions started over, say — another object even where the
 * resourceVersion happens to be the same.
 */
import type { KubeObject } from './object.js';

/** `resourceVersion/uid`, or undefined for an object without both (nothing can vouch for it). */
export function objectVersion(object: KubeObject): string | undefined {
  const { resourceVersion, uid } = object.metadata;
  return resourceVersion && uid ? `${resourceVersion}/${uid}` : undefined;
}
