/**
 * Fan-out: deliveries per second from one stream to 1,000 viewers of ~1 KiB entries, through a
 * real `tailwater serve`, against a bare node:net SSE writer (bare-sse-server.ts) measured in the
 * same run with the same viewers, producer and bodies; and, for reference, the bare writer with
 * one buffer per batch and a bare node:http server, which tell the floor and what node:http's
 * own per-write cost is.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BareOptions, Proc, StreamServer, ViewerClient } from './procs.js';
import type { PeerTarget } from './peer-streams.js';
import { startPeerStream } from './peer-streams.js';
import {
  cpuMs,
  machineBusy,
  machineCpuMs,
  openViewers,
  startStreamServer,
  startViewerClient,
  treeCpuMs,
} from './procs.js';
import { fmt, median, perSecond, writeSection } from './report.js';
import type { Row } from './report.js';
import type { FanoutReply, LatencyReply, Percentiles } from './viewer-client.js';

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
  /** CPU the server's processes used per 1,000 deliveries (user + system, every worker). */
  serverCpuPer1k: number;
  clientCpuPer1k: number;
  /** Pushpin: viewers that had their first frame but were never subscribed, opened again. */
  reopened: number;
}

/** How many viewers and entries a measurement has (default: the 1,000-viewer figure's). */
export interface Shape {
  viewers: number;
  entries: number;
}

export type Target = { name: string } & (
  | { bare: BareOptions }
  /** A real `tailwater serve`: this checkout's, or another build's `bin`, with `env` added. */
  | {
      tailwater: true;
      bin?: string;
      env?: Record<string, string>;
      /** Each entry its own append, a batch's all at once (as nchan is fed). */
      oneEach?: boolean;
    }
  /** nchan or Pushpin (peer-streams.ts), published to one entry per message. */
  | { peer: PeerTarget }
);

/**
 * One server (fresh processes; `dir` must not hold another Tailwater's data) with
 * `shape.viewers` viewers: a warm-up round, then `rounds` measured rounds; then `after`, if
 * given, on the same server and viewers before they are stopped.
 */
