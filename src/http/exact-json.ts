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

/** Control characters other than tab, LF and CR: text holding one is left to JSON.stringify. */
const RARE_CONTROLS = Array.from({ length: 32 }, (_, code) => String.fromCharCode(code)).filter(
  (char) => !'\t\n\r'.includes(char),
);

/**
 * JSON.stringify(text), character for character, made faster for log text. V8 escapes a string
 * one character at a time once it holds a line break (every ~100 characters of a log): for a
 * megabyte of log it is most of the cost of a catch-up (docs/BENCHMARKS.md, "Catch-up").
 * Native replaceAll of the few escapes a log has is about three times faster. Anything else
 * (other control characters, lone surrogates, which JSON.stringify writes as \u escapes) goes
 * to JSON.stringify itself.
 */
export function quoteText(text: string): string {
  if (!text.isWellFormed()) return JSON.stringify(text);
  for (const control of RARE_CONTROLS) if (text.includes(control)) return JSON.stringify(text);
  let out = text;
  // The backslash first: the escapes added after it hold backslashes of their own.
  if (out.includes('\\')) out = out.replaceAll('\\', '\\\\');
  if (out.includes('"')) out = out.replaceAll('"', '\\"');
  if (out.includes('\n')) out = out.replaceAll('\n', '\\n');
  if (out.includes('\r')) out = out.replaceAll('\r', '\\r');
  if (out.includes('\t')) out = out.replaceAll('\t', '\\t');
  return `"${out}"`;
}

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
