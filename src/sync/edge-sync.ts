/**
 * A change that concerns one relation, synced as that relation alone: a
 * referenced (or template-named) source changed, so its one copy is written,
 * or nothing is when the source's content hash equals the one stored. A full
 * reconcile of the primary re-reads the primary, its copy, every related
 * object and lists the selector rules' candidates; this reads the primary,
 * its copy and the source (usually from the watch-fed cache), and writes the
 * destination once — at the version the store says relsync left it, so a
 * destination the cache does not hold is not read first (a copy changed
 * since answers 409, and the full reconcile reads live).
 *
 * It acts only where the store and the objects show that this relation is
 * all the change concerns: the store says the primary and the relation are
 * synced, the primary is the stored incarnation with relsync's finalizer, its
 * copy carries relsync's marks, the primary still resolves to this very pair,
 * and the source still exists and (service side) is provably the copy's. The
 * relation itself is decided as the full reconcile decides it
 * (relation-sync.ts); a write refused for good is parked the same way.
 * Anything else — a conflict, a source to wait for, a failed write — answers
 * 'full' (or fails, and the retry is full): the full reconcile decides and
 * records it (warnings, conflicts, releases, deletions). It runs under the
 * primary's queue key, so never beside that primary's full reconcile.
 */
import { identityKey, sameIdentity, type ObjectIdentity } from '../core/identity.js';
import { isSelected, platformNamespaceType } from './primary-selection.js';
import { sameType } from '../core/resource-type.js';
import type { RelationStore } from '../store/relation-store.js';
import type { ClusterAccess } from '../cache/cluster-access.js';
import { isServiceOriginCopy } from './copy-of.js';
import type { CopyTally, CopyWriter } from './copy-writer.js';
import type { CopyRefusals } from './copy-refusals.js';
import type { WorkspacePaths } from './workspace-paths.js';
import type { ObjectReads } from '../cache/object-reads.js';
import type { RelatedFinder } from './related-finder.js';
import type { RelationSync } from './relation-sync.js';
import type { ResolvedResource } from './resolved-config.js';
import type { SyncMetrics } from './sync-metrics.js';
import type { SyncVerdicts } from './sync-verdict.js';
import { SOURCE_UID_ANNOTATION } from '../core/relsync-keys.js';

/** One relation of a primary whose source changed (the event router names it). */
export interface EdgeHint {
  readonly ruleId: string;
  readonly source: ObjectIdentity;
  readonly destination: ObjectIdentity;
}

export interface EdgeSyncDeps {
  readonly agentName: string;
  readonly finalizer: string;
  readonly clusters: ClusterAccess;
  readonly store: RelationStore;
  readonly finder: RelatedFinder;
  readonly relations: RelationSync;
  readonly writer: Pick<CopyWriter, 'isMarkedCopyOf'>;
  readonly metrics: SyncMetrics;
  readonly paths: Pick<WorkspacePaths, 'cached'>;
  readonly verdicts: Pick<SyncVerdicts, 'show'>;
  /** Objects nested too deep to read are the full reconcile's to refuse. */
  readonly refusals: Pick<CopyRefusals, 'depth'>;
}

/** One run of a primary's changed relations: where it reads, which edges, what it counts. */
export interface EdgeRun {
  readonly reads: ObjectReads;
  readonly resource: ResolvedResource;
  readonly id: ObjectIdentity;
  readonly edges: readonly EdgeHint[];
  readonly tally?: CopyTally;
}

export class EdgeSync {
  constructor(private readonly deps: EdgeSyncDeps) {}

  /** 'done' when every edge was synced (or needed nothing); 'full' when the primary needs its full reconcile. */
  async sync(run: EdgeRun): Promise<'done' | 'full'> {
    const result = await this.tryEdges(run);
    if (result === 'full') this.deps.metrics.edgeSyncs.inc({ result: 'full' });
    return result;
  }

