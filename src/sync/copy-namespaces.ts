/**
 * Copy namespaces: the service-cluster namespace a primary's copy lives in,
 * and whom it serves. Tenants choose their namespace names, so two tenants'
 * sources could be sent to one namespace (a hash collision, or a naming
 * template that cannot keep them apart), where the operator would resolve
 * one tenant's references to the other's objects. So:
 *
 * - each namespace relsync creates records the source it serves
 *   (`relsync.dev/serves-cluster`, `relsync.dev/serves-namespace`); one that
 *   already serves another source is a conflict, never shared. Only the parts
 *   the naming template keys on are compared: `{{ cluster }}` alone means one
 *   namespace for all of a cluster's namespaces, by the config's choice;
 * - a namespace without a record that relsync made (its agent label: a
 *   relsync from before records, or a related rule's destination) is claimed by the first source that needs
 *   it, with the namespace's resourceVersion as precondition, so two claims
 *   cannot both win; any other existing namespace (`kube-system`, the
 *   operator's) is a conflict: a provider that makes copy namespaces itself
 *   puts the record on them. A constant namespace (`shared`) is one namespace
 *   for all by the config's choice: used as it is;
 * - the default template keeps 64 bits of hash; namespaces made under the
 *   previous default (24 bits) keep serving their copies: at start, each one
 *   without a record is recorded for the one source whose copies it holds, and
 *   that source's copies stay there (a pin), instead of moving, which the
 *   operator would take for a delete and a create.
 */
import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import { DEFAULT_COPY_NAMESPACE, LEGACY_COPY_NAMESPACE } from '../config/schema.js';
import { isAlreadyExists, isConflict, isForbidden } from '../kube/api-error.js';
import type { KubeObject } from '../core/object.js';
import { Template, type TemplateContext } from '../rules/template.js';
import { ExpiringMap } from '../util/expiring-map.js';
import { systemClock, type Clock } from '../util/clock.js';
import { agentSelector, isRelatedCopy, markedSource } from '../core/marks.js';
import type { ClusterAccess, ObjectClient } from '../cache/cluster-access.js';
import type { ObjectReads } from '../cache/object-reads.js';
import type { ResolvedResource } from './resolved-config.js';
import { compositeKey } from '../core/composite-key.js';
import { AGENT_LABEL, INSTALLATION_ANNOTATION, SERVES_CLUSTER_ANNOTATION, SERVES_NAMESPACE_ANNOTATION } from '../core/relsync-keys.js';

/** A copy namespace as the naming makes it: its name, and the naming (a constant one is everyone's). */
interface NamespaceTarget {
  readonly naming: NamespaceNaming;
  readonly name: string;
}

/** This process must not run as it is set up (another installation with its agent name, RBAC it lacks): it says why and exits. */
export class RefusedToRunError extends Error {
  override name = 'RefusedToRunError';
}

/** The template that named a namespace, and where it is in the config (for messages). */
export interface NamespaceNaming {
  readonly template: Template;
  readonly where: string;
}

export const namespaceType = { group: '', version: 'v1', resource: 'namespaces', kind: 'Namespace', namespaced: false } as const;

/** The source a copy namespace is for: a namespace of a platform cluster. */
export interface ServedSource {
  readonly cluster: string;
  readonly namespace: string;
}

const legacy = Template.parse(LEGACY_COPY_NAMESPACE, ['cluster', 'namespace']);

export class CopyNamespaces {
  /** `cluster/namespace` → the namespace its copies stay in (made under the previous default). */
  private readonly pins = new Map<string, string>();

  /**
   * `installation`: this installation's Lease (`namespace/name`), when its namespace is known
   * (POD_NAMESPACE or the config); undefined for a process that cannot tell (`relsync sweep` run
   * by hand outside the cluster), which then neither records nor checks installations. `clock`:
   * what namespaces seen and conflicts told are remembered for; default systemClock.
   */
  constructor(private readonly deps: { readonly agentName: string; readonly clusters: ClusterAccess; readonly logger: Logger; readonly installation: string | undefined; readonly clock?: Clock }) {
    this.verified = new ExpiringMap(10_000, deps.clock ?? systemClock);
    this.warned = new ExpiringMap(10_000, deps.clock ?? systemClock);
  }

