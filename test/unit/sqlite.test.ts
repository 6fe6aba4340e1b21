import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { topicKey } from '../../src/model/stream-key.js';
import { SqliteStore } from '../../src/store/sqlite.js';
import type { SqliteStoreOptions } from '../../src/store/sqlite.js';
import type { Store } from '../../src/store/store.js';
import { runStoreContract } from './store.contract.js';

// Compile-time guard (Mercure's style): SqliteStore satisfies the Store port. Every store in
// this file is built through it, so `tsc` fails here if the class drifts from the interface.
const StoreImplementation: new (path: string, options?: SqliteStoreOptions) => Store = SqliteStore;

async function tempDatabase(): Promise<{ dir: string; file: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'tailwater-sqlite-'));
  return { dir, file: join(dir, 'tailwater.db') };
}

runStoreContract('sqlite', async () => {
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
});

describe('SqliteStore', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0)) await cleanup();
  });

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
