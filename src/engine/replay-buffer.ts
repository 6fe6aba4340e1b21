import type { Entry } from '../model/entry.js';

/**
 * The newest entries of a stream, up to a byte budget, so a viewer joining a little late is
 * served from memory instead of the store. Entries are contiguous by seq: it always holds
 * (firstSeq … lastSeq) with no hole.
 */
export class ReplayBuffer {
  /** Slots before `head` are evicted (undefined) until the next compaction. */
  private entries: Array<Entry | undefined> = [];
  private weights: number[] = [];
  private head = 0;
  private bytes = 0;

  constructor(private readonly maxBytes: number) {}

  push(entry: Entry, weight: number): void {
    if (this.maxBytes === 0) return;
    this.entries.push(entry);
    this.weights.push(weight);
    this.bytes += weight;
    while (this.bytes > this.maxBytes && this.size > 1) {
      this.bytes -= this.weights[this.head]!;
      // Drop the reference at once: an evicted entry (and the frames cached for it) must be
      // collectable even while few entries have passed through, e.g. a handful of 64 KiB ones.
      this.entries[this.head] = undefined;
      this.head += 1;
    }
    // Compact now and then so the arrays do not grow without bound.
    if (this.head >= 64 && this.head * 2 >= this.entries.length) {
      this.entries = this.entries.slice(this.head);
      this.weights = this.weights.slice(this.head);
      this.head = 0;
    }
  }

  get size(): number {
    return this.entries.length - this.head;
  }

  /** True if every entry after `cursor` (up to the newest) is held here. */
  covers(cursor: number): boolean {
    const first = this.entries[this.head];
    return first !== undefined && cursor >= first.seq - 1;
  }

  /** Entries with seq > cursor; call only when `covers(cursor)`. */
  after(cursor: number): Entry[] {
    const first = this.entries[this.head];
    if (!first) return [];
    const start = this.head + Math.max(0, cursor - first.seq + 1);
    return this.entries.slice(start) as Entry[];
  }

  clear(): void {
    this.entries = [];
    this.weights = [];
    this.head = 0;
    this.bytes = 0;
  }
}
