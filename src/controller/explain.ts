/**
 * `relsync explain`: for one object — a primary, a related object, or a copy — what concerns it
 * in the config, what the store says of it, what the API servers show, side by side, and one
 * line on why it is (not) synced. Read-only: the store is opened read-only, the API servers are
 * only read, so it is safe beside a running leader.
 */
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Config } from '../config/config.js';
import { describeIdentity, type ObjectIdentity } from '../core/identity.js';
import type { KubeObject } from '../core/object.js';
import { typeName, type ResourceType } from '../core/resource-type.js';
import { ApiError } from '../kube/api-error.js';
import { ClusterSet } from '../kube/cluster-set.js';
import { LogicalClusters } from '../kube/logical-clusters.js';
import { LogicalClusterStore } from '../store/logical-cluster-store.js';
import { primariesMatching, relationsOfObject, relationsOfPrimary } from '../store/inspect-queries.js';
import type { Database, PrimariesTable, RelationsTable } from '../store/schema.js';
import { isServiceOriginCopy } from '../sync/copy-of.js';
import { markedSource } from '../core/marks.js';
import { isSelected, platformNamespaceType } from '../sync/primary-selection.js';
import { resolveConfig, type ResolvedResource } from '../sync/resolved-config.js';
import { expandKcpEndpoints } from './kcp-workspaces.js';
import { verdictCondition } from '../sync/sync-verdict.js';
import { systemClock, timeoutSignal, type Clock } from '../util/clock.js';
import { AGENT_LABEL, SYNCED_GENERATION_ANNOTATION, SYNC_PROBLEM_ANNOTATION, finalizerName } from '../core/relsync-keys.js';

export interface ExplainQuery {
  readonly group: string;
  readonly resource: string;
  readonly namespace: string;
  readonly name: string;
  /** The cluster (a platform, the service cluster, a kcp logical cluster); default: every one the type is relevant in. */
  readonly cluster?: string | undefined;
}

/** `TYPE` (`secrets`, `databases.demo.relsync.dev`) and `[NAMESPACE/]NAME` as a query; a string says what is wrong. */
export function explainQuery(type: string, object: string, cluster?: string): ExplainQuery | string {
  const dot = type.indexOf('.');
  const [resource, group] = dot < 0 ? [type, ''] : [type.slice(0, dot), type.slice(dot + 1)];
  const slash = object.indexOf('/');
  const [namespace, name] = slash < 0 ? ['', object] : [object.slice(0, slash), object.slice(slash + 1)];
  if (!resource || !name) return `expected <type> <namespace>/<name>, got "${type}" "${object}"`;
  // Path segments of an API request: no object, namespace or cluster is called "." or "..", nor has a "/" in its name.
  if ([name, namespace, resource, cluster].some((part) => part === '.' || part === '..' || part?.includes('/'))) return `not an object's name: "${object}"`;
  return { group, resource, namespace, name, ...(cluster ? { cluster } : {}) };
}

export interface Explanation {
  readonly object: string;
  /** Which parts of the config concern objects of this type. */
  readonly concerns: readonly string[];
  /** What the store holds of it, one line each. */
  readonly store: readonly string[];
  /** What the API servers show, per cluster looked at. */
  readonly apiServer: ReadonlyArray<{ readonly cluster: string; readonly lines: readonly string[] }>;
  readonly why: string;
}

export interface ExplainDeps {
  readonly agentName: string;
  readonly resources: readonly ResolvedResource[];
  readonly clusters: ClusterSet;
  readonly db: Kysely<Database>;
}

