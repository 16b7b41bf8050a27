/**
 * Writes relsync's copies, primary and related alike: create-or-update of a
 * copy that carries relsync's marks, and delete-if-marked. The reconciler
 * decides what a copy should hold; this is the one place that decides whether
 * an existing object may be touched at all (its marks name the source: an
 * object without them is never written or deleted), and that remembers
 * relsync's own writes (own-writes.ts) and counts them.
 */
import { isAlreadyExists, isForbidden, isNotFound, isObjectNotFound } from '../kube/api-error.js';
import type { KubeObject } from '../core/object.js';
import { sameIdentity, type ObjectIdentity } from '../core/identity.js';
import type { ClusterAccess, ObjectClient } from './cluster-access.js';
import { isUpToDate, mergeCopiedMap, type CopyContent } from './content.js';
import { namespaceType } from './copy-namespaces.js';
import { AGENT_LABEL, COPIED_ANNOTATIONS_ANNOTATION, COPIED_LABELS_ANNOTATION, markedSource } from './marks.js';
import type { OwnWrites } from './own-writes.js';
import type { SyncMetrics } from './sync-metrics.js';

export interface CopyWriterDeps {
  readonly agentName: string;
  readonly clusters: Pick<ClusterAccess, 'client'>;
  readonly metrics: SyncMetrics;
  readonly ownWrites?: OwnWrites | undefined;
  /** Told of every copy deleted (a sweep's snapshot then no longer answers for it). */
  readonly onDeleted?: ((copy: ObjectIdentity) => void) | undefined;
  /** Told of every version relsync wrote (or, `after`, deleted): the cache reads back nothing older. */
  readonly onWritten?: ((id: ObjectIdentity, resourceVersion: string | undefined, after?: boolean) => void) | undefined;
}

export type CopyKind = 'primary' | 'related';

/** The labels and annotations relsync puts on a copy, beside the source's. */
export interface Marks {
  readonly labels: Record<string, string>;
  readonly annotations: Record<string, string>;
}

export interface Upsert {
  readonly kind: CopyKind;
  readonly copy: ObjectIdentity;
  /** What the copy's marks must name for it to be relsync's to update. */
  readonly source: ObjectIdentity;
  readonly desired: CopyContent;
  readonly marks: Marks;
  /** The copy as last read; undefined when it does not exist. */
  readonly existing: KubeObject | undefined;
  /**
   * Top-level fields replaced whole rather than merged: a key the source dropped from a
   * ConfigMap's `data` must go from the copy too. Other top-level fields the copy has and the
   * source lacks (set by the operator or an API default) are kept.
   */
  readonly replacedFields?: readonly string[];
  /**
   * Create the copy's namespace when a create says it is missing (related copies: a service-origin
   * copy's platform namespace, or a rule's own destination namespace); otherwise its absence is an
   * error. A copy namespace of a primary is made before, by copy-namespaces.ts.
   */
  readonly createsNamespace?: boolean;
}

/** A create refused because the copy's namespace does not exist and relsync may not create it. */
export class MissingNamespaceError extends Error {
  override name = 'MissingNamespaceError';
}

export class CopyWriter {
  constructor(private readonly deps: CopyWriterDeps) {}

  /**
   * Creates the copy, or brings it up to date when its marks name the source; 'conflict' when an
   * object without them is in the way (left untouched). An object created between the read and the
   * create is read again and treated the same way: for a related copy, usually another primary
   * that copies the same source; for a primary's copy, another replica or a sweep's older read.
   */
  async upsert(client: ObjectClient, write: Upsert): Promise<KubeObject | 'conflict'> {
    if (write.existing) return this.update(client, write, write.existing);
    try {
      return await this.create(client, write);
    } catch (err) {
      if (!isAlreadyExists(err)) throw err;
      const now = await client.get(write.copy.namespace, write.copy.name);
      if (!now) throw err;
      return this.update(client, write, now);
    }
  }

  /** Deletes `existing` (read before) if its marks name `source`; whether it did. */
  async deleteIfMarked(client: ObjectClient, kind: CopyKind, copy: ObjectIdentity, source: ObjectIdentity, existing: KubeObject | undefined): Promise<boolean> {
    if (!existing || !this.isMarkedCopyOf(existing, source)) return false;
    await client.delete(copy.namespace, copy.name, existing.metadata.uid);
    this.deps.onWritten?.(copy, existing.metadata.resourceVersion, true);
    this.deps.onDeleted?.(copy);
    this.deps.metrics.copiesRemoved.inc({ kind });
    return true;
  }

