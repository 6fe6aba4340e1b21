import { RegExpParser } from '@eslint-community/regexpp';
import type { Alternative, Element } from '@eslint-community/regexpp/ast';
import { RE2JS } from 're2js';
import { TailwaterError } from './errors.js';

/**
 * A search's text, planned (docs/SEARCH.md): what the index is asked for, and the matcher that
 * then finds the exact places in the candidates it returns.
 *
 * The index holds trigrams, so it can only be asked for literals of three characters or more.
 * A plain search is one such literal. A regular expression is read for the literals every match
 * must contain (`OutOfMemory(Error)?` needs "OutOfMemory"; `(foo|bar)baz` needs "baz" and one
 * of "foo" or "bar"); one that needs none (`.*`, `\d+`) would be a scan of everything, and is
 * refused. Matching is done by RE2 (re2js), whose time is linear in the text, so no pattern can
 * stall the server however it backtracks in other engines.
 */
export type LiteralQuery =
  | { readonly type: 'literal'; readonly text: string }
  | { readonly type: 'and'; readonly parts: readonly LiteralQuery[] }
  | { readonly type: 'or'; readonly parts: readonly LiteralQuery[] };

/** Where a search matches in a text: [start, end) in UTF-16 units, in order, none empty. */
export interface TextMatcher {
  matches(text: string): Iterable<[number, number]>;
}

export interface PlannedSearch {
  readonly index: LiteralQuery;
  /** A matcher of the whole pattern: case-insensitive, `^`/`$` at line ends. */
  readonly pattern: TextMatcher;
}

/**
 * A regular expression run by RE2: linear in the text, so safe for any pattern a user types
 * (about 15 MB/s here).
 */
export function re2Matcher(pattern: RE2JS): TextMatcher {
  return {
    *matches(text) {
      const matcher = pattern.matcher(text);
      while (matcher.find()) {
        if (matcher.end() > matcher.start()) yield [matcher.start(), matcher.end()];
      }
    },
  };
}

/**
 * A literal, found by the engine's own RegExp: a pattern without quantifiers cannot backtrack,
 * and it runs many times faster than RE2 in JavaScript.
 */
function literalMatcher(q: string): TextMatcher {
  // The syntax characters, escaped as Unicode mode allows (`-` is literal outside a class).
  const pattern = new RegExp(q.replace(/[\\^$.*+?()[\]{}|/]/g, '\\$&'), 'giu');
  return {
    *matches(text) {
      for (const match of text.matchAll(pattern)) {
        yield [match.index, match.index + match[0].length];
      }
    },
  };
}

/** Case-insensitive; `^` and `$` at each line's start and end (a document holds many lines). */
const FLAGS = RE2JS.CASE_INSENSITIVE | RE2JS.MULTILINE;

/** The fewest characters the trigram index can look for. */
export const MIN_LITERAL_CHARS = 3;
/** Longest search text accepted (characters). */
export const MAX_QUERY_CHARS = 1024;
/** At most this many literals go to the index; the rest are left to the matcher. */
const MAX_LITERALS = 16;

function badQuery(message: string): TailwaterError {
  return new TailwaterError('TW_BAD_QUERY', message);
}

