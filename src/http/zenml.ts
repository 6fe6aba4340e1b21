import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { EndInfo, FrameEncoder, GapInfo } from '../engine/frames.js';
import { RawJson } from '../model/bounded-json.js';
import type { Entry, NewEvent } from '../model/entry.js';
import { RAW_DATA } from '../model/entry.js';
import { TailwaterError } from '../model/errors.js';
import { RESERVED_KINDS } from '../model/names.js';
import { resourceOf } from '../model/scopes.js';
import { runKey } from '../model/stream-key.js';
import type { StreamKey } from '../model/stream-key.js';
import { batchLimits, EVENT_ENVELOPE_BYTES } from './append.js';
import type { AppDeps } from './deps.js';
import type { ErrorBody } from './errors.js';
import { registerErrorHandler, tailwaterErrorBody } from './errors.js';
import { stringifyWith } from './exact-json.js';
import { findRunAnywhere, lastEventId, parseList, parseStart } from './params.js';
import { commentBytes, frameBytes, streamTo } from './sse.js';

/**
 * ZenML's live event streaming (docs/API.md, "ZenML"): `event: <kind>` frames whose data is a
 * `StreamEvent`, `cursor` frames for filtered events, `end` with `{}`, `: ping` heartbeats, and the
 * batch publish endpoint. Unlike the original, nothing is dropped: a slow subscriber is paged from
 * the store instead of getting `gap overflow`, and history outlives Redis' one-hour TTL.
 */
export const ZENML_PREFIX = '/compat/zenml/api/v1/runs';

const streamEvent = z.object({
  pipeline_run_id: z.string().min(1),
  step_run_id: z.string().nullish(),
  step_name: z.string().min(1).max(256).nullish(),
  kind: z.string().default('event'),
  correlation_id: z.string().min(1).max(256).nullish(),
  index: z.number().int().nullish(),
  payload: z.instanceof(RawJson).optional(),
});

/**
 * The StreamEvent a ZenML subscriber expects, rebuilt from a Tailwater entry, as JSON. The
 * payload is the producer's own text (its numbers exact); data that is not an object (from a
 * native producer) is wrapped as `{"value": …}`, and log text as `{"text", "offset"}`.
 */
function streamEventJson(entry: Entry, pipelineRunId: string): string {
  const extra = entry.extra ?? {};
  const event = {
    pipeline_run_id: pipelineRunId,
    step_run_id: extra['step_run_id'] ?? null,
    step_name: entry.step ?? null,
    kind: entry.kind,
    correlation_id: entry.correlationId ?? null,
    index: extra['index'] ?? null,
    payload: entry.kind === 'log' ? { text: entry.text, offset: entry.offset } : null,
  };
  const raw = entry[RAW_DATA];
  if (entry.kind === 'log' || raw === undefined) return JSON.stringify(event);
  const isObject =
    typeof entry.data === 'object' && entry.data !== null && !Array.isArray(entry.data);
  return stringifyWith(event, 'payload', isObject ? raw : `{"value":${raw}}`);
}

export class ZenmlEncoder implements FrameEncoder {
  // One frame per entry and run id as the client named it.
  private static readonly frames = new WeakMap<Entry, Map<string, Buffer>>();

  constructor(private readonly pipelineRunId: string) {}

  open(): null {
    return null;
  }

  entry(entry: Entry): Buffer {
    let byRun = ZenmlEncoder.frames.get(entry);
    let frame = byRun?.get(this.pipelineRunId);
    if (!frame) {
      frame = frameBytes({
        id: entry.seq,
        event: entry.kind,
        data: streamEventJson(entry, this.pipelineRunId),
      });
      if (!byRun) ZenmlEncoder.frames.set(entry, (byRun = new Map()));
      byRun.set(this.pipelineRunId, frame);
    }
    return frame;
  }

  cursor(seq: number): Buffer {
    return frameBytes({ id: seq, event: 'cursor', data: '{}' });
  }

  gap(gap: GapInfo): Buffer {
    return frameBytes({ event: 'gap', data: JSON.stringify(gap) });
  }

  /**
   * `end` means "the run is over" to a ZenML client, which then stops. So only a finished run
   * (and, as in the original, a shutdown, after `gap shutdown`) sends it; the other limits close
   * the body without `end`, and the client's EventSource resumes with Last-Event-ID.
   */
  end(end: EndInfo): Buffer | null {
    // A deleted run is over too: its client stops rather than reconnect for ever.
    if (end.reason === 'runFinished' || end.reason === 'runDeleted') {
      return frameBytes({ event: 'end', data: '{}' });
    }
    if (end.reason === 'shutdown') {
      return Buffer.concat([
        frameBytes({ event: 'gap', data: JSON.stringify({ reason: 'shutdown' }) }),
        frameBytes({ event: 'end', data: '{}' }),
      ]);
    }
    return null;
  }

  error(): Buffer {
    return frameBytes({ event: 'error', data: JSON.stringify({ reason: 'stream_failed' }) });
  }

  heartbeat(): Buffer {
    return commentBytes('ping');
  }
}

type Query = Record<string, string | string[] | undefined>;

