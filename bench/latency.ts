/**
 * Latency: append → received, at 1,000 viewers of one run while a producer appends one entry
 * per request on a fixed schedule (200/s, the load, and 50/s, below saturation on a
 * small machine). The producer and the viewers share one process and clock. Against the bare
 * node:net SSE writer (bare-sse-server.ts) fed the same requests.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { PeerTarget } from './peer-streams.js';
import { startPeerStream } from './peer-streams.js';
import type { BareOptions, Proc, ViewerClient } from './procs.js';
import {
  cpuMs,
  machineCpuMs,
  netDrops,
  openViewers,
  startStreamServer,
  startViewerClient,
  treeCpuMs,
} from './procs.js';
import { bucketsSince, histogramBuckets, quantile } from './prom-histogram.js';
import { fmt, writeSection } from './report.js';
import type { Row } from './report.js';
import type { LatencyReply, Percentiles } from './viewer-client.js';

export const VIEWERS = Number(process.env['BENCH_LATENCY_VIEWERS'] ?? 1000);
/** Appends per second, run in this order on the same connections: the light load first. */
const RATES = (process.env['BENCH_LATENCY_RATES'] ?? '50,200').split(',').map(Number);
const SECONDS = Number(process.env['BENCH_LATENCY_SECONDS'] ?? 5);
/**
 * Rounds of (coalescing bare writer, Tailwater), each pair on fresh processes, in alternating
 * order: with the server and the client each near a full core of two, one pair's p99 ratio moves
 * by ±15 % from run to run, so the ratio reported is the median round's.
 */
const ROUNDS = Number(process.env['BENCH_LATENCY_ROUNDS'] ?? 3);
const WARMUP_SECONDS = 0.5;
const MAX_IN_FLIGHT = 64;
/** Pads each frame to about 250 B, a few log lines' worth. */
const PAD = 100;
const GOAL_P99_MS = 5;
const GOAL_RATIO = 1.1;

/** One pair of measurements, each on processes of its own. */
interface Round {
  coalescing: Measured[];
  tailwater: Measured[];
}

export interface Measured {
  rate: number;
  reply: LatencyReply;
  /** CPU over the run, as a share of one core. */
  serverCpu: number;
  clientCpu: number;
  /** Share of the whole machine (every core) that was busy. */
  machineBusy: number;
  retransmits: number;
  /** Pushpin: viewers never subscribed after their first frame, opened again. */
  reopened: number;
  /** Tailwater only: its own timing of each batch it fanned out, by phase (/metrics). */
  phases?: Record<Phase, { p50?: number | undefined; p99?: number | undefined }>;
}

const PHASES = ['queued', 'read', 'write'] as const;
type Phase = (typeof PHASES)[number];
const DELIVERY = 'tailwater_live_delivery_seconds';

async function scrapeMetrics(port: number): Promise<string> {
  const response = await fetch(`http://127.0.0.1:${port}/metrics`);
  return response.text();
}

/** What a latency measurement runs against: Tailwater, the bare writer, or a peer. */
export type LatencyTarget = BareOptions | 'tailwater' | { peer: PeerTarget };

/** Every load of RATES, in order, on one fresh server and one set of viewers. */
export async function measureLatency(target: LatencyTarget, dir: string): Promise<Measured[]> {
  let server: Proc | undefined;
  let client: ViewerClient | undefined;
  const name =
    target === 'tailwater' ? target : 'peer' in target ? JSON.stringify(target.peer) : 'bare';
  try {
    const stream =
      typeof target === 'object' && 'peer' in target
        ? await startPeerStream(target.peer, dir)
        : await startStreamServer(
            target === 'tailwater' ? { tailwater: 'bench.latency' } : { bare: target },
            dir,
          );
    server = stream.server;
    const { appendUrl, peer } = stream;
    client = await startViewerClient();
    const reopened = await openViewers(client, stream, VIEWERS, name);
    const results: Measured[] = [];
    for (const rate of RATES) {
      const warmup = Math.round(rate * WARMUP_SECONDS);
      const measured = Math.round(rate * SECONDS);
      const timeoutMs = ((warmup + measured) / rate) * 1000 + 12_000;
      const serverBefore = treeCpuMs(server.pid);
      const clientBefore = cpuMs(client.pid);
      const machineBefore = machineCpuMs();
      const netBefore = netDrops();
      const metricsBefore = target === 'tailwater' ? await scrapeMetrics(stream.port) : '';
      const started = performance.now();
      const reply = await client.ask<LatencyReply>(
        {
          op: 'latency',
          appendUrl,
          peer,
          rate,
          warmup,
          measured,
          pad: PAD,
          maxInFlight: MAX_IN_FLIGHT,
          timeoutMs,
        },
        timeoutMs + 5000,
      );
      const elapsed = performance.now() - started;
      const machineAfter = machineCpuMs();
      const metricsAfter = target === 'tailwater' ? await scrapeMetrics(stream.port) : '';
      if (reply.samples === 0) throw new Error(`${name}: no deliveries measured at ${rate}/s`);
      results.push({
        rate,
        reply,
        serverCpu: (treeCpuMs(server.pid) - serverBefore) / elapsed,
        clientCpu: (cpuMs(client.pid) - clientBefore) / elapsed,
        machineBusy:
          (machineAfter.busy - machineBefore.busy) / (machineAfter.total - machineBefore.total),
        retransmits: netDrops().retransSegs - netBefore.retransSegs,
        reopened,
        ...(target === 'tailwater' ? { phases: phasesOf(metricsBefore, metricsAfter) } : {}),
      });
    }
    return results;
  } finally {
    await client?.stop();
    await server?.stop();
  }
}

