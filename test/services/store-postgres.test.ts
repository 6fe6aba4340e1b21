import { afterEach, describe, expect, it, vi } from 'vitest';
import { RAW_DATA } from '../../src/model/entry.js';
import type { NewEvent } from '../../src/model/entry.js';
import { runKey, topicKey } from '../../src/model/stream-key.js';
import { PostgresStore } from '../../src/store/postgres.js';
import type { PostgresStoreOptions } from '../../src/store/postgres.js';
import { MIGRATIONS, SCHEMA_VERSION } from '../../src/store/postgres-schema.js';
import type { Store } from '../../src/store/store.js';
import { RUNS_FEED_TOPIC } from '../../src/store/store.js';
import { runStoreContract } from '../unit/store.contract.js';
import { freshDatabase, pgAdmin as admin, POSTGRES_SERVER as SERVER } from '../helpers/postgres.js';

// Compile-time guard: PostgresStore satisfies the Store port.
const open: (url: string, options?: PostgresStoreOptions) => Promise<Store> = (url, options) =>
  PostgresStore.open(url, options);

runStoreContract('postgres', async () => {
  const database = await freshDatabase();
  const opened: Store[] = [await open(database.url)];
  return {
    store: opened[0]!,
    reopen: async () => {
      const store = await open(database.url);
      opened.push(store);
      return store;
    },
    cleanup: async () => {
      for (const store of opened) await store.close();
      await database.drop();
    },
  };
});

