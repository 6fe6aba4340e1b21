import pg from 'pg';
import type { Lease } from './lease.js';
import { LOCK_NAMESPACE_LEASES } from './postgres-schema.js';

/** How often a held lease checks that its connection still answers. */
const CHECK_MS = 5_000;

/**
 * A lease as a session advisory lock on a connection of its own: held while the connection
 * lives, so a holder that dies (kill -9, a cut network once PostgreSQL notices) loses it and
 * another server's next try takes it. The connection checks itself every few seconds, so a
 * holder whose connection died silently learns it and stops the task.
 */
export async function tryPostgresLease(
  url: string,
  name: string,
  connectTimeoutMs: number,
): Promise<Lease | undefined> {
  const client = new pg.Client({
    connectionString: url,
    connectionTimeoutMillis: connectTimeoutMs,
    application_name: `tailwater lease ${name}`.slice(0, 63),
    keepAlive: true,
    query_timeout: CHECK_MS,
  });
  let markLost: () => void = () => {};
  const lost = new Promise<void>((resolve) => {
    markLost = resolve;
  });
  let released = false;
  const gone = () => {
    if (!released) markLost();
  };
  client.on('error', gone);
  client.on('end', gone);
  try {
    await client.connect();
    const { rows } = await client.query<{ held: boolean }>(
      'SELECT pg_try_advisory_lock($1, hashtext($2)) AS held',
      [LOCK_NAMESPACE_LEASES, name],
    );
    if (!rows[0]?.held) {
      released = true;
      await client.end();
      return undefined;
    }
  } catch (error) {
    released = true;
    await client.end().catch(() => undefined);
    throw error;
  }
  const check = setInterval(() => {
    client.query('SELECT 1').catch(() => {
      gone();
      void client.end().catch(() => undefined);
    });
  }, CHECK_MS);
  check.unref();
  void lost.then(() => clearInterval(check));
  return {
    lost,
    release: async () => {
      if (released) return;
      released = true;
      clearInterval(check);
      // Ending the session releases its advisory locks.
      await client.end().catch(() => undefined);
    },
  };
}
