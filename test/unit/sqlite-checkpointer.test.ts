import { statSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { WalCheckpointer } from '../../src/store/sqlite-checkpointer.js';

describe('WalCheckpointer', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0)) await cleanup();
  });

  async function walDatabase(): Promise<{ db: Database.Database; file: string }> {
    const dir = await mkdtemp(join(tmpdir(), 'tailwater-checkpointer-'));
    const file = join(dir, 'wal.db');
    const db = new Database(file);
    db.pragma('journal_mode = WAL');
    db.pragma('wal_autocheckpoint = 0');
    db.exec('CREATE TABLE blobs (body BLOB)');
    cleanups.push(async () => {
      db.close();
      await rm(dir, { recursive: true, force: true });
    });
    return { db, file };
  }

  const insertMegabytes = (db: Database.Database, megabytes: number): void => {
    const insert = db.prepare('INSERT INTO blobs (body) VALUES (?)');
    db.transaction(() => {
      for (let i = 0; i < megabytes; i += 1) insert.run(Buffer.alloc(1024 * 1024, i));
    })();
  };

  it('copies a commit made while a checkpoint runs once the call for it resolves, not at some later commit', async () => {
    const { db, file } = await walDatabase();
    const checkpointer = new WalCheckpointer(file, (error) => {
      throw error;
    });
    cleanups.unshift(() => checkpointer.close());
    for (let round = 1; round <= 5; round += 1) {
      insertMegabytes(db, 4);
      const first = checkpointer.run();
      // Committed while the first checkpoint is (most likely) still copying: not in it.
      insertMegabytes(db, 4);
      await Promise.all([first, checkpointer.run()]);
      // Every page both commits wrote is now in the database file itself.
      expect(statSync(file).size).toBeGreaterThan(round * 8 * 1024 * 1024);
    }
  });

  it('runs one checkpoint for every call made while one is running, not one each', async () => {
    const { db, file } = await walDatabase();
    const checkpointer = new WalCheckpointer(file, (error) => {
      throw error;
    });
    cleanups.unshift(() => checkpointer.close());
    insertMegabytes(db, 2);
    const first = checkpointer.run();
    const joined = [checkpointer.run(), checkpointer.run(), checkpointer.run()];
    expect(joined[1]).toBe(joined[0]);
    expect(joined[2]).toBe(joined[0]);
    expect(joined[0]).not.toBe(first);
    await Promise.all([first, ...joined]);
    expect(checkpointer.pending).toBe(false);
  });
});
