import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { ERROR_STATUS, TailwaterError } from '../model/errors.js';
import type { ErrorCode } from '../model/errors.js';
import type { Entry } from '../model/entry.js';
import type { StreamKey } from '../model/stream-key.js';
import { runKey, topicKey } from '../model/stream-key.js';
import { SLICE_MS, TimeSlice } from '../model/time-slice.js';
import type { LogChunk, Store } from '../store/store.js';
import { payloadBytes } from '../store/store.js';
import type { AppDeps } from './deps.js';
import { entryJson } from './exact-json.js';
import { markedLogBytes } from './log-marks.js';
import { prefixedLogBytes } from './log-prefix.js';
import type { LinePrefix } from './log-prefix.js';
import { LOG_LINES_HEADER, lineRange, linesQuery } from './log-lines.js';
import { LOG_RANGE_HEADER, bytesQuery, contentRange, parseLogRange } from './log-range.js';
import type { LogRange } from './log-range.js';
import { formatStreamCursor } from '../model/cursor.js';
import { z } from 'zod';
import {
  afterParam,
  booleanQuery,
  intQuery,
  listQuery,
  pipelineParam,
  queryValue,
  resolveRunId,
  seqAfterQuery,
  topicParam,
} from './params.js';
import { entriesPage, errors, json, logPage as logPageSchema, media } from './schemas/api.js';
import { runPath, topicPath } from './schemas/paths.js';

const MiB = 1024 * 1024;
/** A page of entries stops at this much payload, however many entries `limit` allows. */
const ENTRIES_PAGE_BYTES = 4 * MiB;
type Query = Record<string, string | string[] | undefined>;
type RunParams = { fqn: string; runId: string };

const entriesQuery = z.object({
  ...seqAfterQuery.shape,
  limit: intQuery('limit', { min: 1, max: 1000, default: 100 }, 'Entries per page.'),
  kinds: listQuery('kinds', 'Only entries of these kinds (read by index).'),
});

const logQuery = z.object({
  offset: intQuery(
    'offset',
    { min: -1, max: Number.MAX_SAFE_INTEGER, default: 0 },
    'The byte offset to read from; -1 reads the tail (the chunks ending in the last `limit` bytes).',
  ),
  limit: intQuery('limit', { min: 1, max: MiB, default: MiB }, 'Bytes to read.'),
});

const logTextQuery = z.object({
  timestamps: booleanQuery(
    'timestamps',
    "Each line begins with its entry's time (RFC 3339, UTC, milliseconds) and a space.",
  ),
  entries: booleanQuery(
    'entries',
    "Each entry's text is preceded by U+0000, its time, a space, its step (percent-encoded), U+0000; the dashboard reads its history so.",
  ),
  steps: booleanQuery(
    'steps',
    "Each line begins (after its time, if asked for) with its entry's step, percent-encoded, empty for none, and a space.",
  ),
  bytes: bytesQuery,
  lines: linesQuery,
});

const entriesResponses = {
  200: json('A page of entries; `hasMore` says to go on from `next`.', entriesPage),
  ...errors(400, 404),
};

