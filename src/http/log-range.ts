import { TailwaterError } from '../model/errors.js';
import { queryParam, single } from './params.js';

/**
 * The byte range of the log a `log.txt` request asks for: docs/API.md, "Reading without
 * streaming". It comes as a `Range: bytes=…` header (one range only) or, for an answer whose
 * body is more than the log's bytes (prefixed lines, entry marks), as `?bytes=…`.
 */
export type LogRange =
  | { type: 'whole' }
  /** Bytes [start, end) of the log. */
  | { type: 'range'; start: number; end: number }
  | { type: 'unsatisfiable' };

/** `<first>-<last>`, `<first>-` or `-<n>`: what follows `bytes=` in a Range header. */
const SPEC = /^(\d{0,15})-(\d{0,15})$/;

/** A range spec's bounds as given (undefined where left out), or undefined if it is not one. */
function specOf(spec: string): { first?: number; last?: number } | undefined {
  const match = SPEC.exec(spec);
  if (!match) return undefined;
  const [, first = '', last = ''] = match;
  if (first === '' && last === '') return undefined;
  if (first !== '' && last !== '' && Number(last) < Number(first)) return undefined;
  return {
    ...(first === '' ? {} : { first: Number(first) }),
    ...(last === '' ? {} : { last: Number(last) }),
  };
}

/** The bytes a spec names in a log of `total` bytes. */
function rangeOf(spec: { first?: number; last?: number }, total: number): LogRange {
  if (spec.first === undefined) {
    // A suffix: the last N bytes.
    const count = spec.last ?? 0;
    if (count === 0 || total === 0) return { type: 'unsatisfiable' };
    return { type: 'range', start: Math.max(0, total - count), end: total };
  }
  if (spec.first >= total) return { type: 'unsatisfiable' };
  const end = spec.last === undefined ? total : Math.min(spec.last + 1, total);
  return { type: 'range', start: spec.first, end };
}

/**
 * The range of a `Range` header. Anything this server does not serve as a range — another unit,
 * several ranges, a malformed value, or an `If-Range` (it gives no validators, so none can match)
 * — is answered with the whole log, as HTTP lets a server do.
 */
export function parseLogRange(
  range: string | undefined,
  ifRange: string | undefined,
  total: number,
): LogRange {
  if (range === undefined || ifRange !== undefined) return { type: 'whole' };
  const value = range.replace(/\s+/g, '');
  const spec = value.startsWith('bytes=') ? specOf(value.slice('bytes='.length)) : undefined;
  return spec ? rangeOf(spec, total) : { type: 'whole' };
}

/**
 * `?bytes=<first>-<last>` (or `<first>-`, `-<n>`), the spec of a Range header as a query
 * parameter: bytes of the log, whatever the answer puts around them. A `Range` counts the bytes
 * of the body, so a 206 of a longer body is cut to the range's length by browsers and caches
 * (Chromium does); an answer to `?bytes=` is a 200 that says its range in `Tailwater-Log-Range`.
 * Unlike a header, a parameter of our own that is not a range is refused.
 */
export const bytesQuery = queryParam(
  'bytes',
  (query): ((total: number) => LogRange) | undefined => {
    const raw = single(query, 'bytes');
    if (raw === undefined) return undefined;
    const spec = specOf(raw);
    if (!spec) {
      throw new TailwaterError(
        'TW_BAD_QUERY',
        `bytes must be <first>-<last>, <first>- or -<count>, with last not before first (was "${raw}").`,
      );
    }
    return (total) => rangeOf(spec, total);
  },
  {
    type: 'string',
    pattern: SPEC.source,
    description:
      'Bytes of the log to read, as in a Range header (`0-1023`, `1024-`, `-4096`), for answers with prefixes or marks; the answer is 200 with `Tailwater-Log-Range`.',
  },
);

/** The header that says which bytes of the log an answer holds: `bytes <first>-<last>/<total>`. */
export const LOG_RANGE_HEADER = 'Tailwater-Log-Range';

/** `bytes <first>-<last>/<total>`, or `bytes *\/<total>` for a range past the end. */
export function contentRange(range: LogRange, total: number): string {
  return range.type === 'range'
    ? `bytes ${range.start}-${range.end - 1}/${total}`
    : `bytes */${total}`;
}
