/**
 * Configs that would let one tenant reach another's copies or the provider's
 * objects are refused at load (so `relsync validate` says so before anything
 * runs), each at the path of the field to change:
 *
 * - two resources with one primary type (their copies would be each other's);
 * - with sources in several clusters (several platform clusters, or kcp):
 *   a naming template that renders the same copy namespace and name for two
 *   different platform clusters: tried on sources built to meet under naive
 *   joins and cuts (`acme` + `prod-billing` against `acme-prod` + `billing`,
 *   long names cut at 63 characters) and on every pair of configured clusters;
 * - the same for a templated service-side `namespace.destination` of a
 *   platform-origin rule (a constant one is a namespace shared by choice);
 * - `provenance: anyInNamespace` with a `namespace.source`, with
 *   `inverse.namespaceFrom`, or with a copy namespace not keyed by both
 *   cluster and namespace: every object of a namespace that is not the copy's
 *   own would count as the tenant's;
 * - `provenance.label.value` that reads `object` (the tenant writes it);
 * - with sources in several clusters, a `provenance.label.value` without
 *   `cluster` where the service-side source namespace is not one tenant's
 *   (`namespace.source`, or else the copy namespace, that the tenant steers or
 *   that does not use `cluster`): another cluster's primary of the same
 *   namespace and name renders the same value;
 * - a platform-origin rule's `namespace.destination` that reads `object`:
 *   the tenant would choose where in the provider's cluster its copies go;
 * - a constant namespace that is empty or not a namespace name.
 *
 * What a template makes of fields of the object itself cannot be tried here;
 * sync/copy-namespaces.ts refuses at run time a copy namespace (or a related
 * rule's service-side destination namespace) that serves another source.
 *
 * Warned of (safetyNotices), not refused: what is safe where each platform
 * cluster (each kcp workspace) is one tenant's, and crosses tenants only where
 * one plain cluster's namespaces belong to several: a platform-side namespace
 * the tenant steers (a platform-origin `namespace.source`, a service-origin
 * `namespace.destination` that reads `object`) and a platform-origin
 * `inverse.namespaceFrom` (an object of any namespace names its owner's).
 * Related rules of cluster-scoped types are refused when the types are
 * resolved (sync/resolved-config.ts): a config does not say a type's scope.
 */
import type { PublishedResource } from './config.js';
import { namespaceProblem } from '../rules/resolve-related.js';
import type { RelatedRule } from '../rules/rule.js';
import type { Template } from '../rules/template.js';
import type { ConfigNotice, ConfigProblem } from './config-problem.js';

type Problem = ConfigProblem;

interface Probe {
  readonly cluster: string;
  readonly namespace: string;
  readonly name: string;
}

const long = (seed: string) => `${seed}${'x'.repeat(70)}`.slice(0, 63);

/**
 * Pairs of sources that naive templates send to one place: in different clusters, and with
 * `namespaces`, in different namespaces of one cluster (primaries of a namespaced type whose copies
 * are cluster-scoped: nothing but the name keeps them apart).
 */
function probes(clusters: readonly string[], across: Across): Array<readonly [Probe, Probe]> {
  const inOneCluster: Array<readonly [Probe, Probe]> = [
    [{ cluster: 'acme', namespace: 'billing', name: 'db' }, { cluster: 'acme', namespace: 'prod', name: 'db' }],
    [{ cluster: 'acme', namespace: 'prod', name: 'billing-db' }, { cluster: 'acme', namespace: 'prod-billing', name: 'db' }],
    [{ cluster: 'acme', namespace: long('a'), name: 'db' }, { cluster: 'acme', namespace: `${long('a').slice(0, 62)}z`, name: 'db' }],
    // Joins without a separator.
    [{ cluster: 'acme', namespace: 'prod', name: 'db' }, { cluster: 'acme', namespace: 'pro', name: 'ddb' }],
  ];
  if (!across.clusters) return across.namespaces ? inOneCluster : [];
  const pairs: Array<readonly [Probe, Probe]> = [
    ...(across.namespaces ? inOneCluster : []),
    [{ cluster: 'acme', namespace: 'prod-billing', name: 'db' }, { cluster: 'acme-prod', namespace: 'billing', name: 'db' }],
    [{ cluster: 'acme', namespace: 'billing', name: 'db' }, { cluster: 'other', namespace: 'billing', name: 'db' }],
    [{ cluster: 'acme', namespace: long('a'), name: 'db' }, { cluster: 'acme-prod', namespace: long('a'), name: 'db' }],
    [{ cluster: long('c'), namespace: 'billing', name: 'db' }, { cluster: `${long('c').slice(0, 62)}z`, namespace: 'billing', name: 'db' }],
    // Joins without a separator, of cluster and namespace and of namespace and name.
    [{ cluster: 'acme', namespace: 'xprod', name: 'db' }, { cluster: 'acmex', namespace: 'prod', name: 'db' }],
    [{ cluster: 'acme', namespace: 'billing', name: 'xdb' }, { cluster: 'acmex', namespace: 'billing', name: 'db' }],
    // Joins of cluster and name (cluster-scoped copies have a name only).
    [{ cluster: 'acme', namespace: 'billing', name: 'prod-db' }, { cluster: 'acme-prod', namespace: 'billing', name: 'db' }],
    [{ cluster: 'acme', namespace: '', name: 'prod-db' }, { cluster: 'acme-prod', namespace: '', name: 'db' }],
  ];
  for (let i = 0; i < clusters.length; i++) {
    for (let j = i + 1; j < clusters.length; j++) {
      pairs.push([{ cluster: clusters[i]!, namespace: 'billing', name: 'db' }, { cluster: clusters[j]!, namespace: 'billing', name: 'db' }]);
    }
  }
  return pairs;
}

