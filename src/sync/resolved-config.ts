/**
 * The config with every type resolved through discovery: what the reconciler
 * and the router work from. Resolution happens once at start; a type that no
 * API server serves is an error naming its place in the config.
 */
import { hasManyClusters, type Config, type PublishedResource } from '../config/config.js';
import type { ClusterSet } from '../kube/cluster-set.js';
import { TypeNotServedError } from '../kube/discovery.js';
import { importedPath } from '../config/published-resource-files.js';
import { sameType, typeName, type ResourceType } from '../core/resource-type.js';
import { describeProbe, meeting } from '../config/safety-checks.js';
import type { RelatedRule, ResolvedRule } from '../rules/rule.js';
import { claimProblem } from './export-claims.js';
import { logicalClusterType } from '../core/kcp-types.js';
import { isForbidden } from '../kube/api-error.js';

export interface ResolvedResource extends PublishedResource {
  /** The primaries' type, on the platforms. */
  readonly primaryType: ResourceType;
  /** Their copies' type, in the service cluster: the primary type unless `copyAs` names another. */
  readonly copyType: ResourceType;
  readonly rules: readonly ResolvedRule[];
}

/**
 * The type of the object a rule's names are read from, which inverse rules name as their owner:
 * the primary (origin platform) or its copy (origin service).
 */
export function ownerTypeOf(resource: ResolvedResource, rule: ResolvedRule): ResourceType {
  return rule.origin === 'platform' ? resource.primaryType : resource.copyType;
}

export class ResolveError extends Error {
  override name = 'ResolveError';
}

export async function resolveConfig(config: Config, clusters: ClusterSet): Promise<ResolvedResource[]> {
  try {
    return await resolveAll(config, clusters);
  } catch (err) {
    // A message starts with the config path of what failed: for an imported manifest, its file and document.
    if (!(err instanceof ResolveError) || !config.importedAs?.size) throw err;
    const at = err.message.indexOf(': ');
    throw new ResolveError(at < 0 ? err.message : `${importedPath(config.importedAs, err.message.slice(0, at))}${err.message.slice(at)}`, { cause: err.cause });
  }
}

async function resolveAll(config: Config, clusters: ClusterSet): Promise<ResolvedResource[]> {
  const service = clusters.service.name;
  const platform = clusters.platforms[0]!.name;
  const at = async (cluster: string, where: string, ref: Parameters<ClusterSet['resolve']>[1]): Promise<ResourceType> => {
    try {
      return await clusters.resolve(cluster, ref);
    } catch (err) {
      throw new ResolveError(`${where}: ${(err as Error).message}`, { cause: err });
    }
  };
  const out: ResolvedResource[] = [];
  for (const res of config.resources) {
    const primaryType = res.versions ? await sharedVersion(clusters, service, res) : await at(platform, res.where, res.type);
    if (res.namespaceSelector) {
      if (!primaryType.namespaced) throw new ResolveError(`${res.where}.namespaceSelector: ${primaryType.resource} are cluster-scoped: they have no namespace to select`);
      // Read on the platforms; through a kcp APIExport only with a permission claim on namespaces.
      await at(platform, `${res.where}.namespaceSelector (the platform's namespaces; on kcp, the APIExport needs a permission claim on them)`, { group: '', version: 'v1', resource: 'namespaces' });
    }
    if (res.workspacePath) {
      // Read in each workspace through a kcp APIExport, which serves LogicalClusters only with a permission claim on them.
      for (const kcp of clusters.platforms.filter((p) => p.kind === 'kcp')) {
        await at(kcp.name, `${res.where}.workspacePath (the workspaces' LogicalClusters: the APIExport needs a permission claim on logicalclusters.core.kcp.io)`, logicalClusterType);
      }
    }
    // One given by kind and one by resource are only seen to be the same type here (config/safety-checks.ts sees the rest).
    const twin = out.find((r) => r.primaryType.group === primaryType.group && r.primaryType.resource === primaryType.resource);
    if (twin) throw new ResolveError(`${res.where}: the same primary type as ${twin.where} (${primaryType.resource}${primaryType.group ? `.${primaryType.group}` : ''}): their copies would be taken for each other's; give each type once`);
    const copyType = res.copyAs ? await at(service, `${res.where}.copyAs`, res.copyAs) : await at(service, res.where, { ...res.type, version: primaryType.version, resource: primaryType.resource, kind: undefined });
    // A cluster-scoped copy has a name only: naming.namespace cannot keep two clusters' (or, of a namespaced primary type, two namespaces') primaries apart there.
    const across = { clusters: hasManyClusters(config.platformClusters), namespaces: primaryType.namespaced };
    const met = !copyType.namespaced && (across.clusters || across.namespaces) ? meeting([res.naming.name], config.platformClusters.map((c) => c.name), across) : undefined;
    if (met) throw new ResolveError(`${res.where}.naming.name: the copies (${copyType.resource}) are cluster-scoped, and the name renders the same copy for ${describeProbe(met[0])} and ${describeProbe(met[1])}: two ${met[0].cluster === met[1].cluster ? 'namespaces\'' : 'tenants\''} copies would meet; use {{ hash cluster${across.namespaces ? ' namespace' : ''} name }} in it`);
    // A copy gets the primary's fields as they are: core types differ in theirs (a ConfigMap as a Secret is a related rule's destination, converted).
    if (res.copyAs && !sameType(copyType, primaryType) && (copyType.group === '' || primaryType.group === '')) throw new ResolveError(`${res.where}.copyAs: ${primaryType.resource} copied as ${copyType.resource}: a core type's fields are its own, and relsync copies a primary's fields as they are; use a related rule's destination for a ConfigMap as a Secret`);
    const copyTwin = out.find((r) => r.copyType.group === copyType.group && r.copyType.resource === copyType.resource);
    if (copyTwin) throw new ResolveError(`${res.where}${res.copyAs ? '.copyAs' : ''}: the same copy type as ${copyTwin.where} (${copyType.resource}${copyType.group ? `.${copyType.group}` : ''}): their copies would be taken for each other's; give each type once`);
    const rules: ResolvedRule[] = [];
    for (const rule of res.related) {
      const [sourceCluster, destCluster] = rule.origin === 'platform' ? [platform, service] : [service, platform];
      const sourceType = await at(sourceCluster, rule.where, rule.source);
      const destinationType = await at(destCluster, `${rule.where}.destination`, rule.destination);
      // Namespaces keep a rule to its primary's tenant: of a cluster-scoped type, a source could be any
      // tenant's object of its cluster, and every tenant's copies would share one set of names.
      const clusterScoped = [sourceType, destinationType].find((t) => !t.namespaced);
      const there = clusterScoped === sourceType ? '' : ` where it is copied to (${destCluster === service ? 'the service cluster' : 'the platform'})`;
      if (clusterScoped) throw new ResolveError(`${rule.where}: ${typeName(clusterScoped)} are cluster-scoped${there}: a source of that type is no one tenant's (any tenant's primary could name it), and its copies would share one set of names with every other tenant's; related rules copy namespaced types only`);
      if (rule.identityHash !== undefined) await checkClaim(clusters, rule, rule.origin === 'platform' ? sourceType : destinationType);
      rules.push({ ...rule, sourceType, destinationType });
    }
    out.push({ ...res, primaryType, copyType, rules });
  }
  // A released copy is an ordinary object of the tenant's: of a primary type, it would be synced as a new primary.
  for (const res of out) {
    for (const rule of res.rules) {
      const primary = rule.cleanup === 'Orphan' ? out.find((r) => r.primaryType.group === rule.destinationType.group && r.primaryType.resource === rule.destinationType.resource) : undefined;
      if (primary) throw new ResolveError(`${rule.where}: cleanupPolicy Orphan leaves its copies to the tenant when the primary goes, and they are ${rule.destinationType.resource}, the primary type of ${primary.where}: each would then be synced as a new primary; use OnPrimaryDeletion or MatchOrigin`);
    }
  }
  return out;
}

