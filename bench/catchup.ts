/**
 * Catch-up: one SSE viewer reading a finished run of 1 GB of log from the start, in MB/s of log
 * text, against `GET …/log.txt` of the same run from the same server and `cat` of the same
 * text in a file, all measured in the same run and read by the same byte-counting consumer.
 */
import { spawn } from 'node:child_process';
import { closeSync, cpSync, mkdtempSync, openSync, rmSync, statfsSync, writeSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TailwaterProc } from './procs.js';
import { cpuMs, machineBusy, putJson, startTailwater } from './procs.js';
import { fmt, median, writeSection } from './report.js';
import type { Row } from './report.js';

const MiB = 1024 * 1024;
const TOTAL_BYTES = Number(process.env['BENCH_CATCHUP_BYTES'] ?? 1024 * MiB);
/** Under the server's default `maxAppendBytes` (8 MiB) by less than a line. */
const BODY_BYTES = 8 * MiB - 128;
const LINE_BYTES = 100;
const ROUNDS = Number(process.env['BENCH_CATCHUP_ROUNDS'] ?? 3);
/** A read that takes longer than this fails the benchmark (1 GB at under ~10 MB/s). */
const READ_TIMEOUT_MS = 120_000;
/**
 * The viewer reads the whole run in one connection: the stream's byte limit (default 32 MiB,
 * after which a viewer is ended with `maxBytes` and reconnects by Last-Event-ID) is raised
 * past the run's size on the wire, so the figure is the engine's paging and not reconnects.
 */
const MAX_STREAM_BYTES = 8 * 1024 * MiB;
const GOAL = 0.8;
/** Node flags for the server, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof` to profile it. */
const SERVER_FLAGS = (process.env['BENCH_CATCHUP_NODE_FLAGS'] ?? '').split(' ').filter(Boolean);
const RUN = '/api/v1/pipelines/bench.catchup/runs/r1';
const STREAM_LIMIT = { TAILWATER_MAX_STREAM_BYTES: String(MAX_STREAM_BYTES) };
/** Sealing 1 GB (~64 segments) on an idle server: past this the benchmark fails. */
const SEAL_TIMEOUT_MS = 900_000;
const SEALED_GOAL = 1;

interface Read {
  ms: number;
  /** Bytes received, headers and framing included. */
  wireBytes: number;
  /** The last bytes received, to check how a stream ended. */
  tail: string;
  /** CPU the server used meanwhile (user + system), if a server was read. */
  serverCpuMs: number;
}

/** ~100 B lines, each different, like a job's log: a time, a level, a counter, padding. */
function body(index: number, time: string): string {
  const lines: string[] = [];
  let bytes = 0;
  for (let n = 0; bytes + LINE_BYTES <= BODY_BYTES; n += 1) {
    const head = `${time} INFO  load batch=${index} line=${n} rows=${(n * 7919) % 100_000} `;
    const line = `${head.padEnd(LINE_BYTES - 1, 'x')}\n`;
    lines.push(line);
    bytes += line.length;
  }
  return lines.join('');
}