  /** A digest of the pins, made again when they change (sync/config-fingerprint.ts reads it per sync). */
  pinsDigest(): string {
    if (this.digest === undefined) this.digest = createHash('sha256').update([...this.pins].sort().join('\u0000')).digest('hex');
    return this.digest;
  }

  private digest: string | undefined;

  /** Where the copies of a primary (whose template variables are `context`) go. */
  nameFor(resource: ResolvedResource, source: ServedSource, context: TemplateContext): string {
    if (resource.naming.namespace.source === DEFAULT_COPY_NAMESPACE) {
      const pinned = this.pins.get(pinKey(source));
      if (pinned !== undefined) return pinned;
    }
    return resource.naming.namespace.render(context);
  }

  private pin(key: string, namespace: string): void {
    if (this.pins.get(key) === namespace) return;
    this.pins.set(key, namespace);
    this.digest = undefined;
  }

  /**
   * Makes sure `name` exists and serves `source`; when it serves another source, says so (a
   * conflict: nothing of `source` may be written there).
   */
  async claim(reads: ObjectReads, naming: NamespaceNaming, source: ServedSource, name: string): Promise<string | undefined> {
    // Seen serving this source within the last minute: not read again. A namespace deleted meanwhile
    // fails the copy's write, which forgets it here (forget()), and the retry reads and makes it again
    // with its record; one that serves another source now would have to be deleted and made again for
    // it within that minute (the same trust a sweep gives it).
    if (this.verified.get(name) === memoKey(naming, source)) return undefined;
    const service = this.deps.clusters.service.name;
    const namespaces = this.deps.clusters.client(service, namespaceType);
    let current = await reads.get(service, namespaceType, '', name);
    // A sweep's snapshot knows only that the namespace exists (cache/object-reads.ts): its record is read live.
    if (current && current.metadata.uid === undefined) current = await namespaces.get('', name);
    const taken = await this.check(namespaces, { naming, name }, source, current);
    if (taken === undefined) this.verified.set(name, memoKey(naming, source), 60_000);
    return taken;
  }

  /** A write found the namespace missing: the next claim reads (and makes) it again. */
  forget(name: string): void {
    this.verified.delete(name);
  }

  /** Namespace → the template and source it was recently seen serving, for the sweep's reads. */
  private readonly verified: ExpiringMap<string, string>;
  /** Namespace → the source whose conflict was last logged: a tenant's conflicting primaries requeue every 30 s. */
  private readonly warned: ExpiringMap<string, string>;

  /** Whether to log this namespace's conflict now (once per 5 minutes per namespace and source). */
  private shouldWarn(name: string, source: ServedSource): boolean {
    if (this.warned.get(name) === pinKey(source)) return false;
    this.warned.set(name, pinKey(source), 5 * 60_000);
    return true;
  }

