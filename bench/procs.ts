/**
 * Child processes for the streaming benchmarks: a real `tailwater serve`, the bare node:net SSE
 * writer (bare-sse-server.ts) and the viewer client (viewer-client.ts), each started with a
 * raised open-file limit, plus /proc readings of their memory and CPU.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type {
  ClientCommand,
  ClientReply,
  OpenedReply,
  PeerPublish,
  SettledReply,
} from './viewer-client.js';
import { collectGarbage as collectChildGarbage, GC_ON_SIGNAL } from '../test/helpers/gc-signal.js';
import type { MemoryUsage } from '../test/helpers/gc-signal.js';

export { GC_ON_SIGNAL };
export type { MemoryUsage };

export const ROOT = fileURLToPath(new URL('..', import.meta.url));
/** BENCH_TAILWATER_BIN measures another build (say, a copy with a proposed change). */
const BIN =
  process.env['BENCH_TAILWATER_BIN'] ?? fileURLToPath(new URL('../bin/tailwater', import.meta.url));
const BARE = fileURLToPath(new URL('./bare-sse-server.ts', import.meta.url));
const CLIENT = fileURLToPath(new URL('./viewer-client.ts', import.meta.url));

/**
 * Settings every streaming benchmark gives the server: caps out of the way (the per-client ones
 * too: every viewer of a benchmark comes from 127.0.0.1), no heartbeats. A build that does not
 * know a setting ignores its variable.
 */
export const STREAM_ENV: Record<string, string> = {
  TAILWATER_MAX_ACTIVE_CONNECTIONS: '20000',
  TAILWATER_MAX_SUBSCRIBERS_PER_STREAM: '20000',
  TAILWATER_MAX_ACTIVE_STREAMS: '1000',
  TAILWATER_MAX_CONNECTIONS_PER_CLIENT: '20000',
  TAILWATER_MAX_STREAMS_PER_CLIENT: '20000',
  TAILWATER_HEARTBEAT_SECONDS: '3600',
};

export interface Proc {
  child: ChildProcess;
  pid: number;
  /** SIGTERM, then SIGKILL if it has not exited within a second; safe to call twice. */
  stop(): Promise<void>;
}

/**
 * A command with the open-file limit raised as far as this machine allows (65536, or the hard
 * limit where the container forbids raising it), through bash so the pid is the command's own
 * (exec).
 */
export function spawnLimited(
  command: string,
  args: string[],
  options: { env?: Record<string, string>; ipc?: boolean } = {},
): ChildProcess {
  return spawn(
    'bash',
    [
      '-c',
      'ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"; exec "$@"',
      'bash',
      command,
      ...args,
    ],
    {
      cwd: ROOT,
      env: { ...process.env, ...options.env },
      stdio: options.ipc ? ['ignore', 'pipe', 'inherit', 'ipc'] : ['ignore', 'pipe', 'inherit'],
    },
  );
}

/** Node, with the open-file limit raised (spawnLimited). */
export function spawnNode(
  args: string[],
  options: { env?: Record<string, string>; ipc?: boolean } = {},
): ChildProcess {
  return spawnLimited(process.execPath, args, options);
}

export function asProc(child: ChildProcess): Proc {
  const exited = new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once('exit', () => resolve());
  });
  return {
    child,
    pid: child.pid ?? -1,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 1000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/**
 * A server of several processes (nginx's master and workers, Pushpin's runner and services):
 * stopping it stops the root, then kills whatever below it is still there.
 */
export function asTreeProc(child: ChildProcess): Proc {
  const root = asProc(child);
  return {
    ...root,
    async stop() {
      const tree = root.pid > 0 ? processTree(root.pid).slice(1) : [];
      await root.stop();
      for (const pid of tree) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    },
  };
}

/** Waits for a line of the child's stdout that matches `pattern`. */
export function waitForLine(child: ChildProcess, pattern: RegExp, timeoutMs = 20_000) {
  return new Promise<RegExpExecArray>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`no ${pattern} within ${timeoutMs} ms: ${out}`));
    }, timeoutMs);
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const match = pattern.exec(out);
      if (match) {
        clearTimeout(timer);
        resolve(match);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`process exited (${code}) before ${pattern}: ${out}`));
    });
  });
}

