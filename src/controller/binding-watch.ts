/**
 * The APIBinding watch of a kcp platform: the virtual workspace shows every
 * workspace's binding of the export. A binding that appears records its
 * logical cluster; one that goes marks it unbound and queues its primaries,
 * whose reconcile then finds them unreachable and removes their copies in
 * the service cluster (see PrimaryReconciler.finalize). A relist that lacks
 * a known workspace's binding means the same.
 *
 * Only this watch makes a workspace known: object events of a workspace
 * whose binding was not seen are skipped, and a LIST of a workspace that
 * becomes known follows.
 *
 * kcp deletes the bound objects while a binding terminates, and waits for
 * relsync's finalizers: most cleanup happens then, through the ordinary
 * deletion of each primary. This watch catches what that path cannot: a
 * workspace that vanished while relsync was stopped, or objects kcp stopped
 * showing without a DELETED event.
 */
import type { Logger } from 'pino';
import { configuredPlatformOf, LOGICAL_CLUSTER_ANNOTATION } from '../kube/kcp-endpoint.js';
import type { LogicalClusters } from '../kube/logical-clusters.js';
import type { ChangeType, WatchHandler } from '../kube/list-watch.js';
import type { KubeObject } from '../core/object.js';
import type { RelationStore } from '../store/relation-store.js';
import type { ObjectIdentity } from '../core/identity.js';
import { systemClock, type Clock, type Timer } from '../util/clock.js';
import { onAbort } from '../util/on-abort.js';

export interface BindingWatchOptions {
  /** The kcp platform's configured name. */
  readonly platform: string;
  readonly logical: LogicalClusters;
  readonly store: RelationStore;
  /** Queues one primary for reconcile. */
  readonly enqueue: (id: ObjectIdentity) => void;
  /** Forgets a logical cluster with nothing left in the store (kube/cluster-set.ts forgetLogical). */
  readonly forget: (cluster: string) => Promise<void>;
  /**
   * What the store knows of a workspace's claims on related copies (claim-knowledge.ts).
   * `unbound`: every URL of the platform answered that the workspace no longer binds the export
   * (not merely that a binding is terminating: a second binding of the export may be the one
   * deleted, and one with `deletionPolicy: Orphan` keeps the objects). No primary of it can be read
   * or claim a copy any more, so the claims the store holds are all there are: copies whose last
   * stored claim ends go at once, not left for a sweep that could not complete a forgotten
   * workspace (nor tell its copies for relsync's, copy-of.ts). Awaited before the workspace's
   * primaries are queued or it is forgotten: the copies left in place are decided while it is known.
   * `bound`: it binds anew or again, and objects kcp kept may claim what the store does not know.
   */
  readonly claims: { unbound(cluster: string): Promise<void>; bound(cluster: string): void };
  /**
   * Asks the workspace itself, through every URL of the platform, whether it still binds the
   * export, before a DELETED binding or a relist that lacks it counts as an unbind: a workspace
   * that bound while the LIST was paged is in no snapshot yet, one that moved to another kcp shard
   * leaves this URL's list, and only 'unbound' (every URL answered) removes copies.
   */
  readonly stillBound: (cluster: string) => Promise<'bound' | 'unbound' | 'unknown'>;
  /**
   * Lists and routes every watched type of a workspace that became known
   * after the object watches started: their events of it, if any came
   * first, were skipped (cluster-scope.ts).
   */
  readonly relist: (cluster: string) => void;
  /** A configured cluster's name, which a logical cluster must not take. */
  readonly reserved: (cluster: string) => boolean;
  readonly logger: Logger;
  /** The term's: no re-check of an unanswered unbind runs after it aborts. */
  readonly signal?: AbortSignal;
  /** The first wait before an unanswered unbind is asked again (doubling up to 30 s); default 1 s. */
  readonly recheckMs?: number;
  /** What the re-checks wait on; default systemClock. */
  readonly clock?: Clock;
}

export function bindingHandler(options: BindingWatchOptions): Omit<WatchHandler, 'beginList'> & { onList(items: KubeObject[]): Promise<void> } {
  return new BindingHandler(options);
}

const clusterOf = (binding: KubeObject) => binding.metadata.annotations?.[LOGICAL_CLUSTER_ANNOTATION];

class BindingHandler {
  private readonly unbinding = new Set<string>();
  /** The first LIST runs before the object watches start (leader-term.ts, lead): theirs covers every workspace it finds. */
  private objectWatchesRunning = false;
  /**
   * Workspaces whose binding left the list without an answer from every URL ('unknown'): asked
   * again, with backoff, until one comes (a virtual workspace being torn down may answer 404 for a
   * moment), or the binding is listed again. One timer per known workspace of this platform at most.
   */
  private readonly rechecks = new Map<string, { timer: Timer; waitMs: number }>();
  private readonly clock: Clock;

