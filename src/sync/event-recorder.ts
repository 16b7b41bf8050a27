/**
 * Kubernetes Events on primaries, in their platform cluster, worded for the user who owns the
 * primary. Recording never waits for the Events API: an Event is correlated
 * (event-correlator.ts: spam filter, aggregation, deduplication), queued, and written in the
 * background, by one loop per cluster — a new Event created, a repeat raising the count of the
 * one written before (a merge patch of count, lastTimestamp and message), as client-go's
 * recorder does. Repeats that meet in the queue are one write. What does not fit a cluster's
 * queue is dropped and counted (Normal Events first): a slow or failing Events API never slows
 * syncing, and one tenant's never delays another's Events.
 *
 * Events of cluster-scoped objects go to the `default` namespace, as client-go puts them.
 */
import type { Logger } from 'pino';
import type { ClusterAccess } from '../cache/cluster-access.js';
import type { KubeObject } from '../core/object.js';
import { compositeKey } from '../core/composite-key.js';
import { isNotFound } from '../kube/api-error.js';
import { ExpiringMap } from '../util/expiring-map.js';
import { systemClock, type Clock, type Timer } from '../util/clock.js';
import { outsideReconcile } from '../util/log-context.js';
import { EventCorrelator, type CorrelatorOptions } from './event-correlator.js';
import type { Counter } from './sync-metrics.js';
import { WARNING_REPEAT_MS } from './sync-intervals.js';
import { REPORTING_COMPONENT } from '../core/relsync-keys.js';

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
  /** Different Events waiting to be written to one cluster at most; default 100. */
  readonly maxQueuedPerCluster?: number;
  /** ... and to all clusters together; default 2000. */
  readonly maxQueued?: number;
  /** Events' times, what is remembered of them, and idle()'s wait; default systemClock. */
  readonly clock?: Clock;
}

interface Pending {
  readonly namespace: string;
  readonly involved: Record<string, unknown>;
  readonly type: 'Normal' | 'Warning';
  readonly reason: string;
  message: string;
  count: number;
  readonly first: string;
  last: string;
}

/** A Normal Event is not queued where the cluster's queue is this full: room for Warnings. */
const NORMAL_ROOM = 0.8;

export class EventRecorder {
  private readonly correlator: EventCorrelator;
  /** Events written, by correlation key: a repeat raises their count (`unsent`: repeats over the spam filter, not written yet). */
  private readonly sent: ExpiringMap<string, { namespace: string; name: string; count: number; unsent: number }>;
  /**
   * Per cluster: the Events waiting to be written there, oldest first (a repeat of one waiting
   * raises its count there), and the loop writing them. Each cluster has its own loop, one write
   * at a time: a slow Events API (a tenant's webhook on events) delays only that cluster's Events.
   */
  private readonly queues = new Map<string, { pending: Map<string, Pending>; draining: Promise<void> | undefined }>();
  private queued = 0;
  /** Failed writes logged once per cluster and reason in 10 minutes. */
  private readonly toldFailure: ExpiringMap<string, true>;
  private readonly clock: Clock;

  constructor(private readonly options: EventRecorderOptions) {
    this.clock = options.clock ?? systemClock;
    this.correlator = new EventCorrelator(options.correlator ?? {}, this.clock);
    this.sent = new ExpiringMap(4096, this.clock);
    this.toldFailure = new ExpiringMap(1000, this.clock);
  }

  warn(cluster: string, object: KubeObject, reason: string, message: string): void {
    this.record(cluster, object, { type: 'Warning', reason, text: message });
  }

  normal(cluster: string, object: KubeObject, reason: string, message: string): void {
    this.record(cluster, object, { type: 'Normal', reason, text: message });
  }

  /** Resolves once every Event recorded so far is written (or given up on), or after `timeoutMs`: for tests and shutdown. */
  async idle(timeoutMs = Infinity): Promise<void> {
    const deadline = this.clock.now() + timeoutMs;
    for (;;) {
      const loops = [...this.queues.values()].flatMap((q) => (q.draining ? [q.draining] : []));
      if (loops.length === 0) return;
      const left = deadline - this.clock.now();
      if (left <= 0) return;
      let timer: Timer | undefined;
      await Promise.race([Promise.all(loops), ...(Number.isFinite(left) ? [new Promise((resolve) => (timer = this.clock.after(left, () => resolve(undefined))))] : [])]);
      timer?.cancel();
    }
  }

