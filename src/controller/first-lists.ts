/**
 * The informer contract, per cluster: a reconcile reads what the watches
 * delivered (cache/object-cache.ts) and the store their LISTs rebuilt, so a
 * primary's reconcile runs only once every watch it reads from has listed
 * once: its resource's types on its platform and in the service cluster
 * (watch-plan.ts, watchedTypes). client-go's WaitForCacheSync holds a whole
 * controller until every informer synced; this holds a primary only behind
 * its own cluster's watches, so a platform that cannot be listed (unreachable)
 * holds its own primaries and nobody else's. A watch whose LIST is forbidden
 * counts as listed (list-watch.ts): waiting for it would be silent, while a
 * reconcile says what relsync may not read; so does one whose first LIST has
 * kept failing for two minutes (a type the cluster does not serve: its
 * primaries' reconciles then read live and report what fails, instead of
 * waiting without a word). What waits is kept by the work
 * queue (work-queue.ts, `gate`): held, not failed, not dropped.
 *
 * Only the first list counts: a relist after 410 Gone holds nothing again (the
 * cache drops the type and the LIST routes what changed meanwhile, as an
 * informer's relist does). A kcp workspace that binds while the watches run
 * is listed on its own (kcp-workspaces.ts, relistWorkspace): its primaries
 * wait for that list, those of other workspaces do not.
 */
import type { ResolvedResource } from '../sync/resolved-config.js';
import { watchedTypes, watchKey, type PlannedWatch } from './watch-plan.js';

export interface FirstListsOptions {
  readonly plan: readonly PlannedWatch[];
  readonly resources: readonly ResolvedResource[];
  readonly serviceCluster: string;
  readonly platforms: readonly string[];
  /** The cluster whose watches show an identity's cluster: a kcp workspace's platform; default: the cluster itself. */
  readonly watchedAs?: (cluster: string) => string;
  /**
   * A watch, or a workspace, has listed for the first time: held primaries may run now. `ready`
   * names the clusters (platforms, workspaces) whose every primary may run from now on, each once.
   */
  readonly onListed: (ready: readonly string[]) => void;
}

export class FirstLists {
  /** Watches of the plan (watch-plan.ts, watchKey) that have not listed yet. */
  private readonly unlisted: Set<string>;
  /** kcp workspaces being listed on their own, with how many such lists run (a workspace may bind again meanwhile). */
  private readonly workspaces = new Map<string, number>();
  private readonly announced = new Set<string>();

  constructor(private readonly options: FirstListsOptions) {
    this.unlisted = new Set(options.plan.map((p) => watchKey(p.cluster, p.type)));
  }

  /** Whether a primary of `resource` in `cluster` may be reconciled now. */
  ready(resource: ResolvedResource, cluster: string): boolean {
    if (this.workspaces.has(cluster)) return false;
    if (this.unlisted.size === 0) return true;
    const watched = this.options.watchedAs?.(cluster) ?? cluster;
    return watchedTypes(resource, this.options.serviceCluster, watched).every((w) => !this.unlisted.has(watchKey(w.cluster, w.type)));
  }

  /** A watch of the plan holds the current state for the first time (list-watch.ts, onFirstSync); later calls change nothing. */
  listed(watch: Pick<PlannedWatch, 'cluster' | 'type'>): void {
    if (!this.unlisted.delete(watchKey(watch.cluster, watch.type))) return;
    const ready = this.options.platforms.filter((p) => !this.announced.has(p) && this.options.resources.every((r) => this.ready(r, p)));
    for (const p of ready) this.announced.add(p);
    this.options.onListed(ready);
  }

  /** A kcp workspace that became known while the watches run is being listed on its own: its primaries wait. */
  listing(workspace: string): void {
    this.workspaces.set(workspace, (this.workspaces.get(workspace) ?? 0) + 1);
  }

  /** That list ended (listed, or given up on: the next sweep lists what it could not). */
  workspaceListed(workspace: string): void {
    const n = (this.workspaces.get(workspace) ?? 1) - 1;
    if (n > 0) return void this.workspaces.set(workspace, n);
    this.workspaces.delete(workspace);
    // Its platform's own watches may still be listing: then it is ready with them.
    this.options.onListed(this.options.resources.every((r) => this.ready(r, workspace)) ? [workspace] : []);
  }
}
