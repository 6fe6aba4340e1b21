import type { FastifyInstance } from 'fastify';
import { topicKey } from '../model/stream-key.js';
import { RUNS_FEED_TOPIC } from '../store/store.js';
import type { AppDeps } from './deps.js';

export async function healthRoutes(
  app: FastifyInstance,
  { store, busHealth, sourceStatus }: AppDeps,
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
    // A bus or source that lost its server degrades the service, not the API: still ready.
    // Without the bus, viewers get new entries at the next poll rather than at once.
    const sources = sourceStatus?.() ?? [];
    const busState = busHealth?.() ?? { state: 'up' as const };
    const degraded =
      busState.state !== 'up' || sources.some((source) => source.state !== 'connected');
    return {
      status: degraded ? 'degraded' : 'ready',
      store: { status: 'up' },
      bus: {
        status: busState.state,
        ...(busState.detail === undefined ? {} : { message: busState.detail }),
      },
      sources,
    };
  });
}
