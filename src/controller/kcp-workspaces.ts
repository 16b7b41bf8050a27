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
import type { LogicalClusters } from '../kube/logical-clusters.js';
import { Connection } from '../kube/connection.js';
import { typeName } from '../core/resource-type.js';
import { apiBindingType } from '../core/kcp-types.js';
import type { EventRouter } from './event-router.js';
import type { PlannedWatch } from './watch-plan.js';
import { Backoff } from '../util/backoff.js';
import type { Clock } from '../util/clock.js';

/**
 * The platforms to connect to: each kcp platform given by an APIExportEndpointSlice becomes one
 * platform per URL the slice lists (one per kcp shard that serves a bound workspace; named as
 * endpointPlatformNames says), each with its URL fixed. The slice shows a URL only once a
 * workspace binds the export: until then relsync waits (and says so, on `clock`) instead of failing.
 */
export async function expandKcpEndpoints(platforms: readonly ClusterConfig[], logger: Logger, signal: AbortSignal, clock: Clock): Promise<ClusterConfig[]> {
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
          await clock.sleep(retryInMs, signal);
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

export interface SliceFollowOptions {
  /** What the reads are spaced on. */
  readonly clock: Clock;
  /** The time between reads; default SLICE_FOLLOW_MS. */
  readonly everyMs?: number;
}

/** Reads that must show the same other URLs before a term acts on them (a URL that comes and goes at once is no reason). */
const STABLE_READS = 3;
/** Reads a term lives at least before it acts on a change: with STABLE_READS, at most one rewiring per 5 minutes at 30 s. */
const MIN_TERM_READS = 10;

/**
 * Resolves with what changed once an endpoint slice a platform was expanded from (expandKcpEndpoints)
 * lists other URLs than it did (a kcp shard added, or gone): the term then ends and is wired
 * afresh with them. Acts only on a set seen alike in STABLE_READS reads in a row, and not before the
 * term has lived MIN_TERM_READS reads: a tenant that binds and unbinds on a shard of its own to make
 * its URL come and go cannot make relsync rewire (and relist) at will. Never resolves while nothing
 * changes; stops with `signal`.
 */
export async function endpointSlicesChanged(platforms: readonly ClusterConfig[], logger: Logger, signal: AbortSignal, options: SliceFollowOptions): Promise<string | undefined> {
  const { clock, everyMs = SLICE_FOLLOW_MS } = options;
  const followed = new Map<string, { config: ClusterConfig; urls: string[] }>();
  for (const p of platforms) {
    const slice = p.kcp?.endpointSlice;
    if (!slice || !p.kcp?.url) continue;
    const key = `${configuredPlatformOf(p.name)}/${slice}`;
    const entry = followed.get(key) ?? { config: p, urls: [] };
    entry.urls.push(p.kcp.url);
    followed.set(key, entry);
  }
  // (An abort event is never sent again to a signal aborted already.)
  if (signal.aborted) return undefined;
  if (followed.size === 0) return new Promise((resolve) => signal.addEventListener('abort', () => resolve(undefined), { once: true }));
  const connections = new Map([...followed].map(([key, f]) => [key, new Connection({ name: configuredPlatformOf(f.config.name), kubeconfig: f.config.kubeconfig, context: f.config.context })]));
  const seen = new Map<string, { urls: string; reads: number }>();
  try {
    for (let read = 1; !signal.aborted; read++) {
      await clock.sleep(everyMs, signal);
      for (const [key, f] of followed) {
        if (signal.aborted) return undefined;
        try {
          const now = (await endpointSliceUrls(connections.get(key)!, f.config.kcp!.endpointSlice!)).join(', ');
          const before = [...f.urls].sort().join(', ');
          const last = seen.get(key);
          const reads = now === before ? 0 : last?.urls === now ? last.reads + 1 : 1;
          seen.set(key, { urls: now, reads });
          if (reads >= STABLE_READS && read >= MIN_TERM_READS) return `the APIExportEndpointSlice of ${configuredPlatformOf(f.config.name)} lists ${now} (it listed ${before})`;
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

/** What every URL of a kcp platform says of one workspace's binding (bindingOf). */
export type BindingAnswer = 'bound' | 'unbound' | 'unknown';

/**
 * What asking where a workspace is served takes: the connections and the record of logical
 * clusters. Declared here, not taken from the term's wiring (wiring.ts), which imports this file:
 * a term's `Wiring` is one.
 */
export interface WorkspaceServing {
  readonly clusters: ClusterSet;
  readonly logical: LogicalClusters;
}

/**
 * Whether a logical cluster still binds the export, asked of every connected URL of its configured
 * platform (a workspace may move between kcp shards): 'bound' when one of them lists an APIBinding
 * in it (the workspace is moved to that URL if it is another); 'unbound' only when every URL
 * answered, with no binding or with a 403 (the virtual workspace forbids a workspace that does not
 * bind); 'unknown' otherwise — a 404 (of a path, not an object: a virtual workspace starting, a
 * shard being replaced) or an outage proves nothing, and an unbind removes copies.
 */
export async function bindingOf(w: WorkspaceServing, cluster: string, logger: Logger): Promise<BindingAnswer> {
  const current = w.logical.platformOf(cluster);
  if (current === undefined) return 'unknown';
  const family = configuredPlatformOf(current);
  const urls = w.clusters.platforms.filter((c) => c.kind === 'kcp' && configuredPlatformOf(c.name) === family).map((c) => c.name);
  // The URL it is recorded under first: the usual answer.
  urls.sort((x, y) => Number(y === current) - Number(x === current));
  let unanswered = 0;
  for (const url of urls) {
    const client = url === current ? w.clusters.client(cluster, apiBindingType) : w.clusters.clientThrough(url, cluster, apiBindingType);
    if (!client) continue;
    try {
      if ((await client.listPage({ limit: 1 })).items.length === 0) continue;
      if (url !== current) {
        await w.logical.bound(cluster, url);
        logger.info({ logicalCluster: cluster, from: current, to: url }, 'a workspace is served through another URL of its platform\'s endpoint slice now');
      }
      return 'bound';
    } catch (err) {
      if (isForbidden(err)) continue;
      unanswered++;
      logger.warn({ logicalCluster: cluster, platform: url, err: (err as Error).message }, 'could not ask a kcp URL whether a workspace still binds the export; it is not taken as unbound');
    }
  }
  return unanswered === 0 && urls.length > 0 ? 'unbound' : 'unknown';
}

export interface WorkspaceRelist {
  readonly clusters: ClusterSet;
  readonly router: EventRouter;
  readonly plan: readonly PlannedWatch[];
  readonly logger: Logger;
  /** What the retries wait on. */
  readonly clock: Clock;
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
        for await (const page of w.clusters.client(cluster, p.type).pages({ labelSelector: p.labelSelector })) await sink.page(page.items, page.refused?.map((r) => r.object) ?? []);
        await sink.end();
        return;
      } catch (err) {
        if (attempt >= 12) {
          // e.g. a claim the workspace did not accept: that type's relations report it when they are synced
          w.logger.warn({ cluster: platform, logicalCluster: cluster, type: typeName(p.type), err: (err as Error).message }, 'could not list a type in a newly bound workspace; the next sweep will');
          return;
        }
        await w.clock.sleep(backoff.next(), signal);
      }
    }
  };
  for (const p of w.plan.filter((x) => x.cluster === platform)) await relistType(p);
}

/**
 * Workspaces still recorded under a platform that is no longer connected (a URL gone from its
 * endpoint slice, or the names that change when a slice goes from one URL to several): asked of
 * each connected URL of the same configured platform whether it serves them (a binding watch that
 * resumed from a checkpoint lists nothing, so it cannot be left to tell), and moved to the one that
 * does. One that no connected URL serves is left as it is, copies and all: a URL may leave the
 * slice for a moment (a shard restarted), and copies are never removed on a guess. Its workspace's
 * unbinding, seen through its URL while that was listed, is what removes them (binding-watch.ts).
 * Run once the binding watches have synced.
 */
export async function settleStrayWorkspaces(w: WorkspaceServing, logger: Logger, signal: AbortSignal): Promise<void> {
  const strays = w.logical.records().filter((r) => r.state !== 'unbound' && !w.clusters.isConfigured(r.platform));
  let unserved = 0;
  for (const record of strays) {
    if (signal.aborted) return;
    const family = configuredPlatformOf(record.platform);
    let servedBy: string | undefined;
    for (const p of w.clusters.platforms.filter((c) => c.kind === 'kcp' && configuredPlatformOf(c.name) === family)) {
      const client = w.clusters.clientThrough(p.name, record.name, apiBindingType);
      try {
        if (client && (await client.listPage({ limit: 1 })).items.length > 0) servedBy = p.name;
      } catch (err) {
        // Not served there (403; a 404 of a virtual workspace still starting): the next URL.
        if (!isForbidden(err) && !isNotFound(err)) logger.warn({ logicalCluster: record.name, platform: p.name, err: (err as Error).message }, 'could not ask a kcp shard whether it serves a workspace');
      }
      if (servedBy) break;
    }
    if (!servedBy) {
      unserved++;
      continue;
    }
    await w.logical.bound(record.name, servedBy);
    logger.info({ logicalCluster: record.name, from: record.platform, to: servedBy }, 'a workspace is served through another URL of its platform\'s endpoint slice now');
  }
  if (unserved > 0) logger.warn({ workspaces: unserved }, 'workspaces recorded under a kcp shard URL the endpoint slice no longer lists are served by none it lists: left as they are, copies and all, until a URL serves them again');
}