/** Reading without streaming: entries by cursor, log by byte offset, the whole log as text. */
export async function readRoutes(app: FastifyInstance, { store }: AppDeps): Promise<void> {
  /** A run that must exist for its history to be read. */
  const existingRun = async (params: RunParams): Promise<StreamKey> => {
    const fqn = pipelineParam(params.fqn);
    const runId = await resolveRunId(store, fqn, params.runId);
    if (!(await store.getRun(fqn, runId))) {
      throw new TailwaterError('TW_RUN_NOT_FOUND', `No run ${runId} of pipeline ${fqn}.`);
    }
    return runKey(fqn, runId);
  };

  const entries = async (key: StreamKey, query: Query, reply: FastifyReply) => {
    const after = afterParam(query);
    const limit = queryValue(entriesQuery, query, 'limit');
    const kinds = queryValue(entriesQuery, query, 'kinds');
    const page = await store.readEntries(key, {
      afterSeq: after,
      limit: limit + 1,
      kinds,
      maxBytes: ENTRIES_PAGE_BYTES,
    });
    // One more entry than asked for means more follows; so may a page its byte budget cut.
    const hasMore =
      page.length > limit ||
      (page.reduce((sum, entry) => sum + payloadBytes(entry), 0) >= ENTRIES_PAGE_BYTES &&
        (await moreAfter(store, key, page)));
    if (page.length > limit) page.pop();
    const next = page[page.length - 1]?.seq ?? after;
    // Written by hand so that producer data goes out as it was stored.
    const list = page.map(entryJson).join(',');
    void reply.type('application/json; charset=utf-8');
    return `{"entries":[${list}],"next":${next},"hasMore":${hasMore}}`;
  };

  const runEntries = {
    summary: "A run's entries, by cursor",
    tags: ['read'],
    params: runPath,
    querystring: entriesQuery,
    response: entriesResponses,
  };
  app.get(
    '/api/v1/pipelines/:fqn/runs/:runId/entries',
    { schema: runEntries },
    async (request, reply) =>
      entries(await existingRun(request.params as RunParams), request.query as Query, reply),
  );

  const topicEntries = {
    summary: "A topic's entries, by cursor",
    tags: ['read', 'topics'],
    params: topicPath,
    querystring: entriesQuery,
    response: entriesResponses,
  };
  app.get('/api/v1/topics/:topic/entries', { schema: topicEntries }, async (request, reply) =>
    entries(
      topicKey(topicParam((request.params as { topic: string }).topic)),
      request.query as Query,
      reply,
    ),
  );

  const runLog = {
    summary: "A run's log, by byte offset",
    tags: ['read'],
    params: runPath,
    querystring: logQuery,
    response: {
      200: json('Whole chunks whose offset is in the window.', logPageSchema),
      ...errors(400, 404),
    },
  };
  app.get('/api/v1/pipelines/:fqn/runs/:runId/log', { schema: runLog }, async (request) => {
    const key = await existingRun(request.params as RunParams);
    const query = request.query as Query;
    const offset = queryValue(logQuery, query, 'offset');
    const limit = queryValue(logQuery, query, 'limit');
    return logPage(store, key, offset, limit);
  });

  const runLogText = {
    summary: "A run's whole log, or a byte range of it, as text",
    tags: ['read'],
    params: runPath,
    querystring: logTextQuery,
    headers: logRangeHeaders,
    response: {
      200: media(
        'The whole log as it stood when asked, streamed, with `Content-Disposition: attachment`; or the bytes `?bytes=` or the lines `?lines=` asked for, with `Tailwater-Log-Range: bytes <first>-<last>/<log bytes>` (and `Tailwater-Log-Lines: lines <first>-<last>/<lines>`).',
        'text/plain',
        z.string(),
      ),
      206: media(
        'The bytes the `Range` asked for, with `Content-Range: bytes <first>-<last>/<log bytes>`.',
        'text/plain',
        z.string(),
      ),
      ...errors(400, 404, 416),
    },
  };
  app.get(
    '/api/v1/pipelines/:fqn/runs/:runId/log.txt',
    { schema: runLogText },
    async (request, reply) => {
      const params = request.params as RunParams;
      const key = await existingRun(params);
      const query = request.query as Query;
      const prefix: LinePrefix = {
        timestamps: queryValue(logTextQuery, query, 'timestamps'),
        steps: queryValue(logTextQuery, query, 'steps'),
      };
      const marked = queryValue(logTextQuery, query, 'entries');
      const bytes = queryValue(logTextQuery, query, 'bytes');
      const lines = queryValue(logTextQuery, query, 'lines');
      const rangeHeader = headerValue(request.headers.range);
      const longer = marked || prefix.timestamps || prefix.steps;
      if (bytes && lines) {
        throw new TailwaterError('TW_BAD_QUERY', 'Give ?bytes= or ?lines=, not both.');
      }
      if (rangeHeader !== undefined && (longer || bytes || lines)) {
        throw new TailwaterError(
          'TW_BAD_QUERY',
          bytes || lines
            ? 'Give the range once: as ?bytes= or ?lines=, or as a Range header, not both.'
            : 'A Range counts bytes of the answer, and with timestamps, steps or entries the answer holds more than the log: give the log bytes to read as ?bytes=<first>-<last>.',
        );
      }
      const name = key.type === 'run' ? `${key.pipeline}_${key.runId}` : 'log';
      // The log as it stands now: text appended from here on is the stream's to bring.
      const bounds = await store.bounds(key);
      const { logBytes: total, epoch } = bounds;
      let range: LogRange;
      if (lines) {
        const found = await lineRange(store, key, lines, bounds);
        range = found.range;
        void reply.header(LOG_LINES_HEADER, found.header);
      } else if (bytes) {
        range = bytes(total);
      } else {
        range = parseLogRange(rangeHeader, headerValue(request.headers['if-range']), total);
      }
      void reply
        .type('text/plain; charset=utf-8')
        .header('Accept-Ranges', 'bytes')
        .header('Content-Disposition', attachment(`${name}.log`));
      if (range.type !== 'whole') void reply.header(LOG_RANGE_HEADER, contentRange(range, total));
      if (range.type === 'unsatisfiable') {
        const cursor = await logCursorAt(store, key, total, epoch);
        if (cursor) void reply.header(LOG_CURSOR_HEADER, cursor);
        const code: ErrorCode = 'TW_RANGE_NOT_SATISFIABLE';
        const message = lines
          ? `The log has none of the lines asked for (${reply.getHeader(LOG_LINES_HEADER)}).`
          : `The log has ${total} bytes; the range asked for starts at or past its end.`;
        // The route's typed statuses are its success answers; errors share the Error shape.
        return (reply as FastifyReply)
          .code(ERROR_STATUS[code])
          .type('application/json; charset=utf-8')
          .header('Content-Range', contentRange(range, total))
          .send({ error: { code, message } });
      }
      const [start, end] = range.type === 'range' ? [range.start, range.end] : [0, total];
      const cursor = await logCursorAt(store, key, end, epoch);
      if (cursor) void reply.header(LOG_CURSOR_HEADER, cursor);
      // A 206 only for a Range header: its body is exactly those bytes of the log.
      if (range.type === 'range' && !bytes && !lines) {
        void reply.code(206).header('Content-Range', contentRange(range, total));
      }
      if (marked) {
        void reply.header(LOG_PREFIX_HEADER, 'entries');
        const first = (await store.logChunkAt(key, start))?.offset ?? start;
        const chunks = logChunks(store, key, first, end);
        // Lines begin where a character does: the entry that began before them is marked too.
        const marks = { markFirst: lines !== undefined };
        return reply.send(Readable.from(markedLogBytes(chunks, start, end, marks)));
      }
      if (prefix.timestamps || prefix.steps) {
        // Says the prefixes are there: a server that does not know the parameters ignores them.
        const fields = [prefix.timestamps ? 'timestamps' : '', prefix.steps ? 'steps' : ''];
        void reply.header(LOG_PREFIX_HEADER, fields.filter(Boolean).join(','));
        // Longer than the range by its prefixes, which are known only as the text is read.
        return reply.send(Readable.from(prefixedLog(store, key, start, end, prefix)));
      }
      return reply
        .header('Content-Length', end - start)
        .send(Readable.from(logBytes(store, key, start, end)));
    },
  );
}

