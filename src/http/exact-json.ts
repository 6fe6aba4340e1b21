import { isLosslessNumber, isSafeNumber, parse, stringify } from 'lossless-json';
import type { Entry } from '../model/entry.js';
import { RAW_DATA } from '../model/entry.js';

/**
 * JSON numbers that JSON.parse would round: integers beyond 2^53 (an Iceberg snapshotId) and
 * decimals with more digits than a double holds. A run of 16 digits is the cheap test for "might
 * be one"; only then is the text parsed a second time, exactly.
 */
const LONG_DIGITS = /\d{16}/;

/** Where a parsed request body keeps its text, when that text might hold such numbers. */
const SOURCE = Symbol('tailwater.jsonSource');

/** Exact twins already made, per body: a batch asks once per event. */
const twins = new WeakMap<object, unknown>();

/** Whether a parsed tree holds a number a double cannot carry digit for digit. */
function holdsLossyNumber(value: unknown): boolean {
  if (isLosslessNumber(value)) return !isSafeNumber(value.value, { approx: false });
  if (Array.isArray(value)) return value.some(holdsLossyNumber);
  if (value !== null && typeof value === 'object')
    return Object.values(value).some(holdsLossyNumber);
  return false;
}

/**
 * Parses a JSON body. When its text has a run of 16 digits, the text is kept on it, so that
 * an endpoint that stores producer JSON can ask for the exact text of a part (`exactText`);
 * nothing more is done until one asks.
 */
export function parseJsonBody(text: string): unknown {
  const value: unknown = JSON.parse(text);
  if (value !== null && typeof value === 'object' && LONG_DIGITS.test(text)) {
    Object.defineProperty(value, SOURCE, { value: text });
  }
  return value;
}

/**
 * The exact JSON text of `pick(body)` when that part holds a number JSON.parse rounded;
 * undefined otherwise (JSON.stringify of the parsed part is then exact). The body is parsed
 * exactly (lossless-json) on the first call only.
 */
export function exactText<Twin>(body: unknown, pick: (twin: Twin) => unknown): string | undefined {
  if (body === null || typeof body !== 'object') return undefined;
  const source = (body as { [SOURCE]?: string })[SOURCE];
  if (source === undefined) return undefined;
  if (!twins.has(body)) twins.set(body, parse(source));
  const part = pick(twins.get(body) as Twin);
  return holdsLossyNumber(part) ? stringify(part) : undefined;
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

/** Per entry read from the store: its stored `data` text if JSON.parse rounded it, else null. */
const exactData = new WeakMap<Entry, string | null>();

function exactDataOf(entry: Entry): string | null {
  const raw = entry[RAW_DATA];
  // The common case, on the fan-out path too: no 16-digit run, nothing to parse or remember.
  if (raw === undefined || !LONG_DIGITS.test(raw)) return null;
  let text = exactData.get(entry);
  if (text === undefined) {
    text = holdsLossyNumber(parse(raw)) ? raw : null;
    exactData.set(entry, text);
  }
  return text;
}

/** An entry as JSON, its `data` written from the stored text when JSON.parse rounded it. */
export function entryJson(entry: Entry): string {
  const raw = exactDataOf(entry);
  return raw === null ? JSON.stringify(entry) : stringifyWithData(entry, raw);
}

/** Whether any of the entries needs `entryJson` to be sent exactly. */
export function needsExactJson(entries: readonly Entry[]): boolean {
  return entries.some((entry) => exactDataOf(entry) !== null);
}