export function planSearch(q: string, regex: boolean): PlannedSearch {
  if ([...q].length > MAX_QUERY_CHARS) {
    throw badQuery(`q: at most ${MAX_QUERY_CHARS} characters.`);
  }
  if (!regex) {
    if ([...q].length < MIN_LITERAL_CHARS) {
      throw badQuery(`q: a search needs ${MIN_LITERAL_CHARS} characters at least.`);
    }
    return { index: { type: 'literal', text: q }, pattern: literalMatcher(q) };
  }
  let pattern: RE2JS;
  try {
    pattern = RE2JS.compile(q, FLAGS);
  } catch (error) {
    throw badQuery(
      `q: not a regular expression this server runs (RE2 syntax): ${messageOf(error)}`,
    );
  }
  const index = requiredLiterals(q);
  if (index === undefined) {
    throw badQuery(
      `q: the regular expression must contain a literal of ${MIN_LITERAL_CHARS} characters or more that every match holds (e.g. "Error" in "Out\\w+Error"), so that the index can be used.`,
    );
  }
  return { index, pattern: re2Matcher(pattern) };
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The literals every match of `source` holds, or undefined if it needs none the index can use. */
export function requiredLiterals(source: string): LiteralQuery | undefined {
  let alternatives: Alternative[];
  try {
    // Annex B syntax: lenient, as users write patterns; RE2 has already accepted it.
    alternatives = new RegExpParser({ ecmaVersion: 2025 }).parsePattern(source).alternatives;
  } catch {
    return undefined;
  }
  const query = anyOf(alternatives);
  return query && limitLiterals(query);
}

function anyOf(alternatives: readonly Alternative[]): LiteralQuery | undefined {
  const parts: LiteralQuery[] = [];
  for (const alternative of alternatives) {
    const need = allOf(alternative.elements);
    // One branch that needs nothing makes the whole alternation need nothing.
    if (need === undefined) return undefined;
    parts.push(need);
  }
  return parts.length === 1 ? parts[0] : { type: 'or', parts };
}

function allOf(elements: readonly Element[]): LiteralQuery | undefined {
  const parts: LiteralQuery[] = [];
  let run = '';
  const endRun = () => {
    if ([...run].length >= MIN_LITERAL_CHARS) parts.push({ type: 'literal', text: run });
    run = '';
  };
  for (const element of elements) {
    const char = literalChar(element);
    if (char !== undefined) {
      run += char;
      continue;
    }
    // `^` and `$` match no character: the literal goes on across them (a `\b` ends it, which
    // only makes the index ask for less).
    if (element.type === 'Assertion' && (element.kind === 'start' || element.kind === 'end')) {
      continue;
    }
    endRun();
    if (element.type === 'Group' || element.type === 'CapturingGroup') {
      const need = anyOf(element.alternatives);
      if (need) parts.push(need);
    } else if (element.type === 'Quantifier' && element.min >= 1) {
      const need = allOf([element.element]);
      if (need) parts.push(need);
    }
  }
  endRun();
  if (parts.length === 0) return undefined;
  return parts.length === 1 ? parts[0] : { type: 'and', parts };
}

/** The one character an element matches (case aside), if it matches exactly one. */
function literalChar(element: Element): string | undefined {
  if (element.type === 'Character') return String.fromCodePoint(element.value);
  if (
    element.type === 'CharacterClass' &&
    !element.negate &&
    element.elements.length === 1 &&
    element.elements[0]!.type === 'Character'
  ) {
    return String.fromCodePoint(element.elements[0]!.value);
  }
  return undefined;
}

/**
 * Keeps the index query small: of an AND of too many literals, the longest are kept (fewer
 * literals only let more candidates through to the matcher). An OR cannot drop a branch.
 */
function limitLiterals(query: LiteralQuery): LiteralQuery {
  if (count(query) <= MAX_LITERALS) return query;
  if (query.type === 'and') {
    const kept: LiteralQuery[] = [];
    let literals = 0;
    for (const part of [...query.parts].sort((a, b) => weight(b) - weight(a))) {
      if (literals + count(part) > MAX_LITERALS) continue;
      kept.push(part);
      literals += count(part);
    }
    if (kept.length > 0) return kept.length === 1 ? kept[0]! : { type: 'and', parts: kept };
  }
  throw badQuery(
    `q: the regular expression asks the index for more than ${MAX_LITERALS} literals.`,
  );
}

function count(query: LiteralQuery): number {
  return query.type === 'literal' ? 1 : query.parts.reduce((n, part) => n + count(part), 0);
}

function weight(query: LiteralQuery): number {
  return query.type === 'literal' ? query.text.length : Math.min(...query.parts.map(weight));
}

/** Every literal of a query, as the index is asked for them. */
export function literalsOf(query: LiteralQuery): string[] {
  return query.type === 'literal' ? [query.text] : query.parts.flatMap(literalsOf);
}
