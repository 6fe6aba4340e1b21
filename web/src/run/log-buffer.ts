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
  /** How many times the log was cleared (a new log begins each time). */
  clears = 0;
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
    this.clears += 1;
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

/** The most matches a search keeps ("10000+"). */
export const MATCH_LIMIT = 10_000;

/**
 * Every occurrence of `query` in the lines' plain text, ignoring case, up to `limit`, from line
 * `from` on.
 */
export function findMatches(
  lines: readonly string[],
  query: string,
  limit = MATCH_LIMIT,
  from = 0,
): SearchResult {
  const matches: Match[] = [];
  if (query === '') return { matches, truncated: false };
  const pattern = new RegExp(escapeRegExp(query), 'gi');
  for (let line = from; line < lines.length; line += 1) {
    const text = plainText(lines[line]!);
    pattern.lastIndex = 0;
    for (let found = pattern.exec(text); found; found = pattern.exec(text)) {
      if (matches.length === limit) return { matches, truncated: true };
      matches.push({ line, start: found.index, end: found.index + found[0].length });
    }
  }
  return { matches, truncated: false };
}

/**
 * A search that follows a growing log: asked again with the same query, it scans only the lines
 * added since (and the last one it saw, which may have grown), not the whole log each time text
 * arrives. Lines let go, a cleared log or another query start it over.
 */
export class IncrementalSearch {
  private last: {
    query: string;
    clears: number;
    dropped: number;
    scanned: number;
    result: SearchResult;
  } | null = null;

  find(buffer: LogBuffer, query: string): SearchResult {
    const { lines, dropped, clears } = buffer;
    const last = this.last;
    let result: SearchResult;
    if (
      last &&
      last.query === query &&
      last.clears === clears &&
      last.dropped === dropped &&
      !last.result.truncated &&
      last.scanned > 0 &&
      last.scanned <= lines.length
    ) {
      const from = last.scanned - 1;
      const kept = last.result.matches.filter((match) => match.line < from);
      const more = findMatches(lines, query, MATCH_LIMIT - kept.length, from);
      result = { matches: kept.concat(more.matches), truncated: more.truncated };
    } else {
      result = findMatches(lines, query);
    }
    this.last = { query, clears, dropped, scanned: lines.length, result };
    return result;
  }
}
