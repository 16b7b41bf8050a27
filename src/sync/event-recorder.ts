/**
 * Kubernetes Events on primaries, in their platform cluster, worded for the user who owns the
 * primary. Recording never waits for the Events API: an Event is correlated
 * (event-correlator.ts: spam filter, aggregation, deduplication), queued, and written by one
 * background loop — a new Event created, a repeat raising the count of the one written before
 * (a merge patch of count, lastTimestamp and message), as client-go's recorder does. Repeats
 * that meet in the queue are one write. What does not fit the queue is dropped and counted: a
 * slow or failing Events API never slows syncing.
 *
 * Events of cluster-scoped objects go to the `default` namespace, as client-go puts them.
 */
import type { Logger } from 'pino';
import type { ClusterAccess } from './cluster-access.js';
import type { KubeObject } from '../core/object.js';
import { compositeKey } from '../core/composite-key.js';
import { isNotFound } from '../kube/api-error.js';
import { ExpiringMap } from '../util/expiring-map.js';
import { outsideReconcile } from '../util/log-context.js';
import { EventCorrelator, type CorrelatorOptions } from './event-correlator.js';
import type { Counter } from './sync-metrics.js';

const eventType = { group: '', version: 'v1', resource: 'events', kind: 'Event', namespaced: true } as const;
/** The API server keeps Events for an hour by default (--event-ttl): a repeat after that is a new one. */
const REMEMBER_SENT_MS = 60 * 60_000;
const MESSAGE_MAX = 1024;

export interface EventRecorderOptions {
  readonly clusters: Pick<ClusterAccess, 'client'>;
  readonly agentName: string;
  readonly logger: Logger;
  /** relsync_events_total: by type and result (created, counted, dropped_rate, dropped_queue, failed). */
  readonly events?: Counter<'type' | 'result'>;
  readonly correlator?: CorrelatorOptions;
  /** Different Events waiting to be written at most; default 1000 (client-go's broadcaster queue). */
  readonly maxQueued?: number;
  readonly now?: () => number;
}

interface Pending {
  readonly cluster: string;
  readonly namespace: string;
  readonly involved: Record<string, unknown>;
  readonly type: 'Normal' | 'Warning';
  readonly reason: string;
  message: string;
  count: number;
  readonly first: string;
  last: string;
}

export class EventRecorder {
  private readonly correlator: EventCorrelator;
  /** Events written: a repeat raises their count. */
  private readonly sent = new ExpiringMap<string, { namespace: string; name: string; count: number }>(4096);
  /** Waiting to be written, oldest first; a repeat of one waiting raises its count there. */
  private readonly pending = new Map<string, Pending>();
  private draining: Promise<void> | undefined;
  /** Failed writes logged once per cluster and reason in 10 minutes. */
  private readonly toldFailure = new ExpiringMap<string, true>(1000);

  constructor(private readonly options: EventRecorderOptions) {
    this.correlator = new EventCorrelator(options.correlator);
  }

  warn(cluster: string, object: KubeObject, reason: string, message: string): void {
    this.record(cluster, object, 'Warning', reason, message);
  }

  normal(cluster: string, object: KubeObject, reason: string, message: string): void {
    this.record(cluster, object, 'Normal', reason, message);
  }

  /** Resolves once every Event recorded so far is written (or given up on): for tests and shutdown. */
  async idle(): Promise<void> {
    while (this.draining) await this.draining;
  }

  private record(cluster: string, object: KubeObject, type: 'Normal' | 'Warning', reason: string, text: string): void {
    const { namespace, name, uid } = object.metadata;
    if (!name) return;
    const nowMs = this.options.now?.() ?? Date.now();
    const objectKey = compositeKey(cluster, uid ?? compositeKey(object.kind ?? '', namespace ?? '', name));
    const correlated = this.correlator.correlate({ object: objectKey, type, reason, message: text.slice(0, MESSAGE_MAX) }, nowMs);
    if (correlated.action === 'drop') {
      this.options.events?.inc({ type, result: 'dropped_rate' });
      return;
    }
    const { key, message } = correlated;
    const now = new Date(nowMs).toISOString();
    const waiting = this.pending.get(key);
    if (waiting) {
      waiting.count++;
      waiting.message = message;
      waiting.last = now;
      return;
    }
    if (this.pending.size >= (this.options.maxQueued ?? 1000)) {
      this.options.events?.inc({ type, result: 'dropped_queue' });
      return;
    }
    // Every Warning the user sees as a new Event is also a log line for the operator (its repeats are counted on the Event).
    if (type === 'Warning' && !this.sent.get(key, nowMs)) this.options.logger.warn({ cluster, object: namespace ? `${namespace}/${name}` : name, reason }, message);
    this.pending.set(key, {
      cluster,
      namespace: namespace || 'default',
      involved: { apiVersion: object.apiVersion, kind: object.kind, name, ...(namespace ? { namespace } : {}), uid, resourceVersion: object.metadata.resourceVersion },
      type,
      reason,
      message,
      count: 1,
      first: now,
      last: now,
    });
    // The loop serves every reconcile's Events: its log lines are no one reconcile's.
    this.draining ??= outsideReconcile(() => this.drain()).finally(() => (this.draining = undefined));
  }

  private async drain(): Promise<void> {
    // Started after the current turn, so that the repeats of one reconcile meet in the queue.
    await new Promise((resolve) => setImmediate(resolve));
    for (;;) {
      const next = this.pending.entries().next();
      if (next.done) return;
      const [key, event] = next.value;
      this.pending.delete(key);
      try {
        await this.write(key, event);
      } catch (err) {
        this.options.events?.inc({ type: event.type, result: 'failed' });
        const told = compositeKey(event.cluster, event.reason);
        if (!this.toldFailure.get(told)) {
          this.toldFailure.set(told, true, 10 * 60_000);
          this.options.logger.warn({ cluster: event.cluster, object: `${event.namespace}/${String(event.involved.name)}`, reason: event.reason, err: (err as Error).message }, 'could not record a Kubernetes Event');
        }
      }
    }
  }

  private async write(key: string, event: Pending): Promise<void> {
    const client = this.options.clusters.client(event.cluster, eventType);
    const known = this.sent.get(key);
    if (known) {
      const count = known.count + event.count;
      try {
        await client.mergePatch(known.namespace, known.name, { count, lastTimestamp: event.last, message: event.message });
        this.sent.set(key, { ...known, count }, REMEMBER_SENT_MS);
        this.options.events?.inc({ type: event.type, result: 'counted' });
        return;
      } catch (err) {
        // Expired (--event-ttl) or deleted: recorded anew.
        if (!isNotFound(err)) throw err;
      }
    }
    const created = await client.create(event.namespace, {
      metadata: { generateName: `${String(event.involved.name)}.`, namespace: event.namespace },
      involvedObject: event.involved,
      type: event.type,
      reason: event.reason,
      message: event.message,
      source: { component: 'relsync' },
      reportingComponent: 'relsync.dev/relsync',
      reportingInstance: this.options.agentName,
      firstTimestamp: event.first,
      lastTimestamp: event.last,
      count: event.count,
    });
    if (created.metadata.name) this.sent.set(key, { namespace: event.namespace, name: created.metadata.name, count: event.count }, REMEMBER_SENT_MS);
    this.options.events?.inc({ type: event.type, result: 'created' });
  }
}
