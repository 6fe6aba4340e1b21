/**
 * A fleet for the replica benchmarks (replicas.ts): real `tailwater serve` replicas on a fresh
 * PostgreSQL database (`tw_bench_<random>`, dropped afterwards) and the Redis of
 * scripts/services.sh, optionally behind an nginx running docs/nginx.conf (only its ports
 * replaced, as the fleet tests do, with nginx's own connection limits raised for thousands of
 * viewers). Plus a keep-alive HTTP writer and /metrics readings.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { nginxMainConfig, nginxSiteConfig } from '../test/helpers/fleet.js';
import { freePort } from '../test/helpers/net.js';
import { sleep, spawnNode, STREAM_ENV } from './procs.js';

export const POSTGRES_SERVER =
  process.env['BENCH_POSTGRES'] ?? 'postgres://postgres@127.0.0.1:5432';
export const REDIS_URL = process.env['BENCH_REDIS'] ?? 'redis://127.0.0.1:6379';
export const NGINX = process.env['BENCH_NGINX'] ?? '/usr/sbin/nginx';
const BIN =
  process.env['BENCH_TAILWATER_BIN'] ?? fileURLToPath(new URL('../bin/tailwater', import.meta.url));
const NGINX_CONF = fileURLToPath(new URL('../docs/nginx.conf', import.meta.url));

/** Whether something accepts TCP connections on 127.0.0.1:`port` (within a second). */
export function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

/** What is missing of scripts/services.sh's PostgreSQL, Redis and nginx binary, if anything. */
export async function missingServices(): Promise<string[]> {
  const missing: string[] = [];
  if (!(await portOpen(Number(new URL(POSTGRES_SERVER).port || 5432)))) missing.push('PostgreSQL');
  if (!(await portOpen(Number(new URL(REDIS_URL).port || 6379)))) missing.push('Redis');
  try {
    readFileSync(NGINX);
  } catch {
    missing.push(`nginx (${NGINX})`);
  }
  return missing;
}

export interface BenchDatabase {
  name: string;
  url: string;
  drop(): Promise<void>;
}

async function admin<T>(body: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: `${POSTGRES_SERVER}/postgres` });
  await client.connect();
  try {
    return await body(client);
  } finally {
    await client.end();
  }
}

