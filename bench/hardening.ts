/**
 * The cost of issue 11's hardening (the body budget scanner, per-route limits, per-event parsing
 * between turns, Host/Origin checks, helmet headers, per-client caps, the queued and sliced
 * SQLite writer, indexed kind reads), as ratios of this checkout to a build of the code before
 * it (BENCH_BEFORE) measured in the same run; and the event-loop blocking of the worst requests
 * a client can legally (or nearly) make, on both builds.
 *
 * `BENCH_BEFORE=/tmp/tw-before npm run bench hardening`. Also: BENCH_SECONDS (each throughput
 * measurement, default 2), BENCH_HARDENING_REPS (5), BENCH_HARDENING_FANOUT_ROUNDS (3),
 * BENCH_HARDENING_PARTS (`throughput`, `worst`, or both, the default), BENCH_HARDENING_CPU_PROF
 * (a directory: the after build's worst-requests server runs with --cpu-prof into it, and each
 * request's CLOCK_MONOTONIC window is printed, to find it in the profile).
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Worker } from 'node:worker_threads';
import { FANOUT, measureFanout } from './fanout.js';
import type { TailwaterProc } from './procs.js';
import { cpuMs, sleep, startTailwater } from './procs.js';
import { fmt, median, perSecond, writeSection } from './report.js';
import type { Row } from './report.js';

const SECONDS = Number(process.env['BENCH_SECONDS'] ?? 2);
const WARMUP_SECONDS = Math.min(0.5, SECONDS / 4);
const REPS = Number(process.env['BENCH_HARDENING_REPS'] ?? 5);
const FANOUT_ROUNDS = Number(process.env['BENCH_HARDENING_FANOUT_ROUNDS'] ?? 3);
const PARTS = (process.env['BENCH_HARDENING_PARTS'] ?? 'throughput,worst').split(',');
const CPU_PROF_DIR = process.env['BENCH_HARDENING_CPU_PROF'];
const REQUEST_TIMEOUT_MS = 60_000;
const BUDGET_MS = 50;
/** Time left after a scrape before a request (the monitor ticks every 10 ms). */
const SETTLE_MS = 50;
/** Tries of each worst request per build (the worse is reported): the old build's take seconds. */
const TRIES: Record<Build['name'], number> = { after: 2, before: 1 };
const GOAL = 0.95;
const KiB = 1024;
const MiB = 1024 * KiB;
const HOW_TO_BUILD_BEFORE =
  'git worktree add /tmp/tw-before ab02e01 && (cd /tmp/tw-before && npm ci && npx tsc -p tsconfig.build.json)';

interface Build {
  name: 'before' | 'after';
  /** Its bin/tailwater; undefined for this checkout's (procs.ts's default). */
  bin: string | undefined;
}

/** The build before the hardening, from BENCH_BEFORE; stops the benchmark if there is none. */
function beforeBuild(): Build {
  const dir = process.env['BENCH_BEFORE'];
  const how = `Make one with \`${HOW_TO_BUILD_BEFORE}\`, then run \`BENCH_BEFORE=/tmp/tw-before npm run bench hardening\`.`;
  if (!dir) {
    throw new Error(
      `hardening: BENCH_BEFORE is not set. It names a built checkout of the code before the hardening (a directory holding bin/tailwater and dist/). ${how}`,
    );
  }
  const bin = resolve(dir, 'bin', 'tailwater');
  if (!existsSync(bin) || !existsSync(resolve(dir, 'dist', 'cli', 'main.js'))) {
    throw new Error(
      `hardening: BENCH_BEFORE=${dir} holds no built Tailwater (bin/tailwater and dist/cli/main.js). ${how}`,
    );
  }
  return { name: 'before', bin };
}

const AFTER: Build = { name: 'after', bin: undefined };

// ---------------------------------------------------------------------------------------------
// HTTP over keep-alive, for the throughput runs and the setup of the worst requests.

interface Answer {
  status: number;
  text: string;
}

function send(
  agent: http.Agent,
  url: string,
  method: 'POST' | 'PUT' | 'GET',
  type: string | undefined,
  body: Buffer | undefined,
  timeoutMs = 30_000,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> = {};
    if (type) headers['content-type'] = type;
    if (body) headers['content-length'] = body.length;
    const req = http.request(url, { method, agent, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }),
      );
      res.on('error', reject);
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`${method} ${url}: no answer in time`)));
    req.on('error', reject);
    req.end(body);
  });
}

async function sendOk(...args: Parameters<typeof send>): Promise<Answer> {
  const answer = await send(...args);
  if (answer.status !== 200) {
    throw new Error(`${args[2]} ${args[1]}: ${answer.status} ${answer.text.slice(0, 300)}`);
  }
  return answer;
}

const LINE = (n: number) =>
  `2026-11-29T08:00:00.000Z INFO [load] table_${n % 97}: wrote batch ${n}\n`;

function lines(count: number, from = 0): string {
  let out = '';
  for (let i = 0; i < count; i += 1) out += LINE(from + i);
  return out;
}

function eventsBody(count: number, data: (i: number) => string): Buffer {
  const events: string[] = [];
  for (let i = 0; i < count; i += 1) events.push(`{"kind":"progress","data":${data(i)}}`);
  return Buffer.from(`{"events":[${events.join(',')}]}`, 'utf8');
}

// ---------------------------------------------------------------------------------------------
// Throughput: the same closed loops against each build.

/**
 * `writers` concurrent loops of `step` for `seconds` (and at most 100,000 steps each); the rate
 * of units, and the CPU time the server process used per 1000 of them.
 */
