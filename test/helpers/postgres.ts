import { randomBytes } from 'node:crypto';
import pg from 'pg';

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

/** A new, empty database of its own, and how to drop it (its connections closed by force). */
export async function freshDatabase(): Promise<{
  url: string;
  name: string;
  drop: () => Promise<void>;
}> {
  const name = `tw_test_${randomBytes(6).toString('hex')}`;
  await pgAdmin((client) => client.query(`CREATE DATABASE ${name}`));
  return {
    url: `${POSTGRES_SERVER}/${name}`,
    name,
    drop: () =>
      pgAdmin((client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(
        () => undefined,
      ),
  };
}
