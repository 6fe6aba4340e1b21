import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { DEFAULT_SEALED_STORE_OPTIONS, SealedStore } from '../../src/store/sealed-store.js';
import { LocalSegmentStore } from '../../src/store/segment-store.js';
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

  it('gives back the hot rows and search index of a run once it is sealed', async () => {
    // Sealing moves a finished run into segment files (docs/STORAGE.md): the database must
    // shrink by what the run took there, or sealing saves nothing on disk.
    const path = freshDatabasePath();
    const segments = join(path, '..', 'segments');
    const open = () =>
      new SealedStore(new SqliteStore(path), new LocalSegmentStore(segments), {
        ...DEFAULT_SEALED_STORE_OPTIONS,
        settleMs: 0,
        graceMs: 0,
      });
    let store = open();
    await store.appendLog('etl.small', 'r1', [{ text: 'kept\n' }]);
    await store.close();
    const empty = statSync(path).size;
    store = open();
    for (let chunk = 0; chunk < 40; chunk += 1) {
      const lines = Array.from({ length: 100 }, (_, i) => `row ${chunk}-${i} ${'y'.repeat(900)}\n`);
      await store.appendLog('etl.big', 'r1', [{ text: lines.join('') }]);
    }
    await store.putRun('etl.big', 'r1', { status: 'success' });
    // A run is sealed once search has indexed it.
    while ((await store.indexForSearch({ maxEntries: 5000, maxBytes: 1 << 20 })).more);
    await store.close();
    const full = statSync(path).size;
    expect(full - empty).toBeGreaterThan(3_000_000);
    store = open();
    await store.sealer.catchUp(() => Date.now() + 1000);
    await store.close();
    const after = statSync(path).size;
    expect(after).toBeLessThan(empty + (full - empty) / 20);
    store = open();
    const key = { type: 'run' as const, pipeline: 'etl.big', runId: 'r1' };
    const chunks = await store.readLog(key, 0, full);
    const text = chunks.map((chunk) => chunk.text).join('');
    expect(text.split('\n')).toHaveLength(4001);
    expect(text.startsWith(`row 0-0 ${'y'.repeat(900)}\n`)).toBe(true);
    await store.close();
  });
});
