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
    const parts: Buffer[] = [];
    let at = from;
    while (at < to) {
      if (atLineStart) parts.push(head);
      const newline = bytes.indexOf(NEWLINE, at);
      const lineEnd = newline === -1 || newline >= to ? to : newline + 1;
      parts.push(bytes.subarray(at, lineEnd));
      atLineStart = lineEnd === newline + 1 && newline !== -1;
      at = lineEnd;
    }
    yield parts.length === 1 ? parts[0]! : Buffer.concat(parts);
  }
}
