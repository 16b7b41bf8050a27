/**
 * Reads, validates and compiles the YAML config. Every problem is collected
 * (not only the first) and reported as `path.to.field: what is wrong`.
 */
import { compileCopyPolicy } from './copy-policy.js';
import { safetyProblems } from './safety-checks.js';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import { parseDocument } from 'yaml';
import type { z } from 'zod';
import { parseJsonPath } from '../rules/json-path.js';
import { buildSelector, labelKeyProblem, labelValueProblem } from '../core/label-selector.js';
import { Template } from '../rules/template.js';
import { hasManyClusters, type Config, type PublishedResource } from './config.js';
import { publishedResourcesFromYaml } from './published-resource.js';
import { configSchema, type RawConfig, type RawRelatedRule, type RawRewrite } from './schema.js';
import type { ClusterConfig } from '../kube/cluster-config.js';
import type { NameRewrite, OwnerPointer, Provenance, RelatedFinder, RelatedRule, SelectorTemplate } from '../rules/rule.js';
import { ConfigError, type ConfigProblem } from './config-problem.js';


/** Variables a primary's templates may use. */
export const primaryVariables = ['cluster', 'namespace', 'name', 'object'] as const;
/** Variables of a reference rewrite: the primary's plus `value`, the source name. */
export const rewriteVariables = [...primaryVariables, 'value'] as const;
/** Variables of a selector or inverse rewrite: also `related`, the matched object. */
export const relatedRewriteVariables = [...rewriteVariables, 'related'] as const;

export function loadConfig(file: string): Config {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError(file, [{ path: '', message: `cannot read the file: ${(err as Error).message}` }]);
  }
  return parseConfig(text, file);
}

export function parseConfig(text: string, file: string): Config {
  const doc = parseDocument(text);
  if (doc.errors.length > 0) {
    throw new ConfigError(
      file,
      doc.errors.map((e) => ({ path: `line ${e.linePos?.[0]?.line ?? '?'}`, message: e.message.split('\n')[0] ?? e.message })),
    );
  }
  const input: unknown = doc.toJS() ?? {};
  const imported = importPublishedResources(input, file);
  const parsed = configSchema.safeParse(input);
  // Uniqueness is checked on the raw input so that it is reported together
  // with schema problems (zod skips refinements of objects that have some).
  const duplicates = duplicateProblems(input);
  // A manifest that could not be read leaves "resources" short: that is not a second problem.
  const schemaProblems = parsed.success ? [] : zodProblems(parsed.error).filter((p) => imported.problems.length === 0 || p.path !== 'resources');
  const problems = [...imported.problems, ...schemaProblems, ...duplicates].map(imported.rename);
  if (!parsed.success || problems.length > 0) throw new ConfigError(file, problems);
  try {
    return compile(parsed.data, file);
  } catch (err) {
    if (err instanceof ConfigError) throw new ConfigError(file, err.problems.map(imported.rename));
    throw err;
  }
}

/**
 * Appends the PublishedResources of `publishedResourceFiles` to `resources`
 * (in place, before validation). `rename` points a problem in an appended
 * entry back at its file and document.
 */
function importPublishedResources(input: unknown, file: string): { problems: ConfigProblem[]; rename: (p: ConfigProblem) => ConfigProblem } {
  const none = { problems: [], rename: (p: ConfigProblem) => p };
  if (!input || typeof input !== 'object' || Array.isArray(input)) return none;
  const cfg = input as Record<string, unknown>;
  if (!Array.isArray(cfg.publishedResourceFiles)) return none;
  const own = Array.isArray(cfg.resources) ? cfg.resources : cfg.resources === undefined ? [] : undefined;
  if (!own) return none; // the schema reports the wrong type of "resources"
  const problems: ConfigProblem[] = [];
  const origins: string[] = [];
  cfg.publishedResourceFiles.forEach((entry, i) => {
    if (typeof entry !== 'string') return; // the schema reports it
    const where = `publishedResourceFiles[${i}] (${entry})`;
    const path = isAbsolute(entry) ? entry : resolve(dirname(file), entry);
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (err) {
      problems.push({ path: `publishedResourceFiles[${i}]`, message: `cannot read ${path}: ${(err as Error).message}` });
      return;
    }
    const { resources, problems: found } = publishedResourcesFromYaml(text, where);
    problems.push(...found);
    resources.forEach((r, k) => {
      own.push(r);
      origins[own.length - 1] = `${where} PublishedResource ${k + 1}`;
    });
  });
  cfg.resources = own;
  const rename = (p: ConfigProblem): ConfigProblem => {
    const m = /^resources\[(\d+)\](.*)$/.exec(p.path);
    const origin = m ? origins[Number(m[1])] : undefined;
    return origin ? { path: `${origin} (as resources[${m![1]}]${m![2]})`, message: p.message } : p;
  };
  return { problems, rename };
}

