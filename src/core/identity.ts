import type { KubeObject } from './object.js';
import type { ResourceType } from './resource-type.js';

/**
 * An object's identity: `(cluster, group, resource, namespace, name)`. It is
 * stored as separate columns, never as one concatenated string; `columns()`
 * is the one place that maps it onto a table's column names. `identityKey()`
 * gives its one key as a string: map keys in memory, and `copy_bytes.source`.
 */
export interface ObjectIdentity {
  readonly cluster: string;
  readonly group: string;
  readonly resource: string;
  /** '' for cluster-scoped objects. */
  readonly namespace: string;
  readonly name: string;
}

export type IdentityColumns<P extends string> = {
  [K in keyof ObjectIdentity as `${P}${K}`]: string;
};

/** Maps an identity onto columns with a prefix: columns('source_', id) → { source_cluster, ... }. */
export function columns<P extends string>(prefix: P, id: ObjectIdentity): IdentityColumns<P> {
  return {
    [`${prefix}cluster`]: id.cluster,
    [`${prefix}group`]: id.group,
    [`${prefix}resource`]: id.resource,
    [`${prefix}namespace`]: id.namespace,
    [`${prefix}name`]: id.name,
  } as IdentityColumns<P>;
}

/** Reads an identity back from prefixed columns. */
export function fromColumns<P extends string>(prefix: P, row: IdentityColumns<P>): ObjectIdentity {
  const r = row as Record<string, string>;
  return {
    cluster: r[`${prefix}cluster`]!,
    group: r[`${prefix}group`]!,
    resource: r[`${prefix}resource`]!,
    namespace: r[`${prefix}namespace`]!,
    name: r[`${prefix}name`]!,
  };
}

/** The identity of an object of `type` in `cluster` (a cluster-scoped type's has no namespace, whatever the object says). */
export function identityOf(cluster: string, type: ResourceType, object: KubeObject): ObjectIdentity {
  return { cluster, group: type.group, resource: type.resource, namespace: type.namespaced ? (object.metadata.namespace ?? '') : '', name: object.metadata.name ?? '' };
}

/**
 * The one key of an identity, in memory and in the store (copy_bytes.source): its five parts as a
 * JSON array, which no two identities share and a person reading the store can read.
 */
export function identityKey(id: ObjectIdentity): string {
  return JSON.stringify([id.cluster, id.group, id.resource, id.namespace, id.name]);
}

/** What every identityKey of `cluster`'s objects starts with, and no other cluster's ("a" is not a prefix of "ab"'s). */
export function clusterKeyPrefix(cluster: string): string {
  return `${JSON.stringify([cluster]).slice(0, -1)},`;
}

export function sameIdentity(a: ObjectIdentity, b: ObjectIdentity): boolean {
  return a.cluster === b.cluster && a.group === b.group && a.resource === b.resource && a.namespace === b.namespace && a.name === b.name;
}

/** `tenant-a:secrets:default/creds`, for logs and messages. */
export function describeIdentity(id: ObjectIdentity): string {
  const type = id.group ? `${id.resource}.${id.group}` : id.resource;
  return `${id.cluster}:${type}:${id.namespace ? `${id.namespace}/` : ''}${id.name}`;
}

/**
 * Why an object's names cannot be a Kubernetes object's (longer than any API server accepts), or
 * undefined. A platform's API server may be a tenant's own and send anything: such an object is
 * not routed, stored or reconciled, so that its name never becomes a row, a log line or a key.
 */
export function identityProblem(id: Pick<ObjectIdentity, 'namespace' | 'name'>): string | undefined {
  if (id.name.length === 0 || id.name.length > 253) return `a name of ${id.name.length} characters (an object's is 1 to 253)`;
  if (id.namespace.length > 63) return `a namespace of ${id.namespace.length} characters (at most 63)`;
  return undefined;
}
