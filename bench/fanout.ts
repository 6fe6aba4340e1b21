/**
 * Fan-out: deliveries per second from one stream to 1,000 viewers of ~1 KiB entries, through a
 * real `tailwater serve`, against a bare node:net SSE writer (bare-sse-server.ts) measured in the
 * same run with the same viewers, producer and bodies; and, for reference, the bare writer with
 * one buffer per batch and a bare node:http server, which tell the floor and what node:http's
 * own per-write cost is.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BareOptions, BareProc, TailwaterProc, ViewerClient } from './procs.js';
import { cpuMs, openViewers, startStreamServer, startViewerClient } from './procs.js';
import { fmt, median, perSecond, writeSection } from './report.js';
import type { Row } from './report.js';
import type { FanoutReply } from './viewer-client.js';

const VIEWERS = Number(process.env['BENCH_FANOUT_VIEWERS'] ?? 1000);
const ENTRIES = Number(process.env['BENCH_FANOUT_ENTRIES'] ?? 1000);
const ROUNDS = Number(process.env['BENCH_FANOUT_ROUNDS'] ?? 5);
const BATCH = 100;
const WARMUP_ENTRIES = 200;
/** Pads each frame to 1 KiB: `id: 1234\nevent: progress\ndata: {"seq":…,"pad":"…"}}\n\n`. */
const PAD = 900;
const FANOUT_TIMEOUT_MS = 20_000;
/** What one measurement of measureFanout is, for other benchmarks' descriptions. */
export const FANOUT = { viewers: VIEWERS, entries: ENTRIES, batch: BATCH, warmup: WARMUP_ENTRIES };

export interface Measured {
  rates: number[];
  appendMs: number[];
  bytesPerEntry: number;
  /** CPU the server process used per 1,000 deliveries (user + system). */
  serverCpuPer1k: number;
  clientCpuPer1k: number;
}

export type Target = { name: string } & (
  | { bare: BareOptions }
  /** A real `tailwater serve`: this checkout's, or another build's `bin`, with `env` added. */
  | { tailwater: true; bin?: string; env?: Record<string, string> }
);

/**
 * One server (fresh processes; `dir` must not hold another Tailwater's data) with VIEWERS
 * viewers: a warm-up round, then `rounds` measured rounds.
 */
export async function measureFanout(
  target: Target,
  dir: string,
  rounds = ROUNDS,
): Promise<Measured> {
  let server: BareProc | TailwaterProc | undefined;
  let client: ViewerClient | undefined;
  try {
    const stream = await startStreamServer(
      'bare' in target
        ? { bare: target.bare }
        : { tailwater: 'bench.fanout', bin: target.bin, env: target.env },
      dir,
    );
    server = stream.server;
    const { appendUrl } = stream;
    client = await startViewerClient();
    await openViewers(client, stream, VIEWERS, target.name);
    const run = (entries: number) =>
      client!.ask<FanoutReply>(
        { op: 'fanout', appendUrl, entries, batch: BATCH, pad: PAD, timeoutMs: FANOUT_TIMEOUT_MS },
        FANOUT_TIMEOUT_MS + 5000,
      );
    await run(WARMUP_ENTRIES);
    const result: Measured = {
      rates: [],
      appendMs: [],
      bytesPerEntry: 0,
      serverCpuPer1k: 0,
      clientCpuPer1k: 0,
    };
    const serverCpu = cpuMs(server.pid);
    const clientCpu = cpuMs(client.pid);
    for (let round = 0; round < rounds; round += 1) {
      const reply = await run(ENTRIES);
      if (reply.complete !== reply.viewers) {
        throw new Error(
          `${target.name}: only ${reply.complete} of ${reply.viewers} viewers got every entry within ${FANOUT_TIMEOUT_MS} ms`,
        );
      }
      result.rates.push(perSecond(ENTRIES * reply.viewers, reply.ms));
      result.appendMs.push(reply.appendMs);
      result.bytesPerEntry = reply.bytesPerEntry;
    }
    const deliveries = (rounds * ENTRIES * VIEWERS) / 1000;
    result.serverCpuPer1k = (cpuMs(server.pid) - serverCpu) / deliveries;
    result.clientCpuPer1k = (cpuMs(client.pid) - clientCpu) / deliveries;
    return result;
  } finally {
    await client?.stop();
    await server?.stop();
  }
}

