import type { LiteralQuery } from '../model/search-query.js';

/**
 * A sealed block's search filter (docs/STORAGE.md): a Bloom filter of the trigrams of its text,
 * one hash each, ASCII letters folded to lower case. It answers "may this block hold the
 * query's literals?" with no false "no". It is sized against the block's compressed bytes, not
 * its text, so it is dense (a third or more of its bits set): a single trigram passes often,
 * but a literal's trigrams must all pass, and for a literal of a dozen characters the chance
 * that a block without it passes falls to a few in ten thousand.
 *
 * Only trigrams of ASCII characters are hashed on the query side: case folding outside ASCII
 * can change lengths, and such a trigram simply does not narrow the search.
 */

/** The filter's size, against the bytes of the compressed block. */
export const FILTER_BITS_PER_COMPRESSED_BYTE = 1;
const MIN_BITS = 512;

export function filterBitsFor(compressedBytes: number): number {
  const bits = Math.max(MIN_BITS, Math.ceil(compressedBytes * FILTER_BITS_PER_COMPRESSED_BYTE));
  return Math.ceil(bits / 8) * 8;
}

function fold(code: number): number {
  return code >= 65 && code <= 90 ? code + 32 : code;
}

/** The bit of a trigram: a 32-bit mix of its three UTF-16 units, reduced to [0, bits). */
function bitOf(a: number, b: number, c: number, bits: number): number {
  let h = Math.imul(a, 0x9e3779b1) ^ Math.imul(b, 0x85ebca77) ^ Math.imul(c, 0xc2b2ae3d);
  h ^= h >>> 15;
  h = Math.imul(h, 0x2c1b3c6d);
  h ^= h >>> 12;
  // Multiply-shift keeps the spread of the high bits: no modulo bias worth a thought at 2^32.
  return Math.floor(((h >>> 0) / 0x1_0000_0000) * bits);
}

/** Builds a filter of `bits` bits over the texts. */
export function buildFilter(texts: Iterable<string>, bits: number): Uint8Array {
  const filter = new Uint8Array(bits / 8);
  for (const text of texts) {
    if (text.length < 3) continue;
    let a = fold(text.charCodeAt(0));
    let b = fold(text.charCodeAt(1));
    for (let i = 2; i < text.length; i += 1) {
      const c = fold(text.charCodeAt(i));
      const bit = bitOf(a, b, c, bits);
      filter[bit >>> 3]! |= 1 << (bit & 7);
      a = b;
      b = c;
    }
  }
  return filter;
}

function isAscii(code: number): boolean {
  return code < 128;
}

/** Whether every ASCII trigram of `literal` is in the filter. */
function mayHoldLiteral(filter: Uint8Array, literal: string): boolean {
  const bits = filter.length * 8;
  for (let i = 2; i < literal.length; i += 1) {
    const a = literal.charCodeAt(i - 2);
    const b = literal.charCodeAt(i - 1);
    const c = literal.charCodeAt(i);
    if (!isAscii(a) || !isAscii(b) || !isAscii(c)) continue;
    const bit = bitOf(fold(a), fold(b), fold(c), bits);
    if ((filter[bit >>> 3]! & (1 << (bit & 7))) === 0) return false;
  }
  return true;
}

/** Whether a block with this filter may hold what the query asks for. */
export function mayMatch(filter: Uint8Array, query: LiteralQuery): boolean {
  if (query.type === 'literal') return mayHoldLiteral(filter, query.text);
  if (query.type === 'and') return query.parts.every((part) => mayMatch(filter, part));
  return query.parts.some((part) => mayMatch(filter, part));
}

/**
 * Whether a text holds the query's literals, ignoring case, as the full-text index of the hot
 * store answers it: the candidates a search then matches exactly.
 */
export function holdsLiterals(lowerText: string, query: LiteralQuery): boolean {
  if (query.type === 'literal') return lowerText.includes(query.text.toLowerCase());
  if (query.type === 'and') return query.parts.every((part) => holdsLiterals(lowerText, part));
  return query.parts.some((part) => holdsLiterals(lowerText, part));
}
