/**
 * api-syncagent's `PublishedResource` (syncagent.kcp.io/v1alpha1) read as
 * relsync config: each manifest becomes one entry of `resources`, before
 * validation, so it is checked and compiled exactly like relsync's own
 * config. What relsync cannot do the same way is an error naming the field,
 * never silently dropped. docs/api-syncagent.md has the field-by-field table.
 */
import { parseAllDocuments } from 'yaml';
import type { TypeReference } from '../core/resource-type.js';
import type { ConfigNotice, ConfigProblem } from './config-problem.js';
import { specShapeProblems } from './published-resource-shape.js';
import { gjsonToJsonPath } from './gjson-path.js';
import { destinationTypeProblem } from './related-types.js';

type Raw = Record<string, unknown>;

export const PUBLISHED_RESOURCE_API_VERSION = 'syncagent.kcp.io/v1alpha1';

const record = (v: unknown): Raw => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Raw) : {});

/**
 * Reads every PublishedResource of a YAML stream; `where` prefixes problem paths. `notices`: what
 * was read and deliberately not acted on (a manifest with synchronization disabled), for the log.
 */
export function publishedResourcesFromYaml(text: string, where: string): { resources: Raw[]; problems: ConfigProblem[]; notices: ConfigNotice[] } {
  const resources: Raw[] = [];
  const problems: ConfigProblem[] = [];
  const notices: ConfigNotice[] = [];
  parseAllDocuments(text).forEach((doc, i) => {
    const at = `${where} document ${i + 1}`;
    if ('errors' in doc && doc.errors.length > 0) {
      for (const e of doc.errors) problems.push({ path: `${at} line ${e.linePos?.[0]?.line ?? '?'}`, message: e.message.split('\n')[0] ?? e.message });
      return;
    }
    const manifest: unknown = doc.toJS();
    if (manifest === null || manifest === undefined) return; // an empty document, e.g. after a trailing ---
    const translated = translatePublishedResource(manifest, at);
    problems.push(...translated.problems);
    notices.push(...translated.notices);
    if (translated.resource) resources.push(translated.resource);
  });
  return { resources, problems, notices };
}

/**
 * One PublishedResource manifest as a relsync `resources[]` entry; none, with a notice, for a
 * manifest whose synchronization is disabled (api-syncagent only publishes its type then).
 */
export function translatePublishedResource(manifest: unknown, where: string): { resource: Raw | undefined; problems: ConfigProblem[]; notices: ConfigNotice[] } {
  const problems: ConfigProblem[] = [];
  const notices: ConfigNotice[] = [];
  const problem = (path: string, message: string) => problems.push({ path: `${where} ${path}`.trim(), message });
  const m = record(manifest);
  if (m.apiVersion !== PUBLISHED_RESOURCE_API_VERSION || m.kind !== 'PublishedResource') {
    problem('', `expected apiVersion ${PUBLISHED_RESOURCE_API_VERSION} and kind PublishedResource, got ${String(m.apiVersion)} ${String(m.kind)}`);
    return { resource: undefined, problems, notices };
  }
  for (const p of specShapeProblems(m.spec)) problem(p.path, p.message);
  if (problems.length > 0) return { resource: undefined, problems, notices };
  // null is an absent field, as the API server prunes it (Helm's empty values write it): every test below is for undefined.
  const spec = record(withoutNulls(m.spec));
  // As api-syncagent reads it: synchronization absent (or null) syncs; present, its `enabled` is
  // required (its CRD says so) and false publishes the type only.
  if (spec.synchronization !== undefined) {
    const enabled = record(spec.synchronization).enabled;
    if (enabled === undefined) {
      problem('spec.synchronization.enabled', 'required when synchronization is given: true syncs the type, false only publishes it (as api-syncagent\'s CRD requires)');
      return { resource: undefined, problems, notices };
    }
    if (enabled === false) {
      const name = typeof record(m.metadata).name === 'string' ? ` "${String(record(m.metadata).name)}"` : '';
      notices.push({ level: 'warn', path: `${where} spec.synchronization.enabled`, message: `PublishedResource${name} is not synced: its synchronization is disabled (api-syncagent only publishes such a type, for use as another resource's related type)` });
      return { resource: undefined, problems, notices };
    }
  }
  // Empty blocks (a Helm chart's defaults) change nothing: only what they would change is refused.

  const source = record(spec.resource);
  const versions = Array.isArray(source.versions) ? source.versions : [];
  const out: Raw = { group: source.apiGroup ?? '', kind: source.kind };
  // Several versions: relsync syncs at one that both sides serve (api-syncagent publishes them all and syncs its storage version).
  if (source.version !== undefined && versions.length > 0) problem('spec.resource.version', 'give "version" (deprecated) or "versions", not both, as api-syncagent requires');
  else if (versions.length > 1) out.versions = versions;
  else {
    const version = source.version ?? versions[0];
    if (version !== undefined) out.version = version;
  }

  if (spec.enableWorkspacePaths === true) out.workspacePath = true;
  if (projects(spec.projection)) project(out, record(spec.projection), problem);
  if (mutates(spec.mutation)) out.mutation = translateMutations(record(spec.mutation), 'spec.mutation', problem);

  const filter = record(spec.filter);
  if (filter.namespace !== undefined) out.namespaceSelector = filter.namespace;
  if (filter.resource !== undefined) out.selector = filter.resource;

  const naming = record(spec.naming);
  const names: Raw = {};
  for (const key of ['name', 'namespace'] as const) {
    if (typeof naming[key] !== 'string' || naming[key] === '') continue;
    const t = translateTemplate(placeholdersToTemplate(naming[key]));
    if (t.problem) problem(`spec.naming.${key}`, t.problem);
    else names[key] = t.template;
  }
  if (Object.keys(names).length > 0) out.naming = names;

  const related = Array.isArray(spec.related) ? spec.related : [];
  const report: Report = { problem, notice: (path, message) => notices.push({ level: 'warn', path: `${where} ${path}`, message }) };
  out.related = related.map((r, i) => translateRelated(record(r), `spec.related[${i}]`, report));
  return { resource: problems.length === 0 ? out : undefined, problems, notices };
}

