/**
 * Latency: append → received, at 1,000 viewers of one run while a producer appends one entry
 * per request on a fixed schedule (200/s, the load, and 50/s, below saturation on a
 * small machine). The producer and the viewers share one process and clock. Against the bare
 * node:net SSE writer (bare-sse-server.ts) fed the same requests.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BareProc, TailwaterProc, ViewerClient } from './procs.js';
import {
  cpuMs,
  machineCpuMs,
  netDrops,
  openViewers,
  startStreamServer,
  startViewerClient,
} from './procs.js';
import { fmt, writeSection } from './report.js';
import type { Row } from './report.js';
import type { LatencyReply, Percentiles } from './viewer-client.js';

const VIEWERS = Number(process.env['BENCH_LATENCY_VIEWERS'] ?? 1000);
/** Appends per second, run in this order on the same connections: the light load first. */
const RATES = (process.env['BENCH_LATENCY_RATES'] ?? '50,200').split(',').map(Number);
const SECONDS = Number(process.env['BENCH_LATENCY_SECONDS'] ?? 5);
const WARMUP_SECONDS = 0.5;
const MAX_IN_FLIGHT = 64;
/** Pads each frame to about 250 B, a few log lines' worth. */
const PAD = 100;
const GOAL_P99_MS = 5;

interface Measured {
  rate: number;
  reply: LatencyReply;
  /** CPU over the run, as a share of one core. */
  serverCpu: number;
  clientCpu: number;
  /** Share of the whole machine (every core) that was busy. */
  machineBusy: number;
  retransmits: number;
}

async function measure(target: 'bare' | 'tailwater', dir: string): Promise<Measured[]> {
  let server: BareProc | TailwaterProc | undefined;
  let client: ViewerClient | undefined;
  try {
    const stream = await startStreamServer(
      target === 'bare' ? { bare: {} } : { tailwater: 'bench.latency' },
      dir,
    );
    server = stream.server;
    const { appendUrl } = stream;
    client = await startViewerClient();
    await openViewers(client, stream, VIEWERS, target);
    const results: Measured[] = [];
    for (const rate of RATES) {
      const warmup = Math.round(rate * WARMUP_SECONDS);
      const measured = Math.round(rate * SECONDS);
      const timeoutMs = ((warmup + measured) / rate) * 1000 + 12_000;
      const serverBefore = cpuMs(server.pid);
      const clientBefore = cpuMs(client.pid);
      const machineBefore = machineCpuMs();
      const netBefore = netDrops();
      const started = performance.now();
      const reply = await client.ask<LatencyReply>(
        {
          op: 'latency',
          appendUrl,
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
      if (reply.samples === 0) throw new Error(`${target}: no deliveries measured at ${rate}/s`);
      results.push({
        rate,
        reply,
        serverCpu: (cpuMs(server.pid) - serverBefore) / elapsed,
        clientCpu: (cpuMs(client.pid) - clientBefore) / elapsed,
        machineBusy:
          (machineAfter.busy - machineBefore.busy) / (machineAfter.total - machineBefore.total),
        retransmits: netDrops().retransSegs - netBefore.retransSegs,
      });
    }
    return results;
  } finally {
    await client?.stop();
    await server?.stop();
  }
}

const ms = (n: number) => `${n.toFixed(1)} ms`;
const triple = (p: Percentiles) => `${ms(p.p50)} / ${ms(p.p99)} / ${ms(p.max)}`;
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
    const bare = await measure('bare', dir);
    const tailwater = await measure('tailwater', dir);
    const rows: Row[] = [];
    // The load first in the table.
    for (const rate of [...RATES].sort((a, b) => b - a)) {
      const b = bare.find((m) => m.rate === rate)!;
      const t = tailwater.find((m) => m.rate === rate)!;
      const load = `${fmt(VIEWERS)} viewers, ${rate} appends/s`;
      rows.push(
        {
          name: `${load} — baseline: bare writer, sent → received, p50 / p99 / max`,
          value: triple(b.reply.fromSend),
          ratio: '1.0 ×',
          note: conditions(b),
        },
        {
          name: `${load} — Tailwater, sent → received, p50 / p99 / max`,
          value: triple(t.reply.fromSend),
          ratio: `${(t.reply.fromSend.p99 / b.reply.fromSend.p99).toFixed(1)} × (p99)`,
          note: `${conditions(t)}; goal p99 ≤ ${GOAL_P99_MS} ms`,
        },
        {
          name: `${load} — baseline: bare writer, acknowledged → received`,
          value: triple(b.reply.fromAck),
          note: 'negative: the bare writer sends the frames before it answers the append',
        },
        {
          name: `${load} — Tailwater, acknowledged → received`,
          value: triple(t.reply.fromAck),
          note: 'the append is committed (WAL) before it is answered; fan-out follows',
        },
      );
    }
    for (const row of rows)
      console.log(`${row.name}: ${row.value} ${row.ratio ?? ''}\n    ${row.note}`);
    writeSection(
      'latency',
      'Latency',
      [
        `Time from an append to its arrival at each viewer, over every (entry, viewer) pair: one run watched by ${fmt(VIEWERS)} SSE viewers while the producer appends entries of ~250 B, one per \`POST …/events\`, open-loop on a fixed schedule (at most ${MAX_IN_FLIGHT} requests in flight over keep-alive connections; past that the producer waits, so "appends/s sent" shows when a server could not keep up). Each load runs ${SECONDS} s after a ${WARMUP_SECONDS} s warm-up that is not counted, on the same connections, the lighter load first. "sent" is when the request was issued, "acknowledged" when its answer arrived. Goal (issue #3): p99 ≤ ${GOAL_P99_MS} ms at 1,000 viewers and 200 appends/s.`,
        '',
        'The producer and the viewers live in one client process so every time is read from one clock; the server (a real `tailwater serve`, raised connection caps, no heartbeats) is a second process, and the two share the machine’s cores. The client holds the viewers as raw `node:net` sockets and matches the k-th frame of a connection to seq k − 1 by counting `\\n\\n` separators, so an arrival time is when the client’s event loop got to that socket: at 1,000 sockets this includes the client’s own turn-taking (see "first → last viewer"), for both servers alike. The baseline is a minimal `node:net` server in a process of its own (bench/bare-sse-server.ts) that takes the same requests over HTTP, writes each frame to every socket as it arrives and then answers, with no store. TCP retransmissions are counted machine-wide over each load; on loopback they are tail-loss probes fired when an ACK is late because the CPUs are busy.',
      ].join('\n'),
      rows,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
