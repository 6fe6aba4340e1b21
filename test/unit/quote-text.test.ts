import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import type { Entry } from '../../src/model/entry.js';
import { entryJson } from '../../src/http/exact-json.js';
import { controlCharacters, quoteLatin1, quoteText } from '../../src/model/json-text.js';

// quoteText is JSON.stringify of a string made faster for log text: it must write exactly what
// JSON.stringify writes, whatever the text holds, or a viewer would read other text.

const SPECIALS = ['\\', '"', '\n', '\r', '\t', '\u0000', '\u0001', '\u001f', '\u007f', '\u2028'];
const ODD = ['\ud800', '\udfff', '😀', 'é', '\\n', '\\"', '"\\', ...SPECIALS];

describe('quoteText', () => {
  test.each([
    ['plain text', 'hello'],
    ['empty', ''],
    ['log lines', 'a line\nanother line\n'],
    ['quotes and backslashes together', 'say "\\" and \\"'],
    ['a backslash before n, not a line break', 'C:\\new\\table'],
    ['tabs and CRLF', 'at x\r\n\tat y\r\n'],
    ['a rare control character', 'bell \u0007 and nul \u0000\n'],
    ['a lone high surrogate', 'broken \ud83d here\n'],
    ['a lone low surrogate', '\ude00 at the start'],
    ['a surrogate pair and non-ASCII', 'ünïcödé 😀 "quoted"\n'],
    ['U+2028 and DEL', 'line\u2028separator\u007f'],
  ])('writes %s as JSON.stringify does', (_name, text) => {
    expect(quoteText(text)).toBe(JSON.stringify(text));
  });

  test('writes any text as JSON.stringify does (generated, specials over-represented)', () => {
    const piece = fc.oneof(fc.string({ unit: 'binary' }), fc.constantFrom(...ODD));
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 40 }), (pieces) => {
        const text = pieces.join('');
        expect(quoteText(text)).toBe(JSON.stringify(text));
      }),
      { numRuns: 2000 },
    );
  });
});

// A sealed block's text is quoted from its UTF-8 bytes (quoteLatin1): its output bytes must be
// JSON.stringify's of the text those bytes hold, given the control characters the text holds.
describe('quoteLatin1', () => {
  const quotedBytes = (text: string) => {
    const latin1 = Buffer.from(text, 'utf8').toString('latin1');
    return Buffer.from(quoteLatin1(latin1, controlCharacters(text)), 'latin1');
  };
  /** What a reader of the stored text gets: its UTF-8 bytes, decoded (lone surrogates are U+FFFD). */
  const stored = (text: string) => Buffer.from(text, 'utf8').toString('utf8');

  test('finds each control character once, in code order', () => {
    expect(controlCharacters('a\tb\n\u001b[0m\n\u0000\t')).toBe('\u0000\t\n\u001b');
    expect(controlCharacters('plain "text" \\ ü \u007f \u2028')).toBe('');
  });

  test('writes every escape JSON.stringify writes, and UTF-8 of any length untouched', () => {
    let all = '';
    for (let code = 0; code < 32; code += 1) all += `${String.fromCharCode(code)}x`;
    const text = `${all} "q" \\ é 😀 \u2028 \u007f \u0080`;
    expect(quotedBytes(text).toString('utf8')).toBe(JSON.stringify(text));
  });

  test('writes any text as JSON.stringify does (generated, specials over-represented)', () => {
    const piece = fc.oneof(fc.string({ unit: 'binary' }), fc.constantFrom(...ODD, '\u001b'));
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 40 }), (pieces) => {
        const text = stored(pieces.join(''));
        expect(quotedBytes(text).toString('utf8')).toBe(JSON.stringify(text));
      }),
      { numRuns: 2000 },
    );
  });
});

describe('entryJson of log entries', () => {
  test('a long log text reads as JSON.stringify of the entry, every field in its place', () => {
    const text = 'x'.repeat(2000) + '\n"quoted" \\ back\tslash\r\n' + 'y'.repeat(2000);
    const entry: Entry = {
      seq: 7,
      time: '2026-12-07T06:00:00.000Z',
      kind: 'log',
      offset: 4096,
      text,
      step: 'load',
      correlationId: 'c-1',
    };
    expect(entryJson(entry)).toBe(JSON.stringify(entry));
    expect(JSON.parse(entryJson(entry))).toEqual(entry);
  });

  test('a long text with a lone surrogate or a rare control is still exact', () => {
    for (const odd of ['\ud800', '\u0002']) {
      const entry: Entry = {
        seq: 1,
        time: 't',
        kind: 'log',
        offset: 0,
        text: `${'z'.repeat(1500)}${odd}\n`,
      };
      expect(entryJson(entry)).toBe(JSON.stringify(entry));
    }
  });
});
