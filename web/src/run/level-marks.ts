import type { LogBuffer } from './log-buffer.js';

/** A mark in the scrollbar gutter: the first line of the highest level in its stretch. */
export interface LevelMark {
  line: number;
  level: number;
  /** Where in the log it is: line / lines. */
  fraction: number;
}

/** Marks no closer than this share one (the gutter is a few hundred pixels tall). */
export const GUTTER_BUCKETS = 400;

/**
 * The errors and warnings of the log as at most `buckets` marks, placed by line fraction: a
 * stretch of the log with an error shows the error, else its first warning. Made from the
 * lines that have a level (the buffer keeps their list).
 */
export function levelMarks(buffer: LogBuffer, buckets = GUTTER_BUCKETS): LevelMark[] {
  const count = buffer.length;
  const marks: LevelMark[] = [];
  let bucket = -1;
  let mark: LevelMark | null = null;
  buffer.forEachLeveled((line, level) => {
    const at = Math.floor((line / count) * buckets);
    if (at !== bucket || !mark) {
      bucket = at;
      mark = { line, level, fraction: line / count };
      marks.push(mark);
    } else if (level > mark.level) {
      mark.line = line;
      mark.level = level;
      mark.fraction = line / count;
    }
  });
  return marks;
}
