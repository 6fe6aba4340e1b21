/** Which prefixes the lines of a `log.txt` answer begin with (its `Tailwater-Log-Prefix`). */
export interface PrefixFields {
  timestamps: boolean;
  steps: boolean;
}

export const PREFIX_HEADER = 'Tailwater-Log-Prefix';

/** The fields a `Tailwater-Log-Prefix` value names, or null for none (a plain log). */
export function prefixFieldsOf(header: string | null): PrefixFields | null {
  if (!header) return null;
  const names = header.split(',').map((name) => name.trim());
  const fields = { timestamps: names.includes('timestamps'), steps: names.includes('steps') };
  return fields.timestamps || fields.steps ? fields : null;
}

const digit = (text: string, at: number) => text.charCodeAt(at) - 48;
const number = (text: string, at: number, length: number) => {
  let value = 0;
  for (let i = 0; i < length; i += 1) value = value * 10 + digit(text, at + i);
  return value;
};

/**
 * `2026-11-29T08:00:00.123Z` at `at` as ms since the epoch, read digit by digit: a million lines
 * of history are a million times, and neither a Date nor a string is made for each. Any other
 * form is read by Date.parse.
 */
export function parseTime(text: string, at: number, end: number): number {
  if (end - at === 24 && text.charCodeAt(at + 23) === 90 /* Z */) {
    const value = Date.UTC(
      number(text, at, 4),
      number(text, at + 5, 2) - 1,
      number(text, at + 8, 2),
      number(text, at + 11, 2),
      number(text, at + 14, 2),
      number(text, at + 17, 2),
      number(text, at + 20, 3),
    );
    if (!Number.isNaN(value)) return value;
  }
  return Date.parse(text.slice(at, end));
}

/**
 * Reads the prefixes of lines one after another. Lines of one entry share its time and step, so
 * the text of the last ones read is kept: a prefix equal to it is compared, not parsed again.
 */
export class PrefixReader {
  private timeText = '';
  private time = Number.NaN;
  private stepText = '';
  private step = '';

  constructor(private readonly fields: PrefixFields) {}

  /**
   * The prefix of the line [from, lineEnd): its time (NaN when not asked for or not read), its
   * step ('' for none) and where its own text begins. A line without the expected spaces keeps
   * its text whole.
   */
  read(
    text: string,
    from: number,
    lineEnd: number,
  ): { time: number; step: string; textStart: number } {
    let at = from;
    let time = Number.NaN;
    let step = '';
    if (this.fields.timestamps) {
      const space = text.indexOf(' ', at);
      if (space === -1 || space > lineEnd) return { time, step, textStart: from };
      if (space - at !== this.timeText.length || !text.startsWith(this.timeText, at)) {
        this.timeText = text.slice(at, space);
        this.time = parseTime(text, at, space);
      }
      time = this.time;
      at = space + 1;
    }
    if (this.fields.steps) {
      const space = text.indexOf(' ', at);
      if (space === -1 || space > lineEnd) return { time, step, textStart: from };
      if (space - at !== this.stepText.length || !text.startsWith(this.stepText, at)) {
        this.stepText = text.slice(at, space);
        this.step = decodeStep(this.stepText);
      }
      step = this.step;
      at = space + 1;
    }
    return { time, step, textStart: at };
  }
}

function decodeStep(encoded: string): string {
  try {
    return decodeURIComponent(encoded);
  } catch {
    return encoded;
  }
}