async function closedLoop(
  serverPid: number,
  writers: number,
  seconds: number,
  step: (writer: number, i: number) => Promise<number>,
): Promise<Measure> {
  const started = performance.now();
  const cpuBefore = cpuMs(serverPid);
  let units = 0;
  await Promise.all(
    Array.from({ length: writers }, async (_, writer) => {
      for (let i = 0; i < 100_000 && performance.now() - started < seconds * 1000; i += 1) {
        const done = await step(writer, i); // (not `units += await …`: that adds to a stale read)
        units += done;
      }
    }),
  );
  const rate = perSecond(units, performance.now() - started);
  return { rate, cpuPer1k: ((cpuMs(serverPid) - cpuBefore) * 1000) / Math.max(1, units) };
}

interface Load {
  key: 'logs' | 'events' | 'small';
  name: string;
  unit: string;
  /** What one unit is, for the CPU figure. */
  per: string;
  writers: number;
  path: (writer: number) => string;
  type: string;
  body: Buffer;
  /** Units (lines, events, requests) per request. */
  units: number;
}

const LOG_BODY = Buffer.from(lines(1000), 'utf8');
const EVENT_PAD = 'x'.repeat(180);
const LOADS: Load[] = [
  {
    key: 'logs',
    name: 'HTTP POST …/logs, text/plain bodies of 1000 lines (~70 B each), 1 writer',
    unit: 'lines/s',
    per: 'lines',
    writers: 1,
    path: () => '/api/v1/pipelines/bench.logs/runs/w0/logs',
    type: 'text/plain; charset=utf-8',
    body: LOG_BODY,
    units: 1000,
  },
  {
    key: 'events',
    name: 'HTTP POST …/events, batches of 100 events of ~200 B data, 2 writers',
    unit: 'events/s',
    per: 'events',
    writers: 2,
    path: (w) => `/api/v1/pipelines/bench.events/runs/w${w}/events`,
    type: 'application/json',
    body: eventsBody(100, (i) => `{"n":${i},"pct":${i % 100},"pad":"${EVENT_PAD}"}`),
    units: 100,
  },
  {
    key: 'small',
    name: 'HTTP POST …/logs, one text/plain line per request, 16 writers over keep-alive',
    unit: 'requests/s',
    per: 'requests',
    writers: 16,
    path: (w) => `/api/v1/pipelines/bench.small/runs/w${w}/logs`,
    type: 'text/plain; charset=utf-8',
    body: Buffer.from(LINE(1), 'utf8'),
    units: 1,
  },
];

interface Measure {
  rate: number;
  /** Server CPU (user + system) per 1000 units, ms. */
  cpuPer1k: number;
}

type Rates = Record<Load['key'] | 'fanout', Measure>;

