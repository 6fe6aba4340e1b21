import type { LogChunk } from '../store/store.js';

/**
 * Bytes [start, end) of the log given as the chunks that start in it (and the one that holds
 * `start`), each chunk that begins in the range preceded by a mark: U+0000, its entry's time (RFC 3339, UTC,
 * milliseconds), a space, its step percent-encoded (empty for none), U+0000. Stored log text
 * never holds U+0000 (docs/API.md: it is kept as U+FFFD), so a mark cannot be mistaken for
 * text. A line's time is that of the mark before its first character. This costs a few dozen
 * bytes an entry, where a prefix on every line (`prefixedLogBytes`) costs that much a line.
 */
export async function* markedLogBytes(
  chunks: AsyncIterable<LogChunk>,
  start: number,
  end: number,
  { markFirst = false }: { markFirst?: boolean } = {},
): AsyncGenerator<Buffer> {
  for await (const chunk of chunks) {
    if (chunk.offset >= end) return;
    const bytes = Buffer.from(chunk.text, 'utf8');
    const from = Math.max(0, start - chunk.offset);
    const to = Math.min(bytes.length, end - chunk.offset);
    if (from >= to) continue;
    const part = from === 0 && to === bytes.length ? bytes : bytes.subarray(from, to);
    // The part of an entry that began before the range has no mark: a mark there could fall
    // inside a character, and whoever reads the range after the one before has that mark.
    // Unless the caller knows the range begins with a character (`markFirst`: a line's start).
    if (from > 0 && !markFirst) {
      yield part;
      continue;
    }
    const time = new Date(chunk.time).toISOString();
    const head = Buffer.from(`\u0000${time} ${encodeURIComponent(chunk.step ?? '')}\u0000`, 'utf8');
    yield Buffer.concat([head, part]);
  }
}
