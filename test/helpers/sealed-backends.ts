import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { MemoryBus } from '../../src/bus/memory.js';
import { RedisBus } from '../../src/bus/redis.js';
import { PostgresStore } from '../../src/store/postgres.js';
import type { SealedStoreOptions } from '../../src/store/sealed-store.js';
import { SealedStore } from '../../src/store/sealed-store.js';
import { LocalSegmentStore } from '../../src/store/segment-store.js';
import { SqliteStore } from '../../src/store/sqlite.js';
import type { TestBackend } from './backends.js';
import { REDIS, backendFromEnv, backendPair } from './backends.js';
import { migratedDatabase } from './postgres.js';
import { freshS3Url, s3Store } from './s3.js';

/**
 * The backend pair of this test run (`TAILWATER_TEST_BACKEND`) with its store sealing history:
 * SQLite with segments in the app's directory, or PostgreSQL with segments in S3 (what a fleet
 * of replicas reads) and the bus on Redis, each in a database, prefix and namespace of its own.
 */
export async function sealedBackendFromEnv(
  dir: string,
  options: SealedStoreOptions,
): Promise<TestBackend> {
  if (backendFromEnv().name === 'sqlite+memory') {
    const hot = new SqliteStore(join(dir, 'tailwater.db'));
    const segments = new LocalSegmentStore(join(dir, 'segments'));
    return backendPair(new SealedStore(hot, segments, options), new MemoryBus());
  }
  const database = await migratedDatabase();
  const hot = await PostgresStore.open(database.url);
  const bus = await RedisBus.open(REDIS, { namespace: `test-${randomBytes(6).toString('hex')}` });
  return backendPair(new SealedStore(hot, s3Store(freshS3Url()), options), bus, database.drop);
}
