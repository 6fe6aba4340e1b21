import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { StreamKey } from '../model/stream-key.js';
import { runKey } from '../model/stream-key.js';
import type { Store } from '../store/store.js';
import type { AppDeps } from './deps.js';
import { findRunAnywhere, intParam } from './params.js';
import { logChunks } from './read.js';

/**
 * Freight's deploy-log API (docs/API.md, "Freight"): whole chunks by byte offset, `offset=-1`
 * for the tail, `nextOffset` and a `Link` to the next page. A Freight viewer polls it; the same
 * log is also on the native SSE stream, so it can follow without polling.
 */
export const FREIGHT_PREFIX = '/compat/freight/api/0';

const MiB = 1024 * 1024;
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
 * so a whole log (Freight's viewer asks for a finished deploy's in one request) never holds it.
 */
async function* pageJson(store: Store, key: StreamKey, page: LogWindow): AsyncGenerator<string> {
  yield `{"nextOffset":${page.nextOffset},"chunks":[`;
  let first = true;
  for await (const chunk of logChunks(store, key, page.from, page.to)) {
    yield `${first ? '' : ','}${JSON.stringify({
      text: chunk.text,
      date: chunk.time,
      offset: chunk.offset,
      size: chunk.size,
    })}`;
    first = false;
  }
  yield ']}';
}

export async function freightRoutes(app: FastifyInstance, { store }: AppDeps): Promise<void> {
  const log = (resource: string) => async (request: FastifyRequest, reply: FastifyReply) => {
    const id = (request.params as { id: string }).id;
    const run = await findRunAnywhere(store, id);
    if (!run) {
      return reply.code(404).send({ error: 'Invalid deploy', error_name: 'invalid_resource' });
    }
    const query = request.query as Query;
    const offset = intParam(query, 'offset', { min: -1, max: Number.MAX_SAFE_INTEGER, default: 0 });
    const limit = intParam(query, 'limit', { min: 1, max: 16 * MiB, default: MiB });
    const key = runKey(run.pipeline, run.runId);
    const page = await logWindow(store, key, offset, limit);
    // Built from what was validated, percent-encoded: never the raw path as it came.
    const path = `${FREIGHT_PREFIX}/${resource}/${encodeURIComponent(id)}/log/`;
    return reply
      .type('application/json; charset=utf-8')
      .header(
        'Link',
        `<${path}?offset=${page.nextOffset}&limit=${limit}&cursor=${page.nextOffset}>; rel="next"`,
      )
      .send(Readable.from(pageJson(store, key, page)));
  };
  for (const resource of ['tasks', 'deploys']) {
    app.get(`${FREIGHT_PREFIX}/${resource}/:id/log/`, log(resource));
    app.get(`${FREIGHT_PREFIX}/${resource}/:id/log`, log(resource));
  }
}
