/** What the work queue holds: a primary's identity and the published resource it belongs to. */
import { identityKey, type ObjectIdentity } from '../core/identity.js';
import type { ResolvedResource } from '../sync/resolved-config.js';

export interface PrimaryKey {
  readonly resource: ResolvedResource;
  readonly id: ObjectIdentity;
}

export function primaryKeyString(key: PrimaryKey): string {
  return identityKey(key.id);
}