/** Waits until the server's search index holds every entry (`/metrics`), at most 10 minutes. */
async function searchIndexCaughtUp(server: TailwaterProc): Promise<void> {
  const deadline = performance.now() + 600_000;
  for (;;) {
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    if (/^tailwater_search_index_pending_entries 0$/m.test(metrics)) return;
    if (performance.now() > deadline) throw new Error('catchup: the search index never caught up');
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

/** Waits until the server's hot store holds no log text (`/metrics`): the run is sealed. */
async function sealed(server: TailwaterProc): Promise<number> {
  const started = performance.now();
  for (;;) {
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    const hot = /^tailwater_storage_hot_log_bytes (\S+)$/m.exec(metrics)?.[1];
    const sealedBytes = /^tailwater_storage_sealed_bytes (\S+)$/m.exec(metrics)?.[1];
    if (hot === '0' && Number(sealedBytes) > 0) return Number(sealedBytes);
    if (performance.now() - started > SEAL_TIMEOUT_MS) {
      throw new Error(`catchup: the run was not sealed in ${SEAL_TIMEOUT_MS / 1000} s`);
    }
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

/** Counts what comes back on a raw socket for one request until the server closes it. */
function readSocket(port: number, request: string, server: TailwaterProc): Promise<Read> {
  return new Promise((resolve, reject) => {
    const cpuBefore = cpuMs(server.pid);
    const started = performance.now();
    let wireBytes = 0;
    let tail = '';
    const socket = net.connect({
      host: '127.0.0.1',
      port,
      // One buffer for every read, as bench/viewer-client.ts does: the consumer costs little.
      onread: {
        buffer: Buffer.alloc(1024 * 1024),
        callback: (bytes: number, buffer: Uint8Array) => {
          wireBytes += bytes;
          if (bytes >= 512) {
            tail = Buffer.from(buffer.buffer, buffer.byteOffset + bytes - 512, 512).toString();
          } else {
            tail = (tail + Buffer.from(buffer.buffer, buffer.byteOffset, bytes).toString()).slice(
              -512,
            );
          }
          return true;
        },
      },
    });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no end within ${READ_TIMEOUT_MS} ms (${wireBytes} bytes read)`));
    }, READ_TIMEOUT_MS);
    socket.on('connect', () => socket.write(request));
    socket.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({
        ms: performance.now() - started,
        wireBytes,
        tail,
        serverCpuMs: cpuMs(server.pid) - cpuBefore,
      });
    });
  });
}

/** `cat` of the file into a pipe that this process reads and counts. */
function readCat(file: string): Promise<Read> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    let wireBytes = 0;
    const child = spawn('cat', [file], { stdio: ['ignore', 'pipe', 'inherit'] });
    child.stdout.on('data', (chunk: Buffer) => {
      wireBytes += chunk.length;
    });
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) reject(new Error(`cat exited ${code}`));
      else resolve({ ms: performance.now() - started, wireBytes, tail: '', serverCpuMs: 0 });
    });
  });
}

type Kind = 'cat' | 'text' | 'sse' | 'sealedText' | 'sealedSse';

/**
 * One uncounted read of each kind (the page cache then holds the data), then the rounds: the
 * hot kinds from the hot server, the sealed ones from the sealed server, both up all along.
 */
async function readRounds(
  hot: TailwaterProc,
  sealedServer: TailwaterProc,
  file: string,
  order: Kind[],
): Promise<Record<Kind, Read[]>> {
  const requests = (server: TailwaterProc) => {
    const host = `Host: 127.0.0.1:${server.port}\r\n`;
    return {
      sse: `GET ${RUN}/stream HTTP/1.1\r\n${host}Accept: text/event-stream\r\n\r\n`,
      text: `GET ${RUN}/log.txt HTTP/1.1\r\n${host}Connection: close\r\n\r\n`,
    };
  };
  const read = (server: TailwaterProc, what: 'sse' | 'text') =>
    readSocket(server.port, requests(server)[what], server);
  const measure: Record<Kind, () => Promise<Read>> = {
    cat: () => readCat(file),
    text: () => read(hot, 'text'),
    sse: () => read(hot, 'sse'),
    sealedText: () => read(sealedServer, 'text'),
    sealedSse: () => read(sealedServer, 'sse'),
  };
  const reads: Record<Kind, Read[]> = { cat: [], text: [], sse: [], sealedText: [], sealedSse: [] };
  for (const kind of order) await measure[kind]();
  // Rounds alternate the order, so drift on the shared machine falls on each alike.
  for (let round = 0; round < ROUNDS; round += 1) {
    for (const kind of round % 2 === 0 ? order : [...order].reverse()) {
      const read = await measure[kind]();
      console.log(`catchup ${kind}: ${fmt(read.ms)} ms, ${fmt(read.wireBytes / MiB)} MiB`);
      reads[kind].push(read);
    }
  }
  return reads;
}

export async function benchCatchup(): Promise<void> {
  const started = performance.now();
  const free = statfsSync(tmpdir());
  const freeBytes = free.bavail * free.bsize;
  // The .db file and its WAL, their copy to seal, and the text file each hold about the run's size.
  if (freeBytes < TOTAL_BYTES * 6) {
    throw new Error(
      `catchup: ${fmt(freeBytes / MiB)} MiB free in ${tmpdir()}, it needs ${fmt((TOTAL_BYTES * 6) / MiB)}`,
    );
  }
  const dir = mkdtempSync(join(tmpdir(), 'tailwater-bench-catchup-'));
  let server: TailwaterProc | undefined;
  let hot: TailwaterProc | undefined;
  try {
    const busyBefore = await machineBusy();
    // Hot first, with sealing off: today's store, read before any of it is sealed.
    server = await startTailwater(
      join(dir, 'data'),
      { ...STREAM_LIMIT, TAILWATER_SEGMENTS: 'off' },
      SERVER_FLAGS,
    );
    const url = `${server.url}${RUN}`;
    await putJson(url, { status: 'running' });
    // The run through the API, the same text into a file for `cat`.
    const file = join(dir, 'log.txt');
    const fd = openSync(file, 'w');
    let logBytes = 0;
    let appendMs = 0;
    const time = new Date().toISOString();
    for (let index = 0; logBytes < TOTAL_BYTES; index += 1) {
      const text = body(index, time);
      const bytes = Buffer.from(text, 'utf8');
      writeSync(fd, bytes);
      const sent = performance.now();
      const res = await fetch(`${url}/logs`, {
        method: 'POST',
        headers: { 'content-type': 'text/plain; charset=utf-8' },
        body: bytes,
        signal: AbortSignal.timeout(60_000),
      });
      if (!res.ok) throw new Error(`POST logs: ${res.status} ${await res.text()}`);
      await res.arrayBuffer();
      appendMs += performance.now() - sent;
      logBytes += bytes.length;
    }
    closeSync(fd);
    await putJson(url, { status: 'success' });
    const appends = Math.ceil(logBytes / BODY_BYTES);
    // The search indexer reads and indexes the new run on the server's own event loop: reads
    // measured while it runs would share the server with it, each round differently.
    const indexStart = performance.now();
    await searchIndexCaughtUp(server);
    const indexSeconds = (performance.now() - indexStart) / 1000;

    // Then a copy of the data for a server that seals the run at once (docs/STORAGE.md), and
    // this one back on the hot original: every kind is read in the same rounds, so the minutes
    // of sealing between do not put a different machine under the hot and the sealed reads.
    await server.stop();
    server = undefined;
    cpSync(join(dir, 'data'), join(dir, 'sealed'), { recursive: true });
    hot = await startTailwater(
      join(dir, 'data'),
      { ...STREAM_LIMIT, TAILWATER_SEGMENTS: 'off' },
      SERVER_FLAGS,
    );
    server = await startTailwater(
      join(dir, 'sealed'),
      { ...STREAM_LIMIT, TAILWATER_SEAL_AFTER_SECONDS: '0', TAILWATER_SEAL_GRACE_SECONDS: '2' },
      SERVER_FLAGS,
    );
    const sealStart = performance.now();
    const sealedBytes = await sealed(server);
    const sealSeconds = (performance.now() - sealStart) / 1000;
    const reads = await readRounds(hot, server, file, [
      'cat',
      'text',
      'sse',
      'sealedText',
      'sealedSse',
    ]);

    for (const read of [...reads.text, ...reads.sealedText]) {
      if (read.wireBytes < logBytes) throw new Error(`log.txt: ${read.wireBytes} of ${logBytes} B`);
    }
    for (const read of [...reads.sse, ...reads.sealedSse]) {
      // One connection from seq 0 to the end: no `maxBytes` end, no reconnect.
      if (!/event: end\ndata: \{"reason":"runFinished"/.test(read.tail)) {
        throw new Error(`the stream did not end with runFinished: …${read.tail.slice(-200)}`);
      }
    }
    const rate = (read: Read) => logBytes / MiB / (read.ms / 1000);
    const rates = (kind: Kind) => reads[kind].map(rate);
    const cat = median(rates('cat'));
    const text = median(rates('text'));
    const sse = median(rates('sse'));
    const sealedText = median(rates('sealedText'));
    const sealedSse = median(rates('sealedSse'));
    const range = (kind: Kind) =>
      `rounds ${fmt(Math.min(...rates(kind)))}–${fmt(Math.max(...rates(kind)))} MiB/s`;
    const wire = (kind: Kind) =>
      `${(median(reads[kind].map((r) => r.wireBytes)) / logBytes).toFixed(3)} × the text on the wire`;
    const cpu = (kind: Kind) =>
      `server CPU ${fmt(median(reads[kind].map((r) => r.serverCpuMs)) / (logBytes / MiB))} ms per MiB (${fmt(median(reads[kind].map((r) => (r.serverCpuMs / r.ms) * 100)))} % of a core)`;
    const seconds = (kind: Kind) => `${(median(reads[kind].map((r) => r.ms)) / 1000).toFixed(2)} s`;
    /** What every read's note says: its time, the rounds' spread, the wire, the server's CPU. */
    const facts = (kind: Kind) => [seconds(kind), range(kind), wire(kind), cpu(kind)];
    const rows: Row[] = [
      {
        name: '`GET …/log.txt` of the run (baseline)',
        value: `${fmt(text)} MiB/s`,
        ratio: '100 %',
        note: facts('text').join('; '),
      },
      {
        name: 'one SSE viewer, `GET …/stream` from the start to `end`',
        value: `${fmt(sse)} MiB/s`,
        ratio: `${((sse / text) * 100).toFixed(0)} %`,
        note: [
          ...facts('sse'),
          `${((sse / cat) * 100).toFixed(1)} % of \`cat\``,
          `goal ≥ ${GOAL * 100} % of log.txt: ${sse / text >= GOAL ? 'met' : 'not met'}`,
        ].join('; '),
      },
      {
        name: 'one SSE viewer of the run once sealed',
        value: `${fmt(sealedSse)} MiB/s`,
        ratio: `${((sealedSse / text) * 100).toFixed(0)} %`,
        note: [
          ...facts('sealedSse'),
          `${((sealedSse / sse) * 100).toFixed(0)} % of the hot stream`,
          `goal ≥ ${SEALED_GOAL * 100} % of the hot log.txt (issue #28): ${sealedSse / text >= SEALED_GOAL ? 'met' : 'not met'}`,
        ].join('; '),
      },
      {
        name: '`GET …/log.txt` of the run once sealed',
        value: `${fmt(sealedText)} MiB/s`,
        ratio: `${((sealedText / text) * 100).toFixed(0)} %`,
        note: facts('sealedText').join('; '),
      },
      {
        name: 'reference: `cat` of the same text in a file, into a pipe',
        value: `${fmt(cat)} MiB/s`,
        ratio: `${((cat / text) * 100).toFixed(0)} %`,
        note: [seconds('cat'), range('cat'), 'from the page cache'].join('; '),
      },
    ];
    for (const row of rows) console.log(`${row.name}: ${row.value} (${row.ratio}) — ${row.note}`);
    const minutes = (performance.now() - started) / 60_000;
    writeSection(
      'catchup',
      'Catch-up of a finished run',
      [
        `One viewer reading a finished run of ${fmt(logBytes / MiB)} MiB of log text (${fmt(logBytes / LINE_BYTES)} lines of ${LINE_BYTES} B, each different) from the start, in MiB of log text per second, on the SQLite store (the default) of a real \`tailwater serve\`. The run is made through the API: \`PUT …/runs/r1\` running, ${appends} \`POST …/logs\` of text/plain bodies of ~8 MiB (stored as chunks of ≤ 64 KiB, \`maxEventBytes\`; ${fmt(logBytes / MiB / (appendMs / 1000))} MiB/s of appends), then \`PUT\` success. Baseline: \`GET …/log.txt\` of the same run from the hot store. Reference: \`cat\` of a file holding the same text. Each is read by one consumer in the benchmark's process that counts bytes and nothing else (a raw \`node:net\` socket for the two requests, a pipe for \`cat\`), until the server closes the connection (the stream after its \`end\` frame) or \`cat\` exits. One read of each first, not counted, so the page cache holds the file and the database; then ${ROUNDS} rounds, the order alternating; the median. Goal (issue #17): the SSE viewer ≥ ${GOAL * 100} % of log.txt's MiB/s.`,
        '',
        `The hot reads come from a server with sealing off (\`TAILWATER_SEGMENTS=off\`: today's store). Once the run is made and indexed, that server stops, its data directory is copied, and a second server on the copy seals the run at once (\`TAILWATER_SEAL_AFTER_SECONDS=0\`, \`TAILWATER_SEAL_GRACE_SECONDS=2\`, default segments: 16 MiB, 1 MiB blocks, zstd 9, under the data directory) while the first is back on the original; once \`/metrics\` shows no hot log text (${sealSeconds.toFixed(0)} s: the run is ${fmt(sealedBytes / MiB)} MiB of segments, ${(sealedBytes / logBytes).toFixed(3)} × its text), every kind is read in the same rounds, hot from the one and sealed from the other, so the sealed reads are measured on the same machine state as their baseline. Goal (issue #28): the sealed run's SSE viewer ≥ ${SEALED_GOAL * 100} % of the hot log.txt.`,
        '',
        `The stream's byte limit \`maxStreamBytes\` (default 32 MiB, past which a viewer gets \`end\` with \`maxBytes\` and reconnects from its Last-Event-ID) is raised to ${fmt(MAX_STREAM_BYTES / MiB)} MiB for this benchmark, so the viewer reads the run in one connection; the benchmark checks that each stream ended with \`runFinished\`. The machine was ${(busyBefore * 100).toFixed(0)} % busy in the second before the server started (other work: 2 cores shared with it). Reads begin once the server's search index has caught up with the run (it took ${indexSeconds.toFixed(0)} s), so no round shares the server with the indexer. This part took ${minutes.toFixed(1)} min, most of it making, indexing and sealing the run; its data is deleted after. Run it alone with \`npm run bench -- catchup\`; to see where the server's time goes, with \`BENCH_CATCHUP_NODE_FLAGS='--cpu-prof --cpu-prof-dir=<dir>'\` (and \`BENCH_CATCHUP_BYTES\` smaller).`,
      ].join('\n'),
      rows,
    );
  } finally {
    await Promise.all([server?.stop(), hot?.stop()]);
    rmSync(dir, { recursive: true, force: true });
  }
}
