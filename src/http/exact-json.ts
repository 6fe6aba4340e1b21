import { isLosslessNumber, isSafeNumber, parse, stringify } from 'lossless-json';
import type { Entry } from '../model/entry.js';
import { RAW_DATA } from '../model/entry.js';

/**
 * JSON numbers that JSON.parse would round: integers beyond 2^53 (an Iceberg snapshotId) and
 * decimals with more digits than a double holds. A run of 16 digits is the cheap test for "might
 * be one"; only then is the text parsed a second time, exactly.
 */
const LONG_DIGITS = /\d{16}/;

/** Where a parsed request body keeps its exact twin, when it has numbers JSON.parse rounded. */
const EXACT = Symbol('tailwater.exactJson');

/** Whether a parsed tree holds a number a double cannot carry digit for digit. */
function holdsLossyNumber(value: unknown): boolean {
  if (isLosslessNumber(value)) return !isSafeNumber(value.value, { approx: false });
  if (Array.isArray(value)) return value.some(holdsLossyNumber);
  if (value !== null && typeof value === 'object')
    return Object.values(value).some(holdsLossyNumber);
  return false;
}

/** The body's exact twin (numbers kept as their text), or undefined when JSON.parse lost none. */
function exactTwin(text: string): unknown {
  if (!LONG_DIGITS.test(text)) return undefined;
  const twin = parse(text);
  return holdsLossyNumber(twin) ? twin : undefined;
}

/** Parses a JSON body, and keeps an exact twin on it when JSON.parse rounded a number. */
export function parseJsonBody(text: string): unknown {
  const value: unknown = JSON.parse(text);
  if (value !== null && typeof value === 'object') {
    const twin = exactTwin(text);
    if (twin !== undefined) Object.defineProperty(value, EXACT, { value: twin });
  }
  return value;
}

/**
 * The exact JSON text of `pick(body)`, when the body has an exact twin; undefined otherwise (and
 * then JSON.stringify of the parsed value is exact too).
 */
export function exactText<Twin>(body: unknown, pick: (twin: Twin) => unknown): string | undefined {
  const twin = (body as { [EXACT]?: Twin } | null)?.[EXACT];
  if (twin === undefined) return undefined;
  return stringify(pick(twin) ?? null) ?? 'null';
}

/** Whether stored JSON text has a number that JSON.parse would round. */
export function hasLongNumbers(json: string): boolean {
  return exactTwin(json) !== undefined;
}

// A stand-in for `data` while the rest of an entry is serialized, replaced by the stored text
// after: Node 20 has no JSON.rawJSON. The random part keeps producer text from ever matching it.
const PLACEHOLDER = `\u0000exact-${Math.random().toString(36).slice(2)}\u0000`;
const QUOTED_PLACEHOLDER = JSON.stringify(PLACEHOLDER);

/** JSON.stringify(value), with `data` written as `dataJson` (already valid JSON) verbatim. */
export function stringifyWithData<T extends { data?: unknown }>(
  value: T,
  dataJson: string,
): string {
  const text = JSON.stringify({ ...value, data: PLACEHOLDER });
  const at = text.indexOf(QUOTED_PLACEHOLDER);
  return text.slice(0, at) + dataJson + text.slice(at + QUOTED_PLACEHOLDER.length);
}

/** An entry as JSON, its `data` written from the stored text when JSON.parse rounded it. */
export function entryJson(entry: Entry): string {
  const raw = entry[RAW_DATA];
  return raw !== undefined && hasLongNumbers(raw)
    ? stringifyWithData(entry, raw)
    : JSON.stringify(entry);
}

/** Whether any of the entries needs `entryJson` to be sent exactly. */
export function needsExactJson(entries: readonly Entry[]): boolean {
  return entries.some((entry) => {
    const raw = entry[RAW_DATA];
    return raw !== undefined && hasLongNumbers(raw);
  });
}
