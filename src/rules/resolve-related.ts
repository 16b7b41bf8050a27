/**
 * Resolves one related rule for one primary to (source, destination) pairs of
 * identities. Pure: it reads the primary and its copy only, so the result can
 * be stored before the related objects exist (a pending reference).
 */

import type { KubeObject } from '../core/object.js';

import type { ObjectIdentity } from '../core/identity.js';
import { stringsAt } from './json-path.js';
import type { TemplateContext } from './template.js';
import type { NameRewrite, ResolvedRule } from './rule.js';
import { compositeKey } from '../core/composite-key.js';
import { quote } from '../core/quote.js';

export interface RelatedPair {
  readonly source: ObjectIdentity;
  readonly destination: ObjectIdentity;
}

export interface Resolution {
  readonly pairs: RelatedPair[];
  /** Problems for the primary's owner: bad names, non-string values, unpaired names (at most MAX_RULE_PROBLEMS, then a count). */
  readonly problems: string[];
  /** The rule names more objects than the limit it was resolved with: `pairs` are the first of them. */
  readonly more?: boolean;
}

/** Problems said per rule and primary: a list of a hundred thousand bad names is not a hundred thousand Events. */
export const MAX_RULE_PROBLEMS = 10;

/** Longer than any object name: not a name, and never given to a rewrite's regex. */
const MAX_NAME = 253;

export interface ResolveInput {
  readonly rule: ResolvedRule;
  /** The primary on its platform cluster. */
  readonly primary: KubeObject;
  readonly platformCluster: string;
  /** The primary's copy in the service cluster. */
  readonly copy: KubeObject;
  readonly serviceCluster: string;
  readonly context: TemplateContext;
}

const dnsSubdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

export function objectNameProblem(name: string): string | undefined {
  if (name.length === 0) return 'is empty';
  if (name.length > 253) return `is ${name.length} characters long (at most 253)`;
  if (!dnsSubdomain.test(name)) return 'is not a valid object name (lowercase letters, digits, "-" and ".", starting and ending alphanumeric)';
  return undefined;
}

const dnsLabel = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** Why a rendered namespace cannot be used ("is empty", ...), or undefined. */
export function namespaceProblem(namespace: string): string | undefined {
  if (namespace === '') return 'is empty';
  if (namespace.length > 63 || !dnsLabel.test(namespace)) return `${quote(namespace)} is not a valid namespace name (a DNS label of at most 63 characters)`;
  return undefined;
}

/** Which side is the source for this rule, and the namespaces on each side. */
export interface Sides {
  readonly sourceObject: KubeObject;
  readonly destObject: KubeObject;
  readonly sourceCluster: string;
  readonly destCluster: string;
  readonly sourceNamespace: string;
  readonly destNamespace: string;
}

export function sidesOf(input: ResolveInput): Sides {
  const { rule, primary, copy, context } = input;
  const [sourceObject, destObject] = rule.origin === 'platform' ? [primary, copy] : [copy, primary];
  const [sourceCluster, destCluster] = rule.origin === 'platform' ? [input.platformCluster, input.serviceCluster] : [input.serviceCluster, input.platformCluster];
  return {
    sourceObject,
    destObject,
    sourceCluster,
    destCluster,
    sourceNamespace: rule.sourceNamespace?.render(context) ?? sourceObject.metadata.namespace ?? '',
    destNamespace: rule.destinationNamespace?.render(context) ?? destObject.metadata.namespace ?? '',
  };
}

/**
 * Reference and template rules: names computed from the primary (and its copy) alone; at most
 * `limit` values of a reference path are looked at (a wildcard over a tenant's list).
 */
export function resolveRelated(input: ResolveInput, limit = Number.POSITIVE_INFINITY): Resolution {
  const { rule, context } = input;
  const sides = sidesOf(input);
  const problems: string[] = [];
  let names: Array<{ source: string; destination: string | undefined }>;
  let more = false;
  const finder = rule.finder;
  if (finder.kind === 'reference') {
    const found = stringsAt(finder.path, sides.sourceObject, limit);
    more = found.more === true;
    for (const v of found.invalid) problems.push(`rule ${rule.id}: ${finder.path.source} yields ${kindOf(v)}, not a name`);
    let destNames: string[] | undefined;
    if (finder.destinationPath) {
      const d = stringsAt(finder.destinationPath, sides.destObject, limit);
      for (const v of d.invalid) problems.push(`rule ${rule.id}: ${finder.destinationPath.source} yields ${kindOf(v)}, not a name`);
      destNames = d.values;
    }
    names = found.values.map((source, i) => ({
      source,
      destination: destNames ? destNames[i] : source.length > MAX_NAME ? source : rewrite(finder.rewrite, source, context),
    }));
    if (destNames && destNames.length < found.values.length) {
      problems.push(
        `rule ${rule.id}: ${finder.path.source} names ${found.values.length} object(s) but ${finder.destinationPath!.source} only ${destNames.length}; ` +
          'unpaired names wait until the destination path names them',
      );
      names = names.filter((n) => n.destination !== undefined);
    }
  } else if (finder.kind === 'template') {
    const source = finder.name.render(context);
    names = [{ source, destination: finder.destinationName?.render(context) ?? source }];
  } else {
    throw new Error(`rule ${rule.id}: ${finder.kind} rules are resolved from listed objects (pairsForObjects)`);
  }
  return { ...toPairs(input, sides, names, problems), ...(more ? { more } : {}) };
}

