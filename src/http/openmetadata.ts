import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { EndInfo, FrameEncoder } from '../engine/frames.js';
import type { StartPosition } from '../engine/hub.js';
import { isCursor, parseCursor } from '../model/cursor.js';
import type { Entry } from '../model/entry.js';
import type { ErrorCode } from '../model/errors.js';
import { ERROR_STATUS, TailwaterError } from '../model/errors.js';
import { validateRunId } from '../model/names.js';
import { pipelineResource } from '../model/scopes.js';
import { runKey } from '../model/stream-key.js';
import type { Store } from '../store/store.js';
import type { AppDeps } from './deps.js';
import type { ErrorBody } from './errors.js';
import { registerErrorHandler, tailwaterErrorBody, toTailwaterError } from './errors.js';
import { intParam, lastEventId, pipelineParam } from './params.js';
import { attachment, logChunks, logText } from './read.js';
import { commentBytes, frameBytes, HttpViewerTransport, streamTo } from './sse.js';

/**
 * OpenMetadata's live ingestion log stream and paginated log (docs/API.md, "OpenMetadata"):
 * unnamed `data:` frames of `LogStreamEvent` JSON. Every cursor, the stream's `after` as the
 * pager's `after` and `total`, is a byte offset into the run's log text, so a viewer resuming
 * with it gets exactly what it missed (from the store if need be), and the pager's
 * `Number(after) >= Number(total)` means "this was the last page". `truncated` is kept for a
 * cursor Tailwater truly cannot place (one from another server, or past the end of this log).
 */
export const OPENMETADATA_PREFIX = '/compat/openmetadata/api/v1/services/ingestionPipelines/logs';

const END_MESSAGES: Partial<Record<EndInfo['reason'], string>> = {
  maxBytes: 'Stream size limit reached. Download the full log to see the rest of this run.',
  maxDuration: 'Stream lifetime limit reached. Reconnect with the last cursor to resume.',
  idleTimeout: 'No new logs for this run. Reconnect with the last cursor to resume.',
  shutdown: 'The server is restarting. Reconnect with the last cursor to resume.',
  tokenExpired: 'The access token expired. Reconnect with a new token and the last cursor.',
  runDeleted: 'This run was deleted.',
};

const REFUSALS: Partial<Record<string, string>> = {
  TW_TOO_MANY_STREAMS:
    'The server is already streaming the maximum number of pipeline runs. Retry shortly or use the paginated log endpoint.',
  TW_TOO_MANY_CONNECTIONS:
    'The server is already serving the maximum number of log stream connections. Retry shortly or use the paginated log endpoint.',
  TW_TOO_MANY_SUBSCRIBERS:
    'The server is already serving the maximum number of viewers of this run. Retry shortly or use the paginated log endpoint.',
  TW_TOO_MANY_CLIENT_STREAMS:
    'This client is already streaming as many logs as one client may. Close a stream, retry shortly, or use the paginated log endpoint.',
};

/** The frames' JSON, with no other properties (the original's schema). */
interface LogStreamEvent {
  eventType: 'logs' | 'complete' | 'error';
  runId: string;
  logs?: string;
  after?: string;
  replay?: boolean;
  truncated?: boolean;
  reason?: 'runFinished' | 'idleTimeout' | 'maxDuration' | 'maxBytes';
  message?: string;
}

/** The cursor just past a log entry: where its text ends in the log, in bytes. */
function logEnd(entry: Entry): number {
  return (entry.offset ?? 0) + Buffer.byteLength(entry.text ?? '', 'utf8');
}

/**
 * Conditions that pass by themselves (a restart under way, a store that does not answer): the
 * client should retry after a while, not give up, so they are not told as `error` events.
 */
const TRANSIENT: ReadonlySet<ErrorCode> = new Set([
  'TW_SHUTTING_DOWN',
  'TW_STORE_UNAVAILABLE',
  'TW_SERVER_BUSY',
]);

/**
 * A frame with `after` also carries it as its SSE `id`, so a plain EventSource resumes by
 * itself (with Last-Event-ID) where OpenMetadata's own UI resumes with `?after=`; OpenMetadata's
 * UI reads only the data.
 */
function dataFrame(event: LogStreamEvent): Buffer {
  return frameBytes({ id: event.after, data: JSON.stringify(event) });
}

// Frames are shared across viewers of a run; live and replayed copies differ by one flag.
const liveFrames = new WeakMap<Entry, Buffer>();
const replayFrames = new WeakMap<Entry, Buffer>();