/** A loopback port free at the time of asking (for servers that cannot be given port 0). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** Waits until 127.0.0.1:`port` accepts connections; fails if `proc` exits first. */
export async function waitForPort(
  port: number,
  proc: Proc,
  logFile?: string,
  timeoutMs = 20_000,
): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  const log = () =>
    logFile && existsSync(logFile) ? `: ${readFileSync(logFile, 'utf8').slice(-2000)}` : '';
  while (performance.now() < deadline) {
    if (proc.child.exitCode !== null || proc.child.signalCode !== null) {
      throw new Error(
        `process exited (${proc.child.exitCode ?? proc.child.signalCode}) before listening on ${port}${log()}`,
      );
    }
    const open = await new Promise<boolean>((resolve) => {
      const socket = net.connect({ host: '127.0.0.1', port }, () => {
        socket.destroy();
        resolve(true);
      });
      socket.on('error', () => resolve(false));
    });
    if (open) return;
    await sleep(50);
  }
  throw new Error(`nothing listened on 127.0.0.1:${port} within ${timeoutMs} ms${log()}`);
}

export interface TailwaterProc extends Proc {
  url: string;
  port: number;
}

export interface TailwaterOptions {
  /** Another build's `bin/tailwater` (default: this checkout's, or BENCH_TAILWATER_BIN). */
  bin?: string;
  /** false: the server's default settings, without STREAM_ENV (default true). */
  streamEnv?: boolean;
}

/** A real `tailwater serve` on a free loopback port. */
export async function startTailwater(
  dataDir: string,
  env: Record<string, string> = {},
  nodeFlags: string[] = [],
  options: TailwaterOptions = {},
): Promise<TailwaterProc> {
  const child = spawnNode(
    [
      ...nodeFlags,
      options.bin ?? BIN,
      'serve',
      '--port',
      '0',
      '--data',
      dataDir,
      '--log-level',
      'warn',
    ],
    { env: { ...(options.streamEnv === false ? {} : STREAM_ENV), ...env } },
  );
  const proc = asProc(child);
  try {
    const match = await waitForLine(child, /listening on (http:\/\/127\.0\.0\.1:(\d+))/);
    return { ...proc, url: match[1]!, port: Number(match[2]) };
  } catch (error) {
    await proc.stop();
    throw error;
  }
}

export interface BareProc extends Proc {
  /** Port of the SSE listener (any GET path is a viewer). */
  ssePort: number;
  /** Base URL of its control API: POST /events takes the same body as Tailwater's. */
  controlUrl: string;
}

export interface BareOptions {
  /** `net` (default): the bare node:net writer; `http`: the same on a plain node:http server. */
  sse?: 'net' | 'http';
  /**
   * `frame` (default): one write per frame, corked per batch; `batch`: one buffer per batch;
   * `coalesce`: one buffer per turn of the event loop, for every batch that landed in it.
   */
  write?: 'frame' | 'batch' | 'coalesce';
  nodeFlags?: string[];
}

/** The baseline: a minimal SSE writer with no store or framework (bare-sse-server.ts). */
export async function startBare(options: BareOptions = {}): Promise<BareProc> {
  const child = spawnNode([...(options.nodeFlags ?? []), '--import', 'tsx', BARE], {
    env: { BARE_SSE: options.sse ?? 'net', BARE_WRITE: options.write ?? 'frame' },
  });
  const proc = asProc(child);
  try {
    const match = await waitForLine(child, /bare sse=(\d+) control=(http:\/\/127\.0\.0\.1:\d+)/);
    return { ...proc, ssePort: Number(match[1]), controlUrl: match[2]! };
  } catch (error) {
    await proc.stop();
    throw error;
  }
}

export interface ViewerClient extends Proc {
  /** Sends one command and waits (at most timeoutMs) for its reply. */
  ask<T extends ClientReply>(command: ClientCommand, timeoutMs: number): Promise<T>;
}

