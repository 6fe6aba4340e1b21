import { RE2JS } from 're2js';
import { describe, expect, it } from 'vitest';
import type { LineHit } from '../../src/engine/search-hits.js';
import { MAX_HIT_CHARS, lineHits } from '../../src/engine/search-hits.js';
import { planSearch, re2Matcher } from '../../src/model/search-query.js';

// Where a search matches in an index document, line by line (docs/SEARCH.md).

const plain = (q: string) => planSearch(q, false).pattern;
const regex = (q: string) => planSearch(q, true).pattern;
const matched = (hit: LineHit) => hit.matches.map(([a, b]) => hit.text.slice(a, b));
const bytes = (text: string) => Buffer.byteLength(text, 'utf8');

describe('lineHits', () => {
  it('numbers lines from the first line given, and places each at its byte offset', () => {
    const text = 'a\nb needle\nc\nneedle d\nlast\n';
    const hits = lineHits(plain('needle'), text, 10, 100);
    expect(hits.map((hit) => [hit.line, hit.offset, hit.text])).toEqual([
      [11, 100 + bytes('a\n'), 'b needle'],
      [13, 100 + bytes('a\nb needle\nc\n'), 'needle d'],
    ]);
    expect(hits.map(matched)).toEqual([['needle'], ['needle']]);
    expect(hits.every((hit) => !hit.truncated && hit.textStart === 0)).toBe(true);
  });

  it('finds a match on the first and on the last line (with or without a newline)', () => {
    expect(
      lineHits(plain('needle'), 'needle first\nx', 1, 0).map((h) => [h.line, h.offset]),
    ).toEqual([[1, 0]]);
    expect(
      lineHits(plain('needle'), 'x\nlast needle', 1, 0).map((h) => [h.line, h.offset, h.text]),
    ).toEqual([[2, 2, 'last needle']]);
    expect(lineHits(plain('needle'), 'x\nlast needle\n', 1, 0).map((h) => h.text)).toEqual([
      'last needle',
    ]);
  });

  it('counts byte offsets of multibyte text, and match ranges in UTF-16 units', () => {
    const before = 'é日本😀\nzweite Zeile ü\n';
    const line = '😀 日本 needle é';
    const hits = lineHits(plain('needle'), `${before}${line}\nafter 😀 needle\n`, 1, 7);
    expect(hits).toHaveLength(2);
    expect(hits[0]).toEqual({
      line: 3,
      offset: 7 + bytes(before),
      text: line,
      textStart: 0,
      truncated: false,
      matches: [[line.indexOf('needle'), line.indexOf('needle') + 6]],
    });
    // 😀 is two UTF-16 units: "needle" starts at unit 6 of "after 😀 needle", not 5.
    expect(hits[1]).toMatchObject({
      line: 4,
      offset: 7 + bytes(`${before}${line}\n`),
      matches: [[9, 15]],
    });
    expect(hits.map(matched)).toEqual([['needle'], ['needle']]);
  });

  it('gives several matches on one line as one hit with several ranges', () => {
    const hits = lineHits(plain('ab'.repeat(2)), 'x abab y ABAB z abab\nabab', 1, 0);
    expect(hits).toHaveLength(2);
    expect(hits[0]!.matches).toEqual([
      [2, 6],
      [9, 13],
      [16, 20],
    ]);
    expect(matched(hits[0]!)).toEqual(['abab', 'ABAB', 'abab']);
    expect(hits[1]).toMatchObject({ line: 2, offset: 21, matches: [[0, 4]] });
  });

  it('leaves the \\r of a CRLF line ending out of the line and its matches', () => {
    const text = 'first\r\nfoo needle\r\nbar\r\n';
    const hits = lineHits(regex('needle\\s*'), text, 1, 0);
    expect(hits).toEqual([
      {
        line: 2,
        offset: bytes('first\r\n'),
        text: 'foo needle',
        textStart: 0,
        truncated: false,
        matches: [[4, 10]],
      },
    ]);
    // A \r inside a line is kept; only the one before the newline is dropped.
    expect(lineHits(plain('needle'), 'a\rneedle\r\n', 1, 0)[0]!.text).toBe('a\rneedle');
  });

  it('keeps a match that runs past the end of its line within the line', () => {
    const hits = lineHits(regex('needle\\s+next'), 'x needle\nnext line\n', 1, 0);
    expect(hits).toHaveLength(1);
    expect(hits[0]).toMatchObject({ line: 1, text: 'x needle', matches: [[2, 8]] });
  });

  it('anchors ^ and $ of a planned regex at each line of a document', () => {
    const text = 'x\nneedle here\nnot needle\nalso here\n';
    expect(lineHits(regex('^needle'), text, 1, 0).map((hit) => hit.line)).toEqual([2]);
    expect(lineHits(regex('here$'), text, 1, 0).map((hit) => hit.line)).toEqual([2, 4]);
  });

  it('gives no hit for empty matches or no match', () => {
    expect(lineHits(re2Matcher(RE2JS.compile('x*')), 'abc\ndef\n', 1, 0)).toEqual([]);
    expect(lineHits(plain('needle'), 'no match here\n', 1, 0)).toEqual([]);
    expect(lineHits(plain('needle'), '', 1, 0)).toEqual([]);
  });

  describe('long lines', () => {
    it('cuts a long line to 1000 characters around the first match', () => {
      const line = `${'a'.repeat(3000)}needle${'b'.repeat(3000)}`;
      const [hit] = lineHits(plain('needle'), `head\n${line}\ntail\n`, 1, 0);
      expect(MAX_HIT_CHARS).toBe(1000);
      expect(hit).toMatchObject({ line: 2, offset: 5, truncated: true });
      expect(hit!.text.length).toBe(1000);
      expect(line.slice(hit!.textStart, hit!.textStart + hit!.text.length)).toBe(hit!.text);
      // Some context before the match is kept.
      expect(hit!.textStart).toBeLessThan(3000);
      expect(hit!.textStart).toBeGreaterThan(3000 - 1000);
      expect(matched(hit!)).toEqual(['needle']);
    });

    it('cuts from the line start when the match is near it, and ends at the line end near the end', () => {
      const early = `xx needle ${'c'.repeat(5000)}`;
      const [a] = lineHits(plain('needle'), early, 1, 0);
      expect(a).toMatchObject({ textStart: 0, truncated: true, matches: [[3, 9]] });
      expect(a!.text).toBe(early.slice(0, 1000));
      const late = `${'c'.repeat(5000)} needle xx`;
      const [b] = lineHits(plain('needle'), `${late}\r\n`, 1, 0);
      expect(b!.truncated).toBe(true);
      expect(b!.text.length).toBeLessThanOrEqual(1000);
      expect(b!.text.endsWith(' needle xx')).toBe(true);
      expect(late.slice(b!.textStart)).toBe(b!.text);
      expect(matched(b!)).toEqual(['needle']);
    });

    it('keeps the ranges of matches inside the cut text, and drops those after it', () => {
      const line = `${'a'.repeat(2000)}needle ${'b'.repeat(300)} needle ${'c'.repeat(3000)} needle`;
      const [hit] = lineHits(plain('needle'), line, 1, 0);
      expect(hit!.truncated).toBe(true);
      expect(matched(hit!)).toEqual(['needle', 'needle']);
      for (const [start, end] of hit!.matches) {
        expect(start).toBeGreaterThanOrEqual(0);
        expect(end).toBeLessThanOrEqual(hit!.text.length);
      }
    });

    it('a line of exactly 1000 characters is not cut', () => {
      const line = `needle${'z'.repeat(994)}`;
      const [hit] = lineHits(plain('needle'), `${line}\n`, 1, 0);
      expect(hit).toMatchObject({ text: line, truncated: false, textStart: 0 });
      const [cut] = lineHits(plain('needle'), `${line}z\n`, 1, 0);
      expect(cut!.truncated).toBe(true);
    });

    it('never splits a surrogate pair where it cuts', () => {
      // ASCII before the emoji and between them and the match move both cuts by one unit.
      for (const prefix of [0, 1, 2, 3]) {
        for (const gap of [0, 1, 2, 3]) {
          for (const emoji of [0, 50, 99, 100, 101, 1500]) {
            const line = `${'x'.repeat(prefix)}${'😀'.repeat(emoji)}${'y'.repeat(gap)}needle${'😀'.repeat(1500)}`;
            const [hit] = lineHits(plain('needle'), line, 1, 0);
            const where = `prefix ${prefix}, gap ${gap}, ${emoji} emoji before`;
            expect(hit!.truncated, where).toBe(true);
            expect(hit!.text.length, where).toBeLessThanOrEqual(1000);
            expect(hit!.text.length, where).toBeGreaterThanOrEqual(998);
            expect(hit!.text.isWellFormed(), where).toBe(true);
            expect(line.slice(hit!.textStart, hit!.textStart + hit!.text.length), where).toBe(
              hit!.text,
            );
            expect(matched(hit!), where).toEqual(['needle']);
          }
        }
      }
    });
  });
});
