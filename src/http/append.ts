import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { TailwaterError } from '../model/errors.js';
import { runKey, topicKey } from '../model/stream-key.js';
import type { StreamKey } from '../model/stream-key.js';
import { parseBody, PlainText } from './body.js';
import { exactText } from './exact-json.js';
import type { AppDeps } from './deps.js';
import { pipelineParam, resolveRunId, topicParam } from './params.js';

const label = z.string().min(1).max(256);

const logBody = z.object({
  text: z.string(),
  step: label.optional(),
  id: label.optional(),
});

const eventsBody = z.object({
  events: z.array(
    z.object({
      kind: z.string(),
      data: z.unknown(),
      step: label.optional(),
      correlationId: label.optional(),
      id: label.optional(),
    }),
  ),
});

type RunParams = { fqn: string; runId: string };

/** Writes: log text and event batches, to runs and topics. Answers once durable. */
export async function appendRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  const { settings, store, ingest } = deps;
  // A full batch of maximum-size events, plus room for the envelope of each.
  const eventsBodyLimit = settings.maxBatchEntries * (settings.maxEventBytes + 4096) + 65536;

  app.post(
    '/api/v1/pipelines/:fqn/runs/:runId/logs',
    { bodyLimit: settings.maxAppendBytes },
    async (request) => {
      const params = request.params as RunParams;
      const fqn = pipelineParam(params.fqn);
      const runId = await resolveRunId(store, fqn, params.runId);
      const log =
        request.body instanceof PlainText
          ? { text: request.body.text }
          : parseBody(logBody, request.body);
      const { seq, firstSeq, offset, size, duplicate } = await ingest.appendLog(fqn, runId, log);
      return { seq, firstSeq, offset, size, duplicate };
    },
  );

  const appendEvents = async (key: StreamKey, body: unknown) => {
    const { events } = parseBody(eventsBody, body);
    // Numbers JSON.parse would round (a snapshotId past 2^53) are stored as the producer wrote them.
    const exact = events.map((event, index) => ({
      ...event,
      dataJson: exactText(
        body,
        (twin: { events: { data?: unknown }[] }) => twin.events[index]?.data,
      ),
    }));
    const { seqs, duplicates } = await ingest.appendEvents(key, exact);
    return { first: Math.min(...seqs), last: Math.max(...seqs), duplicates, seqs };
  };

  app.post(
    '/api/v1/pipelines/:fqn/runs/:runId/events',
    { bodyLimit: eventsBodyLimit },
    async (request) => {
      const params = request.params as RunParams;
      const fqn = pipelineParam(params.fqn);
      const runId = await resolveRunId(store, fqn, params.runId);
      return appendEvents(runKey(fqn, runId), request.body);
    },
  );

  app.post('/api/v1/topics/:topic/events', { bodyLimit: eventsBodyLimit }, async (request) => {
    const topic = topicParam((request.params as { topic: string }).topic);
    if (topic.startsWith('_')) {
      throw new TailwaterError('TW_BAD_NAME', `Topics starting with "_" are the server's own.`);
    }
    return appendEvents(topicKey(topic), request.body);
  });
}