describe('PostgresStore', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  /** A fresh database, dropped after the test. */
  async function database() {
    const db = await freshDatabase();
    cleanups.push(db.drop);
    return db;
  }

  /** A store on `url`, closed after the test (before its database is dropped). */
  async function storeOn(url: string, options?: PostgresStoreOptions): Promise<PostgresStore> {
    const store = await PostgresStore.open(url, options);
    cleanups.push(() => store.close());
    return store;
  }

  /** Two stores on one database: two replicas. */
  async function twoReplicas() {
    const db = await database();
    return { db, a: await storeOn(db.url), b: await storeOn(db.url) };
  }

  const ev = (data: unknown, extra: Partial<NewEvent> = {}): NewEvent => ({
    kind: 'k',
    data,
    ...extra,
  });

  describe('two replicas on one database', () => {
    // A store runs its own writes to one stream one after the other, so the replicas' count is
    // how many transactions race for the stream's row at once.
    it.each([
      { replicas: 2, each: 20 },
      { replicas: 8, each: 5 },
    ])(
      'number racing appends to one stream gaplessly, each batch whole and contiguous ($replicas × $each batches)',
      async ({ replicas, each }) => {
        const db = await database();
        const stores = await Promise.all(Array.from({ length: replicas }, () => storeOn(db.url)));
        const [a, b] = stores as [PostgresStore, PostgresStore];
        const key = topicKey('race');
        const batches = Array.from({ length: replicas * each }, (_, batch) =>
          Array.from({ length: 1 + (batch % 7) }, (_, i) => ev({ batch, i })),
        );
        // Every batch at once, the replicas taking turns.
        const results = await Promise.all(
          batches.map((events, batch) => stores[batch % replicas]!.appendEvents(key, events)),
        );
        const total = batches.reduce((sum, events) => sum + events.length, 0);
        const all = await a.readEntries(key, { afterSeq: 0, limit: 10_000 });
        expect(all.map((entry) => entry.seq)).toEqual(
          Array.from({ length: total }, (_, i) => i + 1),
        );
        results.forEach((result, batch) => {
          const first = result.seqs[0]!;
          expect(result.seqs).toEqual(batches[batch]!.map((_, i) => first + i));
          expect(result.seqs.map((seq) => all[seq - 1]!.data)).toEqual(
            batches[batch]!.map((event) => event.data),
          );
        });
        expect(await b.bounds(key)).toEqual({ firstSeq: 1, lastSeq: total, logBytes: 0 });
      },
    );

    it('create a run once when both append to it first, and keep its log offsets contiguous', async () => {
      const { a, b } = await twoReplicas();
      const texts = Array.from({ length: 40 }, (_, i) => `line ${i} 例\n`);
      const results = await Promise.all(
        texts.map((text, i) => (i % 2 === 0 ? a : b).appendLog('p', 'r', [{ text }])),
      );
      const entries = await a.readEntries(runKey('p', 'r'), { afterSeq: 0, limit: 1000 });
      // One status entry (the run's creation), then the 40 pieces, in some order.
      expect(entries.map((entry) => entry.kind)).toEqual(['status', ...texts.map(() => 'log')]);
      let offset = 0;
      for (const entry of entries.slice(1)) {
        expect(entry.offset).toBe(offset);
        offset += Buffer.byteLength(entry.text!, 'utf8');
      }
      for (const result of results) {
        expect(entries[result.seq - 1]).toMatchObject({ offset: result.offset });
      }
      expect((await b.getRun('p', 'r'))?.logBytes).toBe(offset);
      const feed = await b.readEntries(topicKey(RUNS_FEED_TOPIC), { afterSeq: 0, limit: 100 });
      expect(feed).toHaveLength(1);
      expect((await a.listPipelines({ limit: 10 })).items).toMatchObject([{ fqn: 'p', runs: 1 }]);
    });

    it('store a producer id raced from both once, and acknowledge both with its seq', async () => {
      const { a, b } = await twoReplicas();
      const key = topicKey('ids');
      const ids = Array.from({ length: 20 }, (_, i) => `id-${i}`);
      const pairs = await Promise.all(
        ids.map((id) =>
          Promise.all([
            a.appendEvents(key, [ev({ id }, { id })]),
            b.appendEvents(key, [ev({ id }, { id })]),
          ]),
        ),
      );
      for (const [fromA, fromB] of pairs) {
        expect(fromA.seqs).toEqual(fromB.seqs);
        expect(fromA.duplicates + fromB.duplicates).toBe(1);
      }
      const stored = await a.readEntries(key, { afterSeq: 0, limit: 1000 });
      expect(stored).toHaveLength(20);
      expect(new Set(stored.map((entry) => entry.id))).toEqual(new Set(ids));

      // The same for a log append with a producer id.
      const logs = await Promise.all([
        a.appendLog('p', 'r', [{ text: 'once\n', id: 'L' }]),
        b.appendLog('p', 'r', [{ text: 'once\n', id: 'L' }]),
      ]);
      expect(logs.map((log) => log.duplicate).sort()).toEqual([false, true]);
      expect(logs[0]).toMatchObject({ seq: logs[1].seq, offset: logs[1].offset });
      const logEntries = await b.readEntries(runKey('p', 'r'), {
        afterSeq: 0,
        limit: 10,
        kinds: ['log'],
      });
      expect(logEntries.map((entry) => entry.text)).toEqual(['once\n']);
    });

    it('never show a reader seq N+1 before N while both write', async () => {
      const { db, a, b } = await twoReplicas();
      const key = topicKey('order');
      // A third replica reads.
      const reader = await storeOn(db.url);
      let writing = true;
      let cursor = 0;
      let reads = 0;
      const holes: string[] = [];
      const read = async () => {
        const page = await reader.readEntries(key, { afterSeq: cursor, limit: 1000 });
        page.forEach((entry, i) => {
          if (entry.seq !== cursor + i + 1) holes.push(`after ${cursor}: got ${entry.seq}`);
        });
        cursor = page.at(-1)?.seq ?? cursor;
        reads += 1;
      };
      const watching = (async () => {
        for (let turn = 0; writing && turn < 100_000; turn += 1) await read();
      })();
      await Promise.all(
        Array.from({ length: 60 }, (_, i) =>
          (i % 2 === 0 ? a : b).appendEvents(
            key,
            Array.from({ length: 5 }, (_, j) => ev({ i, j })),
          ),
        ),
      );
      writing = false;
      await watching;
      await read();
      expect(holes).toEqual([]);
      expect(cursor).toBe(300);
      expect(reads).toBeGreaterThan(2);
    });

    it('trim a topic once when both trim it at the same time', async () => {
      const { a, b } = await twoReplicas();
      const key = topicKey('busy');
      for (let batch = 0; batch < 25; batch += 1) {
        await a.appendEvents(
          key,
          Array.from({ length: 1000 }, (_, i) => ev(batch * 1000 + i + 1)),
        );
      }
      const [fromA, fromB] = await Promise.all([
        a.trimTopic('busy', { maxEntries: 1000 }),
        b.trimTopic('busy', { maxEntries: 1000 }),
      ]);
      expect(fromA.removed + fromB.removed).toBe(24_000);
      expect([fromA.firstSeq, fromB.firstSeq]).toEqual([24_001, 24_001]);
      expect(await b.bounds(key)).toEqual({ firstSeq: 24_001, lastSeq: 25_000, logBytes: 0 });
      expect((await a.readEntries(key, { afterSeq: 0, limit: 1 }))[0]?.data).toBe(24_001);
    });
  });

  describe('migrations', () => {
    const versions = (url: string) =>
      admin(
        (client) =>
          client
            .query<{ version: number }>('SELECT version FROM schema_migrations ORDER BY version')
            .then(({ rows }) => rows.map((row) => row.version)),
        url.slice(url.lastIndexOf('/') + 1),
      );

    it('applies each migration once: opening again, or several at once, is a no-op', async () => {
      const db = await database();
      // Three replicas starting together on an empty database.
      const first = await Promise.all([storeOn(db.url), storeOn(db.url), storeOn(db.url)]);
      expect(await versions(db.url)).toEqual(MIGRATIONS.map((m) => m.version));
      await first[0]!.appendEvents(topicKey('kept'), [ev(1)]);
      await Promise.all(first.map((store) => store.close()));

      const again = await storeOn(db.url);
      expect(await versions(db.url)).toEqual(MIGRATIONS.map((m) => m.version));
      expect(await again.bounds(topicKey('kept'))).toMatchObject({ lastSeq: 1 });
    });

    it('refuses to start on a database at a newer schema version, and leaves it as it is', async () => {
      const db = await database();
      await (await PostgresStore.open(db.url)).close();
      const newer = SCHEMA_VERSION + 1;
      await admin(
        (client) =>
          client.query(`INSERT INTO schema_migrations (version, name) VALUES ($1, 'future')`, [
            newer,
          ]),
        db.name,
      );
      await expect(PostgresStore.open(db.url)).rejects.toThrow(
        new RegExp(
          `schema version ${newer}, newer than this Tailwater knows \\(${SCHEMA_VERSION}\\)`,
        ),
      );
      expect(await versions(db.url)).toEqual([...MIGRATIONS.map((m) => m.version), newer]);
    });

    it('applies a later migration to a database made by an earlier version', async () => {
      const db = await database();
      const store = await storeOn(db.url);
      await store.appendEvents(topicKey('t'), [ev(1)]);
      await store.close();
      const later = [
        ...MIGRATIONS,
        {
          version: SCHEMA_VERSION + 1,
          name: 'a later one',
          sql: 'CREATE TABLE later_migration (x int)',
        },
      ];
      const upgraded = await storeOn(db.url, { migrations: later });
      expect(await versions(db.url)).toEqual(later.map((m) => m.version));
      expect(await upgraded.bounds(topicKey('t'))).toMatchObject({ lastSeq: 1 });
    });
  });

  describe('start-up errors', () => {
    it('says which server it could not reach', async () => {
      // Nothing listens on port 1 of loopback: the connection is refused at once.
      await expect(PostgresStore.open('postgres://postgres@127.0.0.1:1/none')).rejects.toThrow(
        /Cannot connect to PostgreSQL at postgres:\/\/postgres@127\.0\.0\.1:1\/none/,
      );
    });

    it('refuses a URL that is not PostgreSQL, without showing its password', async () => {
      await expect(PostgresStore.open('redis://127.0.0.1:6379')).rejects.toThrow(
        /Not a PostgreSQL URL/,
      );
      await expect(PostgresStore.open('not a url')).rejects.toThrow(/Not a PostgreSQL URL/);
      await expect(
        PostgresStore.open('postgres://postgres:secret@127.0.0.1:1/none'),
      ).rejects.toThrow(/postgres:\*\*\*@127/);
    });

    it('says which database is missing', async () => {
      await expect(PostgresStore.open(`${SERVER}/tw_test_missing_database`)).rejects.toThrow(
        /Cannot connect to PostgreSQL .*tw_test_missing_database.*does not exist/,
      );
    });
  });

  describe('text PostgreSQL cannot hold', () => {
    it('refuses log text with a NUL as a bad request, storing nothing', async () => {
      const { url } = await database();
      const store = await storeOn(url);
      await expect(store.appendLog('p', 'r', [{ text: 'a\u0000b\n' }])).rejects.toMatchObject({
        code: 'TW_BAD_REQUEST',
        message: /NUL/,
      });
      await expect(
        store.appendEvents(topicKey('t'), [ev(1), ev(2, { step: 's\u0000' })]),
      ).rejects.toMatchObject({ code: 'TW_BAD_REQUEST', message: /events\[1\]\.step/ });
      await expect(store.putRun('p\u0000', 'r', {})).rejects.toMatchObject({
        code: 'TW_BAD_REQUEST',
      });
      expect(await store.getRun('p', 'r')).toBeUndefined();
      expect(await store.bounds(topicKey('t'))).toEqual({ firstSeq: 1, lastSeq: 0, logBytes: 0 });
      // Reads of names with NUL find nothing (no stored name has one).
      expect(await store.getRun('p\u0000', 'r')).toBeUndefined();
      expect(await store.readEntries(topicKey('t\u0000'), { afterSeq: 0, limit: 5 })).toEqual([]);
      expect(await store.listTopics({ after: '\u0000', limit: 5 })).toEqual({ items: [] });
    });

    it('keeps a NUL escaped in JSON, and the JSON text byte for byte', async () => {
      const { url } = await database();
      const store = await storeOn(url);
      const dataJson = '{ "z":1,"a" : "nul \\u0000 here","big":12345678901234567890 }';
      await store.appendEvents(topicKey('t'), [
        { kind: 'k', data: JSON.parse(dataJson), dataJson },
        ev({ text: 'a\u0000b' }),
      ]);
      const [exact, escaped] = await store.readEntries(topicKey('t'), { afterSeq: 0, limit: 5 });
      expect(exact![RAW_DATA]).toBe(dataJson);
      expect(escaped!.data).toEqual({ text: 'a\u0000b' });
      await store.putRun('p', 'r', { meta: { note: 'nul \u0000' } });
      expect((await store.getRun('p', 'r'))?.meta).toEqual({ note: 'nul \u0000' });
    });
  });

  describe('time', () => {
    it('never goes back within a stream, even when a clock does', async () => {
      const { url } = await database();
      const store = await storeOn(url);
      const key = topicKey('clock');
      await store.appendEvents(key, [ev(1)]);
      const [first] = await store.readEntries(key, { afterSeq: 0, limit: 1 });
      // A replica whose clock is an hour behind appends next.
      const behind = Date.parse(first!.time) - 3_600_000;
      const clock = vi.spyOn(Date, 'now').mockReturnValue(behind);
      try {
        await store.appendEvents(key, [ev(2)]);
      } finally {
        clock.mockRestore();
      }
      const entries = await store.readEntries(key, { afterSeq: 0, limit: 5 });
      expect(entries.map((entry) => entry.time)).toEqual([first!.time, first!.time]);
    });
  });

  describe('connections', () => {
    it('survives the server closing its idle connections: the next read reconnects', async () => {
      const db = await database();
      const errors: Error[] = [];
      const store = await storeOn(db.url, { onError: (error) => errors.push(error) });
      await store.appendEvents(topicKey('t'), [ev(1)]);
      await admin((client) =>
        client.query(
          'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
          [db.name],
        ),
      );
      // The pool learns of the closed connection asynchronously; a read may meet it first and
      // is then refused as unavailable (503), never anything else.
      let bounds: unknown;
      for (let attempt = 0; attempt < 50 && bounds === undefined; attempt += 1) {
        try {
          bounds = await store.bounds(topicKey('t'));
        } catch (error) {
          expect(error).toMatchObject({ code: 'TW_STORE_UNAVAILABLE' });
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      }
      expect(bounds).toMatchObject({ lastSeq: 1 });
      expect((await store.appendEvents(topicKey('t'), [ev(2)])).seqs).toEqual([2]);
    });

    it('can be closed twice, and refuses work once closed', async () => {
      const { url } = await database();
      const store = await storeOn(url);
      await store.close();
      await store.close();
      await expect(store.bounds(topicKey('t'))).rejects.toThrow(/closed/);
    });
  });
});
