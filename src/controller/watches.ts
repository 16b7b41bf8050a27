/**
 * The list/watch loops of a term and where their events go: object watches
 * feed the router, a kcp platform's APIBinding watch feeds binding-watch.ts.
 * In one place so that every loop resumes from its checkpoint, checkpoints
 * its versions and counts its reconnects the same way.
 */
import type { Logger } from 'pino';
import type { Config } from '../config/config.js';
import { ListWatch, type ChangeType, type ListSink, type WatchHandler } from '../kube/list-watch.js';
import type { ResourceClient } from '../kube/resource-client.js';
import type { KubeObject } from '../core/object.js';
import { identityOf } from '../core/identity.js';
import { createHash } from 'node:crypto';
import type { WatchKey } from '../store/checkpoint-store.js';
import type { Metrics } from '../server/metrics.js';
import { apiBindingType } from '../core/kcp-types.js';
import { bindingHandler } from './binding-watch.js';
import { bindingOf, relistWorkspace } from './kcp-workspaces.js';
import { LOGICAL_CLUSTER_ANNOTATION } from '../kube/kcp-endpoint.js';
import type { FinderIndex } from '../cache/finder-index.js';
import type { PlannedWatch } from './watch-plan.js';
import { REFUSED } from './event-router.js';
import type { Wiring } from './wiring.js';
import type { Clock } from '../util/clock.js';

export interface WatchOptions {
  readonly logger: Logger;
  readonly metrics: Metrics;
  readonly watch: Config['watch'];
  /** What the loops' watchdogs and retries run on. */
  readonly clock: Clock;
}

/**
 * An object watch of the plan: its events and lists go to the router (for kcp, split by workspace),
 * and its first list lets the primaries that read it run (first-lists.ts).
 */
export async function watchFor(w: Pick<Wiring, 'clusters' | 'scope' | 'sweepReads' | 'router' | 'checkpoints' | 'checkpointer' | 'cache' | 'finderIndex' | 'firstLists'>, options: WatchOptions, p: PlannedWatch): Promise<ListWatch> {
  const key = { cluster: checkpointCluster(w, p.cluster), group: p.type.group, resource: p.type.resource, labelSelector: p.labelSelector ?? '' };
  // The finder index follows this watch when it sees every object of a type rules find (finder-index.ts);
  // not a kcp platform's (a workspace's objects can appear without events).
  const index = w.clusters.get(p.cluster).kind !== 'kcp' && w.finderIndex?.wants(p.cluster, p.type, p.labelSelector) ? w.finderIndex : undefined;
  const indexed = indexerFor(p, index);
  const watch: ListWatch = await listWatch(w, options, { key, client: w.clusters.client(p.cluster, p.type), onFirstSync: () => w.firstLists.listed(p) }, {
    onEvent: async (change, object, ownChecked) => {
      const cluster = w.scope.of(p.cluster, object);
      if (cluster === undefined) return;
      w.sweepReads.noteObject(identityOf(cluster, p.type, object));
      indexed(cluster, object, change === 'DELETED');
      await w.router.route(cluster, p.type, object, { change, ownChecked });
    },
    // A heavy change of relsync's own write is not parsed (the router lets the cache's version go).
    // Not where a finder index follows the watch: it reads every change's labels.
    ...(index
      ? {}
      : {
          ownWrite: async (change: ChangeType, object: KubeObject) => {
            const cluster = w.scope.of(p.cluster, object);
            // Of no cluster relsync serves (said once, by scope.of): skipped as onEvent would skip it, unparsed.
            if (cluster === undefined) return true;
            if (!(await w.router.ownWrite(cluster, p.type, object, change))) return false;
            w.sweepReads.noteObject(identityOf(cluster, p.type, object));
            return true;
          },
        }),
    // An object whose event was too costly to read (its metadata only): as a change whose content
    // nobody may use. Its owners read it live (and fail with the refusal), the index keeps it
    // findable by its labels, and a sweep reads it live too.
    onRefused: async (change, object) => {
      const cluster = w.scope.of(p.cluster, object);
      if (cluster === undefined) return;
      w.sweepReads.noteObject(identityOf(cluster, p.type, object));
      indexed(cluster, object, change === 'DELETED');
      await w.router.route(cluster, p.type, object, { change: change === 'DELETED' ? change : REFUSED });
    },
    beginList: () => listSinkFor(w, p, index, () => watch.synced),
  });
  return watch;
}