  constructor(private readonly options: BindingWatchOptions) {
    this.clock = options.clock ?? systemClock;
    if (options.signal) {
      onAbort(options.signal, () => {
        for (const cluster of [...this.rechecks.keys()]) this.stopRecheck(cluster);
      });
    }
  }

  async onEvent(type: ChangeType, binding: KubeObject): Promise<void> {
    this.objectWatchesRunning = true;
    const cluster = clusterOf(binding);
    if (!cluster) return;
    if (type === 'DELETED') await this.unbound(cluster);
    else await this.bound(cluster, binding);
  }

  async onList(items: KubeObject[]): Promise<void> {
    const seen = new Set<string>();
    for (const binding of items) {
      const cluster = clusterOf(binding);
      if (!cluster) continue;
      seen.add(cluster);
      await this.bound(cluster, binding);
    }
    const { logical, platform } = this.options;
    for (const cluster of logical.of(platform)) {
      if (seen.has(cluster) || logical.isUnbound(cluster)) continue;
      await this.unbound(cluster);
    }
    this.objectWatchesRunning = true;
  }

  private async bound(cluster: string, binding: KubeObject): Promise<void> {
    const { platform, logical, logger } = this.options;
    this.stopRecheck(cluster);
    if (this.options.reserved(cluster)) {
      logger.error({ cluster: platform, logicalCluster: cluster }, 'a logical cluster has the name of a configured cluster; it is skipped (rename the configured cluster)');
      return;
    }
    const owner = logical.platformOf(cluster);
    // Another URL of the same platform's endpoint slice is the same platform (the workspace follows its URL).
    if (owner !== undefined && configuredPlatformOf(owner) !== configuredPlatformOf(platform)) {
      logger.error({ cluster: platform, logicalCluster: cluster, platform: owner }, 'a workspace binds the exports of two configured kcp platforms; it stays with the first');
      return;
    }
    const change = await logical.bound(cluster, platform);
    if (change) {
      this.options.claims.bound(cluster);
      logger.info({ cluster: platform, logicalCluster: cluster, binding: binding.metadata.name }, change === 'new' ? 'a workspace binds the export' : 'a workspace binds the export again');
      // Bound again after an unbind: what the store still holds of it is looked at afresh.
      if (change === 'rebound') for (const id of await this.options.store.primariesOfCluster(cluster)) this.options.enqueue(id);
      if (this.objectWatchesRunning) this.options.relist(cluster);
    }
    if (binding.metadata.deletionTimestamp && !this.unbinding.has(cluster)) {
      this.unbinding.add(cluster);
      logger.info({ cluster: platform, logicalCluster: cluster }, 'a workspace is unbinding the export; kcp deletes its objects, and relsync removes their copies');
    }
  }

  private async unbound(cluster: string): Promise<void> {
    const { platform, logger } = this.options;
    this.unbinding.delete(cluster);
    // Positive evidence only: a binding gone from this URL may be served by another (a shard move),
    // or not answered for (an outage); copies are never removed on a guess.
    const answer = await this.options.stillBound(cluster);
    if (answer !== 'unbound') {
      if (answer === 'unknown') {
        if (!this.rechecks.has(cluster)) logger.warn({ cluster: platform, logicalCluster: cluster }, 'a workspace\'s binding left this URL\'s list, but not every URL of the platform could say it is unbound: left as it is, copies and all; asked again soon');
        this.recheck(cluster);
      } else this.stopRecheck(cluster);
      return;
    }
    this.stopRecheck(cluster);
    if (!(await this.options.logical.unbound(cluster, platform))) return;
    await this.options.claims.unbound(cluster);
    const primaries = await this.options.store.primariesOfCluster(cluster);
    if (primaries.length === 0) {
      // The usual case: kcp deleted the objects before the binding, and relsync removed the copies then.
      await this.options.forget(cluster);
      logger.info({ cluster: platform, logicalCluster: cluster }, 'a workspace no longer binds the export; nothing of it is left, relsync forgets it');
      return;
    }
    for (const id of primaries) this.options.enqueue(id);
    logger.warn({ cluster: platform, logicalCluster: cluster, primaries: primaries.length }, 'a workspace no longer binds the export; removing the copies of its primaries');
  }

  private recheck(cluster: string): void {
    const { signal, platform, logger } = this.options;
    if (signal?.aborted) return;
    const waitMs = Math.min(30_000, this.rechecks.has(cluster) ? this.rechecks.get(cluster)!.waitMs * 2 : (this.options.recheckMs ?? 1000));
    this.stopRecheck(cluster);
    const timer = this.clock.after(waitMs, () => {
      if (signal?.aborted) return;
      void this.unbound(cluster).catch((err: unknown) => logger.warn({ cluster: platform, logicalCluster: cluster, err: (err as Error).message }, 'could not ask again whether a workspace still binds the export'));
    });
    this.rechecks.set(cluster, { timer, waitMs });
  }

  private stopRecheck(cluster: string): void {
    this.rechecks.get(cluster)?.timer.cancel();
    this.rechecks.delete(cluster);
  }
}
