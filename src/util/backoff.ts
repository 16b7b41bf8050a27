/** Capped exponential backoff with full jitter in the upper half: delay ∈ [d/2, d]. */
export interface BackoffOptions {
  /** First delay; default 500 ms. */
  readonly initialMs?: number;
  /** Cap; default 60 s. */
  readonly maxMs?: number;
  /** Random source in [0, 1); default Math.random (injected in tests). */
  readonly random?: () => number;
}

export class Backoff {
  private attempt = 0;
  private readonly initialMs: number;
  private readonly maxMs: number;
  private readonly random: () => number;

  constructor(options: BackoffOptions = {}) {
    this.initialMs = options.initialMs ?? 500;
    this.maxMs = options.maxMs ?? 60_000;
    this.random = options.random ?? Math.random;
  }

  static delay(attempt: number, initialMs: number, maxMs: number, random: () => number = Math.random): number {
    const ceiling = Math.min(maxMs, initialMs * 2 ** Math.min(attempt, 30));
    return Math.round(ceiling / 2 + (ceiling / 2) * random());
  }

  next(): number {
    return Backoff.delay(this.attempt++, this.initialMs, this.maxMs, this.random);
  }

  reset(): void {
    this.attempt = 0;
  }
}
