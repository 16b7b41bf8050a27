/**
 * Every key relsync writes under `relsync.dev/`: the labels, annotations, condition and finalizer
 * on the objects it copies, the namespaces and Secrets it makes, the Leases it takes and the
 * component its Events name. One
 * place, so that what relsync may put on an object (and never copies from a source: isRelsyncKey)
 * is read in one file.
 */

/** The prefix of every key: a source's keys under it are never copied (marks.ts). */
export const KEY_PREFIX = 'relsync.dev/';

// --- On every copy (marks.ts) ---

/** The agent instance whose copy it is: copies are watched by this label. */
export const AGENT_LABEL = 'relsync.dev/agent';
/** The source's whole identity, one annotation per part. */
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
 * On copies written before relsync applied them: the label and annotation
 * keys that came from the source (comma-separated). Server-side apply keeps
 * that record now (the fields relsync's manager owns); a copy that still
 * carries it has its field ownership upgraded first (field-ownership.ts).
 */
export const COPIED_LABELS_ANNOTATION = 'relsync.dev/copied-labels';
export const COPIED_ANNOTATIONS_ANNOTATION = 'relsync.dev/copied-annotations';

// --- On an object in a copy's place (adoption.ts) ---

/**
 * On an object that is in a copy's place and not relsync's: the grant, written by whoever owns the
 * object, that lets this agent take it over as the copy of one source (adoption, for a resource or
 * rule with `adopt: true`). Its value is adoptionGrant()'s: the agent and the source's whole
 * identity, so that no other source (another tenant's, whatever its names) matches it. relsync
 * removes it when it adopts, and never copies a `relsync.dev/` key from a source.
 */
export const ADOPT_ANNOTATION = 'relsync.dev/adopt';

// --- On primaries: the verdict (sync-verdict.ts) and the finalizer (finalizerName) ---

export const SYNCED_CONDITION = 'relsync.dev/Synced';
/** Annotation mode: the primary's generation at its last complete sync, and when that was. */
export const SYNCED_GENERATION_ANNOTATION = 'relsync.dev/synced-generation';
export const SYNCED_AT_ANNOTATION = 'relsync.dev/synced-at';
/** Annotation mode: why the primary is not synced now (`Reason: message`); absent when it is. */
export const SYNC_PROBLEM_ANNOTATION = 'relsync.dev/sync-problem';

/** The finalizer that holds a primary until its copies are gone. */
export function finalizerName(agentName: string): string {
  return `${KEY_PREFIX}${agentName}`.slice(0, 63 + KEY_PREFIX.length);
}

// --- On copy namespaces in the service cluster (copy-namespaces.ts) ---

export const SERVES_CLUSTER_ANNOTATION = 'relsync.dev/serves-cluster';
export const SERVES_NAMESPACE_ANNOTATION = 'relsync.dev/serves-namespace';
/** Which installation of the agent made or claimed it: its Lease, `namespace/name` (one per installation, shared by its replicas). */
export const INSTALLATION_ANNOTATION = 'relsync.dev/installation';

// --- On relsync's Events (event-recorder.ts) ---

export const REPORTING_COMPONENT = 'relsync.dev/relsync';

// --- On the content-hash key's Secret (content-hasher.ts) ---

export const KEY_LABEL = 'relsync.dev/content-key-for';

// --- On shard Leases (controller/shard-leases.ts) ---

export const LEASE_SET_LABEL = 'relsync.dev/lease-set';
export const LEASE_KIND_LABEL = 'relsync.dev/lease-kind';
export const SHARDING_ANNOTATION = 'relsync.dev/sharding';
export const SHARD_ANNOTATION = 'relsync.dev/shard';
