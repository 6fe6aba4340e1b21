import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SqliteStore } from '../../src/store/sqlite.js';

// Deleting a run gives its disk space back (docs/SEARCH.md, "History"): a new SQLite database
// is made with incremental auto-vacuum, and a delete truncates the file by the pages it freed.

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** The database's size once its WAL is checkpointed into it. */
async function settledSize(store: SqliteStore, path: string): Promise<number> {
  // A store closed is fully checkpointed; reopened, the next measure sees the same file.
  await store.close();
  return statSync(path).size;
}

function freshDatabasePath(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tailwater-space-'));
  dirs.push(dir);
  return join(dir, 'tailwater.db');
}

describe('disk space after deleting runs', () => {
  it('shrinks the database file by about what the deleted run took', async () => {
    const path = freshDatabasePath();
    let store = new SqliteStore(path);
    await store.appendLog('etl.small', 'r1', [{ text: 'kept\n' }]);
    const empty = await settledSize(store, path);
    store = new SqliteStore(path);
    const line = `${'x'.repeat(1000)}\n`;
    for (let i = 0; i < 40; i += 1) {
      await store.appendLog('etl.big', 'r1', [{ text: line.repeat(100) }]);
    }
    const full = await settledSize(store, path);
    expect(full - empty).toBeGreaterThan(3_000_000);
    store = new SqliteStore(path);
    await store.deleteRun('etl.big', 'r1');
    const after = await settledSize(store, path);
    expect(after).toBeLessThan(empty + (full - empty) / 4);
    store = new SqliteStore(path);
    expect(await store.getRun('etl.small', 'r1')).toBeDefined();
    await store.close();
  });

  it('gives back the search index of a deleted run too, not only its rows', async () => {
    // The trigram index keeps a deleted document's postings until its segments are merged:
    // without that merge the file stays at several times the text it no longer holds.
    const path = freshDatabasePath();
    let store = new SqliteStore(path);
    await store.appendLog('etl.small', 'r1', [{ text: 'kept line\n' }]);
    const indexAll = async () => {
      while ((await store.indexForSearch({ maxEntries: 5000, maxBytes: 1 << 20 })).more);
    };
    await indexAll();
    const empty = await settledSize(store, path);
    store = new SqliteStore(path);
    // Varied text, so its trigrams are many and the index is a large part of the file.
    for (let chunk = 0; chunk < 40; chunk += 1) {
      const lines = Array.from(
        { length: 200 },
        (_, i) => `step ${chunk}-${i} wrote ${((chunk * 7919 + i) * 104729).toString(36)} rows\n`,
      );
      await store.appendLog('etl.big', 'r1', [{ text: lines.join('') }]);
      // Indexed as it is written, as a live run is: many small index segments, not one.
      await indexAll();
    }
    const full = await settledSize(store, path);
    expect(full - empty).toBeGreaterThan(1_000_000);
    store = new SqliteStore(path);
    await store.deleteRun('etl.big', 'r1');
    const after = await settledSize(store, path);
    // Without the merge, 40 % of it stays (measured); with it, all of it comes back.
    expect(after).toBeLessThan(empty + (full - empty) / 10);
    store = new SqliteStore(path);
    await indexAll();
    const hits = await store.searchDocuments({
      query: { type: 'literal', text: 'kept line' },
      limit: 10,
    });
    expect(hits.length).toBeGreaterThan(0);
    await store.close();
  });
});
