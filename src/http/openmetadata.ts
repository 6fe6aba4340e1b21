import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { EndInfo, FrameEncoder } from '../engine/frames.js';
import type { StartPosition } from '../engine/hub.js';
import type { Entry } from '../model/entry.js';
import { TailwaterError } from '../model/errors.js';
import { validateRunId } from '../model/names.js';
import { runKey } from '../model/stream-key.js';
import type { Store } from '../store/store.js';
import type { AppDeps } from './deps.js';
import { intParam, pipelineParam } from './params.js';
import { attachment, logText } from './read.js';
import { commentBytes, HttpViewerTransport } from './sse.js';
import { streamTo } from './native.js';

/**
 * OpenMetadata's live ingestion log stream (docs/API.md, "OpenMetadata"): unnamed `data:` frames of
 * `LogStreamEvent` JSON. `after` is Tailwater's seq as an opaque string, so a viewer resuming with
 * it gets exactly what it missed, from the store if need be; `truncated` is kept for a cursor
 * Tailwater truly cannot place (one from another server, or past the end of this one).
 */
export const OPENMETADATA_PREFIX = '/compat/openmetadata/api/v1/services/ingestionPipelines/logs';

const END_MESSAGES: Partial<Record<EndInfo['reason'], string>> = {
  maxBytes: 'Stream size limit reached. Download the full log to see the rest of this run.',
  maxDuration: 'Stream lifetime limit reached. Reconnect with the last cursor to resume.',
  idleTimeout: 'No new logs for this run. Reconnect with the last cursor to resume.',
  shutdown: 'The server is restarting. Reconnect with the last cursor to resume.',
  tokenExpired: 'The access token expired. Reconnect with a new token and the last cursor.',
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
  TW_SHUTTING_DOWN: 'The server is restarting. Retry shortly.',
};

function dataFrame(event: object): Buffer {
  return Buffer.from(`data: ${JSON.stringify(event)}\n\n`, 'utf8');
}

// Frames are shared across viewers of a run; live and replayed copies differ by one flag.
const liveFrames = new WeakMap<Entry, Buffer>();
const replayFrames = new WeakMap<Entry, Buffer>();

export class OpenMetadataEncoder implements FrameEncoder {
  constructor(private readonly runId: string) {}

  open(): null {
    return null;
  }

  entry(entry: Entry, replay: boolean): Buffer | null {
    if (entry.kind !== 'log' || entry.text === undefined) return null;
    const cache = replay ? replayFrames : liveFrames;
    let frame = cache.get(entry);
    if (!frame) {
      frame = dataFrame({
        eventType: 'logs',
        runId: this.runId,
        logs: entry.text,
        after: String(entry.seq),
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

  /** The viewer's cursor cannot be placed: tell it to reset, then replay what follows. */
  gap(): Buffer {
    return dataFrame({
      eventType: 'logs',
      runId: this.runId,
      logs: '',
      replay: true,
      truncated: true,
    });
  }

  end(end: EndInfo): Buffer {
    const reason =
      end.reason === 'runFinished' || end.reason === 'idleTimeout' || end.reason === 'maxBytes'
        ? end.reason
        : 'maxDuration';
    const message = END_MESSAGES[end.reason];
    return dataFrame({
      eventType: 'complete',
      runId: this.runId,
      after: String(end.lastSeq),
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

/** OpenMetadata's `after` is opaque: a seq of ours, or something we cannot place (→ truncated). */
function startFrom(after: string | undefined): StartPosition {
  if (after === undefined || after === '') return { type: 'after', seq: 0 };
  if (/^\d{1,15}$/.test(after)) return { type: 'after', seq: Number(after) };
  return { type: 'unplaceable' };
}

type Query = Record<string, string | string[] | undefined>;

export async function openMetadataRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  const { store, hub } = deps;

  app.get(`${OPENMETADATA_PREFIX}/:fqn/stream/:runId`, async (request, reply) => {
    const params = request.params as { fqn: string; runId: string };
    const fqn = await resolvePipeline(store, params.fqn);
    const runId = validateRunId(params.runId);
    const after = (request.query as Query)['after'];
    const encoder = new OpenMetadataEncoder(runId);
    try {
      await streamTo(
        hub,
        reply,
        runKey(fqn, runId),
        startFrom(Array.isArray(after) ? after[0] : after),
        {},
        encoder,
      );
    } catch (error) {
      // Refusals are events on a 200 stream, so a client has one error path, not two.
      const message = error instanceof TailwaterError ? REFUSALS[error.code] : undefined;
      if (!message || reply.sent) throw error;
      refuse(reply, encoder, message);
    }
  });

  app.get(`${OPENMETADATA_PREFIX}/:fqn/last`, async (request) => {
    const fqn = await resolvePipeline(store, (request.params as { fqn: string }).fqn);
    const query = request.query as Query;
    const run = (await store.latestRun(fqn))!;
    const after =
      typeof query['after'] === 'string' && /^\d{1,15}$/.test(query['after'])
        ? Number(query['after'])
        : 0;
    const limit = intParam(query, 'limit', { min: 1, max: 10_000, default: 1000 });
    const entries = await store.readEntries(runKey(fqn, run.runId), {
      afterSeq: after,
      limit: limit + 1,
      kinds: ['log'],
      maxBytes: 4 * 1024 * 1024,
    });
    const page = entries.slice(0, limit);
    const last = page[page.length - 1];
    // More follows if this page ends before the end of the log (in bytes, as offsets are).
    const end = last ? (last.offset ?? 0) + Buffer.byteLength(last.text ?? '', 'utf8') : 0;
    const more = end < run.logBytes;
    return {
      ingestion_task: page.map((e) => e.text ?? '').join(''),
      ...(more && last ? { after: String(last.seq) } : {}),
      total: String(run.logBytes),
    };
  });

  app.get(`${OPENMETADATA_PREFIX}/:fqn/last/download`, async (request, reply) => {
    const fqn = await resolvePipeline(store, (request.params as { fqn: string }).fqn);
    const run = (await store.latestRun(fqn))!;
    return reply
      .type('application/octet-stream')
      .header('Content-Disposition', attachment(`ingestion_logs_${fqn}_${Date.now()}.txt`))
      .send(Readable.from(logText(store, runKey(fqn, run.runId))));
  });
}

function refuse(reply: FastifyReply, encoder: OpenMetadataEncoder, message: string): void {
  reply.hijack();
  const transport = new HttpViewerTransport(reply.raw);
  transport.write(encoder.error('', message));
  transport.close();
}
