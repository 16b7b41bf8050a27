/**
 * A related type of another APIExport (a rule's `identityHash`) is reached
 * through the primary's export, which serves it only under a permission
 * claim, and kcp serves the claimed type by group and resource alone: the
 * identity is in the claim. So the claim is checked once, at start, against
 * the export itself (kube/kcp-endpoint.ts permissionClaims), which only the
 * provider writes: a type of the same name from another export (a
 * look-alike) is never taken for the one the rule names.
 */
import type { ResourceType } from '../core/resource-type.js';
import type { ExportClaim } from '../kube/kcp-endpoint.js';

/** Why the export's `claims` do not claim `type` of the export with identity `identityHash`, or undefined when they do. */
export function claimProblem(claims: readonly ExportClaim[], type: Pick<ResourceType, 'group' | 'resource'>, identityHash: string): string | undefined {
  const what = `${type.resource}${type.group ? `.${type.group}` : ''}`;
  const onType = claims.filter((c) => (c.group ?? '') === type.group && c.resource === type.resource);
  if (onType.length === 0) return `the APIExport claims no ${what}: add a permission claim on it with identityHash ${identityHash}`;
  // Every claim on the name, not the first: with two, which one a workspace's objects are would depend on their order.
  const other = onType.find((c) => (c.identityHash ?? '') !== identityHash);
  if (other) {
    return `the APIExport claims ${what} of ${other.identityHash ? `the export with identity ${other.identityHash}` : 'no other export (no identityHash)'}, not of ${identityHash}: the claim and the rule must name one export`;
  }
  return undefined;
}
