import { z } from 'zod';
import type { ErrorCode } from '../../model/errors.js';
import { ERROR_STATUS } from '../../model/errors.js';
import { RUN_STATUSES } from '../../model/run.js';

/**
 * The shapes of the native API's answers (docs/API.md), as zod schemas. Routes name them in
 * their `schema.response`, and the OpenAPI document (openapi.ts) is generated from them. An
 * `id` makes a shape a named component of the document. They describe answers and never
 * rewrite one: the app serializes answers with JSON.stringify whatever schema a route names
 * (openapi.ts), so what a handler writes is what goes out, byte for byte.
 */

/** Any JSON value: an event's `data` is the producer's own text, kept as sent. */
export const jsonValue = z.unknown().meta({ description: 'Any JSON value.' });

/** A JSON object whose members are the producer's own (a run's `meta`). */
export const jsonObject = z.record(z.string(), z.unknown());

const count = z.int().min(0);
const isoTime = z.string().meta({ format: 'date-time' });

const ERROR_CODES = Object.keys(ERROR_STATUS) as [ErrorCode, ...ErrorCode[]];

/** Every error answer before a stream opens (errors.ts, `tailwaterErrorBody`). */
export const errorBody = z
  .object({
    error: z.object({
      code: z.enum(ERROR_CODES).meta({ description: 'Its HTTP status follows from it.' }),
      message: z.string().meta({ description: 'For people; it may change.' }),
    }),
  })
  .meta({
    id: 'Error',
    description: 'An error, with the status of its code (docs/API.md, "Errors").',
  });

export const runStatus = z.enum(RUN_STATUSES).meta({
  id: 'RunStatus',
  description: 'The last five are terminal: a terminal run cannot become non-terminal.',
});

const runFields = {
  id: z.string().meta({
    format: 'uuid',
    description: 'A UUID the server gave the run, unique across pipelines.',
  }),
  pipeline: z.string(),
  runId: z.string(),
  status: runStatus,
  cancelRequested: z.boolean(),
  createdAt: isoTime,
  startedAt: isoTime.nullable(),
  endedAt: isoTime.nullable(),
  lastSeq: count.meta({ description: "The seq of the run stream's newest entry (0 when empty)." }),
  logBytes: count.meta({ description: 'Bytes of log text written so far.' }),
};

export const run = z
  .object({ ...runFields, meta: jsonObject })
  .meta({ id: 'Run', description: 'A run of a pipeline.' });

/** What the runs feed's `status` entries carry: the run without its `meta`. */
export const runSummary = z.object(runFields).meta({ id: 'RunSummary' });

const next = z.string().meta({
  description:
    'Present when there is more: ask again with `?after=<next>`; absent on the last page.',
});

export const pipelineList = z
  .object({
    pipelines: z.array(
      z
        .object({
          fqn: z.string(),
          id: z
            .string()
            .meta({ format: 'uuid', description: 'A stable UUID derived from the FQN.' }),
          runs: count,
          lastRun: run.nullable(),
        })
        .meta({ id: 'PipelineSummary' }),
    ),
    next: next.optional(),
  })
  .meta({ id: 'PipelineList' });

export const runList = z
  .object({ runs: z.array(run), next: next.optional() })
  .meta({ id: 'RunList' });

export const topicList = z
  .object({ topics: z.array(z.string()), next: next.optional() })
  .meta({ id: 'TopicList' });

export const statsList = z
  .object({
    pipelines: z.array(
      z
        .object({
          pipeline: z.string(),
          runs: count,
          logBytes: count.meta({ description: 'Bytes of log text its runs hold.' }),
        })
        .meta({ id: 'PipelineStats' }),
    ),
    storage: z
      .object({
        hotLogBytes: count.meta({ description: 'Log text in the hot store, not yet sealed.' }),
        sealedRawBytes: count.meta({ description: 'Entries sealed, as the hot store held them.' }),
        sealedBytes: count.meta({ description: 'Bytes of the segment files that hold them.' }),
        segments: count,
      })
      .optional()
      .meta({
        id: 'StorageBytes',
        description: 'Where the history is kept (docs/STORAGE.md); admin tokens only.',
      }),
    next: next.optional(),
  })
  .meta({ id: 'StatsList' });

/** One entry of a stream, as /entries and every native stream frame carry it. */
export const entry = z
  .object({
    seq: z.int().min(1).meta({ description: 'Gapless per stream from 1; the cursor.' }),
    time: isoTime,
    kind: z.string().meta({ description: '`log` for log text; any other kind is an event.' }),
    offset: count.optional().meta({ description: "log: the text's byte offset in the run's log." }),
    text: z.string().optional().meta({ description: 'log: the text.' }),
    data: jsonValue.optional().meta({
      description: 'Events: any JSON, exactly as the producer sent it (numbers past 2^53 and all).',
    }),
    step: z.string().optional(),
    correlationId: z.string().optional(),
    id: z.string().optional().meta({ description: "The producer's id (idempotent appends)." }),
    extra: jsonObject.optional().meta({
      description: "Fields a seed system's producer sent that Tailwater keeps as they are.",
    }),
  })
  .meta({ id: 'Entry', description: 'An entry of a stream (docs/API.md, "Entries").' });

