import { afterEach, describe, expect, it } from 'vitest';
import { openBus, openStore } from '../../src/cli/backends.js';
import { SettingsError, settingsSchema } from '../../src/model/settings.js';
import { runKey } from '../../src/model/stream-key.js';
import { freePort } from '../helpers/net.js';
import { freshDatabase } from '../helpers/postgres.js';
import { SHARED_REDIS_URL } from '../helpers/redis-server.js';
import { sleep } from '../helpers/wait.js';

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

  it('opens Redis buses in the busNamespace setting: the same namespace hears, another does not', async () => {
    const namespace = `ns-${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`;
    const open = async (busNamespace: string) => {
      const bus = await openBus(settings({ bus: SHARED_REDIS_URL, busNamespace }));
      cleanups.push(() => bus.close());
      return bus;
    };
    const [publisher, sameNamespace, otherNamespace] = [
      await open(namespace),
      await open(namespace),
      await open(`${namespace}-other`),
    ];
    const heard: string[] = [];
    const same = sameNamespace.subscribe('s', (seq) => heard.push(`same ${seq}`));
    const other = otherNamespace.subscribe('s', (seq) => heard.push(`other ${seq}`));
    await Promise.all([same.ready, other.ready]);
    publisher.notify('s', 7);
    // A second notification the other way round proves the other namespace's bus is listening.
    otherNamespace.notify('s', 8);
    const deadline = Date.now() + 5_000;
    while (heard.length < 2 && Date.now() < deadline) await sleep(10);
    // Room for a notification that crossed namespaces to arrive too.
    await sleep(200);
    expect(heard.sort()).toEqual(['other 8', 'same 7']);
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
