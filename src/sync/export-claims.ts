/**
 * A related type of another APIExport (a rule's `identityHash`) is reached
 * through the primary's export, which serves it only under a permission
 * claim, and kcp serves the claimed type by group and resource alone: the
 * identity is in the claim. So the claim is checked once, at start, against
 * what the export claims as its bindings show it (`status.exportPermissionClaims`
 * of any APIBinding of the export; relsync runs only once one exists): a
 * type of the same name from another export (a look-alike) is never taken
 * for the one the rule names.
 */
import type { ResourceType } from '../core/resource-type.js';
import type { ResourceClient } from '../kube/resource-client.js';

interface ExportClaim {
  readonly group?: string;
  readonly resource?: string;
  readonly identityHash?: string;
}

/** Why the export does not claim `type` of the export with identity `identityHash`, or undefined when it does (or no binding shows yet what it claims). */
export async function claimProblem(bindings: Pick<ResourceClient, 'listPage'>, type: Pick<ResourceType, 'group' | 'resource'>, identityHash: string): Promise<string | undefined> {
  const page = await bindings.listPage({ limit: 1 });
  const binding = page.items[0] as { status?: { exportPermissionClaims?: ExportClaim[] } } | undefined;
  const claims = binding?.status?.exportPermissionClaims;
  if (!claims) return undefined;
  const what = `${type.resource}${type.group ? `.${type.group}` : ''}`;
  const claim = claims.find((c) => (c.group ?? '') === type.group && c.resource === type.resource);
  if (!claim) return `the APIExport claims no ${what}: add a permission claim on it with identityHash ${identityHash}`;
  if ((claim.identityHash ?? '') !== identityHash) {
    return `the APIExport claims ${what} of ${claim.identityHash ? `the export with identity ${claim.identityHash}` : 'no other export (no identityHash)'}, not of ${identityHash}: the claim and the rule must name one export`;
  }
  return undefined;
}
