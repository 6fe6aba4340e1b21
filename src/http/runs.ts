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
import {
  pageParams,
  pageQuery,
  pipelineParam,
  queryParam,
  queryValue,
  resolveRunId,
  single,
  TIME_SPEC,
  timeParam,
  timeQuery,
} from './params.js';
import {
  errors,
  json,
  noContent,
  pipelineList,
  run,
  runList,
  statsList,
  topicList,
} from './schemas/api.js';
import { pipelinePath, runPath } from './schemas/paths.js';

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
  meta: jsonObject.optional().meta({
    type: 'object',
    description: 'Replaces the stored meta when given; at most maxEventBytes of JSON.',
  }),
});

/** `?status=` of a listing: one run status, checked against the list of them. */
function statusQuery(description: string) {
  return queryParam(
    'status',
    (query) => {
      const statusParam = query['status'];
      if (statusParam === undefined) return undefined;
      const parsed = z.enum(RUN_STATUSES).safeParse(statusParam);
      if (!parsed.success) {
        throw new TailwaterError(
          'TW_BAD_QUERY',
          `status must be one of ${RUN_STATUSES.join(', ')} (was "${String(statusParam)}").`,
        );
      }
      return parsed.data;
    },
    { type: 'string', enum: RUN_STATUSES, description },
  );
}

/**
 * `?name=`: a glob over FQNs when it holds a `*` (`etl.*`), else text the FQN must contain
 * (`daily`); case-sensitive, in NFC as names are stored.
 */
function nameGlob(query: Query): string | undefined {
  const raw = single(query, 'name');
  if (raw === undefined || raw === '') return undefined;
  if (Buffer.byteLength(raw, 'utf8') > 256) {
    throw new TailwaterError('TW_BAD_QUERY', 'name: 256 bytes at most.');
  }
  const name = raw.normalize('NFC');
  return name.includes('*') ? name : `*${name}*`;
}

