import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { JsonLimits } from '../model/bounded-json.js';
import { MAX_JSON_DEPTH, RawJson } from '../model/bounded-json.js';
import type { NewEvent } from '../model/entry.js';
import { TailwaterError } from '../model/errors.js';
import type { Settings } from '../model/settings.js';
import { runKey, topicKey } from '../model/stream-key.js';
import type { StreamKey } from '../model/stream-key.js';
import type { BodyConfig } from './body.js';
import { parseBody, PlainText } from './body.js';
import type { AppDeps } from './deps.js';
import { pipelineParam, resolveRunId, topicParam } from './params.js';
import { errors, eventsAppended, json, logAppended } from './schemas/api.js';
import { runPath, topicPath } from './schemas/paths.js';

const label = z.string().min(1).max(256);

const logBody = z.object({
  text: z.string(),
  step: label.optional(),
  id: label.optional().meta({ description: "The producer's id: a retry is stored once." }),
});

const event = z.object({
  kind: z.string().meta({ description: '`[A-Za-z0-9_.:-]{1,64}`, not `log` nor a reserved kind.' }),
  // The body parser hands `data` over as the producer's text (RawJson), for it to be kept as sent.
  data: z
    .instanceof(RawJson)
    .optional()
    .meta({ description: 'Any JSON value, at most maxEventBytes as sent; kept exactly as sent.' }),
  step: label.optional(),
  correlationId: label.optional(),
  id: label.optional().meta({ description: "The producer's id: a retry is stored once." }),
});

/** A batch: validated whole, so the first bad event is named by its index (`events[3].kind`). */
const eventsBody = z.object({
  events: z.array(event).meta({
    description: '1 to maxBatchEntries (1000) events, stored all or nothing.',
  }),
});

/** Log text as `text/plain`, or as JSON. */
const logBodies = {
  content: {
    'text/plain': { schema: z.string().meta({ description: 'The log text, UTF-8.' }) },
    'application/json': { schema: logBody },
  },
};

const appendErrors = errors(400, 404, 409, 413, 415, 429, 503);

/** Room in a batch item for everything beside its data: kind, step, ids, and their escapes. */
export const EVENT_ENVELOPE_BYTES = 4096;

/**
 * The budget of a batch body (`{"events": [...]}`): at most maxBatchEntries items of at most
 * maxEventBytes of data each, checked as the body arrives; each item's data is kept as the
 * producer's text. The ZenML dialect uses the same with its own key and words.
 */
export function batchLimits(
  settings: Pick<Settings, 'maxBatchEntries' | 'maxEventBytes'>,
  rawField: string,
  errors: {
    tooMany: (count: number) => TailwaterError;
    itemTooLarge?: (index: number, bytes: number) => TailwaterError;
  },
): { bodyLimit: number; config: BodyConfig } {
  const maxItemBytes = settings.maxEventBytes + EVENT_ENVELOPE_BYTES;
  const json: JsonLimits = {
    maxDepth: MAX_JSON_DEPTH,
    maxValues: 1000,
    list: {
      key: 'events',
      maxItems: settings.maxBatchEntries,
      maxItemBytes,
      rawField,
      tooManyItems: errors.tooMany,
      itemTooLarge:
        errors.itemTooLarge ??
        ((index, bytes) =>
          new TailwaterError(
            'TW_EVENT_TOO_LARGE',
            `events[${index}]: the event is larger than ${maxItemBytes} bytes of JSON (was at least ${bytes}).`,
          )),
    },
  };
  return {
    bodyLimit: settings.maxBatchEntries * (maxItemBytes + 1) + 65536,
    config: { json },
  };
}

type RunParams = { fqn: string; runId: string };

/** Writes: log text and event batches, to runs and topics. Answers once durable. */
export async function appendRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  const { settings, store, ingest } = deps;
  const batch = batchLimits(settings, 'data', {
    tooMany: (count) =>
      new TailwaterError(
        'TW_BATCH_TOO_LARGE',
        `A batch holds at most ${settings.maxBatchEntries} events (was ${count} or more).`,
      ),
  });
  // Log text as text/plain, or as {"text", "step"?, "id"?}: one long string, a few values.
  const logLimits = {
    bodyLimit: settings.maxAppendBytes + 65536,
    config: { json: { maxDepth: 2, maxValues: 16 } } satisfies BodyConfig,
  };

  const appendLog = {
    summary: 'Append log text to a run',
    description: 'Answered once durable. Creates the run as `running` if new.',
    tags: ['append'],
    params: runPath,
    body: logBodies,
    response: { 200: json('Where the text went.', logAppended), ...appendErrors },
  };
  app.post(
    '/api/v1/pipelines/:fqn/runs/:runId/logs',
    { ...logLimits, schema: appendLog },
    async (request) => {
      const params = request.params as RunParams;
      const fqn = pipelineParam(params.fqn);
      const runId = await resolveRunId(store, fqn, params.runId);
      const log =
        request.body instanceof PlainText
          ? { text: request.body.text }
          : parseBody(logBody, request.body);
      const bytes = Buffer.byteLength(log.text, 'utf8');
      if (bytes > settings.maxAppendBytes) {
        throw new TailwaterError(
          'TW_BODY_TOO_LARGE',
          `An append holds at most ${settings.maxAppendBytes} bytes of text (was ${bytes}).`,
        );
      }
      const { seq, firstSeq, offset, size, duplicate } = await ingest.appendLog(fqn, runId, log);
      return { seq, firstSeq, offset, size, duplicate };
    },
  );

  const appendEvents = async (key: StreamKey, body: unknown) => {
    const { events } = parseBody(eventsBody, body);
    const checked: NewEvent[] = events.map(({ data, ...rest }) => ({
      ...rest,
      data: undefined,
      dataJson: data?.text ?? 'null',
    }));
    const { seqs, duplicates } = await ingest.appendEvents(key, checked);
    return { first: Math.min(...seqs), last: Math.max(...seqs), duplicates, seqs };
  };

  const appendRunEvents = {
    summary: 'Append a batch of events to a run',
    description: 'Answered once durable. Creates the run as `running` if new.',
    tags: ['append'],
    params: runPath,
    body: eventsBody,
    response: { 200: json('The seqs of the events.', eventsAppended), ...appendErrors },
  };
  app.post(
    '/api/v1/pipelines/:fqn/runs/:runId/events',
    { ...batch, schema: appendRunEvents },
    async (request) => {
      const params = request.params as RunParams;
      const fqn = pipelineParam(params.fqn);
      const runId = await resolveRunId(store, fqn, params.runId);
      return appendEvents(runKey(fqn, runId), request.body);
    },
  );

  const appendTopicEvents = {
    summary: 'Append a batch of events to a topic',
    tags: ['topics', 'append'],
    params: topicPath,
    body: eventsBody,
    response: { 200: json('The seqs of the events.', eventsAppended), ...appendErrors },
  };
  app.post(
    '/api/v1/topics/:topic/events',
    { ...batch, schema: appendTopicEvents },
    async (request) => {
      const topic = topicParam((request.params as { topic: string }).topic);
      if (topic.startsWith('_')) {
        throw new TailwaterError('TW_BAD_NAME', `Topics starting with "_" are the server's own.`);
      }
      return appendEvents(topicKey(topic), request.body);
    },
  );
}