export async function measureFanout(
  target: Target,
  dir: string,
  rounds = ROUNDS,
  shape: Shape = { viewers: VIEWERS, entries: ENTRIES },
  after?: (client: ViewerClient, stream: StreamServer) => Promise<void>,
): Promise<Measured> {
  const { viewers, entries } = shape;
  // A round moves viewers × entries × ~1 KiB: at 10,000 viewers that is ~5 GB a round. Given
  // 100,000 deliveries a second at least (nchan at 10,000 viewers needs more than 500,000's).
  const timeoutMs = FANOUT_TIMEOUT_MS + (viewers * entries) / 100;
  let server: Proc | undefined;
  let client: ViewerClient | undefined;
  try {
    const stream =
      'peer' in target
        ? await startPeerStream(target.peer, dir)
        : await startStreamServer(
            'bare' in target
              ? { bare: target.bare }
              : { tailwater: 'bench.fanout', bin: target.bin, env: target.env },
            dir,
          );
    server = stream.server;
    const { appendUrl, peer, queueLimit } = stream;
    client = await startViewerClient();
    const reopened = await openViewers(client, stream, viewers, target.name);
    const batch = queueLimit?.batch ?? BATCH;
    const ahead = queueLimit?.ahead;
    const oneEach = 'tailwater' in target ? target.oneEach : undefined;
    const run = (count: number) =>
      client!.ask<FanoutReply>(
        {
          op: 'fanout',
          appendUrl,
          peer,
          oneEach,
          entries: count,
          batch,
          ahead,
          pad: PAD,
          timeoutMs,
        },
        timeoutMs + 5000,
      );
    await run(WARMUP_ENTRIES);
    const result: Measured = {
      rates: [],
      appendMs: [],
      bytesPerEntry: 0,
      serverCpuPer1k: 0,
      clientCpuPer1k: 0,
      reopened,
    };
    const serverCpu = treeCpuMs(server.pid);
    const clientCpu = cpuMs(client.pid);
    for (let round = 0; round < rounds; round += 1) {
      const reply = await run(entries);
      if (reply.complete !== reply.viewers) {
        throw new Error(
          `${target.name}: only ${reply.complete} of ${reply.viewers} viewers got every entry within ${timeoutMs} ms (the fewest frames a viewer held: ${reply.fewestFrames} of ${reply.frames})`,
        );
      }
      result.rates.push(perSecond(entries * reply.viewers, reply.ms));
      result.appendMs.push(reply.appendMs);
      result.bytesPerEntry = reply.bytesPerEntry;
    }
    const deliveries = (rounds * entries * viewers) / 1000;
    result.serverCpuPer1k = (treeCpuMs(server.pid) - serverCpu) / deliveries;
    result.clientCpuPer1k = (cpuMs(client.pid) - clientCpu) / deliveries;
    await after?.(client, stream);
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

const VIEWERS_10K = Number(process.env['BENCH_FANOUT_10K_VIEWERS'] ?? 10_000);
/** Entries per round at 10,000 viewers: ~5 GB through loopback a round. */
const ENTRIES_10K = Number(process.env['BENCH_FANOUT_10K_ENTRIES'] ?? 500);
const ROUNDS_10K = Number(process.env['BENCH_FANOUT_10K_ROUNDS'] ?? 3);
/** The join: one-entry appends of ~250 B at this rate, a viewer joining halfway. */
const JOIN_RATE = Number(process.env['BENCH_FANOUT_10K_JOIN_RATE'] ?? 10);
const JOIN_WARMUP = 10;
const JOIN_MEASURED = 120;
const JOIN_PAD = 100;
const GOAL_10K = 0.9;

/**
 * Fan-out at 10,000 viewers of one stream, against the bare writer with one buffer per batch
 * (the floor), and whether a viewer joining while they are live stalls them.
 */
export async function benchFanout10k(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'tailwater-bench-fanout10k-'));
  const started = performance.now();
  try {
    const busyBefore = await machineBusy();
    const machineBefore = machineCpuMs();
    const shape = { viewers: VIEWERS_10K, entries: ENTRIES_10K };
    const name = `Tailwater, 1 stream × ${fmt(VIEWERS_10K)} viewers`;
    const targets: Target[] = [
      {
        name: 'baseline: bare node:net writer, one buffer per batch',
        bare: { sse: 'net', write: 'batch' },
      },
      {
        name: 'reference: bare node:net writer, each frame its own `socket.write`',
        bare: { sse: 'net', write: 'frame' },
      },
      { name, tailwater: true },
    ];
    let joined: LatencyReply | undefined;
    const measureJoin = async (client: ViewerClient, stream: StreamServer) => {
      const timeoutMs = ((JOIN_WARMUP + JOIN_MEASURED) / JOIN_RATE) * 1000 + 30_000;
      joined = await client.ask<LatencyReply>(
        {
          op: 'latency',
          appendUrl: stream.appendUrl,
          rate: JOIN_RATE,
          warmup: JOIN_WARMUP,
          measured: JOIN_MEASURED,
          pad: JOIN_PAD,
          maxInFlight: 64,
          timeoutMs,
          join: { port: stream.port, path: stream.path, atIndex: JOIN_WARMUP + JOIN_MEASURED / 2 },
        },
        timeoutMs + 5000,
      );
    };
    const results: Array<{ target: Target; measured: Measured }> = [];
    for (const target of targets) {
      const after = 'tailwater' in target ? measureJoin : undefined;
      results.push({
        target,
        measured: await measureFanout(target, dir, ROUNDS_10K, shape, after),
      });
    }
    const machineAfter = machineCpuMs();
    const busyDuring =
      (machineAfter.busy - machineBefore.busy) /
      Math.max(1, machineAfter.total - machineBefore.total);
    const baseline = median(results[0]!.measured.rates);
    const rows: Row[] = results.map(({ target, measured }) => {
      const rate = median(measured.rates);
      const ratio = rate / baseline;
      return {
        name: target.name,
        value: `${fmt(rate)} deliveries/s`,
        ratio: `${(ratio * 100).toFixed(0)} %`,
        note: [
          `rounds ${fmt(Math.min(...measured.rates))}–${fmt(Math.max(...measured.rates))}`,
          `${Math.round(measured.bytesPerEntry)} B per entry on the wire`,
          `server CPU ${measured.serverCpuPer1k.toFixed(2)} ms, client ${measured.clientCpuPer1k.toFixed(2)} ms per 1k deliveries`,
          `appends answered ${fmt(median(measured.appendMs))} ms into a round`,
          ...('tailwater' in target
            ? [
                `goal ≥ ${GOAL_10K * 100} % of the baseline: ${ratio >= GOAL_10K ? 'met' : 'not met'}`,
              ]
            : []),
        ].join('; '),
      };
    });
    const j = joined?.join;
    if (!joined || !j) throw new Error('fanout-10k: no join measured');
    const ms = (n: number) => `${n.toFixed(1)} ms`;
    const triple = (p: Percentiles) => `${ms(p.p50)} / ${ms(p.p99)} / ${ms(p.max)}`;
    rows.push(
      {
        name: `join — baseline: the ${fmt(joined.viewers)} live viewers before the join, sent → received, p50 / p99 / max`,
        value: triple(j.before),
        ratio: '1.0 ×',
        note: `${j.beforeEntries} entries; longest gap between two arrivals at one viewer ${ms(j.gapBefore)} (the schedule: ${ms(1000 / JOIN_RATE)})`,
      },
      {
        name: `join — the live viewers from the join until the joiner had caught up (≥ 1 s), sent → received`,
        value: triple(j.during),
        ratio: `${(j.during.p99 / j.before.p99).toFixed(1)} × (p99)`,
        note: `${j.duringEntries} entries in a ${ms(j.windowMs)} window; longest gap between two arrivals at one viewer ${ms(j.gapDuring)} (${(j.gapDuring / j.gapBefore).toFixed(1)} × the longest before)`,
      },
      {
        name: 'join — the joiner (from seq 0): connect → `retry:` frame / first entry / every entry appended before it came',
        value: `${ms(j.firstFrameMs)} / ${ms(j.firstEntryMs)} / ${ms(j.caughtUpMs)}`,
        note: `${j.failure ? `${j.failure}; ` : ''}${fmt(j.caughtUpSeq)} entries behind when it came (the fan-out rounds' ~1 KiB entries and this load's ~250 B ones); the whole load: ${joined.sendRate.toFixed(0)} appends/s sent, ${joined.missing.toLocaleString('en-US')} deliveries not seen in time`,
      },
    );
    for (const row of rows)
      console.log(`${row.name}: ${row.value} (${row.ratio ?? ''}) — ${row.note}`);
    const minutes = (performance.now() - started) / 60_000;
    writeSection(
      'fanout-10k',
      'Fan-out at 10,000 viewers',
      [
        `bench/fanout.ts's measurement (above) at ${fmt(VIEWERS_10K)} SSE viewers of one run: ${fmt(ENTRIES_10K)} entries of ~1 KiB per round, appended as ${ENTRIES_10K / BATCH} sequential batches of ${BATCH}, the median of ${ROUNDS_10K} rounds after a warm-up round of ${WARMUP_ENTRIES}; fresh processes for each server; deliveries/s = entries × viewers ÷ time from the first append sent to the last viewer holding every entry. The baseline is the floor: bench/bare-sse-server.ts with \`BARE_WRITE=batch\`, each batch concatenated once and written to every socket as one buffer, as Tailwater's native dialect does. Goal (issue #17): ≥ ${GOAL_10K * 100} % of it. The caps are raised for the benchmark only (STREAM_ENV in bench/procs.ts: 20,000 connections and subscribers per stream); every process is started with the open-file limit raised as far as the machine lets (here the hard limit, ${hardOpenFiles()}), since the server and the client each hold 10,000 sockets.`,
        '',
        `Then, on the same Tailwater server with the same ${fmt(VIEWERS_10K)} viewers live, a join: one-entry appends of ~250 B at ${JOIN_RATE}/s, open-loop (bench/latency.ts's load), ${JOIN_WARMUP} of warm-up then ${JOIN_MEASURED}, and when append ${JOIN_WARMUP + JOIN_MEASURED / 2} is sent one more viewer opens the stream from the start (no cursor), so it pages through the whole run from the store while the others stay live. The live viewers' latency and longest gap between two consecutive arrivals at any one viewer are split at the join: entries sent before it (the baseline) and entries sent from it until the joiner held every entry appended before it came, and at least 1 s. Arrival times are when the one client process read each socket, so at 10,000 sockets they include its own turn-taking. The machine was ${(busyBefore * 100).toFixed(0)} % busy in the second before the first measurement (other work), ${(busyDuring * 100).toFixed(0)} % over the whole part, this benchmark included; 2 cores for the server, the client and that work. This part took ${minutes.toFixed(1)} min. Run it alone with \`npm run bench -- fanout-10k\`.`,
      ].join('\n'),
      rows,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The open-file limit a benchmark process gets (procs.ts's spawnNode): 65536, or the hard limit. */
function hardOpenFiles(): string {
  const hard = execFileSync('bash', ['-c', 'ulimit -Hn'], { encoding: 'utf8' }).trim();
  return hard === 'unlimited' || Number(hard) >= 65536 ? '65,536' : fmt(Number(hard));
}