/** Duplicate cluster names and duplicate rule ids within a resource. */
function duplicateProblems(input: unknown): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  const record = (v: unknown): Record<string, unknown> => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {});
  const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
  const cfg = record(input);
  const clusters = new Map<string, string>();
  list(cfg.platformClusters).forEach((c, i) => {
    const name = record(c).name;
    if (typeof name !== 'string') return;
    const first = clusters.get(name);
    if (first) problems.push({ path: `platformClusters[${i}].name`, message: `duplicate cluster name "${name}" (also ${first})` });
    else clusters.set(name, `platformClusters[${i}]`);
  });
  const serviceName = record(cfg.serviceCluster).name ?? 'service';
  if (typeof serviceName === 'string' && clusters.has(serviceName)) {
    problems.push({ path: 'serviceCluster.name', message: `"${serviceName}" is also the name of ${clusters.get(serviceName)}; name the service cluster differently` });
  }
  list(cfg.resources).forEach((res, i) => {
    const ids = new Map<string, number>();
    list(record(res).related).forEach((rule, j) => {
      const id = record(rule).id;
      if (typeof id !== 'string') return;
      const first = ids.get(id);
      if (first !== undefined) problems.push({ path: `resources[${i}].related[${j}].id`, message: `duplicate rule id "${id}" (also related[${first}])` });
      else ids.set(id, j);
    });
  });
  return problems;
}

function zodProblems(error: z.ZodError): ConfigProblem[] {
  return error.issues.map((issue) => ({ path: formatPath(issue.path), message: issue.message }));
}

