/**
 * JSON.stringify(text), character for character, made faster for log text. V8 escapes a string
 * one character at a time once it holds a line break (every ~100 characters of a log): for a
 * megabyte of log it is most of the cost of a catch-up (docs/BENCHMARKS.md, "Catch-up").
 * Native replaceAll of the few escapes a log has is about three times faster. Anything else
 * (other control characters, lone surrogates, which JSON.stringify writes as \u escapes) goes
 * to JSON.stringify itself.
 *
 * It refers to nothing outside itself: a worker thread runs its source too (store/block-decoder.ts).
 */
export function quoteText(text: string): string {
  if (!text.isWellFormed()) return JSON.stringify(text);
  // Control characters other than tab, LF and CR.
  for (let code = 0; code < 32; code += 1) {
    if (code === 9 || code === 10 || code === 13) continue;
    if (text.includes(String.fromCharCode(code))) return JSON.stringify(text);
  }
  let out = text;
  // The backslash first: the escapes added after it hold backslashes of their own.
  if (out.includes('\\')) out = out.replaceAll('\\', '\\\\');
  if (out.includes('"')) out = out.replaceAll('"', '\\"');
  if (out.includes('\n')) out = out.replaceAll('\n', '\\n');
  if (out.includes('\r')) out = out.replaceAll('\r', '\\r');
  if (out.includes('\t')) out = out.replaceAll('\t', '\\t');
  return `"${out}"`;
}

/**
 * The control characters (below U+0020) `text` holds, each once, in code order. A sealed block
 * records those of its log texts, so a reader quotes them with quoteLatin1 without looking for
 * the other 29 in every text it reads (store/segment-format.ts).
 */
export function controlCharacters(text: string): string {
  let out = '';
  for (let code = 0; code < 32; code += 1) {
    const char = String.fromCharCode(code);
    if (text.includes(char)) out += char;
  }
  return out;
}

/**
 * JSON.stringify of the text whose UTF-8 bytes `latin1` holds one per character, as the same
 * kind of string: its bytes, quoted. Only ASCII needs escaping in JSON (the quote, the backslash
 * and the characters below U+0020), and a byte of a multi-byte UTF-8 sequence is never ASCII,
 * so the text is quoted without decoding it; UTF-8 has no lone surrogates for JSON to escape.
 * `controls` must hold every control character the text does (controlCharacters).
 *
 * It refers to nothing outside itself: a worker thread runs its source too (store/block-decoder.ts).
 */
export function quoteLatin1(latin1: string, controls: string): string {
  const named: Record<string, string> = { 8: 'b', 9: 't', 10: 'n', 12: 'f', 13: 'r' };
  let out = latin1;
  // The backslash first: the escapes added after it hold backslashes of their own.
  if (out.includes('\\')) out = out.replaceAll('\\', '\\\\');
  if (out.includes('"')) out = out.replaceAll('"', '\\"');
  for (const char of controls) {
    const code = char.charCodeAt(0);
    const escape = named[code] ?? `u${code.toString(16).padStart(4, '0')}`;
    if (out.includes(char)) out = out.replaceAll(char, `\\${escape}`);
  }
  return `"${out}"`;
}
