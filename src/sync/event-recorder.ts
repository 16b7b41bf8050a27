/**
 * Kubernetes Events on primaries, in their platform cluster, worded for the
 * user who owns the primary. The same (object, reason, message) is not
 * repeated within `repeatAfterMs`; the memory of what was sent is capped.
 */
import type { Logger } from 'pino';
import type { ClusterAccess } from './cluster-access.js';
import type { KubeObject } from '../core/object.js';
import { ExpiringMap } from '../util/expiring-map.js';
import { compositeKey } from '../core/composite-key.js';

const eventType = { group: '', version: 'v1', resource: 'events', kind: 'Event', namespaced: true } as const;

export interface EventRecorderOptions {
  readonly clusters: Pick<ClusterAccess, 'client'>;
  readonly agentName: string;
  readonly logger: Logger;
  readonly repeatAfterMs?: number;
  readonly maxRemembered?: number;
}

export class EventRecorder {
  private readonly sent: ExpiringMap<string, true>;

  constructor(private readonly options: EventRecorderOptions) {
    this.sent = new ExpiringMap(options.maxRemembered ?? 1000);
  }

  async warn(cluster: string, object: KubeObject, reason: string, message: string): Promise<void> {
    await this.record(cluster, object, 'Warning', reason, message);
  }

  async normal(cluster: string, object: KubeObject, reason: string, message: string): Promise<void> {
    await this.record(cluster, object, 'Normal', reason, message);
  }

  private async record(cluster: string, object: KubeObject, type: 'Normal' | 'Warning', reason: string, message: string): Promise<void> {
    const { namespace, name, uid } = object.metadata;
    if (!namespace || !name) return;
    const key = compositeKey(cluster, uid ?? '', reason, message);
    const now = Date.now();
    if (this.sent.get(key, now)) return;
    this.sent.set(key, true, this.options.repeatAfterMs ?? 300_000, now);
    const time = new Date(now).toISOString();
    const event: KubeObject = {
      metadata: { generateName: `${name}.`, namespace },
      involvedObject: { apiVersion: object.apiVersion, kind: object.kind, name, namespace, uid, resourceVersion: object.metadata.resourceVersion },
      type,
      reason,
      message: message.slice(0, 1024),
      source: { component: 'relsync' },
      reportingComponent: 'relsync.dev/relsync',
      reportingInstance: this.options.agentName,
      firstTimestamp: time,
      lastTimestamp: time,
      count: 1,
    };
    // Every Warning the user sees as an Event is also a log line for the operator.
    if (type === 'Warning') this.options.logger.warn({ cluster, object: `${namespace}/${name}`, reason }, message);
    try {
      await this.options.clusters.client(cluster, eventType).create(namespace, event);
    } catch (err) {
      this.options.logger.warn({ cluster, object: `${namespace}/${name}`, reason, err: (err as Error).message }, 'could not record a Kubernetes Event');
    }
  }
}
