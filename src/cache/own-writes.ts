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
 * and copies came early and each cost a whole reconcile more. So a write of a
 * primary or of a primary's copy is announced while it runs (during()), and an
 * event of an object that relsync is writing waits for that write's answer —
 * a quarter of a second at most — before it is judged. (Related copies need
 * no wait: their own events are known by their content hash, event-router.ts.)
 */
import { identityKey, type ObjectIdentity } from '../core/identity.js';
import { systemClock, type Clock, type Timer } from '../util/clock.js';

/**
 * How long an event waits for the answer of a write of its object still on its way: the API server
 * sends both at once, so the answer is a few event-loop turns away; each watch handles its events
 * one by one, so a wait holds that watch's other events back (a tenant that edits an object while
 * relsync writes it delays the type's events by this much at most per edit).
 */
const WAIT_FOR_ANSWER_MS = 250;
/** Versions remembered per object: a write of two requests (kcp's POST, then a patch) makes two. */
const VERSIONS_PER_OBJECT = 3;

export interface OwnWritesOptions {
  /** Objects whose versions are remembered at most; default 10,000. */
  readonly max?: number;
  /** How long an event waits for a write's answer at most; default 250 ms. */
  readonly waitMs?: number;
  /** What that wait is timed on; default systemClock. */
  readonly clock?: Clock;
}

interface InFlight {
  count: number;
  readonly done: Promise<void>;
  readonly resolve: () => void;
}

export class OwnWrites {
  private readonly written = new Map<string, string[]>();
  /** Objects relsync is writing now, with how many writes of each run. */
  private readonly inFlight = new Map<string, InFlight>();

  private readonly max: number;
  private readonly waitMs: number;
  private readonly clock: Clock;

  constructor(options: OwnWritesOptions = {}) {
    this.max = options.max ?? 10_000;
    this.waitMs = options.waitMs ?? WAIT_FOR_ANSWER_MS;
    this.clock = options.clock ?? systemClock;
  }

  /**
   * A version relsync's write produced. `precondition`: the version the write was sent against; a
   * write that changed nothing answers with it, and that version is someone else's (its event must
   * reach every primary it concerns), so it is not recorded.
   */
  record(id: ObjectIdentity, resourceVersion: string | undefined, precondition?: string): void {
    if (!resourceVersion || resourceVersion === precondition) return;
    const key = identityKey(id);
    const versions = [...(this.written.get(key) ?? []), resourceVersion].slice(-VERSIONS_PER_OBJECT);
    this.written.delete(key);
    this.written.set(key, versions);
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
    let timer: Timer | undefined;
    await Promise.race([running.done, new Promise<void>((r) => (timer = this.clock.after(this.waitMs, r)))]);
    timer?.cancel();
    return this.take(key, resourceVersion);
  }

  private take(key: string, resourceVersion: string): boolean {
    const versions = this.written.get(key);
    if (!versions?.includes(resourceVersion)) return false;
    const rest = versions.filter((v) => v !== resourceVersion);
    if (rest.length > 0) this.written.set(key, rest);
    else this.written.delete(key);
    return true;
  }

  get size(): number {
    return this.written.size;
  }
}