export async function explain(deps: ExplainDeps, q: ExplainQuery): Promise<Explanation> {
  const { resources, clusters } = deps;
  const same = (t: Pick<ResourceType, 'group' | 'resource'>) => t.group === q.group && t.resource === q.resource;
  const asPrimary = resources.filter((r) => same(r.primaryType));
  const asCopy = resources.filter((r) => same(r.copyType));
  const asRule = resources.flatMap((r) => r.rules.filter((rule) => same(rule.sourceType) || same(rule.destinationType)).map((rule) => ({ resource: r, rule })));
  const concerns = [
    ...asPrimary.map((r) => `primary type of ${r.where}${r.selector ? ' (with a selector)' : ''}${r.namespaceSelector ? ' (with a namespaceSelector)' : ''}`),
    ...asCopy.map((r) => `copy type of ${r.where} (in the service cluster)`),
    ...asRule.map(({ rule }) => `${same(rule.sourceType) ? 'source' : 'destination'} type of ${rule.where} (rule ${rule.id}, origin ${rule.origin})`),
  ];
  const type = asPrimary[0]?.primaryType ?? asCopy[0]?.copyType ?? asRule.map(({ rule }) => (same(rule.sourceType) ? rule.sourceType : rule.destinationType))[0];
  const object = `${typeName(q)} ${q.cluster ? `${q.cluster}:` : ''}${q.namespace ? `${q.namespace}/` : ''}${q.name}`;
  if (!type) return { object, concerns, store: [], apiServer: [], why: 'no resource or rule of the config is of this type: relsync does not sync it' };

  const primaryRows = asPrimary.length > 0 ? await primariesMatching(deps.db, q) : [];
  const relationRows = await relationsOfObject(deps.db, q);
  const store = [
    ...primaryRows.map((p) => `primary in ${p.cluster}: ${p.state}${p.message ? ` (${p.message})` : ''}; copy ${p.copy_cluster}:${p.copy_namespace ? `${p.copy_namespace}/` : ''}${p.copy_name}; last synced ${p.last_synced_at ?? 'never'}`),
    ...(await Promise.all(primaryRows.map((p) => relationsOfPrimary(deps.db, p)))).flat().map((r) => `its relation ${r.rule_id}: ${side(r, 'source')} → ${side(r, 'dest')}: ${r.state}${r.message ? ` (${r.message})` : ''}`),
    ...relationRows.map((r) => `${isSource(r, q) ? 'source' : 'copy'} of the relation ${r.rule_id} of the primary ${r.primary_cluster}:${r.primary_namespace}/${r.primary_name}: ${side(r, 'source')} → ${side(r, 'dest')}: ${r.state}${r.message ? ` (${r.message})` : ''}`),
  ];

  // The clusters to read: the one asked for; otherwise those the store names, or where the type lives.
  const named = new Set<string>([...primaryRows.map((p) => p.cluster), ...relationRows.flatMap((r) => [r.source_cluster, r.dest_cluster])]);
  // Without --cluster: those the store names and every Kubernetes platform and the service cluster (a kcp workspace is
  // looked at when the store names it, or given as --cluster: a kcp platform's own name is no workspace).
  const candidates = q.cluster ? [q.cluster] : [...new Set([...named, clusters.service.name, ...clusters.platforms.filter((p) => p.kind === 'kubernetes').map((p) => p.name)])];
  if (type.namespaced && !q.namespace) return { object, concerns, store, apiServer: [], why: `${typeName(type)} are namespaced: give NAMESPACE/NAME` };
  const live = new Map<string, KubeObject | undefined>();
  // The clusters are read side by side; a failure says what kind it was (its details go to no caller: they name relsync's own access).
  const apiServer = await Promise.all(candidates.map(async (cluster): Promise<{ cluster: string; lines: string[] }> => {
    if (clusters.platforms.some((p) => p.name === cluster && p.kind === 'kcp')) return { cluster, lines: ['a kcp platform: give the workspace\'s logical cluster as --cluster (relsync inspect workspaces lists them)'] };
    if (!clusters.has(cluster)) return { cluster, lines: ['not a cluster relsync knows (a kcp workspace it has not seen, or not configured)'] };
    try {
      const o = await clusters.client(cluster, type).get(q.namespace, q.name);
      live.set(cluster, o);
      return { cluster, lines: o ? describeLive(deps.agentName, o) : ['not found'] };
    } catch (err) {
      return { cluster, lines: [`could not be read: ${err instanceof ApiError ? `${err.statusCode}${err.reason ? ` ${err.reason}` : ''}` : 'no answer'}`] };
    }
  }));

  const why = await reason(deps, q, { asPrimary, asRule, primaryRows, relationRows, live });
  return { object, concerns, store, apiServer, why };
}