/** ZenML's server is FastAPI: its clients read `detail`. The Tailwater error rides along. */
const zenmlErrorBody: ErrorBody = (error) => ({
  detail: error.message,
  ...tailwaterErrorBody(error),
});

export async function zenmlRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  const { store, hub, ingest, settings } = deps;

  registerErrorHandler(app, zenmlErrorBody);

  /** The run a ZenML client names; an unknown one is filed under the zenmlPipeline setting. */
  const keyOf = async (runId: string): Promise<StreamKey> => {
    const run = await findRunAnywhere(store, runId);
    return run ? runKey(run.pipeline, run.runId) : runKey(settings.zenmlPipeline, runId);
  };

  // The server's own limits (by default the original's: 1000 events, each at most 64 KiB of
  // payload and its envelope), refused in the original's words.
  const { maxBatchEntries, maxEventBytes } = settings;
  const batch = batchLimits(settings, 'payload', {
    tooMany: (count) =>
      new TailwaterError(
        'TW_UNPROCESSABLE',
        `A batch holds at most ${maxBatchEntries} events (was ${count} or more).`,
      ),
    itemTooLarge: (_index, bytes) =>
      new TailwaterError(
        'TW_EVENT_TOO_LARGE',
        `Event exceeds ${maxEventBytes + EVENT_ENVELOPE_BYTES} bytes (was ${bytes}).`,
      ),
  });

  // The run a ZenML client names is looked up across pipelines: its pipeline is what a token's
  // scope is checked against (auth.ts).
  const resource = async (request: FastifyRequest) =>
    resourceOf(await keyOf((request.params as { runId: string }).runId));

  app.post(
    `${ZENML_PREFIX}/:runId/events`,
    { ...batch, config: { ...batch.config, resource } },
    async (request) => {
      const runId = (request.params as { runId: string }).runId;
      const body = request.body as { events?: unknown } | undefined;
      if (!body || !Array.isArray(body.events)) {
        throw new TailwaterError(
          'TW_BAD_REQUEST',
          'The body must be {"events": [StreamEvent, …]}.',
        );
      }
      if (body.events.length === 0) return { count: 0, last_id: null };
      const events: NewEvent[] = [];
      // One event at a time, stopping at the first bad one.
      for (const [index, raw] of body.events.entries()) {
        const parsed = streamEvent.safeParse(raw);
        if (!parsed.success) {
          throw new TailwaterError(
            'TW_UNPROCESSABLE',
            `events[${index}]: ${parsed.error.issues[0]?.message ?? 'invalid'}`,
          );
        }
        const event = parsed.data;
        const payload = event.payload?.text ?? '{}';
        if (!payload.startsWith('{')) {
          throw new TailwaterError(
            'TW_UNPROCESSABLE',
            `events[${index}].payload: expected an object.`,
          );
        }
        if (event.pipeline_run_id !== runId) {
          throw new TailwaterError(
            'TW_BAD_REQUEST',
            `events[${index}]: pipeline_run_id ${event.pipeline_run_id} does not match the run ${runId}.`,
          );
        }
        if (RESERVED_KINDS.has(event.kind)) {
          throw new TailwaterError(
            'TW_RESERVED_KIND',
            `events[${index}]: kind "${event.kind}" is reserved.`,
          );
        }
        // The original's second check, in its words (the whole event was checked as it came).
        const payloadSize = Buffer.byteLength(payload, 'utf8');
        if (payloadSize > maxEventBytes) {
          throw new TailwaterError(
            'TW_EVENT_TOO_LARGE',
            `Event exceeds ${maxEventBytes} bytes (was ${payloadSize}).`,
          );
        }
        const extra: Record<string, unknown> = {};
        if (event.step_run_id != null) extra['step_run_id'] = event.step_run_id;
        if (event.index != null) extra['index'] = event.index;
        events.push({
          kind: event.kind,
          data: undefined,
          dataJson: payload,
          step: event.step_name ?? undefined,
          correlationId: event.correlation_id ?? undefined,
          extra: Object.keys(extra).length > 0 ? extra : undefined,
        });
      }
      const { seqs } = await ingest.appendEvents(await keyOf(runId), events);
      return { count: events.length, last_id: String(Math.max(...seqs)) };
    },
  );

  app.get(
    `${ZENML_PREFIX}/:runId/events/stream`,
    { config: { resource } },
    async (request, reply) => {
      const runId = (request.params as { runId: string }).runId;
      const query = request.query as Query;
      const key = await keyOf(runId);
      const start = parseStart(lastEventId(request.headers), {
        ...(query['since'] !== undefined ? { since: query['since'] } : {}),
      });
      const filter = {
        kinds: parseList(query, 'kinds'),
        steps: parseList(query, 'step_names'),
        correlationIds: parseList(query, 'correlation_ids'),
      };
      try {
        await streamTo(hub, reply, key, start, filter, new ZenmlEncoder(runId));
      } catch (error) {
        if (error instanceof TailwaterError && error.code === 'TW_TOO_MANY_SUBSCRIBERS') {
          throw new TailwaterError(
            error.code,
            `This pipeline run has reached the per-run subscriber cap (${settings.maxSubscribersPerStream}); retry shortly or close an existing subscriber.`,
            error.headers,
          );
        }
        throw error;
      }
    },
  );
}
