/**
 * The marks relsync puts on every object it writes: a label naming the agent
 * instance (so its copies can be watched by selector) and annotations naming
 * the source identity. relsync never updates or deletes an object that does
 * not carry the marks it expects: that is a conflict.
 */
import type { KubeObject } from './object.js';
import type { ObjectIdentity } from './identity.js';
import { AGENT_LABEL, CONTENT_HASH_ANNOTATION, KEY_PREFIX, SOURCE_ANNOTATIONS, SOURCE_UID_ANNOTATION } from './relsync-keys.js';

/** The grant's value for `source`: JSON with the agent and the identity, keys in a fixed order. */
export function adoptionGrant(agentName: string, source: ObjectIdentity): string {
  const { cluster, group, resource, namespace, name } = source;
  return JSON.stringify({ agent: agentName, cluster, group, resource, namespace, name });
}

/** The field manager relsync's applies use: the fields of a copy it owns are the ones it copies. */
export function fieldManagerName(agentName: string): string {
  return `relsync-${agentName}`.slice(0, 128);
}



export function agentSelector(agentName: string): string {
  return `${AGENT_LABEL}=${agentName}`;
}

export function isRelsyncKey(key: string): boolean {
  return key.startsWith(KEY_PREFIX);
}

/** The source identity an object's marks name, when it carries this agent's label. */
export function markedSource(object: KubeObject, agentName: string): ObjectIdentity | undefined {
  if (object.metadata.labels?.[AGENT_LABEL] !== agentName) return undefined;
  const a = object.metadata.annotations ?? {};
  const cluster = a[SOURCE_ANNOTATIONS.cluster];
  const resource = a[SOURCE_ANNOTATIONS.resource];
  const name = a[SOURCE_ANNOTATIONS.name];
  if (!cluster || !resource || !name) return undefined;
  return { cluster, group: a[SOURCE_ANNOTATIONS.group] ?? '', resource, namespace: a[SOURCE_ANNOTATIONS.namespace] ?? '', name };
}

/** Related copies carry the content hash; copies of primaries do not. */
export function isRelatedCopy(object: KubeObject): boolean {
  return object.metadata.annotations?.[CONTENT_HASH_ANNOTATION] !== undefined;
}

export function marksFor(agentName: string, source: ObjectIdentity, sourceUid: string | undefined): { labels: Record<string, string>; annotations: Record<string, string> } {
  const annotations: Record<string, string> = {
    [SOURCE_ANNOTATIONS.cluster]: source.cluster,
    [SOURCE_ANNOTATIONS.group]: source.group,
    [SOURCE_ANNOTATIONS.resource]: source.resource,
    [SOURCE_ANNOTATIONS.namespace]: source.namespace,
    [SOURCE_ANNOTATIONS.name]: source.name,
  };
  if (sourceUid) annotations[SOURCE_UID_ANNOTATION] = sourceUid;
  return { labels: { [AGENT_LABEL]: agentName }, annotations };
}
