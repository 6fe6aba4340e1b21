import { execFileSync, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from './net.js';
import { stopChild } from './stop-child.js';
import { sleep } from './wait.js';

// A PostgreSQL cluster of a test's own, which the test may stop and start again: the shared one
// on 5432 (docs/SERVICES.md) is used by other test files at the same time and is never touched.

const PG_LIB = '/usr/lib/postgresql';

/** The newest installed server's bin directory, as scripts/services.sh picks it. */
function pgBin(): string {
  const versions = existsSync(PG_LIB)
    ? readdirSync(PG_LIB)
        .filter((name) => /^\d+$/.test(name) && existsSync(join(PG_LIB, name, 'bin', 'postgres')))
        .sort((a, b) => Number(a) - Number(b))
    : [];
  const newest = versions[versions.length - 1];
  if (newest === undefined) {
    throw new Error(`no PostgreSQL server under ${PG_LIB}: run scripts/services.sh`);
  }
  return join(PG_LIB, newest, 'bin');
}

/**
 * The server refuses to run as root (docs/SERVICES.md): as root, the cluster belongs to the
 * `postgres` user and its processes run as that user; otherwise as whoever runs the tests.
 */
function owner(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
  const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
  return { uid, gid };
}

/** Keeps the last `max` characters of a process's output, for error messages. */
function tail(text: string, max = 8_000): string {
  return text.length > max ? text.slice(-max) : text;
}

export class PrivatePostgres {
  readonly dir: string;
  private readonly bin = pgBin();
  private readonly user = owner();
  private child: ChildProcess | undefined;
  private output = '';
  /** Every line the server printed, when asked to keep them (bench/storage.ts). */
  private whole: string[] | undefined;

  private constructor(
    readonly port: number,
    private readonly extraArgs: readonly string[] = [],
  ) {
    this.dir = mkdtempSync(join(tmpdir(), 'tailwater-pg-'));
    if (this.user) chownSync(this.dir, this.user.uid, this.user.gid);
  }

  /** initdb (trust, no sync) in a new temporary directory, then starts it on a free port. */
  static async start(extraArgs: readonly string[] = []): Promise<PrivatePostgres> {
    const server = new PrivatePostgres(await freePort(), extraArgs);
    if (extraArgs.length > 0) server.whole = [];
    try {
      execFileSync(
        join(server.bin, 'initdb'),
        [
          ...['-D', server.data, '-U', 'postgres', '--auth=trust'],
          ...['-E', 'UTF8', '--locale=C.UTF-8', '--no-sync'],
        ],
        { cwd: server.dir, stdio: 'pipe', timeout: 60_000, ...server.user },
      );
    } catch (error) {
      const stderr = (error as { stderr?: Buffer }).stderr?.toString() ?? '';
      rmSync(server.dir, { recursive: true, force: true });
      throw new Error(`initdb failed: ${(error as Error).message}\n${stderr}`);
    }
    try {
      await server.start();
    } catch (error) {
      await server.dispose();
      throw error;
    }
    return server;
  }

  get data(): string {
    return join(this.dir, 'data');
  }

  /** The server's URL, without a database. */
  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}`;
  }

  get running(): boolean {
    return (
      this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null
    );
  }

  /**
   * Starts the postmaster in the foreground (unless it runs): loopback only, its socket in the
   * temporary directory, fsync off as for the shared cluster (docs/SERVICES.md); then waits, 30 s
   * at most, until it accepts a query.
   */
  async start(): Promise<void> {
    if (this.running) return;
    const child = spawn(
      join(this.bin, 'postgres'),
      [
        ...['-D', this.data, '-p', String(this.port), '-k', this.dir],
        ...['-c', 'listen_addresses=127.0.0.1', '-c', 'fsync=off'],
        ...['-c', 'max_connections=100', '-c', 'logging_collector=off'],
        ...this.extraArgs,
      ],
      { cwd: this.dir, stdio: ['ignore', 'pipe', 'pipe'], ...this.user },
    );
    this.child = child;
    const collect = (chunk: Buffer) => {
      this.output = tail(this.output + chunk.toString());
      this.whole?.push(chunk.toString());
    };
    child.stdout!.on('data', collect);
    child.stderr!.on('data', collect);
    const deadline = Date.now() + 30_000;
    for (let attempt = 0; attempt < 600; attempt += 1) {
      if (!this.running) break;
      if (await this.answers()) return;
      if (Date.now() > deadline) break;
      await sleep(50);
    }
    throw new Error(`PostgreSQL on ${this.port} did not start:\n${this.log()}`);
  }

  /**
   * Fast shutdown (SIGINT: sessions are ended, open transactions rolled back), then waits 30 s
   * at most for the postmaster to exit, and kills it after that.
   */
  async stop(): Promise<void> {
    const child = this.child;
    if (!child || !this.running) return;
    await stopChild(child, () => child.kill('SIGINT'), 30_000);
  }

  /** Runs `body` with a client on `database`, then disconnects. */
  async query<T>(body: (client: pg.Client) => Promise<T>, database = 'postgres'): Promise<T> {
    const client = new pg.Client({ connectionString: `${this.url}/${database}` });
    client.on('error', () => undefined);
    await client.connect();
    try {
      return await body(client);
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  /** A new empty database; answers its URL. */
  async createDatabase(name: string): Promise<string> {
    if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`not a plain database name: ${name}`);
    await this.query((client) => client.query(`CREATE DATABASE ${name}`));
    return `${this.url}/${name}`;
  }

  log(): string {
    return this.output;
  }

  /** All the server printed (started with extra arguments only). */
  fullLog(): string {
    return (this.whole ?? []).join('');
  }

  get binDir(): string {
    return this.bin;
  }

  async dispose(): Promise<void> {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }

  private async answers(): Promise<boolean> {
    const client = new pg.Client({
      connectionString: `${this.url}/postgres`,
      connectionTimeoutMillis: 2_000,
    });
    client.on('error', () => undefined);
    try {
      await client.connect();
      await client.query('SELECT 1');
      return true;
    } catch {
      return false;
    } finally {
      await client.end().catch(() => undefined);
    }
  }
}
