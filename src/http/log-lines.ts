import { TailwaterError } from '../model/errors.js';
import type { StreamKey } from '../model/stream-key.js';
import type { Store, StreamBounds } from '../store/store.js';
import type { LogRange } from './log-range.js';
import { queryParam, single } from './params.js';

/** Lines of the log asked for by number, 1-based: `first-last`, `first-`, or the last `count`. */
export type LineSpec = { first: number; last?: number } | { count: number };

const SPEC = /^(?:([1-9]\d{0,14})-([1-9]\d{0,14})?|-(\d{1,15}))$/;

/**
 * `?lines=<first>-<last>` (or `<first>-`, `-<count>`, the last count lines): lines of the log by
 * number, counted as the dashboard's `#L` links count them (docs/API.md, "Reading without
 * streaming"). Found by the store's line index, so line 900,000 of a long log costs what line
 * 1 does.
 */
export const linesQuery = queryParam(
  'lines',
  (query): LineSpec | undefined => {
    const raw = single(query, 'lines');
    if (raw === undefined) return undefined;
    const match = SPEC.exec(raw);
    const [, first, last, count] = match ?? [];
    if (match && count !== undefined) return { count: Number(count) };
    if (match && (last === undefined || Number(last) >= Number(first))) {
      return { first: Number(first), ...(last === undefined ? {} : { last: Number(last) }) };
    }
    throw new TailwaterError(
      'TW_BAD_QUERY',
      `lines must be <first>-<last>, <first>- or -<count>, lines counted from 1 and last not before first (was "${raw}").`,
    );
  },
  {
    type: 'string',
    pattern: SPEC.source,
    description:
      'Lines of the log to read, by number from 1 (`120-140`, `120-`, `-100` for the last 100); the answer is 200 with `Tailwater-Log-Range` and `Tailwater-Log-Lines`.',
  },
);

/** The header that says which lines of the log an answer holds: `lines <first>-<last>/<total>`. */
export const LOG_LINES_HEADER = 'Tailwater-Log-Lines';

/** Where lines asked for lie in the log, as it stood in `bounds`. */
export interface LineRange {
  range: LogRange;
  /** `lines <first>-<last>/<total>`, or `lines *\/<total>` when the log has none of them. */
  header: string;
}

/**
 * The bytes of the lines `spec` names in the log as it stood in `bounds` (text appended since
 * is not in it, as with bytes). A log that does not end with a line feed has a last line all
 * the same; one that does has no line after it.
 */
export async function lineRange(
  store: Store,
  key: StreamKey,
  spec: LineSpec,
  bounds: StreamBounds,
): Promise<LineRange> {
  const { logBytes: total, logLines: feeds } = bounds;
  const lastLineStart = await store.logLineStart(key, feeds + 1);
  const lines = feeds + (lastLineStart !== undefined && lastLineStart < total ? 1 : 0);
  const first = 'count' in spec ? Math.max(1, lines - spec.count + 1) : spec.first;
  const last = 'count' in spec ? lines : Math.min(spec.last ?? lines, lines);
  const none = { range: { type: 'unsatisfiable' } as const, header: `lines */${lines}` };
  if (first > lines || ('count' in spec && spec.count === 0)) return none;
  const start = await store.logLineStart(key, first);
  const end = last === lines ? total : await store.logLineStart(key, last + 1);
  if (start === undefined || end === undefined) return none;
  return { range: { type: 'range', start, end }, header: `lines ${first}-${last}/${lines}` };
}