  /** Whether the object carries this agent's marks naming `source`. */
  isMarkedCopyOf(object: KubeObject, source: ObjectIdentity): boolean {
    const marked = markedSource(object, this.deps.agentName);
    return marked !== undefined && sameIdentity(marked, source);
  }

  /** Remembers the version a write of relsync's produced, so its own watch event is not routed back. */
  private recorded(id: ObjectIdentity, written: KubeObject): KubeObject {
    this.deps.onWritten?.(id, written.metadata.resourceVersion);
    this.deps.ownWrites?.record(id, written.metadata.resourceVersion);
    return written;
  }

  private async create(client: ObjectClient, write: Upsert): Promise<KubeObject> {
    const { copy, desired, marks } = write;
    const body: KubeObject = {
      ...desired.fields,
      metadata: {
        name: copy.name,
        ...(copy.namespace ? { namespace: copy.namespace } : {}),
        labels: { ...desired.labels, ...marks.labels },
        annotations: { ...desired.annotations, ...marks.annotations },
      },
    };
    const created = await client.create(copy.namespace, body).catch(async (err: unknown) => {
      // A related copy into a namespace that does not exist (yet), e.g. a service-origin copy's
      // platform namespace: create it, as relsync does for copy namespaces, and where it may not, say so.
      if (!write.createsNamespace || !copy.namespace || !isMissingNamespace(err)) throw err;
      await this.createNamespace(copy.cluster, copy.namespace).catch((e: unknown) => {
        throw isForbidden(e) ? new MissingNamespaceError(`namespace "${copy.namespace}" does not exist in cluster ${copy.cluster}, and relsync may not create it`) : e;
      });
      return client.create(copy.namespace, body);
    });
    this.deps.metrics.copiesWritten.inc({ kind: write.kind, action: 'create' });
    return this.recorded(copy, created);
  }

  private async update(client: ObjectClient, write: Upsert, current: KubeObject): Promise<KubeObject | 'conflict'> {
    const { desired, marks } = write;
    if (!this.isMarkedCopyOf(current, write.source)) return 'conflict';
    if (isUpToDate(desired, marks, current)) return current;
    const next: KubeObject = { ...current, metadata: { ...current.metadata } };
    for (const key of write.replacedFields ?? []) delete next[key];
    Object.assign(next, desired.fields);
    Object.assign(next.metadata, mergedMetadata(current, { ...desired.labels, ...marks.labels }, { ...desired.annotations, ...marks.annotations }));
    const updated = await client.replace(next).catch((err: unknown) => {
      // Gone since it was read (a cached read, or a delete in between): what should exist is created.
      if (isObjectNotFound(err, write.copy.name)) return this.create(client, write);
      throw err;
    });
    if (updated.metadata.uid !== current.metadata.uid) return updated;
    this.deps.metrics.copiesWritten.inc({ kind: write.kind, action: 'update' });
    return this.recorded(write.copy, updated);
  }

  /** A related copy's missing namespace (primaries' copy namespaces: copy-namespaces.ts). */
  private async createNamespace(cluster: string, name: string): Promise<void> {
    try {
      await this.deps.clusters.client(cluster, namespaceType).create('', { metadata: { name, labels: { [AGENT_LABEL]: this.deps.agentName } } });
    } catch (err) {
      if (!isAlreadyExists(err)) throw err;
    }
  }
}

/** A 404 to a create whose namespace does not exist (the API server names the namespace, not the object). */
function isMissingNamespace(err: unknown): boolean {
  return isNotFound(err) && /namespaces? "[^"]*" not found/.test((err as Error).message);
}

/** The labels and annotations of an updated copy (see mergeCopiedMap): what the source dropped since the last write goes. */
function mergedMetadata(existing: KubeObject, labels: Record<string, string>, annotations: Record<string, string>): Pick<KubeObject['metadata'], 'labels' | 'annotations'> {
  const record = existing.metadata.annotations ?? {};
  return {
    labels: mergeCopiedMap(existing.metadata.labels, labels, record[COPIED_LABELS_ANNOTATION]),
    annotations: mergeCopiedMap(existing.metadata.annotations, annotations, record[COPIED_ANNOTATIONS_ANNOTATION]),
  };
}
