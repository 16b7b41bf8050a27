/**
 * Batches watch checkpoints and the persistent work queue into one store
 * transaction every `intervalMs` (default 1 s) instead of a write per event.
 *
 * Contract: a resourceVersion is noted after the event that carried it was
 * routed, and routing notes every primary it enqueued first. A flush takes
 * both at once, so a stored checkpoint never gets ahead of the work its
 * events created; that work is stored as pending until its reconcile ends.
 */
import type { Logger } from 'pino';
import type { CheckpointStore, WatchKey } from '../store/checkpoint-store.js';
import { identityKey, type ObjectIdentity } from '../core/identity.js';
import { compositeKey } from '../core/composite-key.js';
import type { Clock } from '../util/clock.js';

export class Checkpointer {
  private versions = new Map<string, { key: WatchKey; resourceVersion: string }>();
  private work = new Map<string, { id: ObjectIdentity; op: 'queued' | 'done' }>();
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    private readonly store: CheckpointStore,
    private readonly logger: Logger,
    /** What the flushes are spaced on. */
    private readonly clock: Clock,
    private readonly intervalMs = 1000,
  ) {}

  noteVersion(key: WatchKey, resourceVersion: string): void {
    this.versions.set(compositeKey(key.cluster, key.group, key.resource, key.labelSelector), { key, resourceVersion });
  }

  noteQueued(id: ObjectIdentity): void {
    this.work.set(identityKey(id), { id, op: 'queued' });
  }

  noteDone(id: ObjectIdentity): void {
    this.work.set(identityKey(id), { id, op: 'done' });
  }

  /** Writes what was noted so far; flushes never overlap. */
  flush(): Promise<void> {
    this.flushing = this.flushing.then(async () => {
      const versions = [...this.versions.values()];
      const work = [...this.work.values()];
      this.versions = new Map();
      this.work = new Map();
      try {
        await this.store.write({
          versions,
          queued: work.filter((w) => w.op === 'queued').map((w) => w.id),
          done: work.filter((w) => w.op === 'done').map((w) => w.id),
        });
      } catch (err) {
        // Keep what could not be written for the next flush, unless newer notes replaced it.
        for (const v of versions) {
          const k = compositeKey(v.key.cluster, v.key.group, v.key.resource, v.key.labelSelector);
          if (!this.versions.has(k)) this.versions.set(k, v);
        }
        for (const w of work) if (!this.work.has(identityKey(w.id))) this.work.set(identityKey(w.id), w);
        this.logger.error({ err: (err as Error).message }, 'could not write checkpoints; will retry');
      }
    });
    return this.flushing;
  }

  /** Flushes periodically until `signal` aborts, then once more. */
  async start(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      await this.clock.sleep(this.intervalMs, signal);
      await this.flush();
    }
  }
}
