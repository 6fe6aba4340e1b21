import { runPath } from '../../../src/client/index.js';
import { MARKED_QUERY, PREFIX_HEADER, isMarked } from './line-prefix.js';

/** A page of history: big enough that a 100 MB log is a few requests, small enough to show early. */
export const HISTORY_PAGE_BYTES = 64 * 1024 * 1024;

/** Where a run is, as the view names it (`latest` allowed). */
export interface RunTarget {
  pipeline: string;
  runId: string;
}

/**
 * Reads a run's log text before its stream opens, handing each page's text to `onText` in order
 * (`marked`: with a mark before each entry's text, its time and step, docs/API.md);
 * resolves with the stream cursor the text ends at (for `?logAfter=`), or null when the server
 * could not give it whole (an error status, an older server): the caller then streams the whole
 * log instead, having let go of what `onText` was given.
 */
export type LogHistoryFn = (
  target: RunTarget,
  onText: (text: string, marked: boolean) => void,
  signal: AbortSignal,
) => Promise<string | null>;

const CURSOR_HEADER = 'Tailwater-Log-Cursor';
const RANGE_HEADER = 'Tailwater-Log-Range';
const LOG_RANGE = /^bytes (\d+)-(\d+)\/(\d+)$/;

/**
 * `log.txt` read in ranges of `pageBytes` (docs/API.md, "Reading without streaming"): the next
 * page is asked for as soon as the last one's headers say where it ends, so the network is busy
 * while a page is split into lines. The last page is the one that reaches the log's length as
 * the server answered it, where a log entry ends; its `Tailwater-Log-Cursor` names that entry.
 * Bytes are decoded as one stream, since a range may end inside a character. Cookies go with it
 * as with every request of the page (same origin). Each entry's text comes after a mark with
 * its time and step (`?entries=true`), so a page is longer than the bytes of the log it holds:
 * the range is asked for as `?bytes=`, whose answer is a 200 that says its range in
 * `Tailwater-Log-Range`, because a 206 is cut by the browser to its `Content-Range`'s length. A
 * server that knows neither parameter sends the whole log as plain text, which is taken as it is.
 * Each page's body is read as it arrives (see `readBody`).
 */
export function rangedLogHistory(server: string, pageBytes = HISTORY_PAGE_BYTES): LogHistoryFn {
  return async (target, onText, signal) => {
    const url = `${server}${runPath(target.pipeline, target.runId)}/log.txt?${MARKED_QUERY}`;
    const ask = (from: number) => fetch(`${url}&bytes=${from}-${from + pageBytes - 1}`, { signal });
    const decoder = new TextDecoder();
    let next = ask(0);
    for (;;) {
      const response = await next;
      if (response.status === 416) {
        // Nothing from there on: an empty log (the first page), or one that ended on a page edge.
        await response.body?.cancel();
        return response.headers.get(CURSOR_HEADER);
      }
      if (response.status !== 200) {
        await response.body?.cancel();
        return null;
      }
      // Without the header, the whole log: the server did not take the range.
      const range = LOG_RANGE.exec(response.headers.get(RANGE_HEADER) ?? '');
      const end = range ? Number(range[2]) + 1 : Number.POSITIVE_INFINITY;
      const last = !range || end >= Number(range[3]);
      if (!last) next = ask(end);
      const marked = isMarked(response.headers.get(PREFIX_HEADER));
      await readBody(response, decoder, (text) => onText(text, marked));
      if (last) {
        const rest = decoder.decode();
        if (rest !== '') onText(rest, marked);
        return response.headers.get(CURSOR_HEADER);
      }
    }
  };
}

/**
 * A body handed on as text piece by piece as it arrives, `decoder` kept open for what follows.
 * Not `arrayBuffer()` or `text()`: Chromium gathers a whole body for those at a cost of its own,
 * twice the time a reader takes for the same bytes (100 MB: 2.4 s against 1.1 s,
 * docs/BENCHMARKS.md, "Dashboard"), and the text is split into lines while the rest comes.
 */
async function readBody(
  response: Response,
  decoder: TextDecoder,
  onText: (text: string) => void,
): Promise<void> {
  if (!response.body) return;
  const reader = response.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    const text = decoder.decode(value, { stream: true });
    if (text !== '') onText(text);
  }
}
