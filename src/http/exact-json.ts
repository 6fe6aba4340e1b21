import type { Entry } from '../model/entry.js';
import { RAW_DATA } from '../model/entry.js';
import { quoteText } from '../model/json-text.js';

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

/**
 * An entry's JSON with TEXT_SLOT where its `text` goes, for an entry that carries its text
 * already quoted (QUOTED_TEXT): the encoder writes those bytes in the slot's place, and the
 * frame is byte for byte what entryJson would have made.
 */
export function entryJsonWithTextSlot(entry: Entry): string {
  return JSON.stringify({ ...entry, text: PLACEHOLDER });
}

/** What marks the text's place in entryJsonWithTextSlot's JSON (and in a frame holding it). */
export const TEXT_SLOT = QUOTED_PLACEHOLDER;

/** Below this many characters a text is left to JSON.stringify: its checks would gain little. */
const QUOTE_TEXT_CHARS = 1024;

/** An entry as JSON, its `data` written from the stored text, its log text by quoteText. */
export function entryJson(entry: Entry): string {
  const raw = entry[RAW_DATA];
  if (raw !== undefined) return stringifyWith(entry, 'data', raw);
  if (entry.text !== undefined && entry.text.length >= QUOTE_TEXT_CHARS) {
    return stringifyWith(entry, 'text', quoteText(entry.text));
  }
  return JSON.stringify(entry);
}
