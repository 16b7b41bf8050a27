/**
 * Finding a primary's related objects, rule by rule: phase 1 renders names
 * or a selector from the primary (no API calls), phase 2 reads or lists what
 * they name, keeping only what may be a source (never relsync's own copies;
 * on the service side, only what shows it is the copy's), and the whole is
 * capped at limits.relatedPerPrimary. The reconciler decides what to write.
 */
import type { Logger } from 'pino';
import { identityKey } from '../core/identity.js';
import { compositeKey } from '../core/composite-key.js';
import { labelValueProblem } from '../core/label-selector.js';
import type { KubeObject } from '../core/object.js';
import { inverseListSelector, inverseOwner, inverseOwnerKey } from '../rules/inverse-owner.js';
import { provenanceProblem } from '../rules/provenance.js';
import { foundObject, namespaceProblem, pairsForObjects, resolveRelated, sidesOf, type RelatedPair, type Resolution, type ResolveInput } from '../rules/resolve-related.js';
import type { ResolvedRule } from '../rules/rule.js';
import { renderSelector } from '../rules/selector-template.js';
import type { RelationRecord } from '../store/records.js';
import type { SelectorRecord } from '../store/selector-index.js';
import type { EventRecorder } from './event-recorder.js';
import { markedSource } from '../core/marks.js';
import { inverseIndexName } from './finder-definitions.js';
import type { ObjectReads } from '../cache/object-reads.js';
import { ownerTypeOf, type ResolvedResource } from './resolved-config.js';
import type { SyncMetrics } from './sync-metrics.js';

/** What a reconcile makes of one relation (the store's record, before it is saved). */
export type RelationOutcome = Omit<RelationRecord, 'lastSyncedAt' | 'primary'> & {
  /** Nothing will announce that this failure is over (a namespace relsync may not create): look again soon. */
  readonly retrySoon?: boolean;
};

/** A relation this reconcile is about to act on, stored as pending before it does. */
export type Claim = Pick<RelationOutcome, 'ruleId' | 'origin' | 'source' | 'destination'>;

/** What one rule resolved to in phase 2. */
export interface Found {
  readonly pairs: readonly RelatedPair[];
  readonly problems: readonly string[];
  /** A warning was recorded on the primary though nothing failed: a sweep must not skip it, so that it is said again. */
  readonly warned?: boolean;
  /** The rule could not be evaluated: its stored relations are kept as they are. */
  readonly keepStored?: boolean;
  /**
   * Why not, when it is the cluster's answer (a LIST refused) rather than the tenant's input (a
   * selector or namespace that renders wrong, which resolves to nothing until the tenant fixes it):
   * its claims are not known (claim-knowledge.ts).
   */
  readonly unanswered?: boolean;
  /** It names more objects than were looked at (resolveRelated's limit): the count is a floor. */
  readonly more?: boolean;
}

/** One rule's phase-1 result for one primary. */
export interface RulePlan {
  readonly input: ResolveInput;
  /** Reference and template rules: the resolved names. */
  readonly named?: Resolution;
  /** Selector rules: the rendered selector. */
  readonly selector?: SelectorRecord;
  /** A selector that could not be rendered. */
  readonly problems?: string[];
}

export interface RelatedFinderDeps {
  readonly agentName: string;
  readonly recorder: EventRecorder;
  readonly metrics: SyncMetrics;
  readonly logger: Logger;
  readonly limits?: { readonly relatedPerPrimary: number } | undefined;
}

export class RelatedFinder {
  constructor(private readonly deps: RelatedFinderDeps) {}