/**
 * A primary type given with `versions`: the first version that every platform and the service
 * cluster serve (the first platform's preferred first, then the list's order). Copies are written
 * as they are read, and every platform's watch uses the one resolved type, so all sides must use
 * one version; each API server converts to what it stores. Only "not served" moves on to the next
 * version: an outage or a refusal is an error, so the choice cannot differ between restarts.
 */
async function sharedVersion(clusters: ClusterSet, service: string, res: PublishedResource): Promise<ResourceType> {
  const listed = res.versions ?? [];
  const where = `${res.where}.versions`;
  const platforms = clusters.platforms.map((p) => p.name);
  const served = new Map<string, string[]>();
  for (const cluster of [...platforms, service]) {
    try {
      served.set(cluster, await clusters.servedVersions(cluster, res.type.group));
    } catch (err) {
      throw new ResolveError(`${where}: ${(err as Error).message}`, { cause: err });
    }
  }
  const everywhere = (v: string) => [...served.values()].every((versions) => versions.includes(v));
  const preferred = served.get(platforms[0]!)?.[0];
  const candidates = [...(preferred !== undefined && listed.includes(preferred) ? [preferred] : []), ...listed].filter((v, i, all) => all.indexOf(v) === i && everywhere(v));
  for (const version of candidates) {
    try {
      const type = await clusters.resolve(platforms[0]!, { ...res.type, version });
      for (const cluster of [...platforms.slice(1), service]) await clusters.resolve(cluster, { ...res.type, version, resource: type.resource, kind: undefined });
      return type;
    } catch (err) {
      if (!(err instanceof TypeNotServedError)) throw new ResolveError(`${where}: at ${version}: ${(err as Error).message}`, { cause: err });
      // that version lacks the resource on one side: the next one
    }
  }
  const sides = [...served].map(([cluster, versions]) => `${cluster === service ? 'the service cluster' : 'the platform'} ${cluster} serves ${versions.join(', ') || 'none'}`);
  throw new ResolveError(`${where}: none of ${listed.join(', ')} serves ${res.type.resource ?? res.type.kind} on every side (of ${res.type.group || 'the core group'}, ${sides.join('; ')})`);
}

/** A rule's `identityHash`: kcp platforms only, and each one's export must claim the type of that export (export-claims.ts). */
async function checkClaim(clusters: ClusterSet, rule: RelatedRule, platformType: ResourceType): Promise<void> {
  const kcp = clusters.platforms.filter((p) => p.kind === 'kcp');
  if (kcp.length === 0) throw new ResolveError(`${rule.where}.identityHash: names another kcp APIExport, and no platform is kcp`);
  for (const platform of kcp) {
    let claims;
    try {
      claims = await platform.endpoint!.permissionClaims();
    } catch (err) {
      const hint = isForbidden(err) ? ' (relsync needs get on the APIExport for this: see examples/kcp/agent-rbac.yaml)' : '';
      throw new ResolveError(`${rule.where}.identityHash: reading the APIExport's permission claims: ${(err as Error).message}${hint}`, { cause: err });
    }
    const problem = claimProblem(claims, platformType, rule.identityHash!);
    if (problem) throw new ResolveError(`${rule.where}.identityHash: ${problem}`);
  }
}