/** How a translation reports: a problem refuses the PublishedResource, a notice is said at each start. */
interface Report {
  readonly problem: (path: string, message: string) => void;
  readonly notice: (path: string, message: string) => void;
}

function translateRelated(r: Raw, at: string, report: Report): Raw {
  const { problem } = report;
  const rule: Raw = { id: typeof r.identifier === 'string' ? r.identifier.toLowerCase() : r.identifier, kind: r.kind };
  // The type: `kind` (ConfigMap or Secret, deprecated there) or group, version and resource.
  for (const key of ['group', 'version', 'resource'] as const) if (r[key] !== undefined) rule[key] = r[key];
  if (r.projection !== undefined) {
    const destination = projectionOf(record(r.projection), typeReference(rule), `${at}.projection`, problem);
    if (destination) rule.destination = destination;
  }
  if (r.origin === 'kcp') rule.origin = 'platform';
  else if (r.origin === 'service') rule.origin = 'service';
  else problem(`${at}.origin`, `must be "kcp" or "service", got ${JSON.stringify(r.origin)}`);
  if (mutates(r.mutation)) rule.mutation = translateMutations(record(r.mutation), `${at}.mutation`, problem);
  // Another export's type, reached through the primary's export (whose claim relsync checks at start).
  if (r.identityHash !== undefined && r.identityHash !== '') rule.identityHash = r.identityHash;
  if (r.syncStatus === true) rule.syncStatus = true;
  const cleanupPolicy = cleanupPolicyOf(r, at, report);
  if (cleanupPolicy) rule.cleanupPolicy = cleanupPolicy;
  // `watch` tells api-syncagent to follow changes of the related type; relsync always does. Nothing to translate.
  const object = record(r.object);
  const template = (value: unknown, path: string): string | undefined => {
    const t = translateTemplate(String(value ?? ''));
    if (t.problem) problem(path, t.problem);
    return t.template;
  };
  Object.assign(rule, finderOf(object, `${at}.object`, { problem, template }));
  if (object.namespace !== undefined) {
    const source = namespaceSourceOf(record(object.namespace), `${at}.object.namespace`, { problem, template });
    if (source !== undefined) rule.namespace = { source };
  }
  return rule;
}

/**
 * `projection` overwrites the fields it sets on the destination side: relsync's `destination`,
 * held to the same check (a ConfigMap as a Secret and back, or the same type).
 */
function projectionOf(p: Raw, source: ReturnType<typeof typeReference>, at: string, problem: Report['problem']): Raw | undefined {
  const given = (v: unknown) => (typeof v === 'string' && v !== '' ? v : undefined);
  const resource = given(p.resource) ?? source.resource;
  const destination = { group: given(p.group) ?? source.group, version: given(p.version) ?? source.version, ...(resource !== undefined ? { resource } : { kind: source.kind }) };
  const wrong = destinationTypeProblem(source, destination);
  if (wrong) {
    problem(at, wrong);
    return undefined;
  }
  return Object.fromEntries(Object.entries(destination).filter(([, v]) => v !== undefined));
}

