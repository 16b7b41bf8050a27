/** Prometheus metrics (prom-client), one registry per process. */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { ResourceType } from '../core/resource-type.js';
import { typeName } from '../core/resource-type.js';
import { heavyTurns } from '../util/heavy-turns.js';

/**
 * The process's metrics. The router (RouterMetrics) and the reconciler
 * (SyncMetrics) each name the few methods they call; this class has them, and
 * TypeScript checks the fit where the wiring hands it over (controller/wiring.ts), so the server
 * layer knows nothing of the layers above it.
 */
export class Metrics {
  readonly registry = new Registry();
  readonly events = new Counter({ name: 'relsync_watch_events_total', help: 'Watch and list items routed, by cluster, type and change', labelNames: ['cluster', 'type', 'change'], registers: [this.registry] });
  readonly routedPrimaries = new Histogram({ name: 'relsync_routed_primaries', help: 'Primaries enqueued per routed watch event (list items included), by cluster; own_write="true": the event of relsync\'s own write, not routed', labelNames: ['cluster', 'own_write'], buckets: [0, 1, 2, 3, 5, 10, 50, 100, 1000], registers: [this.registry] });
  readonly reconciles = new Counter({ name: 'relsync_reconciles_total', help: 'Reconciles of primaries, by outcome', labelNames: ['outcome'], registers: [this.registry] });
  readonly reconcileDuration = new Histogram({ name: 'relsync_reconcile_duration_seconds', help: 'Duration of one reconcile', buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10], registers: [this.registry] });
  /** heavy-turns.ts: large texts and writes waiting for their turn on the event loop, and the turns taken. */
  readonly heavyWaiting = new Gauge({ name: 'relsync_heavy_work_waiting', help: 'Heavy work waiting for its turn on the event loop: answers to GETs and LISTs and watch lines of 64 KiB or more, reconciles writing 4 relation rows or more, a sweep weighing 64 KiB of copies (one turn per loop iteration, lanes by cluster in turn)', registers: [this.registry], collect() { this.set(heavyTurns.queued); } });
  readonly heavyTurnsTotal = new Counter({ name: 'relsync_heavy_work_turns_total', help: 'Heavy work (see relsync_heavy_work_waiting) that took a turn on the event loop', registers: [this.registry], collect() { this.reset(); this.inc(heavyTurns.turnsGranted); } });
  readonly queueDepth = new Gauge({ name: 'relsync_queue_depth', help: 'Primaries waiting in the work queue', registers: [this.registry] });
  readonly queueHeld = new Gauge({ name: 'relsync_queue_held', help: 'Primaries held until the watches their reconcile reads from have listed once (their cluster is not listed yet)', registers: [this.registry] });
  readonly queueRetrying = new Gauge({ name: 'relsync_queue_retrying', help: 'Primaries whose last reconcile failed and that wait for a retry', registers: [this.registry] });
  readonly copiesWritten = new Counter({ name: 'relsync_copies_written_total', help: 'Copies created or updated', labelNames: ['kind', 'action'], registers: [this.registry] });
  readonly writesPaced = new Counter({ name: 'relsync_copy_writes_paced_total', help: 'Copy creates and updates in the service cluster held back (their reconcile retried later) because their tenant\'s copies left old revisions in etcd faster than limits.rewriteBytesPerSecondPerCluster or its share of limits.rewriteBytesPerSecond', registers: [this.registry] });
  readonly copiesRemoved = new Counter({ name: 'relsync_copies_removed_total', help: 'Copies deleted', labelNames: ['kind'], registers: [this.registry] });
  readonly copiesReleased = new Counter({ name: 'relsync_copies_released_total', help: 'Related copies relsync let go without deleting them (cleanupPolicy Orphan): its marks removed, the object left to the tenant', labelNames: ['kind'], registers: [this.registry] });
  readonly unprovenSources = new Counter({ name: 'relsync_unproven_sources_total', help: 'Service-side objects a service-origin rule found that are not provably the copy\'s (not copied)', labelNames: ['rule'], registers: [this.registry] });
  readonly edgeSyncs = new Counter({ name: 'relsync_edge_syncs_total', help: 'Changes of a referenced object synced as that one relation, by result (written; unchanged: same content as stored, nothing sent; refused: the write was refused for good and parked; full: handed to the full reconcile)', labelNames: ['result'], registers: [this.registry] });
  readonly conflicts = new Counter({ name: 'relsync_conflicts_total', help: 'Destination objects left alone because relsync did not create them', labelNames: ['kind'], registers: [this.registry] });
  readonly watchReconnects = new Counter({ name: 'relsync_watch_reconnects_total', help: 'Watch reconnects, by watch and reason', labelNames: ['watch', 'reason'], registers: [this.registry] });
  readonly objectsRefused = new Counter({ name: 'relsync_objects_refused_total', help: 'Objects a watch\'s LIST or event found but did not read, their answer too costly to parse (limits.parsedBytes), by watch', labelNames: ['watch'], registers: [this.registry] });
  readonly parseWaits = new Counter({ name: 'relsync_parse_budget_wait_seconds_total', help: 'Seconds LIST pages and watch events waited, before they were parsed, for what others being parsed and handed on took of limits.parsedBytesInFlight', registers: [this.registry] });
  readonly watchRelists = new Counter({ name: 'relsync_watch_relists_total', help: 'Relists after an expired resourceVersion', labelNames: ['watch'], registers: [this.registry] });
  readonly leadershipLost = new Counter({ name: 'relsync_leadership_lost_total', help: 'Terms that ended because the leader lease could not be renewed in time', registers: [this.registry] });
  readonly clientConcurrencyLimit = new Gauge({ name: 'relsync_client_concurrency_limit', help: 'Non-watch requests relsync lets run at once against a cluster: halved on throttled answers (once per burst), grown back by one per limit\'s worth of answered requests, up to 32', labelNames: ['cluster'], registers: [this.registry] });
  readonly clientThrottled = new Counter({ name: 'relsync_client_throttled_total', help: 'Throttled answers (429, 503 with Retry-After), by cluster: each pauses the cluster\'s requests for Retry-After', labelNames: ['cluster'], registers: [this.registry] });
  readonly apiRequests = new Counter({ name: 'relsync_api_requests_total', help: 'Requests to API servers, by cluster, verb and status code', labelNames: ['cluster', 'method', 'code'], registers: [this.registry] });
  readonly sweeps = new Counter({ name: 'relsync_sweeps_total', help: 'Full-resync sweeps, by trigger and status (skipped: the previous one was still running)', labelNames: ['trigger', 'status'], registers: [this.registry] });
  readonly sweepPrimaries = new Counter({ name: 'relsync_sweep_primaries_total', help: 'Primaries sweeps looked at, by outcome (reconciled; skipped: their last complete sync acted on the versions the LISTs showed)', labelNames: ['outcome'], registers: [this.registry] });
  readonly sweepDuration = new Histogram({ name: 'relsync_sweep_duration_seconds', help: 'Duration of completed sweeps', buckets: [0.1, 0.5, 1, 5, 10, 30, 60, 120, 300, 600], registers: [this.registry] });
  readonly storeBytes = new Gauge({ name: 'relsync_store_bytes', help: 'Size of the store file and its write-ahead log', registers: [this.registry] });
  readonly logicalClusters = new Gauge({ name: 'relsync_logical_clusters', help: 'kcp workspaces known through each kcp platform, by state (bound, unbound: waiting for cleanup)', labelNames: ['platform', 'state'], registers: [this.registry] });
  readonly cacheObjects = new Gauge({ name: 'relsync_cache_objects', help: 'Objects the watches delivered that reconciles read from memory (cache.bytes)', registers: [this.registry] });
  readonly cacheBytes = new Gauge({ name: 'relsync_cache_bytes', help: 'Estimated heap size of the cached objects', registers: [this.registry] });
  readonly finderIndexObjects = new Gauge({ name: 'relsync_finder_index_objects', help: 'Objects whose names the finder index holds, for selector and inverse rules to find without a LIST', registers: [this.registry] });
  readonly finderIndexBytes = new Gauge({ name: 'relsync_finder_index_bytes', help: 'Estimated heap size of the finder index (at most cache.indexBytes)', registers: [this.registry] });
  readonly finderLookups = new Counter({ name: 'relsync_finder_lookups_total', help: 'What selector and inverse rules found related objects with, by how (index: the finder index\'s candidates, read one by one; list: a LIST)', labelNames: ['how'], registers: [this.registry] });
  readonly cacheReads = new Counter({ name: 'relsync_cache_reads_total', help: 'Reads of single objects by reconciles, by result (hit: from memory; miss: from the API server)', labelNames: ['result'], registers: [this.registry] });
  readonly kubeEvents = new Counter({ name: 'relsync_events_total', help: 'Kubernetes Events relsync recorded on primaries, by type and result (created; counted: a repeat raised the count of one recorded before; dropped_rate: over the object\'s token bucket; dropped_queue: the queue to the Events API was full; failed: the write failed)', labelNames: ['type', 'result'], registers: [this.registry] });
  readonly watchSynced = new Gauge({ name: 'relsync_watch_synced', help: 'Per watch of the current term: 1 when it has listed and its requests are not failing (as /readyz reads it), 0 otherwise', labelNames: ['watch'], registers: [this.registry] });
  readonly primaries = new Gauge({ name: 'relsync_primaries', help: 'Primaries in the store, by state (synced, conflict, error, deleting); on the process that reconciles only', labelNames: ['state'], registers: [this.registry] });
  readonly relations = new Gauge({ name: 'relsync_relations', help: 'Relations in the store, by state (pending, synced, conflict, error, retained); on the process that reconciles only', labelNames: ['state'], registers: [this.registry] });
  readonly sweepLastSuccess = new Gauge({ name: 'relsync_sweep_last_success_timestamp_seconds', help: 'When the last sweep that finished without failing finished (Unix time); 0 before the first', registers: [this.registry] });
  readonly termStart = new Gauge({ name: 'relsync_term_start_timestamp_seconds', help: 'When this process began to reconcile and sweep (its term as leader, or its start with leader election off); 0 while it does not', registers: [this.registry] });
  readonly sweepInterval = new Gauge({ name: 'relsync_sweep_interval_seconds', help: 'The longest gap between two sweeps of resync.schedule, on the process that schedules them (the leader)', registers: [this.registry] });
  readonly tenantCopyBytes = new Gauge({ name: 'relsync_tenant_copy_bytes', help: 'Bytes of content that one platform cluster\'s (kcp: one workspace\'s) copies take in the service cluster, as relsync counts them against limits.copiedBytesPerCluster; a series appears once relsync writes a copy of that cluster\'s', labelNames: ['cluster'], registers: [this.registry] });
  readonly tenantCopies = new Gauge({ name: 'relsync_tenant_copies', help: 'Copies one platform cluster (kcp: one workspace) has in the service cluster, as relsync counts them against limits.copiesPerCluster', labelNames: ['cluster'], registers: [this.registry] });
  readonly storeRows = new Gauge({ name: 'relsync_store_rows', help: 'Rows in the store, by table', labelNames: ['table'], registers: [this.registry] });

  // The names controller-runtime and client-go export, which operators' dashboards and alerts
  // already use, beside relsync's own (name="relsync": relsync's one work queue).
  readonly workqueueAdds = new Counter({ name: 'workqueue_adds_total', help: 'Total number of adds handled by workqueue', labelNames: ['name', 'controller'], registers: [this.registry] });
  readonly workqueueDepth = new Gauge({ name: 'workqueue_depth', help: 'Current depth of workqueue', labelNames: ['name', 'controller'], registers: [this.registry] });
  readonly workqueueRetries = new Counter({ name: 'workqueue_retries_total', help: 'Total number of retries handled by workqueue', labelNames: ['name', 'controller'], registers: [this.registry] });
  readonly workqueueQueueDuration = new Histogram({ name: 'workqueue_queue_duration_seconds', help: 'How long in seconds an item stays in workqueue before being requested', labelNames: ['name', 'controller'], buckets: [1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 0.001, 0.01, 0.1, 1, 10, 100, 1000], registers: [this.registry] });
  readonly workqueueWorkDuration = new Histogram({ name: 'workqueue_work_duration_seconds', help: 'How long in seconds processing an item from workqueue takes', labelNames: ['name', 'controller'], buckets: [1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 0.001, 0.01, 0.1, 1, 10, 100, 1000], registers: [this.registry] });
  readonly workqueueUnfinished = new Gauge({ name: 'workqueue_unfinished_work_seconds', help: 'How many seconds of work has been done that is in progress and hasn\'t been observed by work_duration', labelNames: ['name', 'controller'], registers: [this.registry] });
  readonly workqueueLongest = new Gauge({ name: 'workqueue_longest_running_processor_seconds', help: 'How many seconds has the longest running processor for workqueue been running', labelNames: ['name', 'controller'], registers: [this.registry] });
  readonly restClientRequests = new Counter({ name: 'rest_client_requests_total', help: 'Number of HTTP requests, partitioned by status code, method, and host (the cluster\'s name in relsync\'s config)', labelNames: ['code', 'method', 'host'], registers: [this.registry] });
  readonly restClientDuration = new Histogram({ name: 'rest_client_request_duration_seconds', help: 'Request latency in seconds, from sending the request to reading the whole answer (watches left out), by verb and host (the cluster\'s name in relsync\'s config)', labelNames: ['verb', 'host'], buckets: [0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60], registers: [this.registry] });
  readonly reconcileTotal = new Counter({ name: 'controller_runtime_reconcile_total', help: 'Total number of reconciliations per controller (relsync: per primary type), by result (success, error, requeue_after)', labelNames: ['controller', 'result'], registers: [this.registry] });
  readonly reconcileErrors = new Counter({ name: 'controller_runtime_reconcile_errors_total', help: 'Total number of reconciliation errors per controller (relsync: per primary type)', labelNames: ['controller'], registers: [this.registry] });
  readonly reconcileTime = new Histogram({ name: 'controller_runtime_reconcile_time_seconds', help: 'Length of time per reconciliation per controller (relsync: per primary type)', labelNames: ['controller'], buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1, 1.25, 1.5, 1.75, 2, 2.5, 3, 3.5, 4, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60], registers: [this.registry] });
  readonly shardsHeld = new Gauge({ name: 'relsync_shard_held', help: 'Shards this replica holds (sharding.shards > 1): 1 per shard, by phase (working; giving-up: its work stops before its Lease is released; lost: not renewed in time, its work stops)', labelNames: ['shard', 'phase'], registers: [this.registry] });
  readonly shardsLost = new Counter({ name: 'relsync_shards_lost_total', help: 'Shards this replica lost because their Lease could not be renewed in time, or another replica held it', registers: [this.registry] });
  readonly shardsConfigured = new Gauge({ name: 'relsync_shards', help: 'Shards the platform clusters are spread over (sharding.shards)', registers: [this.registry] });
  readonly leaderStatus = new Gauge({ name: 'leader_election_master_status', help: 'Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master', labelNames: ['name'], registers: [this.registry] });

  constructor() {
    // Unprefixed, as every Node.js exporter names them (process_cpu_seconds_total, nodejs_heap_size_used_bytes):
    // the names process dashboards already use. (Before 0.2 they were relsync_process_process_*, a doubled prefix.)
    collectDefaultMetrics({ register: this.registry });
  }

  observeRouted(cluster: string, count: number, ownWrite = false): void {
    this.routedPrimaries.observe({ cluster, own_write: String(ownWrite) }, count);
  }

  countEvent(cluster: string, type: ResourceType, change: string): void {
    this.events.inc({ cluster, type: typeName(type), change });
  }
}
