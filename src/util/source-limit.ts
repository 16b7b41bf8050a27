/**
 * What one caller (a source address) may start: at most `inFlight` at a time,
 * and a bucket of `burst` starts refilled at `perSecond`, so that a caller
 * that asks without pause gets `perSecond` starts a second, whatever the
 * others do. Sources are remembered up to `maxSources`, the least recently
 * seen forgotten first: a forgotten one starts again with a full bucket, so a
 * caller with more addresses than that gets more than its share.
 */
import { systemClock, type Clock } from './clock.js';

export interface SourceLimitOptions {
  readonly inFlight: number;
  readonly burst: number;
  readonly perSecond: number;
  readonly maxSources: number;
  /** What the bucket refills on; default systemClock. */
  readonly clock?: Clock;
}

interface SourceState {
  running: number;
  tokens: number;
  at: number;
}

export class SourceLimit {
  private readonly sources = new Map<string, SourceState>();
  private readonly clock: Clock;

  constructor(private readonly options: SourceLimitOptions) {
    this.clock = options.clock ?? systemClock;
  }

  /** Takes a start for `source`: a release function, or undefined when it must wait (nothing taken). */
  tryStart(source: string): (() => void) | undefined {
    const now = this.clock.now();
    const { inFlight, burst, perSecond, maxSources } = this.options;
    let state = this.sources.get(source);
    if (state) {
      state.tokens = Math.min(burst, state.tokens + ((now - state.at) / 1000) * perSecond);
      state.at = now;
      // Seen again: it moves to the end of the insertion order (the most recently seen).
      this.sources.delete(source);
    } else {
      state = { running: 0, tokens: burst, at: now };
    }
    this.sources.set(source, state);
    // A source forgotten while it has a start running loses that count (its release then changes
    // nothing here): it takes more than `maxSources` other sources within one start.
    while (this.sources.size > maxSources) this.sources.delete(this.sources.keys().next().value!);
    if (state.running >= inFlight || state.tokens < 1) return undefined;
    state.running++;
    state.tokens -= 1;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      state.running--;
    };
  }
}
