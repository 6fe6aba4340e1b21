import { describe, expect, test, vi } from 'vitest';
import { LogBuffer, linesOf } from '../src/run/log-buffer.js';
import { findMatches, IncrementalSearch, plainText } from '../src/run/log-search.js';

describe('LogBuffer', () => {
  test('joins text split across appends into lines, in place', () => {
    const buffer = new LogBuffer();
    buffer.append('one\ntw');
    expect(buffer.toArray()).toEqual(['one', 'tw']);
    buffer.append('o\n');
    expect(buffer.toArray()).toEqual(['one', 'two']);
    buffer.append('\n\nthree');
    expect(buffer.toArray()).toEqual(['one', 'two', '', '', 'three']);
    buffer.append('');
    buffer.append(' and more\n');
    expect(buffer.toArray()).toEqual(['one', 'two', '', '', 'three and more']);
    expect(buffer.length).toBe(5);
    expect(buffer.line(1)).toBe('two');
    expect(buffer.line(5)).toBe('');
  });

  test('clear() empties it, and the next text starts a new line', () => {
    const buffer = new LogBuffer();
    buffer.append('half a line');
    buffer.clear();
    expect(buffer.toArray()).toEqual([]);
    buffer.append('new\n');
    expect(buffer.toArray()).toEqual(['new']);
  });
});

describe('LogBuffer past its limit', () => {
  test('lets the oldest lines go, a tenth more than needed, and counts them', () => {
    const buffer = new LogBuffer(100); // characters, newlines included
    for (let n = 1; n <= 10; n += 1) buffer.append(`line ${String(n).padStart(3, '0')}\n`); // 9 each
    expect(buffer.length).toBe(10);
    expect(buffer.dropped).toBe(0);
    buffer.append('line 011\nline 012\n'); // 108 characters: over
    // Down to at most 90: 10 lines of 9.
    expect(buffer.length).toBe(10);
    expect(buffer.dropped).toBe(2);
    expect(buffer.line(0)).toBe('line 003');
    expect(buffer.line(buffer.length - 1)).toBe('line 012');
    buffer.clear();
    expect(buffer.dropped).toBe(0);
  });

  test('keeps the line being written, however long', () => {
    const buffer = new LogBuffer(10);
    buffer.append('short\n');
    buffer.append('x'.repeat(50));
    expect(buffer.toArray()).toEqual(['x'.repeat(50)]);
    expect(buffer.dropped).toBe(1);
    buffer.append('y\n');
    expect(buffer.toArray()).toEqual([`${'x'.repeat(50)}y`]);
  });
});

describe('findMatches', () => {
  test('finds every occurrence, ignoring case, as ranges of the plain text', () => {
    const lines = ['abcABC', 'none', '\u001b[1mab\u001b[0mc!'];
    expect(findMatches(linesOf(lines), 'abc').matches).toEqual([
      { line: 0, start: 0, end: 3 },
      { line: 0, start: 3, end: 6 },
      { line: 2, start: 0, end: 3 },
    ]);
    expect(plainText(lines[2]!)).toBe('abc!');
  });

  test('takes the query literally, not as a pattern', () => {
    expect(findMatches(linesOf(['a.c abc (x)']), '.').matches).toEqual([
      { line: 0, start: 1, end: 2 },
    ]);
    expect(findMatches(linesOf(['a.c abc (x)']), '(x)').matches).toEqual([
      { line: 0, start: 8, end: 11 },
    ]);
  });

  test('stops at the limit and says there are more', () => {
    const result = findMatches(linesOf(['x x x', 'x x']), 'x', 4);
    expect(result.matches).toHaveLength(4);
    expect(result.truncated).toBe(true);
    expect(findMatches(linesOf(['x x x', 'x']), 'x', 4).truncated).toBe(false);
    expect(findMatches(linesOf(['x']), '')).toEqual({ matches: [], truncated: false });
  });
});

describe('IncrementalSearch', () => {
  /** Asks the incremental search and a full one the same question: they must agree. */
  function agrees(search: IncrementalSearch, buffer: LogBuffer, query: string) {
    expect(search.find(buffer, query)).toEqual(findMatches(buffer, query));
  }

  test('finds what a full search finds as the log grows, a line continued, lines let go or cleared', () => {
    const buffer = new LogBuffer(200);
    const search = new IncrementalSearch();
    buffer.append('an error here\nfine\nerr');
    agrees(search, buffer, 'error');
    buffer.append('or continued, and another error\n'); // the last line grew into two matches
    agrees(search, buffer, 'error');
    for (let n = 0; n < 12; n += 1) buffer.append(`line ${n} error\n`); // past 200: lines let go
    expect(buffer.dropped).toBeGreaterThan(0);
    agrees(search, buffer, 'error');
    agrees(search, buffer, 'line 1'); // another query
    const before = buffer.length;
    buffer.clear();
    // A new log, longer than the one searched before: it must be searched from its start.
    buffer.append('line 1 reborn\n');
    buffer.append('ok\n'.repeat(before + 5));
    agrees(search, buffer, 'line 1');
    buffer.append('line 1 again\n');
    agrees(search, buffer, 'line 1');
  });

  test('searches a cleared log from its start, even when it grows past the old one', () => {
    const buffer = new LogBuffer();
    const search = new IncrementalSearch();
    buffer.append('match one\nmatch two\nnothing\n');
    agrees(search, buffer, 'match');
    buffer.clear(); // a gap reset
    buffer.append('nothing\n'.repeat(5) + 'match again\n');
    agrees(search, buffer, 'match');
    expect(search.find(buffer, 'match').matches).toEqual([{ line: 5, start: 0, end: 5 }]);
  });

  test('scans only what is new when asked again with the same query', () => {
    const buffer = new LogBuffer();
    const search = new IncrementalSearch();
    buffer.append('x\n'.repeat(1000));
    expect(search.find(buffer, 'x').matches).toHaveLength(1000);
    buffer.append('x\n');
    // The line it saw last (it may have grown) and the new one: nothing before them.
    const read = vi.spyOn(buffer, 'line');
    expect(search.find(buffer, 'x').matches).toHaveLength(1001);
    expect(read.mock.calls.map(([index]) => index)).toEqual([999, 1000]);
  });
});