export class OpenMetadataEncoder implements FrameEncoder {
  /**
   * @param after the cursor the viewer resumed from: `complete` carries the last cursor the
   * viewer was sent, which is this one until a log entry is.
   */
  constructor(
    private readonly runId: string,
    private after = 0,
  ) {}

  /**
   * The last log entry this viewer was sent: its end is the viewer's cursor. Its frame is shared
   * by every viewer, so the cursor is worked out once, when `complete` needs it, not per viewer.
   */
  private lastLog: Entry | undefined;

  open(): null {
    return null;
  }

  entry(entry: Entry, replay: boolean): Buffer | null {
    if (entry.kind !== 'log' || entry.text === undefined) return null;
    this.lastLog = entry;
    const cache = replay ? replayFrames : liveFrames;
    let frame = cache.get(entry);
    if (!frame) {
      frame = dataFrame({
        eventType: 'logs',
        runId: this.runId,
        logs: entry.text,
        after: String(logEnd(entry)),
        replay,
        truncated: false,
      });
      cache.set(entry, frame);
    }
    return frame;
  }

  cursor(): null {
    return null;
  }

  /** The viewer's cursor cannot be placed: tell it the replay is incomplete, then replay it all. */
  gap(): Buffer {
    this.after = 0;
    this.lastLog = undefined;
    return dataFrame({
      eventType: 'logs',
      runId: this.runId,
      logs: '',
      replay: true,
      truncated: true,
    });
  }

  /**
   * OpenMetadata's UI reconnects at once after `idleTimeout` and `maxDuration` and stops for good
   * on any other reason, so a stream that should be resumed (a restart, an expired token) ends
   * as `maxDuration`. A finished run's `complete` has no message: the UI shows one as an error.
   */
  end(end: EndInfo): Buffer {
    // A deleted run is as over as a finished one: its UI must not reconnect to it.
    const reason =
      end.reason === 'runDeleted'
        ? 'runFinished'
        : end.reason === 'runFinished' || end.reason === 'idleTimeout' || end.reason === 'maxBytes'
          ? end.reason
          : 'maxDuration';
    const message = END_MESSAGES[end.reason];
    return dataFrame({
      eventType: 'complete',
      runId: this.runId,
      after: String(this.lastLog ? logEnd(this.lastLog) : this.after),
      reason,
      ...(message ? { message } : {}),
    });
  }

  error(_code: string, message: string): Buffer {
    return dataFrame({ eventType: 'error', runId: this.runId, message });
  }

