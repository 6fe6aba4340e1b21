import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { EndInfo, FrameEncoder, GapInfo } from '../engine/frames.js';
import type { StartPosition } from '../engine/hub.js';
import type { EntryFilter } from '../engine/filter.js';
import { formatStreamCursor } from '../model/cursor.js';
import { pipelineResource } from '../model/scopes.js';
import { mayRead } from './auth.js';
import type { Entry } from '../model/entry.js';
import { QUOTED_TEXT, RAW_DATA } from '../model/entry.js';
import type { StreamKey } from '../model/stream-key.js';
import { runKey, topicKey } from '../model/stream-key.js';
import { RUNS_FEED_TOPIC } from '../store/store.js';
import type { AppDeps } from './deps.js';
import { z } from 'zod';
import {
  lastEventId,
  listQuery,
  parseFilter,
  parseStart,
  pipelineParam,
  queryValue,
  resolveRunId,
  streamFilterQuery,
  streamStartQuery,
  topicParam,
} from './params.js';
import { TEXT_SLOT, entryJson, entryJsonWithTextSlot } from './exact-json.js';
import { logAfterSeq, logAfterQuery } from './log-after.js';
import { errors } from './schemas/api.js';
import { runPath, topicPath } from './schemas/paths.js';
import { streamResponse } from './schemas/stream.js';
import { commentBytes, formatFrame, frameBytes, streamTo } from './sse.js';

// One encoded frame per entry, shared by every native viewer of the stream, and one buffer per
// batch the Tailer fans out (the same array reaches every live viewer). Each is kept with the
// epoch its ids carry: a server has one store, but its epoch may be renewed while it runs.
const entryFrames = new WeakMap<Entry, { epoch: string; frame: Buffer }>();
const batchFrames = new WeakMap<readonly Entry[], { epoch: string; frame: Buffer }>();

/** Frames are joined as text up to this many characters, then encoded (see `entries`). */
const GROUP_CHARS = 16 * 1024;

/** Strings (encoded as UTF-8) and buffers, one after the other, in one buffer of `size` bytes. */
function join(parts: ReadonlyArray<string | Buffer>, size: number): Buffer {
  const out = Buffer.allocUnsafe(size);
  let at = 0;
  for (const part of parts) {
    at += typeof part === 'string' ? out.write(part, at, 'utf8') : part.copy(out, at);
  }
  return out;
}

/**
 * Tailwater's own SSE dialect: `id: <seq>-<epoch>`, `event: kind`, `data: <entry JSON>`
 * (docs/API.md, "Streaming").
 */
export class NativeEncoder implements FrameEncoder {
  private epoch = '';

  constructor(private readonly retryMillis: number) {}

  open(epoch: string): Buffer {
    this.epoch = epoch;
    return frameBytes({ retry: this.retryMillis });
  }

  entry(entry: Entry): Buffer {
    const kept = entryFrames.get(entry);
    if (kept?.epoch === this.epoch) return kept.frame;
    const quoted = this.quotedFrame(entry);
    const frame = quoted
      ? join(quoted, Buffer.byteLength(quoted[0]) + quoted[1].length + Buffer.byteLength(quoted[2]))
      : Buffer.from(this.entryText(entry), 'utf8');
    entryFrames.set(entry, { epoch: this.epoch, frame });
    return frame;
  }

  /**
   * A batch is encoded into one buffer of its size: a page a viewer catches up with (megabytes
   * of log) is not made into a buffer per entry and then joined. Frames are joined as strings
   * only up to GROUP_CHARS: V8 encodes one long joined string several times slower than its
   * parts (the whole batch as one string cost more than JSON-escaping it; docs/BENCHMARKS.md,
   * "Catch-up"). An entry already encoded on its own (sent to a viewer one at a time) is copied
   * as the bytes it has, not decoded back to text, and so is a text read already quoted.
   */
  entries(entries: readonly Entry[]): Buffer {
    const kept = batchFrames.get(entries);
    if (kept?.epoch === this.epoch) return kept.frame;
    const parts: Array<string | Buffer> = [];
    let size = 0;
    let text = '';
    const flush = () => {
      if (text === '') return;
      parts.push(text);
      size += Buffer.byteLength(text, 'utf8');
      text = '';
    };
    for (const entry of entries) {
      const one = entryFrames.get(entry);
      if (one?.epoch === this.epoch) {
        flush();
        parts.push(one.frame);
        size += one.frame.length;
        continue;
      }
      const quoted = this.quotedFrame(entry);
      if (quoted) {
        text += quoted[0];
        flush();
        parts.push(quoted[1]);
        size += quoted[1].length;
        text = quoted[2];
        continue;
      }
      text += this.entryText(entry);
      if (text.length >= GROUP_CHARS) flush();
    }
    flush();
    const frame =
      parts.length === 1 && typeof parts[0] !== 'string' ? parts[0]! : join(parts, size);
    batchFrames.set(entries, { epoch: this.epoch, frame });
    return frame;
  }

  private entryText(entry: Entry): string {
    const id = formatStreamCursor(entry.seq, this.epoch);
    // Data kept as the producer's own JSON text may hold line breaks; JSON.stringify's has none.
    const stringified = entry[RAW_DATA] === undefined;
    return formatFrame({ id, event: entry.kind, data: entryJson(entry) }, stringified);
  }