/** The native stream's cursor after the log entry whose text ends at `end` (docs/API.md). */
export const LOG_CURSOR_HEADER = 'Tailwater-Log-Cursor';
/** Which prefixes a `log.txt` answer's lines begin with (`timestamps`, `steps`, in that order). */
export const LOG_PREFIX_HEADER = 'Tailwater-Log-Prefix';

const logRangeHeaders = z.object({
  range: z.string().optional().meta({
    description: 'One range of bytes, `bytes=<first>-<last>`, `bytes=<first>-` or `bytes=-<n>`.',
  }),
});

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/**
 * The cursor of the log entry whose text ends exactly at byte `end` (`0-<epoch>` for an empty
 * log), or undefined when `end` falls inside an entry. A viewer that has the text up to `end`
 * streams with `?logAfter=` set to it and gets every later line once.
 */
async function logCursorAt(
  store: Store,
  key: StreamKey,
  end: number,
  epoch: string,
): Promise<string | undefined> {
  if (end === 0) return formatStreamCursor(0, epoch);
  const chunk = await store.logChunkAt(key, end - 1);
  if (!chunk || chunk.offset + chunk.size !== end) return undefined;
  return formatStreamCursor(chunk.seq, epoch);
}

/**
 * Bytes [start, end) of the log, page by page: the entry that holds `start` may begin before
 * it, and the one that holds the last byte may go on past it, so both are cut to the range.
 */
