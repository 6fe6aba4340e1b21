import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { TailwaterError } from '../model/errors.js';
import type { ErrorCode } from '../model/errors.js';
import { validateRunId } from '../model/names.js';
import { TAILWATER_VERSION } from '../model/version.js';
import type { Run } from '../model/run.js';
import type { StreamKey } from '../model/stream-key.js';
import { runKey } from '../model/stream-key.js';
import { pipelineResource } from '../model/scopes.js';
import type { Store } from '../store/store.js';
import { mayRead } from './auth.js';
import type { AppDeps } from './deps.js';
import type { ErrorBody } from './errors.js';
import { registerErrorHandler } from './errors.js';
import { appOf, deployRun, freightDate, serializeApp, serializeDeploy } from './freight-deploy.js';
import { findRunAnywhere, intParam, pipelineParam } from './params.js';
import { logChunks } from './read.js';

/**
 * Freight's deploy API (docs/API.md, "Freight"), as Freight's own UI uses it: the deploy
 * `/deploys/{app}/{env}/{number}/` for its status, polled every few seconds while it runs, and
 * its log `…/log/?offset=N`, polled every second from the `nextOffset` of the previous answer.
 * A log request without `limit` (or with `limit=0`) gets the whole log from `offset`, as in
 * Freight, whose UI fetches a finished deploy's log in one request; `offset=-1` is the tail.
 */
export const FREIGHT_PREFIX = '/compat/freight/api/0';

type Query = Record<string, string | string[] | undefined>;

/** Which chunks a request names: those starting in [from, to), and where the next page starts. */
interface LogWindow {
  from: number;
  to: number;
  nextOffset: number;
}

/**
 * Works out the page before reading it (two index probes), so that `nextOffset`, which the
 * `Link` header carries, is known before the chunks are streamed.
 */
async function logWindow(
  store: Store,
  key: StreamKey,
  offset: number,
  limit: number,
): Promise<LogWindow> {
  const { logBytes } = await store.bounds(key);
  const tail = offset === -1;
  const from = tail
    ? ((await store.logChunkAt(key, Math.max(logBytes - limit, 0)))?.offset ?? 0)
    : offset;
  const to = tail ? logBytes : Math.min(offset + limit, logBytes);
  // The last chunk of the page is the one that holds its last byte, if it starts in the page.
  const last = to > from ? await store.logChunkAt(key, to - 1) : undefined;
  const nextOffset = last && last.offset >= from ? last.offset + last.size : offset;
  return { from, to: Math.min(to, nextOffset), nextOffset };
}

/**
 * The page as JSON, written a megabyte of log at a time with a turn of the event loop between,
 * so a whole log never sits in memory at once.
 */
async function* pageJson(store: Store, key: StreamKey, page: LogWindow): AsyncGenerator<string> {
  yield `{"nextOffset":${page.nextOffset},"chunks":[`;
  let first = true;
  for await (const chunk of logChunks(store, key, page.from, page.to)) {
    yield `${first ? '' : ','}${JSON.stringify({
      text: chunk.text,
      date: freightDate(chunk.time),
      offset: chunk.offset,
      size: chunk.size,
    })}`;
    first = false;
  }
  yield ']}';
}

/** Freight's error names, which its clients show beside the message. */
const ERROR_NAMES: Partial<Record<ErrorCode, string>> = {
  TW_RUN_NOT_FOUND: 'invalid_resource',
  TW_PIPELINE_NOT_FOUND: 'invalid_resource',
  TW_NOT_FOUND: 'invalid_resource',
};

/** Freight's `{"error", "error_name"}`; the Tailwater code rides along. */
const freightErrorBody: ErrorBody = (error) => ({
  error: error.message,
  error_name: ERROR_NAMES[error.code] ?? error.code.replace(/^TW_/, '').toLowerCase(),
  code: error.code,
});

const invalidDeploy = () => new TailwaterError('TW_RUN_NOT_FOUND', 'Invalid deploy');

type DeployParams = { id?: string; app?: string; env?: string; number?: string };

/** The run a deploy path names: `{app}/{env}/{number}`, or one id (the run's UUID or run id). */
async function deployOf(store: Store, params: DeployParams): Promise<Run> {
  let run: Run | undefined;
  if (params.id !== undefined) {
    run = await findRunAnywhere(store, params.id);
  } else {
    const { pipeline, runId } = deployRun(params.app!, params.env!, params.number!);
    run = await store.getRun(pipelineParam(pipeline), validateRunId(runId));
  }
  if (!run) throw invalidDeploy();
  return run;
}

/** The pipeline's recent successful runs, for a deploy's estimated duration. */
async function recentRuns(store: Store, run: Run): Promise<Run[]> {
  if (run.endedAt !== null) return [];
  return (await store.listRuns(run.pipeline, { limit: 10, status: 'success' })).items;
}

/** The most pipelines the app list reads (ten pages); past it the list is cut, and logged. */
const MAX_PIPELINES_LISTED = 10_000;