/** One fresh server of `build`: each load, after a warm-up of the same load. */
async function measureLoads(build: Build): Promise<Omit<Rates, 'fanout'>> {
  const dir = mkdtempSync(join(tmpdir(), `tailwater-bench-hardening-${build.name}-`));
  let server: TailwaterProc | undefined;
  try {
    server = await startTailwater(join(dir, 'data'), {}, [], { bin: build.bin });
    const { url, pid } = server;
    const rates = {} as Omit<Rates, 'fanout'>;
    for (const load of LOADS) {
      const agent = new http.Agent({ keepAlive: true, maxSockets: load.writers, noDelay: true });
      const step = async (writer: number) => {
        await sendOk(agent, `${url}${load.path(writer)}`, 'POST', load.type, load.body);
        return load.units;
      };
      try {
        await closedLoop(pid, load.writers, WARMUP_SECONDS, step);
        rates[load.key] = await closedLoop(pid, load.writers, SECONDS, step);
      } finally {
        agent.destroy();
      }
    }
    return rates;
  } finally {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function measureFanoutOf(build: Build): Promise<Measure> {
  const dir = mkdtempSync(join(tmpdir(), `tailwater-bench-hardening-fanout-${build.name}-`));
  try {
    const measured = await measureFanout(
      { name: `${build.name}: fan-out`, tailwater: true, bin: build.bin },
      dir,
      FANOUT_ROUNDS,
    );
    return { rate: median(measured.rates), cpuPer1k: measured.serverCpuPer1k };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function benchThroughput(before: Build): Promise<void> {
  const started = performance.now();
  const samples: Record<Build['name'], Rates[]> = { before: [], after: [] };
  for (let rep = 0; rep < REPS; rep += 1) {
    const order = rep % 2 === 0 ? [before, AFTER] : [AFTER, before];
    for (const build of order) {
      const loads = await measureLoads(build);
      const fanout = await measureFanoutOf(build);
      const rates: Rates = { ...loads, fanout };
      samples[build.name].push(rates);
      console.log(
        `rep ${rep + 1} ${build.name}: ` +
          Object.entries(rates)
            .map(([key, m]) => `${key} ${fmt(m.rate)}/s (${m.cpuPer1k.toFixed(2)} ms CPU/1k)`)
            .join(', '),
      );
    }
  }
  const rows: Row[] = [];
  const kinds: Array<{ key: keyof Rates; name: string; unit: string; per: string }> = [
    ...LOADS,
    {
      key: 'fanout',
      name: `Fan-out, 1 stream × ${fmt(FANOUT.viewers)} viewers (as in "Fan-out")`,
      unit: 'deliveries/s',
      per: 'deliveries',
    },
  ];
  const ratios: string[] = [];
  for (const { key, name, unit, per } of kinds) {
    const after = samples.after.map((r) => r[key].rate);
    const beforeRates = samples.before.map((r) => r[key].rate);
    const cpu = (build: Build['name']) =>
      median(samples[build].map((r) => r[key].cpuPer1k)).toFixed(2);
    const ratio = median(after) / median(beforeRates);
    const range = (values: number[]) => `${fmt(Math.min(...values))}–${fmt(Math.max(...values))}`;
    // Each repetition measured both builds within a minute: its own ratio shows the spread.
    const paired = after.map((rate, rep) => (rate / beforeRates[rep]!) * 100);
    const pairedRange = `${Math.min(...paired).toFixed(0)}–${Math.max(...paired).toFixed(0)} %`;
    const goal =
      key === 'small' ? '' : `; goal ≥ ${GOAL * 100} %${ratio < GOAL ? ', not met' : ''}`;
    rows.push({
      name,
      value: `${fmt(median(after))} ${unit}`,
      ratio: `${(ratio * 100).toFixed(1)} %`,
      note: `before: ${fmt(median(beforeRates))} ${unit}; repetitions after ${range(after)}, before ${range(beforeRates)}, after ÷ before within one ${pairedRange}; server CPU per 1k ${per} after ${cpu('after')} ms, before ${cpu('before')} ms${goal}`,
    });
    ratios.push(`${key} ${(ratio * 100).toFixed(1)} %`);
  }
  for (const row of rows) console.log(`${row.name}: ${row.value} (${row.ratio}) — ${row.note}`);
  console.log(`after ÷ before: ${ratios.join(', ')}`);
  const minutes = (performance.now() - started) / 60_000;
  writeSection(
    'hardening',
    'Cost of the hardening (issue 11)',
    [
      `What the defences of docs/SECURITY.md cost: each figure is this checkout ("after") against a build of the code before them ("before": the build in \`BENCH_BEFORE\`, made from ab02e01, the last commit before the hardening), both real \`tailwater serve\` processes measured in the same run, the ratio being after ÷ before of the medians. ${REPS} repetitions, the order of the two builds alternating (before first in the odd ones); each repetition gives each build a fresh server and data directory with the benchmarks' raised caps (STREAM_ENV, the per-client caps included, which the old build ignores) and no heartbeats. Goal (issue 11): ≥ ${GOAL * 100} % for ingest and fan-out.`,
      '',
      `The three HTTP loads run one after another on one server, each for ${SECONDS} s after a ${WARMUP_SECONDS} s warm-up of the same load, closed-loop from this process over keep-alive connections (node:http, Nagle off), every request answered 200 before its writer sends the next: text/plain appends of 1000 log lines of ~70 B (one run); batches of 100 events of ~200 B of data to two runs, one writer each; one 70 B line per request, 16 writers on 16 runs, where per-request work (helmet's headers, the Host and Origin checks, the per-client connection count, the body scanner's setup) weighs most. Fan-out is bench/fanout.ts's measurement on a server of its own: ${fmt(FANOUT.viewers)} viewers of one run, rounds of ${fmt(FANOUT.entries)} entries of ~1 KiB appended as batches of ${FANOUT.batch}; a repetition's figure is the median of ${FANOUT_ROUNDS} rounds after a warm-up round. The client and the server share the machine's cores, so the note gives the server's CPU time (user + system, from /proc) per 1000 units too, the cost with the client's share taken out, and the ratio within each repetition (both builds measured within a minute of each other): rates on a shared machine move by tens of percent from one repetition to the next. This part took ${minutes.toFixed(1)} min.`,
    ].join('\n'),
    rows,
  );
}

// ---------------------------------------------------------------------------------------------
// The worst requests: one at a time, each on a fresh connection, the server's event loop watched
// from inside (/metrics) and outside (/healthz from another address).

interface Exchange {
  status: number | undefined;
  /** Request sent → answer complete (or the stream left). */
  ms: number;
  outcome: 'answered' | 'closed' | 'timeout' | 'stopped' | 'error';
  error?: string;
  /** Body bytes received (de-chunked), and the SSE frames among them. */
  bytes: number;
  frames: number;
  /** Request body bytes handed to the socket. */
  sent: number;
}

interface RawRequest {
  method: 'GET' | 'POST';
  path: string;
  type?: string;
  body?: Buffer;
  /** An SSE stream: left once `frames` frames have come, or after `maxMs`. */
  stream?: { frames: number; maxMs: number };
}

const BLANK_LINE = Buffer.from('\n\n');

/**
 * One request over a raw node:net connection: the body written in 64 KiB pieces while the server
 * reads it, stopped as soon as an answer starts (a refusal comes before the body is all sent);
 * the answer counted, not kept. Bounded by REQUEST_TIMEOUT_MS.
 */
function exchange(port: number, request: RawRequest): Promise<Exchange> {
  return new Promise((resolvePromise) => {
    const started = performance.now();
    const result: Exchange = {
      status: undefined,
      ms: 0,
      outcome: 'error',
      bytes: 0,
      frames: 0,
      sent: 0,
    };
    const socket = net.connect({ host: '127.0.0.1', port });
    let finished = false;
    let head: Buffer = Buffer.alloc(0);
    let headDone = false;
    let length: number | undefined;
    let chunked = false;
    let chunkState: 'size' | 'data' | 'crlf' = 'size';
    let sizeLine = '';
    let chunkLeft = 0;
    let lastByte = 0;
    const finish = (outcome: Exchange['outcome'], error?: string) => {
      if (finished) return;
      finished = true;
      result.ms = performance.now() - started;
      result.outcome = outcome;
      if (error !== undefined) result.error = error;
      clearTimeout(timer);
      clearTimeout(streamTimer);
      socket.destroy();
      resolvePromise(result);
    };
    const timer = setTimeout(() => finish('timeout'), REQUEST_TIMEOUT_MS);
    const streamTimer = request.stream
      ? setTimeout(() => finish('stopped'), request.stream.maxMs)
      : undefined;
    const onBody = (data: Buffer) => {
      result.bytes += data.length;
      if (request.stream && data.length > 0) {
        if (lastByte === 10 && data[0] === 10) result.frames += 1;
        for (let i = data.indexOf(BLANK_LINE); i !== -1; i = data.indexOf(BLANK_LINE, i + 2)) {
          result.frames += 1;
        }
        lastByte = data[data.length - 1]!;
        if (result.frames >= request.stream.frames) finish('answered');
      }
      if (length !== undefined && result.bytes >= length) finish('answered');
    };
    const onChunked = (data: Buffer) => {
      let at = 0;
      while (at < data.length && !finished) {
        if (chunkState === 'size') {
          const newline = data.indexOf(10, at);
          if (newline === -1) {
            sizeLine += data.toString('latin1', at);
            return;
          }
          sizeLine += data.toString('latin1', at, newline);
          at = newline + 1;
          const size = Number.parseInt(sizeLine.trim(), 16);
          sizeLine = '';
          if (!Number.isFinite(size)) return finish('error', 'malformed chunked body');
          if (size === 0) return finish('answered');
          chunkLeft = size;
          chunkState = 'data';
        } else if (chunkState === 'data') {
          const take = Math.min(chunkLeft, data.length - at);
          onBody(data.subarray(at, at + take));
          at += take;
          chunkLeft -= take;
          if (chunkLeft === 0) {
            chunkState = 'crlf';
            chunkLeft = 2;
          }
        } else {
          const take = Math.min(chunkLeft, data.length - at);
          at += take;
          chunkLeft -= take;
          if (chunkLeft === 0) chunkState = 'size';
        }
      }
    };
    socket.on('data', (chunk: Buffer) => {
      if (finished) return;
      let data = chunk;
      if (!headDone) {
        head = Buffer.concat([head, chunk]);
        const end = head.indexOf('\r\n\r\n');
        if (end === -1) return;
        headDone = true;
        const text = head.toString('latin1', 0, end);
        result.status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(text)?.[1] ?? NaN);
        const declared = /\r\ncontent-length:\s*(\d+)/i.exec(text)?.[1];
        length = declared === undefined ? undefined : Number(declared);
        chunked = /\r\ntransfer-encoding:[^\r]*chunked/i.test(text);
        data = head.subarray(end + 4);
        head = Buffer.alloc(0);
        if (length === 0) return finish('answered');
      }
      if (chunked) onChunked(data);
      else onBody(data);
    });
    // A write after the server has answered and closed fails (EPIPE, ECONNRESET): kept, not fatal.
    socket.on('error', (error: NodeJS.ErrnoException) => {
      result.error ??= error.code ?? error.message;
    });
    socket.on('close', () => {
      const byClose = headDone && length === undefined && !chunked;
      finish(byClose ? 'answered' : 'closed', result.error);
    });
    socket.on('connect', () => {
      void (async () => {
        const lines = [
          `${request.method} ${request.path} HTTP/1.1`,
          `Host: 127.0.0.1:${port}`,
          'Connection: close',
        ];
        if (request.stream) lines.push('Accept: text/event-stream');
        if (request.body) {
          lines.push(`Content-Type: ${request.type}`, `Content-Length: ${request.body.length}`);
        }
        socket.write(`${lines.join('\r\n')}\r\n\r\n`);
        const body = request.body;
        if (!body) return;
        const PIECE = 64 * KiB;
        for (let offset = 0; offset < body.length && !headDone && !finished; offset += PIECE) {
          const more = socket.write(body.subarray(offset, offset + PIECE));
          result.sent = Math.min(body.length, offset + PIECE);
          if (!more) {
            await new Promise<void>((resume) => {
              const go = () => {
                socket.off('drain', go);
                socket.off('close', go);
                resume();
              };
              socket.on('drain', go);
              socket.on('close', go);
            });
          }
        }
      })();
    });
  });
}

/** tailwater_nodejs_eventloop_lag_max_seconds in ms; scraping resets it. */
async function scrapeLagMs(url: string, timeoutMs = REQUEST_TIMEOUT_MS): Promise<number> {
  const res = await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(timeoutMs) });
  const text = await res.text();
  const value = /^tailwater_nodejs_eventloop_lag_max_seconds (\S+)$/m.exec(text)?.[1];
  if (res.status !== 200 || value === undefined) throw new Error(`/metrics: ${res.status}`);
  return Number(value) * 1000;
}

interface PollReport {
  polls: number;
  slowestMs: number;
  failures: number;
  firstFailure?: string;
}

/**
 * A worker thread (its own event loop, so nothing this thread does delays it) that asks
 * /healthz from 127.0.0.2 over one keep-alive connection, a poll every ~10 ms once the last is
 * answered. Plain JavaScript so it needs no loader.
 */
const POLLER = `
const { parentPort, workerData } = require('node:worker_threads');
const http = require('node:http');
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
let polls = 0, slowest = 0, failures = 0, firstFailure, inFlightSince;
function poll() {
  return new Promise((resolve) => {
    const started = performance.now();
    inFlightSince = started;
    let settled = false;
    const done = (failure) => {
      if (settled) return;
      settled = true;
      inFlightSince = undefined;
      polls += 1;
      slowest = Math.max(slowest, performance.now() - started);
      if (failure) { failures += 1; if (firstFailure === undefined) firstFailure = failure; }
      setTimeout(resolve, failure ? 100 : workerData.intervalMs);
    };
    const req = http.get({ host: '127.0.0.1', port: workerData.port, path: '/healthz',
      localAddress: '127.0.0.2', agent }, (res) => {
      res.resume();
      res.on('end', () => done(res.statusCode === 200 ? undefined : 'status ' + res.statusCode));
      res.on('error', (error) => done(error.message));
    });
    req.setTimeout(workerData.timeoutMs, () => req.destroy(new Error('no answer in time')));
    req.on('error', (error) => done(error.message));
  });
}
parentPort.on('message', () => {
  const waiting = inFlightSince === undefined ? 0 : performance.now() - inFlightSince;
  parentPort.postMessage({ polls, slowestMs: Math.max(slowest, waiting), failures, firstFailure });
});
(async () => {
  const deadline = performance.now() + workerData.maxMs;
  await poll();
  parentPort.postMessage('ready');
  while (performance.now() < deadline) await poll();
})();
`;

async function startPoller(port: number): Promise<{ stop(): Promise<PollReport> }> {
  const worker = new Worker(POLLER, {
    eval: true,
    workerData: { port, intervalMs: 10, timeoutMs: REQUEST_TIMEOUT_MS, maxMs: 5 * 60_000 },
  });
  await new Promise<void>((ready, fail) => {
    worker.once('message', () => ready());
    worker.once('error', fail);
  });
  return {
    async stop() {
      const report = new Promise<PollReport>((answer, fail) => {
        worker.once('message', (message: PollReport) => answer(message));
        worker.once('error', fail);
      });
      worker.postMessage('stop');
      const timeout = sleep(5000).then(() => {
        throw new Error('the /healthz poller did not report');
      });
      try {
        return await Promise.race([report, timeout]);
      } finally {
        await worker.terminate();
      }
    },
  };
}

/** The server a build's worst requests go to, restarted on the same data if it died. */
class Subject {
  server: TailwaterProc | undefined;
  readonly dir: string;

  constructor(readonly build: Build) {
    this.dir = mkdtempSync(join(tmpdir(), `tailwater-bench-worst-${build.name}-`));
  }

  async up(): Promise<TailwaterProc> {
    const { server } = this;
    if (server && server.child.exitCode === null && server.child.signalCode === null) {
      return server;
    }
    await server?.stop();
    const flags =
      CPU_PROF_DIR && this.build.name === 'after'
        ? ['--cpu-prof', `--cpu-prof-dir=${CPU_PROF_DIR}`, '--cpu-prof-interval=250']
        : [];
    // Default settings: the defences as shipped.
    this.server = await startTailwater(join(this.dir, 'data'), {}, flags, {
      bin: this.build.bin,
      streamEnv: false,
    });
    await scrapeLagMs(this.server.url); // the start-up's own delay, out of the first request's
    return this.server;
  }

  async restart(): Promise<void> {
    await this.server?.stop();
    this.server = undefined;
    await this.up();
  }

  async close(): Promise<void> {
    const child = this.server?.child;
    if (CPU_PROF_DIR && child && child.exitCode === null && child.signalCode === null) {
      // --cpu-prof writes its profile as the process exits: give it the time to.
      const exited = new Promise((done) => child.once('exit', done));
      child.kill('SIGTERM');
      await Promise.race([exited, sleep(60_000)]);
    }
    await this.server?.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

interface Worst {
  /** The longest event-loop delay /metrics reported over the request and just after it. */
  blockMs: number | undefined;
  poll: PollReport;
  answer: Exchange;
  /** How the server process ended, if it did during the request. */
  crashed?: string;
}

/** The µs of CLOCK_MONOTONIC, the clock of V8's CPU profiles, to find a request in one. */
const monotonicUs = () => process.hrtime.bigint() / 1000n;

async function measureWorst(subject: Subject, label: string, request: RawRequest): Promise<Worst> {
  const server = await subject.up();
  let crashed: string | undefined;
  let sentAt = performance.now();
  let onExit: (code: number | null, signal: NodeJS.Signals | null) => void = () => undefined;
  const exited = new Promise<void>((resolveExit) => {
    onExit = (code, signal) => {
      crashed = `${signal ?? `exit code ${code}`} ${ms(performance.now() - sentAt)} after the request was sent`;
      resolveExit();
    };
    server.child.once('exit', onExit);
  });
  const poller = await startPoller(server.port);
  let poll: PollReport;
  let answer: Exchange;
  let blockMs: number | undefined;
  const from = monotonicUs();
  try {
    await scrapeLagMs(server.url); // resets the maximum: what follows is this request's
    // The monitor measures the gap between its ticks, and a reset forgets the last tick: a block
    // that began before the first tick after it would go unseen. Two ticks first.
    await sleep(SETTLE_MS);
    sentAt = performance.now();
    answer = await exchange(server.port, request);
    if (answer.outcome !== 'answered' && answer.outcome !== 'stopped') {
      await Promise.race([exited, sleep(2000)]);
    }
    if (!crashed) {
      try {
        // A block that ends after the answer shows in the scrape after it.
        const first = await scrapeLagMs(server.url, answer.outcome === 'timeout' ? 5000 : 60_000);
        await sleep(100);
        blockMs = Math.max(first, await scrapeLagMs(server.url));
      } catch {
        blockMs = undefined;
      }
    }
  } finally {
    poll = await poller.stop();
    server.child.off('exit', onExit);
  }
  if (CPU_PROF_DIR && subject.build.name === 'after') {
    console.log(`cpu-prof window ${from} ${monotonicUs()} ${label}`);
  }
  if (!crashed && blockMs === undefined) await subject.restart(); // stalled past the timeouts
  return { blockMs, poll, answer, ...(crashed ? { crashed } : {}) };
}

function ms(value: number): string {
  if (value >= 10_000) return `${(value / 1000).toFixed(1)} s`;
  return value >= 100 ? `${fmt(value)} ms` : `${value.toFixed(1)} ms`;
}

function mb(bytes: number): string {
  return bytes >= MiB ? `${(bytes / MiB).toFixed(1)} MiB` : `${bytes.toLocaleString('en-US')} B`;
}

function describeAnswer(answer: Exchange, request: RawRequest): string {
  const body = request.body?.length ?? 0;
  const extra = [
    mb(answer.bytes),
    ...(request.stream ? [`${answer.frames.toLocaleString('en-US')} frames`] : []),
    ...(body > 0 && answer.sent < body ? [`${mb(answer.sent)} of the body sent`] : []),
  ].join(', ');
  switch (answer.outcome) {
    case 'answered':
      return `${answer.status} in ${ms(answer.ms)} (${extra})`;
    case 'stopped':
      return `${answer.status}, left after ${ms(answer.ms)} (${extra})`;
    case 'timeout':
      return `no whole answer within ${ms(REQUEST_TIMEOUT_MS)} (${answer.status ? `${answer.status} begun, ` : ''}${extra})`;
    default:
      return answer.status
        ? `${answer.status} cut after ${ms(answer.ms)} (${extra})`
        : `connection reset after ${ms(answer.ms)} before an answer was read (${answer.error ? `${answer.error}, ` : ''}${extra})`;
  }
}

function describeWorst(worst: Worst, request: RawRequest): string {
  const failures =
    worst.poll.failures > 0 ? ` (${worst.poll.failures} failed: ${worst.poll.firstFailure})` : '';
  if (worst.crashed) {
    return `crashed (${worst.crashed}); ${describeAnswer(worst.answer, request)}; slowest /healthz ${ms(worst.poll.slowestMs)}${failures}`;
  }
  const block = worst.blockMs === undefined ? 'not scraped (stalled)' : ms(worst.blockMs);
  return `block ${block}; slowest /healthz ${ms(worst.poll.slowestMs)} (of ${worst.poll.polls})${failures}; ${describeAnswer(worst.answer, request)}`;
}

interface WorstSpec {
  /** Short, for the console. */
  id: string;
  name: string;
  request: RawRequest;
}

const HUGE = { fqn: 'bench.huge', run: 'r1', batches: 297, lines: 2999 };
const WIDE = { fqn: 'bench.wide', run: 'r1' };
const META_RUNS = 1000;
const FREIGHT_RUN = 'freight-16m';
const TAIL_ENTRIES = 100_000;

/** 1000 events of 65,000 B of data each: a full batch, 64 MB. */
function wideBatch(): Buffer {
  const blob = 'x'.repeat(65_000 - 11);
  return eventsBody(1000, () => `{"blob":"${blob}"}`);
}

/** `[{},{},…]` of 64 KiB: the most objects an event's data may hold (21,845). */
function objectsBatch(): Buffer {
  const objects = `[${'{},'.repeat(21_844)}{}]`;
  if (objects.length !== 64 * KiB) throw new Error(`objects: ${objects.length} B`);
  return eventsBody(1000, () => objects);
}

/** `{"events":[{},{},…]}` with six million items. */
function floodBody(): Buffer {
  return Buffer.from(`{"events":[${'{},'.repeat(5_999_999)}{}]}`, 'latin1');
}

/** The data the read requests need, written through the API (so each build writes its own). */
async function prepare(url: string, wide: Buffer, log: Buffer): Promise<void> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 16, noDelay: true });
  const started = performance.now();
  try {
    const huge = `${url}/api/v1/pipelines/${HUGE.fqn}/runs/${HUGE.run}`;
    await sendOk(agent, huge, 'PUT', 'application/json', Buffer.from('{"status":"running"}'));
    // As test/e2e/hostile-clients.test.ts does: batches and single log lines written
    // concurrently, so the log lines are spread through the run.
    let nextBatch = 0;
    let nextLine = 0;
    const small = (batch: number) => (i: number) => `{"batch":${batch},"i":${i}}`;
    await Promise.all([
      ...Array.from({ length: 3 }, async () => {
        while (nextBatch < HUGE.batches) {
          const batch = nextBatch++;
          await sendOk(
            agent,
            `${huge}/events`,
            'POST',
            'application/json',
            eventsBody(1000, small(batch)),
            120_000,
          );
        }
      }),
      ...Array.from({ length: 12 }, async () => {
        while (nextLine < HUGE.lines) {
          const line = Buffer.from(`log line ${nextLine++}\n`);
          await sendOk(agent, `${huge}/logs`, 'POST', 'text/plain; charset=utf-8', line);
        }
      }),
    ]);
    const wideRun = `${url}/api/v1/pipelines/${WIDE.fqn}/runs/${WIDE.run}`;
    await sendOk(agent, wideRun, 'PUT', 'application/json', Buffer.from('{"status":"running"}'));
    await sendOk(agent, `${wideRun}/events`, 'POST', 'application/json', wide, 120_000);
    const meta = Buffer.from(
      JSON.stringify({ status: 'running', meta: { notes: 'm'.repeat(60 * KiB) } }),
    );
    let nextRun = 0;
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        while (nextRun < META_RUNS) {
          const run = `${url}/api/v1/pipelines/bench.meta/runs/m${nextRun++}`;
          await sendOk(agent, run, 'PUT', 'application/json', meta, 60_000);
        }
      }),
    );
    for (let i = 0; i < 2; i += 1) {
      const freight = `${url}/api/v1/pipelines/bench.freight/runs/${FREIGHT_RUN}/logs`;
      await sendOk(agent, freight, 'POST', 'text/plain; charset=utf-8', log, 120_000);
    }
    const tailBatch = (batch: number) => (i: number) =>
      `{"batch":${batch},"i":${i},"pad":"${'t'.repeat(60)}"}`;
    for (let batch = 0; batch < TAIL_ENTRIES / 1000; batch += 1) {
      await sendOk(
        agent,
        `${url}/api/v1/topics/bench-tail/events`,
        'POST',
        'application/json',
        eventsBody(1000, tailBatch(batch)),
        120_000,
      );
    }
  } finally {
    agent.destroy();
  }
  console.log(`prepared in ${((performance.now() - started) / 1000).toFixed(1)} s`);
}

