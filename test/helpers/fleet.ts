import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { createParser } from 'eventsource-parser';
import { freePort } from './net.js';
import { freshDatabase } from './postgres.js';
import { startServerProcess } from './server-process.js';
import type { ServerProcess } from './server-process.js';
import { seqOfId } from './sse.js';
import { sleep } from './wait.js';

// Several `tailwater serve` replicas on one PostgreSQL database and one Redis, behind a real
// nginx running docs/nginx.conf with only its ports replaced (issue 13; docs/SERVICES.md).

export const NGINX = '/usr/sbin/nginx';
export const REDIS_URL = process.env['TAILWATER_TEST_REDIS'] ?? 'redis://127.0.0.1:6379';
const NGINX_CONF = fileURLToPath(new URL('../../docs/nginx.conf', import.meta.url));

const UPSTREAM_SERVER = /^([ \t]*)server 127\.0\.0\.1:\d+( [^;\n]*)?;[ \t]*\n/gm;
const LISTEN = /^([ \t]*)listen 127\.0\.0\.1:\d+;/m;
const HASH_BY_STREAM = /^([ \t]*)# (hash \$uri consistent;)/m;

/**
 * docs/nginx.conf with its upstream servers replaced by `ports` (keeping the parameters the
 * first one has) and its listen port by `listenPort`; with `routeByStream`, its commented
 * `hash $uri consistent;` line enabled. Fails if the file no longer has the shape this relies on,
 * so that the config the tests run is the one users copy.
 */
export function nginxSiteConfig(
  text: string,
  ports: readonly number[],
  listenPort: number,
  routeByStream = false,
): string {
  const servers = [...text.matchAll(UPSTREAM_SERVER)];
  if (servers.length === 0)
    throw new Error('docs/nginx.conf has no `server 127.0.0.1:<port>` line');
  if (!LISTEN.test(text)) throw new Error('docs/nginx.conf has no `listen 127.0.0.1:<port>;` line');
  if (routeByStream && !HASH_BY_STREAM.test(text)) {
    throw new Error('docs/nginx.conf has no `# hash $uri consistent;` line');
  }
  const [, indent, parameters] = servers[0]!;
  const replacement = ports
    .map((port) => `${indent}server 127.0.0.1:${port}${parameters ?? ''};\n`)
    .join('');
  let first = true;
  return text
    .replace(UPSTREAM_SERVER, () => {
      const out = first ? replacement : '';
      first = false;
      return out;
    })
    .replace(LISTEN, `$1listen 127.0.0.1:${listenPort};`)
    .replace(HASH_BY_STREAM, routeByStream ? '$1$2' : '$&');
}

export interface Nginx {
  url: string;
  dir: string;
  child: ChildProcess;
  errorLog(): Promise<string>;
  stop(): Promise<void>;
}

/**
 * nginx's main configuration around `site`, everything under `dir` (pid, logs, temp paths), one
 * worker holding up to `connections` connections (and as many open files, and some to spare).
 */
export function nginxMainConfig(dir: string, site: string, connections = 1024): string {
  return [
    'daemon off;',
    'master_process on;',
    'worker_processes 1;',
    `worker_rlimit_nofile ${connections + 1024};`,
    `pid ${dir}/nginx.pid;`,
    `error_log ${dir}/error.log warn;`,
    `events { worker_connections ${connections}; }`,
    'http {',
    '  access_log off;',
    `  client_body_temp_path ${dir}/client_body;`,
    `  proxy_temp_path ${dir}/proxy;`,
    `  fastcgi_temp_path ${dir}/fastcgi;`,
    `  uwsgi_temp_path ${dir}/uwsgi;`,
    `  scgi_temp_path ${dir}/scgi;`,
    site,
    '}',
    '',
  ].join('\n');
}

/**
 * Starts nginx in the foreground on a free loopback port, in front of `ports`; with
 * `routeByStream`, docs/nginx.conf's hash variant (all viewers of a stream on one replica).
 */