  heartbeat(): Buffer {
    return commentBytes('heartbeat');
  }
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A UUID path segment names a pipeline by id (one index probe), anything else by FQN. */
/**
 * The scope a route needs, for the pipeline it names by FQN or by id: a grant is over FQNs, so
 * an id is looked up first (auth.ts), or a glob could match an id's text instead of its name.
 */
function pipelineScope(store: Store) {
  return async (request: FastifyRequest): Promise<string> => {
    const fqnOrId = (request.params as { fqn: string }).fqn;
    const byId = UUID.test(fqnOrId) ? await store.pipelineById(fqnOrId) : undefined;
    return pipelineResource(byId ?? pipelineParam(fqnOrId));
  };
}

async function resolvePipeline(store: Store, fqnOrId: string): Promise<string> {
  if (UUID.test(fqnOrId)) {
    const fqn = await store.pipelineById(fqnOrId);
    if (fqn) return fqn;
  }
  const fqn = pipelineParam(fqnOrId);
  if (!(await store.latestRun(fqn))) {
    throw new TailwaterError('TW_PIPELINE_NOT_FOUND', `No ingestion pipeline ${fqnOrId}.`);
  }
  return fqn;
}

/** OpenMetadata's `after` is opaque to its clients: a log offset of ours, or one we cannot place. */
function startFrom(after: string | undefined): { start: StartPosition; after: number } {
  if (after === undefined || after.trim() === '') {
    return { start: { type: 'after', seq: 0 }, after: 0 };
  }
  if (!isCursor(after)) return { start: { type: 'unplaceable' }, after: 0 };
  const offset = parseCursor(after);
  return { start: { type: 'afterLogOffset', offset }, after: offset };
}

function first(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

type Query = Record<string, string | string[] | undefined>;

/** OpenMetadata's server answers errors as `{"code": <status>, "message"}`; Tailwater's rides along. */
const openMetadataErrorBody: ErrorBody = (error) => ({
  code: ERROR_STATUS[error.code],
  message: error.message,
  ...tailwaterErrorBody(error),
});

/** The most log text one page of `/last` holds. */
const PAGE_BYTES = 4 * 1024 * 1024;

export async function openMetadataRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  const { store, hub } = deps;
  registerErrorHandler(app, openMetadataErrorBody);
  const scoped = { config: { resource: pipelineScope(store) } };

  app.get(`${OPENMETADATA_PREFIX}/:fqn/stream/:runId`, scoped, async (request, reply) => {
    const params = request.params as { fqn: string; runId: string };
    // An unknown pipeline is a 404; once it is known, a refusal is an `error` event on a 200
    // stream, as in the original (OpenMetadata's UI takes a 503 as "this server cannot stream"
    // and gives up, and retries any other status for ever), and a passing condition a 200 whose
    // body ends at once, which the UI retries after a backoff.
    const fqn = await resolvePipeline(store, params.fqn);
    let encoderFor = (after: number) => new OpenMetadataEncoder(params.runId, after);
    try {
      const runId = validateRunId(params.runId);
      // Frames are shared by every viewer of the run: they name it as it is stored (in NFC).
      encoderFor = (after: number) => new OpenMetadataEncoder(runId, after);
      // A browser EventSource resumes with Last-Event-ID (the same cursor as `after`), and
      // sends the URL it first opened, so the header is the newer of the two.
      const header = lastEventId(request.headers)?.trim();
      const cursor = header ? header : first((request.query as Query)['after']);
      const { start, after } = startFrom(cursor);
      await streamTo(hub, reply, runKey(fqn, runId), start, {}, encoderFor(after));
    } catch (error) {
      if (reply.sent) throw error;
      const tailwaterError = toTailwaterError(error);
      if (tailwaterError.code === 'TW_INTERNAL') {
        request.log.error({ err: error }, 'log stream failed to open');
      }
      const frame = TRANSIENT.has(tailwaterError.code)
        ? null
        : encoderFor(0).error('', REFUSALS[tailwaterError.code] ?? tailwaterError.message);
      refuse(reply, frame);
    }
  });

  // A page of the latest run's log from byte `after`: `after` is where the next page starts,
  // absent on the last one, and `total` the log's length, both in bytes.
  app.get(`${OPENMETADATA_PREFIX}/:fqn/last`, scoped, async (request) => {
    const fqn = await resolvePipeline(store, (request.params as { fqn: string }).fqn);
    const query = request.query as Query;
    const run = (await store.latestRun(fqn))!;
    const afterParam = first(query['after']);
    const from =
      afterParam === undefined || afterParam === '' ? 0 : parseCursor(afterParam, 'after cursor');
    const limit = intParam(query, 'limit', { min: 1, max: 10_000, default: 1000 });
    const key = runKey(fqn, run.runId);
    // The chunks that start at or after `from`: a cursor inside a chunk (not one this endpoint
    // gave) skips to the next, as Freight's offsets do, so a page never repeats text.
    const start = from;
    let text = '';
    let end: number | undefined;
    let count = 0;
    for await (const chunk of logChunks(store, key, start)) {
      if (count === limit || (end !== undefined && end - start + chunk.size > PAGE_BYTES)) break;
      text += chunk.text;
      end = chunk.offset + chunk.size;
      count += 1;
    }
    // The log may have grown since the run was read: it is at least as long as what was read.
    const total = Math.max(run.logBytes, end ?? 0);
    return {
      ingestion_task: text,
      ...(end !== undefined && end < total ? { after: String(end) } : {}),
      total: String(total),
    };
  });

  app.get(`${OPENMETADATA_PREFIX}/:fqn/last/download`, scoped, async (request, reply) => {
    const fqn = await resolvePipeline(store, (request.params as { fqn: string }).fqn);
    const run = (await store.latestRun(fqn))!;
    return reply
      .type('application/octet-stream')
      .header('Content-Disposition', attachment(`ingestion_logs_${fqn}_${Date.now()}.txt`))
      .send(Readable.from(logText(store, runKey(fqn, run.runId))));
  });
}

/**
 * A stream refused after it was asked for: 200, then `frame` (an `error` event), then the end.
 * Without a frame, the body just ends, which OpenMetadata's UI takes as a dropped connection
 * and retries after a backoff; an `error` event would stop it for good.
 */
function refuse(reply: FastifyReply, frame: Buffer | null): void {
  reply.hijack();
  const transport = new HttpViewerTransport(reply.raw);
  if (frame) transport.write(frame);
  transport.close();
}
