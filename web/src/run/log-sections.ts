import { MARKER_END, MARKER_GROUP } from './log-buffer.js';
import type { LogBuffer } from './log-buffer.js';
import { LEVEL_ERROR } from './log-levels.js';

/**
 * A foldable part of the log: the lines between `::group::<title>` and `::endgroup::` (or
 * `##[group]`/`##[endgroup]`), whose first line is the section's header, or the lines written
 * under one step, which get a header row of their own above their first line.
 */
export interface Section {
  kind: 'group' | 'step';
  title: string;
  /** Index of its first line (a group's is its `::group::` line). */
  first: number;
  /** Index of its last line (a group's `::endgroup::`, or the last line so far). */
  last: number;
  /** Sections it is inside. */
  depth: number;
  /** Lines in it besides its markers. */
  lines: number;
  /** From its first line's time to its last's (ms), or NaN without times. */
  durationMs: number;
  /** An error line inside it. */
  error: boolean;
  /** Not closed yet (a group without its end, the step being written). */
  open: boolean;
  /** Stable across re-reads and lines let go: its kind and the log line number it begins at. */
  key: string;
}

const GROUP_TITLE = /^(?:::group::|##\[group\])/;

/**
 * The sections of the log, in the order they begin. A step's lines are its section; a change of
 * step ends the groups that were open in the one before. An `::endgroup::` without a group is
 * an ordinary line. O(lines), on typed arrays: a log without markers or steps is not walked.
 */
export function sectionsOf(buffer: LogBuffer): Section[] {
  const sections: Section[] = [];
  if (!buffer.structured) return sections;
  const groups: Section[] = [];
  let step: Section | null = null;
  let stepId = 0;
  const close = (section: Section, last: number, open: boolean, byMarker = false) => {
    section.last = last;
    section.open = open;
    section.durationMs = buffer.timeOf(last) - buffer.timeOf(section.first);
    // A group's lines are those between its markers; a step's are all of its own.
    section.lines = last - section.first + (section.kind === 'step' ? 1 : byMarker ? -1 : 0);
  };
  const count = buffer.length;
  for (let index = 0; index < count; index += 1) {
    const id = buffer.stepIdOf(index);
    if (id !== stepId) {
      for (const group of groups.splice(0)) close(group, index - 1, false);
      if (step) close(step, index - 1, false);
      step = null;
      stepId = id;
      if (id !== 0) {
        step = section('step', buffer.stepOf(index), index, 0, buffer.dropped);
        sections.push(step);
      }
    }
    const marker = buffer.markerOf(index);
    if (marker === MARKER_GROUP) {
      const title = buffer.line(index).replace(GROUP_TITLE, '').trim();
      const group = section('group', title, index, groups.length + (step ? 1 : 0), buffer.dropped);
      sections.push(group);
      groups.push(group);
      continue;
    }
    if (marker === MARKER_END && groups.length > 0) {
      close(groups.pop()!, index, false, true);
      continue;
    }
    if (buffer.levelOf(index) === LEVEL_ERROR) {
      for (const group of groups) group.error = true;
      if (step) step.error = true;
    }
  }
  for (const open of [...groups, ...(step ? [step] : [])]) close(open, count - 1, true);
  return sections;
}

function section(
  kind: Section['kind'],
  title: string,
  first: number,
  depth: number,
  dropped: number,
): Section {
  return {
    kind,
    title,
    first,
    last: first,
    depth,
    lines: 0,
    durationMs: Number.NaN,
    error: false,
    open: true,
    key: `${kind}:${dropped + first + 1}`,
  };
}

/**
 * The rows the log shows with some sections folded: a row is a line (its index), or a step's
 * header (`-1 - section`). A folded section is its header row alone; lines keep their indices,
 * so their numbers. `rowOf[line]` is the row that shows the line, or the header that hides it.
 */
export interface Rows {
  length: number;
  /** The line a row shows (>= 0), or -1 - the index of the step whose header it is. */
  at(row: number): number;
  rowOf(line: number): number;
}

/** Every line a row of its own, and no header: a log without sections. */
export function plainRows(count: number): Rows {
  return { length: count, at: (row) => row, rowOf: (line) => line };
}

export function rowsOf(
  count: number,
  sections: readonly Section[],
  folded: (section: Section) => boolean,
): Rows {
  if (sections.length === 0) return plainRows(count);
  const steps = sections.reduce((n, s) => n + (s.kind === 'step' ? 1 : 0), 0);
  const rows = new Int32Array(count + steps);
  const rowOf = new Int32Array(count);
  let row = 0;
  let next = 0;
  for (let line = 0; line < count;) {
    // Sections that begin inside a folded one are hidden with it.
    while (next < sections.length && sections[next]!.first < line) next += 1;
    let shown = false;
    let skipTo = -1;
    while (next < sections.length && sections[next]!.first === line) {
      const index = next;
      const section = sections[index]!;
      next += 1;
      if (section.kind === 'step') rows[row++] = -1 - index;
      else {
        rows[row++] = line;
        shown = true;
      }
      if (folded(section)) {
        skipTo = section.last + 1;
        break;
      }
    }
    if (skipTo >= 0) {
      rowOf.fill(row - 1, line, Math.min(skipTo, count));
      line = skipTo;
      continue;
    }
    if (!shown) rows[row++] = line;
    rowOf[line] = row - 1;
    line += 1;
  }
  return { length: row, at: (index) => rows[index] ?? 0, rowOf: (line) => rowOf[line] ?? 0 };
}

/** The sections that hold `line`, outermost first. */
export function sectionsHolding(sections: readonly Section[], line: number): Section[] {
  return sections.filter((section) => section.first <= line && line <= section.last);
}