/** The relation's source is the object asked about (its copy otherwise). */
function isSource(r: RelationsTable, q: ExplainQuery): boolean {
  return r.source_group === q.group && r.source_resource === q.resource && r.source_namespace === q.namespace && r.source_name === q.name && (!q.cluster || r.source_cluster === q.cluster);
}

function side(r: RelationsTable, p: 'source' | 'dest'): string {
  const ns = r[`${p}_namespace`];
  return `${r[`${p}_cluster`]}:${ns ? `${ns}/` : ''}${r[`${p}_name`]}`;
}

/** What the API server shows that matters to relsync: existence, deletion, marks, finalizers, the verdict. */
function describeLive(agentName: string, o: KubeObject): string[] {
  const lines = [`exists (uid ${o.metadata.uid ?? '?'}, generation ${o.metadata.generation ?? '-'}, resourceVersion ${o.metadata.resourceVersion ?? '?'})`];
  if (o.metadata.deletionTimestamp) lines.push(`being deleted since ${o.metadata.deletionTimestamp}; finalizers: ${(o.metadata.finalizers ?? []).join(', ') || 'none'}`);
  const source = markedSource(o, agentName);
  if (source) lines.push(`relsync's copy of ${describeIdentity(source)} (agent ${agentName})`);
  else if (o.metadata.labels?.[AGENT_LABEL]) lines.push(`marked by another relsync agent: ${o.metadata.labels[AGENT_LABEL]}`);
  if (o.metadata.finalizers?.includes(finalizerName(agentName))) lines.push(`carries relsync's finalizer ${finalizerName(agentName)}`);
  const condition = verdictCondition(o.status);
  if (condition) lines.push(`condition ${condition.type}=${condition.status} (${condition.reason}${condition.message ? `: ${condition.message}` : ''}; observedGeneration ${condition.observedGeneration ?? '-'})`);
  const annotations = o.metadata.annotations ?? {};
  if (annotations[SYNCED_GENERATION_ANNOTATION] !== undefined) lines.push(`synced generation ${annotations[SYNCED_GENERATION_ANNOTATION]}`);
  if (annotations[SYNC_PROBLEM_ANNOTATION]) lines.push(`sync problem: ${annotations[SYNC_PROBLEM_ANNOTATION]}`);
  return lines;
}

interface Seen {
  readonly asPrimary: readonly ResolvedResource[];
  readonly asRule: ReadonlyArray<{ readonly resource: ResolvedResource; readonly rule: ResolvedResource['rules'][number] }>;
  readonly primaryRows: readonly PrimariesTable[];
  readonly relationRows: readonly RelationsTable[];
  readonly live: ReadonlyMap<string, KubeObject | undefined>;
}

