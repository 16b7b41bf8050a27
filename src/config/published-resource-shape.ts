/**
 * The fields of api-syncagent's PublishedResource spec (syncagent.kcp.io/v1alpha1, as of its
 * cleanupPolicy and syncStatus fields), and the check that a manifest has no others. A typo such as
 * `replacment:` in a reference's regex would otherwise be dropped and change what a rule copies
 * (a tenant's value unprefixed), so every level is checked, and booleans must be booleans (YAML
 * 1.2 reads `yes` as a string, where kubectl's YAML 1.1 read a boolean). `null` is an absent field,
 * as the API server prunes it. Values the translation reads further (strings, selectors, names)
 * are checked by relsync's own config schema after it.
 */
import type { ConfigProblem } from './config-problem.js';

type Shape = 'any' | 'boolean' | 'string' | { readonly [field: string]: Shape } | { readonly '[]': Shape };

const REGEX: Shape = { pattern: 'any', replacement: 'any' };
const TEMPLATE: Shape = { template: 'any' };
const OBJECT_SPEC = {
  reference: { path: 'any', regex: REGEX },
  template: TEMPLATE,
  selector: { matchLabels: 'any', matchExpressions: 'any', rewrite: { regex: REGEX, template: TEMPLATE } },
} as const;

const MUTATION: Shape = { delete: { path: 'string' }, regex: { path: 'string', pattern: 'string', replacement: 'string' }, template: { path: 'string', template: 'string' } };
const MUTATIONS: Shape = { spec: { '[]': MUTATION }, status: { '[]': MUTATION } };

const RELATED: Shape = {
  identifier: 'any',
  origin: 'any',
  group: 'any',
  version: 'any',
  resource: 'any',
  kind: 'any',
  identityHash: 'any',
  cleanup: 'boolean',
  cleanupPolicy: 'any',
  projection: { group: 'any', version: 'any', resource: 'any' },
  object: { ...OBJECT_SPEC, namespace: OBJECT_SPEC },
  mutation: MUTATIONS,
  watch: { byOwner: 'any', bySelector: 'any' },
  syncStatus: 'boolean',
};

/** `spec` of a PublishedResource. */
const SPEC: Shape = {
  resource: { apiGroup: 'any', version: 'any', versions: 'any', kind: 'any' },
  filter: { namespace: 'any', resource: 'any' },
  naming: { name: 'string', namespace: 'string' },
  enableWorkspacePaths: 'boolean',
  projection: { group: 'string', version: 'string', versions: 'any', kind: 'string', plural: 'string', scope: 'string', shortNames: 'any', categories: 'any' },
  mutation: MUTATIONS,
  related: { '[]': RELATED },
  synchronization: { enabled: 'boolean' },
};

/** What in `spec` is not a field of a PublishedResource, or not of its type, by path (`spec.related[1].object.templte`). */
export function specShapeProblems(spec: unknown): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  check(spec, SPEC, 'spec', problems);
  return problems;
}

function check(value: unknown, shape: Shape, at: string, problems: ConfigProblem[]): void {
  if (value === null || value === undefined || shape === 'any') return;
  if (shape === 'boolean') {
    if (typeof value !== 'boolean') problems.push({ path: at, message: `must be true or false, got ${JSON.stringify(value)}` });
    return;
  }
  if (shape === 'string') {
    if (typeof value !== 'string') problems.push({ path: at, message: `must be a string, got ${JSON.stringify(value)}` });
    return;
  }
  if ('[]' in shape) {
    if (!Array.isArray(value)) problems.push({ path: at, message: `must be a list, got ${JSON.stringify(value)}` });
    else value.forEach((item, i) => check(item, shape['[]'] as Shape, `${at}[${i}]`, problems));
    return;
  }
  if (typeof value !== 'object' || Array.isArray(value)) {
    problems.push({ path: at, message: `must be an object, got ${JSON.stringify(value)}` });
    return;
  }
  const fields = shape as { readonly [field: string]: Shape };
  for (const [key, inner] of Object.entries(value)) {
    const known = Object.hasOwn(fields, key) ? fields[key] : undefined;
    if (known === undefined) problems.push({ path: `${at}.${key}`, message: `unknown field (a PublishedResource has here: ${Object.keys(fields).join(', ')})` });
    else check(inner, known, `${at}.${key}`, problems);
  }
}
