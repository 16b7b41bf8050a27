/**
 * What a kcp platform adds to running relsync: its virtual workspace exists
 * only once a workspace binds the export, a workspace that binds while the
 * watches run has to be listed on its own, and whether a workspace still
 * binds is asked of kcp. Kept together because each works around the same
 * fact: kcp shows a workspace only while its APIBinding lasts.
 */
import type { Logger } from 'pino';
import type { ClusterSet } from '../kube/cluster-set.js';
import { isForbidden, isNotFound } from '../kube/api-error.js';
import { configuredPlatformOf, endpointPlatformNames, endpointSliceUrls, EndpointPendingError } from '../kube/kcp-endpoint.js';
import type { ClusterConfig } from '../kube/cluster-config.js';
import { Connection } from '../kube/connection.js';
import { typeName } from '../core/resource-type.js';
import { apiBindingType } from '../core/kcp-types.js';
import type { EventRouter } from './event-router.js';
import type { PlannedWatch } from './watch-plan.js';
import type { Wiring } from './wiring.js';
import { Backoff } from '../util/backoff.js';
import { sleep } from '../util/sleep.js';

/**
 * The platforms to connect to: each kcp platform given by an APIExportEndpointSlice becomes one
 * platform per URL the slice lists (one per kcp shard that serves a bound workspace; named as
 * endpointPlatformNames says), each with its URL fixed. The slice shows a URL only once a
 * workspace binds the export: until then relsync waits (and says so) instead of failing.
 */
export async function expandKcpEndpoints(platforms: readonly ClusterConfig[], logger: Logger, signal: AbortSignal): Promise<ClusterConfig[]> {
  const out: ClusterConfig[] = [];
  for (const platform of platforms) {
    const slice = platform.kcp?.endpointSlice;
    if (!slice || platform.kcp?.url) {
      out.push(platform);
      continue;
    }
    const provider = new Connection({ name: platform.name, kubeconfig: platform.kubeconfig, context: platform.context });
    const backoff = new Backoff({ initialMs: 1_000, maxMs: 10_000 });
    try {
      for (let attempt = 1; ; attempt++) {
        try {
          const urls = await endpointSliceUrls(provider, slice);
          const names = endpointPlatformNames(platform.name, urls);
          logger.info({ cluster: platform.name, urls }, urls.length === 1 ? 'kcp virtual workspace found' : `kcp virtual workspaces found: the endpoint slice lists ${urls.length} shards, each served as a platform of its own`);
          urls.forEach((url, i) => out.push({ ...platform, name: names[i]!, kcp: { endpointSlice: slice, url } }));
          break;
        } catch (err) {
          if (!(err instanceof EndpointPendingError) || signal.aborted) throw err;
          const retryInMs = backoff.next();
          if (attempt === 1 || attempt % 10 === 0) logger.info({ cluster: platform.name, retryInMs }, `${err.message}; waiting`);
          await sleep(retryInMs, signal);
        }
      }
    } finally {
      provider.close();
    }
  }
  return out;
}

/**
 * How often a term reads its kcp platforms' endpoint slices again, to follow shards that come or go:
 * 30 s, or RELSYNC_KCP_SLICE_FOLLOW_MS (the tests' shorter wait).
 */
const SLICE_FOLLOW_MS = Number(process.env.RELSYNC_KCP_SLICE_FOLLOW_MS) || 30_000;

/**
 * Resolves with what changed once an endpoint slice a platform was expanded from (expandKcpEndpoints)
 * lists other URLs than it did (a kcp shard added, or gone): the term then ends and is wired
 * afresh with them. Never resolves while nothing changes; stops with `signal`.
 */
export async function endpointSlicesChanged(platforms: readonly ClusterConfig[], logger: Logger, signal: AbortSignal, everyMs = SLICE_FOLLOW_MS): Promise<string | undefined> {
  const followed = new Map<string, { config: ClusterConfig; urls: string[] }>();
  for (const p of platforms) {
    const slice = p.kcp?.endpointSlice;
    if (!slice || !p.kcp?.url) continue;
    const key = `${configuredPlatformOf(p.name)}/${slice}`;
    const entry = followed.get(key) ?? { config: p, urls: [] };
    entry.urls.push(p.kcp.url);
    followed.set(key, entry);
  }
  if (followed.size === 0) return new Promise((resolve) => signal.addEventListener('abort', () => resolve(undefined), { once: true }));
  const connections = new Map([...followed].map(([key, f]) => [key, new Connection({ name: configuredPlatformOf(f.config.name), kubeconfig: f.config.kubeconfig, context: f.config.context })]));
  try {
    while (!signal.aborted) {
      await sleep(everyMs, signal);
      for (const [key, f] of followed) {
        if (signal.aborted) return undefined;
        try {
          const now = await endpointSliceUrls(connections.get(key)!, f.config.kcp!.endpointSlice!);
          const before = [...f.urls].sort();
          if (now.join(' ') !== before.join(' ')) return `the APIExportEndpointSlice of ${configuredPlatformOf(f.config.name)} lists ${now.join(', ')} (it listed ${before.join(', ')})`;
        } catch (err) {
          // Unreadable for a moment (an outage): the URLs being served go on; read again at the next turn.
          if (!(err instanceof EndpointPendingError)) logger.warn({ cluster: configuredPlatformOf(f.config.name), err: (err as Error).message }, 'could not read the kcp endpoint slice again; will retry');
        }
      }
    }
    return undefined;
  } finally {
    for (const c of connections.values()) c.close();
  }
}

