import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import type { Bus } from '../../src/bus/bus.js';
import { MemoryBus } from '../../src/bus/memory.js';
import { RedisBus } from '../../src/bus/redis.js';
import type { Settings } from '../../src/model/settings.js';
import { PostgresStore } from '../../src/store/postgres.js';
import { SqliteStore } from '../../src/store/sqlite.js';
import type { Store } from '../../src/store/store.js';
import { migratedDatabase } from './postgres.js';

/** The Redis that scripts/services.sh starts (docs/SERVICES.md). */
export const REDIS = process.env['TAILWATER_TEST_REDIS'] ?? 'redis://127.0.0.1:6379';

/** A store and a bus for one test app, and what removes them afterwards. */
export interface TestBackend {
  store: Store;
  bus: Bus;
  cleanup(): Promise<void>;
}

/** Opens a fresh, empty backend pair; `dir` is the app's own temporary directory. */
export type BackendFactory = (dir: string, settings: Settings) => Promise<TestBackend>;

/** A store and a bus as a backend whose cleanup closes both, then runs `after`. */
export function backendPair(store: Store, bus: Bus, after?: () => Promise<void>): TestBackend {
  return {
    store,
    bus,
    async cleanup() {
      await bus.close();
      await store.close();
      await after?.();
    },
  };
}

const sqliteMemory: BackendFactory = async (dir, settings) =>
  backendPair(
    new SqliteStore(join(dir, 'tailwater.db'), { synchronous: settings.sqliteSynchronous }),
    new MemoryBus(),
  );

/**
 * A database of its own on the test PostgreSQL, and a bus namespace of its own on the test
 * Redis, so that apps of one test file (and files run side by side) never hear each other.
 */
const postgresRedis: BackendFactory = async () => {
  const database = await migratedDatabase();
  const store = await PostgresStore.open(database.url);
  const bus = await RedisBus.open(REDIS, { namespace: `test-${randomBytes(6).toString('hex')}` });
  return backendPair(store, bus, database.drop);
};

/** Every backend pair the engine, HTTP and dialect suites run on, by name. */
export const BACKENDS: Record<string, BackendFactory> = {
  'sqlite+memory': sqliteMemory,
  'postgres+redis': postgresRedis,
};

/**
 * The pair this test run uses: `TAILWATER_TEST_BACKEND` (set by the Vitest project that runs
 * the suites on it), sqlite+memory by default.
 */
export function backendFromEnv(): { name: string; open: BackendFactory } {
  const name = process.env['TAILWATER_TEST_BACKEND'] ?? 'sqlite+memory';
  const open = BACKENDS[name];
  if (!open) {
    throw new Error(
      `TAILWATER_TEST_BACKEND=${name} is not one of ${Object.keys(BACKENDS).join(', ')}`,
    );
  }
  return { name, open };
}
