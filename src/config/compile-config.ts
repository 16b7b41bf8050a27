/**
 * Compiles a config that passed the schema: templates, JSONPaths, regexes
 * and selectors are parsed once, here, so that every mistake in them is
 * reported at start with its place in the file (all of them, not the first),
 * and the rest of relsync works with parsed rules only.
 */
import { existsSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import { buildSelector, labelKeyProblem, labelValueProblem, operatorValuesProblem } from '../core/label-selector.js';
import type { ClusterConfig } from '../kube/cluster-config.js';
import { parseJsonPath, type JsonPath } from '../rules/json-path.js';
import { MUTATION_VARIABLES, type Mutation, type MutationRules } from '../rules/mutation.js';
import type { NameRewrite, OwnerPointer, Provenance, RelatedFinder, RelatedRule, SelectorTemplate } from '../rules/rule.js';
import { Template } from '../rules/template.js';
import { linearRegExp } from '../util/linear-regexp.js';
import { hasManyClusters, type Config, type PublishedResource } from './config.js';
import { ConfigError, type ConfigProblem } from './config-problem.js';
import { compileCopyPolicy } from './copy-policy.js';
import { destinationTypeProblem } from './related-types.js';
import { safetyNotices, safetyProblems } from './safety-checks.js';
import type { RawConfig, RawRelatedRule, RawRewrite } from './schema.js';

/** Variables a primary's templates may use (`clusterPath` only where the resource reads workspace paths). */
export const primaryVariables = ['cluster', 'clusterPath', 'namespace', 'name', 'object'] as const;
/** Variables of a reference rewrite: the primary's plus `value`, the source name. */
export const rewriteVariables = [...primaryVariables, 'value'] as const;
/** Variables of a selector or inverse rewrite: also `related`, the matched object. */
export const relatedRewriteVariables = [...rewriteVariables, 'related'] as const;

/**
 * Where the problems of one config are gathered while its parts compile: each part that does not
 * compile is a problem at its place, and a stand-in lets the rest be checked too.
 */
interface Compiling {
  readonly problems: ConfigProblem[];
  template(source: string, where: string, variables: readonly string[]): Template;
  path(source: string, where: string): JsonPath;
  /** Rewrites and name patterns run on names a tenant writes: in linear time, as Go's RE2 would (util/linear-regexp.ts). */
  regex(source: string, where: string): RegExp | undefined;
}

function compiling(problems: ConfigProblem[]): Compiling {
  const problem = (where: string, err: unknown) => problems.push({ path: where, message: (err as Error).message });
  return {
    problems,
    template(source, where, variables) {
      try {
        return Template.parse(source, variables);
      } catch (err) {
        problem(where, err);
        return Template.parse('', variables);
      }
    },
    path(source, where) {
      try {
        return parseJsonPath(source);
      } catch (err) {
        problem(where, err);
        return parseJsonPath('.invalid');
      }
    },
    regex(source, where) {
      try {
        return linearRegExp(source);
      } catch (err) {
        problems.push({ path: where, message: `invalid regular expression: ${(err as Error).message}` });
        return undefined;
      }
    },
  };
}

/** The Config of a raw config that passed the schema, or a ConfigError naming every problem found. */
export function compileConfig(raw: RawConfig, file: string): Config {
  const problems: ConfigProblem[] = [];
  const c = compiling(problems);
  const base = dirname(resolve(file));
  const absolute = (p: string) => (isAbsolute(p) ? p : resolve(base, p));
  const cluster = (rawCluster: RawCluster, where: string): ClusterConfig => {
    const kubeconfig = rawCluster.kubeconfig === undefined ? undefined : absolute(rawCluster.kubeconfig);
    if (kubeconfig !== undefined && !existsSync(kubeconfig)) problems.push({ path: `${where}.kubeconfig`, message: `file ${kubeconfig} does not exist` });
    const kcp = rawCluster.kcp && { endpointSlice: rawCluster.kcp.apiExportEndpointSlice, url: rawCluster.kcp.virtualWorkspaceUrl?.replace(/\/+$/, '') };
    return { name: rawCluster.name, kubeconfig, context: rawCluster.context, kcp };
  };
  const resources = raw.resources.map((res, i) => compileResource(c, res, `resources[${i}]`));
  const config: Config = {
    agentName: raw.agentName,
    platformClusters: raw.platformClusters.map((p, i) => cluster(p, `platformClusters[${i}]`)),
    serviceCluster: cluster(raw.serviceCluster, 'serviceCluster'),
    storePath: absolute(raw.store.path),
    copy: compileCopyPolicy(raw.copy.labels, raw.copy.annotations, raw.copy.secretTypes.deny),
    workers: raw.workers,
    limits: { ...raw.limits, parsedBytesInFlight: raw.limits.parsedBytesInFlight ?? 2 * raw.limits.parsedBytes },
    resync: raw.resync,
    cache: raw.cache,
    watch: { timeoutSeconds: raw.watch.timeoutSeconds, idleTimeoutSeconds: raw.watch.idleTimeoutSeconds ?? raw.watch.timeoutSeconds + 30 },
    leaderElection: leaderElection(raw),
    sharding: raw.sharding,
    resources,
  };
  if (raw.sharding.shards > 1 && !raw.leaderElection.enabled) problems.push({ path: 'sharding.shards', message: 'shards are Leases: more than one needs leaderElection.enabled' });
  // Only a config whose parts compiled is checked for what it would let a tenant do.
  if (problems.length === 0) problems.push(...safetyProblems(resources, config.platformClusters.map((p) => p.name), hasManyClusters(config.platformClusters)));
  if (problems.length > 0) throw new ConfigError(file, problems);
  const notices = safetyNotices(resources, config.platformClusters.some((p) => p.kcp === undefined));
  return notices.length > 0 ? { ...config, notices } : config;
}

type RawCluster = RawConfig['serviceCluster'] & { kcp?: RawConfig['platformClusters'][number]['kcp'] };

function leaderElection(raw: RawConfig): Config['leaderElection'] {
  return {
    ...raw.leaderElection,
    namespace: raw.leaderElection.namespace ?? process.env.POD_NAMESPACE ?? 'default',
    namespaceKnown: raw.leaderElection.namespace !== undefined || process.env.POD_NAMESPACE !== undefined,
    name: raw.leaderElection.name ?? `relsync-${raw.agentName.toLowerCase().replace(/[^a-z0-9.-]/g, '-')}`,
  };
}

function compileResource(parent: Compiling, res: RawConfig['resources'][number], where: string): PublishedResource {
  // `clusterPath` is there only when the resource reads it: anywhere else it would render empty, and names of two workspaces would meet.
  const c: Compiling = {
    ...parent,
    template(source, at, variables) {
      const parsed = parent.template(source, at, variables);
      if (!res.workspacePath && parsed.uses('clusterPath')) parent.problems.push({ path: at, message: `{{ clusterPath }} is the primary's kcp workspace path, read only with workspacePath: true on ${where} (a PublishedResource's spec.enableWorkspacePaths)` });
      return parsed;
    },
  };
  const selectorAt = (raw: Parameters<typeof buildSelector>[0] | undefined, at: string) => {
    if (!raw) return undefined;
    const built = buildSelector(raw);
    for (const p of built.problems) c.problems.push({ path: `${at}.${p.path}`, message: p.message });
    return built.selector;
  };
  // In the file's order, so that problems are listed as they are met.
  const selector = selectorAt(res.selector, `${where}.selector`);
  const namespaceSelector = selectorAt(res.namespaceSelector, `${where}.namespaceSelector`);
  const related = res.related.map((rule, j) => compileRelated(c, rule, `${where}.related[${j}]`));
  return {
    type: { group: res.group, version: res.version, resource: res.resource, kind: res.kind },
    ...(res.versions ? { versions: res.versions } : {}),
    ...(res.mutation ? { mutation: mutations(c, res.mutation, `${where}.mutation`) } : {}),
    ...(res.workspacePath ? { workspacePath: true } : {}),
    ...(res.adopt ? { adopt: true } : {}),
    ...(res.copyAs ? { copyAs: { group: res.copyAs.group, version: res.copyAs.version, resource: res.copyAs.resource, kind: res.copyAs.kind } } : {}),
    selector,
    ...(namespaceSelector ? { namespaceSelector } : {}),
    naming: {
      namespace: c.template(res.naming.namespace, `${where}.naming.namespace`, primaryVariables),
      name: c.template(res.naming.name, `${where}.naming.name`, primaryVariables),
    },
    related,
    where,
  };
}

function compileRelated(c: Compiling, rule: RawRelatedRule, where: string): RelatedRule {
  const source = { group: rule.group, version: rule.version, resource: rule.resource, kind: rule.kind };
  const wrongType = rule.destination && destinationTypeProblem(source, rule.destination);
  if (wrongType) c.problems.push({ path: `${where}.destination`, message: wrongType });
  const statusless = rule.group === '' && (['configmaps', 'secrets'].includes(rule.resource ?? '') || ['ConfigMap', 'Secret'].includes(rule.kind ?? ''));
  if (rule.syncStatus && statusless) c.problems.push({ path: `${where}.syncStatus`, message: 'ConfigMaps and Secrets have no status to copy' });
  const statusHint = 'status mutations apply to a status copied, and this rule copies none: set syncStatus: true, or remove them';
  return {
    id: rule.id,
    origin: rule.origin,
    source,
    destination: rule.destination ?? source,
    finder: finder(c, rule, where),
    sourceNamespace: rule.namespace?.source === undefined ? undefined : c.template(rule.namespace.source, `${where}.namespace.source`, primaryVariables),
    destinationNamespace: rule.namespace?.destination === undefined ? undefined : c.template(rule.namespace.destination, `${where}.namespace.destination`, primaryVariables),
    provenance: rule.origin === 'service' ? provenance(c, rule.provenance, `${where}.provenance`) : undefined,
    cleanup: rule.origin === 'service' ? (rule.cleanupPolicy ?? 'MatchOrigin') : 'MatchOrigin',
    ...(rule.syncStatus ? { syncStatus: true } : {}),
    ...(rule.identityHash ? { identityHash: rule.identityHash } : {}),
    ...(rule.adopt ? { adopt: true } : {}),
    ...(rule.mutation ? { mutation: mutations(c, rule.mutation, `${where}.mutation`, { statusCopied: rule.syncStatus === true, statusHint }) } : {}),
    where,
  };
}

type RawMutation = NonNullable<RawRelatedRule['mutation']>['spec'][number];

/**
 * Mutation rules, checked here: a path without wildcards, a `spec` rule's on a copied field (not
 * metadata or status: labels and annotations follow the copy policy), a `status` rule's under
 * `status`; a pattern that compiles (applied to every match, as Go's ReplaceAllString does); a
 * template over `value` and `object`.
 */
function mutations(c: Compiling, raw: NonNullable<RawRelatedRule['mutation']>, where: string, options: { statusCopied: boolean; statusHint: string } = { statusCopied: true, statusHint: '' }): MutationRules {
  const list = (items: readonly RawMutation[], side: 'spec' | 'status') => items.flatMap((m, i) => mutation(c, m, `${where}.${side}[${i}]`, side === 'status') ?? []);
  const status = list(raw.status, 'status');
  if (!options.statusCopied && status.length > 0) c.problems.push({ path: `${where}.status`, message: options.statusHint });
  return { spec: list(raw.spec, 'spec'), status };
}

function mutation(c: Compiling, m: RawMutation, at: string, status: boolean): Mutation | undefined {
  const given = m.delete ?? m.regex ?? m.template!;
  const kind = m.delete ? 'delete' : m.regex ? 'regex' : 'template';
  const pathAt = `${at}.${kind}.path`;
  let path: JsonPath;
  try {
    path = parseJsonPath(given.path);
  } catch (err) {
    c.problems.push({ path: pathAt, message: (err as Error).message });
    return undefined;
  }
  const first = path.steps[0];
  const top = first && (first.kind === 'field' || first.kind === 'elementOrKey') ? first.name : undefined;
  if (path.steps.some((s) => s.kind === 'all')) c.problems.push({ path: pathAt, message: 'a mutation names one value: no wildcards' });
  else if (status && top !== 'status') c.problems.push({ path: pathAt, message: 'a status mutation\'s path starts with status' });
  else if (!status && (top === undefined || ['apiVersion', 'kind', 'metadata', 'status'].includes(top))) c.problems.push({ path: pathAt, message: 'a spec mutation names a copied field (not apiVersion, kind, metadata or status: labels and annotations follow copy.labels and copy.annotations)' });
  else if (m.delete) return { kind: 'delete', path, where: at };
  else if (m.regex) {
    try {
      const pattern = m.regex.pattern ? linearRegExp(m.regex.pattern, 'g') : undefined;
      return { kind: 'regex', path, pattern, replacement: m.regex.replacement, where: at };
    } catch (err) {
      c.problems.push({ path: `${at}.regex.pattern`, message: (err as Error).message });
    }
  } else return { kind: 'template', path, template: c.template(m.template!.template, `${at}.template.template`, MUTATION_VARIABLES), where: at };
  return undefined;
}

/** A service-origin rule's provenance; safe by default: an ownerReference to the copy. */
function provenance(c: Compiling, raw: RawRelatedRule['provenance'], where: string): Provenance {
  if (raw?.anyInNamespace) return { kind: 'anyInNamespace' };
  if (raw?.label) {
    const p = labelKeyProblem(raw.label.key);
    if (p) c.problems.push({ path: `${where}.label.key`, message: p });
    return { kind: 'label', key: raw.label.key, value: c.template(raw.label.value, `${where}.label.value`, primaryVariables) };
  }
  return { kind: 'ownerReference' };
}

function rewriteOf(c: Compiling, raw: RawRewrite | undefined, at: string, variables: readonly string[]): NameRewrite | undefined {
  if (raw?.regex) {
    const pattern = c.regex(raw.regex.pattern, `${at}.regex.pattern`);
    return pattern ? { kind: 'regex', pattern, replacement: raw.regex.replacement } : undefined;
  }
  if (raw?.template) return { kind: 'template', template: c.template(raw.template, `${at}.template`, variables) };
  return undefined;
}

function finder(c: Compiling, rule: RawRelatedRule, where: string): RelatedFinder {
  if (rule.reference) {
    const ref = rule.reference;
    return {
      kind: 'reference',
      path: c.path(ref.path, `${where}.reference.path`),
      destinationPath: ref.destinationPath === undefined ? undefined : c.path(ref.destinationPath, `${where}.reference.destinationPath`),
      rewrite: rewriteOf(c, ref.rewrite, `${where}.reference.rewrite`, rewriteVariables),
    };
  }
  if (rule.selector) return selectorFinder(c, rule.selector, `${where}.selector`);
  if (rule.inverse) return inverseFinder(c, rule.inverse, `${where}.inverse`);
  const t = rule.template!;
  return {
    kind: 'template',
    name: c.template(t.name, `${where}.template.name`, primaryVariables),
    destinationName: t.destinationName === undefined ? undefined : c.template(t.destinationName, `${where}.template.destinationName`, primaryVariables),
  };
}

function selectorFinder(c: Compiling, sel: NonNullable<RawRelatedRule['selector']>, at: string): RelatedFinder {
  const requirements: SelectorTemplate[] = [
    ...Object.entries(sel.matchLabels ?? {}).map(([key, value]) => ({
      key: c.template(key, `${at}.matchLabels.${key}`, primaryVariables),
      operator: 'In' as const,
      values: [c.template(value, `${at}.matchLabels.${key}`, primaryVariables)],
      where: `${at}.matchLabels.${key}`,
    })),
    ...(sel.matchExpressions ?? []).map((e, i) => {
      const w = `${at}.matchExpressions[${i}]`;
      const values = e.values ?? [];
      const operatorProblem = operatorValuesProblem(e.operator, values.length);
      if (operatorProblem) c.problems.push({ path: `${w}.values`, message: operatorProblem });
      return { key: c.template(e.key, `${w}.key`, primaryVariables), operator: e.operator, values: values.map((v, j) => c.template(v, `${w}.values[${j}]`, primaryVariables)), where: w };
    }),
  ];
  // A key or value without templates is checked now; templated ones when rendered.
  for (const r of requirements) {
    const keyProblem = r.key.isConstant ? labelKeyProblem(r.key.render({})) : undefined;
    if (keyProblem) c.problems.push({ path: r.where, message: keyProblem });
    for (const v of r.values) {
      const valueProblem = v.isConstant ? labelValueProblem(v.render({})) : undefined;
      if (valueProblem) c.problems.push({ path: r.where, message: valueProblem });
    }
  }
  return { kind: 'selector', requirements, allowEmpty: sel.allowEmpty, rewrite: rewriteOf(c, sel.rewrite, `${at}.rewrite`, relatedRewriteVariables) };
}

function inverseFinder(c: Compiling, inv: NonNullable<RawRelatedRule['inverse']>, at: string): RelatedFinder {
  let owner: OwnerPointer;
  if (inv.label !== undefined) {
    const p = labelKeyProblem(inv.label);
    if (p) c.problems.push({ path: `${at}.label`, message: p });
    owner = { kind: 'label', key: inv.label };
  } else if (inv.annotation !== undefined) owner = { kind: 'annotation', key: inv.annotation };
  else if (inv.ownerReference) owner = { kind: 'ownerReference' };
  else {
    const pattern = c.regex(inv.namePattern!, `${at}.namePattern`);
    if (pattern && !/\(\?<name>/.test(inv.namePattern!)) c.problems.push({ path: `${at}.namePattern`, message: 'needs a named group (?<name>...) that captures the owner\'s name' });
    owner = { kind: 'namePattern', pattern: pattern ?? /(?<name>$^)/ };
  }
  const nsFrom = inv.namespaceFrom;
  return {
    kind: 'inverse',
    owner,
    namespaceFrom: nsFrom ? (nsFrom.label !== undefined ? { kind: 'label', key: nsFrom.label } : { kind: 'annotation', key: nsFrom.annotation! }) : undefined,
    rewrite: rewriteOf(c, inv.rewrite, `${at}.rewrite`, relatedRewriteVariables),
  };
}