function worstSpecs(bodies: {
  wide: Buffer;
  flood: Buffer;
  log: Buffer;
  objects: Buffer;
}): WorstSpec[] {
  const huge = `/api/v1/pipelines/${HUGE.fqn}/runs/${HUGE.run}`;
  const mb = (b: Buffer) => `${(b.length / 1e6).toFixed(1)} MB`;
  return [
    {
      id: '(a)',
      name: `(a) POST /api/v1/topics/{t}/events: a full batch, 1000 events × 64 KiB of data (${mb(bodies.wide)})`,
      request: {
        method: 'POST',
        path: '/api/v1/topics/bench-wide/events',
        type: 'application/json',
        body: bodies.wide,
      },
    },
    {
      id: '(b)',
      name: `(b) POST /api/v1/topics/{t}/events: 6,000,000 \`{}\` events (${mb(bodies.flood)})`,
      request: {
        method: 'POST',
        path: '/api/v1/topics/bench-flood/events',
        type: 'application/json',
        body: bodies.flood,
      },
    },
    {
      id: '(c)',
      name: `(c) POST …/logs: 8 MiB of text/plain log lines`,
      request: {
        method: 'POST',
        path: '/api/v1/pipelines/bench.log/runs/r1/logs',
        type: 'text/plain; charset=utf-8',
        body: bodies.log,
      },
    },
    {
      id: '(d)',
      name: `(d) POST /api/v1/topics/{t}/events: 1000 events whose data is 64 KiB of \`[{},{},…]\` (21.8M objects, ${mb(bodies.objects)})`,
      request: {
        method: 'POST',
        path: '/api/v1/topics/bench-objects/events',
        type: 'application/json',
        body: bodies.objects,
      },
    },
    {
      id: '(e) kinds=nomatch',
      name: '(e) GET …/entries?kinds=nomatch&limit=1 on a run of 300,000 entries',
      request: { method: 'GET', path: `${huge}/entries?kinds=nomatch&limit=1` },
    },
    {
      id: '(e) limit=1000',
      name: '(e) GET …/entries?limit=1000 on a run of 1000 entries of 64 KiB',
      request: {
        method: 'GET',
        path: `/api/v1/pipelines/${WIDE.fqn}/runs/${WIDE.run}/entries?limit=1000`,
      },
    },
    {
      id: '(e) stream',
      name: '(e) GET …/stream?tail=5&kinds=nomatch on the run of 300,000 (read until a frame past `retry:`, or 2 s)',
      request: {
        method: 'GET',
        path: `${huge}/stream?tail=5&kinds=nomatch`,
        stream: { frames: 2, maxMs: 2000 },
      },
    },
    {
      id: '(e) openmetadata',
      name: '(e) GET /compat/openmetadata/…/logs/{fqn}/last on the run of 300,000 (2999 log lines among them)',
      request: {
        method: 'GET',
        path: `/compat/openmetadata/api/v1/services/ingestionPipelines/logs/${HUGE.fqn}/last`,
      },
    },
    {
      id: '(f)',
      name: `(f) GET /api/v1/pipelines/{fqn}/runs?limit=1000: ${fmt(META_RUNS)} runs with 60 KiB of \`meta\` each`,
      request: { method: 'GET', path: `/api/v1/pipelines/bench.meta/runs?limit=1000` },
    },
    {
      id: '(g)',
      name: '(g) GET /compat/freight/api/0/tasks/{runId}/log/?offset=0&limit=16777216 on a run with 16 MiB of log',
      request: {
        method: 'GET',
        path: `/compat/freight/api/0/tasks/${FREIGHT_RUN}/log/?offset=0&limit=16777216`,
      },
    },
    {
      id: '(h)',
      name: `(h) GET /api/v1/topics/{t}/stream?tail=100000 on a topic of ${fmt(TAIL_ENTRIES)} entries, read to its last entry`,
      request: {
        method: 'GET',
        path: '/api/v1/topics/bench-tail/stream?tail=100000',
        stream: { frames: TAIL_ENTRIES + 1, maxMs: REQUEST_TIMEOUT_MS },
      },
    },
  ];
}