  private record(cluster: string, object: KubeObject, { type, reason, text }: { readonly type: 'Normal' | 'Warning'; readonly reason: string; readonly text: string }): void {
    const { namespace, name, uid } = object.metadata;
    if (!name) return;
    const nowMs = this.clock.now();
    const objectKey = compositeKey(cluster, uid ?? compositeKey(object.kind ?? '', namespace ?? '', name));
    const { key, message, limited } = this.correlator.correlate({ object: objectKey, type, reason, message: text.slice(0, MESSAGE_MAX) }, nowMs);
    const now = new Date(nowMs).toISOString();
    const queue = this.queues.get(cluster) ?? { pending: new Map<string, Pending>(), draining: undefined };
    const waiting = queue.pending.get(key);
    if (waiting) {
      // Written soon anyway: counted there, over the spam filter or not.
      waiting.count++;
      waiting.message = message;
      waiting.last = now;
      return;
    }
    const known = this.sent.get(key, nowMs);
    if (limited) {
      // Counted at the next write of this Event (client-go's count leaves such repeats out; relsync keeps every one).
      if (known) known.unsent++;
      this.options.events?.inc({ type, result: 'dropped_rate' });
      return;
    }
    const room = this.options.maxQueuedPerCluster ?? 100;
    const total = this.options.maxQueued ?? 2000;
    // Normal Events leave a fifth of each queue, and of all of them, to Warnings.
    const share = type === 'Normal' ? NORMAL_ROOM : 1;
    if (queue.pending.size >= Math.floor(room * share) || this.queued >= Math.floor(total * share)) {
      this.options.events?.inc({ type, result: 'dropped_queue' });
      return;
    }
    // Every Warning the user sees as a new Event is also a log line for the operator (its repeats are counted on the Event).
    if (type === 'Warning' && !known) this.options.logger.warn({ cluster, object: namespace ? `${namespace}/${name}` : name, reason }, message);
    queue.pending.set(key, {
      namespace: namespace || 'default',
      involved: { apiVersion: object.apiVersion, kind: object.kind, name, ...(namespace ? { namespace } : {}), uid, resourceVersion: object.metadata.resourceVersion },
      type,
      reason,
      message,
      count: 1,
      first: now,
      last: now,
    });
    this.queued++;
    this.queues.set(cluster, queue);
    this.startDraining(cluster, queue);
  }

  private startDraining(cluster: string, queue: { pending: Map<string, Pending>; draining: Promise<void> | undefined }): void {
    if (queue.draining) return;
    // The loop serves every reconcile's Events: its log lines are no one reconcile's.
    queue.draining = outsideReconcile(() => this.drain(cluster, queue)).finally(() => {
      queue.draining = undefined;
      // Recorded after the loop found its queue empty, before it ended: written now, not at some later Event.
      if (queue.pending.size > 0) this.startDraining(cluster, queue);
      else if (this.queues.get(cluster) === queue) this.queues.delete(cluster);
    });
  }

  private async drain(cluster: string, queue: { pending: Map<string, Pending> }): Promise<void> {
    // Started after the current turn, so that the repeats of one reconcile meet in the queue.
    await new Promise((resolve) => setImmediate(resolve));
    for (;;) {
      const next = queue.pending.entries().next();
      if (next.done) return;
      const [key, event] = next.value;
      queue.pending.delete(key);
      this.queued--;
      try {
        await this.write(cluster, key, event);
      } catch (err) {
        this.options.events?.inc({ type: event.type, result: 'failed' });
        const told = compositeKey(cluster, event.reason);
        if (!this.toldFailure.get(told)) {
          this.toldFailure.set(told, true, WARNING_REPEAT_MS);
          this.options.logger.warn({ cluster, object: `${event.namespace}/${String(event.involved.name)}`, reason: event.reason, err: (err as Error).message }, 'could not record a Kubernetes Event');
        }
      }
    }
  }

  private async write(cluster: string, key: string, event: Pending): Promise<void> {
    const client = this.options.clusters.client(cluster, eventType);
    const known = this.sent.get(key);
    // Repeats held back by the spam filter are counted now; those held back while this write runs, at the next.
    const carried = known?.unsent ?? 0;
    if (known) {
      const count = known.count + carried + event.count;
      try {
        await client.mergePatch(known.namespace, known.name, { count, lastTimestamp: event.last, message: event.message });
        this.sent.set(key, { ...known, count, unsent: known.unsent - carried }, REMEMBER_SENT_MS);
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
      reportingComponent: REPORTING_COMPONENT,
      reportingInstance: this.options.agentName,
      firstTimestamp: event.first,
      lastTimestamp: event.last,
      count: event.count + carried,
    });
    const after = this.sent.get(key)?.unsent ?? carried;
    if (created.metadata.name) this.sent.set(key, { namespace: event.namespace, name: created.metadata.name, count: event.count + carried, unsent: after - carried }, REMEMBER_SENT_MS);
    this.options.events?.inc({ type: event.type, result: 'created' });
  }
}