  private async tryEdges({ reads, resource, id, edges, tally }: EdgeRun): Promise<'done' | 'full'> {
    const { clusters, store } = this.deps;
    if (!clusters.has(id.cluster) || clusters.isUnbound(id.cluster)) return 'full';
    const record = await store.primary(id);
    if (!record || record.state !== 'synced') return 'full';
    let primary = await reads.get(id.cluster, resource.primaryType, id.namespace, id.name);
    if (
      !primary ||
      primary.metadata.deletionTimestamp ||
      primary.metadata.uid !== record.uid ||
      !primary.metadata.finalizers?.includes(this.deps.finalizer) ||
      isServiceOriginCopy(this.deps.agentName, clusters.service.name, primary) ||
      this.deps.refusals.depth(primary) !== undefined ||
      !(await isSelected(resource, primary, (ns) => reads.get(id.cluster, platformNamespaceType, '', ns)))
    ) {
      return 'full';
    }
    if (!sameType(record.copy, resource.copyType)) return 'full';
    const copy = await reads.get(record.copy.cluster, resource.copyType, record.copy.namespace, record.copy.name);
    const copyUid = copy?.metadata.annotations?.[SOURCE_UID_ANNOTATION];
    if (!copy || copy.metadata.deletionTimestamp || !this.deps.writer.isMarkedCopyOf(copy, id) || (copyUid !== undefined && copyUid !== record.uid)) return 'full';

    const stored = await store.relationsOf(id);
    // A workspace path not read yet is the full reconcile's to read (and to report).
    const clusterPath = resource.workspacePath ? this.deps.paths.cached(id.cluster) : undefined;
    if (resource.workspacePath && clusterPath === undefined) return 'full';
    const context = { cluster: id.cluster, ...(clusterPath !== undefined ? { clusterPath } : {}), namespace: id.namespace, name: id.name, object: primary };
    for (const edge of edges) {
      const relation = stored.find((r) => r.ruleId === edge.ruleId && sameIdentity(r.source, edge.source) && sameIdentity(r.destination, edge.destination));
      const rule = resource.rules.find((r) => r.id === edge.ruleId);
      if (!relation || relation.state !== 'synced' || !rule || (rule.finder.kind !== 'reference' && rule.finder.kind !== 'template')) return 'full';
      // The primary must still name this very pair (its change, on its way, would make the next run full anyway).
      const plan = this.deps.finder.plan({ rule, primary, platformCluster: id.cluster, copy, serviceCluster: clusters.service.name, context });
      const pair = plan.named?.pairs.find((p) => identityKey(p.source) === identityKey(edge.source) && identityKey(p.destination) === identityKey(edge.destination));
      if (!pair || (plan.named?.problems.length ?? 0) > 0) return 'full';
      const source = await reads.get(pair.source.cluster, rule.sourceType, pair.source.namespace, pair.source.name);
      // Gone, or (service side) no longer provably the copy's source: the full reconcile decides, live.
      // Nested too deep to read, or labels over the size limit alone (copy-refusals.ts): the full
      // reconcile refuses it and says so, without the content written out here first.
      if (!source || this.deps.finder.isOwnCopyAsServiceSource(rule, source) || !this.deps.finder.isProven(plan.input, source) || this.deps.refusals.depth(source) !== undefined) return 'full';
      const start = this.deps.relations.contentStart(source);
      if (start.refused !== undefined) return 'full';
      // The same content as stored: the copy holds it already (drift of the copy is an event of its own, reconciled in full).
      if (this.deps.relations.desiredOf(rule, source, start.content).hash === relation.contentHash) {
        this.deps.metrics.edgeSyncs.inc({ result: 'unchanged' });
        continue;
      }
      // The copy is updated at the version the store says this synced relation left it (no read), unless the watches hold it.
      const outcome = await this.deps.relations.sync({ reads, tally, input: plan.input, pair, owner: id, copied: true, writtenAt: relation.versions?.destination || undefined, syncedHash: relation.contentHash });
      const at = { primary: id, ruleId: edge.ruleId, source: edge.source, destination: edge.destination };
      if (outcome.state === 'error' && !outcome.retrySoon) {
        // Refused for good (invalid, denied, too big): parked as the full reconcile parks it — said
        // on the primary (relation-sync.ts did), recorded, not written again until something changes.
        if (!(await store.saveRelationOutcome(at, outcome))) return 'full';
        await store.setPrimaryState(id, 'error', outcome.message);
        primary = await this.deps.verdicts.show(resource.primaryType, id, primary, { synced: false, reason: 'RelatedSyncFailed', message: outcome.message ?? 'a related object could not be synced' });
        this.deps.metrics.edgeSyncs.inc({ result: 'refused' });
        continue;
      }
      if (outcome.state !== 'synced' || !(await store.saveRelationOutcome(at, outcome))) return 'full';
      this.deps.metrics.edgeSyncs.inc({ result: 'written' });
    }
    return 'done';
  }
}
