/**
 * A term's one work queue of primaries, with what its runs tell: the
 * controller-runtime metrics (workqueue_*, controller_runtime_reconcile_*),
 * the failure's log line, and the checkpointer and admission told when a
 * primary is done. Kept apart from the wiring because these callbacks are the
 * contract between a reconcile's end and the store's pending set.
 */
import type { Logger } from 'pino';
import { hasManyClusters, type Config } from '../config/config.js';
import { typeName } from '../core/resource-type.js';
import { describeIdentity } from '../core/identity.js';
import type { Metrics } from '../server/metrics.js';
import type { PrimaryAdmission } from '../sync/primary-admission.js';
import type { ResolvedResource } from '../sync/resolved-config.js';
import { isLastingRefusal } from '../kube/api-error.js';
import { asReconcile } from '../util/log-context.js';
import type { Clock } from '../util/clock.js';
import type { Checkpointer } from './checkpointer.js';
import type { FirstLists } from './first-lists.js';
import { primaryKeyPolicy, type PrimaryKey } from './primary-key.js';
import { WorkQueue, type Outcome } from './work-queue.js';

/** The labels of relsync's one work queue in controller-runtime's workqueue_* metrics. */
export const QUEUE = { name: 'relsync', controller: 'relsync' } as const;

export interface TermQueueOptions {
  readonly config: Config;
  readonly logger: Logger;
  readonly metrics: Metrics;
  readonly clock: Clock;
  /** Asked lazily: the first lists release the queue, so each is made knowing the other. */
  readonly firstLists: () => FirstLists;
  readonly checkpointer: Checkpointer;
  readonly admission: PrimaryAdmission;
}

export function termQueue(options: TermQueueOptions): WorkQueue<PrimaryKey> {
  const { config, metrics } = options;
  return new WorkQueue<PrimaryKey>({
    // A failed run is retried as the whole primary, read live after a 409 (primary-key.ts).
    ...primaryKeyPolicy,
    concurrency: config.workers,
    clock: options.clock,
    gate: (key) => options.firstLists().ready(key.resource, key.id.cluster),
    // Tenants take turns; with several (and more than one worker), one always leaves a worker to the others.
    lane: (key) => key.id.cluster,
    maxPerLane: hasManyClusters(config.platformClusters) ? Math.max(1, config.workers - 1) : config.workers,
    // What the API server keeps refusing (invalid, denied, forbidden) backs off to 1,000 s, as
    // controller-runtime's default does; an outage's retries stay within 60 s, so that recovery is seen soon.
    backoffMaxMsFor: (err) => (isLastingRefusal(err) ? 1_000_000 : undefined),
    // Each reconcile's log lines, the failure's included, carry its id (util/log-context.ts).
    runAs: asReconcile,
    onAdded: () => metrics.workqueueAdds.inc(QUEUE),
    onStarted: (_item, waitedMs) => metrics.workqueueQueueDuration.observe(QUEUE, waitedMs / 1000),
    onError: (item, err, retryInMs) => {
      metrics.workqueueRetries.inc(QUEUE);
      const logger = options.logger;
      logger.warn(
        { primary: describeIdentity(item.id), err: (err as Error).message, ...(logger.isLevelEnabled('debug') ? { stack: (err as Error).stack } : {}), retryInMs },
        retryInMs === undefined ? 'reconcile failed; not retried' : 'reconcile failed; will retry',
      );
    },
    onProcessed: (item, ms, outcome, runsAgain) => {
      observeRun(metrics, typeName(item.resource.primaryType), outcome, ms);
      // Pending until no run of it is due: an event routed while it ran (its checkpoint may be
      // stored already), a failure or a requeue keeps it pending, so a restart reconciles it.
      if (!runsAgain) {
        options.checkpointer.noteDone(item.id);
        // What it held while queued as a new or a refused primary (sync/primary-admission.ts).
        options.admission.settled(item.id);
      }
    },
  });
}

/** One run in controller-runtime's per-controller series (a controller being a primary type here) and relsync's own. */
function observeRun(metrics: Metrics, controller: string, outcome: Outcome, ms: number): void {
  metrics.reconciles.inc({ outcome });
  metrics.reconcileTotal.inc({ controller, result: outcome === 'ok' ? 'success' : outcome === 'error' ? 'error' : 'requeue_after' });
  if (outcome === 'error') metrics.reconcileErrors.inc({ controller });
  metrics.reconcileTime.observe({ controller }, ms / 1000);
  metrics.workqueueWorkDuration.observe(QUEUE, ms / 1000);
  metrics.reconcileDuration.observe(ms / 1000);
}

/** The queue's counters exist from the start (at 0), as controller-runtime's do, so that rates and alerts have a series. */
export function countFromZero(metrics: Metrics, resources: readonly ResolvedResource[]): void {
  metrics.workqueueAdds.inc(QUEUE, 0);
  metrics.workqueueRetries.inc(QUEUE, 0);
  for (const r of resources) {
    const controller = typeName(r.primaryType);
    for (const result of ['success', 'error', 'requeue_after']) metrics.reconcileTotal.inc({ controller, result }, 0);
    metrics.reconcileErrors.inc({ controller }, 0);
  }
}