/** The process that holds the viewers (and, for the latency run, the producer). */
export async function startViewerClient(): Promise<ViewerClient> {
  const child = spawnNode(['--import', 'tsx', CLIENT], { ipc: true });
  const proc = asProc(child);
  try {
    await waitForLine(child, /viewer client ready/);
  } catch (error) {
    await proc.stop();
    throw error;
  }
  return {
    ...proc,
    ask<T extends ClientReply>(command: ClientCommand, timeoutMs: number): Promise<T> {
      return new Promise<T>((resolve, reject) => {
        const timer = setTimeout(() => {
          cleanup();
          reject(new Error(`viewer client: no answer to ${command.op} within ${timeoutMs} ms`));
        }, timeoutMs);
        const onMessage = (reply: ClientReply) => {
          cleanup();
          if (reply.op === 'error') reject(new Error(`viewer client: ${reply.message}`));
          else resolve(reply as T);
        };
        const onExit = (code: number | null) => {
          cleanup();
          reject(new Error(`viewer client exited (${code}) during ${command.op}`));
        };
        const cleanup = () => {
          clearTimeout(timer);
          child.off('message', onMessage);
          child.off('exit', onExit);
        };
        child.on('message', onMessage);
        child.once('exit', onExit);
        child.send(command);
      });
    },
  };
}

/** Asks a process started with GC_ON_SIGNAL to collect garbage; resolves with its memory. */
export function collectGarbage(proc: Proc, timeoutMs = 10_000): Promise<MemoryUsage> {
  return collectChildGarbage(proc.child, timeoutMs);
}

/** Resident set size of a process in KiB (VmRSS of /proc/<pid>/status). */
export function rssKiB(pid: number): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!match) throw new Error(`no VmRSS for ${pid}`);
  return Number(match[1]);
}

/** CPU time (user + system) a process has used so far, in milliseconds. */
export function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces) start at state, field 3.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]);
  return ticks * 10; // USER_HZ is 100 on Linux
}

/** A process and every process below it (a server's workers), from /proc's children lists. */
export function processTree(pid: number): number[] {
  const pids = [pid];
  for (let i = 0; i < pids.length; i += 1) {
    let tasks: string[];
    try {
      tasks = readdirSync(`/proc/${pids[i]}/task`);
    } catch {
      continue; // exited meanwhile
    }
    for (const task of tasks) {
      try {
        const children = readFileSync(`/proc/${pids[i]}/task/${task}/children`, 'utf8').trim();
        if (children) pids.push(...children.split(' ').map(Number));
      } catch {
        // the thread exited meanwhile
      }
    }
  }
  return pids;
}

/** CPU time of a process and every process below it, in milliseconds. */
export function treeCpuMs(pid: number): number {
  return processTree(pid).reduce((sum, p) => {
    try {
      return sum + cpuMs(p);
    } catch {
      return sum; // exited meanwhile
    }
  }, 0);
}

/**
 * Proportional set size of a process and every process below it, in KiB: each shared page
 * (nginx's shared memory zone, its workers' common code) counted once across them, not once per
 * process as RSS would.
 */
export function treePssKiB(pid: number): number {
  return processTree(pid).reduce((sum, p) => {
    const match = /^Pss:\s+(\d+) kB/m.exec(readFileSync(`/proc/${p}/smaps_rollup`, 'utf8'));
    return sum + Number(match?.[1] ?? 0);
  }, 0);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** JSON request on loopback, for setup calls (creating runs). */
export async function putJson(url: string, body: unknown): Promise<void> {
  const res = await fetch(url, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(10_000),
  });
  if (!res.ok) throw new Error(`PUT ${url}: ${res.status} ${await res.text()}`);
  await res.arrayBuffer();
}

/**
 * Packets the kernel dropped because a CPU's input backlog was full (netdev_max_backlog), and
 * TCP segments retransmitted, machine-wide: on loopback the first causes the second, and a
 * retransmission costs a viewer or a producer at least one retransmission timeout.
 */
