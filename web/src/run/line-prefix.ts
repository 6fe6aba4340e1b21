/** The header that says how a `log.txt` answer marks its entries (docs/API.md). */
export const PREFIX_HEADER = 'Tailwater-Log-Prefix';

/** The query that asks `log.txt` for a mark before each entry: its time and step. */
export const MARKED_QUERY = 'entries=true';

/** Whether a `Tailwater-Log-Prefix` value says the text has entry marks (else: plain text). */
export function isMarked(header: string | null): boolean {
  return (header ?? '').split(',').some((name) => name.trim() === 'entries');
}

const digit = (text: string, at: number) => text.charCodeAt(at) - 48;
const number = (text: string, at: number, length: number) => {
  let value = 0;
  for (let i = 0; i < length; i += 1) value = value * 10 + digit(text, at + i);
  return value;
};

/**
 * `2026-11-29T08:00:00.123Z` at `at` as ms since the epoch, read digit by digit (no Date and no
 * string made for it); any other form is read by Date.parse.
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

/** A mark's fields, `<time> <step>` in [at, end): the time in ms (NaN if unreadable), the step. */
export function parseMark(text: string, at: number, end: number): { time: number; step: string } {
  const space = text.indexOf(' ', at);
  if (space === -1 || space >= end) return { time: parseTime(text, at, end), step: '' };
  const encoded = text.slice(space + 1, end);
  let step = encoded;
  try {
    step = decodeURIComponent(encoded);
  } catch {
    // Not percent-encoded after all: the name as it came.
  }
  return { time: parseTime(text, at, space), step };
}
