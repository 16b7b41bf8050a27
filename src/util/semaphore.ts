/** At most `slots` holders at once; the others wait in order. */
export class Semaphore {
  private readonly waiting: Array<() => void> = [];
  private free: number;

  constructor(slots: number) {
    this.free = slots;
  }

  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.free > 0) this.free--;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    try {
      return await fn();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.free++;
    }
  }
}