  /** Why `target.name` may not hold `source`'s copies (made, or its record written, when it may); undefined when it may. */
  private async check(namespaces: ObjectClient, target: NamespaceTarget, source: ServedSource, read: KubeObject | undefined): Promise<string | undefined> {
    const { naming, name } = target;
    let current = read;
    for (let attempt = 0; ; attempt++) {
      if (!current) {
        try {
          await namespaces.create('', { metadata: { name, labels: { [AGENT_LABEL]: this.deps.agentName }, annotations: this.records(source) } });
          return undefined;
        } catch (err) {
          if (!isAlreadyExists(err) || attempt > 2) throw err;
        }
      } else {
        // A constant name is one namespace for every source, by the config's choice (the provider may make it).
        if (naming.template.isConstant) return undefined;
        // Another agent's namespace (another provider's relsync on this service cluster): its records
        // may name the very same source when both configs call their platforms alike, and its
        // operator would take this agent's copies for its own tenant's. Checked before installations,
        // which a one-shot `relsync sweep` run by hand does not know.
        const agent = current.metadata.labels?.[AGENT_LABEL];
        if (agent !== undefined && agent !== this.deps.agentName) {
          if (this.shouldWarn(name, source)) this.deps.logger.error({ namespace: name, agent, source: pinKey(source) }, `a copy namespace belongs to relsync agent "${agent}": nothing is copied there (two agents on one service cluster need copy namespaces of their own: another platform cluster name or naming.namespace)`);
          // The tenant hears only that it is taken (its Event); the other agent's name is for the provider's log.
          return `the copy namespace ${name} belongs to another relsync agent; nothing is copied there`;
        }
        const installation = current.metadata.annotations?.[INSTALLATION_ANNOTATION];
        if (this.deps.installation !== undefined && installation !== undefined && installation !== this.deps.installation) {
          if (this.shouldWarn(name, source)) this.deps.logger.error({ namespace: name, installation, this: this.deps.installation }, `a copy namespace belongs to another installation of agent "${this.deps.agentName}": two installations must not share an agent name`);
          return `the copy namespace ${name} belongs to another relsync installation; nothing is copied there`;
        }
        const served = servedBy(current);
        if (served) return this.mismatch(naming, name, served, source);
        if (current.metadata.labels?.[AGENT_LABEL] !== this.deps.agentName) {
          if (this.shouldWarn(name, source)) this.deps.logger.warn({ namespace: name, source: pinKey(source) }, 'a copy namespace exists, was not made by relsync and records no source it serves: nothing is copied there (a provider that makes copy namespaces annotates them with relsync.dev/serves-cluster and serves-namespace)');
          return `the copy namespace ${name} exists and was not made by relsync for this namespace; nothing is copied there`;
        }
        try {
          // Unrecorded (the provider's, or older relsync's): the first source to need it claims it.
          await namespaces.mergePatch('', name, { metadata: { resourceVersion: current.metadata.resourceVersion, annotations: this.records(source) } });
          this.deps.logger.info({ namespace: name, serves: `${source.cluster}/${source.namespace}` }, 'recorded whom a copy namespace without a record serves');
          return undefined;
        } catch (err) {
          if (!isConflict(err) || attempt > 2) throw err;
        }
      }
      current = await namespaces.get('', name);
    }
  }

  /**
   * At the start of each term: pins for namespaces of the previous default, from their records;
   * every namespace this agent made without a record of whom it serves (an older relsync) is
   * recorded for the one source whose primaries' copies it holds, and pinned when the previous
   * default named it. One holding copies of several sources (a collision under the old 24-bit
   * hash) is recorded as serving none: those sources' copies move to namespaces of their own.
   * Any failure but a refusal is thrown (the caller retries): without its pins a term would move
   * copies.
   */
  async adoptUnrecorded(resources: readonly ResolvedResource[], signal: AbortSignal): Promise<void> {
    const namespaces = this.deps.clusters.client(this.deps.clusters.service.name, namespaceType);
    const all = await this.agentNamespaces(namespaces);
    const mine = this.deps.installation;
    for (const ns of all) {
      const served = servedBy(ns);
      if (served && ns.metadata.name === legacyName(served)) this.pin(pinKey(served), ns.metadata.name);
      // Recorded before installations were (relsync 0.2 pre-releases): this installation's from now on.
      if (served && mine !== undefined && ns.metadata.annotations?.[INSTALLATION_ANNOTATION] === undefined) {
        await namespaces.mergePatch('', ns.metadata.name ?? '', { metadata: { resourceVersion: ns.metadata.resourceVersion, annotations: { [INSTALLATION_ANNOTATION]: mine } } }).catch((err: unknown) => {
          if (!isConflict(err)) throw err;
        });
      }
    }
    const unrecorded = new Set(all.filter((ns) => !servedBy(ns)).map((ns) => ns.metadata.name ?? ''));
    if (unrecorded.size === 0) return;
    const sources = await this.sourcesOfCopiesIn(unrecorded, resources, signal);
    // Stopped midway, a namespace's sources may be known in part: nothing is recorded.
    if (signal.aborted) return;
    for (const [name, found] of sources) await this.recordFound(namespaces, all.find((n) => n.metadata.name === name)!, found);
  }

