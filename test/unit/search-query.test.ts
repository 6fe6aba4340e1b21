import { describe, expect, it } from 'vitest';
import type { LiteralQuery } from '../../src/model/search-query.js';
import {
  MAX_QUERY_CHARS,
  literalsOf,
  planSearch,
  requiredLiterals,
} from '../../src/model/search-query.js';

// The search text's rules (docs/SEARCH.md): what the trigram index is asked for, and what is refused.

const lit = (text: string): LiteralQuery => ({ type: 'literal', text });
const and = (...parts: LiteralQuery[]): LiteralQuery => ({ type: 'and', parts });
const or = (...parts: LiteralQuery[]): LiteralQuery => ({ type: 'or', parts });
const BAD_QUERY = expect.objectContaining({ code: 'TW_BAD_QUERY' }) as unknown as Error;

const finds = (q: string, regex: boolean, text: string) =>
  [...planSearch(q, regex).pattern.matches(text)].length > 0;

describe('planSearch: plain text', () => {
  it('asks the index for the text itself, as one literal', () => {
    expect(planSearch('timeout', false).index).toEqual(lit('timeout'));
    expect(planSearch('a.b*c (d)', false).index).toEqual(lit('a.b*c (d)'));
  });

  it('matches the text literally, not as a pattern', () => {
    expect(finds('a.b*c', false, 'x A.B*C y')).toBe(true);
    expect(finds('a.b*c', false, 'axbbc')).toBe(false);
    expect(finds('(x|y)', false, 'x')).toBe(false);
    expect(finds('(x|y)', false, 'f(x|y)')).toBe(true);
    expect(finds('\\d+', false, 'pattern \\d+ quoted')).toBe(true);
    expect(finds('\\d+', false, '123')).toBe(false);
  });

  it('matches case-insensitively, ASCII and beyond', () => {
    expect(finds('Timeout', false, 'TIMEOUT after')).toBe(true);
    expect(finds('TIMEOUT', false, 'a timeout')).toBe(true);
    expect(finds('école', false, 'ÉCOLE')).toBe(true);
  });

  it('refuses a text shorter than three characters, counted in code points', () => {
    for (const q of ['', 'a', 'ab', '日本', '😀😀', 'é1']) {
      expect(() => planSearch(q, false), JSON.stringify(q)).toThrow(BAD_QUERY);
    }
    for (const q of ['abc', '日本語', '😀😀😀', 'é12']) {
      expect(planSearch(q, false).index, JSON.stringify(q)).toEqual(lit(q));
    }
  });

  it('refuses a text over 1024 characters (code points), plain or regex', () => {
    expect(MAX_QUERY_CHARS).toBe(1024);
    expect(planSearch('a'.repeat(1024), false).index).toEqual(lit('a'.repeat(1024)));
    expect(() => planSearch('a'.repeat(1025), false)).toThrow(BAD_QUERY);
    expect(() => planSearch('a'.repeat(1025), true)).toThrow(BAD_QUERY);
    // 1024 emoji are 2048 UTF-16 units, and still 1024 characters.
    expect(() => planSearch('😀'.repeat(1024), false)).not.toThrow();
    expect(() => planSearch('😀'.repeat(1025), false)).toThrow(BAD_QUERY);
  });
});

describe('planSearch: regular expressions', () => {
  it('matches with RE2, case-insensitively', () => {
    expect(finds('out\\w+error', true, 'java.lang.OutOfMemoryError')).toBe(true);
    expect(finds('out\\w+error', true, 'out error')).toBe(false);
    expect(finds('(timeout|refused) after', true, 'Connection REFUSED after 3 tries')).toBe(true);
    expect(finds('(timeout|refused) after', true, 'retry after 3')).toBe(false);
  });

  it('refuses patterns that need no literal of three characters', () => {
    for (const q of [
      '.*',
      '\\d+',
      'ab',
      'a.b.c',
      'abc|de',
      '(abc)*',
      '(abc)?',
      '[abc]{3}',
      '\\w{10}',
    ]) {
      expect(() => planSearch(q, true), q).toThrow(BAD_QUERY);
    }
  });

  it('refuses backreferences and lookarounds, which RE2 does not run', () => {
    for (const q of [
      '(a)\\1',
      '(abc)\\1',
      '(?=abc)abc',
      '(?!abc)def',
      '(?<=abc)def',
      '(?<!abc)def',
    ]) {
      expect(() => planSearch(q, true), q).toThrow(BAD_QUERY);
    }
  });

  it('refuses what is not a regular expression', () => {
    for (const q of ['(abc', 'abc)', '[abc', 'abc{2,1}', '*abc']) {
      expect(() => planSearch(q, true), q).toThrow(BAD_QUERY);
    }
  });
});

describe('requiredLiterals', () => {
  it('finds the literals every match holds', () => {
    const cases: [string, LiteralQuery][] = [
      ['OutOfMemory(Error)?', lit('OutOfMemory')],
      ['(foo|bar)baz', and(or(lit('foo'), lit('bar')), lit('baz'))],
      ['out\\w+error', and(lit('out'), lit('error'))],
      ['(timeout|refused) after', and(or(lit('timeout'), lit('refused')), lit(' after'))],
      ['(?:foo|bar)(baz|qux)', and(or(lit('foo'), lit('bar')), or(lit('baz'), lit('qux')))],
      ['^ERROR:', lit('ERROR:')],
      ['^abc$', lit('abc')],
      ['[x]yz', lit('xyz')],
      ['a\\.b\\.c', lit('a.b.c')],
      ['(abc)+', lit('abc')],
      ['(abc){2}', lit('abc')],
      ['(abc){0,3}def', lit('def')],
      ['ab.cde', lit('cde')],
      ['日本語\\d+', lit('日本語')],
      ['😀😀😀', lit('😀😀😀')],
      ['\\bword\\b', lit('word')],
      ['error (code|status) \\d+', and(lit('error '), or(lit('code'), lit('status')))],
    ];
    for (const [source, expected] of cases) {
      expect(requiredLiterals(source), source).toEqual(expected);
    }
  });

  it('needs nothing when any branch or part can be empty or unknown', () => {
    for (const source of [
      '.*',
      '\\d+',
      'ab',
      'abc|de',
      '(abc)*',
      '(abc)?',
      '[ab]cd',
      'a.b.c',
      '(',
    ]) {
      expect(requiredLiterals(source), source).toBeUndefined();
    }
  });

  it('keeps the longest 16 literals of a long AND, and refuses an OR of more than 16', () => {
    const words = Array.from({ length: 17 }, (_, i) => String.fromCharCode(97 + i).repeat(3 + i));
    const kept = literalsOf(requiredLiterals(words.join('.'))!);
    expect(kept).toHaveLength(16);
    expect(kept).not.toContain(words[0]);
    expect(new Set(kept)).toEqual(new Set(words.slice(1)));
    // Every AND part still holds for each match, so the plan is accepted.
    expect(literalsOf(planSearch(words.join('.'), true).index)).toHaveLength(16);
    const branches = `(${words.join('|')})`;
    expect(() => requiredLiterals(branches)).toThrow(BAD_QUERY);
    expect(() => planSearch(branches, true)).toThrow(BAD_QUERY);
    // Sixteen branches are fine.
    expect(literalsOf(requiredLiterals(`(${words.slice(1).join('|')})`)!)).toHaveLength(16);
  });

  it('plans a regex with the literals requiredLiterals finds', () => {
    expect(planSearch('(foo|bar)baz', true).index).toEqual(requiredLiterals('(foo|bar)baz'));
  });
});