/** How bad a result is: a crash is worst, then the longer of the block and the slowest poll. */
function severity(worst: Worst): number {
  return worst.crashed ? Infinity : Math.max(worst.blockMs ?? Infinity, worst.poll.slowestMs);
}

async function benchWorst(before: Build): Promise<void> {
  const started = performance.now();
  const bodies = {
    wide: wideBatch(),
    flood: floodBody(),
    log: Buffer.from(lines(Math.ceil((8 * MiB) / 60)).slice(0, 8 * MiB), 'utf8'),
    objects: objectsBatch(),
  };
  const specs = worstSpecs(bodies);
  const results: Record<Build['name'], Array<Worst | undefined>> = { before: [], after: [] };
  const idle: Record<Build['name'], Worst | undefined> = { before: undefined, after: undefined };
  for (const build of [AFTER, before]) {
    const subject = new Subject(build);
    try {
      const server = await subject.up();
      console.log(`# worst requests, ${build.name}`);
      await prepare(server.url, bodies.wide, bodies.log);
      await sleep(500);
      // The floor: the metric's own sampling interval and the scrapes, with no request.
      idle[build.name] = await measureWorst(subject, 'idle', { method: 'GET', path: '/healthz' });
      for (const spec of specs) {
        let worst: Worst | undefined;
        for (let attempt = 0; attempt < TRIES[build.name]; attempt += 1) {
          try {
            const result = await measureWorst(subject, spec.name, spec.request);
            console.log(`${build.name} ${spec.name}: ${describeWorst(result, spec.request)}`);
            if (!worst || severity(result) > severity(worst)) worst = result;
          } catch (error) {
            console.log(`${build.name} ${spec.name}: failed: ${(error as Error).message}`);
            await subject.restart();
          }
          await sleep(200);
        }
        results[build.name].push(worst);
      }
    } finally {
      await subject.close();
    }
  }
  const rows: Row[] = [];
  const idleRow = (w: Worst | undefined) =>
    w ? `block ${ms(w.blockMs ?? NaN)}; slowest /healthz ${ms(w.poll.slowestMs)}` : 'not measured';
  rows.push({
    name: 'idle: GET /healthz alone (the floor of both figures)',
    value: idleRow(idle.after),
    note: `before: ${idleRow(idle.before)}`,
  });
  const over: string[] = [];
  specs.forEach((spec, i) => {
    const after = results.after[i];
    const beforeWorst = results.before[i];
    if (!after || severity(after) > BUDGET_MS) {
      over.push(`${spec.id} ${after ? ms(severity(after)) : 'failed'}`);
    }
    rows.push({
      name: spec.name,
      value: after ? describeWorst(after, spec.request) : 'failed',
      ratio:
        after?.blockMs === undefined
          ? ''
          : `${(after.blockMs / BUDGET_MS).toFixed(2)} × (block / ${BUDGET_MS} ms)`,
      note: `before: ${beforeWorst ? describeWorst(beforeWorst, spec.request) : 'failed'}`,
    });
  });
  for (const row of rows) console.log(`${row.name}: ${row.value} — ${row.note}`);
  console.log(
    `${over.length} of ${specs.length} over ${BUDGET_MS} ms after the hardening: ${over.join(', ')}`,
  );
  const minutes = (performance.now() - started) / 60_000;
  writeSection(
    'worst-requests',
    'Worst requests',
    [
      `The longest the server's event loop is held by one request, for the largest or costliest requests a client can make. Each build is a real \`tailwater serve\` with its default settings: this checkout ("after", the figures) and the build before the hardening ("before", from \`BENCH_BEFORE\`, in the note). Each is first given the same data through its own API: a run of 300,000 entries (297 batches of 1000 small events and 2999 one-line log appends, written concurrently so the lines are spread through it), a run of one full batch of 1000 events of 64 KiB, ${fmt(META_RUNS)} runs with 60 KiB of \`meta\` each, a run with two 8 MiB log appends, and a topic of ${fmt(TAIL_ENTRIES)} entries of ~100 B. Then the requests go one at a time, each on a fresh connection from 127.0.0.1 with \`Connection: close\`, a body written in 64 KiB pieces and no more once an answer begins, each given ${REQUEST_TIMEOUT_MS / 1000} s; the after build gets each request ${TRIES.after} times and the worse try is shown, the before build once. A server that crashes or stalls past the timeout is restarted on its data for the next request. Budget (issue 11): ${BUDGET_MS} ms.`,
      '',
      `"Block" is \`tailwater_nodejs_eventloop_lag_max_seconds\` from the server's /metrics (prom-client's monitorEventLoopDelay maximum; each scrape resets it): scraped, then ${SETTLE_MS} ms left for the monitor to tick again (a reset forgets its last tick, and a block starting before the next would go unseen), then the request, then two scrapes 100 ms apart once its answer is in, the larger kept (a block that ends after the answer can show only in the second). The monitor measures the gap between its 10 ms timer turns, so an idle server reads ~10 ms (first row) and a block of B ms reads between B and B + 10 ms. "Slowest /healthz" is the slowest of the \`GET /healthz\` polls that a worker thread of the benchmark (an event loop of its own) made meanwhile from a second client address, 127.0.0.2, over one keep-alive connection, one every ~10 ms after the last was answered, from before the first scrape until after the last. The answer is its status and the time from sending the request to the end of the answer (for a stream, to the frames asked for). This part took ${minutes.toFixed(1)} min.`,
    ].join('\n'),
    rows,
  );
}

export async function benchHardening(): Promise<void> {
  const before = beforeBuild();
  if (PARTS.includes('throughput')) await benchThroughput(before);
  if (PARTS.includes('worst')) await benchWorst(before);
}
