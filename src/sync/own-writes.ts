/**
 * The resourceVersions of objects relsync itself just wrote, so that the
 * watch event each write causes is not routed back into a reconcile that
 * would find nothing to do (it halves the reconciles per related change).
 * An entry is dropped when its event is seen; the map is capped (oldest
 * first), and a miss only costs one no-op reconcile, never a lost change.
 *
 * The event of a write often arrives before the write's answer (the API
 * server sends both at once; under load relsync reads the watch first): at
 * the initial sync of 10,000 primaries, half the events of their finalizers
 * and copies came early and each cost a whole reconcile more. So a write is
 * announced while it runs (during()), and an event of an object that relsync
 * is writing waits for that write's answer — at most a moment — before it is
 * judged.
 */
import { identityKey, type ObjectIdentity } from '../core/identity.js';

/** How long an event waits for the answer of a write of its object still on its way. */
const WAIT_FOR_ANSWER_MS = 2_000;

interface InFlight {
  count: number;
  readonly done: Promise<void>;
  readonly resolve: () => void;
}

export class OwnWrites {
  private readonly written = new Map<string, string>();
  /** Objects relsync is writing now, with how many writes of each run. */
  private readonly inFlight = new Map<string, InFlight>();

  constructor(
    private readonly max = 10_000,
    private readonly waitMs = WAIT_FOR_ANSWER_MS,
  ) {}

  record(id: ObjectIdentity, resourceVersion: string | undefined): void {
    if (!resourceVersion) return;
    const key = identityKey(id);
    this.written.delete(key);
    this.written.set(key, resourceVersion);
    while (this.written.size > this.max) this.written.delete(this.written.keys().next().value!);
  }

  /** Runs `write` (which records what it wrote) as a write of `id` on its way. */
  async during<T>(id: ObjectIdentity, write: () => Promise<T>): Promise<T> {
    const key = identityKey(id);
    let entry = this.inFlight.get(key);
    if (!entry) {
      let resolve!: () => void;
      const done = new Promise<void>((r) => (resolve = r));
      entry = { count: 0, done, resolve };
      this.inFlight.set(key, entry);
    }
    entry.count++;
    try {
      return await write();
    } finally {
      if (--entry.count === 0) {
        this.inFlight.delete(key);
        entry.resolve();
      }
    }
  }

  /**
   * True (once) when this exact version of the object is one relsync wrote. While a write of the
   * object is on its way, waits for its answer first (at most a moment: then it says false, and
   * the event costs a no-op reconcile, as before).
   */
  async consume(id: ObjectIdentity, resourceVersion: string | undefined): Promise<boolean> {
    if (!resourceVersion) return false;
    const key = identityKey(id);
    if (this.take(key, resourceVersion)) return true;
    const running = this.inFlight.get(key);
    if (!running) return false;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([running.done, new Promise<void>((r) => (timer = setTimeout(r, this.waitMs)))]);
    clearTimeout(timer);
    return this.take(key, resourceVersion);
  }

  private take(key: string, resourceVersion: string): boolean {
    if (this.written.get(key) !== resourceVersion) return false;
    this.written.delete(key);
    return true;
  }

  get size(): number {
    return this.written.size;
  }
}