export const entriesPage = z
  .object({
    entries: z.array(entry),
    next: count.meta({ description: 'The cursor to ask from next (`?after=`).' }),
    hasMore: z.boolean(),
  })
  .meta({ id: 'EntriesPage' });

export const logPage = z
  .object({
    chunks: z.array(z.object({ offset: count, size: count, text: z.string() })),
    nextOffset: count,
  })
  .meta({ id: 'LogPage' });

export const logAppended = z
  .object({
    seq: z.int().min(1).meta({ description: 'The last entry the text went into.' }),
    firstSeq: z.int().min(1),
    offset: count,
    size: count,
    duplicate: z
      .boolean()
      .meta({ description: 'The producer id was seen before: nothing stored.' }),
  })
  .meta({ id: 'LogAppended' });

export const eventsAppended = z
  .object({
    first: z.int().min(1),
    last: z.int().min(1),
    duplicates: count,
    seqs: z.array(z.int().min(1)).meta({ description: 'The seq of each event, in order.' }),
  })
  .meta({ id: 'EventsAppended' });

export const searchPage = z
  .object({
    hits: z.array(
      z
        .object({
          pipeline: z.string(),
          runId: z.string(),
          runStatus,
          runCreatedAt: isoTime,
          kind: z.enum(['log', 'event']),
          seq: z.int().min(1),
          line: z.int().min(1).nullable(),
          offset: count.nullable(),
          text: z.string(),
          textStart: count,
          truncated: z.boolean(),
          matches: z.array(z.tuple([count, count])),
        })
        .meta({ id: 'SearchHit' }),
    ),
    next: z.string().optional(),
    index: z.object({ pendingEntries: count, lagSeconds: z.number().min(0) }),
  })
  .meta({ id: 'SearchPage', description: 'docs/SEARCH.md' });

export const health = z.object({ status: z.literal('ok') }).meta({ id: 'Health' });

export const readiness = z
  .object({
    status: z.enum(['ready', 'degraded']),
    store: z.object({ status: z.literal('up') }),
    bus: z.object({ status: z.enum(['up', 'degraded', 'down']), message: z.string().optional() }),
    sources: z.array(
      z.object({ name: z.string(), state: z.string(), lastError: z.string().optional() }),
    ),
  })
  .meta({ id: 'Readiness' });

export const unready = z
  .object({
    status: z.literal('unavailable'),
    store: z.object({ status: z.literal('down'), message: z.string() }),
  })
  .meta({ id: 'Unready' });

export const session = z
  .union([
    z.object({ authentication: z.literal(false) }),
    z.object({
      authentication: z.literal(true),
      subject: z.string().nullable(),
      expiresAt: isoTime.nullable(),
      grants: z.object({
        read: z.array(z.string()),
        write: z.array(z.string()),
        admin: z.boolean(),
      }),
    }),
  ])
  .meta({ id: 'Session' });

/** An answer without a body (204). */
export const noContent = (description: string) => z.undefined().meta({ description });

/** A response with a JSON body, in the form @fastify/swagger and Fastify both read. */
export function json(description: string, schema: z.ZodType) {
  return { description, content: { 'application/json': { schema } } };
}

/** A response of another media type (text, a stream). */
export function media(description: string, type: string, schema: z.ZodType) {
  return { description, content: { [type]: { schema } } };
}

/** What each error status of the native API means (docs/API.md, "Errors"). */
const ERROR_MEANINGS: Record<number, string> = {
  400: 'A malformed name, query parameter, cursor or body.',
  401: 'Authentication is on and the token is missing, malformed, forged or expired.',
  403: 'The token lacks the scope, or the request comes from a page of a site not allowed.',
  404: 'No such run (or pipeline, or route).',
  408: 'The request did not arrive whole in time.',
  409: 'A conflict: a terminal status, a producer id used for other content.',
  413: 'The body, an event, a batch or a meta is over its limit.',
  415: 'An unsupported content type, charset or Content-Encoding.',
  416: 'A byte range that starts at or past the end of the log; `Content-Range` and `Tailwater-Log-Range`: `bytes */<log bytes>`.',
  421: 'The Host header does not name this server.',
  429: 'Too many connections, streams, appends or failed authentications of one client.',
  500: 'A bug; the server log has the details.',
  503: 'At capacity, shutting down, or the server holds as many request bodies as it may.',
};

/** The error responses of a route, each with the shared Error body. */
export function errors(...statuses: number[]) {
  return Object.fromEntries(
    statuses.map((status) => [status, json(ERROR_MEANINGS[status] ?? 'An error.', errorBody)]),
  );
}
