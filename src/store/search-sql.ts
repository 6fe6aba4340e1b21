import type { LiteralQuery } from '../model/search-query.js';

/**
 * The pieces of SQL both stores build from a search: the index query and the pipeline glob.
 * Everything here is a parameter or escaped; nothing a user typed reaches SQL as syntax.
 */

/** An FTS5 query (trigram tokenizer) that holds the literals: each a quoted phrase. */
export function fts5Query(query: LiteralQuery): string {
  if (query.type === 'literal') return `"${query.text.replaceAll('"', '""')}"`;
  const joined = query.parts.map(fts5Query).join(query.type === 'and' ? ' AND ' : ' OR ');
  return `(${joined})`;
}

/**
 * A PostgreSQL condition on `column` that holds the literals (ILIKE, which pg_trgm's GIN index
 * answers), with its parameters numbered from `firstParam`.
 */
export function ilikeCondition(
  column: string,
  query: LiteralQuery,
  firstParam: number,
): { sql: string; params: string[] } {
  const params: string[] = [];
  const build = (part: LiteralQuery): string => {
    if (part.type === 'literal') {
      params.push(`%${escapeLike(part.text)}%`);
      return `${column} ILIKE $${firstParam + params.length - 1}`;
    }
    return `(${part.parts.map(build).join(part.type === 'and' ? ' AND ' : ' OR ')})`;
  };
  return { sql: build(query), params };
}

/** LIKE with `\` as its escape: `%`, `_` and `\` stand for themselves. */
export function escapeLike(text: string): string {
  return text.replace(/[\\%_]/g, (c) => `\\${c}`);
}

/** A pipeline glob (`*` any run of characters, nothing else special) as a LIKE pattern. */
export function globToLike(glob: string): string {
  return glob.split('*').map(escapeLike).join('%');
}

/** The same as an SQLite GLOB pattern (case-sensitive, as names are compared). */
export function globToSqliteGlob(glob: string): string {
  return glob.replace(/[?[\]]/g, (c) => `[${c}]`);
}
