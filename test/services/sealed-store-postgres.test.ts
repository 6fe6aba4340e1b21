import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PostgresStore } from '../../src/store/postgres.js';
import { LocalSegmentStore } from '../../src/store/segment-store.js';
import { sealedHistorySuite } from '../unit/sealed-store.suite.js';
import { migratedDatabase } from '../helpers/postgres.js';
import { freshS3Url, s3Store } from '../helpers/s3.js';

// The sealed-history suite on PostgreSQL, with each segment store: S3 is what a fleet uses (every
// replica reads it); a local directory serves a single server on PostgreSQL.
for (const where of ['S3', 'local'] as const) {
  sealedHistorySuite(`PostgreSQL, ${where} segments`, async () => {
    const database = await migratedDatabase();
    const dir = mkdtempSync(join(tmpdir(), 'tailwater-sealed-pg-'));
    const url = freshS3Url();
    const opened: PostgresStore[] = [];
    return {
      hot: async () => {
        const store = await PostgresStore.open(database.url);
        opened.push(store);
        return store;
      },
      segments: () =>
        where === 'S3' ? s3Store(url) : new LocalSegmentStore(join(dir, 'segments')),
      cleanup: async () => {
        for (const store of opened) await store.close();
        await database.drop();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  });
}
