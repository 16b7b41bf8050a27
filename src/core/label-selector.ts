/**
 * Kubernetes label selectors: validation with messages that say which key or
 * value is wrong, matching against a label map, and the query-string form the
 * API server takes.
 */
import { quote } from './quote.js';

export interface SelectorRequirement {
  readonly key: string;
  readonly operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist';
  readonly values: readonly string[];
}

export interface LabelSelector {
  readonly requirements: readonly SelectorRequirement[];
}

const namePart = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const dnsSubdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const valuePattern = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

/** Why `key` is not a valid label key, or undefined when it is. */
export function labelKeyProblem(key: string): string | undefined {
  const slash = key.lastIndexOf('/');
  const prefix = slash >= 0 ? key.slice(0, slash) : undefined;
  const name = slash >= 0 ? key.slice(slash + 1) : key;
  if (prefix !== undefined && (prefix.length > 253 || !dnsSubdomain.test(prefix))) {
    return `label key ${quote(key)}: prefix ${quote(prefix)} must be a DNS subdomain of at most 253 characters`;
  }
  if (name.length === 0 || name.length > 63 || !namePart.test(name)) {
    return `label key ${quote(key)}: name ${quote(name)} must be 1-63 characters of [A-Za-z0-9-_.], starting and ending alphanumeric`;
  }
  return undefined;
}

/** Why `value` is not a valid label value, or undefined when it is. */
export function labelValueProblem(value: string): string | undefined {
  if (value.length > 63 || !valuePattern.test(value)) {
    return `label value ${quote(value)} must be at most 63 characters of [A-Za-z0-9-_.], starting and ending alphanumeric`;
  }
  return undefined;
}

/** Why `operator` cannot take `count` values, or undefined when it can. */
export function operatorValuesProblem(operator: SelectorRequirement['operator'], count: number): string | undefined {
  if ((operator === 'In' || operator === 'NotIn') && count === 0) return `operator ${operator} needs at least one value`;
  if ((operator === 'Exists' || operator === 'DoesNotExist') && count > 0) return `operator ${operator} takes no values`;
  return undefined;
}

export interface RawSelector {
  readonly matchLabels?: Readonly<Record<string, string>> | undefined;
  readonly matchExpressions?: ReadonlyArray<{ key: string; operator: SelectorRequirement['operator']; values?: string[] | undefined }> | undefined;
}

/** Builds a selector, or the list of problems with their field paths (relative to the selector). */
export function buildSelector(raw: RawSelector): { selector?: LabelSelector; problems: Array<{ path: string; message: string }> } {
  const problems: Array<{ path: string; message: string }> = [];
  const requirements: SelectorRequirement[] = [];
  for (const [key, value] of Object.entries(raw.matchLabels ?? {})) {
    const p = labelKeyProblem(key) ?? labelValueProblem(value);
    if (p) problems.push({ path: `matchLabels.${key}`, message: p });
    requirements.push({ key, operator: 'In', values: [value] });
  }
  (raw.matchExpressions ?? []).forEach((e, i) => {
    const values = e.values ?? [];
    const keyProblem = labelKeyProblem(e.key);
    if (keyProblem) problems.push({ path: `matchExpressions[${i}].key`, message: keyProblem });
    const operatorProblem = operatorValuesProblem(e.operator, values.length);
    if (operatorProblem) problems.push({ path: `matchExpressions[${i}].values`, message: operatorProblem });
    values.forEach((v, j) => {
      const p = labelValueProblem(v);
      if (p) problems.push({ path: `matchExpressions[${i}].values[${j}]`, message: p });
    });
    requirements.push({ key: e.key, operator: e.operator, values });
  });
  return problems.length ? { problems } : { selector: { requirements }, problems };
}

export function matchesSelector(selector: LabelSelector, labels: Readonly<Record<string, string>> | undefined): boolean {
  const l = labels ?? {};
  return selector.requirements.every((r) => {
    const has = Object.prototype.hasOwnProperty.call(l, r.key);
    switch (r.operator) {
      case 'In':
        return has && r.values.includes(l[r.key]!);
      case 'NotIn':
        return !has || !r.values.includes(l[r.key]!);
      case 'Exists':
        return has;
      case 'DoesNotExist':
        return !has;
    }
  });
}

/** The `labelSelector=` query form, e.g. `tier in (gold),!legacy`. */
export function selectorQuery(selector: LabelSelector): string {
  return selector.requirements
    .map((r) => {
      switch (r.operator) {
        case 'In':
          return r.values.length === 1 ? `${r.key}=${r.values[0]}` : `${r.key} in (${r.values.join(',')})`;
        case 'NotIn':
          return `${r.key} notin (${r.values.join(',')})`;
        case 'Exists':
          return r.key;
        case 'DoesNotExist':
          return `!${r.key}`;
      }
    })
    .join(',');
}
