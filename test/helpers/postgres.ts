import { createHash, randomBytes } from 'node:crypto';
import pg from 'pg';
import { MIGRATIONS, MIGRATIONS_TABLE, NEW_EPOCH_SQL } from '../../src/store/postgres-schema.js';
import { PostgresStore } from '../../src/store/postgres.js';

/** The PostgreSQL that scripts/services.sh starts (docs/SERVICES.md). */
export const POSTGRES_SERVER =
  process.env['TAILWATER_TEST_POSTGRES'] ?? 'postgres://postgres@127.0.0.1:5432';

/** Runs `body` with a client on `database` of the test server, then disconnects. */
export async function pgAdmin<T>(
  body: (client: pg.Client) => Promise<T>,
  database = 'postgres',
): Promise<T> {
  const client = new pg.Client({ connectionString: `${POSTGRES_SERVER}/${database}` });
  await client.connect();
  try {
    return await body(client);
  } finally {
    await client.end();
  }
}

/** A database of the test server, and how to drop it (its connections closed by force). */
export interface TestDatabase {
  url: string;
  name: string;
  drop: () => Promise<void>;
}

const dropDatabase = (name: string) =>
  pgAdmin((client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(
    () => undefined,
  );

function testDatabase(name: string): TestDatabase {
  return { url: `${POSTGRES_SERVER}/${name}`, name, drop: () => dropDatabase(name) };
}

const newName = () => `tw_test_${randomBytes(6).toString('hex')}`;

/** A new, empty database of its own. */
export async function freshDatabase(): Promise<TestDatabase> {
  const name = newName();
  await pgAdmin((client) => client.query(`CREATE DATABASE ${name}`));
  return testDatabase(name);
}

/**
 * A database with every migration applied and nothing else, once per schema: what a new store
 * would make of an empty database. Built under an advisory lock, so that test files starting
 * side by side build it once, under another name until it is whole.
 */
const TEMPLATE = `tw_template_${createHash('sha256')
  .update(MIGRATIONS_TABLE + JSON.stringify(MIGRATIONS))
  .digest('hex')
  .slice(0, 16)}`;
let template: Promise<void> | undefined;

function migratedTemplate(): Promise<void> {
  template ??= pgAdmin(async (client) => {
    await client.query('SELECT pg_advisory_lock(hashtext($1))', [TEMPLATE]);
    try {
      const found = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [TEMPLATE]);
      if (found.rowCount !== 0) return;
      // Those of an older schema are of no more use.
      const stale = await client.query<{ datname: string }>(
        "SELECT datname FROM pg_database WHERE datname LIKE 'tw\\_template\\_%'",
      );
      for (const { datname } of stale.rows) {
        await client.query(`DROP DATABASE IF EXISTS ${datname} WITH (FORCE)`);
      }
      const building = `${TEMPLATE}_building`;
      await client.query(`CREATE DATABASE ${building}`);
      const store = await PostgresStore.open(`${POSTGRES_SERVER}/${building}`);
      await store.close();
      await client.query(`ALTER DATABASE ${building} RENAME TO ${TEMPLATE}`);
    } finally {
      await client.query('SELECT pg_advisory_unlock(hashtext($1))', [TEMPLATE]);
    }
  });
  return template;
}

/** Copies of the template this process made: `tw_test_<pid>_<random>`. */
const COPY = /^tw_test_(\d+)_[0-9a-f]{8}$/;

async function copyOfTemplate(): Promise<string> {
  const name = `tw_test_${process.pid}_${randomBytes(4).toString('hex')}`;
  await pgAdmin((client) =>
    client.query(`CREATE DATABASE ${name} TEMPLATE ${TEMPLATE} STRATEGY FILE_COPY`),
  );
  // The copy has the template's epoch; a database made new has one of its own.
  await pgAdmin(
    (client) => client.query(`UPDATE store_meta SET value = ${NEW_EPOCH_SQL} WHERE key = 'epoch'`),
    name,
  );
  return name;
}

/** Drops the copies left by test processes that are gone (each leaves its last spare). */
async function dropOrphanedCopies(): Promise<void> {
  const alive = (pid: number) => {
    try {
      process.kill(pid, 0);
      return true;
    } catch (error) {
      return (error as NodeJS.ErrnoException).code !== 'ESRCH';
    }
  };
  await pgAdmin(async (client) => {
    const copies = await client.query<{ datname: string }>(
      "SELECT datname FROM pg_database WHERE datname LIKE 'tw\\_test\\_%'",
    );
    for (const { datname } of copies.rows) {
      const pid = COPY.exec(datname)?.[1];
      if (pid !== undefined && !alive(Number(pid))) {
        await client.query(`DROP DATABASE IF EXISTS ${datname} WITH (FORCE)`);
      }
    }
  });
}

let spare: Promise<string> | undefined;
let swept: Promise<void> | undefined;

/**
 * A new database of its own as a store's first open leaves it: every migration applied, an
 * epoch of its own, no data. Copied from a migrated template, and the next copy made while the
 * test that takes this one runs: a fraction of the time of a new database and its migrations,
 * for suites that open hundreds of stores. Tests of the migrations themselves use
 * `freshDatabase`.
 */
export async function migratedDatabase(): Promise<TestDatabase> {
  await migratedTemplate();
  swept ??= dropOrphanedCopies();
  await swept;
  const next = spare ?? copyOfTemplate();
  spare = copyOfTemplate();
  spare.catch(() => undefined);
  return testDatabase(await next);
}
