import { LEVEL_ERROR, LEVEL_WARNING, levelPatterns, DEFAULT_LEVEL_RULES } from './log-levels.js';
import type { LevelPatterns } from './log-levels.js';
import { parseMark } from './line-prefix.js';

/** How much log text a view keeps (UTF-16 code units, about bytes for most logs). */
export const DEFAULT_MAX_CHARS = 256 * 1024 * 1024;

/** Lines read by index: the log buffer, or a plain array (tests, small logs). */
export interface LogLines {
  readonly length: number;
  line(index: number): string;
}

/** `lines` as LogLines. */
export function linesOf(lines: readonly string[]): LogLines {
  return { length: lines.length, line: (index) => lines[index] ?? '' };
}

const FIRST_CAPACITY = 1024;

/** A line that opens (`::group::<title>`, `##[group]<title>`) or closes a section. */
export const MARKER_NONE = 0;
export const MARKER_GROUP = 1;
export const MARKER_END = 2;
const GROUP_MARKERS = ['::group::', '##[group]'];
const END_MARKERS = ['::endgroup::', '##[endgroup]'];

/** What a live entry says of the lines it brings. */
export interface LineMeta {
  /** When the entry was stored (ms since the epoch). */
  time?: number;
  step?: string | undefined;
}

/**
 * Text being appended: its piece (-1 until a line of it is kept), and the first line it may
 * have added. Lines in between that went on from earlier text are pieces of their own.
 */
interface PieceRun {
  readonly text: string;
  piece: number;
  readonly first: number;
}

const PER_LINE = ['piece', 'start', 'end', 'times', 'steps', 'levels', 'markers'] as const;

/**
 * A run's log as lines, appended in place. The text is kept as the pieces it arrived in (a page
 * of history is megabytes, a live entry a few lines), and a line is only where it is: which
 * piece, from where to where, in typed arrays. A 100 MB log is a million lines, and a string
 * object per line would cost more than the text (docs/BENCHMARKS.md, "Dashboard: a large log in
 * the run view"); a line's string is made when it is shown or searched. What the view needs to
 * know of every line — its time, its step, whether it is an error or a warning, whether it opens
 * or closes a section — is kept the same way, a number per line. Views re-render on a version
 * counter. Past `maxChars` the oldest lines are let go (a tab has only so much memory);
 * `dropped` counts them, so line numbers stay the log's own.
 */
export class LogBuffer implements LogLines {
  /** Lines let go from the front: line `i` here is line `dropped + i + 1` of the log. */
  dropped = 0;
  /** Of those, the lines never read: the log was read from line `skipped + 1` (`startAt`). */
  skipped = 0;
  /** How many times the log was cleared (a new log begins each time). */
  clears = 0;
  /** A line opened or closed a section, or came with a step: sections are worth looking for. */
  structured = false;
  private pieces: string[] = [];
  private piece = new Uint32Array(FIRST_CAPACITY);
  private start = new Uint32Array(FIRST_CAPACITY);
  private end = new Uint32Array(FIRST_CAPACITY);
  /** ms since the epoch, NaN when not known. */
  private times = new Float64Array(FIRST_CAPACITY);
  /** An index in `stepNames`; 0 is no step. */
  private steps = new Uint16Array(FIRST_CAPACITY);
  private levels = new Uint8Array(FIRST_CAPACITY);
  private markers = new Uint8Array(FIRST_CAPACITY);
  /** The log line numbers (from 0, counting lines let go) of the lines with a level, in order. */
  private leveled: number[] = [];
  private leveledFrom = 0;
  private errors = 0;
  private stepNames: string[] = [''];
  private stepIds = new Map<string, number>([['', 0]]);
  private count = 0;
  /** The time and step of the last entry mark read (docs/API.md, `?entries=true`). */
  private markedMeta: LineMeta = {};
  /** What the last marked text ended with of a mark it did not close (undefined: none). */
  private openMark: string | undefined;
  /** The last line has no newline yet: the next text continues it. */
  private open = false;
  /** Text held, newlines included. */
  private chars = 0;
  private readonly patterns: LevelPatterns;

  constructor(
    private readonly maxChars = DEFAULT_MAX_CHARS,
    patterns: LevelPatterns = levelPatterns(DEFAULT_LEVEL_RULES),
  ) {
    this.patterns = patterns;
  }