  /** Phase 1 of one rule: names (reference, template) or the rendered selector; no API calls. */
  plan(input: ResolveInput): RulePlan {
    const { rule } = input;
    const finder = rule.finder;
    // One past the limit, as selector lists: capRelated then says there were more, and no more names are stored or probed.
    if (finder.kind === 'reference' || finder.kind === 'template') return { input, named: resolveRelated(input, this.listLimit()) };
    if (finder.kind === 'selector') {
      const sides = sidesOf(input);
      const namespace = rule.sourceType.namespaced ? sides.sourceNamespace : '';
      // An empty namespace would LIST every namespace of the source cluster: never what a rule means.
      const badNamespace = rule.sourceType.namespaced ? namespaceProblem(namespace) : undefined;
      if (badNamespace) return { input, problems: [`rule ${rule.id}: the source namespace ${badNamespace} (check ${rule.where}.namespace.source)`] };
      const rendered = renderSelector(finder.requirements, finder.allowEmpty, input.context, `${rule.where}.selector`);
      if (!rendered.selector) return { input, problems: rendered.problems.map((p) => `rule ${rule.id}: ${p}`) };
      return { input, selector: { ruleId: rule.id, scope: { cluster: sides.sourceCluster, group: rule.sourceType.group, resource: rule.sourceType.resource, namespace }, selector: rendered.selector } };
    }
    return { input };
  }

  /**
   * Phase 2 of one rule: the related objects. Names come from phase 1 for
   * reference and template rules; selector and inverse rules ask `reads` to
   * list the objects (by the rendered selector, or those that name this
   * primary), which answers from the finder index where it can
   * (finder-index.ts), else with a LIST.
   */
  async findRelated(reads: ObjectReads, resource: ResolvedResource, plan: RulePlan, primary: KubeObject): Promise<Found> {
    const { input } = plan;
    const { rule } = input;
    const finder = rule.finder;
    if (plan.named) return plan.named;
    if (plan.problems) return { pairs: [], problems: plan.problems, keepStored: true };
    const sides = sidesOf(input);
    const namespace = rule.sourceType.namespaced ? sides.sourceNamespace : '';
    if (finder.kind === 'selector') {
      const items = await reads.list(sides.sourceCluster, rule.sourceType, { namespace, selector: plan.selector!.selector, accept: (o) => !this.isOwnCopy(o) && this.isProven(input, o), limit: this.listLimit(), project: (o) => foundObject(input, o) });
      return pairsForObjects(input, items);
    }
    if (finder.kind !== 'inverse') throw new Error(`rule ${rule.id}: unexpected finder ${finder.kind}`);
    const owner = sides.sourceObject.metadata;
    const unusable = finder.owner.kind === 'label' ? labelValueProblem(owner.name ?? '') : undefined;
    if (finder.owner.kind === 'label' && unusable) {
      // No object can carry a label with this value: the rule matches nothing for this primary
      // (a LIST by it would be refused), and the primary's other rules go on.
      const message = `rule ${rule.id} finds nothing for this object: no object can name it in the label ${finder.owner.key} (${unusable})`;
      this.deps.recorder.warn(input.platformCluster, primary, 'RelatedRuleNotApplicable', message);
      return { pairs: [], problems: [], warned: true };
    }
    const badNamespace = rule.sourceType.namespaced && !finder.namespaceFrom ? namespaceProblem(namespace) : undefined;
    if (badNamespace) return { pairs: [], problems: [`rule ${rule.id}: the source namespace ${badNamespace} (check ${rule.where}.namespace.source)`], keepStored: true };
    const { kind, group } = ownerTypeOf(resource, rule);
    const mine = await reads.list(sides.sourceCluster, rule.sourceType, {
      namespace: finder.namespaceFrom ? undefined : namespace,
      selector: inverseListSelector(finder, owner.name ?? ''),
      indexed: { index: inverseIndexName(resource, rule), of: (o) => inverseOwnerKey(finder, o, kind, group), value: `${owner.namespace ?? ''}/${owner.name ?? ''}` },
      accept: (o) => {
        if (this.isOwnCopy(o) || !this.isProven(input, o)) return false;
        const ref = inverseOwner(finder, o, kind, group);
        return ref !== undefined && ref.name === owner.name && ref.namespace === (owner.namespace ?? '') && (ref.uid === undefined || ref.uid === owner.uid);
      },
      limit: this.listLimit(),
      project: (o) => foundObject(input, o),
    });
    return pairsForObjects(input, mine);
  }