export function formatPath(path: ReadonlyArray<PropertyKey>): string {
  let out = '';
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`;
    else out += out ? `.${String(part)}` : String(part);
  }
  return out;
}

function compile(raw: RawConfig, file: string): Config {
  const problems: ConfigProblem[] = [];
  const base = dirname(resolve(file));
  const absolute = (p: string) => (isAbsolute(p) ? p : resolve(base, p));

  const cluster = (c: { name: string; kubeconfig?: string | undefined; context?: string | undefined; kcp?: RawConfig['platformClusters'][number]['kcp'] }, where: string): ClusterConfig => {
    const kubeconfig = c.kubeconfig === undefined ? undefined : absolute(c.kubeconfig);
    if (kubeconfig !== undefined && !existsSync(kubeconfig)) {
      problems.push({ path: `${where}.kubeconfig`, message: `file ${kubeconfig} does not exist` });
    }
    const kcp = c.kcp && { endpointSlice: c.kcp.apiExportEndpointSlice, url: c.kcp.virtualWorkspaceUrl?.replace(/\/+$/, '') };
    return { name: c.name, kubeconfig, context: c.context, kcp };
  };

  const template = (source: string, where: string, variables: readonly string[]): Template => {
    try {
      return Template.parse(source, variables);
    } catch (err) {
      problems.push({ path: where, message: (err as Error).message });
      return Template.parse('', variables);
    }
  };

  const path = (source: string, where: string) => {
    try {
      return parseJsonPath(source);
    } catch (err) {
      problems.push({ path: where, message: (err as Error).message });
      return parseJsonPath('.invalid');
    }
  };

  const resources: PublishedResource[] = raw.resources.map((res, i) => {
    const where = `resources[${i}]`;
    let selector;
    if (res.selector) {
      const built = buildSelector(res.selector);
      for (const p of built.problems) problems.push({ path: `${where}.selector.${p.path}`, message: p.message });
      selector = built.selector;
    }
    const related = res.related.map((rule, j): RelatedRule => {
      const rw = `${where}.related[${j}]`;
      return {
        id: rule.id,
        origin: rule.origin,
        source: { group: rule.group, version: rule.version, resource: rule.resource, kind: rule.kind },
        destination: rule.destination ?? { group: rule.group, version: rule.version, resource: rule.resource, kind: rule.kind },
        finder: finder(rule, rw, template, path, problems),
        sourceNamespace: rule.namespace?.source === undefined ? undefined : template(rule.namespace.source, `${rw}.namespace.source`, primaryVariables),
        destinationNamespace:
          rule.namespace?.destination === undefined ? undefined : template(rule.namespace.destination, `${rw}.namespace.destination`, primaryVariables),
        provenance: rule.origin === 'service' ? provenance(rule.provenance, `${rw}.provenance`, template, problems) : undefined,
        where: rw,
      };
    });
    return {
      type: { group: res.group, version: res.version, resource: res.resource, kind: res.kind },
      selector,
      naming: {
        namespace: template(res.naming.namespace, `${where}.naming.namespace`, primaryVariables),
        name: template(res.naming.name, `${where}.naming.name`, primaryVariables),
      },
      related,
      where,
    };
  });

  const config: Config = {
    agentName: raw.agentName,
    platformClusters: raw.platformClusters.map((c, i) => cluster(c, `platformClusters[${i}]`)),
    serviceCluster: cluster(raw.serviceCluster, 'serviceCluster'),
    storePath: absolute(raw.store.path),
    copy: compileCopyPolicy(raw.copy.labels, raw.copy.annotations, raw.copy.secretTypes.deny),
    workers: raw.workers,
    limits: raw.limits,
    resync: raw.resync,
    watch: { timeoutSeconds: raw.watch.timeoutSeconds, idleTimeoutSeconds: raw.watch.idleTimeoutSeconds ?? raw.watch.timeoutSeconds + 30 },
    leaderElection: {
      ...raw.leaderElection,
      namespace: raw.leaderElection.namespace ?? process.env.POD_NAMESPACE ?? 'default',
      namespaceKnown: raw.leaderElection.namespace !== undefined || process.env.POD_NAMESPACE !== undefined,
      name: raw.leaderElection.name ?? `relsync-${raw.agentName.toLowerCase().replace(/[^a-z0-9.-]/g, '-')}`,
    },
    resources,
  };
  // Only a config whose parts compiled is checked for what it would let a tenant do.
  if (problems.length === 0) problems.push(...safetyProblems(resources, config.platformClusters.map((c) => c.name), hasManyClusters(config.platformClusters)));
  if (problems.length > 0) throw new ConfigError(file, problems);
  return config;
}

/** A service-origin rule's provenance; safe by default: an ownerReference to the copy. */
function provenance(
  raw: RawRelatedRule['provenance'],
  where: string,
  template: (s: string, w: string, v: readonly string[]) => Template,
  problems: ConfigProblem[],
): Provenance {
  if (raw?.anyInNamespace) return { kind: 'anyInNamespace' };
  if (raw?.label) {
    const p = labelKeyProblem(raw.label.key);
    if (p) problems.push({ path: `${where}.label.key`, message: p });
    return { kind: 'label', key: raw.label.key, value: template(raw.label.value, `${where}.label.value`, primaryVariables) };
  }
  return { kind: 'ownerReference' };
}

function finder(
  rule: RawRelatedRule,
  where: string,
  template: (s: string, w: string, v: readonly string[]) => Template,
  path: (s: string, w: string) => ReturnType<typeof parseJsonPath>,
  problems: ConfigProblem[],
): RelatedFinder {
  const regex = (source: string, at: string): RegExp | undefined => {
    try {
      return new RegExp(source);
    } catch (err) {
      problems.push({ path: at, message: `invalid regular expression: ${(err as Error).message}` });
      return undefined;
    }
  };
  const rewriteOf = (raw: RawRewrite | undefined, at: string, variables: readonly string[]): NameRewrite | undefined => {
    if (raw?.regex) {
      const pattern = regex(raw.regex.pattern, `${at}.regex.pattern`);
      return pattern ? { kind: 'regex', pattern, replacement: raw.regex.replacement } : undefined;
    }
    if (raw?.template) return { kind: 'template', template: template(raw.template, `${at}.template`, variables) };
    return undefined;
  };

  if (rule.reference) {
    const ref = rule.reference;
    return {
      kind: 'reference',
      path: path(ref.path, `${where}.reference.path`),
      destinationPath: ref.destinationPath === undefined ? undefined : path(ref.destinationPath, `${where}.reference.destinationPath`),
      rewrite: rewriteOf(ref.rewrite, `${where}.reference.rewrite`, rewriteVariables),
    };
  }
  if (rule.selector) {
    const sel = rule.selector;
    const at = `${where}.selector`;
    const requirements: SelectorTemplate[] = [
      ...Object.entries(sel.matchLabels ?? {}).map(([key, value]) => ({
        key: template(key, `${at}.matchLabels.${key}`, primaryVariables),
        operator: 'In' as const,
        values: [template(value, `${at}.matchLabels.${key}`, primaryVariables)],
        where: `${at}.matchLabels.${key}`,
      })),
      ...(sel.matchExpressions ?? []).map((e, i) => {
        const w = `${at}.matchExpressions[${i}]`;
        const values = e.values ?? [];
        if ((e.operator === 'In' || e.operator === 'NotIn') && values.length === 0) problems.push({ path: `${w}.values`, message: `operator ${e.operator} needs at least one value` });
        if ((e.operator === 'Exists' || e.operator === 'DoesNotExist') && values.length > 0) problems.push({ path: `${w}.values`, message: `operator ${e.operator} takes no values` });
        return { key: template(e.key, `${w}.key`, primaryVariables), operator: e.operator, values: values.map((v, j) => template(v, `${w}.values[${j}]`, primaryVariables)), where: w };
      }),
    ];
    // A key or value without templates is checked now; templated ones when rendered.
    for (const r of requirements) {
      const keyProblem = r.key.isConstant ? labelKeyProblem(r.key.render({})) : undefined;
      if (keyProblem) problems.push({ path: r.where, message: keyProblem });
      for (const v of r.values) {
        const valueProblem = v.isConstant ? labelValueProblem(v.render({})) : undefined;
        if (valueProblem) problems.push({ path: r.where, message: valueProblem });
      }
    }
    return { kind: 'selector', requirements, allowEmpty: sel.allowEmpty, rewrite: rewriteOf(sel.rewrite, `${at}.rewrite`, relatedRewriteVariables) };
  }
  if (rule.inverse) {
    const inv = rule.inverse;
    const at = `${where}.inverse`;
    let owner: OwnerPointer;
    if (inv.label !== undefined) {
      const p = labelKeyProblem(inv.label);
      if (p) problems.push({ path: `${at}.label`, message: p });
      owner = { kind: 'label', key: inv.label };
    } else if (inv.annotation !== undefined) owner = { kind: 'annotation', key: inv.annotation };
    else if (inv.ownerReference) owner = { kind: 'ownerReference' };
    else {
      const pattern = regex(inv.namePattern!, `${at}.namePattern`);
      if (pattern && !/\(\?<name>/.test(inv.namePattern!)) problems.push({ path: `${at}.namePattern`, message: 'needs a named group (?<name>...) that captures the owner\'s name' });
      owner = { kind: 'namePattern', pattern: pattern ?? /(?<name>$^)/ };
    }
    const nsFrom = inv.namespaceFrom;
    return {
      kind: 'inverse',
      owner,
      namespaceFrom: nsFrom ? (nsFrom.label !== undefined ? { kind: 'label', key: nsFrom.label } : { kind: 'annotation', key: nsFrom.annotation! }) : undefined,
      rewrite: rewriteOf(inv.rewrite, `${at}.rewrite`, relatedRewriteVariables),
    };
  }
  const t = rule.template!;
  return {
    kind: 'template',
    name: template(t.name, `${where}.template.name`, primaryVariables),
    destinationName: t.destinationName === undefined ? undefined : template(t.destinationName, `${where}.template.destinationName`, primaryVariables),
  };
}