/** As api-syncagent's EffectiveCleanupPolicy: cleanupPolicy wins; else cleanup true is OnPrimaryDeletion, else Orphan (its default). */
function cleanupPolicyOf(r: Raw, at: string, report: Report): string | undefined {
  const given = (v: unknown) => v !== undefined && v !== '';
  const policy = given(r.cleanupPolicy) ? r.cleanupPolicy : r.cleanup === true ? 'OnPrimaryDeletion' : 'Orphan';
  const policyAt = `${at}.${given(r.cleanupPolicy) ? 'cleanupPolicy' : 'cleanup'}`;
  if (policy !== 'MatchOrigin' && policy !== 'OnPrimaryDeletion' && policy !== 'Orphan') {
    report.problem(policyAt, `must be "Orphan", "OnPrimaryDeletion" or "MatchOrigin", got ${JSON.stringify(policy)}`);
    return undefined;
  }
  if (r.origin === 'service') {
    // Said at each start: relsync read an unset policy as MatchOrigin before it had policies.
    if (!given(r.cleanupPolicy) && r.cleanup === undefined) report.notice(`${at}.cleanupPolicy`, "no cleanup policy: Orphan, api-syncagent's default: this rule's copies on the platform outlive their origin and are released to the tenant when the primary goes (earlier relsync releases deleted them: set cleanupPolicy: MatchOrigin for that)");
    return policy;
  }
  if (policy !== 'MatchOrigin' && (given(r.cleanupPolicy) || r.cleanup !== undefined)) {
    // api-syncagent also deletes these copies with the primary and with their origin object, whatever the policy.
    report.notice(policyAt, `cleanup policy ${policy} has no effect on an origin: kcp rule: relsync deletes its copies in the service cluster with the primary, with their origin object, and when the origin is no longer found (MatchOrigin), so that no tenant's data outlives its primary there`);
  }
  return undefined;
}

/** How a related object's names and templates are translated, each problem at its place. */
interface Translating {
  readonly problem: Report['problem'];
  readonly template: (value: unknown, path: string) => string | undefined;
}

/** The rule's way of finding its related objects: `reference`, `template` or `selector`, exactly one. */
function finderOf(object: Raw, at: string, t: Translating): Raw {
  const ways = ['reference', 'template', 'selector'].filter((k) => object[k] !== undefined);
  if (ways.length !== 1) t.problem(at, `give exactly one of "reference", "template" or "selector" (got ${ways.length === 0 ? 'none' : ways.join(', ')})`);
  if (object.reference !== undefined) {
    const ref = record(object.reference);
    const path = gjsonToJsonPath(String(ref.path ?? ''));
    if ('problem' in path) t.problem(`${at}.reference.path`, path.problem);
    const reference: Raw = { path: 'path' in path ? path.path : ref.path };
    if (ref.regex !== undefined) reference.rewrite = { regex: regexRewrite(record(ref.regex)) };
    return { reference };
  }
  if (object.template !== undefined) return { template: { name: t.template(record(object.template).template, `${at}.template.template`) } };
  if (object.selector === undefined) return {};
  const sel = record(object.selector);
  const selector: Raw = {};
  if (sel.matchLabels !== undefined) {
    selector.matchLabels = Object.fromEntries(
      Object.entries(record(sel.matchLabels)).map(([k, v]) => [t.template(k, `${at}.selector.matchLabels`), t.template(v, `${at}.selector.matchLabels.${k}`)]),
    );
  }
  if (sel.matchExpressions !== undefined) selector.matchExpressions = sel.matchExpressions;
  const rewrite = record(sel.rewrite);
  if (rewrite.regex !== undefined) selector.rewrite = { regex: regexRewrite(record(rewrite.regex)) };
  else if (rewrite.template !== undefined) selector.rewrite = { template: t.template(record(rewrite.template).template, `${at}.selector.rewrite.template.template`) };
  return { selector };
}