  get length(): number {
    return this.count;
  }

  line(index: number): string {
    if (index < 0 || index >= this.count) return '';
    return this.pieces[this.piece[index]!]!.slice(this.start[index], this.end[index]);
  }

  /** When the line's entry was stored (ms), or NaN. */
  timeOf(index: number): number {
    return this.times[index] ?? Number.NaN;
  }

  /** The step the line was written under ('' for none). */
  stepOf(index: number): string {
    return this.stepNames[this.steps[index] ?? 0] ?? '';
  }

  /** The step as a number (0 for none): equal numbers, equal steps. */
  stepIdOf(index: number): number {
    return this.steps[index] ?? 0;
  }

  /** LEVEL_NONE, LEVEL_WARNING or LEVEL_ERROR. */
  levelOf(index: number): number {
    return this.levels[index] ?? 0;
  }

  /** MARKER_NONE, MARKER_GROUP or MARKER_END. */
  markerOf(index: number): number {
    return this.markers[index] ?? 0;
  }

  /** How many lines held are errors. */
  get errorCount(): number {
    return this.errors;
  }

  /** Calls `visit` for each line with a level, in order: a few, where the log has a million. */
  forEachLeveled(visit: (index: number, level: number) => void): void {
    for (let at = this.leveledFrom; at < this.leveled.length; at += 1) {
      const index = this.leveled[at]! - this.dropped;
      visit(index, this.levels[index]!);
    }
  }

  /** The next line from `from` on (or back, with `direction` -1) at `level`, or -1. */
  findLevel(from: number, direction: 1 | -1, level: number): number {
    for (let index = from; index >= 0 && index < this.count; index += direction) {
      if (this.levels[index] === level) return index;
    }
    return -1;
  }

  /** Every line, as strings (for tests and small logs). */
  toArray(): string[] {
    return Array.from({ length: this.count }, (_, index) => this.line(index));
  }

  /** Log text of a live entry: its lines get its time and step. */
  append(text: string, meta: LineMeta = {}): void {
    const run: PieceRun = { text, piece: -1, first: this.count };
    this.addSpan(run, 0, text.length, meta);
    this.classifyRun(run);
    this.trimIfOver();
  }

  /**
   * Log text of a `log.txt` read with `?entries=true` (docs/API.md): before each entry's text a
   * mark, U+0000 `<time> <step>` U+0000, which stored text never holds. Each entry's text gets
   * the mark's time and step. The page is kept as one piece, marks and all, and its lines point
   * into it: a string per entry would be a million strings for a million-line log, the heap the
   * buffer exists to save. The part of an entry a page begins with (its mark is on the page
   * before) keeps the last mark's time and step. Text read as it arrives may end anywhere, inside
   * a mark too: the next text goes on with it.
   */
  appendMarked(text: string): void {
    const run: PieceRun = { text, piece: -1, first: this.count };
    let at = 0;
    if (this.openMark !== undefined) {
      // The last text ended inside a mark: this one begins with the rest of it.
      const close = text.indexOf('\u0000');
      if (close === -1) {
        this.openMark += text;
        return;
      }
      const mark = this.openMark + text.slice(0, close);
      this.openMark = undefined;
      this.markedMeta = parseMark(mark, 0, mark.length);
      at = close + 1;
    }
    while (at < text.length) {
      if (text.charCodeAt(at) === 0) {
        const close = text.indexOf('\u0000', at + 1);
        if (close === -1) {
          // Text read as it arrives may end anywhere, inside a mark too.
          this.openMark = text.slice(at + 1);
          break;
        }
        this.markedMeta = parseMark(text, at + 1, close);
        at = close + 1;
        continue;
      }
      const next = text.indexOf('\u0000', at);
      const upTo = next === -1 ? text.length : next;
      this.addSpan(run, at, upTo, this.markedMeta);
      at = upTo;
    }
    this.classifyRun(run);
    this.trimIfOver();
  }

