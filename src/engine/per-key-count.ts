/** Open streams per key (a client address, a token): how many each holds, and a cap on that. */
export class PerKeyCount {
  private readonly counts = new Map<string, number>();

  constructor(readonly max: number) {}

  /** Whether `key` already holds as many as it may (no key: never). */
  full(key: string | undefined): boolean {
    return key !== undefined && (this.counts.get(key) ?? 0) >= this.max;
  }

  add(key: string | undefined): void {
    if (key !== undefined) this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
  }

  release(key: string | undefined): void {
    if (key === undefined) return;
    const count = (this.counts.get(key) ?? 1) - 1;
    if (count > 0) this.counts.set(key, count);
    else this.counts.delete(key);
  }
}
