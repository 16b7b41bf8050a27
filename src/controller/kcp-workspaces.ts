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
import { EndpointPendingError } from '../kube/kcp-endpoint.js';
import { typeName } from '../core/resource-type.js';
import { apiBindingType } from '../core/kcp-types.js';
import type { EventRouter } from './event-router.js';
import type { PlannedWatch } from './watch-plan.js';
import { Backoff } from '../util/backoff.js';
import { sleep } from '../util/sleep.js';

/**
 * A kcp platform's virtual workspace URL appears once a workspace binds the
 * export: until then relsync waits (and says so) instead of failing.
 */
export async function awaitKcpEndpoints(clusters: ClusterSet, logger: Logger, signal: AbortSignal): Promise<void> {
  for (const platform of clusters.platforms) {
    if (!platform.endpoint) continue;
    const backoff = new Backoff({ initialMs: 1_000, maxMs: 10_000 });
    for (let attempt = 1; ; attempt++) {
      try {
        const url = await platform.endpoint.resolve();
        logger.info({ cluster: platform.name, url }, 'kcp virtual workspace found');
        break;
      } catch (err) {
        if (!(err instanceof EndpointPendingError) || signal.aborted) throw err;
        const retryInMs = backoff.next();
        if (attempt === 1 || attempt % 10 === 0) logger.info({ cluster: platform.name, retryInMs }, `${err.message}; waiting`);
        await sleep(retryInMs, signal);
      }
    }
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
