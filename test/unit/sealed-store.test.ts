import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LocalSegmentStore } from '../../src/store/segment-store.js';
import { SqliteStore } from '../../src/store/sqlite.js';
import { sealedHistorySuite } from './sealed-store.suite.js';

sealedHistorySuite('SQLite, local segments', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'tailwater-sealed-'));
  return {
    hot: async () => new SqliteStore(join(dir, 'tailwater.db')),
    segments: () => new LocalSegmentStore(join(dir, 'segments')),
    cleanup: async () => rmSync(dir, { recursive: true, force: true }),
  };
});