  /**
   * The namespaces this agent made in the service cluster, each of this installation (another
   * installation's refuse the start: each would delete the other's copies as orphans).
   */
  private async agentNamespaces(namespaces: ObjectClient): Promise<KubeObject[]> {
    const { agentName, logger } = this.deps;
    let all: KubeObject[];
    try {
      all = (await namespaces.listAll({ labelSelector: agentSelector(agentName) })).items;
    } catch (err) {
      // Without list on namespaces (RBAC of an older release) relsync cannot know its pins: running would move copies.
      if (isForbidden(err)) throw new RefusedToRunError(`relsync may not list namespaces in the service cluster (it needs get, list, create and patch on namespaces since 0.2, see deploy/rbac.yaml): without them it cannot tell which copy namespaces keep their copies; ${(err as Error).message}`);
      throw err;
    }
    const mine = this.deps.installation;
    if (mine === undefined) logger.warn('this process does not know its installation (no POD_NAMESPACE and no leaderElection.namespace): it neither records nor checks which installation a copy namespace belongs to');
    // Another installation with this agent name would take this one's copies for orphans, and the reverse.
    const foreign = mine === undefined ? [] : all.filter((ns) => (ns.metadata.annotations?.[INSTALLATION_ANNOTATION] ?? mine) !== mine);
    if (foreign.length > 0) {
      const other = foreign[0]!.metadata.annotations![INSTALLATION_ANNOTATION];
      throw new RefusedToRunError(
        `${foreign.length} namespace(s) of the service cluster (${foreign.slice(0, 3).map((n) => n.metadata.name).join(', ')}) belong to another relsync installation with agent name "${agentName}" (its Lease: ${other}); this one's Lease is ${this.deps.installation}. ` +
          'Two installations must not share an agent name: each would delete the other\'s copies as orphans. Give this one another agentName (or, if the other is gone for good, remove its relsync.dev/installation annotations).',
      );
    }
    return all;
  }

  /** Namespace → the sources (pin key → source) whose primaries' copies it holds, for the `unrecorded` namespaces. */
  private async sourcesOfCopiesIn(unrecorded: ReadonlySet<string>, resources: readonly ResolvedResource[], signal: AbortSignal): Promise<Map<string, Map<string, ServedSource>>> {
    const { clusters, agentName } = this.deps;
    const sources = new Map<string, Map<string, ServedSource>>();
    for (const resource of resources) {
      if (signal.aborted) break;
      if (!resource.copyType.namespaced) continue;
      const copies = await clusters.client(clusters.service.name, resource.copyType).listAll({ labelSelector: agentSelector(agentName) });
      for (const copy of copies.items) {
        const at = copy.metadata.namespace ?? '';
        const marked = markedSource(copy, agentName);
        if (!unrecorded.has(at) || !marked || isRelatedCopy(copy) || marked.resource !== resource.primaryType.resource || marked.group !== resource.primaryType.group) continue;
        const found = sources.get(at) ?? new Map<string, ServedSource>();
        found.set(pinKey(marked), { cluster: marked.cluster, namespace: marked.namespace });
        sources.set(at, found);
      }
    }
    return sources;
  }

