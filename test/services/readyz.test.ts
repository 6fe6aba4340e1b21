import { afterEach, expect, it } from 'vitest';
import { RedisBus } from '../../src/bus/redis.js';
import { SqliteStore } from '../../src/store/sqlite.js';
import { createTestApp } from '../helpers/app.js';
import type { TestApp } from '../helpers/app.js';
import { backendPair } from '../helpers/backends.js';
import { PrivateRedis } from '../helpers/redis-server.js';

// /readyz reports the bus as it is (docs/API.md, "Health"), on a Redis of the test's own that
// it stops and starts again.

const apps: TestApp[] = [];
const redises: PrivateRedis[] = [];

afterEach(async () => {
  for (const app of apps.splice(0)) await app.close();
  for (const redis of redises.splice(0)) await redis.dispose();
});

/** Asks /readyz every 50 ms until its status is `status`, for at most 10 s. */
async function readyzUntil(t: TestApp, status: string): Promise<void> {
  for (let attempt = 0; attempt < 200; attempt += 1) {
    if ((await readyz(t)).body['status'] === status) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`/readyz never said ${status}`);
}

async function readyz(t: TestApp): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await t.app.inject({ method: 'GET', url: '/readyz' });
  return { status: res.statusCode, body: res.json() as Record<string, unknown> };
}

it('says the bus is degraded while Redis is down, stays ready, and says up again once Redis is back', async () => {
  const redis = await PrivateRedis.start();
  redises.push(redis);
  const t = await createTestApp({}, async (dir) =>
    backendPair(new SqliteStore(`${dir}/tailwater.db`), await RedisBus.open(redis.url)),
  );
  apps.push(t);
  expect(await readyz(t)).toMatchObject({
    status: 200,
    body: { status: 'ready', bus: { status: 'up' } },
  });

  await redis.stop();
  await readyzUntil(t, 'degraded');
  expect(await readyz(t)).toMatchObject({ status: 200, body: { bus: { status: 'degraded' } } });

  await redis.start();
  await readyzUntil(t, 'ready');
  expect((await readyz(t)).body['bus']).toEqual({ status: 'up' });
});
