import type { TextMatcher } from '../model/search-query.js';

/**
 * The lines of one search document that match, found by the search's own matcher (RE2: linear
 * in the text, whatever the pattern). The index only said the document holds the literals; this
 * says where the whole pattern matches, line by line.
 */
export interface LineHit {
  /** 1-based line number in the run's log (the document's first line + newlines before it). */
  line: number;
  /** Byte offset of the line's first byte in the log. */
  offset: number;
  /** The line, without its newline; cut to MAX_HIT_CHARS around the first match if longer. */
  text: string;
  /** Where in the whole line `text` starts (UTF-16 code units), when cut. */
  textStart: number;
  truncated: boolean;
  /** [start, end) of each match in `text`, in UTF-16 code units. */
  matches: Array<[number, number]>;
}

/** Longest line text a hit carries. */
export const MAX_HIT_CHARS = 1000;
/** Context kept before the first match when a line is cut. */
const CONTEXT_BEFORE = 200;

/** Where a document that starts inside a line (a piece of a very long one) began that line. */
export interface LineStart {
  /** Byte offset of the line's first byte. */
  offset: number;
  /** UTF-16 units of the line before the document's text. */
  column: number;
}

/**
 * `firstOffset` is the byte offset of the document's text; `continued`, when the document
 * begins inside its first line, says where that line began, so the hit names the line.
 */
export function lineHits(
  pattern: TextMatcher,
  text: string,
  firstLine: number,
  firstOffset: number,
  continued?: LineStart,
): LineHit[] {
  const hits: LineHit[] = [];
  // Walking forward: the line the last match was on, and where it starts.
  let line = firstLine;
  let lineStart = 0;
  let offset = firstOffset;
  let current: { start: number; end: number; matches: Array<[number, number]> } | undefined;
  const finish = () => {
    if (!current || current.matches.length === 0) {
      current = undefined;
      return;
    }
    const hit = hitOf(text, current.start, current.end, line, offset, current.matches);
    if (continued && current.start === 0) {
      hit.offset = continued.offset;
      hit.textStart += continued.column;
      hit.truncated = true;
    }
    hits.push(hit);
    current = undefined;
  };
  for (const [start, end] of pattern.matches(text)) {
    // Move to the line the match starts on.
    for (
      let nl = text.indexOf('\n', lineStart);
      nl !== -1 && nl < start;
      nl = text.indexOf('\n', lineStart)
    ) {
      finish();
      offset += Buffer.byteLength(text.slice(lineStart, nl + 1), 'utf8');
      lineStart = nl + 1;
      line += 1;
    }
    if (!current) {
      const nl = text.indexOf('\n', lineStart);
      current = { start: lineStart, end: nl === -1 ? text.length : nl, matches: [] };
    }
    // A match that starts at the line's newline (`\nnext`) holds nothing of this line.
    if (start < current.end) {
      current.matches.push([start - lineStart, Math.min(end, current.end) - lineStart]);
    }
  }
  finish();
  return hits;
}

function hitOf(
  text: string,
  start: number,
  end: number,
  line: number,
  offset: number,
  matches: Array<[number, number]>,
): LineHit {
  // A Windows line ending is not part of the line.
  const lineEnd = end > start && text.charCodeAt(end - 1) === 13 ? end - 1 : end;
  const length = lineEnd - start;
  if (length <= MAX_HIT_CHARS) {
    return {
      line,
      offset,
      text: text.slice(start, lineEnd),
      textStart: 0,
      truncated: false,
      matches: matches.map(([a, b]) => [a, Math.min(b, length)]),
    };
  }
  let from = Math.max(0, matches[0]![0] - CONTEXT_BEFORE);
  if (isLowSurrogate(text.charCodeAt(start + from))) from -= 1;
  let to = Math.min(length, from + MAX_HIT_CHARS);
  if (to < length && isLowSurrogate(text.charCodeAt(start + to))) to -= 1;
  return {
    line,
    offset,
    text: text.slice(start + from, start + to),
    textStart: from,
    truncated: true,
    matches: matches
      .filter(([a]) => a < to)
      .map(([a, b]) => [Math.max(a, from) - from, Math.min(b, to) - from]),
  };
}

function isLowSurrogate(code: number): boolean {
  return code >= 0xdc00 && code <= 0xdfff;
}