function contextOf(p: Probe): Record<string, unknown> {
  // A workspace path is what the workspace's LogicalCluster says, and kcp lets the workspace's admin
  // rewrite it (measured on v0.28.1): any tenant can claim any path, so it keeps no one apart.
  return { cluster: p.cluster, clusterPath: 'root:forged', namespace: p.namespace, name: p.name, object: { metadata: { name: p.name, namespace: p.namespace } } };
}

/** Which sources must not meet: those of different clusters, and those of different namespaces of one cluster. */
export interface Across {
  readonly clusters: boolean;
  readonly namespaces?: boolean;
}

/** The first probe pair for which every template renders the same, or undefined. */
export function meeting(templates: readonly Template[], clusters: readonly string[], across: Across = { clusters: true }): readonly [Probe, Probe] | undefined {
  return probes(clusters, across).find(([x, y]) => templates.every((t) => t.render(contextOf(x)) === t.render(contextOf(y))));
}

export const describeProbe = (p: Probe) => `namespace "${p.namespace}" of cluster "${p.cluster}"`;

/**
 * `clusters`: the platform clusters' names; `manyClusters`: whether sources can come from more
 * than one cluster (several platform clusters, or kcp with its many workspaces).
 */
export function safetyProblems(resources: readonly PublishedResource[], clusters: readonly string[], manyClusters: boolean): Problem[] {
  const problems: Problem[] = [];
  const tenants: Tenants = { clusters, many: manyClusters };
  const types = sharedTypes();
  for (const res of resources) {
    problems.push(...types.check(res));
    const met = manyClusters ? meeting([res.naming.namespace, res.naming.name], clusters) : undefined;
    if (met) {
      problems.push({
        path: `${res.where}.naming`,
        message: `renders the same copy for ${describeProbe(met[0])} and ${describeProbe(met[1])}: two tenants' copies would meet; keep {{ hash cluster namespace }} in naming.namespace, as the default does`,
      });
    }
    for (const rule of res.related) {
      problems.push(...destinationProblems(rule, tenants), ...provenanceProblems(res, rule, manyClusters));
      for (const [which, template] of [['source', rule.sourceNamespace], ['destination', rule.destinationNamespace]] as const) {
        const bad = template?.isConstant ? namespaceProblem(template.render({})) : undefined;
        if (bad) problems.push({ path: `${rule.where}.namespace.${which}`, message: `${bad}` });
      }
    }
  }
  return problems;
}

/** The platform clusters' names, and whether sources can come from more than one cluster. */
interface Tenants {
  readonly clusters: readonly string[];
  readonly many: boolean;
}

/** Two resources of one primary type, or of one copy type: their copies would be taken for each other's. Asked per resource, in order. */
function sharedTypes(): { check(res: PublishedResource): Problem[] } {
  const seen = new Map<string, string>();
  const copies = new Map<string, string>();
  return {
    check(res) {
      const problems: Problem[] = [];
      const type = `${res.type.group}/${res.type.resource ?? ''}/${res.type.kind ?? ''}`;
      const first = seen.get(type);
      if (first) problems.push({ path: res.where, message: `the same primary type as ${first}: their copies would be taken for each other's; give each type once (one resource can have many related rules)` });
      else seen.set(type, res.where);
      // As written (kind or resource): the same type given both ways is seen when the types are resolved.
      const copy = res.copyAs ?? res.type;
      const copyKey = `${copy.group}/${copy.resource ?? ''}/${copy.kind ?? ''}`;
      const firstCopy = copies.get(copyKey);
      if (firstCopy && !first) problems.push({ path: `${res.where}${res.copyAs ? '.copyAs' : ''}`, message: `the same copy type as ${firstCopy}: their copies would be taken for each other's; give each copy type once` });
      else copies.set(copyKey, res.where);
      return problems;
    },
  };
}

/** A platform rule's destination namespace: never one the tenant steers, never one two tenants share by accident. */
function destinationProblems(rule: RelatedRule, tenants: Tenants): Problem[] {
  const dest = rule.destinationNamespace;
  if (rule.origin !== 'platform' || !dest) return [];
  if (steered(dest)) {
    return [{
      path: `${rule.where}.namespace.destination`,
      message: `reads ${steeredBy(dest)}, which the tenant writes: its copies could go into any namespace of the service cluster (the operator's own, or one another tenant's copies need); build it from cluster, namespace and name`,
    }];
  }
  const m = tenants.many && !dest.isConstant ? meeting([dest], tenants.clusters) : undefined;
  if (!m) return [];
  return [{
    path: `${rule.where}.namespace.destination`,
    message: `renders the same service-cluster namespace for ${describeProbe(m[0])} and ${describeProbe(m[1])}: one tenant's copies would land among another's; use {{ hash cluster namespace }}, or a constant namespace meant to be shared`,
  }];
}

