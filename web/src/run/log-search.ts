import Anser from 'anser';
import type { LogBuffer, LogLines } from './log-buffer.js';

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
  lines: LogLines,
  query: string,
  limit = MATCH_LIMIT,
  from = 0,
): SearchResult {
  const matches: Match[] = [];
  if (query === '') return { matches, truncated: false };
  const pattern = new RegExp(escapeRegExp(query), 'gi');
  for (let line = from; line < lines.length; line += 1) {
    const text = plainText(lines.line(line));
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
    const { length, dropped, clears } = buffer;
    const last = this.last;
    let result: SearchResult;
    if (
      last &&
      last.query === query &&
      last.clears === clears &&
      last.dropped === dropped &&
      !last.result.truncated &&
      last.scanned > 0 &&
      last.scanned <= length
    ) {
      const from = last.scanned - 1;
      const kept = last.result.matches.filter((match) => match.line < from);
      const more = findMatches(buffer, query, MATCH_LIMIT - kept.length, from);
      result = { matches: kept.concat(more.matches), truncated: more.truncated };
    } else {
      result = findMatches(buffer, query);
    }
    this.last = { query, clears, dropped, scanned: length, result };
    return result;
  }
}