/** Each phase's p50 and p99 over one load (warm-up included), from two scrapes. */
function phasesOf(before: string, after: string): NonNullable<Measured['phases']> {
  const of = (phase: Phase) => {
    const buckets = bucketsSince(
      histogramBuckets(before, DELIVERY, 'phase', phase),
      histogramBuckets(after, DELIVERY, 'phase', phase),
    );
    const inMs = (seconds: number | undefined) =>
      seconds === undefined ? undefined : seconds * 1000;
    return { p50: inMs(quantile(buckets, 0.5)), p99: inMs(quantile(buckets, 0.99)) };
  };
  return { queued: of('queued'), read: of('read'), write: of('write') };
}

export const ms = (n: number) => `${n.toFixed(1)} ms`;
export const triple = (p: Percentiles) => `${ms(p.p50)} / ${ms(p.p99)} / ${ms(p.max)}`;
const pair = (p: { p50?: number | undefined; p99?: number | undefined } | undefined) =>
  p?.p50 === undefined || p.p99 === undefined ? 'n/a' : `${ms(p.p50)} / ${ms(p.p99)}`;
const pct = (n: number) => `${(n * 100).toFixed(0)} %`;

function conditions(m: Measured): string {
  const r = m.reply;
  const problems = [
    r.failedAppends > 0 ? `${r.failedAppends} appends failed (${r.firstFailure})` : '',
    r.missing > 0 ? `${fmt(r.missing)} deliveries not seen in time` : '',
    r.mismatched > 0 ? `${r.mismatched} viewers out of step` : '',
  ].filter(Boolean);
  return [
    `${r.sendRate.toFixed(0)} appends/s sent`,
    `append round trip p50 ${ms(r.ack.p50)}, p99 ${ms(r.ack.p99)}`,
    `first → last viewer of an entry p50 ${ms(r.spread.p50)}, p99 ${ms(r.spread.p99)}`,
    `CPU: server ${pct(m.serverCpu)}, client ${pct(m.clientCpu)} of a core, machine ${pct(m.machineBusy)} busy`,
    `${m.retransmits.toLocaleString('en-US')} TCP retransmissions`,
    ...problems,
  ].join('; ');
}

