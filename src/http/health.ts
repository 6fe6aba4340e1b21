import type { FastifyInstance } from 'fastify';
import { topicKey } from '../model/stream-key.js';
import { RUNS_FEED_TOPIC } from '../store/store.js';
import type { AppDeps } from './deps.js';

export async function healthRoutes(
  app: FastifyInstance,
  { store, sourceStatus }: AppDeps,
): Promise<void> {
  app.get('/healthz', async () => ({ status: 'ok' }));

  app.get('/readyz', async (_request, reply) => {
    try {
      await store.bounds(topicKey(RUNS_FEED_TOPIC));
    } catch (error) {
      return reply.code(503).send({
        status: 'unavailable',
        store: { status: 'down', message: (error as Error).message },
      });
    }
    // A source that lost its broker degrades ingest from it, not the API: still ready.
    const sources = sourceStatus?.() ?? [];
    const degraded = sources.some((source) => source.state !== 'connected');
    return {
      status: degraded ? 'degraded' : 'ready',
      store: { status: 'up' },
      bus: { status: 'up' },
      sources,
    };
  });
}