/** A new, empty database of this run's own; `drop()` closes its connections by force. */
export async function freshDatabase(): Promise<BenchDatabase> {
  const name = `tw_bench_${randomBytes(6).toString('hex')}`;
  await admin((client) => client.query(`CREATE DATABASE ${name}`));
  return {
    name,
    url: `${POSTGRES_SERVER}/${name}`,
    drop: () =>
      admin((client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(
        () => undefined,
      ),
  };
}

export interface Replica {
  url: string;
  port: number;
  pid: number;
  child: ChildProcess;
  /** The last 64 KiB it wrote to stdout (its log, at level warn). */
  output(): string;
  stop(): Promise<void>;
}

/**
 * A real `tailwater serve --store <db> --bus <redis>` on a free loopback port, with the
 * streaming benchmarks' raised caps (STREAM_ENV, given as configuration) and `env`, its
 * open-file limit raised as far as the machine allows.
 */
export async function startReplica(
  database: string,
  dataDir: string,
  env: Record<string, string> = {},
): Promise<Replica> {
  const args = [
    BIN,
    'serve',
    '--port',
    '0',
    '--data',
    dataDir,
    '--store',
    database,
    '--bus',
    REDIS_URL,
    '--log-level',
    'warn',
  ];
  const child = spawnNode(args, { env: { ...STREAM_ENV, ...env } });
  let out = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    out = (out + chunk.toString()).slice(-64 * 1024);
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 3000);
    await exited;
    clearTimeout(timer);
  };
  try {
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`replica did not start: ${out}`)), 30_000);
      child.stdout!.on('data', () => {
        const match = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
        if (match) {
          clearTimeout(timer);
          resolve(match[1]!);
        }
      });
      void exited.then(() => {
        clearTimeout(timer);
        reject(new Error(`replica exited (${child.exitCode}) before listening: ${out}`));
      });
    });
    return {
      url,
      port: Number(new URL(url).port),
      pid: child.pid ?? -1,
      child,
      output: () => out,
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

export interface Fleet {
  database: BenchDatabase;
  replicas: Replica[];
  stop(): Promise<void>;
}

/** `count` replicas on a fresh database: the first alone (it migrates), then the others. */
export async function startFleet(count: number, env: Record<string, string> = {}): Promise<Fleet> {
  const database = await freshDatabase();
  const dir = mkdtempSync(join(tmpdir(), 'tailwater-bench-replicas-'));
  const replicas: Replica[] = [];
  const stop = async () => {
    await Promise.all(replicas.map((replica) => replica.stop()));
    rmSync(dir, { recursive: true, force: true });
    await database.drop();
  };
  try {
    replicas.push(await startReplica(database.url, join(dir, 'r0'), env));
    replicas.push(
      ...(await Promise.all(
        Array.from({ length: count - 1 }, (_, i) =>
          startReplica(database.url, join(dir, `r${i + 1}`), env),
        ),
      )),
    );
    return { database, replicas, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

export interface Nginx {
  url: string;
  port: number;
  /** The master's pid. */
  pid: number;
  /** The worker's pid (the process that moves the bytes), once it runs. */
  workerPid(): number | undefined;
  stop(): Promise<void>;
}

/** The pids of a process's children (/proc/<pid>/task/<pid>/children). */
export function childPids(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8')
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number);
  } catch {
    return [];
  }
}

/**
 * nginx in front of `ports`, running docs/nginx.conf (with `routeByStream`, its hash line
 * enabled), one worker whose connection and open-file limits hold `connections`.
 */
export async function startNginx(
  ports: readonly number[],
  options: { routeByStream: boolean; connections: number },
): Promise<Nginx> {
  const dir = mkdtempSync(join(tmpdir(), 'tailwater-bench-nginx-'));
  chmodSync(dir, 0o755); // the worker runs as nobody
  const port = await freePort();
  const site = nginxSiteConfig(
    readFileSync(NGINX_CONF, 'utf8'),
    ports,
    port,
    options.routeByStream,
  );
  const conf = nginxMainConfig(dir, site, options.connections);
  writeFileSync(join(dir, 'nginx.conf'), conf);
  const child = spawn(NGINX, ['-c', join(dir, 'nginx.conf'), '-p', dir], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = `http://127.0.0.1:${port}`;
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 3000);
    await exited;
    clearTimeout(timer);
    rmSync(dir, { recursive: true, force: true });
  };
  for (let attempt = 0; attempt < 200; attempt += 1) {
    if (child.exitCode !== null) break;
    const ok = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(1000) })
      .then((res) => res.ok)
      .catch(() => false);
    if (ok) {
      const pid = child.pid ?? -1;
      return { url, port, pid, workerPid: () => childPids(pid)[0], stop };
    }
    await sleep(50);
  }
  let log = '';
  try {
    log = readFileSync(join(dir, 'error.log'), 'utf8');
  } catch {
    // no log
  }
  await stop();
  throw new Error(`nginx did not answer on ${url}: ${log}`);
}

/** Sums of counters and gauges over the replicas' /metrics (unlabelled series only). */
export async function scrape(
  replicas: readonly Replica[],
  names: readonly string[],
): Promise<{ total: Record<string, number>; each: Array<Record<string, number>> }> {
  const each = await Promise.all(
    replicas.map(async (replica) => {
      const res = await fetch(`${replica.url}/metrics`, { signal: AbortSignal.timeout(10_000) });
      const text = await res.text();
      const values: Record<string, number> = {};
      for (const name of names) {
        const line = text.split('\n').find((candidate) => candidate.startsWith(`${name} `));
        if (line === undefined) throw new Error(`no ${name} in ${replica.url}/metrics`);
        values[name] = Number(line.slice(name.length + 1));
      }
      return values;
    }),
  );
  const total: Record<string, number> = {};
  for (const name of names) total[name] = each.reduce((sum, values) => sum + values[name]!, 0);
  return { total, each };
}

/** A keep-alive HTTP writer: POSTs a body and answers its status and parsed JSON. */
export class Writer {
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: 256 });

  post(url: string, body: string, contentType: string): Promise<{ status: number; json: unknown }> {
    return new Promise((resolve, reject) => {
      const req = http.request(
        url,
        {
          method: 'POST',
          agent: this.agent,
          headers: { 'content-type': contentType, 'content-length': Buffer.byteLength(body) },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            let json: unknown = undefined;
            try {
              json = JSON.parse(text);
            } catch {
              json = text;
            }
            resolve({ status: res.statusCode ?? 0, json });
          });
          res.on('error', reject);
        },
      );
      req.setTimeout(30_000, () => req.destroy(new Error(`POST ${url} timed out`)));
      req.on('error', reject);
      req.end(body);
    });
  }

  /** POSTs and fails on anything but a 200. */
  async ok(url: string, body: string, contentType = 'application/json'): Promise<unknown> {
    const { status, json } = await this.post(url, body, contentType);
    if (status !== 200) throw new Error(`POST ${url}: ${status} ${JSON.stringify(json)}`);
    return json;
  }

  close(): void {
    this.agent.destroy();
  }
}