const pipelinesQuery = z.object({
  ...pageQuery({ default: 100, max: 1000 }).shape,
  name: queryParam('name', nameGlob, {
    type: 'string',
    description:
      'Only pipelines whose FQN holds this text, or matches it as a glob when it has a `*` (`etl.*`: `*` is any run of characters). Case-sensitive.',
  }),
  status: statusQuery('Only pipelines whose newest run has this status.'),
});
const statsQuery = pageQuery({ default: 1000, max: 1000 });
const topicsQuery = pageQuery({ default: 100, max: 1000 });
const runsQuery = z.object({
  ...pageQuery({ default: 50, max: 1000 }).shape,
  status: statusQuery('Only runs with this status.'),
  since: timeQuery('since', `Only runs created at or after this. ${TIME_SPEC}`),
  until: timeQuery('until', `Only runs created before this. ${TIME_SPEC}`),
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

  app.put(
    '/api/v1/pipelines/:fqn/runs/:runId',
    {
      bodyLimit: putBodyLimit,
      schema: {
        summary: 'Create or update a run',
        tags: ['runs'],
        params: runPath,
        body: putRunBody,
        response: { 200: json('The run.', run), ...errors(400, 404, 409, 413, 415, 503) },
      },
    },
    async (request) => {
      const params = request.params as RunParams;
      const fqn = pipelineParam(params.fqn);
      if (params.runId === 'latest') {
        throw new TailwaterError('TW_BAD_NAME', '"latest" names the newest run; it cannot be set.');
      }
      const runId = await resolveRunId(store, fqn, params.runId);
      const body = parseBody(putRunBody, request.body);
      return (await ingest.putRun(fqn, runId, body)).run;
    },
  );

  const readRun = {
    summary: 'A run',
    tags: ['runs'],
    params: runPath,
    response: { 200: json('The run.', run), ...errors(400, 404) },
  };
  app.get('/api/v1/pipelines/:fqn/runs/:runId', { schema: readRun }, async (request) => {
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
    {
      bodyLimit: 1024,
      config: { emptyBody: true } satisfies BodyConfig,
      schema: {
        summary: 'Request the cancel of a run',
        tags: ['runs'],
        params: runPath,
        response: {
          202: json('The run, with `cancelRequested: true`.', run),
          ...errors(400, 404, 409, 413),
        },
      },
    },
    async (request, reply) => {
      const params = request.params as RunParams;
      const fqn = pipelineParam(params.fqn);
      const runId = await resolveRunId(store, fqn, params.runId);
      const { run } = await ingest.requestCancel(fqn, runId);
      return reply.code(202).send(run);
    },
  );

  // Deleting needs admin (auth.ts: DELETE). Its viewers get `gap` then `end runDeleted`.
  const deleteRun = {
    summary: 'Delete a run (admin)',
    tags: ['runs'],
    params: runPath,
    response: { 204: noContent('Deleted.'), ...errors(400, 404) },
  };
  app.delete(
    '/api/v1/pipelines/:fqn/runs/:runId',
    { schema: deleteRun },
    async (request, reply) => {
      const params = request.params as RunParams;
      // Named, never `latest`: a delete must not depend on which run happens to be newest.
      await ingest.deleteRun(pipelineParam(params.fqn), validateRunId(params.runId));
      return reply.code(204).send();
    },
  );

  const listPipelines = {
    summary: 'The pipelines',
    tags: ['runs'],
    querystring: pipelinesQuery,
    response: { 200: json('A page of pipelines, by FQN.', pipelineList), ...errors(400) },
  };
  app.get('/api/v1/pipelines', { schema: listPipelines }, async (request) => {
    const query = request.query as Query;
    const { items, next } = await store.listPipelines({
      after: queryValue(pipelinesQuery, query, 'after'),
      limit: queryValue(pipelinesQuery, query, 'limit'),
      name: queryValue(pipelinesQuery, query, 'name'),
      status: queryValue(pipelinesQuery, query, 'status'),
    });
    // A token sees only what it may read; it must not learn the rest exists.
    const pipelines = items.filter((item) => mayRead(request, pipelineResource(item.fqn)));
    return { pipelines, ...(next === undefined ? {} : { next }) };
  });

  // What each pipeline's history holds; a token sees only the pipelines it may read.
  const stats = {
    summary: "What each pipeline's history holds",
    tags: ['runs'],
    querystring: statsQuery,
    response: { 200: json('A page of pipeline statistics.', statsList), ...errors(400) },
  };
  app.get('/api/v1/stats', { config: { listing: true }, schema: stats }, async (request) => {
    const page = pageParams(statsQuery, request.query as Query);
    const { items, next } = await store.pipelineStats(page);
    const pipelines = items.filter((item) => mayRead(request, pipelineResource(item.pipeline)));
    // The whole history's bytes: the server's own business, told to admins.
    const storage = isAdmin(request) ? await store.storageBytes() : undefined;
    return {
      pipelines,
      ...(storage === undefined ? {} : { storage }),
      ...(next === undefined ? {} : { next }),
    };
  });

  const listTopics = {
    summary: 'The topics',
    tags: ['topics'],
    querystring: topicsQuery,
    response: { 200: json('A page of topic names.', topicList), ...errors(400) },
  };
  app.get('/api/v1/topics', { schema: listTopics }, async (request) => {
    const page = pageParams(topicsQuery, request.query as Query);
    const { items, next } = await store.listTopics(page);
    const topics = items.filter((topic) =>
      topic === RUNS_FEED_TOPIC ? isAdmin(request) : mayRead(request, topicResource(topic)),
    );
    return { topics, ...(next === undefined ? {} : { next }) };
  });

  const listRuns = {
    summary: "A pipeline's runs, newest first",
    tags: ['runs'],
    params: pipelinePath,
    querystring: runsQuery,
    response: { 200: json('A page of runs.', runList), ...errors(400) },
  };
  app.get('/api/v1/pipelines/:fqn/runs', { schema: listRuns }, async (request) => {
    const fqn = pipelineParam((request.params as { fqn: string }).fqn);
    const query = request.query as Query;
    const page = {
      after: queryValue(runsQuery, query, 'after'),
      limit: queryValue(runsQuery, query, 'limit'),
    };
    const status = queryValue(runsQuery, query, 'status');
    // Both bounds are taken against one `now`, so `since=1h&until=30m` is exactly half an hour.
    const now = Date.now();
    const at = (name: 'since' | 'until') => timeParam(query, name, now);
    queryValue(runsQuery, query, 'since');
    queryValue(runsQuery, query, 'until');
    const { items, next } = await store.listRuns(fqn, {
      ...page,
      status,
      since: at('since'),
      until: at('until'),
    });
    return { runs: items, ...(next === undefined ? {} : { next }) };
  });
}
