import type { Entry } from '../model/entry.js';
import { RAW_DATA } from '../model/entry.js';

/**
 * Producer JSON goes out as it came in. `data` is stored as the producer's own text (numbers
 * past 2^53, long decimals, `1e400` and all), so an encoder writes that text into the entry
 * instead of re-encoding what JSON.parse made of it, which would round such numbers. The same
 * function serves every path (live, catch-up, /entries), so an entry reads the same on all.
 */

// A stand-in for a value while the rest of an object is serialized, replaced by the stored text
// after: Node 20 has no JSON.rawJSON. The random part keeps producer text from ever matching it.
const PLACEHOLDER = `\u0000exact-${Math.random().toString(36).slice(2)}\u0000`;
const QUOTED_PLACEHOLDER = JSON.stringify(PLACEHOLDER);

/** JSON.stringify(value), with the value of `field` written as `json` (already valid JSON). */
export function stringifyWith<T extends object>(value: T, field: keyof T, json: string): string {
  const text = JSON.stringify({ ...value, [field]: PLACEHOLDER });
  const at = text.indexOf(QUOTED_PLACEHOLDER);
  return text.slice(0, at) + json + text.slice(at + QUOTED_PLACEHOLDER.length);
}

/** An entry as JSON, its `data` written from the stored text. */
export function entryJson(entry: Entry): string {
  const raw = entry[RAW_DATA];
  return raw === undefined ? JSON.stringify(entry) : stringifyWith(entry, 'data', raw);
}
