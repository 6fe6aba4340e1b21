import { resolve } from 'node:path';
import type { Bus } from '../bus/bus.js';
import { MemoryBus } from '../bus/memory.js';
import type { Settings } from '../model/settings.js';
import { SettingsError } from '../model/settings.js';
import type { Store } from '../store/store.js';

/**
 * The store and the bus a server runs on, named by URL (docs/CONFIGURATION.md). Each scheme
 * opens its backend with a dynamic `import()`, so `pg` and `ioredis` are loaded only by a server
 * that uses them, and a one-process server on SQLite never pays for them.
 */
type Opener<T> = (spec: string, settings: Settings) => Promise<T>;

const STORES: Record<string, Opener<Store>> = {
  sqlite: async (spec, settings) => {
    const { SqliteStore } = await import('../store/sqlite.js');
    return new SqliteStore(spec.slice('sqlite:'.length), {
      synchronous: settings.sqliteSynchronous,
    });
  },
  postgres: async (spec) => {
    const { PostgresStore } = await import('../store/postgres.js');
    return PostgresStore.open(spec);
  },
};
STORES['postgresql'] = STORES['postgres']!;

const BUSES: Record<string, Opener<Bus>> = {
  memory: async () => new MemoryBus(),
  redis: async (spec, settings) => {
    const { RedisBus } = await import('../bus/redis.js');
    return RedisBus.open(spec, { namespace: settings.busNamespace });
  },
  // LISTEN/NOTIFY on the store's own database, for a deployment with no Redis.
  postgres: async (_spec, settings) => {
    const scheme = settings.store ? schemeOf(settings.store) : 'sqlite';
    if (scheme !== 'postgres' && scheme !== 'postgresql') {
      throw new SettingsError(
        `bus: "postgres" notifies through the PostgreSQL store's database, but the store is ${scheme === 'sqlite' ? 'SQLite' : `"${redact(settings.store)}"`}; use --store postgres://user@host:port/db with it, or another bus.`,
      );
    }
    const { PostgresBus } = await import('../bus/postgres.js');
    return PostgresBus.open(settings.store);
  },
};

/** The scheme a store or bus URL names (`sqlite`, `postgres`, `redis`…), in lower case. */
export function schemeOf(spec: string): string {
  return /^([a-z][a-z0-9+.-]*):/i.exec(spec)?.[1]?.toLowerCase() ?? spec.toLowerCase();
}

/** Opens the store `settings.store` names (SQLite under the data directory by default). */
/** The store `settings` name: `store`, or SQLite under the data directory. */
export function storeSpec(settings: Settings): string {
  return settings.store || `sqlite:${resolve(settings.data, 'tailwater.db')}`;
}

export async function openStore(settings: Settings): Promise<Store> {
  const spec = storeSpec(settings);
  const open = STORES[schemeOf(spec)];
  if (!open) {
    throw new SettingsError(
      `store: "${redact(spec)}" is not a store this build opens (use sqlite:<path> or postgres://user@host:port/db).`,
    );
  }
  return open(spec, settings);
}

/** Opens the bus `settings.bus` names (the in-process one by default). */
export async function openBus(settings: Settings): Promise<Bus> {
  const open = BUSES[schemeOf(settings.bus)];
  if (!open) {
    throw new SettingsError(
      `bus: "${redact(settings.bus)}" is not a bus this build opens (use memory, redis://host:port or postgres).`,
    );
  }
  return open(settings.bus, settings);
}

/** A URL without its password, for messages. */
export function redact(spec: string): string {
  return spec.replace(/\/\/([^:/@]*):[^@/]*@/, '//$1:***@');
}
