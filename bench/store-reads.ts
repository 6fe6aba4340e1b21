/**
 * Store reads per second of one live run watched by 100 viewers, against the same run watched
 * by one, on one server: with one reader per stream (the Tailer) the two are the same.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { StreamServer, TailwaterProc, ViewerClient } from './procs.js';
import {
  machineBusy,
  openViewers,
  putJson,
  startStreamServer,
  startViewerClient,
} from './procs.js';
import { fmt, median, perSecond, writeSection } from './report.js';
import type { Row } from './report.js';
import type { LatencyReply } from './viewer-client.js';

const MANY = Number(process.env['BENCH_READS_VIEWERS'] ?? 100);
const RATE = 50;
const WARMUP = 25;
const SECONDS = Number(process.env['BENCH_READS_SECONDS'] ?? 4);
const ROUNDS = Number(process.env['BENCH_READS_ROUNDS'] ?? 2);
const PAD = 100;
const SHARED = 'tailwater_store_shared_reads_total';
const CATCH_UP = 'tailwater_store_catch_up_reads_total';
const STREAMS = 'tailwater_active_streams';

async function scrape(url: string): Promise<Record<string, number>> {
  const res = await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(10_000) });
  if (!res.ok) throw new Error(`/metrics: ${res.status}`);
  const text = await res.text();
  const values: Record<string, number> = {};
  for (const name of [SHARED, CATCH_UP, STREAMS]) {
    const line = text.split('\n').find((l) => l.startsWith(`${name} `));
    if (line === undefined) throw new Error(`no ${name} in /metrics`);
    values[name] = Number(line.slice(name.length + 1));
  }
  return values;
}

interface Window {
  viewers: number;
  shared: number;
  catchUp: number;
  appends: number;
  streams: number;
  p99: number;
}

/** One window of the load: appends on a schedule, the counters read before and after. */
async function window(
  producer: ViewerClient,
  stream: StreamServer,
  url: string,
  viewers: number,
): Promise<Window> {
  const before = await scrape(url);
  const started = performance.now();
  const measured = RATE * SECONDS;
  const timeoutMs = ((WARMUP + measured) / RATE) * 1000 + 15_000;
  const reply = await producer.ask<LatencyReply>(
    {
      op: 'latency',
      appendUrl: stream.appendUrl,
      rate: RATE,
      warmup: WARMUP,
      measured,
      pad: PAD,
      maxInFlight: 64,
      timeoutMs,
    },
    timeoutMs + 5000,
  );
  const elapsed = performance.now() - started;
  const after = await scrape(url);
  if (reply.failedAppends > 0) throw new Error(`appends failed: ${reply.firstFailure}`);
  return {
    viewers,
    shared: perSecond(after[SHARED]! - before[SHARED]!, elapsed),
    catchUp: perSecond(after[CATCH_UP]! - before[CATCH_UP]!, elapsed),
    appends: perSecond(reply.appends, elapsed),
    streams: after[STREAMS]!,
    p99: reply.fromSend.p99,
  };
}

export async function benchStoreReads(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'tailwater-bench-reads-'));
  const started = performance.now();
  let stream: StreamServer | undefined;
  let producer: ViewerClient | undefined;
  let crowd: ViewerClient | undefined;
  try {
    const busyBefore = await machineBusy();
    stream = await startStreamServer({ tailwater: 'bench.reads' }, dir);
    const url = (stream.server as TailwaterProc).url;
    await putJson(url + stream.path.replace(/\/stream$/, ''), { status: 'running' });
    // The producer's client holds the one viewer; the crowd's, the other MANY - 1, which it
    // closes between windows so the two loads alternate on one server and one stream.
    producer = await startViewerClient();
    crowd = await startViewerClient();
    await openViewers(producer, stream, 1, 'one viewer');
    const windows: Window[] = [];
    for (let round = 0; round < ROUNDS; round += 1) {
      windows.push(await window(producer, stream, url, 1));
      await openViewers(crowd, stream, MANY - 1, 'the crowd');
      windows.push(await window(producer, stream, url, MANY));
      await crowd.ask({ op: 'close' }, 10_000);
    }
    const reads = (w: Window) => w.shared + w.catchUp;
    const of = (viewers: number) => windows.filter((w) => w.viewers === viewers);
    const one = median(of(1).map(reads));
    const many = median(of(MANY).map(reads));
    const note = (list: Window[]) =>
      [
        `windows ${list.map((w) => fmt(reads(w))).join(', ')} reads/s`,
        `${fmt(median(list.map((w) => w.shared)))} shared + ${fmt(median(list.map((w) => w.catchUp)))} catch-up reads/s`,
        `${median(list.map((w) => reads(w) / w.appends)).toFixed(2)} reads per append`,
        `${fmt(median(list.map((w) => w.appends)))} appends/s`,
        `${list[0]!.streams} stream reader(s) (\`${STREAMS}\`)`,
        `append → received p99 ${median(list.map((w) => w.p99)).toFixed(1)} ms at the producer's viewer`,
      ].join('; ');
    const rows: Row[] = [
      {
        name: 'baseline: 1 viewer of a live run',
        value: `${fmt(one)} reads/s`,
        ratio: '1.00 ×',
        note: note(of(1)),
      },
      {
        name: `${MANY} viewers of the same run`,
        value: `${fmt(many)} reads/s`,
        ratio: `${(many / one).toFixed(2)} ×`,
        note: `${note(of(MANY))}; goal 1.0 × (one reader per stream)`,
      },
    ];
    for (const row of rows) console.log(`${row.name}: ${row.value} (${row.ratio}) — ${row.note}`);
    const minutes = (performance.now() - started) / 60_000;
    writeSection(
      'store-reads',
      'Store reads per viewer count',
      [
        `Store reads per second of one live run on a real \`tailwater serve\` (SQLite, the benchmarks' raised caps, no heartbeats) watched by ${MANY} SSE viewers, against the same run watched by 1, in windows that alternate on the same server and stream (1, ${MANY}, 1, ${MANY}, …; ${ROUNDS} each, the median). In each window one-event appends of ~250 B go to the run at ${RATE}/s on a fixed schedule (bench/latency.ts's load: ${WARMUP} then ${RATE * SECONDS}, ~${SECONDS + WARMUP / RATE} s) from the client process that holds the one viewer; a second client process opens the other ${MANY - 1} before a ${MANY}-viewer window (from the start of the run, so they catch up before it begins) and closes them after. Reads are the increase over the window of \`${SHARED}\` (the stream's one reader, the Tailer) plus \`${CATCH_UP}\` (viewers paging from the store) in the server's /metrics, per second of the window; these are the store's read counters the server has (each is one \`readEntries\` page). The reader also reads once per \`pollSeconds\` (2 s) on its own, as a fallback for the bus. Goal (issue #17): ${MANY} viewers ÷ 1 viewer = 1.0. The machine was ${(busyBefore * 100).toFixed(0)} % busy in the second before the server started (other work). This part took ${minutes.toFixed(1)} min. Run it alone with \`npm run bench -- store-reads\`.`,
      ].join('\n'),
      rows,
    );
  } finally {
    await crowd?.stop();
    await producer?.stop();
    await stream?.server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
