import type { Command } from 'commander';
import { loadSettings, SettingsError } from '../model/settings.js';
import { topicKey } from '../model/stream-key.js';
import { RUNS_FEED_TOPIC } from '../store/store.js';
import { openStore, redact, schemeOf, storeSpec } from './backends.js';

interface MigrateFlags {
  store?: string;
  data?: string;
  config?: string;
  connectTimeout?: string;
  newEpoch?: boolean;
}

/** Exit status for a database this release must not touch (migrated by a newer one). */
const EXIT_NEWER_SCHEMA = 2;

/**
 * `tailwater migrate`: brings a PostgreSQL store's schema up to date without starting a server
 * (docs/CLI.md), as `serve` would at start. `pg` is loaded only here, when the command runs.
 */
export function migrateCommand(program: Command): void {
  program
    .command('migrate')
    .description("Apply the store's schema migrations (PostgreSQL) and print its schema version.")
    .option('--store <url>', 'store: postgres://user@host:port/db, or sqlite:<path>')
    .option('--data <dir>', 'data directory for the embedded store (default ./tailwater-data)')
    .option('--config <file>', 'JSON config file of settings (see docs/CONFIGURATION.md)')
    .option('--connect-timeout <ms>', 'how long to wait for PostgreSQL (default 10000)')
    .option(
      '--new-epoch',
      'after restoring a backup: give the store a new epoch, so cursors handed out before are answered with gap reset',
    )
    .action(async (flags: MigrateFlags) => {
      const settings = loadSettings({
        configFile: flags.config,
        flags: { store: flags.store, data: flags.data },
      });
      const spec = storeSpec(settings);
      const scheme = schemeOf(spec);
      if (scheme === 'sqlite') {
        if (flags.newEpoch) {
          await renewEpoch(settings);
          return;
        }
        process.stdout.write(
          `The SQLite store (${spec.slice('sqlite:'.length)}) creates and migrates its schema itself when the server starts: nothing to do.\n`,
        );
        return;
      }
      if (scheme !== 'postgres' && scheme !== 'postgresql') {
        throw new SettingsError(
          `store: "${redact(spec)}" is not a store this build opens (use sqlite:<path> or postgres://user@host:port/db).`,
        );
      }
      const timeout = flags.connectTimeout === undefined ? 10_000 : Number(flags.connectTimeout);
      if (!Number.isInteger(timeout) || timeout <= 0) {
        throw new SettingsError(
          `--connect-timeout: "${flags.connectTimeout}" is not a number of ms.`,
        );
      }
      process.exitCode = await migratePostgres(spec, timeout);
      if (process.exitCode === 0 && flags.newEpoch) await renewEpoch(settings);
    });
}

/**
 * A restored backup numbers its streams as they were when it was taken, so the seqs after it
 * are handed out again for new entries: a new epoch makes every cursor from before a `gap reset`
 * (docs/STORAGE.md, "Backups and the store epoch"). Servers read the epoch when they start.
 */
async function renewEpoch(settings: Parameters<typeof openStore>[0]): Promise<void> {
  const store = await openStore(settings);
  try {
    // Every stream's bounds carry the store's one epoch; the runs feed is always there.
    const before = (await store.bounds(topicKey(RUNS_FEED_TOPIC))).epoch;
    const after = await store.renewEpoch();
    process.stdout.write(`epoch: ${before} -> ${after}\n`);
  } finally {
    await store.close();
  }
}

/** Applies the migrations to the database at `url`; answers the exit status. */
async function migratePostgres(url: string, connectTimeoutMs: number): Promise<number> {
  const where = redact(url);
  try {
    new URL(url);
  } catch {
    throw new SettingsError(
      `store: "${where}" is not a URL (expected postgres://user@host:port/db).`,
    );
  }
  const [{ default: pg }, { applyMigrations }, { MIGRATIONS }] = await Promise.all([
    import('pg'),
    import('../store/postgres.js'),
    import('../store/postgres-schema.js'),
  ]);
  const known = MIGRATIONS[MIGRATIONS.length - 1]?.version ?? 0;
  const client = new pg.Client({
    connectionString: url,
    connectionTimeoutMillis: connectTimeoutMs,
    application_name: 'tailwater-migrate',
  });
  // A connection that breaks while idle emits `error`; the query in flight fails with it too.
  client.on('error', () => undefined);
  try {
    await client.connect();
  } catch (error) {
    await client.end().catch(() => undefined);
    throw new Error(`Cannot connect to PostgreSQL at ${where}: ${messageOf(error)}`, {
      cause: error,
    });
  }
  try {
    const versionNow = async (): Promise<number> => {
      // Queried apart: a statement naming a table that does not exist fails to parse.
      const table = await client.query<{ found: boolean }>(
        "SELECT to_regclass('schema_migrations') IS NOT NULL AS found",
      );
      if (!table.rows[0]?.found) return 0;
      const { rows } = await client.query<{ version: number | null }>(
        'SELECT max(version) AS version FROM schema_migrations',
      );
      return Number(rows[0]?.version ?? 0);
    };
    const before = await versionNow();
    process.stdout.write(`PostgreSQL at ${where}\nschema version before: ${before}\n`);
    if (before > known) {
      process.stderr.write(
        `tailwater: the database at ${where} has schema version ${before}, newer than this Tailwater knows (${known}): it was migrated by a newer release. Nothing was changed; run that release (or newer), or point --store at another database.\n`,
      );
      return EXIT_NEWER_SCHEMA;
    }
    const applied = await applyMigrations(client, where);
    const names = new Map(MIGRATIONS.map((m) => [m.version, m.name]));
    process.stdout.write(
      applied.length === 0
        ? 'applied: none (already up to date)\n'
        : `applied: ${applied.map((v) => `${v} (${names.get(v) ?? '?'})`).join(', ')}\n`,
    );
    process.stdout.write(`schema version after: ${await versionNow()}\n`);
    return 0;
  } finally {
    await client.end().catch(() => undefined);
  }
}

function messageOf(error: unknown): string {
  if (error instanceof AggregateError && error.errors.length > 0) {
    return error.errors.map(messageOf).join('; ');
  }
  return error instanceof Error ? error.message || String(error) : String(error);
}