export function netDrops(): { backlogDrops: number; retransSegs: number } {
  let backlogDrops = 0;
  for (const line of readFileSync('/proc/net/softnet_stat', 'utf8').trim().split('\n')) {
    backlogDrops += parseInt(line.split(/\s+/)[1] ?? '0', 16);
  }
  const snmp = readFileSync('/proc/net/snmp', 'utf8').split('\n');
  const header = snmp.find((l) => l.startsWith('Tcp:'))!.split(/\s+/);
  const values = snmp.filter((l) => l.startsWith('Tcp:'))[1]!.split(/\s+/);
  const retransSegs = Number(values[header.indexOf('RetransSegs')]);
  return { backlogDrops, retransSegs };
}

/** Machine-wide CPU time so far from /proc/stat, in ms: busy (all but idle and iowait) and total. */
export function machineCpuMs(): { busy: number; total: number } {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1, 9);
  const ticks = fields.map(Number);
  const total = ticks.reduce((a, b) => a + b, 0);
  const idle = (ticks[3] ?? 0) + (ticks[4] ?? 0);
  return { busy: (total - idle) * 10, total: total * 10 };
}

/** A server under test with one stream to watch: where to open viewers and where to append. */
export interface StreamServer {
  server: Proc;
  port: number;
  appendUrl: string;
  path: string;
  /** A peer server's publish API at appendUrl (peer-streams.ts); Tailwater's when absent. */
  peer?: PeerPublish;
  /**
   * For a server that drops what it cannot queue for a connection: entries per publish, and at
   * most how many may be published that some viewer does not hold yet.
   */
  queueLimit?: { batch: number; ahead: number };
}

/**
 * The bare writer, or a real `tailwater serve` with the run `pipeline`/r1 as the stream (of
 * another build with `bin`, with `env` beside STREAM_ENV).
 */
export async function startStreamServer(
  target: { bare: BareOptions } | { tailwater: string; bin?: string; env?: Record<string, string> },
  dir: string,
): Promise<StreamServer> {
  if ('bare' in target) {
    const bare = await startBare(target.bare);
    return {
      server: bare,
      port: bare.ssePort,
      appendUrl: `${bare.controlUrl}/events`,
      path: '/stream',
    };
  }
  const tailwater = await startTailwater(join(dir, 'data'), target.env, [], { bin: target.bin });
  const run = `/api/v1/pipelines/${target.tailwater}/runs/r1`;
  return {
    server: tailwater,
    port: tailwater.port,
    appendUrl: `${tailwater.url}${run}/events`,
    path: `${run}/stream`,
  };
}

/**
 * Opens `viewers` SSE viewers of the stream in the client process; any failure is fatal.
 * Resolves with how many of a Pushpin's viewers were never subscribed and had to be opened again.
 */
export async function openViewers(
  client: ViewerClient,
  stream: StreamServer,
  viewers: number,
  name: string,
): Promise<number> {
  // 1,000 open in well under a second here; 10,000 need more than the 20 s floor allows.
  const timeoutMs = 20_000 + viewers * 5;
  const opened = await client.ask<OpenedReply>(
    {
      op: 'open',
      port: stream.port,
      paths: [stream.path],
      perPath: viewers,
      parallel: 50,
      timeoutMs,
    },
    timeoutMs + 5000,
  );
  if (opened.failed > 0) {
    throw new Error(`${name}: ${opened.failed} viewers failed to open: ${opened.firstFailure}`);
  }
  // A Pushpin viewer has its first frame before it is subscribed (viewer-client.ts, settle).
  if (stream.peer?.to === 'pushpin') {
    const { appendUrl } = stream;
    const { channel } = stream.peer;
    const settle = { op: 'settle', appendUrl, channel, timeoutMs: 60_000 } as const;
    return (await client.ask<SettledReply>(settle, 65_000)).reopened;
  }
  return 0;
}

/** The share of the machine (every core) that is busy over the next `ms`: other work on it. */
export async function machineBusy(ms = 1000): Promise<number> {
  const before = machineCpuMs();
  await sleep(ms);
  const after = machineCpuMs();
  return (after.busy - before.busy) / Math.max(1, after.total - before.total);
}