/** The related object's namespace on the origin side, as a template; undefined after a problem. */
function namespaceSourceOf(ns: Raw, at: string, t: Translating): string | undefined {
  if (ns.template !== undefined && ns.reference === undefined) return t.template(record(ns.template).template, `${at}.template.template`);
  if (ns.reference === undefined) {
    t.problem(at, 'only "reference" and "template" are supported for the related object\'s namespace');
    return undefined;
  }
  const ref = record(ns.reference);
  if (ref.regex !== undefined) t.problem(`${at}.reference.regex`, 'a regex on a namespace reference is not supported by relsync; use a template');
  const path = gjsonToJsonPath(String(ref.path ?? ''));
  if ('problem' in path) t.problem(`${at}.reference.path`, path.problem);
  else if (/^[${]/.test(path.path)) t.problem(`${at}.reference.path`, `"${String(ref.path)}": a namespace reference is a plain gjson path (spec.namespace); use a template for anything else`);
  else if (/[[\]]|\.\d/.test(path.path)) t.problem(`${at}.reference.path`, `"${String(ref.path)}": a namespace reference must name one field by plain keys (no arrays, indexes or keys with dots); use a template`);
  else return `{{ object${path.path} }}`;
  return undefined;
}

/** A translated rule's type, as far as its fields are strings (the schema reports the rest). */
function typeReference(rule: Raw): TypeReference {
  const text = (v: unknown) => (typeof v === 'string' ? v : undefined);
  return { group: text(rule.group) ?? '', version: text(rule.version), resource: text(rule.resource), kind: text(rule.kind) };
}

/** Go regexp replacement: an empty pattern replaces the whole value; `\N` is group N. */
function regexRewrite(regex: Raw): Raw {
  const pattern = typeof regex.pattern === 'string' && regex.pattern !== '' ? regex.pattern : '^[\\s\\S]*$';
  const replacement = String(regex.replacement ?? '').replace(/\\(\d)/g, '$$$1');
  return { pattern, replacement };
}

/**
 * Mutation rules, as api-syncagent reads them: gjson paths, Go regular expressions (`\\1`,
 * `$1`, `${1}`, `${name}` in the replacement), Go templates over `.Value` and `.Object`.
 */
function translateMutations(m: Raw, at: string, problem: (path: string, message: string) => void): Raw {
  const one = (raw: unknown, where: string): Raw => {
    const r = record(raw);
    const out: Raw = {};
    for (const kind of ['delete', 'regex', 'template'] as const) {
      if (r[kind] === undefined) continue;
      const body = record(r[kind]);
      const translated = gjsonToJsonPath(String(body.path ?? ''));
      if ('problem' in translated) problem(`${where}.${kind}.path`, translated.problem);
      const path = 'path' in translated ? translated.path : body.path;
      if (kind === 'delete') out.delete = { path };
      if (kind === 'regex') {
        const replacement = String(body.replacement ?? '').replace(/\\(\d)/g, '$$$1').replace(/\$\{(\d+)\}/g, '$$$1').replace(/\$\{([A-Za-z_]\w*)\}|\$([A-Za-z_]\w*)/g, (_, a: string | undefined, b: string | undefined) => `$<${a ?? b}>`);
        out.regex = { path, ...(typeof body.pattern === 'string' && body.pattern !== '' ? { pattern: body.pattern } : {}), replacement };
      }
      if (kind === 'template') {
        const t = translateTemplate(String(body.template ?? ''));
        if (t.problem) problem(`${where}.template.template`, t.problem);
        out.template = { path, template: t.template ?? '' };
      }
    }
    return out;
  };
  const list = (side: 'spec' | 'status') => (Array.isArray(m[side]) ? (m[side] as unknown[]) : []).map((raw, i) => one(raw, `${at}.${side}[${i}]`));
  return { spec: list('spec'), status: list('status') };
}

/** The deprecated `$remote…` placeholders of `naming`, as relsync templates. */
function placeholdersToTemplate(text: string): string {
  return text
    .replaceAll('$remoteClusterName', '{{ cluster }}')
    .replaceAll('$remoteNamespaceHash', '{{ hash namespace | trunc 20 }}')
    .replaceAll('$remoteNamespace', '{{ namespace }}')
    .replaceAll('$remoteNameHash', '{{ hash name | trunc 20 }}')
    .replaceAll('$remoteName', '{{ name }}');
}

const variables: Record<string, string> = { ClusterName: 'cluster', ClusterPath: 'clusterPath', Object: 'object', Value: 'value', Related: 'related' };

/**
 * A Go template of api-syncagent as a relsync template: `.ClusterName`,
 * `.Object.…`, `.Value` and `.Related.…` become relsync's variables and `{{-`
 * trim markers are dropped; pipes and functions are kept as they are, so an
 * unknown function is reported by relsync's own template parser.
 */
export function translateTemplate(text: string): { template?: string; problem?: string } {
  let problem: string | undefined;
  const template = text.replace(/\{\{-?([\s\S]*?)-?\}\}/g, (_, body: string) => {
    const translated = body.replace(/(^|[\s(|])\.([A-Za-z_]\w*)((?:\.[A-Za-z_][\w-]*)*)/g, (whole, lead: string, root: string, rest: string) => {
      const name = Object.hasOwn(variables, root) ? variables[root] : undefined;
      if (!name) {
        problem ??= `template "${text}": .${root} is not available in relsync (available: ${Object.keys(variables).map((v) => `.${v}`).join(', ')})`;
        return whole;
      }
      return `${lead}${name}${rest}`;
    });
    return `{{ ${translated.trim()} }}`;
  });
  return problem ? { problem } : { template };
}

/** `value` with every null-valued field left out, at every depth. */
function withoutNulls(value: unknown): unknown {
  // List items stay where they are (a null one is reported at its own index by the schema).
  if (Array.isArray(value)) return value.map(withoutNulls);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== null).map(([k, v]) => [k, withoutNulls(v)]));
}