/** A rule's provenance: what it trusts as its own must be what only its tenant can make. */
function provenanceProblems(res: PublishedResource, rule: RelatedRule, manyClusters: boolean): Problem[] {
  const problems: Problem[] = [];
  const provenance = rule.provenance;
  const at = `${rule.where}.provenance`;
  if (rule.origin === 'service' && provenance?.kind === 'anyInNamespace') {
    if (rule.finder.kind === 'inverse' && rule.finder.namespaceFrom) problems.push({ path: at, message: 'anyInNamespace with inverse.namespaceFrom trusts objects of every namespace that name the copy; use an ownerReference or label provenance' });
    if (manyClusters && !(res.naming.namespace.uses('cluster') && res.naming.namespace.uses('namespace'))) {
      problems.push({ path: at, message: 'anyInNamespace trusts the copy namespace, which naming.namespace does not keep to one tenant namespace (it must use both cluster and namespace); use an ownerReference or label provenance' });
    }
  }
  if (provenance?.kind === 'label') {
    if (provenance.value.uses('object')) problems.push({ path: `${at}.label.value`, message: 'reads the object, which the tenant writes: it could name any value; build it from cluster, namespace and name' });
    if (provenance.value.uses('clusterPath')) problems.push({ path: `${at}.label.value`, message: "reads the workspace path, which the tenant writes (kcp lets a workspace's admin set it): it could name another tenant's value; build it from cluster, namespace and name" });
    if (manyClusters && rule.origin === 'service' && !provenance.value.uses('cluster') && !provenance.value.uses('object') && !provenance.value.uses('clusterPath')) {
      // The value must keep tenants apart where the namespace it is read in does not.
      const namespace = rule.sourceNamespace ?? res.naming.namespace;
      const which = rule.sourceNamespace ? 'namespace.source' : 'the copy namespace (naming.namespace)';
      const why = steered(namespace) ? `${which} reads ${steeredBy(namespace)}, which the tenant writes` : !namespace.uses('cluster') ? `${which} does not use cluster, so sources of several clusters share it` : undefined;
      if (why) {
        problems.push({
          path: `${at}.label.value`,
          message: `does not use cluster, and ${why}: a primary of another cluster with the same namespace and name renders the same value and would count that tenant's objects as its own; put {{ cluster }} in the value`,
        });
      }
    }
  }
  if (rule.origin === 'service' && provenance?.kind === 'anyInNamespace' && rule.sourceNamespace) {
    problems.push({
      path: at,
      message: 'anyInNamespace trusts every object of the source namespace, and namespace.source makes that another namespace than the copy\'s own (one the tenant steers, or one all tenants share); use an ownerReference or label provenance',
    });
  }
  return problems;
}

/** Whether the tenant chooses what a template renders: it reads the primary, or the workspace path kcp lets a workspace's admin set. */
function steered(template: Template): boolean {
  return template.uses('object') || template.uses('clusterPath');
}

function steeredBy(template: Template): string {
  return template.uses('object') ? 'the object' : 'the workspace path';
}

/**
 * What a config lets a tenant do that is safe only where each platform cluster (or kcp workspace)
 * is one tenant's: said at start and by `relsync validate`, not refused. `plainPlatforms`: whether
 * some platform is a plain Kubernetes cluster (on kcp a workspace is one tenant's, its namespaces too).
 */
export function safetyNotices(resources: readonly PublishedResource[], plainPlatforms: boolean): ConfigNotice[] {
  if (!plainPlatforms) return [];
  const notices: ConfigNotice[] = [];
  const shared = 'where one platform cluster\'s namespaces belong to different tenants; fine where each platform cluster (or kcp workspace) is one tenant\'s';
  for (const res of resources) {
    for (const rule of res.related) {
      const platformSide = rule.origin === 'platform' ? rule.sourceNamespace : rule.destinationNamespace;
      if (platformSide && steered(platformSide)) {
        const [field, act] = rule.origin === 'platform' ? ['namespace.source', 'read from'] : ['namespace.destination', 'written into'];
        notices.push({ level: 'warn', path: `${rule.where}.${field}`, message: `reads ${steeredBy(platformSide)}, which the tenant writes: related objects are ${act} any namespace of its platform cluster the tenant names, another tenant's too ${shared}` });
      }
      if (rule.origin === 'platform' && rule.finder.kind === 'inverse' && rule.finder.namespaceFrom) {
        notices.push({ level: 'warn', path: `${rule.where}.inverse.namespaceFrom`, message: `an object in any namespace of a platform cluster can name a primary of another namespace as its owner and be copied among that primary's copies, another tenant's too ${shared}` });
      }
    }
  }
  return notices;
}
