/**
 * Adoption: an object that is in a copy's place and not relsync's becomes
 * the copy, when the config allows it (`adopt: true` on the resource or the
 * rule) and the object's owner granted it to exactly that source (core/marks.ts
 * ADOPT_ANNOTATION). Without both it is a conflict, as before: relsync never
 * takes over an object on its name alone. The grant is written by whoever
 * may write the object — in the service cluster the provider (no tenant
 * writes there, and relsync never copies a `relsync.dev/` key from a
 * source), on a platform the tenant, for its own object — and names the
 * source's whole identity with its logical cluster, which no tenant chooses.
 * What the grant cannot say, this checks too: the object is not being
 * deleted, carries no agent's marks (another relsync instance's, or a
 * release's leftovers), and has no controller (a second writer would fight
 * relsync over it).
 */
import type { Logger } from 'pino';
import { describeIdentity, type ObjectIdentity } from '../core/identity.js';
import type { KubeObject } from '../core/object.js';
import { ExpiringMap } from '../util/expiring-map.js';
import { systemClock, type Clock } from '../util/clock.js';
import { adoptionGrant, isRelsyncKey } from '../core/marks.js';
import { WARNING_REPEAT_MS } from './sync-intervals.js';
import { ADOPT_ANNOTATION, AGENT_LABEL } from '../core/relsync-keys.js';

/** Why relsync (agent `agentName`) may not adopt `object` as the copy of `source`, or undefined when it may. */
export function adoptionRefusal(object: KubeObject, agentName: string, source: ObjectIdentity): string | undefined {
  const grant = object.metadata.annotations?.[ADOPT_ANNOTATION];
  if (grant === undefined) return `it has no ${ADOPT_ANNOTATION} annotation granting it`;
  if (grant !== adoptionGrant(agentName, source)) return `its ${ADOPT_ANNOTATION} annotation grants it to another agent or source`;
  if (object.metadata.deletionTimestamp) return 'it is being deleted';
  const agent = object.metadata.labels?.[AGENT_LABEL];
  if (agent !== undefined) return `it carries the marks of relsync agent "${agent}"`;
  const marks = [...Object.keys(object.metadata.labels ?? {}), ...Object.keys(object.metadata.annotations ?? {})].filter((k) => isRelsyncKey(k) && k !== ADOPT_ANNOTATION);
  if (marks.length > 0) return `it carries relsync's keys ${marks.join(', ')}`;
  const controller = object.metadata.ownerReferences?.find((r) => r.controller === true);
  if (controller) return `it has a controller (${controller.kind} ${controller.name}), which would write it too`;
  return undefined;
}

/**
 * Why an object in a copy's place was not adopted, for the provider's log (never an Event: the
 * tenant learns nothing of an object in the service cluster), with the grant that would let relsync
 * adopt it where the object has none. Once per object, source and reason in ten minutes: a conflict
 * is looked at again every 30 s.
 */
export class AdoptionRefusals {
  private readonly told: ExpiringMap<string, true>;

  constructor(
    private readonly logger: Logger,
    private readonly agentName: string,
    /** What "in ten minutes" is measured on; default systemClock. */
    clock: Clock = systemClock,
  ) {
    this.told = new ExpiringMap(1_000, clock);
  }

  /**
   * `object` was not adopted as the copy of `source` for `reason`. `suggestGrant`: the object has no
   * grant (one granted to someone else is never "corrected" from this log).
   */
  note(where: string, { object, source }: { readonly object: ObjectIdentity; readonly source: ObjectIdentity }, reason: string, suggestGrant: boolean): void {
    const key = `${describeIdentity(object)}\u0000${describeIdentity(source)}\u0000${reason}`;
    if (this.told.get(key)) return;
    this.told.set(key, true, WARNING_REPEAT_MS);
    const grant = suggestGrant ? { grant: `${ADOPT_ANNOTATION}=${adoptionGrant(this.agentName, source)}` } : {};
    this.logger.warn({ rule: where, object: describeIdentity(object), source: describeIdentity(source), reason, ...grant }, "an object in a copy's place is not adopted");
  }
}
