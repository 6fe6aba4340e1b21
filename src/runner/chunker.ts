/**
 * Freight's chunking of process output, in bytes: a chunk is cut when the buffer holds
 * `chunkBytes` (after the last newline within them, else hard at a character boundary), or when
 * output has waited `flushMs` (after the last newline so far; if there is none, after
 * `maxWaitMs`, everything). So under load chunks are full, while quiet output still reaches
 * viewers quickly, and every chunk but the last ends at a line end unless a line is very long.
 */
export class OutputChunker {
  private buffer: Buffer = Buffer.alloc(0);
  /** When the oldest byte still in the buffer arrived. */
  private since = 0;

  constructor(
    private readonly chunkBytes: number,
    private readonly flushMs: number,
    private readonly maxWaitMs: number,
  ) {}

  get pendingBytes(): number {
    return this.buffer.length;
  }

  /** Takes output; returns the full chunks it completes. */
  push(data: Buffer, now: number): string[] {
    if (this.buffer.length === 0) this.since = now;
    this.buffer = this.buffer.length === 0 ? data : Buffer.concat([this.buffer, data]);
    const chunks: string[] = [];
    while (this.buffer.length >= this.chunkBytes) {
      const newline = this.buffer.lastIndexOf(0x0a, this.chunkBytes - 1);
      chunks.push(
        this.take(newline >= 0 ? newline + 1 : charBoundary(this.buffer, this.chunkBytes), now),
      );
    }
    return chunks;
  }

  /** The chunk due by time, if any. */
  due(now: number): string | undefined {
    if (this.buffer.length === 0 || now - this.since < this.flushMs) return undefined;
    const newline = this.buffer.lastIndexOf(0x0a);
    if (newline >= 0) return this.take(newline + 1, now);
    if (now - this.since >= this.maxWaitMs) return this.take(this.buffer.length, now);
    return undefined;
  }

  /** Everything left, at the end of the process. */
  rest(): string | undefined {
    if (this.buffer.length === 0) return undefined;
    // A trailing partial character (a process killed mid-write) is dropped rather than sent
    // as a replacement character.
    const text = this.buffer.toString('utf8', 0, charBoundary(this.buffer, this.buffer.length));
    this.buffer = Buffer.alloc(0);
    return text || undefined;
  }

  private take(length: number, now: number): string {
    const text = this.buffer.toString('utf8', 0, length);
    this.buffer = this.buffer.subarray(length);
    this.since = now;
    return text;
  }
}

/** The largest cut ≤ `limit` that does not split a UTF-8 character (at least one character). */
function charBoundary(buffer: Buffer, limit: number): number {
  if (limit >= buffer.length) {
    // Cut before an incomplete character at the very end.
    let start = buffer.length - 1;
    while (start > 0 && (buffer[start]! & 0xc0) === 0x80) start -= 1;
    const lead = buffer[start] ?? 0;
    const needed = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
    return buffer.length - start >= needed ? buffer.length : start;
  }
  let end = limit;
  while (end > 0 && (buffer[end]! & 0xc0) === 0x80) end -= 1;
  return end > 0 ? end : limit;
}
