import type { FastifyInstance } from 'fastify';
import { topicKey } from '../model/stream-key.js';
import { RUNS_FEED_TOPIC } from '../store/store.js';
import type { AppDeps } from './deps.js';
import { health, json, readiness, unready } from './schemas/api.js';

export async function healthRoutes(
  app: FastifyInstance,
  { store, busHealth, sourceStatus }: AppDeps,
): Promise<void> {
  const liveness = {
    summary: 'Whether the process is up',
    tags: ['health'],
    response: { 200: json('The process is up.', health) },
  };
  app.get('/healthz', { schema: liveness }, async () => ({ status: 'ok' }));

  const readyness = {
    summary: 'Whether the server can serve (its store answers)',
    tags: ['health'],
    response: {
      200: json('Ready; `degraded` when the bus or a source lost its server.', readiness),
      503: json('The store does not answer.', unready),
    },
  };
  app.get('/readyz', { schema: readyness }, async (_request, reply) => {
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
