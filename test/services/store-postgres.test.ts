import { afterEach, describe, expect, it } from 'vitest';
import { RAW_DATA } from '../../src/model/entry.js';
import type { NewEvent } from '../../src/model/entry.js';
import { runKey, topicKey } from '../../src/model/stream-key.js';
import { PostgresStore } from '../../src/store/postgres.js';
import type { PostgresStoreOptions } from '../../src/store/postgres.js';
import { MIGRATIONS, SCHEMA_VERSION } from '../../src/store/postgres-schema.js';
import type { Store } from '../../src/store/store.js';
import { runSearchContract } from '../unit/search.contract.js';
import { runReplicaStoreContract, runStoreContract } from '../unit/store.contract.js';
import { until } from '../helpers/wait.js';
import {
  freshDatabase,
  migratedDatabase,
  pgAdmin as admin,
  POSTGRES_SERVER as SERVER,
} from '../helpers/postgres.js';

// Compile-time guard: PostgresStore satisfies the Store port.
const open: (url: string, options?: PostgresStoreOptions) => Promise<Store> = (url, options) =>
  PostgresStore.open(url, options);

/** Stores opened on one fresh database, all closed and the database dropped by `cleanup`. */
async function storesOnFreshDatabase() {
  const database = await migratedDatabase();
  const opened: Store[] = [];
  return {
    open: async () => {
      const store = await open(database.url);
      opened.push(store);
      return store;
    },
    cleanup: async () => {
      for (const store of opened) await store.close();
      await database.drop();
    },
  };
}

const postgresUnderTest = async () => {
  const stores = await storesOnFreshDatabase();
  return { store: await stores.open(), reopen: stores.open, cleanup: stores.cleanup };
};

runStoreContract('postgres', postgresUnderTest);
runSearchContract('postgres', postgresUnderTest);

// What several replicas on one database can break, which one SQLite process never meets.
runReplicaStoreContract('postgres', storesOnFreshDatabase);

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

  const ev = (data: unknown, extra: Partial<NewEvent> = {}): NewEvent => ({
    kind: 'k',
    data,
    ...extra,
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

    it('numbers the lines of the logs a database held before line numbers (migration 6)', async () => {
      const db = await database();
      const store = await storeOn(db.url);
      const text = 'one\nzwei 例\n\nvier 😀\nfünf';
      for (const piece of ['one\nzw', 'ei 例\n', '\nvier 😀\nfü', 'nf']) {
        await store.appendLog('p', 'r', [{ text: piece }]);
      }
      await store.appendLog('p', 'other', [{ text: 'a\nb\n' }]);
      await store.close();
      // What a database before migration 6 holds: no line counts, no index, and nothing of
      // the migrations after it either.
      await admin(
        (client) =>
          client.query(`DROP TABLE segments, sealed_runs;
            DROP INDEX streams_to_seal;
            ALTER TABLE streams DROP COLUMN sealed_seq;
            DROP INDEX entries_log_line;
            ALTER TABLE entries DROP COLUMN log_line;
            ALTER TABLE streams DROP COLUMN log_lines;
            DELETE FROM schema_migrations WHERE version >= 6`),
        db.name,
      );
      const upgraded = await storeOn(db.url);
      expect(await versions(db.url)).toEqual(MIGRATIONS.map((m) => m.version));
      const run = runKey('p', 'r');
      const starts = await Promise.all(
        [1, 2, 3, 4, 5, 6].map((n) => upgraded.logLineStart(run, n)),
      );
      const bytes = (upTo: string) => Buffer.byteLength(text.slice(0, text.indexOf(upTo)), 'utf8');
      expect(starts).toEqual([
        0,
        bytes('zwei'),
        bytes('\nvier') + 0,
        bytes('vier'),
        bytes('fünf'),
        undefined,
      ]);
      expect((await upgraded.bounds(run)).logLines).toBe(4);
      expect(await upgraded.logLineStart(runKey('p', 'other'), 2)).toBe(2);
      // New appends number on from the counts the migration made.
      await upgraded.appendLog('p', 'r', [{ text: '\nsechs' }]);
      expect(await upgraded.logLineStart(run, 6)).toBe(Buffer.byteLength(`${text}\n`, 'utf8'));
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
      expect(await store.bounds(topicKey('t'))).toMatchObject({
        firstSeq: 1,
        lastSeq: 0,
        logBytes: 0,
      });
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

    it("loses a lease when its holder's connection dies, and another replica takes it then", async () => {
      const db = await database();
      const [a, b] = [await storeOn(db.url), await storeOn(db.url)];
      const held = await a.tryLease('source:iceberg');
      expect(held).toBeDefined();
      expect(await b.tryLease('source:iceberg')).toBeUndefined();
      let lost = false;
      void held!.lost.then(() => {
        lost = true;
      });
      // As a replica killed with -9 would: PostgreSQL ends its session, and the lock with it.
      await admin((client) =>
        client.query(
          "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND application_name = 'tailwater lease source:iceberg'",
          [db.name],
        ),
      );
      await until(() => lost, 'the holder learns it lost the lease', 10_000);
      const taken = await b.tryLease('source:iceberg');
      expect(taken).toBeDefined();
      await taken!.release();
      await held!.release();
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
