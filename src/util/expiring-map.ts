/**
 * A map whose entries expire after a time and whose size is capped (the
 * oldest entry goes first): what relsync remembers for a while to avoid
 * repeating work or messages, without growing with the objects it sees.
 */
import type { Clock } from './clock.js';

export class ExpiringMap<K, V> {
  private readonly entries = new Map<K, { value: V; until: number }>();

  /** `clock`: its owner's (no default: a map read on another time than its owner's would expire early or late). */
  constructor(
    private readonly maxSize: number,
    private readonly clock: Clock,
  ) {}

  /** The value, while it has not expired; `now`: a time its caller read once for several decisions. */
  get(key: K, now = this.clock.now()): V | undefined {
    const entry = this.entries.get(key);
    return entry && entry.until > now ? entry.value : undefined;
  }

  set(key: K, value: V, ttlMs: number, now = this.clock.now()): void {
    // Re-inserted, so that insertion order stays oldest first.
    this.entries.delete(key);
    this.entries.set(key, { value, until: now + ttlMs });
    while (this.entries.size > this.maxSize) this.entries.delete(this.entries.keys().next().value!);
  }

  delete(key: K): void {
    this.entries.delete(key);
  }
}
