/**
 * The marks relsync puts on every object it writes: a label naming the agent
 * instance (so its copies can be watched by selector) and annotations naming
 * the source identity. relsync never updates or deletes an object that does
 * not carry the marks it expects: that is a conflict.
 */
import type { KubeObject } from '../core/object.js';
import type { ObjectIdentity } from '../core/identity.js';

export const AGENT_LABEL = 'relsync.dev/agent';
const prefix = 'relsync.dev/';
export const SOURCE_ANNOTATIONS = {
  cluster: 'relsync.dev/source-cluster',
  group: 'relsync.dev/source-group',
  resource: 'relsync.dev/source-resource',
  namespace: 'relsync.dev/source-namespace',
  name: 'relsync.dev/source-name',
} as const;
export const SOURCE_UID_ANNOTATION = 'relsync.dev/source-uid';
/** On related copies: the hash of the content relsync wrote, to tell its own writes from drift. */
export const CONTENT_HASH_ANNOTATION = 'relsync.dev/content-hash';
/**
 * On related copies whose status relsync writes too (a rule's syncStatus): the hash of that status,
 * so that the event of relsync's own status write is told from someone's change of the status.
 */
export const STATUS_HASH_ANNOTATION = 'relsync.dev/status-hash';
/**
 * On copies of primaries: the hash of what relsync applied, so that a field the source dropped
 * (which a comparison of the copy with the source cannot see: the copy may hold others' fields)
 * makes the copy out of date, and the next apply removes it.
 */
export const APPLIED_HASH_ANNOTATION = 'relsync.dev/applied-hash';

/**
 * On copies of primaries of a resource with workspacePath (api-syncagent's enableWorkspacePaths):
 * the kcp workspace path of the primary's workspace (`root:org:team`) as the workspace states it,
 * for people and tools that know workspaces by path. Tenant data (a workspace's admin can rewrite
 * it, see workspace-paths.ts), unlike the source-* marks, which name the logical cluster: never
 * read to decide anything.
 */
export const WORKSPACE_PATH_ANNOTATION = 'relsync.dev/workspace-path';

/**
 * On an object that is in a copy's place and not relsync's: the grant, written by whoever owns the
 * object, that lets this agent take it over as the copy of one source (adoption, for a resource or
 * rule with `adopt: true`). Its value is adoptionGrant()'s: the agent and the source's whole
 * identity, so that no other source (another tenant's, whatever its names) matches it. relsync
 * removes it when it adopts, and never copies a `relsync.dev/` key from a source.
 */
export const ADOPT_ANNOTATION = 'relsync.dev/adopt';

/** The grant's value for `source`: JSON with the agent and the identity, keys in a fixed order. */
export function adoptionGrant(agentName: string, source: ObjectIdentity): string {
  const { cluster, group, resource, namespace, name } = source;
  return JSON.stringify({ agent: agentName, cluster, group, resource, namespace, name });
}

/** The field manager relsync's applies use: the fields of a copy it owns are the ones it copies. */
export function fieldManagerName(agentName: string): string {
  return `relsync-${agentName}`.slice(0, 128);
}

/**
 * On copies written before relsync applied them: the label and annotation
 * keys that came from the source (comma-separated). Server-side apply keeps
 * that record now (the fields relsync's manager owns); a copy that still
 * carries it has its field ownership upgraded first (field-ownership.ts).
 */
export const COPIED_LABELS_ANNOTATION = 'relsync.dev/copied-labels';
export const COPIED_ANNOTATIONS_ANNOTATION = 'relsync.dev/copied-annotations';

/** The finalizer that holds a primary until its copies are gone. */
export function finalizerName(agentName: string): string {
  return `relsync.dev/${agentName}`.slice(0, 63 + 'relsync.dev/'.length);
}

export function agentSelector(agentName: string): string {
  return `${AGENT_LABEL}=${agentName}`;
}

export function isRelsyncKey(key: string): boolean {
  return key.startsWith(prefix);
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
