import { statSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { runKey, topicKey } from '../../src/model/stream-key.js';
import { READ_SQL, SqliteStore } from '../../src/store/sqlite.js';
import type { SqliteStoreOptions } from '../../src/store/sqlite.js';
import type { Store } from '../../src/store/store.js';
import { runSearchContract } from './search.contract.js';
import { runStoreContract } from './store.contract.js';

// Compile-time guard (Mercure's style): SqliteStore satisfies the Store port. Every store in
// this file is built through it, so `tsc` fails here if the class drifts from the interface.
const StoreImplementation: new (path: string, options?: SqliteStoreOptions) => Store = SqliteStore;

async function tempDatabase(): Promise<{ dir: string; file: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'tailwater-sqlite-'));
  return { dir, file: join(dir, 'tailwater.db') };
}

const sqliteUnderTest = async () => {
  const { dir, file } = await tempDatabase();
  const opened: Store[] = [new StoreImplementation(file)];
  return {
    store: opened[0]!,
    reopen: async () => {
      const store = new StoreImplementation(file);
      opened.push(store);
      return store;
    },
    cleanup: async () => {
      for (const store of opened) await store.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
};

runStoreContract('sqlite', sqliteUnderTest);
runSearchContract('sqlite', sqliteUnderTest);

describe('SqliteStore', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0)) await cleanup();
  });

  async function openTemp(): Promise<{ store: Store; file: string }> {
    const { dir, file } = await tempDatabase();
    const store = new StoreImplementation(file);
    cleanups.push(async () => {
      await store.close();
      await rm(dir, { recursive: true, force: true });
    });
    return { store, file };
  }

  it('writes a full batch in slices, giving the event loop turns while it writes', async () => {
    // That readers see none of it until it is whole is the contract's ("all-or-nothing batches").
    const { store } = await openTemp();
    const key = topicKey('big');
    // 1000 events of 60 KB: about 60 MB, well over one slice of work.
    const blob = 'x'.repeat(60_000);
    const batch = Array.from({ length: 1000 }, (_, i) => ({ kind: 'k', data: { i, blob } }));
    let turns = 0;
    let writing = true;
    const count = async () => {
      for (; writing; turns += 1) await new Promise((resolve) => setImmediate(resolve));
    };
    const counting = count();
    const result = await store.appendEvents(key, batch);
    writing = false;
    await counting;
    expect(result.seqs).toHaveLength(1000);
    expect(turns).toBeGreaterThan(3);
  });

  it('runs writes one at a time in the order they were asked for, even while one is paused', async () => {
    const { store } = await openTemp();
    const key = topicKey('order');
    const blob = 'y'.repeat(60_000);
    const big = store.appendEvents(
      key,
      Array.from({ length: 400 }, () => ({ kind: 'big', data: blob })),
    );
    const small = store.appendEvents(key, [{ kind: 'small', data: 1 }]);
    const [bigResult, smallResult] = await Promise.all([big, small]);
    expect(bigResult.seqs[0]).toBe(1);
    expect(smallResult.seqs).toEqual([401]);
  });

  it('rolls a failed large write back whole and goes on with the next one', async () => {
    const { store } = await openTemp();
    const key = topicKey('fail');
    const blob = 'z'.repeat(60_000);
    const events = Array.from({ length: 500 }, (_, i) => ({ kind: 'k', data: blob, id: `e${i}` }));
    // The last event reuses the first one's id for other content: the whole batch is refused.
    events.push({ kind: 'k', data: 'other', id: 'e0' });
    await expect(store.appendEvents(key, events)).rejects.toMatchObject({ code: 'TW_ID_CONFLICT' });
    expect(await store.bounds(key)).toEqual({
      firstSeq: 1,
      lastSeq: 0,
      logBytes: 0,
      logLines: 0,
      epoch: expect.stringMatching(/^[0-9a-f]{8}$/),
    });
    expect((await store.appendEvents(key, [{ kind: 'k', data: 1 }])).seqs).toEqual([1]);
  });

  it('gives a database from before the pipelines table its pipelines when it opens', async () => {
    const { dir, file } = await tempDatabase();
    const old = new StoreImplementation(file);
    await old.putRun('a.pipeline', 'r1', { status: 'success' });
    await old.putRun('a.pipeline', 'r2', { status: 'running' });
    await old.putRun('b.pipeline', 'r1', { status: 'running' });
    await old.close();
    // What an older version left: runs, and no pipelines rows.
    const raw = new Database(file);
    raw.exec('DELETE FROM pipelines');
    raw.close();
    const reopened = new StoreImplementation(file);
    cleanups.push(async () => {
      await reopened.close();
      await rm(dir, { recursive: true, force: true });
    });
    const page = await reopened.listPipelines({ limit: 10 });
    expect(page.items.map((p) => [p.fqn, p.runs, p.lastRun?.runId])).toEqual([
      ['a.pipeline', 2, 'r2'],
      ['b.pipeline', 1, 'r1'],
    ]);
    expect((await reopened.latestRun('a.pipeline'))?.runId).toBe('r2');
  });

  it('numbers the lines of the logs a database from before line numbers holds when it opens', async () => {
    const { dir, file } = await tempDatabase();
    const old = new StoreImplementation(file);
    const text = 'one\nzwei 例\n\nvier 😀\nfünf';
    for (const piece of ['one\nzw', 'ei 例\n', '\nvier 😀\nfü', 'nf']) {
      await old.appendLog('p', 'r', [{ text: piece }]);
    }
    await old.appendLog('p', 'other', [{ text: 'a\nb\n' }]);
    await old.close();
    // What an older version left: no line counts, no index.
    const raw = new Database(file);
    raw.exec(`DROP INDEX entries_log_line;
      ALTER TABLE entries DROP COLUMN log_line;
      ALTER TABLE streams DROP COLUMN log_lines;`);
    raw.close();
    const reopened = new StoreImplementation(file);
    cleanups.push(async () => {
      await reopened.close();
      await rm(dir, { recursive: true, force: true });
    });
    const run = runKey('p', 'r');
    const bytes = (upTo: string) => Buffer.byteLength(text.slice(0, text.indexOf(upTo)), 'utf8');
    expect(await Promise.all([1, 2, 3, 4, 5, 6].map((n) => reopened.logLineStart(run, n)))).toEqual(
      [0, bytes('zwei'), bytes('\nvier'), bytes('vier'), bytes('fünf'), undefined],
    );
    expect((await reopened.bounds(run)).logLines).toBe(4);
    expect(await reopened.logLineStart(runKey('p', 'other'), 2)).toBe(2);
    await reopened.appendLog('p', 'r', [{ text: '\nsechs' }]);
    expect(await reopened.logLineStart(run, 6)).toBe(Buffer.byteLength(`${text}\n`, 'utf8'));
  });

  it('reads only by index: no query scans a table or sorts what it found', async () => {
    const { file } = await openTemp();
    const db = new Database(file, { readonly: true });
    try {
      for (const [name, sql] of Object.entries(READ_SQL)) {
        const params = (sql.match(/\?/g) ?? []).map(() => 1);
        const plan = db
          .prepare<unknown[], { detail: string }>(`EXPLAIN QUERY PLAN ${sql}`)
          .all(...params)
          .map((row) => row.detail);
        expect(plan.join(' | '), name).not.toMatch(/\bSCAN\b/);
        // Runs matched by run id or UUID are a handful; nothing else may need a sort.
        if (name !== 'runsByRunIdOrId') expect(plan.join(' | '), name).not.toMatch(/TEMP B-TREE/);
      }
      const planOf = (sql: string) =>
        db
          .prepare<unknown[], { detail: string }>(`EXPLAIN QUERY PLAN ${sql}`)
          .all(...(sql.match(/\?/g) ?? []).map(() => 1))
          .map((row) => row.detail)
          .join(' | ');
      expect(planOf(READ_SQL.kindAfter)).toMatch(
        /USING INDEX entries_kind \(stream_id=\? AND kind=\? AND seq>\?\)/,
      );
      expect(planOf(READ_SQL.withoutLogAfter)).toMatch(
        /USING INDEX entries_without_log \(stream_id=\? AND seq>\?\)/,
      );
      expect(planOf(READ_SQL.kindNewestFirst)).toMatch(/entries_kind \(stream_id=\? AND kind=\?\)/);
      expect(planOf(READ_SQL.lineChunk)).toMatch(
        /USING INDEX entries_log_line \(stream_id=\? AND log_line<\?\)/,
      );
      expect(planOf(READ_SQL.listRunsByStatus)).toMatch(
        /runs_by_status \(pipeline=\? AND status=\? AND rowid<\?\)/,
      );
      // A listing bounded by date walks the pipeline's runs by creation time, from its cursor.
      expect(planOf(READ_SQL.listRunsByTime)).toMatch(
        /runs_by_pipeline_created \(pipeline=\? AND created_at>\? AND created_at<\?\)/,
      );
    } finally {
      db.close();
    }
  });

  it('trims a topic by age at the first entry young enough, and to the end when all are older', async () => {
    const { store } = await openTemp();
    const key = topicKey('aged');
    const times: number[] = [];
    for (let i = 0; i < 50; i += 1) {
      const [seq] = (await store.appendEvents(key, [{ kind: 'k', data: i }])).seqs;
      const [entry] = await store.readEntries(key, { afterSeq: seq! - 1, limit: 1 });
      times.push(Date.parse(entry!.time));
      if (i % 10 === 9) await new Promise((resolve) => setTimeout(resolve, 15));
    }
    const cutoff = times[25]!;
    const firstKept = times.findIndex((time) => time >= cutoff) + 1;
    const result = await store.trimTopic('aged', { maxEntries: 0, olderThanMs: cutoff });
    expect(result.firstSeq).toBe(firstKept);
    expect(result.removed).toBe(firstKept - 1);
    expect(
      (await store.trimTopic('aged', { maxEntries: 0, olderThanMs: Date.now() + 1000 })).firstSeq,
    ).toBe(51);
  });

  it('copies the WAL into the database file on its own, with no close and no further write', async () => {
    const { store, file } = await openTemp();
    const key = topicKey('bulk');
    const blob = 'w'.repeat(50_000);
    await store.appendEvents(
      key,
      Array.from({ length: 100 }, () => ({ kind: 'k', data: blob })), // ~5 MB
    );
    // The checkpointer copies what the batch wrote into the database file, off this thread.
    await expect
      // A generous wait: the worker thread is slow to get a core on a loaded machine.
      .poll(() => statSync(file).size, { timeout: 15_000 })
      .toBeGreaterThan(4_500_000);
  });

  it('makes the WAL start over once it passes 64 MiB, however fast the writes keep coming', async () => {
    const { store, file } = await openTemp();
    const key = topicKey('bulk');
    const blob = 'w'.repeat(50_000);
    const batch = Array.from({ length: 100 }, () => ({ kind: 'k', data: blob })); // ~5 MB
    const walSizes: number[] = [];
    // 150 MB, each write begun the moment the one before it committed: the passive checkpoints
    // never find the WAL all copied back, so only the forced restart keeps it from holding all of it.
    for (let i = 0; i < 30; i += 1) {
      await store.appendEvents(key, batch);
      walSizes.push(statSync(`${file}-wal`).size);
    }
    // The bound, plus the batch that takes the WAL past it and one more for page overhead. Without
    // the restart the WAL would hold all 150 MB.
    expect(Math.max(...walSizes)).toBeLessThan(64 * 1024 * 1024 + 10_000_000);
    expect((await store.bounds(key)).lastSeq).toBe(3000);
  }, 60_000);

  it('puts its database file in WAL mode, as another connection sees it', async () => {
    const { dir, file } = await tempDatabase();
    const store = new StoreImplementation(file);
    cleanups.push(async () => {
      await store.close();
      await rm(dir, { recursive: true, force: true });
    });
    await store.appendEvents(topicKey('t'), [{ kind: 'k', data: 1 }]);
    const other = new Database(file, { readonly: true });
    try {
      expect(other.pragma('journal_mode', { simple: true })).toBe('wal');
    } finally {
      other.close();
    }
  });

  it('creates the directory of its database file when it is missing', async () => {
    const { dir } = await tempDatabase();
    const file = join(dir, 'nested', 'deeper', 'tailwater.db');
    const store = new StoreImplementation(file);
    cleanups.push(async () => {
      await store.close();
      await rm(dir, { recursive: true, force: true });
    });
    await store.appendEvents(topicKey('t'), [{ kind: 'k', data: 1 }]);
    expect((await store.bounds(topicKey('t'))).lastSeq).toBe(1);
  });

  it('can be closed twice', async () => {
    const { dir, file } = await tempDatabase();
    const store = new StoreImplementation(file);
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    await store.close();
    await expect(store.close()).resolves.toBeUndefined();
  });
});