/**
 * What tells the finder index (if it follows watch `p`) of an object the watch delivered: before the
 * router sees the same object, so that a reconcile that asks the index after its own store write
 * either finds the object or is queued again by the router (finder-index.ts).
 */
function indexerFor(p: PlannedWatch, index: FinderIndex | undefined): (cluster: string, object: KubeObject, deleted: boolean) => void {
  return (cluster, object, deleted) => index?.observe(identityOf(cluster, p.type, object), deleted ? undefined : object);
}

/**
 * A LIST of watch `p` begins: the cache lets go of what it may have missed, the finder index starts
 * again, and the pages go to the router per cluster. `synced`: whether the watch has synced (read
 * once the loop runs).
 */
function listSinkFor(w: Pick<Wiring, 'scope' | 'sweepReads' | 'router' | 'cache' | 'clusters'>, p: PlannedWatch, index: FinderIndex | undefined, synced: () => boolean): ListSink {
  const indexed = indexerFor(p, index);
  // Before any page (a list may be empty): the cache's version of what was deleted meanwhile must go.
  w.cache?.listed(p.type, (cluster) => w.scope.listedBy(p.cluster, cluster));
  index?.beginList(p.cluster, p.type, synced);
  // A kcp platform's list spans its workspaces: one routed list per workspace. A workspace
  // bound (or bound again) while the list ran lost its objects of the earlier pages: its items are routed,
  // but its list is not complete, so nothing the store knows of it is taken for gone.
  const sinks = new Map<string, ListSink>();
  let known: Set<string> | undefined;
  return {
    page: async (items, refused = []) => {
      const parts = w.scope.split(p.cluster, items);
      const unread = w.scope.split(p.cluster, refused);
      known ??= new Set([...parts.keys(), ...unread.keys()].filter((c) => !w.clusters.isUnbound(c)));
      for (const cluster of new Set([...parts.keys(), ...unread.keys()])) {
        const part = parts.get(cluster) ?? [];
        const refusedPart = unread.get(cluster) ?? [];
        for (const item of [...part, ...refusedPart]) indexed(cluster, item, false);
        for (const item of refusedPart) w.sweepReads.noteObject(identityOf(cluster, p.type, item));
        let sink = sinks.get(cluster);
        if (!sink) sinks.set(cluster, (sink = w.router.beginList(cluster, p.type, p.labelSelector)));
        await sink.page(part, refusedPart);
      }
    },
    end: async () => {
      index?.endList(p.cluster, p.type);
      for (const [cluster, sink] of sinks) if (known?.has(cluster)) await sink.end();
    },
    // What the pages put in the cache (and the index) is not kept current by any watch until the next list.
    abort: () => {
      w.cache?.listed(p.type, (cluster) => w.scope.listedBy(p.cluster, cluster));
      index?.abortList(p.cluster, p.type);
    },
  };
}

