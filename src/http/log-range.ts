/**
 * The byte range a `log.txt` request asks for (`Range: bytes=…`, one range only): docs/API.md,
 * "Reading without streaming". Anything this server does not serve as a range — another unit,
 * several ranges, a malformed value, or an `If-Range` (it gives no validators, so none can match)
 * — is answered with the whole log, as HTTP lets a server do.
 */
export type LogRange =
  | { type: 'whole' }
  /** Bytes [start, end) of the log. */
  | { type: 'range'; start: number; end: number }
  | { type: 'unsatisfiable' };

const SINGLE_RANGE = /^bytes=(\d{0,15})-(\d{0,15})$/;

export function parseLogRange(
  range: string | undefined,
  ifRange: string | undefined,
  total: number,
): LogRange {
  if (range === undefined || ifRange !== undefined) return { type: 'whole' };
  const match = SINGLE_RANGE.exec(range.replace(/\s+/g, ''));
  if (!match) return { type: 'whole' };
  const [, first = '', last = ''] = match;
  if (first === '' && last === '') return { type: 'whole' };
  if (first === '') {
    // A suffix: the last N bytes.
    const count = Number(last);
    if (count === 0 || total === 0) return { type: 'unsatisfiable' };
    return { type: 'range', start: Math.max(0, total - count), end: total };
  }
  const start = Number(first);
  if (last !== '' && Number(last) < start) return { type: 'whole' };
  if (start >= total) return { type: 'unsatisfiable' };
  const end = last === '' ? total : Math.min(Number(last) + 1, total);
  return { type: 'range', start, end };
}
