import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { openStore } from '../../src/cli/backends.js';
import { settingsSchema } from '../../src/model/settings.js';
import { topicKey } from '../../src/model/stream-key.js';
import { MIGRATIONS } from '../../src/store/postgres-schema.js';
import { freePort } from '../helpers/net.js';
import { freshDatabase, pgAdmin } from '../helpers/postgres.js';
import { BIN } from '../helpers/server-process.js';

// `tailwater migrate` (docs/CLI.md), run as a user would: the built bin/tailwater.

const LATEST = MIGRATIONS[MIGRATIONS.length - 1]!.version;

interface Outcome {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `tailwater migrate …` with no TAILWATER_* settings from this environment. */
function migrate(...args: string[]): Promise<Outcome> {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([key]) => !key.startsWith('TAILWATER_')),
  );
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [BIN, 'migrate', ...args],
      { env, timeout: 30_000 },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : -1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

describe('tailwater migrate', () => {
  const drops: (() => Promise<void>)[] = [];

  beforeAll(() => {
    const built = fileURLToPath(new URL('../../dist/cli/migrate.js', import.meta.url));
    if (!existsSync(built)) throw new Error('dist/ lacks the migrate command: run `npm run build`');
  });
  afterEach(async () => {
    await Promise.all(drops.splice(0).map((drop) => drop()));
  });

  it('applies every migration to a fresh database, prints the version before and after, and exits 0', async () => {
    const db = await freshDatabase();
    drops.push(db.drop);
    const result = await migrate('--store', db.url);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toContain(`PostgreSQL at ${db.url}\n`);
    expect(result.stdout).toContain('schema version before: 0\n');
    expect(result.stdout).toContain(`schema version after: ${LATEST}\n`);
    const versions = await pgAdmin(
      async (client) =>
        (await client.query<{ version: number }>('SELECT version FROM schema_migrations')).rows,
      db.name,
    );
    expect(versions.map((row) => row.version).sort((a, b) => a - b)).toEqual(
      MIGRATIONS.map((m) => m.version),
    );
  });

  it('run again on a database already up to date, it changes nothing and exits 0', async () => {
    const db = await freshDatabase();
    drops.push(db.drop);
    expect((await migrate('--store', db.url)).code).toBe(0);
    const again = await migrate('--store', db.url);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain(`schema version before: ${LATEST}\n`);
    expect(again.stdout).toContain('applied: none (already up to date)\n');
    expect(again.stdout).toContain(`schema version after: ${LATEST}\n`);
  });

  it('a database at a newer schema version is left untouched, with a clear message and exit 2', async () => {
    const db = await freshDatabase();
    drops.push(db.drop);
    expect((await migrate('--store', db.url)).code).toBe(0);
    await pgAdmin(
      (client) =>
        client.query("INSERT INTO schema_migrations (version, name) VALUES ($1, 'future')", [
          LATEST + 1,
        ]),
      db.name,
    );
    const result = await migrate('--store', db.url);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(
      new RegExp(`^tailwater: the database at .* has schema version ${LATEST + 1}, newer than`),
    );
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
    const count = await pgAdmin(
      async (client) =>
        (await client.query<{ n: string }>('SELECT count(*) AS n FROM schema_migrations')).rows,
      db.name,
    );
    expect(Number(count[0]!.n)).toBe(MIGRATIONS.length + 1);
  });

  it('an unreachable PostgreSQL is one line naming it, without its password, and exit 1', async () => {
    const port = await freePort();
    const result = await migrate(
      '--store',
      `postgres://postgres:hunter2@127.0.0.1:${port}/db`,
      '--connect-timeout',
      '2000',
    );
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toBe(
      `tailwater: Cannot connect to PostgreSQL at postgres://postgres:***@127.0.0.1:${port}/db: connect ECONNREFUSED 127.0.0.1:${port}\n`,
    );
  });

  it('for a SQLite store it says the server migrates it at start, and exits 0', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'tw-migrate-'));
    drops.push(() => rm(dir, { recursive: true, force: true }));
    const result = await migrate('--store', `sqlite:${join(dir, 'x.db')}`);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/migrates its schema itself when the server starts/);
    expect(existsSync(join(dir, 'x.db'))).toBe(false);
  });

  it.each(['postgres', 'sqlite'])(
    'with --new-epoch gives a %s store a new epoch that a store opened after reads, keeping its entries',
    async (kind) => {
      let url: string;
      if (kind === 'postgres') {
        const db = await freshDatabase();
        drops.push(db.drop);
        url = db.url;
      } else {
        const dir = await mkdtemp(join(tmpdir(), 'tw-migrate-'));
        drops.push(() => rm(dir, { recursive: true, force: true }));
        url = `sqlite:${join(dir, 'x.db')}`;
      }
      const settings = settingsSchema.parse({ data: '/nonexistent', store: url });
      const key = topicKey('kept');
      const store = await openStore(settings);
      await store.appendEvents(key, [{ kind: 'k', data: 1 }]);
      const before = (await store.bounds(key)).epoch;
      await store.close();

      const result = await migrate('--store', url, '--new-epoch');
      expect(result.stderr).toBe('');
      expect(result.code).toBe(0);
      const printed = /^epoch: ([0-9a-f]{8}) -> ([0-9a-f]{8})$/m.exec(result.stdout);
      expect(printed?.[1]).toBe(before);
      expect(printed?.[2]).not.toBe(before);

      const reopened = await openStore(settings);
      try {
        expect(await reopened.bounds(key)).toMatchObject({ lastSeq: 1, epoch: printed?.[2] });
      } finally {
        await reopened.close();
      }
    },
  );

  it('a store of an unknown scheme is a bad setting, exit 2', async () => {
    const result = await migrate('--store', 'mysql://root@127.0.0.1/db');
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/^tailwater: bad setting: store: "mysql:/);
  });
});
