import { runPath } from '../../../src/client/index.js';
import { MARKED_QUERY, PREFIX_HEADER, isMarked } from './line-prefix.js';

/**
 * A page of history: a 100 MB log is two requests. Pages are read as they arrive, so their size
 * does not hold back the first lines; under DevTools' network agent a page of 16 MiB cost twice a
 * page of 64 MiB per byte (docs/BENCHMARKS.md, "Dashboard").
 */
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
  near?: LineWanted,
) => Promise<string | null>;

/**
 * A line the view is to show first (`#L…`). If the log before it is long, the history may begin
 * near it instead of at the start: `onStart` is told the number of the first line it reads,
 * before any text.
 */
export interface LineWanted {
  line: number;
  onStart(line: number): void;
}

/**
 * How much log before a wanted line is read anyway, and how many lines before it a read that
 * starts near it begins with. Under this much, a link opens with the whole log (sections and all)
 * about as fast as without it.
 */
export const JUMP_BYTES = 16 * 1024 * 1024;
export const LINES_BEFORE = 2000;

const CURSOR_HEADER = 'Tailwater-Log-Cursor';
const LINES_HEADER = 'Tailwater-Log-Lines';
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
export function rangedLogHistory(
  server: string,
  {
    pageBytes = HISTORY_PAGE_BYTES,
    jumpBytes = JUMP_BYTES,
    linesBefore = LINES_BEFORE,
  }: { pageBytes?: number; jumpBytes?: number; linesBefore?: number } = {},
): LogHistoryFn {
  return async (target, onText, signal, near) => {
    const url = `${server}${runPath(target.pipeline, target.runId)}/log.txt?${MARKED_QUERY}`;
    const ask = (from: number) => fetch(`${url}&bytes=${from}-${from + pageBytes - 1}`, { signal });
    const decoder = new TextDecoder();
    const jump = near ? await lineToStartAt(url, near.line - linesBefore, jumpBytes, signal) : null;
    let from = 0;
    if (jump !== null) {
      // The lines around the wanted one first, in a short answer (drawn as soon as it is in),
      // then the rest of the log by pages from where it ended.
      const response = await fetch(`${url}&lines=${jump}-${jump + 2 * linesBefore}`, { signal });
      const range = LOG_RANGE.exec(response.headers.get(RANGE_HEADER) ?? '');
      if (response.status === 200 && response.headers.get(LINES_HEADER) && range) {
        near!.onStart(jump);
        const marked = isMarked(response.headers.get(PREFIX_HEADER));
        await readBody(response, decoder, (text) => onText(text, marked));
        from = Number(range[2]) + 1;
        if (from >= Number(range[3])) return response.headers.get(CURSOR_HEADER);
        // A moment for the view to draw them and go to the line (a few frames of its own)
        // before the rest of the log keeps the page busy.
        await new Promise((resolve) => setTimeout(resolve, SHOW_LINE_MS));
      } else {
        // Not as the line's own answer said (the run deleted meanwhile?): from the start, then.
        await response.body?.cancel();
      }
    }
    let next = ask(from);
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
  // Reads of a body already arrived resolve one after another without leaving the task: the page
  // is drawn only when the loop lets it. It does after the first text (the first screen, a
  // linked line) and then now and then, not every frame: each drawing of the log costs time
  // that reading a long history needs more.
  let turn = Number.NEGATIVE_INFINITY;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    const text = decoder.decode(value, { stream: true });
    if (text !== '') onText(text);
    if (performance.now() - turn > DRAW_EVERY_MS) {
      await new Promise((resolve) => setTimeout(resolve, 0));
      turn = performance.now();
    }
  }
}

const DRAW_EVERY_MS = 100;
const SHOW_LINE_MS = 250;

/**
 * `from`, the line to read a log from for a line after it to be shown at once, if more than
 * `jumpBytes` of the log come before it (its own answer says where it begins); else null, to read
 * the log from its start: a short one, a line the log does not have (yet), or a server that does
 * not know `?lines=`.
 */
async function lineToStartAt(
  url: string,
  from: number,
  jumpBytes: number,
  signal: AbortSignal,
): Promise<number | null> {
  if (from <= 1) return null;
  const response = await fetch(`${url}&lines=${from}-${from}`, { signal });
  await response.body?.cancel();
  const range = LOG_RANGE.exec(response.headers.get(RANGE_HEADER) ?? '');
  if (response.status !== 200 || !response.headers.get(LINES_HEADER) || !range) return null;
  return Number(range[1]) > jumpBytes ? from : null;
}