/** A found object as a selector or inverse rule keeps it: its names, and the name of its copy. */
export interface FoundObject {
  readonly name: string;
  readonly namespace: string | undefined;
  /** The destination name, rendered while the whole object was at hand (a rewrite may read it as `related`). */
  readonly destination: string;
}

/**
 * What a selector or inverse rule keeps of an object it found: its names and its copy's name,
 * rendered now (the rewrite may read the object), not the object: up to limits.relatedPerPrimary
 * + 1 of them are held together, and a tenant's object may carry megabytes of labels.
 */
export function foundObject(input: ResolveInput, object: KubeObject): FoundObject {
  const finder = input.rule.finder;
  const rw = finder.kind === 'selector' || finder.kind === 'inverse' ? finder.rewrite : undefined;
  const source = object.metadata.name ?? '';
  return { name: source, namespace: object.metadata.namespace, destination: source.length > MAX_NAME ? source : rewrite(rw, source, { ...input.context, related: object }) };
}

/** Selector and inverse rules: the objects the reconciler found (foundObject), as pairs. */
export function pairsForObjects(input: ResolveInput, objects: readonly FoundObject[]): Resolution {
  const names = objects.map((o) => ({ source: o.name, destination: o.destination, namespace: o.namespace }));
  return toPairs(input, sidesOf(input), names, []);
}

function toPairs(
  input: ResolveInput,
  sides: Sides,
  names: ReadonlyArray<{ source: string; destination: string | undefined; namespace?: string | undefined }>,
  problems: string[],
): Resolution {
  const { rule } = input;
  const pairs: RelatedPair[] = [];
  const seen = new Set<string>();
  for (const { source, destination, namespace } of names) {
    const dest = destination ?? source;
    const sourceNamespace = namespace ?? sides.sourceNamespace;
    const bad = objectNameProblem(source);
    if (bad) {
      problems.push(`rule ${rule.id}: source name ${quote(source)} ${bad}`);
      continue;
    }
    const badNamespace = rule.sourceType.namespaced ? namespaceProblem(sourceNamespace) : undefined;
    if (badNamespace) {
      problems.push(`rule ${rule.id}: the source namespace of ${quote(source)} ${badNamespace}`);
      continue;
    }
    const badDestNamespace = rule.destinationType.namespaced ? namespaceProblem(sides.destNamespace) : undefined;
    if (badDestNamespace) {
      problems.push(`rule ${rule.id}: the destination namespace ${badDestNamespace}`);
      continue;
    }
    const badDest = objectNameProblem(dest);
    if (badDest) {
      problems.push(`rule ${rule.id}: destination name ${quote(dest)} ${badDest}`);
      continue;
    }
    const key = compositeKey(sourceNamespace, source, dest);
    if (seen.has(key)) continue;
    seen.add(key);
    pairs.push({
      source: { cluster: sides.sourceCluster, group: rule.sourceType.group, resource: rule.sourceType.resource, namespace: rule.sourceType.namespaced ? sourceNamespace : '', name: source },
      destination: { cluster: sides.destCluster, group: rule.destinationType.group, resource: rule.destinationType.resource, namespace: rule.destinationType.namespaced ? sides.destNamespace : '', name: dest },
    });
  }
  return { pairs, problems: capProblems(rule.id, problems) };
}

/** The first MAX_RULE_PROBLEMS problems, and how many more there were. */
function capProblems(ruleId: string, problems: string[]): string[] {
  if (problems.length <= MAX_RULE_PROBLEMS) return problems;
  return [...problems.slice(0, MAX_RULE_PROBLEMS), `rule ${ruleId}: ${problems.length - MAX_RULE_PROBLEMS} more problem(s) like these`];
}

function rewrite(rw: NameRewrite | undefined, value: string, context: TemplateContext): string {
  if (!rw) return value;
  if (rw.kind === 'regex') return value.replace(rw.pattern, rw.replacement);
  return rw.template.render({ ...context, value });
}

/** "a number", "an object", "null": for messages about a value of the wrong type. */
function kindOf(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  const t = typeof v;
  return /^[aeiou]/.test(t) ? `an ${t}` : `a ${t}`;
}