const TARGETS: Target[] = [
  { name: 'baseline: bare node:net SSE writer', bare: { sse: 'net', write: 'frame' } },
  {
    name: 'reference: bare node:net writer, one buffer per batch',
    bare: { sse: 'net', write: 'batch' },
  },
  {
    name: 'reference: bare node:http server, `res.write` per frame',
    bare: { sse: 'http', write: 'frame' },
  },
  { name: `Tailwater, 1 stream × ${fmt(VIEWERS)} viewers`, tailwater: true },
];

const NOTES: Record<string, string> = {
  'baseline: bare node:net SSE writer': 'each frame its own `socket.write`, corked per batch',
  'reference: bare node:net writer, one buffer per batch':
    'the batch concatenated once, one write per socket: the floor',
  'reference: bare node:http server, `res.write` per frame':
    'chunked encoding, as any node:http response without a length',
  [`Tailwater, 1 stream × ${fmt(VIEWERS)} viewers`]: `goal ≥ 60 % of the baseline`,
};

export async function benchFanout(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'tailwater-bench-fanout-'));
  try {
    const results: Array<{ target: Target; measured: Measured }> = [];
    for (const target of TARGETS) {
      results.push({ target, measured: await measureFanout(target, dir) });
    }
    const baseline = median(results[0]!.measured.rates);
    const rows: Row[] = results.map(({ target, measured }) => {
      const rate = median(measured.rates);
      const range = `${fmt(Math.min(...measured.rates))}–${fmt(Math.max(...measured.rates))}`;
      return {
        name: target.name,
        value: `${fmt(rate)} deliveries/s`,
        ratio: `${((rate / baseline) * 100).toFixed(0)} %`,
        note: [
          NOTES[target.name],
          `rounds ${range}`,
          `${Math.round(measured.bytesPerEntry)} B per entry on the wire`,
          `server CPU ${measured.serverCpuPer1k.toFixed(2)} ms, client ${measured.clientCpuPer1k.toFixed(2)} ms per 1k deliveries`,
          `appends answered ${fmt(median(measured.appendMs))} ms into a round`,
        ].join('; '),
      };
    });
    for (const row of rows) console.log(`${row.name}: ${row.value} (${row.ratio}) — ${row.note}`);
    writeSection(
      'fanout',
      'Fan-out',
      [
        `Deliveries per second (entries × viewers ÷ time from the first append sent to the last viewer holding every entry) for one run watched by ${fmt(VIEWERS)} SSE viewers: ${fmt(ENTRIES)} entries of ~1 KiB per round, appended as ${ENTRIES / BATCH} sequential batches of ${BATCH} (\`POST …/events\`, each sent once the previous one is answered). The median of ${ROUNDS} rounds, after a warm-up round of ${WARMUP_ENTRIES} entries; each server gets fresh processes. Goal (issue #3): ≥ 60 % of the baseline.`,
        '',
        'Each measurement runs two processes that share the machine’s cores: the server, and one client process that holds every viewer as a raw `node:net` socket, counts complete frames per connection by their `\\n\\n` (no parsing) and is also the producer. Tailwater is a real `tailwater serve` with default settings except raised connection caps and no heartbeats. The baseline and references are bench/bare-sse-server.ts, with no store and no framework: it takes the same append bodies over HTTP, builds each frame once in the same format and writes it to every socket before answering. CPU is user + system time of each process over the measured rounds (loopback TCP work done in softirq is not in it).',
      ].join('\n'),
      rows,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
