import Anser from 'anser';

/** How much log text a view keeps (UTF-16 code units, about bytes for most logs). */
export const DEFAULT_MAX_CHARS = 256 * 1024 * 1024;

/**
 * A run's log as lines, appended in place: a 100 MB log arrives as thousands of entries, and
 * copying the array for each one would be quadratic. Views re-render on a version counter.
 * Past `maxChars` the oldest lines are let go (a tab has only so much memory); `dropped` counts
 * them, so line numbers stay the log's own.
 */
export class LogBuffer {
  readonly lines: string[] = [];
  /** Lines let go from the front: `lines[i]` is line `dropped + i + 1` of the log. */
  dropped = 0;
  /** The last line has no newline yet: the next text continues it. */
  private open = false;
  /** Text held, newlines included. */
  private chars = 0;

  constructor(private readonly maxChars = DEFAULT_MAX_CHARS) {}

  append(text: string): void {
    if (text === '') return;
    const pieces = text.split('\n');
    const first = pieces.shift() ?? '';
    if (this.open) this.lines[this.lines.length - 1] += first;
    else this.lines.push(first);
    for (const piece of pieces) this.lines.push(piece);
    // Text ending in '\n' leaves an empty piece: no line yet, until text arrives for it.
    this.open = !text.endsWith('\n');
    if (!this.open) this.lines.pop();
    this.chars += text.length;
    if (this.chars > this.maxChars) this.trim();
  }

  clear(): void {
    this.lines.length = 0;
    this.open = false;
    this.chars = 0;
    this.dropped = 0;
  }

  /** Lets go of the oldest lines, a tenth more than needed: a splice at the front is O(n). */
  private trim(): void {
    const target = this.maxChars * 0.9;
    let count = 0;
    let freed = 0;
    while (this.chars - freed > target && count < this.lines.length - 1) {
      freed += this.lines[count]!.length + 1;
      count += 1;
    }
    this.lines.splice(0, count);
    this.chars -= freed;
    this.dropped += count;
  }
}

/** What a line reads as on screen: its text without ANSI escape codes. */
export function plainText(line: string): string {
  return line.includes('\u001b') ? Anser.ansiToText(line) : line;
}

/** One occurrence of the search text: a line and a range of its plain text. */
export interface Match {
  line: number;
  start: number;
  end: number;
}

export interface SearchResult {
  matches: Match[];
  /** More occurrences exist than `limit`. */
  truncated: boolean;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** Every occurrence of `query` in the lines' plain text, ignoring case, up to `limit`. */
export function findMatches(lines: readonly string[], query: string, limit = 10_000): SearchResult {
  const matches: Match[] = [];
  if (query === '') return { matches, truncated: false };
  const pattern = new RegExp(escapeRegExp(query), 'gi');
  for (let line = 0; line < lines.length; line += 1) {
    const text = plainText(lines[line]!);
    pattern.lastIndex = 0;
    for (let found = pattern.exec(text); found; found = pattern.exec(text)) {
      if (matches.length === limit) return { matches, truncated: true };
      matches.push({ line, start: found.index, end: found.index + found[0].length });
    }
  }
  return { matches, truncated: false };
}