export async function startNginx(
  ports: readonly number[],
  options: { routeByStream?: boolean; timeoutMs?: number } = {},
): Promise<Nginx> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const dir = await mkdtemp(join(tmpdir(), 'tailwater-nginx-'));
  // The workers run as nobody: they must reach their temp directories inside.
  await chmod(dir, 0o755);
  const listenPort = await freePort();
  let site: string;
  try {
    site = nginxSiteConfig(
      await readFile(NGINX_CONF, 'utf8'),
      ports,
      listenPort,
      options.routeByStream ?? false,
    );
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
  const conf = nginxMainConfig(dir, site);
  const confPath = join(dir, 'nginx.conf');
  await writeFile(confPath, conf);
  const child = spawn(NGINX, ['-c', confPath, '-p', dir], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = `http://127.0.0.1:${listenPort}`;
  const errorLog = () => readFile(join(dir, 'error.log'), 'utf8').catch(() => '');
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    }
    await rm(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + timeoutMs;
  for (let attempt = 0; attempt < 1000; attempt += 1) {
    if (child.exitCode !== null) break;
    const ok = await fetch(`${url}/healthz`)
      .then((response) => response.ok)
      .catch(() => false);
    if (ok) return { url, dir, child, errorLog, stop };
    if (Date.now() > deadline) break;
    await sleep(50);
  }
  const log = await errorLog();
  await stop();
  throw new Error(`nginx did not answer on ${url}:\n${output}\n${log}`);
}

export interface Fleet {
  replicas: ServerProcess[];
  nginx: Nginx;
  database: string;
  stop(): Promise<void>;
}

/**
 * `count` replicas on a fresh database and the test Redis, started before nginx (a replica down
 * at nginx's first request would be skipped for fail_timeout), then nginx in front of them.
 */
export async function startFleet(count: number, env: Record<string, string> = {}): Promise<Fleet> {
  const database = await freshDatabase();
  const replicas: ServerProcess[] = [];
  let nginx: Nginx | undefined;
  const stop = async () => {
    await nginx?.stop();
    await Promise.all(replicas.map((replica) => replica.stop('SIGKILL')));
    await database.drop();
  };
  try {
    const args = ['--store', database.url, '--bus', REDIS_URL];
    // The first one alone applies the migrations; the others find the schema in place.
    replicas.push(await startServerProcess(args, env));
    replicas.push(
      ...(await Promise.all(
        Array.from({ length: count - 1 }, () => startServerProcess(args, env)),
      )),
    );
    nginx = await startNginx(replicas.map((replica) => Number(new URL(replica.url).port)));
    return { replicas, nginx, database: database.name, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

export interface TimedFrame {
  id: string | undefined;
  event: string;
  data: string;
  /** performance.now() when the frame was parsed. */
  at: number;
  /**
   * Which read of the body brought it (counted across reconnects): frames the server wrote at
   * once, such as a poll's batch, share one; frames pushed one by one each have their own.
   */
  chunk: number;
}

export interface Viewer {
  /** Entry frames (no `retry`, `cursor`, `gap`, `end`, `error`), in the order received. */
  entries: TimedFrame[];
  /** Every frame, control frames included. */
  frames: TimedFrame[];
  /** How many times the stream was opened again after its body ended without `end`. */
  reconnects: number;
  /** HTTP statuses of the attempts that were not a 200 stream (or 0 for a refused connection). */
  failures: number[];
  /** The highest seq received (0 before any). */
  lastSeq(): number;
  /**
   * Resolves when `end` arrives or the viewer is closed; rejects when the reconnects or the time
   * run out first.
   */
  done: Promise<void>;
  close(): void;
}

const CONTROL = new Set(['cursor', 'gap', 'end', 'error']);

/**
 * A viewer of a native stream that does what docs/API.md asks of a client: when the body ends
 * without `end` (its replica died), it opens the stream again with the last id it saw as
 * `Last-Event-ID`, with capped backoff, at most `maxReconnects` times and within `timeoutMs`.
 */
export function follow(
  url: string,
  options: { maxReconnects?: number; timeoutMs?: number } = {},
): Viewer {
  const maxReconnects = options.maxReconnects ?? 0;
  const timeoutMs = options.timeoutMs ?? 30_000;
  const controller = new AbortController();
  let closed = false;
  let highest = 0;
  const viewer: Viewer = {
    entries: [],
    frames: [],
    reconnects: 0,
    failures: [],
    lastSeq: () => highest,
    done: Promise.resolve(),
    close: () => {
      closed = true;
      controller.abort();
    },
  };
  let lastId: string | undefined;
  let ended = false;
  let chunks = 0;
  const deadline = Date.now() + timeoutMs;
  const timer = setTimeout(() => controller.abort(), timeoutMs);
  const attempt = async () => {
    const headers: Record<string, string> = { accept: 'text/event-stream' };
    if (lastId !== undefined) headers['last-event-id'] = lastId;
    const response = await fetch(url, { headers, signal: controller.signal }).catch(() => null);
    if (response === null) return void viewer.failures.push(0);
    if (response.status !== 200 || !response.body) {
      viewer.failures.push(response.status);
      await response.body?.cancel().catch(() => undefined);
      return;
    }
    const parser = createParser({
      onEvent(message) {
        const frame: TimedFrame = {
          id: message.id,
          event: message.event ?? 'message',
          data: message.data,
          at: performance.now(),
          chunk: chunks,
        };
        viewer.frames.push(frame);
        if (message.id !== undefined) {
          lastId = message.id;
          highest = Math.max(highest, seqOfId(message.id) || 0);
        }
        if (!CONTROL.has(frame.event)) viewer.entries.push(frame);
        if (frame.event === 'end') ended = true;
      },
    });
    const decoder = new TextDecoder();
    try {
      for await (const chunk of response.body) {
        chunks += 1;
        parser.feed(decoder.decode(chunk as Uint8Array, { stream: true }));
        if (ended) break;
      }
    } catch {
      // the body was cut (the replica died) or closed by close()
    }
  };
  viewer.done = (async () => {
    try {
      for (let round = 0; round <= maxReconnects; round += 1) {
        if (round > 0) {
          viewer.reconnects += 1;
          await sleep(Math.min(50 * 2 ** (round - 1), 1_000));
        }
        await attempt();
        if (ended || closed) return;
        if (controller.signal.aborted || Date.now() > deadline) break;
      }
      throw new Error(
        `the stream ${url} did not end: ${viewer.entries.length} entries, ` +
          `${viewer.reconnects} reconnects, failures ${JSON.stringify(viewer.failures)}`,
      );
    } finally {
      clearTimeout(timer);
      controller.abort();
    }
  })();
  viewer.done.catch(() => undefined);
  return viewer;
}

/** Waits until the viewer has received `seq` (then closes it), or fails after `timeoutMs`. */
export async function readUntil(viewer: Viewer, seq: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (let round = 0; round < 100_000 && viewer.lastSeq() < seq; round += 1) {
    if (Date.now() > deadline) break;
    // A viewer that gave up (reconnects or time ran out) says why.
    await Promise.race([viewer.done, sleep(10)]);
  }
  const reached = viewer.lastSeq() >= seq;
  viewer.close();
  await viewer.done;
  if (!reached) {
    throw new Error(
      `the viewer stopped at seq ${viewer.lastSeq()} of ${seq} ` +
        `(${viewer.reconnects} reconnects, failures ${JSON.stringify(viewer.failures)})`,
    );
  }
}

/** Waits until `condition` holds, polling every 2 ms (for latency), or fails after `timeoutMs`. */
export async function within(
  condition: () => boolean,
  what: string,
  timeoutMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(2);
  }
}

/** A gauge's value in a replica's /metrics (Prometheus text, no labels). */
export async function gauge(url: string, name: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split('\n').find((candidate) => candidate.startsWith(`${name} `));
  if (line === undefined) throw new Error(`no ${name} in ${url}/metrics`);
  return Number(line.slice(name.length + 1));
}

/** The p-th percentile (0–100) of `values`, nearest rank. */
export function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank] ?? Number.NaN;
}