/** Freight's apps: every pipeline named `{app}.{env}`, grouped by app, sorted by name. */
async function listApps(
  store: Store,
  name: string | undefined,
  log: FastifyRequest['log'],
  /** Whether the token may read the pipeline: apps it may not read are left out. */
  readable: (fqn: string) => boolean,
) {
  const environments = new Map<string, string[]>();
  let after: string | undefined;
  let read = 0;
  do {
    const page = await store.listPipelines({ after, limit: 1000 });
    for (const pipeline of page.items) {
      const parts = appOf(pipeline.fqn);
      if (!parts || (name !== undefined && parts.app !== name) || !readable(pipeline.fqn)) continue;
      const envs = environments.get(parts.app) ?? [];
      envs.push(parts.environment);
      environments.set(parts.app, envs);
    }
    read += page.items.length;
    after = page.next;
  } while (after !== undefined && read < MAX_PIPELINES_LISTED);
  if (after !== undefined) log.warn({ read }, 'Freight app list cut at its pipeline limit');
  return [...environments.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([app, envs]) => serializeApp(app, envs));
}

const cancelBody = z.object({ status: z.literal('cancelled') });

export async function freightRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  const { store, ingest } = deps;
  registerErrorHandler(app, freightErrorBody);

  // What Freight's UI reads before it shows any page: its config, and the apps (a deploy page
  // looks its app up in that list).
  for (const slash of ['/', '']) {
    app.get(`${FREIGHT_PREFIX}/config${slash}`, { config: { listing: true } }, async () => ({
      SENTRY_PUBLIC_DSN: null,
      VERSION: TAILWATER_VERSION,
    }));
    app.get(`${FREIGHT_PREFIX}/apps${slash}`, { config: { listing: true } }, async (request) => {
      const name = (request.query as Query)['name'];
      const readable = (fqn: string) => mayRead(request, pipelineResource(fqn));
      return listApps(store, typeof name === 'string' ? name : undefined, request.log, readable);
    });
  }

  const details = async (request: FastifyRequest) => {
    const run = await deployOf(store, request.params as DeployParams);
    return serializeDeploy(run, await recentRuns(store, run));
  };

  // Freight's Cancel button: the runner of the run sees the request and stops its command.
  const cancel = async (request: FastifyRequest) => {
    const run = await deployOf(store, request.params as DeployParams);
    if (!cancelBody.safeParse(request.body).success) {
      throw new TailwaterError(
        'TW_BAD_REQUEST',
        'The only change a deploy takes is {"status": "cancelled"}.',
      );
    }
    const { run: cancelled } = await ingest.requestCancel(run.pipeline, run.runId);
    return serializeDeploy(cancelled, []);
  };

  const log = async (request: FastifyRequest, reply: FastifyReply) => {
    const params = request.params as DeployParams;
    const run = await deployOf(store, params);
    const query = request.query as Query;
    const offset = intParam(query, 'offset', { min: -1, max: Number.MAX_SAFE_INTEGER, default: 0 });
    const limit = intParam(query, 'limit', { min: 0, max: Number.MAX_SAFE_INTEGER, default: 0 });
    const key = runKey(run.pipeline, run.runId);
    const page = await logWindow(store, key, offset, limit === 0 ? Number.MAX_SAFE_INTEGER : limit);
    const next = new URLSearchParams({ offset: String(page.nextOffset) });
    if (limit !== 0) next.set('limit', String(limit));
    next.set('cursor', String(page.nextOffset));
    return reply
      .type('application/json; charset=utf-8')
      .header('Link', `<${logPath(request, params)}?${next}>; rel="next"`)
      .send(Readable.from(pageJson(store, key, page)));
  };

  // The deploy's pipeline, which a token's scope is checked against (auth.ts): named by the
  // path, or found by the deploy's id.
  const resource = async (request: FastifyRequest) => {
    const params = request.params as DeployParams;
    if (params.id === undefined) {
      return pipelineResource(
        pipelineParam(deployRun(params.app!, params.env!, params.number!).pipeline),
      );
    }
    return pipelineResource((await deployOf(store, params)).pipeline);
  };
  const cancelRoute = {
    bodyLimit: 1024,
    config: { json: { maxDepth: 2, maxValues: 8 }, resource },
  };
  const readRoute = { config: { resource } };
  // The deploy by {app}/{env}/{number} (and its older /tasks/ alias), or by one id.
  for (const resource of ['deploys', 'tasks']) {
    for (const name of [':app/:env/:number', ':id']) {
      for (const slash of ['/', '']) {
        const path = `${FREIGHT_PREFIX}/${resource}/${name}`;
        app.get(`${path}${slash}`, readRoute, details);
        app.put(`${path}${slash}`, cancelRoute, cancel);
        app.get(`${path}/log${slash}`, readRoute, log);
      }
    }
  }
}

/** The log's own path for the `Link` header, built from what was validated, percent-encoded. */
function logPath(request: FastifyRequest, params: DeployParams): string {
  const resource = request.url.startsWith(`${FREIGHT_PREFIX}/tasks/`) ? 'tasks' : 'deploys';
  const names = params.id !== undefined ? [params.id] : [params.app!, params.env!, params.number!];
  return `${FREIGHT_PREFIX}/${resource}/${names.map(encodeURIComponent).join('/')}/log/`;
}
