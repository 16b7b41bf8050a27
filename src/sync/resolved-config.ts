/**
 * The config with every type resolved through discovery: what the reconciler
 * and the router work from. Resolution happens once at start; a type that no
 * API server serves is an error naming its place in the config.
 */
import { hasManyClusters, type Config, type PublishedResource } from '../config/config.js';
import type { ClusterSet } from '../kube/cluster-set.js';
import type { ResourceType } from '../core/resource-type.js';
import { describeProbe, meeting } from '../config/safety-checks.js';
import type { ResolvedRule } from '../rules/rule.js';

export interface ResolvedResource extends PublishedResource {
  readonly primaryType: ResourceType;
  readonly rules: readonly ResolvedRule[];
}

export class ResolveError extends Error {
  override name = 'ResolveError';
}

export async function resolveConfig(config: Config, clusters: ClusterSet): Promise<ResolvedResource[]> {
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
    const primaryType = res.versions ? await sharedVersion(clusters, platform, service, res) : await at(platform, res.where, res.type);
    // A cluster-scoped copy has a name only: naming.namespace cannot keep two clusters' primaries apart there.
    const met = !primaryType.namespaced && hasManyClusters(config.platformClusters) ? meeting([res.naming.name], config.platformClusters.map((c) => c.name)) : undefined;
    if (met) throw new ResolveError(`${res.where}.naming.name: ${primaryType.resource} are cluster-scoped, and the name renders the same copy for ${describeProbe(met[0])} and ${describeProbe(met[1])}: two tenants' copies would meet; use {{ hash cluster name }} in it`);
    // One given by kind and one by resource are only seen to be the same type here (config/safety-checks.ts sees the rest).
    const twin = out.find((r) => r.primaryType.group === primaryType.group && r.primaryType.resource === primaryType.resource);
    if (twin) throw new ResolveError(`${res.where}: the same primary type as ${twin.where} (${primaryType.resource}${primaryType.group ? `.${primaryType.group}` : ''}): their copies would be taken for each other's; give each type once`);
    await at(service, res.where, { ...res.type, version: primaryType.version, resource: primaryType.resource, kind: undefined });
    const rules: ResolvedRule[] = [];
    for (const rule of res.related) {
      const [sourceCluster, destCluster] = rule.origin === 'platform' ? [platform, service] : [service, platform];
      const sourceType = await at(sourceCluster, rule.where, rule.source);
      const destinationType = await at(destCluster, `${rule.where}.destination`, rule.destination);
      rules.push({ ...rule, sourceType, destinationType });
    }
    out.push({ ...res, primaryType, rules });
  }
  return out;
}

/**
 * A primary type given with `versions`: the first version that both the platform and the service
 * cluster serve (the platform's preferred first, then the list's order). Copies are written as
 * they are read, so both sides must use one version; each API server converts to what it stores.
 */
async function sharedVersion(clusters: ClusterSet, platform: string, service: string, res: PublishedResource & { readonly versions?: readonly string[] }): Promise<ResourceType> {
  const listed = res.versions ?? [];
  const served = async (cluster: string) => {
    try {
      return await clusters.servedVersions(cluster, res.type.group);
    } catch (err) {
      throw new ResolveError(`${res.where}.versions: ${(err as Error).message}`, { cause: err });
    }
  };
  const [onPlatform, onService] = [await served(platform), await served(service)];
  const preferred = onPlatform[0];
  const candidates = [...(preferred !== undefined && listed.includes(preferred) ? [preferred] : []), ...listed].filter((v, i, all) => all.indexOf(v) === i && onPlatform.includes(v) && onService.includes(v));
  for (const version of candidates) {
    try {
      const type = await clusters.resolve(platform, { ...res.type, version });
      await clusters.resolve(service, { ...res.type, version, resource: type.resource, kind: undefined });
      return type;
    } catch {
      // that version lacks the resource on one side: the next one
    }
  }
  throw new ResolveError(`${res.where}.versions: none of ${listed.join(', ')} serves ${res.type.resource ?? res.type.kind} on both sides (of ${res.type.group || 'the core group'}, the platform ${platform} serves ${onPlatform.join(', ') || 'none'}; the service cluster ${service} serves ${onService.join(', ') || 'none'})`);
}