  /** The frame of an entry whose text came quoted (QUOTED_TEXT): the text around it, and it. */
  private quotedFrame(entry: Entry): [string, Buffer, string] | undefined {
    const quoted = entry[QUOTED_TEXT];
    if (quoted === undefined || entry[RAW_DATA] !== undefined) return undefined;
    const id = formatStreamCursor(entry.seq, this.epoch);
    const frame = formatFrame({ id, event: entry.kind, data: entryJsonWithTextSlot(entry) }, true);
    const at = frame.indexOf(TEXT_SLOT);
    const bytes = Buffer.from(quoted.buffer, quoted.byteOffset, quoted.byteLength);
    return [frame.slice(0, at), bytes, frame.slice(at + TEXT_SLOT.length)];
  }

  cursor(seq: number): Buffer {
    return frameBytes({ id: formatStreamCursor(seq, this.epoch), event: 'cursor', data: '{}' });
  }

  gap(gap: GapInfo): Buffer {
    return frameBytes({ event: 'gap', data: JSON.stringify(gap) });
  }

  end(end: EndInfo): Buffer {
    return frameBytes({ event: 'end', data: JSON.stringify(end) });
  }

  error(code: string, message: string): Buffer {
    return frameBytes({ event: 'error', data: JSON.stringify({ code, message }) });
  }

  heartbeat(): Buffer {
    return commentBytes('heartbeat');
  }
}

type Query = Record<string, string | string[] | undefined>;

const streamQuery = z.object({ ...streamStartQuery.shape, ...streamFilterQuery.shape });
const runStreamQuery = z.object({ ...streamQuery.shape, ...logAfterQuery.shape });
const feedQuery = z.object({
  ...streamQuery.shape,
  pipeline: listQuery('pipeline', "Only these pipelines' runs.", { fqns: true }),
});

const lastEventIdHeader = z.object({
  'last-event-id': z.string().optional().meta({
    description: 'The last id seen: the stream resumes after it (it wins over `?after=`).',
  }),
});

/**
 * A stream's schema. What it can answer instead of opening: a bad name or query, capacity
 * (docs/API.md, "Streaming"), and for a run `latest` of a pipeline without runs (404).
 */
const streamSchema = (summary: string, params?: z.ZodObject) => ({
  summary,
  tags: ['streams'],
  ...(params ? { params } : {}),
  headers: lastEventIdHeader,
  response: {
    200: streamResponse,
    ...(params === runPath ? errors(400, 404, 429, 503) : errors(400, 429, 503)),
  },
});

/** The native stream endpoints: a run, a topic, and the runs feed. */
export async function nativeStreamRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  const stream = async (
    request: FastifyRequest,
    reply: FastifyReply,
    key: StreamKey,
    own: Pick<EntryFilter, 'where' | 'logThroughSeq'> = {},
  ): Promise<void> => {
    const query = request.query as Query;
    const start: StartPosition = parseStart(lastEventId(request.headers), query);
    const filter = { ...parseFilter(query), ...own };
    await streamTo(
      deps.hub,
      reply,
      key,
      start,
      filter,
      new NativeEncoder(deps.settings.retryMillis),
    );
  };

  const runStream = {
    ...streamSchema("Follow a run's entries live", runPath),
    querystring: runStreamQuery,
    description: 'Ends (`end`) once the run finished and its log was quiet for a while.',
  };
  app.get(
    '/api/v1/pipelines/:fqn/runs/:runId/stream',
    { schema: runStream },
    async (request, reply) => {
      const params = request.params as { fqn: string; runId: string };
      const fqn = pipelineParam(params.fqn);
      const runId = await resolveRunId(deps.store, fqn, params.runId);
      const key = runKey(fqn, runId);
      const query = request.query as Query;
      const start = parseStart(lastEventId(request.headers), query);
      const logThroughSeq = await logAfterSeq(deps.store, key, query, start);
      await stream(request, reply, key, { logThroughSeq });
    },
  );

  const topicStream = {
    ...streamSchema("Follow a topic's entries live", topicPath),
    querystring: streamQuery,
  };
  app.get('/api/v1/topics/:topic/stream', { schema: topicStream }, async (request, reply) => {
    const topic = topicParam((request.params as { topic: string }).topic);
    await stream(request, reply, topicKey(topic));
  });

  const feedStream = {
    ...streamSchema('Follow every run status change (the runs feed)'),
    querystring: feedQuery,
    description:
      'One `status` entry per run status change or cancel request, its `data` a RunSummary.',
  };
  app.get('/api/v1/runs/stream', { schema: feedStream }, async (request, reply) => {
    const pipelines = queryValue(feedQuery, request.query as Query, 'pipeline');
    const pipelineOf = (entry: Entry) => (entry.data as { pipeline?: string }).pipeline ?? '';
    // The feed shows a token only the runs of pipelines it may read.
    const readable = (entry: Entry) => mayRead(request, pipelineResource(pipelineOf(entry)));
    const where = pipelines
      ? (entry: Entry) => pipelines.includes(pipelineOf(entry)) && readable(entry)
      : request.tokenHolder
        ? readable
        : undefined;
    await stream(request, reply, topicKey(RUNS_FEED_TOPIC), { where });
  });
}