  /**
   * The lines of `run.text` in [from, to), with `meta`'s time and step. They point into the run's
   * piece (added with its first line), and are classified with the rest of the run, in one pass;
   * only a line that goes on from the last text becomes a piece of its own.
   */
  private addSpan(run: PieceRun, from: number, to: number, meta: LineMeta): void {
    if (from >= to) return;
    const { text } = run;
    this.chars += to - from;
    const time = meta.time ?? Number.NaN;
    const step = this.stepId(meta.step);
    // The end of the line that begins at `at` within the span, and whether a newline ends it.
    const lineEnd = (at: number): [number, boolean] => {
      const newline = text.indexOf('\n', at);
      return newline === -1 || newline >= to ? [to, false] : [newline, true];
    };
    if (this.open) {
      // The open line goes on: it becomes a piece of its own, its old text and the new joined.
      const last = this.count - 1;
      const [upTo, ended] = lineEnd(from);
      const joined = this.line(last) + text.slice(from, upTo);
      const [keptTime, keptStep] = [this.times[last]!, this.steps[last]!];
      this.count -= 1;
      const piece = this.addPiece(joined);
      this.push(piece, 0, joined.length, keptTime, keptStep);
      this.classify(piece, last, last + 1);
      if (!ended) return;
      this.open = false;
      from = upTo + 1;
    }
    if (from >= to) return;
    if (run.piece === -1) run.piece = this.addPiece(text);
    while (from < to) {
      const [upTo, ended] = lineEnd(from);
      this.push(run.piece, from, upTo, time, step);
      if (!ended) {
        this.open = true;
        return;
      }
      from = upTo + 1;
    }
  }

  /** Classifies the lines the run added to its piece. */
  private classifyRun(run: PieceRun): void {
    if (run.piece !== -1) this.classify(run.piece, run.first, this.count);
  }

  /**
   * Text read from now on begins at line `line` of the log (a `#L` link far into a long log is
   * read from near its line, docs/DASHBOARD.md): the lines before it count as let go. Only
   * before any text; the buffer is cleared first.
   */
  startAt(line: number): void {
    this.clear();
    this.dropped = line - 1;
    this.skipped = line - 1;
  }

  clear(): void {
    this.skipped = 0;
    this.pieces = [];
    this.count = 0;
    this.open = false;
    this.chars = 0;
    this.dropped = 0;
    this.structured = false;
    this.leveled = [];
    this.leveledFrom = 0;
    this.errors = 0;
    this.markedMeta = {};
    this.openMark = undefined;
    this.clears += 1;
  }

  private stepId(name: string | undefined): number {
    if (!name) return 0;
    let id = this.stepIds.get(name);
    if (id === undefined) {
      // 65,535 steps at most in a view; more share the last number (a label, not a key).
      id = Math.min(this.stepNames.length, 0xffff);
      if (id === this.stepNames.length) this.stepNames.push(name);
      this.stepIds.set(name, id);
    }
    this.structured = true;
    return id;
  }

  /**
   * Levels and section markers of the lines in [first, to) that are in `piece` (the others went
   * on from earlier text, are pieces of their own, and were classified as such): each level's
   * expression is run over the piece once, not once per line, and a match is put on the line it
   * falls in.
   */
  private classify(piece: number, first: number, to: number): void {
    const own = (index: number) => this.piece[index] === piece;
    if (first >= to) return;
    // Lines from `first` on leave the list first (an open line that went on is classified
    // again), and all of them, foreign ones too, come back in order.
    const firstNumber = this.dropped + first;
    while (this.leveled.length > this.leveledFrom && this.leveled.at(-1)! >= firstNumber) {
      const index = this.leveled.pop()! - this.dropped;
      if (this.levels[index] === LEVEL_ERROR) this.errors -= 1;
    }
    const text = this.pieces[piece]!;
    for (let index = first; index < to; index += 1) {
      if (!own(index)) continue;
      const at = this.start[index]!;
      const c = text.charCodeAt(at);
      // Only `:` or `#` can begin a marker: most lines are passed over on their first character.
      const marker =
        c !== 58 && c !== 35
          ? 0
          : GROUP_MARKERS.some((m) => text.startsWith(m, at))
            ? MARKER_GROUP
            : END_MARKERS.some((m) => text.startsWith(m, at))
              ? MARKER_END
              : 0;
      this.markers[index] = marker;
      this.levels[index] = 0;
      if (marker) this.structured = true;
    }
    // The piece's text is searched from its first line in the range to its last.
    let low = first;
    let high = to;
    while (low < high && !own(low)) low += 1;
    while (high > low && !own(high - 1)) high -= 1;
    const mark = (pattern: RegExp | null, level: number) => {
      if (!pattern || low >= high) return;
      let index = low;
      pattern.lastIndex = this.start[low]!;
      const limit = this.end[high - 1]!;
      for (
        let found = pattern.exec(text);
        found && found.index <= limit;
        found = pattern.exec(text)
      ) {
        while (index < high && (!own(index) || this.end[index]! < found.index)) index += 1;
        if (index === high) break;
        if (found.index < this.start[index]!) {
          // In what lies between lines (an entry's mark): the search goes on from the line.
          pattern.lastIndex = this.start[index]!;
          continue;
        }
        if (this.levels[index]! < level) this.levels[index] = level;
        pattern.lastIndex = this.end[index]! + 1;
        if (found[0] === '') pattern.lastIndex += 1;
      }
    };
    mark(this.patterns.warning, LEVEL_WARNING);
    mark(this.patterns.error, LEVEL_ERROR);
    for (let index = first; index < to; index += 1) {
      const level = this.levels[index]!;
      if (level === 0) continue;
      this.leveled.push(this.dropped + index);
      if (level === LEVEL_ERROR) this.errors += 1;
    }
  }

