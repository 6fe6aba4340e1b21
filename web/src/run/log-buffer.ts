import Anser from 'anser';

/**
 * A run's log as lines, appended in place: a 100 MB log arrives as thousands of entries, and
 * copying the array for each one would be quadratic. Views re-render on a version counter.
 */
export class LogBuffer {
  readonly lines: string[] = [];
  /** The last line has no newline yet: the next text continues it. */
  private open = false;

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
  }

  clear(): void {
    this.lines.length = 0;
    this.open = false;
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
