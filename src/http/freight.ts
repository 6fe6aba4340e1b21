import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { runKey } from '../model/stream-key.js';
import type { AppDeps } from './deps.js';
import { findRunAnywhere, intParam } from './params.js';

/**
 * Freight's deploy-log API (seed 002, CONFORMANCE.md): whole chunks by byte offset, `offset=-1`
 * for the tail, `nextOffset` and a `Link` to the next page. A Freight viewer polls it; the same
 * log is also on the native SSE stream, so it can follow without polling.
 */
export const FREIGHT_PREFIX = '/compat/freight/api/0';

const MiB = 1024 * 1024;
type Query = Record<string, string | string[] | undefined>;

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
    const chunks = await store.readLog(key, offset, limit);
    const last = chunks[chunks.length - 1];
    const nextOffset = last ? last.offset + last.size : offset;
    // Built from what was validated, percent-encoded: never the raw path as it came.
    const path = `${FREIGHT_PREFIX}/${resource}/${encodeURIComponent(id)}/log/`;
    return reply
      .header(
        'Link',
        `<${path}?offset=${nextOffset}&limit=${limit}&cursor=${nextOffset}>; rel="next"`,
      )
      .send({
        nextOffset,
        chunks: chunks.map((chunk) => ({
          text: chunk.text,
          date: chunk.time,
          offset: chunk.offset,
          size: chunk.size,
        })),
      });
  };
  for (const resource of ['tasks', 'deploys']) {
    app.get(`${FREIGHT_PREFIX}/${resource}/:id/log/`, log(resource));
    app.get(`${FREIGHT_PREFIX}/${resource}/:id/log`, log(resource));
  }
}