/** Whether a logical cluster still shows an APIBinding of the export (the virtual workspace forbids a workspace that does not). */
export async function stillBinds(clusters: ClusterSet, cluster: string): Promise<boolean> {
  try {
    return (await clusters.client(cluster, apiBindingType).listPage({ limit: 1 })).items.length > 0;
  } catch (err) {
    if (isForbidden(err) || isNotFound(err)) return false;
    throw err;
  }
}

export interface WorkspaceRelist {
  readonly clusters: ClusterSet;
  readonly router: EventRouter;
  readonly plan: readonly PlannedWatch[];
  readonly logger: Logger;
}

/**
 * A workspace that became known while the object watches run: every
 * watched type of it, listed and routed like a relist, with retries: right
 * after a binding, kcp's virtual workspace may still refuse requests into
 * that workspace for a moment (403). Run in the background (watches.ts);
 * resolves, never rejects, when every type was listed or given up on.
 */
export async function relistWorkspace(w: WorkspaceRelist, platform: string, cluster: string, signal: AbortSignal): Promise<void> {
  const relistType = async (p: PlannedWatch) => {
    const backoff = new Backoff({ initialMs: 500, maxMs: 5_000 });
    for (let attempt = 1; !signal.aborted && w.clusters.has(cluster); attempt++) {
      try {
        // Beside the platform's watch of the same objects: routed, not kept in the cache (its pages may be older than events).
        const sink = w.router.beginList(cluster, p.type, p.labelSelector, false);
        for await (const page of w.clusters.client(cluster, p.type).pages({ labelSelector: p.labelSelector })) await sink.page(page.items);
        await sink.end();
        return;
      } catch (err) {
        if (attempt >= 12) {
          // e.g. a claim the workspace did not accept: that type's relations report it when they are synced
          w.logger.warn({ cluster: platform, logicalCluster: cluster, type: typeName(p.type), err: (err as Error).message }, 'could not list a type in a newly bound workspace; the next sweep will');
          return;
        }
        await sleep(backoff.next(), signal);
      }
    }
  };
  for (const p of w.plan.filter((x) => x.cluster === platform)) await relistType(p);
}

/**
 * Workspaces still recorded under a platform that is no longer connected (a URL gone from its
 * endpoint slice, or the names that change when a slice goes from one URL to several): asked of
 * each connected URL of the same configured platform whether it serves them (a binding watch that
 * resumed from a checkpoint lists nothing, so it cannot be left to tell), moved to the one that
 * does; unbound when none does, as a workspace whose APIBinding went is (its primaries are
 * enqueued; their copies go). Run once the binding watches have synced.
 */
export async function settleStrayWorkspaces(w: Pick<Wiring, 'clusters' | 'logical' | 'store' | 'enqueue'>, logger: Logger): Promise<void> {
  for (const record of w.logical.records()) {
    if (record.state === 'unbound' || w.clusters.isConfigured(record.platform)) continue;
    const family = configuredPlatformOf(record.platform);
    const candidates = w.clusters.platforms.filter((p) => p.kind === 'kcp' && configuredPlatformOf(p.name) === family);
    let servedBy: string | undefined;
    let unsure = false;
    for (const p of candidates) {
      const client = w.clusters.clientThrough(p.name, record.name, apiBindingType);
      try {
        if (client && (await client.listPage({ limit: 1 })).items.length > 0) servedBy = p.name;
      } catch (err) {
        // Not served there (403/404): the next URL. Anything else: left as it is, looked at again next term.
        if (!isForbidden(err) && !isNotFound(err)) {
          logger.warn({ logicalCluster: record.name, platform: p.name, err: (err as Error).message }, 'could not ask a kcp shard whether it serves a workspace; left as it is');
          unsure = true;
        }
      }
      if (servedBy || unsure) break;
    }
    if (unsure) continue;
    if (servedBy) {
      await w.logical.bound(record.name, servedBy);
      logger.info({ logicalCluster: record.name, from: record.platform, to: servedBy }, 'a workspace is served through another URL of its platform\'s endpoint slice now');
      continue;
    }
    await w.logical.markUnbound(record.name);
    const primaries = await w.store.primariesOfCluster(record.name);
    if (primaries.length === 0) {
      await w.clusters.forgetLogical(record.name);
      logger.info({ logicalCluster: record.name, platform: record.platform }, 'a workspace of a kcp shard no longer served (its URL left the endpoint slice) and bound through none that is: nothing of it is left, relsync forgets it');
      continue;
    }
    for (const p of primaries) w.enqueue(p.id);
    logger.warn({ logicalCluster: record.name, platform: record.platform, primaries: primaries.length }, 'a workspace of a kcp shard no longer served (its URL left the endpoint slice) and bound through none that is: removing the copies of its primaries');
  }
}
