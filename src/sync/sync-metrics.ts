/** The slice of the metrics registry that the sync layer writes to. */
export interface Counter<L extends string> {
  inc(labels: Partial<Record<L, string>>, value?: number): void;
}

export interface SyncMetrics {
  readonly copiesWritten: Counter<'kind' | 'action'>;
  readonly copiesRemoved: Counter<'kind'>;
  /** Related copies let go with their marks removed (cleanupPolicy Orphan). */
  readonly copiesReleased: Counter<'kind'>;
  readonly conflicts: Counter<'kind'>;
  /** Service-side objects a service-origin rule found that are not provably the copy's (rules/provenance.ts). */
  readonly unprovenSources: Counter<'rule'>;
  /** Changes synced as one relation (sync/edge-sync.ts): written, unchanged (same content hash), refused for good (parked), or handed to the full reconcile. */
  readonly edgeSyncs: Counter<'result'>;
  /** Copy writes held back by their tenant's rewrite pace (rewrite-pace.ts); each is retried later. */
  readonly writesPaced?: Counter<never>;
}
