import { pipelineResource, topicResource } from '../model/scopes.js';
import { isAdmin, mayRead } from './auth.js';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { TailwaterError } from '../model/errors.js';
import { validateRunId } from '../model/names.js';
import { RUN_STATUSES } from '../model/run.js';
import { RUNS_FEED_TOPIC } from '../store/store.js';
import { parseBody } from './body.js';
import type { BodyConfig } from './body.js';
import type { AppDeps } from './deps.js';
import { pageParams, pipelineParam, resolveRunId } from './params.js';

/**
 * A JSON object, taken as JSON.parse made it. Not z.record, which rebuilds the object and skips
 * a key named `__proto__` (to keep its own output safe), so such a key would vanish unsaid;
 * JSON.parse gives it as an ordinary key, and JSON.stringify writes it back.
 */
const jsonObject = z.custom<Record<string, unknown>>(
  (value) => value !== null && typeof value === 'object' && !Array.isArray(value),
  { message: 'Expected an object.' },
);

const putRunBody = z.object({
  status: z.enum(RUN_STATUSES),
  meta: jsonObject.optional(),
});

type RunParams = { fqn: string; runId: string };
type Query = Record<string, string | string[] | undefined>;

/** Runs and pipelines: create, update, read, list, cancel; topics listed. */
export async function runRoutes(
  app: FastifyInstance,
  { store, ingest, settings }: AppDeps,
): Promise<void> {
  // A status, and a meta of at most maxEventBytes (ingest says so precisely).
  const putBodyLimit = settings.maxEventBytes + 4096;

  app.put('/api/v1/pipelines/:fqn/runs/:runId', { bodyLimit: putBodyLimit }, async (request) => {
    const params = request.params as RunParams;
    const fqn = pipelineParam(params.fqn);
    if (params.runId === 'latest') {
      throw new TailwaterError('TW_BAD_NAME', '"latest" names the newest run; it cannot be set.');
    }
    const runId = await resolveRunId(store, fqn, params.runId);
    const body = parseBody(putRunBody, request.body);
    return (await ingest.putRun(fqn, runId, body)).run;
  });

  app.get('/api/v1/pipelines/:fqn/runs/:runId', async (request) => {
    const params = request.params as RunParams;
    const fqn = pipelineParam(params.fqn);
    const runId = await resolveRunId(store, fqn, params.runId);
    const run = await store.getRun(fqn, runId);
    if (!run) throw new TailwaterError('TW_RUN_NOT_FOUND', `No run ${runId} of pipeline ${fqn}.`);
    return run;
  });

  // Takes no body: what one holds is not used, and an empty one, of any type, is no body.
  app.post(
    '/api/v1/pipelines/:fqn/runs/:runId/cancel',
    { bodyLimit: 1024, config: { emptyBody: true } satisfies BodyConfig },
    async (request, reply) => {
      const params = request.params as RunParams;
      const fqn = pipelineParam(params.fqn);
      const runId = await resolveRunId(store, fqn, params.runId);
      const { run } = await ingest.requestCancel(fqn, runId);
      return reply.code(202).send(run);
    },
  );

  // Deleting needs admin (auth.ts: DELETE). Its viewers get `gap` then `end runDeleted`.
  app.delete('/api/v1/pipelines/:fqn/runs/:runId', async (request, reply) => {
    const params = request.params as RunParams;
    // Named, never `latest`: a delete must not depend on which run happens to be newest.
    await ingest.deleteRun(pipelineParam(params.fqn), validateRunId(params.runId));
    return reply.code(204).send();
  });

  app.get('/api/v1/pipelines', async (request) => {
    const page = pageParams(request.query as Query, { default: 100, max: 1000 });
    const { items, next } = await store.listPipelines(page);
    // A token sees only what it may read; it must not learn the rest exists.
    const pipelines = items.filter((item) => mayRead(request, pipelineResource(item.fqn)));
    return { pipelines, ...(next === undefined ? {} : { next }) };
  });

  // What each pipeline's history holds; a token sees only the pipelines it may read.
  app.get('/api/v1/stats', { config: { listing: true } }, async (request) => {
    const page = pageParams(request.query as Query, { default: 1000, max: 1000 });
    const { items, next } = await store.pipelineStats(page);
    const pipelines = items.filter((item) => mayRead(request, pipelineResource(item.pipeline)));
    return { pipelines, ...(next === undefined ? {} : { next }) };
  });

  app.get('/api/v1/topics', async (request) => {
    const page = pageParams(request.query as Query, { default: 100, max: 1000 });
    const { items, next } = await store.listTopics(page);
    const topics = items.filter((topic) =>
      topic === RUNS_FEED_TOPIC ? isAdmin(request) : mayRead(request, topicResource(topic)),
    );
    return { topics, ...(next === undefined ? {} : { next }) };
  });

  app.get('/api/v1/pipelines/:fqn/runs', async (request) => {
    const fqn = pipelineParam((request.params as { fqn: string }).fqn);
    const query = request.query as Query;
    const page = pageParams(query, { default: 50, max: 1000 });
    const statusParam = query['status'];
    let status: (typeof RUN_STATUSES)[number] | undefined;
    if (statusParam !== undefined) {
      const parsed = z.enum(RUN_STATUSES).safeParse(statusParam);
      if (!parsed.success) {
        throw new TailwaterError(
          'TW_BAD_QUERY',
          `status must be one of ${RUN_STATUSES.join(', ')} (was "${String(statusParam)}").`,
        );
      }
      status = parsed.data;
    }
    const { items, next } = await store.listRuns(fqn, { ...page, status });
    return { runs: items, ...(next === undefined ? {} : { next }) };
  });
}
