/**
 * Why relsync will not write a copy, worded for the user: content nested
 * deeper than MAX_COPY_DEPTH, a copy over limits.copyBytes, a Secret of a type the copy policy denies (it would make
 * the other side act), or a type relsync may not touch in a cluster. One
 * place, because primaries and related objects are refused alike and the
 * words reach Events that tenants read.
 */
import type { CopyPolicy } from '../config/copy-policy.js';
import type { KubeObject } from '../core/object.js';
import { quote } from '../core/quote.js';
import type { ResourceType } from '../core/resource-type.js';
import { nestingDepth } from '../util/json-depth.js';
import type { ClusterAccess } from '../cache/cluster-access.js';
import type { CopyContent } from './content.js';

/**
 * The deepest an object relsync copies may nest (the object itself is level 1, `spec` level 2):
 * far deeper than any Kubernetes type, far shallower than the call stack of the walks that copy,
 * mutate and compare content. An API server accepts about 10,000 levels (kube-apiserver v1.36,
 * a custom resource that keeps unknown fields); such an object is refused before anything reads
 * its content, with one walk that stops at this depth.
 */
export const MAX_COPY_DEPTH = 100;

export class CopyRefusals {
  constructor(
    private readonly policy: CopyPolicy,
    private readonly clusters: Pick<ClusterAccess, 'get'>,
    /** limits.copyBytes; default 1 MiB. */
    private readonly copyBytes = 1024 * 1024,
  ) {}

  /**
   * Why an object is not read for a copy: a field nested deeper than MAX_COPY_DEPTH (its managed
   * fields aside, which mirror its fields a few levels deeper and are never copied), or undefined.
   */
  depth(object: KubeObject): string | undefined {
    for (const [key, value] of Object.entries(object)) {
      const measured = key === 'metadata' && value !== null && typeof value === 'object' ? { ...(value as Record<string, unknown>), managedFields: undefined } : value;
      if (1 + nestingDepth(measured, MAX_COPY_DEPTH - 1) > MAX_COPY_DEPTH) {
        return `its field ${quote(key)} is nested deeper than ${MAX_COPY_DEPTH} levels, more than relsync reads to copy`;
      }
    }
    return undefined;
  }

  /**
   * Why a copy carrying these labels and annotations is refused before its content is written out:
   * their keys and values alone, each at least its characters plus four for the quotes, colon
   * and comma of its JSON, come to more than limits.copyBytes (a tenant's megabyte of labels is
   * then not serialized and hashed to say what it is bound to be). Undefined when they do not.
   */
  metadataSize(content: Pick<CopyContent, 'labels' | 'annotations'>): string | undefined {
    let least = 0;
    for (const map of [content.labels, content.annotations]) {
      for (const key in map) {
        const value: unknown = map[key];
        least += key.length + (typeof value === 'string' ? value.length : 0) + 4;
      }
    }
    return least > this.copyBytes ? `its labels and annotations alone are at least ${least} bytes; relsync copies at most ${this.copyBytes} (limits.copyBytes)` : undefined;
  }

  /** Why a copy of this content (serialized with stableJson) is too big (limits.copyBytes), or undefined. */
  size(serialized: string): string | undefined {
    const size = Buffer.byteLength(serialized);
    return size > this.copyBytes ? `its content is ${size} bytes; relsync copies at most ${this.copyBytes} (limits.copyBytes)` : undefined;
  }

  /** Why a copy of this content, written as `type`, must not exist: a Secret of a denied type (what is written, whatever the source's kind). */
  secret(type: Pick<ResourceType, 'group' | 'resource'>, content: { fields: Record<string, unknown> }): string | undefined {
    return isSecret(type) && typeof content.fields.type === 'string' ? this.policy.secretTypeRefusal(content.fields.type) : undefined;
  }

  /** Why relsync may not touch a type in a cluster (for a kcp workspace: the claim to accept). */
  forbidden(cluster: string, type: Pick<ResourceType, 'group' | 'resource'>, verb: 'read' | 'list'): string {
    const what = type.group ? `${type.resource}.${type.group}` : type.resource;
    if (this.clusters.get(cluster).kind === 'logical') {
      return `relsync may not ${verb} ${what} in this workspace: accept the APIExport's permission claim for ${what} in the APIBinding`;
    }
    return `relsync may not ${verb} ${what} in cluster ${cluster} (check its RBAC)`;
  }

  /**
   * Why a kcp workspace does not serve a type the APIExport claims (kcp's 404 of the path: another
   * export's type, which the workspace does not bind), or undefined elsewhere (a 404 of a path is
   * no such proof on a Kubernetes cluster).
   */
  notServed(cluster: string, type: Pick<ResourceType, 'group' | 'resource'>): string | undefined {
    if (this.clusters.get(cluster).kind !== 'logical') return undefined;
    const what = type.group ? `${type.resource}.${type.group}` : type.resource;
    return `this workspace does not serve ${what} of the export the APIExport's permission claim names: bind that export in the workspace`;
  }
}

function isSecret(type: Pick<ResourceType, 'group' | 'resource'>): boolean {
  return type.group === '' && type.resource === 'secrets';
}