export async function* logBytes(
  store: Store,
  key: StreamKey,
  start: number,
  end: number,
): AsyncGenerator<Buffer> {
  if (end <= start) return;
  const first = (await store.logChunkAt(key, start))?.offset ?? start;
  for await (const chunk of logChunks(store, key, first, end)) {
    const bytes = Buffer.from(chunk.text, 'utf8');
    const from = Math.max(0, start - chunk.offset);
    const to = Math.min(bytes.length, end - chunk.offset);
    yield from === 0 && to === bytes.length ? bytes : bytes.subarray(from, to);
  }
}

/** Bytes [start, end) of the log with each line's prefix (`prefixedLogBytes`). */
async function* prefixedLog(
  store: Store,
  key: StreamKey,
  start: number,
  end: number,
  prefix: LinePrefix,
): AsyncGenerator<Buffer> {
  if (end <= start) return;
  // From the chunk that holds the byte before the range: whether the range begins a line.
  const first = start === 0 ? 0 : ((await store.logChunkAt(key, start - 1))?.offset ?? start);
  yield* prefixedLogBytes(logChunks(store, key, first, end), start, end, prefix);
}

/** Whether a stream has entries past the last of a page (of any kind: a cursor never skips). */
async function moreAfter(store: Store, key: StreamKey, page: readonly Entry[]): Promise<boolean> {
  return (await store.bounds(key)).lastSeq > page[page.length - 1]!.seq;
}

/** One page of the log in Freight's shape. */
export async function logPage(store: Store, key: StreamKey, offset: number, limit: number) {
  const chunks = await store.readLog(key, offset, limit);
  const last = chunks[chunks.length - 1];
  return {
    chunks: chunks.map(({ offset, size, text }) => ({ offset, size, text })),
    nextOffset: last ? last.offset + last.size : offset,
  };
}

/** The whole log, page by page, so a large log is never held in memory at once. */
export async function* logText(store: Store, key: StreamKey): AsyncGenerator<Buffer> {
  for await (const chunk of logChunks(store, key, 0)) yield Buffer.from(chunk.text, 'utf8');
}

/**
 * The log chunks that start in [from, to) (to the end of the log, as it grows, by default), a
 * megabyte at a time, with a turn of the event loop every few milliseconds: a long log is read
 * without ever being held in memory whole or holding the loop.
 */
export async function* logChunks(
  store: Store,
  key: StreamKey,
  from: number,
  to = Number.POSITIVE_INFINITY,
): AsyncGenerator<LogChunk> {
  const slice = new TimeSlice(SLICE_MS);
  for (let pos = from; pos < to; pos += MiB) {
    const chunks = await store.readLog(key, pos, Math.min(MiB, to - pos));
    // Chunks are contiguous and under a megabyte: an empty window is the end of the log.
    if (chunks.length === 0 && to === Number.POSITIVE_INFINITY) return;
    yield* chunks;
    if (slice.due) await slice.next();
  }
}

export function safeFileName(name: string): string {
  return name.replace(/[^A-Za-z0-9_.-]+/g, '_').slice(0, 200);
}

/**
 * A Content-Disposition for a download: an ASCII-only `filename` any client can use, and the
 * real name (Unicode and all) percent-encoded in `filename*` (RFC 6266), never raw in a header.
 */
export function attachment(fileName: string): string {
  const encoded = encodeURIComponent(fileName).replace(
    /['()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
  return `attachment; filename="${safeFileName(fileName)}"; filename*=UTF-8''${encoded}`;
}
