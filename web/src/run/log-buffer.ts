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

/**
 * A run's log as lines, appended in place. The text is kept as the pieces it arrived in (a page
 * of history is megabytes, a live entry a few lines), and a line is only where it is: which
 * piece, from where to where, in typed arrays. A 100 MB log is a million lines, and a string
 * object per line would cost more than the text (docs/BENCHMARKS.md, "Dashboard: a large log in
 * the run view"); a line's string is made when it is shown or searched. Views re-render on a
 * version counter. Past `maxChars` the oldest lines are let go (a tab has only so much memory);
 * `dropped` counts them, so line numbers stay the log's own.
 */
export class LogBuffer implements LogLines {
  /** Lines let go from the front: line `i` here is line `dropped + i + 1` of the log. */
  dropped = 0;
  /** How many times the log was cleared (a new log begins each time). */
  clears = 0;
  private pieces: string[] = [];
  private piece = new Uint32Array(FIRST_CAPACITY);
  private start = new Uint32Array(FIRST_CAPACITY);
  private end = new Uint32Array(FIRST_CAPACITY);
  private count = 0;
  /** The last line has no newline yet: the next text continues it. */
  private open = false;
  /** Text held, newlines included. */
  private chars = 0;

  constructor(private readonly maxChars = DEFAULT_MAX_CHARS) {}

  get length(): number {
    return this.count;
  }

  line(index: number): string {
    if (index < 0 || index >= this.count) return '';
    return this.pieces[this.piece[index]!]!.slice(this.start[index], this.end[index]);
  }

  /** Every line, as strings (for tests and small logs). */
  toArray(): string[] {
    return Array.from({ length: this.count }, (_, index) => this.line(index));
  }

  append(text: string): void {
    if (text === '') return;
    this.chars += text.length;
    let from = 0;
    if (this.open) {
      // The open line goes on: it becomes a piece of its own, its old text and the new joined.
      const newline = text.indexOf('\n');
      const upTo = newline === -1 ? text.length : newline;
      const joined = this.line(this.count - 1) + text.slice(0, upTo);
      this.count -= 1;
      this.push(this.addPiece(joined), 0, joined.length);
      if (newline === -1) return this.trimIfOver();
      this.open = false;
      from = newline + 1;
    }
    if (from < text.length) {
      const piece = this.addPiece(text);
      for (let newline = text.indexOf('\n', from); newline !== -1;) {
        this.push(piece, from, newline);
        from = newline + 1;
        newline = text.indexOf('\n', from);
      }
      if (from < text.length) {
        this.push(piece, from, text.length);
        this.open = true;
      }
    }
    this.trimIfOver();
  }

  clear(): void {
    this.pieces = [];
    this.count = 0;
    this.open = false;
    this.chars = 0;
    this.dropped = 0;
    this.clears += 1;
  }

  private addPiece(text: string): number {
    this.pieces.push(text);
    return this.pieces.length - 1;
  }

  private push(piece: number, start: number, end: number): void {
    if (this.count === this.piece.length) this.grow();
    this.piece[this.count] = piece;
    this.start[this.count] = start;
    this.end[this.count] = end;
    this.count += 1;
  }

  private grow(): void {
    const capacity = this.piece.length * 2;
    for (const name of ['piece', 'start', 'end'] as const) {
      const bigger = new Uint32Array(capacity);
      bigger.set(this[name]);
      this[name] = bigger;
    }
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
    for (const name of ['piece', 'start', 'end'] as const) {
      this[name].copyWithin(0, count, this.count);
    }
    this.count -= count;
    this.chars -= freed;
    this.dropped += count;
    // Pieces no kept line points into are let go (indices stay, so lines need no renumbering).
    const firstKept = this.piece[0]!;
    for (let piece = firstKept - 1; piece >= 0 && this.pieces[piece] !== ''; piece -= 1) {
      this.pieces[piece] = '';
    }
  }
}