  /** Records whom namespace `ns` serves: the one source `found` there, or none when several. */
  private async recordFound(namespaces: ObjectClient, ns: KubeObject, found: ReadonlyMap<string, ServedSource>): Promise<void> {
    const { logger } = this.deps;
    const name = ns.metadata.name ?? '';
    if (found.size !== 1) {
      // Recorded as serving no source (empty names): never claimed or pinned by either, not scanned again.
      logger.error({ namespace: name, sources: [...found.keys()] }, 'a copy namespace made by an older relsync holds the copies of several sources (their names collided); it is recorded as serving none, and their copies move to namespaces of their own');
      await namespaces.mergePatch('', name, { metadata: { resourceVersion: ns.metadata.resourceVersion, annotations: this.records({ cluster: '', namespace: '' }) } }).catch((err: unknown) => {
        if (!isConflict(err)) throw err;
      });
      return;
    }
    const [source] = found.values();
    try {
      await namespaces.mergePatch('', name, { metadata: { resourceVersion: ns.metadata.resourceVersion, annotations: this.records(source!) } });
    } catch (err) {
      if (!isConflict(err)) throw err;
      // Recorded meanwhile (another replica, a claim): pinned if for this very source.
      const now = servedBy((await namespaces.get('', name)) ?? { metadata: {} });
      if (!now || pinKey(now) !== pinKey(source!)) return;
    }
    if (name === legacyName(source!)) this.pin(pinKey(source!), name);
    logger.info({ namespace: name, serves: pinKey(source!) }, 'recorded whom a copy namespace made by an older relsync serves; its copies stay');
  }

  /**
   * The other installation (its Lease) a service-cluster namespace belongs to, or undefined
   * (this one's, unrecorded, or this process cannot tell). A sweep asks before it deletes an
   * orphan there: an installation that appeared after this one's start check must not lose its
   * copies to this one's sweep (read live; orphans are few).
   */
  async otherInstallation(namespace: string): Promise<string | undefined> {
    const mine = this.deps.installation;
    if (mine === undefined || namespace === '') return undefined;
    const ns = await this.deps.clusters.client(this.deps.clusters.service.name, namespaceType).get('', namespace);
    const theirs = ns?.metadata.annotations?.[INSTALLATION_ANNOTATION];
    return theirs !== undefined && theirs !== mine ? theirs : undefined;
  }

  private records(source: ServedSource): Record<string, string> {
    const { installation } = this.deps;
    return { ...servesAnnotations(source), ...(installation !== undefined ? { [INSTALLATION_ANNOTATION]: installation } : {}) };
  }

  private mismatch(naming: NamespaceNaming, name: string, served: ServedSource, source: ServedSource): string | undefined {
    const { template } = naming;
    // A pinned namespace was named for both parts.
    const pinned = this.pins.get(pinKey(source)) === name;
    const byCluster = pinned || template.uses('cluster') || template.uses('object');
    const byNamespace = pinned || template.uses('namespace') || template.uses('object');
    if ((byCluster && served.cluster !== source.cluster) || (byNamespace && served.namespace !== source.namespace)) {
      // The tenant hears only that it is taken; whose it is goes to the provider's log.
      if (this.shouldWarn(name, source)) this.deps.logger.warn({ namespace: name, serves: pinKey(served), source: pinKey(source) }, 'a copy namespace serves another source: nothing of this one is copied there');
      return `the copy namespace ${name} serves another source: it is never shared (check ${naming.where})`;
    }
    return undefined;
  }
}

function servesAnnotations(source: ServedSource): Record<string, string> {
  return { [SERVES_CLUSTER_ANNOTATION]: source.cluster, [SERVES_NAMESPACE_ANNOTATION]: source.namespace };
}

function servedBy(ns: KubeObject): ServedSource | undefined {
  const a = ns.metadata.annotations ?? {};
  const cluster = a[SERVES_CLUSTER_ANNOTATION];
  const namespace = a[SERVES_NAMESPACE_ANNOTATION];
  return cluster !== undefined && namespace !== undefined ? { cluster, namespace } : undefined;
}

function legacyName(source: ServedSource): string {
  return legacy.render({ cluster: source.cluster, namespace: source.namespace });
}

function memoKey(naming: NamespaceNaming, source: ServedSource): string {
  return compositeKey(naming.template.source, pinKey(source));
}

function pinKey(source: ServedSource): string {
  return `${source.cluster}/${source.namespace}`;
}