  /**
   * How many objects one selector or inverse rule lists at most: one more than a primary may copy,
   * so that capRelated sees there are too many and says so, without holding all a tenant made.
   */
  private listLimit(): number {
    return (this.deps.limits?.relatedPerPrimary ?? 500) + 1;
  }

  /**
   * At most `limits.relatedPerPrimary` related objects per primary, over all its rules in their
   * order; within a rule, the ones already stored first, then by source name, so that a copy made
   * before is not dropped for a newcomer; the rest is a problem on the primary. (Selector and
   * inverse rules list at most one past the limit, in the API server's order: beyond that, a
   * stored one may give way.) Whether it cut any rule's.
   */
  capRelated(found: Array<{ plan: RulePlan } & Found>, stored: readonly RelationOutcome[]): boolean {
    const had = new Set(stored.map(claimKey));
    let left = this.deps.limits?.relatedPerPrimary ?? 500;
    let capped = false;
    for (let i = 0; i < found.length; i++) {
      const f = found[i]!;
      if (f.keepStored) continue;
      // A rule that names more than it was resolved with is over the limit, however few pairs its first names made.
      if (f.pairs.length <= left && f.more !== true) {
        left -= f.pairs.length;
        continue;
      }
      const rule = f.plan.input.rule;
      // Each pair's key made once, not at each of the sort's comparisons (a wildcard's 501 pairs).
      const keyed = f.pairs.map((p) => ({ p, key: `${had.has(claimKey({ ruleId: rule.id, origin: rule.origin, ...p })) ? 0 : 1}${identityKey(p.source)}` }));
      const sorted = keyed.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0)).map(({ p }) => p);
      const limit = this.deps.limits?.relatedPerPrimary ?? 500;
      // Selector and inverse rules stop listing one past the limit (listLimit): their count is then a floor.
      const listed = rule.finder.kind === 'selector' || rule.finder.kind === 'inverse' || f.more === true;
      const count = (listed && f.pairs.length > limit) || f.more === true ? `more than ${limit}` : String(f.pairs.length);
      const problem = `rule ${f.plan.input.rule.id} finds ${count} object(s); relsync copies at most ${limit} related objects per primary (limits.relatedPerPrimary), so only ${Math.min(left, f.pairs.length)} of them are copied`;
      found[i] = { ...f, pairs: sorted.slice(0, left), problems: [...f.problems, problem] };
      left = 0;
      capped = true;
    }
    return capped;
  }

  /**
   * A service-side object is a source only if it shows it is the copy's (rules/provenance.ts): a
   * tenant, who writes the copy's spec, must not name one of the operator's own objects.
   */
  isProven(input: ResolveInput, source: KubeObject): boolean {
    const { provenance } = input.rule;
    if (input.rule.origin !== 'service' || !provenance) return true;
    const problem = provenanceProblem(provenance, source, input.copy, input.context);
    if (problem === undefined) return true;
    this.deps.metrics.unprovenSources.inc({ rule: input.rule.id });
    this.deps.logger.debug({ rule: input.rule.id, copy: `${input.copy.metadata.namespace ?? ''}/${input.copy.metadata.name ?? ''}`, object: `${source.metadata.namespace ?? ''}/${source.metadata.name ?? ''}`, problem }, 'a service-side object is not the copy\'s own: not a source');
    return false;
  }

  /** A service-side object relsync wrote (a copy of something of the tenant's) is never a service-origin source. */
  isOwnCopyAsServiceSource(rule: ResolvedRule, object: KubeObject): boolean {
    return rule.origin === 'service' && this.isOwnCopy(object);
  }

  /** relsync's own copies are never sources: a copied label must not make a copy its own source. */
  isOwnCopy(object: KubeObject): boolean {
    return markedSource(object, this.deps.agentName) !== undefined;
  }
}

export function claimKey(c: Claim): string {
  return compositeKey(c.ruleId, identityKey(c.source), identityKey(c.destination));
}

export function claimsOf(rule: ResolvedRule, pairs: readonly RelatedPair[]): Claim[] {
  return pairs.map((pair) => ({ ruleId: rule.id, origin: rule.origin, ...pair }));
}
