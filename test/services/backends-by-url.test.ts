import { afterEach, describe, expect, it } from 'vitest';
import { openBus, openStore } from '../../src/cli/backends.js';
import { SettingsError, settingsSchema } from '../../src/model/settings.js';
import { runKey } from '../../src/model/stream-key.js';
import { freePort } from '../helpers/net.js';
import { freshDatabase } from '../helpers/postgres.js';
import { SHARED_REDIS_URL } from '../helpers/redis-server.js';

// The store and bus a server runs on, named by URL (docs/CONFIGURATION.md).

const cleanups: Array<() => Promise<void>> = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const settings = (values: Record<string, unknown>) =>
  settingsSchema.parse({ data: '/nonexistent', ...values });

describe('backends by URL', () => {
  it('opens a PostgreSQL store from a postgres:// URL, and it stores and reads back', async () => {
    const database = await freshDatabase();
    cleanups.push(database.drop);
    const store = await openStore(settings({ store: database.url }));
    cleanups.push(() => store.close());
    await store.appendLog('url.pipeline', 'r1', [{ text: 'hello\n' }]);
    const entries = await store.readEntries(runKey('url.pipeline', 'r1'), {
      afterSeq: 0,
      limit: 10,
      kinds: ['log'],
    });
    expect(entries.map((entry) => entry.text)).toEqual(['hello\n']);
  });

  it('opens a Redis bus from a redis:// URL, up', async () => {
    const bus = await openBus(settings({ bus: SHARED_REDIS_URL }));
    cleanups.push(() => bus.close());
    expect(bus.health().state).toBe('up');
  });

  it.each([
    ['a store of an unknown scheme', { store: 'mysql://db/x' }, 'store'],
    ['a bus of an unknown scheme', { bus: 'kafka://broker:9092' }, 'bus'],
  ])('refuses %s at start with a SettingsError naming the setting', async (_what, values, name) => {
    const open = name === 'store' ? openStore : openBus;
    const error = await open(settings(values)).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(SettingsError);
    expect((error as Error).message).toMatch(new RegExp(`^${name}: `));
  });

  it('refuses an unreachable PostgreSQL or Redis at start with an error, never later', async () => {
    const port = await freePort();
    await expect(
      openStore(settings({ store: `postgres://postgres:secret@127.0.0.1:${port}/db` })),
    ).rejects.toThrow(/127\.0\.0\.1/);
    await expect(openBus(settings({ bus: `redis://127.0.0.1:${port}` }))).rejects.toThrow(
      /127\.0\.0\.1/,
    );
  });

  it('never prints the password of a store URL it refuses', async () => {
    const port = await freePort();
    const error = await openStore(
      settings({ store: `postgres://postgres:hunter2@127.0.0.1:${port}/db` }),
    ).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(error?.message).not.toContain('hunter2');
  });
});