  private addPiece(text: string): number {
    this.pieces.push(text);
    return this.pieces.length - 1;
  }

  private push(piece: number, start: number, end: number, time: number, step: number): void {
    if (this.count === this.piece.length) this.grow();
    this.piece[this.count] = piece;
    this.start[this.count] = start;
    this.end[this.count] = end;
    this.times[this.count] = time;
    this.steps[this.count] = step;
    this.count += 1;
  }

  private grow(): void {
    const capacity = this.piece.length * 2;
    const grown = <T extends Uint8Array | Uint16Array | Uint32Array | Float64Array>(
      old: T,
      make: (length: number) => T,
    ): T => {
      const bigger = make(capacity);
      bigger.set(old);
      return bigger;
    };
    this.piece = grown(this.piece, (n) => new Uint32Array(n));
    this.start = grown(this.start, (n) => new Uint32Array(n));
    this.end = grown(this.end, (n) => new Uint32Array(n));
    this.times = grown(this.times, (n) => new Float64Array(n));
    this.steps = grown(this.steps, (n) => new Uint16Array(n));
    this.levels = grown(this.levels, (n) => new Uint8Array(n));
    this.markers = grown(this.markers, (n) => new Uint8Array(n));
  }

  private trimIfOver(): void {
    if (this.chars > this.maxChars) this.trim();
  }

  /** Lets go of the oldest lines, a tenth more than needed: moving the rest up is O(n). */
  private trim(): void {
    const target = this.maxChars * 0.9;
    let count = 0;
    let freed = 0;
    while (this.chars - freed > target && count < this.count - 1) {
      freed += this.end[count]! - this.start[count]! + 1;
      count += 1;
    }
    const firstKeptNumber = this.dropped + count;
    while (
      this.leveledFrom < this.leveled.length &&
      this.leveled[this.leveledFrom]! < firstKeptNumber
    ) {
      const index = this.leveled[this.leveledFrom]! - this.dropped;
      if (this.levels[index] === LEVEL_ERROR) this.errors -= 1;
      this.leveledFrom += 1;
    }
    if (this.leveledFrom > 1024 && this.leveledFrom * 2 > this.leveled.length) {
      this.leveled = this.leveled.slice(this.leveledFrom);
      this.leveledFrom = 0;
    }
    for (const name of PER_LINE) this[name].copyWithin(0, count, this.count);
    this.count -= count;
    this.chars -= freed;
    this.dropped += count;
    // Pieces no kept line points into are let go (indices stay, so lines need no renumbering).
    // A line that went on from a page is a piece after that page's though it comes before some
    // of its lines, so the lowest piece kept is looked for (trimming is rare; this is O(n) too).
    let firstKept = this.piece[0]!;
    for (let index = 1; index < this.count; index += 1) {
      firstKept = Math.min(firstKept, this.piece[index]!);
    }
    for (let piece = firstKept - 1; piece >= 0 && this.pieces[piece] !== ''; piece -= 1) {
      this.pieces[piece] = '';
    }
  }
}
