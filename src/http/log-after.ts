import type { StartPosition } from '../engine/hub.js';
import { parseStreamCursor } from '../model/cursor.js';
import type { StreamKey } from '../model/stream-key.js';
import type { Store } from '../store/store.js';
import { z } from 'zod';
import { queryParam, queryValue, single } from './params.js';

type Query = Record<string, string | string[] | undefined>;

/**
 * `?logAfter=<cursor>` on a run's stream: the viewer already has the log's text up to that
 * entry (read from `log.txt`, whose `Tailwater-Log-Cursor` names it), so log entries at or
 * before it are left out and everything else comes as usual (docs/API.md, "Streaming").
 */
export const logAfterQuery = z.object({
  logAfter: queryParam(
    'logAfter',
    (query) => {
      const raw = single(query, 'logAfter');
      return raw === undefined ? undefined : parseStreamCursor(raw, 'logAfter cursor');
    },
    {
      type: 'string',
      description:
        'Leave out log entries up to this cursor (the `Tailwater-Log-Cursor` of a `log.txt` read); other entries are sent as usual.',
    },
  ),
});

/**
 * The seq `?logAfter=` leaves log entries out up to (EntryFilter's `logThroughSeq`), or undefined. A cursor this store cannot place (of another
 * epoch, or past the stream's end: the store was replaced or restored since the text was read)
 * names another log's text, and so does any stream that starts over with `gap reset`: then the
 * whole log is sent, which is what a viewer that clears its view on the reset needs.
 */
export async function logAfterSeq(
  store: Store,
  key: StreamKey,
  query: Query,
  start: StartPosition,
): Promise<number | undefined> {
  const cursor = queryValue(logAfterQuery, query, 'logAfter');
  if (cursor === undefined) return undefined;
  const { epoch, lastSeq } = await store.bounds(key);
  const placeable = (at: { seq: number; epoch?: string | undefined }) =>
    (at.epoch === undefined || at.epoch === epoch) && at.seq <= lastSeq;
  if (!placeable(cursor)) return undefined;
  if (start.type === 'unplaceable' || (start.type === 'after' && !placeable(start))) {
    return undefined;
  }
  return cursor.seq;
}
