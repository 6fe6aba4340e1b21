import type { LogChunk } from '../store/store.js';

/** What `log.txt` puts before each line (docs/API.md, "Reading without streaming"). */
export interface LinePrefix {
  /** The time its entry was stored, RFC 3339 in UTC with milliseconds, and a space. */
  timestamps: boolean;
  /** Its entry's step, percent-encoded (so it holds no space; empty for none), and a space. */
  steps: boolean;
}

const NEWLINE = 0x0a;

function prefixOf(chunk: LogChunk, prefix: LinePrefix): string {
  let text = '';
  if (prefix.timestamps) text += `${new Date(chunk.time).toISOString()} `;
  if (prefix.steps) text += `${encodeURIComponent(chunk.step ?? '')} `;
  return text;
}

/**
 * Bytes [start, end) of the log given as its chunks (from the one holding byte `start - 1`, if
 * there is one, so that it is known whether `start` begins a line), with each line that begins
 * in the range prefixed by its first entry's time and/or step, as GitHub Actions' raw logs put
 * the time first. A line begins at byte 0 and after each newline; a line that goes on over
 * several entries is given the time of the entry it began in. A range that begins inside a line
 * has no prefix before that line's rest, so pages of a prefixed log join as the log does.
 */
export async function* prefixedLogBytes(
  chunks: AsyncIterable<LogChunk>,
  start: number,
  end: number,
  prefix: LinePrefix,
): AsyncGenerator<Buffer> {
  let atLineStart = true;
  for await (const chunk of chunks) {
    if (chunk.offset >= end) return;
    const bytes = Buffer.from(chunk.text, 'utf8');
    const from = Math.max(0, start - chunk.offset);
    const to = Math.min(bytes.length, end - chunk.offset);
    if (from >= bytes.length) {
      // Wholly before the range: only whether it ends a line matters.
      atLineStart = bytes[bytes.length - 1] === NEWLINE;
      continue;
    }
    if (from > 0) atLineStart = bytes[from - 1] === NEWLINE;
    const head = Buffer.from(prefixOf(chunk, prefix), 'utf8');
    // Lines that begin in [from, to): at `from` if a line begins there, and after each newline
    // but one that ends the range (the line after it begins in the next chunk, with its time).
    let starts = atLineStart ? 1 : 0;
    for (let at = bytes.indexOf(NEWLINE, from); at !== -1 && at < to - 1;) {
      starts += 1;
      at = bytes.indexOf(NEWLINE, at + 1);
    }
    // One buffer per chunk, filled byte by byte in one loop: a call per line (Buffer.copy,
    // subarray) costs more than the bytes of a short line do.
    const out = Buffer.allocUnsafe(to - from + starts * head.length);
    const headLength = head.length;
    let written = 0;
    if (atLineStart) written += head.copy(out, 0);
    const last = to - 1;
    for (let at = from; at < to; at += 1) {
      const byte = bytes[at]!;
      out[written++] = byte;
      if (byte === NEWLINE && at < last) {
        for (let h = 0; h < headLength; h += 1) out[written++] = head[h]!;
      }
    }
    atLineStart = bytes[to - 1] === NEWLINE;
    yield out;
  }
}