/**
 * Whether a primary's projection changes what relsync syncs: its group, version(s), kind, plural or
 * scope. `shortNames` and `categories` only change the published schema's discovery, which relsync
 * does not publish.
 */
function projects(projection: unknown): boolean {
  if (projection === undefined) return false;
  const p = record(projection);
  const given = (v: unknown) => (typeof v === 'string' ? v !== '' : Array.isArray(v) ? v.length > 0 : v !== undefined && !(typeof v === 'object' && v !== null && Object.keys(v).length === 0));
  return typeof projection !== 'object' || ['group', 'version', 'versions', 'kind', 'plural', 'scope'].some((k) => given(p[k]));
}

/**
 * A primary's projection: `spec.resource` is the type in the service cluster (relsync's `copyAs`),
 * and the projection says how it looks on the platforms (relsync's type): another group, kind,
 * plural or version (`versions` maps the service version to the platform's; the deprecated
 * `version` sets it whatever the service's). `scope` is what the platform's API serves, which
 * relsync reads from discovery as for any type; `shortNames` and `categories` only matter to the
 * published schema, which relsync does not publish.
 */
function project(out: Raw, p: Raw, problem: (path: string, message: string) => void): void {
  if (out.versions !== undefined) {
    problem('spec.projection', 'a projection of several versions: relsync syncs one version, the same on each side; give one version in spec.resource');
    return;
  }
  const given = (v: unknown) => (typeof v === 'string' && v !== '' ? v : undefined);
  const version = given(out.version);
  const mapped = version !== undefined && typeof p.versions === 'object' && p.versions !== null ? given((p.versions as Raw)[version]) : undefined;
  if (p.versions !== undefined && (typeof p.versions !== 'object' || Array.isArray(p.versions) || Object.values(p.versions as Raw).some((v) => given(v) === undefined))) {
    problem('spec.projection.versions', 'must map each version of spec.resource to the version on the platforms (strings)');
  } else if (p.versions !== undefined && Object.keys(p.versions as Raw).length > 0 && version === undefined) {
    problem('spec.projection.versions', 'maps versions, but spec.resource names none: give its version, so that both sides sync at the one the map says');
  }
  if (given(p.scope) !== undefined && p.scope !== 'Namespaced' && p.scope !== 'Cluster') problem('spec.projection.scope', `must be "Namespaced" or "Cluster", got ${JSON.stringify(p.scope)}`);
  out.copyAs = { group: out.group, kind: out.kind, ...(version !== undefined ? { version } : {}) };
  out.group = given(p.group) ?? out.group;
  const platformVersion = mapped ?? given(p.version) ?? version;
  if (platformVersion !== undefined) out.version = platformVersion;
  const plural = given(p.plural);
  if (plural !== undefined) {
    out.resource = plural;
    delete out.kind;
  } else {
    out.kind = given(p.kind) ?? out.kind;
  }
}

/** Whether a mutation block has any rule (`{spec: [], status: []}` has none). */
function mutates(mutation: unknown): boolean {
  if (mutation === undefined) return false;
  const m = record(mutation);
  return typeof mutation !== 'object' || Object.keys(m).some((k) => !(Array.isArray(m[k]) && (m[k] as unknown[]).length === 0));
}