export async function benchLatency(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'tailwater-bench-latency-'));
  try {
    const bare = await measureLatency({ write: 'frame' }, dir);
    const rounds: Round[] = [];
    for (let round = 0; round < ROUNDS; round += 1) {
      // Alternating which goes first, so neither always runs on a machine the other just warmed.
      if (round % 2 === 0) {
        const coalescing = await measureLatency({ write: 'coalesce' }, dir);
        rounds.push({ coalescing, tailwater: await measureLatency('tailwater', dir) });
      } else {
        const tailwater = await measureLatency('tailwater', dir);
        rounds.push({ coalescing: await measureLatency({ write: 'coalesce' }, dir), tailwater });
      }
    }
    const rows: Row[] = [];
    const p99 = (m: Measured) => m.reply.fromSend.p99;
    // The load first in the table.
    for (const rate of [...RATES].sort((a, b) => b - a)) {
      const b = bare.find((m) => m.rate === rate)!;
      const atRate = rounds.map((round) => ({
        c: round.coalescing.find((m) => m.rate === rate)!,
        t: round.tailwater.find((m) => m.rate === rate)!,
      }));
      const ratios = atRate.map(({ c, t }) => p99(t) / p99(c));
      // The round whose ratio is the median's is the one shown in full.
      const median = [...ratios].sort((x, y) => x - y)[Math.floor((ratios.length - 1) / 2)]!;
      const { c, t } = atRate[ratios.indexOf(median)]!;
      const eachRound = ratios.map((ratio) => ratio.toFixed(2)).join(', ');
      const load = `${fmt(VIEWERS)} viewers, ${rate} appends/s`;
      rows.push(
        {
          name: `${load} — baseline: bare writer coalescing each turn's appends, sent → received, p50 / p99 / max (the median round)`,
          value: triple(c.reply.fromSend),
          ratio: '1.0 ×',
          note: conditions(c),
        },
        {
          name: `${load} — Tailwater, sent → received, p50 / p99 / max (the median round)`,
          value: triple(t.reply.fromSend),
          ratio: `${median.toFixed(2)} × (p99, median of ${ratios.length} rounds)`,
          note: `${conditions(t)}; p99 ratio in each round, in order: ${eachRound}; goal p99 ≤ ${GOAL_RATIO} × the coalescing bare writer's (issue #17), ≤ ${GOAL_P99_MS} ms (issue #3)`,
        },
        {
          name: `${load} — bare writer frame by frame, sent → received, p50 / p99 / max`,
          value: triple(b.reply.fromSend),
          ratio: `${(p99(b) / p99(c)).toFixed(2)} × (p99)`,
          note: `${conditions(b)}; each append written to every socket as it arrives`,
        },
        {
          name: `${load} — coalescing bare writer, acknowledged → received`,
          value: triple(c.reply.fromAck),
          note: 'negative: the bare writer sends the frames before it answers the append',
        },
        {
          name: `${load} — Tailwater, acknowledged → received`,
          value: triple(t.reply.fromAck),
          note: 'the append is committed (WAL) before it is answered; fan-out follows',
        },
        {
          name: `${load} — Tailwater, where a batch waits in the server, p50 / p99 by phase`,
          value: PHASES.map((phase) => `${phase} ${pair(t.phases?.[phase])}`).join('; '),
          note: `the server’s own \`tailwater_live_delivery_seconds\` over the load (warm-up included), for the oldest entry of each batch fanned out, interpolated within buckets as histogram_quantile does: queued = stored → read (commit, bus, one coalescing turn), read = the store read, write = encoding and writing to all ${fmt(VIEWERS)} sockets`,
        },
      );
    }
    for (const row of rows)
      console.log(`${row.name}: ${row.value} ${row.ratio ?? ''}\n    ${row.note}`);
    writeSection(
      'latency',
      'Latency',
      [
        `Time from an append to its arrival at each viewer, over every (entry, viewer) pair: one run watched by ${fmt(VIEWERS)} SSE viewers while the producer appends entries of ~250 B, one per \`POST …/events\`, open-loop on a fixed schedule (at most ${MAX_IN_FLIGHT} requests in flight over keep-alive connections; past that the producer waits, so "appends/s sent" shows when a server could not keep up). Each load runs ${SECONDS} s after a ${WARMUP_SECONDS} s warm-up that is not counted, on the same connections, the lighter load first. The coalescing baseline and Tailwater are measured in ${ROUNDS} rounds, each on fresh processes, which goes first alternating; Tailwater's ratio is the median round's p99 ratio (every round's is in the note), and the rows of a load are that round's. "sent" is when the request was issued, "acknowledged" when its answer arrived. Goal (issue #3): p99 ≤ ${GOAL_P99_MS} ms at 1,000 viewers and 200 appends/s.`,
        '',
        'The producer and the viewers live in one client process so every time is read from one clock; the server (a real `tailwater serve`, raised connection caps, no heartbeats) is a second process, and the two share the machine’s cores. The client holds the viewers as raw `node:net` sockets and matches the k-th frame of a connection to seq k − 1 by counting `\\n\\n` separators, so an arrival time is when the client’s event loop got to that socket: at 1,000 sockets this includes the client’s own turn-taking (see "first → last viewer"), for both servers alike. The baseline is a minimal `node:net` server in a process of its own (bench/bare-sse-server.ts) that takes the same requests over HTTP and, with no store, holds the frames of every append that lands in one turn of the event loop until the next turn (`BARE_WRITE=coalesce`), writes them to every socket as one buffer, then answers: the least a server can do that writes what lands together once per viewer, as Tailwater’s reader does. The same writer frame by frame (each append written to every socket as it arrives, then answered; `BARE_WRITE=frame`) is shown too: at 1,000 viewers it makes a write call per viewer per append, which this machine cannot keep up with at 200 appends/s. TCP retransmissions are counted machine-wide over each load; on loopback they are tail-loss probes fired when an ACK is late because the CPUs are busy.',
      ].join('\n'),
      rows,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