/** The APIBinding watch of one kcp platform: workspaces that bind and unbind its export (binding-watch.ts). */
export function bindingWatchFor(
  w: Pick<Wiring, 'clusters' | 'logical' | 'store' | 'enqueue' | 'router' | 'plan' | 'checkpoints' | 'checkpointer' | 'cache' | 'firstLists' | 'claims' | 'sweeper'>,
  options: WatchOptions,
  platform: string,
  signal: AbortSignal,
): Promise<ListWatch> {
  const bindings = bindingHandler({ platform, logical: w.logical, store: w.store, enqueue: (id) => void w.enqueue(id),
    forget: (c) => w.clusters.forgetLogical(c),
    claims: {
      unbound: async (c) => {
        w.claims.markComplete([c]);
        // The copies its primaries left in place while its claims were not known, decided now (at
        // most ClaimKnowledge's maxPerCluster; none at all once a sweep has completed the workspace).
        await w.sweeper.decideDeferred(c).catch((err: unknown) => options.logger.warn({ logicalCluster: c, err: (err as Error).message }, 'could not decide the related copies an unbound workspace left in place; the next sweep does'));
      },
      bound: (c) => w.claims.forget(c),
    },
    stillBound: (c) => bindingOf(w, c, options.logger),
    relist: (c) => {
      // The workspace's own first list: its primaries wait for it (first-lists.ts).
      w.firstLists.listing(c);
      void relistWorkspace({ clusters: w.clusters, router: w.router, plan: w.plan, logger: options.logger, clock: options.clock }, platform, c, signal).finally(() => w.firstLists.workspaceListed(c));
    },
    reserved: (c) => w.clusters.isConfigured(c),
    logger: options.logger,
    signal,
    clock: options.clock,
  });
  // No reconcile reads the bindings: lead() starts the object watches once they synced (leader-term.ts).
  const key = { cluster: checkpointCluster(w, platform), group: apiBindingType.group, resource: apiBindingType.resource, labelSelector: '' };
  return listWatch(w, options, { key, client: w.clusters.client(platform, apiBindingType), routed: false }, {
    onEvent: (change, object) => {
      // A workspace that binds, binds again or unbinds: kcp stops or starts showing its objects
      // without an event for each, so the cache forgets them (before its primaries are queued).
      const cluster = object.metadata.annotations?.[LOGICAL_CLUSTER_ANNOTATION];
      if (cluster && (change !== 'MODIFIED' || object.metadata.deletionTimestamp)) w.cache?.dropCluster(cluster);
      return bindings.onEvent(change, object);
    },
    // A binding too costly to read (a workspace admin's megabyte of labels on it) is taken as gone:
    // only its own workspace stops syncing, where failing would relist every workspace's bindings
    // (and empty the cache) again and again.
    onRefused: async (_change, object) => {
      const cluster = object.metadata.annotations?.[LOGICAL_CLUSTER_ANNOTATION];
      if (cluster) w.cache?.dropCluster(cluster);
      await bindings.onEvent('DELETED', object);
    },
    beginList: () => {
      // A relist of the bindings (a gap in their watch): any workspace may have come or gone.
      w.cache?.clear();
      // Refused bindings are left out: their workspaces read as unbound (above).
      const items: KubeObject[] = [];
      return { page: async (page) => void items.push(...page), end: () => bindings.onList(items) };
    },
  });
}

/** What a list/watch loop watches, and under which checkpoint key. */
interface WatchedObjects {
  readonly key: WatchKey;
  readonly client: ResourceClient;
  /** Told once the first LIST has ended. */
  readonly onFirstSync?: () => void;
  /** Whether the router takes its objects (default); false for the APIBinding watch. */
  readonly routed?: boolean;
}

/** A list/watch loop as every watch of relsync runs: resumed from its checkpoint, its versions checkpointed, its reconnects counted. */
async function listWatch(
  w: Pick<Wiring, 'checkpoints' | 'checkpointer' | 'clusters'>,
  options: WatchOptions,
  { key, client, onFirstSync, routed = true }: WatchedObjects,
  handler: Pick<WatchHandler, 'onEvent' | 'beginList' | 'onRefused' | 'ownWrite'>,
): Promise<ListWatch> {
  const { metrics } = options;
  const watch: ListWatch = new ListWatch({
    client,
    labelSelector: key.labelSelector || undefined,
    logger: options.logger,
    resumeFrom: await w.checkpoints.resourceVersion(key),
    timeoutSeconds: options.watch.timeoutSeconds,
    watchdogMs: options.watch.idleTimeoutSeconds * 1000,
    handler: { ...handler, onResourceVersion: (rv) => w.checkpointer.noteVersion(key, rv) },
    onReconnect: (reason) => metrics.watchReconnects.inc({ watch: watch.name, reason }),
    onRelist: () => metrics.watchRelists.inc({ watch: watch.name }),
    onRefused: () => metrics.objectsRefused.inc({ watch: watch.name }),
    maxParsedBytes: w.clusters.maxParsedBytes,
    // Not for the APIBinding watch: its handler may read a binding (a request that could wait for
    // this budget) while its event holds some; kcp's bindings are small and one watch per platform.
    ...(routed ? { parseBudget: w.clusters.parseBudget } : {}),
    // The router, the finder index and the cluster scope read a deletion's metadata only; a
    // binding's deletion is read whole (binding-watch.ts reads what it bound).
    deletedAsMetadata: routed,
    onFirstSync,
    clock: options.clock,
  });
  return watch;
}

/**
 * The cluster part of a watch's checkpoint key: a kcp platform's name with its URL, since a name
 * may serve another shard's URL after its endpoint slice changed (kcp-endpoint.ts
 * endpointPlatformNames), and a resourceVersion of one shard means nothing on another.
 */
function checkpointCluster(w: Pick<Wiring, 'clusters'>, cluster: string): string {
  const c = w.clusters.get(cluster);
  const url = c.kind === 'kcp' ? c.endpoint?.knownUrl : undefined;
  return url === undefined ? cluster : `${cluster} ${createHash('sha256').update(url).digest('hex').slice(0, 12)}`;
}
