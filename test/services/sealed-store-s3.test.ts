import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SqliteStore } from '../../src/store/sqlite.js';
import { sealedHistorySuite } from '../unit/sealed-store.suite.js';
import { freshS3Url, s3Store } from '../helpers/s3.js';

sealedHistorySuite('SQLite, S3 segments', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'tailwater-sealed-s3-'));
  const url = freshS3Url();
  return {
    hot: async () => new SqliteStore(join(dir, 'tailwater.db')),
    segments: () => s3Store(url),
    cleanup: async () => rmSync(dir, { recursive: true, force: true }),
  };
});