/** One line: why the object is, or is not, synced. */
async function reason(deps: ExplainDeps, q: ExplainQuery, seen: Seen): Promise<string> {
  const { clusters, agentName } = deps;
  const found = [...seen.live.entries()].filter((e): e is [string, KubeObject] => e[1] !== undefined);
  const copyOf = found.map(([, o]) => markedSource(o, agentName)).find((s): s is ObjectIdentity => s !== undefined);
  if (copyOf) {
    const owners = seen.relationRows.filter((r) => !isSource(r, q));
    return `it is relsync's copy of ${describeIdentity(copyOf)}${owners.length > 0 ? `, for ${owners.map((r) => `${r.primary_namespace}/${r.primary_name} (rule ${r.rule_id}, ${r.state})`).join(', ')}` : ''}: relsync writes it, never syncs it as a source`;
  }
  if (seen.asPrimary.length > 0) {
    // One answer per platform cluster where it is, or where the store has it (same names in several tenants are different objects).
    const platformsSeen = new Set([...found.map(([c]) => c).filter((c) => c !== clusters.service.name), ...seen.primaryRows.map((p) => p.cluster)]);
    const answers: string[] = [];
    for (const cluster of platformsSeen) {
      const answer = await asPrimary(deps, seen, cluster, seen.live.get(cluster));
      if (answer) answers.push(platformsSeen.size > 1 ? `${cluster}: ${answer}` : answer);
    }
    if (answers.length > 0) return answers.join(' | ');
  }
  const relation = seen.relationRows.find((r) => isSource(r, q)) ?? seen.relationRows[0];
  if (relation) {
    const what = `rule ${relation.rule_id} of ${relation.primary_cluster}:${relation.primary_namespace}/${relation.primary_name}`;
    if (!isSource(relation, q)) return `it is the copy ${what} writes of ${side(relation, 'source')}: ${relation.state}${relation.message ? `: ${relation.message}` : ''}`;
    if (relation.state === 'pending') return `${what} names it and waits for it to exist`;
    if (relation.state === 'synced') return `${what} copies it to ${side(relation, 'dest')}: synced`;
    return `${what}: ${relation.state}${relation.message ? `: ${relation.message}` : ''}`;
  }
  if (seen.asRule.length > 0) return `no primary's rule resolves to it; the rules of its type (${seen.asRule.map(({ rule }) => rule.where).join(', ')}) copy only the objects a primary names (reference, template) or finds (selector, inverse)`;
  return found.length > 0 ? 'the store does not know it' : 'it does not exist on the API servers looked at, and the store does not know it';
}

/**
 * Why, as a primary in `cluster`; undefined when it is not one there (not selected, while a rule
 * copies it: the relation's answer is the better one).
 */
async function asPrimary(deps: ExplainDeps, seen: Seen, cluster: string, primary: KubeObject | undefined): Promise<string | undefined> {
  const { clusters, agentName } = deps;
  const row = seen.primaryRows.find((p) => p.cluster === cluster);
  if (!primary) return row ? `it no longer exists on the API server; the store still holds it (${row.state}): its copies are removed at the next reconcile or sweep` : 'it does not exist on the API server';
  if (primary.metadata.deletionTimestamp) return 'it is being deleted: relsync removes its copy and the related copies no other primary owns, then its finalizer';
  if (isServiceOriginCopy(agentName, clusters.service.name, primary)) return 'it is one of relsync\'s copies of a service-side object, never a primary';
  const selected = [];
  for (const r of seen.asPrimary) if (await isSelected(r, primary, (ns) => clusters.client(cluster, platformNamespaceType).get('', ns))) selected.push(r);
  if (selected.length === 0) {
    if (seen.relationRows.length > 0) return undefined;
    return `it is not selected: ${seen.asPrimary.map((r) => `${r.where}${r.selector ? '.selector' : ''}${r.namespaceSelector ? ' / .namespaceSelector' : ''}`).join(', ')} leave${seen.asPrimary.length === 1 ? 's' : ''} it out, so relsync does not sync it`;
  }
  if (!row) return 'it is selected but the store does not hold it: relsync has not reconciled it yet (is relsync running, and the leader? has the cluster reached limits.primariesPerCluster?)';
  if (row.state !== 'synced') return `${row.state}: ${row.message ?? 'no message'}`;
  return `synced (last complete sync ${row.last_synced_at ?? 'not recorded'})`;
}

/** Connects to the config's clusters, resolves its types, and explains `q` with the store at `db`; closes what it opened. */
export async function explainWithConfig(config: Config, db: Kysely<Database>, logger: Logger, q: ExplainQuery, clock: Clock = systemClock): Promise<Explanation> {
  const logical = await LogicalClusters.load(new LogicalClusterStore(db, clock));
  const platforms = await expandKcpEndpoints(config.platformClusters, logger, timeoutSignal(clock, 30_000), clock);
  const clusters = new ClusterSet(config.serviceCluster, platforms, { logicalClusters: logical, listPages: config.limits.listPages, maxParsedBytes: config.limits.parsedBytes });
  try {
    const resources = await resolveConfig(config, clusters);
    return await explain({ agentName: config.agentName, resources, clusters, db }, q);
  } finally {
    clusters.close();
  }
}
