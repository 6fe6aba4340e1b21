import { resolve } from 'node:path';
import type { Bus } from '../bus/bus.js';
import { MemoryBus } from '../bus/memory.js';
import type { Settings } from '../model/settings.js';
import { SettingsError } from '../model/settings.js';
import type { Store } from '../store/store.js';
import { isSealCatalog } from '../store/seal-catalog.js';
import { DEFAULT_SEALED_STORE_OPTIONS, SealedStore } from '../store/sealed-store.js';
import type { SealerOptions } from '../store/sealer.js';
import type { SegmentStore } from '../store/segment-store.js';
import { LocalSegmentStore } from '../store/segment-store.js';

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
  const hot = await open(spec, settings);
  const where = segmentsSpec(settings);
  if (where === 'off' || !isSealCatalog(hot)) return hot;
  try {
    return new SealedStore(hot, await openSegments(where, settings), {
      ...DEFAULT_SEALED_STORE_OPTIONS,
      settleMs: settings.sealAfterSeconds * 1000,
      graceMs: settings.sealGraceSeconds * 1000,
      level: settings.sealLevel,
      onStep: sealFailpoint(),
    });
  } catch (error) {
    await hot.close();
    throw error;
  }
}

/**
 * A failpoint for the crash tests (test/e2e/sealed-crash.test.ts): with
 * TAILWATER_FAILPOINT_SEAL=<step> the process kills itself with SIGKILL right after that step
 * of sealing (read, written, verified, recorded, dropped), as a crash there would stop it.
 */
function sealFailpoint(): SealerOptions['onStep'] {
  const step = process.env['TAILWATER_FAILPOINT_SEAL'];
  if (!step) return undefined;
  return (done) => {
    if (done === step) process.kill(process.pid, 'SIGKILL');
  };
}

/**
 * Where sealed segments go (docs/STORAGE.md): as set, or under the data directory for SQLite.
 * On PostgreSQL a fleet's replicas must share them, so there is no default: set an s3:// URL
 * (or `dir:` for a single server).
 */
export function segmentsSpec(settings: Settings): string {
  if (settings.segments !== '') return settings.segments;
  return schemeOf(storeSpec(settings)) === 'sqlite'
    ? `dir:${resolve(settings.data, 'segments')}`
    : 'off';
}

async function openSegments(spec: string, settings: Settings): Promise<SegmentStore> {
  if (spec.startsWith('dir:')) return new LocalSegmentStore(resolve(spec.slice('dir:'.length)));
  if (spec.startsWith('s3://')) {
    const { S3SegmentStore } = await import('../store/s3-segments.js');
    return new S3SegmentStore({
      url: spec,
      endpoint: settings.s3Endpoint || undefined,
      region: settings.s3Region,
    });
  }
  throw new SettingsError(
    `segments: "${spec}" is not a place for segments (use dir:<path>, s3://bucket/prefix or off).`,
  );
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
