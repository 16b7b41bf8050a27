/**
 * Wires and runs relsync: connections, resolved types, the store, watches,
 * the router, the work queue with its reconciler, and the HTTP server. Every
 * part shares one lifecycle: start(signal) resolves when stopped. Shutdown
 * stops the watches and the queue from taking work, lets in-flight reconciles
 * finish, then closes connections.
 *
 * Data flows one way: watch event → router (store) → queue → reconcile.
 */
import { setMaxListeners } from 'node:events';
import type { Logger } from 'pino';
import type { Config } from '../config/config.js';
import { ClusterSet } from '../kube/cluster-set.js';
import { ListWatch } from '../kube/list-watch.js';
import { typeName } from '../kube/resource-type.js';
import type { OpenedStore } from '../store/database.js';
import { describeIdentity } from '../store/identity.js';
import { RelationStore } from '../store/relation-store.js';
import { HttpServer } from '../server/http-server.js';
import { Metrics } from '../server/metrics.js';
import { EventRecorder } from '../sync/event-recorder.js';
import { PrimaryReconciler } from '../sync/primary-reconciler.js';
import { resolveConfig, type ResolvedResource } from '../sync/resolved-config.js';
import { EventRouter } from './event-router.js';
import { primaryKeyString, type PrimaryKey } from './primary-key.js';
import { planWatches } from './watch-plan.js';
import { WorkQueue } from './work-queue.js';

export interface ManagerOptions {
  readonly config: Config;
  readonly store: OpenedStore;
  readonly logger: Logger;
  /** HTTP port for health and metrics; undefined: no server. 0: any free port. */
  readonly httpPort?: number | undefined;
  readonly onHttpListening?: (port: number) => void;
}

export class Manager {
  readonly metrics = new Metrics();
  private watches: ListWatch[] = [];
  private resources: ResolvedResource[] = [];

  constructor(private readonly options: ManagerOptions) {}

  async start(signal: AbortSignal): Promise<void> {
    const { config, logger } = this.options;
    // Every watch, worker and the server listen on the one stop signal.
    setMaxListeners(0, signal);
    const clusters = new ClusterSet(config.serviceCluster, config.platformClusters, (cluster, method, code) =>
      this.metrics.apiRequests.inc({ cluster, method, code: String(code) }),
    );
    try {
      this.resources = await resolveConfig(config, clusters);
      const store = new RelationStore(this.options.store.db);
      const recorder = new EventRecorder({ clusters, agentName: config.agentName, logger });
      const reconciler = new PrimaryReconciler({ agentName: config.agentName, clusters, store, recorder, logger, metrics: this.metrics });
      const queue = new WorkQueue<PrimaryKey>({
        key: primaryKeyString,
        concurrency: config.workers,
        onError: (item, err, retryInMs) =>
          logger.warn({ primary: describeIdentity(item.id), err: (err as Error).message, retryInMs }, retryInMs === undefined ? 'reconcile failed; not retried' : 'reconcile failed; will retry'),
        onProcessed: (_item, ms, outcome) => {
          this.metrics.reconciles.inc({ outcome });
          this.metrics.reconcileDuration.observe(ms / 1000);
        },
      });
      const router = new EventRouter({
        agentName: config.agentName,
        serviceCluster: clusters.service.name,
        platformClusters: clusters.platforms.map((p) => p.name),
        resources: this.resources,
        store,
        enqueue: (key) => queue.add(key),
        logger,
        metrics: this.metrics,
      });

      const plan = planWatches(this.resources, clusters.service.name, clusters.platforms.map((p) => p.name), config.agentName);
      this.watches = plan.map((w) => {
        const watch: ListWatch = new ListWatch({
          client: clusters.client(w.cluster, w.type),
          labelSelector: w.labelSelector,
          logger,
          handler: {
            onEvent: async (_change, object) => {
              await router.route(w.cluster, w.type, object, _change);
            },
            onList: (items) => router.routeList(w.cluster, w.type, items, w.labelSelector),
          },
          onReconnect: (reason) => this.metrics.watchReconnects.inc({ watch: watch.name, reason }),
          onRelist: () => this.metrics.watchRelists.inc({ watch: watch.name }),
        });
        return watch;
      });
      logger.info(
        { agent: config.agentName, resources: this.resources.map((r) => typeName(r.primaryType)), watches: this.watches.map((w) => w.name) },
        'relsync started',
      );

      const runs: Array<Promise<void>> = [
        queue.start(signal, async (key) => reconciler.reconcile(key.resource, key.id)),
        ...this.watches.map((w) => w.start(signal)),
      ];
      if (this.options.httpPort !== undefined) {
        const server = new HttpServer({
          port: this.options.httpPort,
          registry: this.metrics.registry,
          readiness: { notReady: () => this.notReady() },
          logger,
          beforeScrape: async () => {
            const counts = await store.counts();
            this.metrics.storeRows.set({ table: 'primaries' }, counts.primaries);
            this.metrics.storeRows.set({ table: 'relations' }, counts.relations);
            this.metrics.queueDepth.set(queue.depth);
            this.metrics.queueRetrying.set(queue.retrying);
          },
        });
        runs.push(server.start(signal, this.options.onHttpListening));
      }
      let announced = false;
      const readyCheck = setInterval(() => {
        if (!announced && this.notReady().length === 0) {
          announced = true;
          logger.info('every watch has synced once; ready');
        }
      }, 200);
      try {
        await Promise.all(runs);
      } finally {
        clearInterval(readyCheck);
      }
      logger.info('relsync stopped');
    } finally {
      clusters.close();
    }
  }

  notReady(): string[] {
    if (this.watches.length === 0) return ['starting'];
    return this.watches.filter((w) => !w.synced).map((w) => `watch ${w.name} has not synced`);
  }
}
