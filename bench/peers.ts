/**
 * Peers: Tailwater beside nchan (nginx's pub/sub module, C, every core through nginx's workers)
 * and Pushpin (a GRIP proxy), which are what a team would pick instead to push events to
 * browsers. Fan-out at 1,000 and 10,000 viewers, latency at 1,000 viewers, and idle memory per
 * viewer: the same viewer client, producer and ~1 KiB frames for every server, fresh processes
 * for each, in one run. Neither peer stores anything durably as configured here; Tailwater
 * commits every entry to its SQLite store before it is delivered.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Measured as Fanout, Target } from './fanout.js';
import { FANOUT, measureFanout } from './fanout.js';
import { settledKiB } from './idle-memory.js';
import type { Measured as Latency } from './latency.js';
import { measureLatency, ms, triple, VIEWERS as LATENCY_VIEWERS } from './latency.js';
import type { PeerTarget } from './peer-streams.js';
import { peerPath, startPeerStream } from './peer-streams.js';
import type { Proc, ViewerClient } from './procs.js';
import {
  collectGarbage,
  GC_ON_SIGNAL,
  machineBusy,
  putJson,
  sleep,
  startTailwater,
  startViewerClient,
  treeCpuMs,
  treePssKiB,
} from './procs.js';
import { fmt, median, writeSection } from './report.js';
import type { Row } from './report.js';
import type { OpenedReply } from './viewer-client.js';

const CORES = cpus().length;
const ROUNDS = Number(process.env['BENCH_PEERS_ROUNDS'] ?? 5);
const VIEWERS_10K = Number(process.env['BENCH_PEERS_10K_VIEWERS'] ?? 10_000);
const ENTRIES_10K = Number(process.env['BENCH_PEERS_10K_ENTRIES'] ?? 500);
const ROUNDS_10K = Number(process.env['BENCH_PEERS_10K_ROUNDS'] ?? 3);
const IDLE_CHANNELS = 100;
const IDLE_PER_CHANNEL = Number(process.env['BENCH_PEERS_IDLE_PER_CHANNEL'] ?? 100);

const NCHAN_ALL: PeerTarget = { nchan: { workers: CORES } };
const NCHAN_ONE: PeerTarget = { nchan: { workers: 1 } };
const PUSHPIN: PeerTarget = { pushpin: true };

const names = {
  tailwater: 'Tailwater (durable), batches of 100 per append',
  tailwaterOneEach: 'Tailwater (durable), one entry per append',
  nchanAll: `nchan, ${CORES} nginx workers (every core)`,
  nchanOne: 'nchan, 1 nginx worker',
  pushpin: 'Pushpin',
};

const FANOUT_TARGETS: Target[] = [
  { name: names.nchanAll, peer: NCHAN_ALL },
  { name: names.nchanOne, peer: NCHAN_ONE },
  { name: names.pushpin, peer: PUSHPIN },
  { name: names.tailwater, tailwater: true },
  { name: names.tailwaterOneEach, tailwater: true, oneEach: true },
];

/** Deliveries per second of server CPU (every process and thread of it). */
const perCpuSecond = (m: Fanout) => 1_000_000 / m.serverCpuPer1k;

const neverSubscribed = (n: number) =>
  `${n} of the viewers got their first frame but were never subscribed (no probe within 5 s) and were opened again`;

/** A directory of its own for each measurement: a Tailwater must not find another's data. */
const fresh = (dir: string) => mkdtempSync(join(dir, 'measurement-'));

type Outcome<T> = { ok: T } | { failed: string };

/**
 * Runs one measurement, its failure a finding rather than the end of the run. It first waits
 * (up to 15 s) for the machine to be quiet, so that no measurement starts while the last one's
 * processes are still exiting.
 */
async function attempt<T>(run: () => Promise<T>): Promise<Outcome<T>> {
  const waitUntil = performance.now() + 15_000;
  while ((await machineBusy(500)) > 0.25 && performance.now() < waitUntil);
  try {
    return { ok: await run() };
  } catch (error) {
    return { failed: error instanceof Error ? error.message : String(error) };
  }
}

function fanoutRows(
  load: string,
  results: Array<{ target: Target; outcome: Outcome<Fanout> }>,
): Row[] {
  const base = results.find((r) => r.target.name === names.nchanAll)?.outcome;
  const baseRate = base && 'ok' in base ? median(base.ok.rates) : NaN;
  const baseCpu = base && 'ok' in base ? perCpuSecond(base.ok) : NaN;
  return results.map(({ target, outcome }) => {
    const name = `${load} — ${target.name}`;
    if ('failed' in outcome) return { name, value: 'did not complete', note: outcome.failed };
    const m = outcome.ok;
    const rate = median(m.rates);
    return {
      name,
      value: `${fmt(rate)} deliveries/s`,
      ratio: `${((rate / baseRate) * 100).toFixed(0)} % (deliveries/s); ${((perCpuSecond(m) / baseCpu) * 100).toFixed(0)} % (per server CPU-second)`,
      note: [
        `${fmt(perCpuSecond(m))} deliveries per server CPU-second (${m.serverCpuPer1k.toFixed(2)} ms per 1k, every process and thread)`,
        `client ${m.clientCpuPer1k.toFixed(2)} ms per 1k`,
        `rounds ${fmt(Math.min(...m.rates))}–${fmt(Math.max(...m.rates))}`,
        `${Math.round(m.bytesPerEntry)} B per entry on the wire`,
        ...(m.reopened > 0 ? [neverSubscribed(m.reopened)] : []),
      ].join('; '),
    };
  });
}

async function fanoutAt(
  dir: string,
  targets: Target[],
  rounds: number,
  shape: { viewers: number; entries: number },
): Promise<Array<{ target: Target; outcome: Outcome<Fanout> }>> {
  const results = [];
  for (const target of targets) {
    console.log(`# peers: fan-out, ${fmt(shape.viewers)} viewers, ${target.name}`);
    results.push({
      target,
      outcome: await attempt(() => measureFanout(target, fresh(dir), rounds, shape)),
    });
  }
  return results;
}

function latencyRows(results: Array<{ name: string; outcome: Outcome<Latency[]> }>): Row[] {
  const rows: Row[] = [];
  const rates = [
    ...new Set(results.flatMap((r) => ('ok' in r.outcome ? r.outcome.ok : []).map((m) => m.rate))),
  ];
  for (const rate of rates.sort((a, b) => b - a)) {
    const base = results.find((r) => r.name === names.nchanAll)?.outcome;
    const baseP99 =
      base && 'ok' in base ? base.ok.find((m) => m.rate === rate)?.reply.fromSend.p99 : undefined;
    for (const { name, outcome } of results) {
      const row = `latency, ${fmt(LATENCY_VIEWERS)} viewers, ${rate} appends/s — ${name}, sent → received, p50 / p99 / max`;
      if ('failed' in outcome) {
        rows.push({ name: row, value: 'did not complete', note: outcome.failed });
        continue;
      }
      const m = outcome.ok.find((x) => x.rate === rate)!;
      const r = m.reply;
      rows.push({
        name: row,
        value: triple(r.fromSend),
        ratio: baseP99 ? `${(r.fromSend.p99 / baseP99).toFixed(2)} × (p99)` : '',
        note: [
          `${r.sendRate.toFixed(0)} appends/s sent`,
          `server CPU ${(m.serverCpu * 100).toFixed(0)} % of a core, client ${(m.clientCpu * 100).toFixed(0)} %`,
          `append round trip p99 ${ms(r.ack.p99)}`,
          ...(r.missing > 0 ? [`${fmt(r.missing)} deliveries not seen in time`] : []),
          ...(m.reopened > 0 ? [neverSubscribed(m.reopened)] : []),
          ...(r.failedAppends > 0 ? [`${r.failedAppends} appends failed (${r.firstFailure})`] : []),
        ].join('; '),
      });
    }
  }
  return rows;
}

interface Idle {
  perViewerBytes: number;
  beforeKiB: number;
  afterKiB: number;
  openMs: number;
  idleCpu: number;
  /** Opens answered 5xx and tried again. */
  retried: number;
  firstRetried: string | undefined;
}

/**
 * Memory (PSS of every process of the server) gained per idle viewer: IDLE_CHANNELS streams ×
 * IDLE_PER_CHANNEL viewers, nothing published. Tailwater's readings follow a full collection,
 * as in bench/idle-memory.ts.
 */
async function idleMemory(target: PeerTarget | 'tailwater', dir: string): Promise<Idle> {
  let server: Proc | undefined;
  let client: ViewerClient | undefined;
  try {
    let port: number;
    let paths: string[];
    let settle: () => Promise<number>;
    if (target === 'tailwater') {
      const tailwater = await startTailwater(join(dir, 'idle-data'), {}, GC_ON_SIGNAL);
      server = tailwater;
      port = tailwater.port;
      const run = (i: number) => `/api/v1/pipelines/bench.peers/runs/r${i}`;
      paths = [];
      for (let i = 0; i < IDLE_CHANNELS; i += 1) {
        await putJson(`${tailwater.url}${run(i)}`, { status: 'running' });
        paths.push(`${run(i)}/stream`);
      }
      settle = async () => {
        await collectGarbage(tailwater);
        return settledKiB(() => treePssKiB(tailwater.pid));
      };
    } else {
      const stream = await startPeerStream(target, join(dir, 'idle'));
      server = stream.server;
      port = stream.port;
      paths = Array.from({ length: IDLE_CHANNELS }, (_, i) => peerPath(target, `c${i}`));
      const pid = stream.server.pid;
      settle = () => settledKiB(() => treePssKiB(pid));
    }
    client = await startViewerClient();
    const beforeKiB = await settle();
    const opened = await client.ask<OpenedReply>(
      {
        op: 'open',
        port,
        paths,
        perPath: IDLE_PER_CHANNEL,
        parallel: 100,
        timeoutMs: 60_000,
        retries: 3,
      },
      65_000,
    );
    if (opened.failed > 0) {
      throw new Error(`${opened.failed} viewers failed to open: ${opened.firstFailure}`);
    }
    const afterKiB = await settle();
    const cpuBefore = treeCpuMs(server.pid);
    await sleep(3000);
    const idleCpu = (treeCpuMs(server.pid) - cpuBefore) / 3000;
    return {
      perViewerBytes: ((afterKiB - beforeKiB) * 1024) / (IDLE_CHANNELS * IDLE_PER_CHANNEL),
      beforeKiB,
      afterKiB,
      openMs: opened.ms,
      idleCpu,
      retried: opened.retried,
      firstRetried: opened.firstRetried,
    };
  } finally {
    await client?.stop();
    await server?.stop();
  }
}

export async function benchPeers(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'tailwater-bench-peers-'));
  const started = performance.now();
  try {
    const rows: Row[] = [];
    const fanout1k = await fanoutAt(dir, FANOUT_TARGETS, ROUNDS, {
      viewers: FANOUT.viewers,
      entries: FANOUT.entries,
    });
    rows.push(...fanoutRows(`fan-out, 1 stream × ${fmt(FANOUT.viewers)} viewers`, fanout1k));

    const targets10k = FANOUT_TARGETS.filter((t) => t.name !== names.tailwaterOneEach);
    const fanout10k = await fanoutAt(dir, targets10k, ROUNDS_10K, {
      viewers: VIEWERS_10K,
      entries: ENTRIES_10K,
    });
    rows.push(...fanoutRows(`fan-out, 1 stream × ${fmt(VIEWERS_10K)} viewers`, fanout10k));

    const latency: Array<{ name: string; outcome: Outcome<Latency[]> }> = [];
    for (const [name, target] of [
      [names.nchanAll, { peer: NCHAN_ALL }],
      [names.pushpin, { peer: PUSHPIN }],
      ['Tailwater (durable)', 'tailwater'],
    ] as const) {
      console.log(`# peers: latency, ${name}`);
      latency.push({ name, outcome: await attempt(() => measureLatency(target, fresh(dir))) });
    }
    rows.push(...latencyRows(latency));

    const idleViewers = IDLE_CHANNELS * IDLE_PER_CHANNEL;
    const idle: Array<{ name: string; outcome: Outcome<Idle> }> = [];
    for (const [name, target] of [
      [names.nchanAll, NCHAN_ALL],
      [names.pushpin, PUSHPIN],
      ['Tailwater (durable)', 'tailwater'],
    ] as const) {
      console.log(`# peers: idle memory, ${name}`);
      idle.push({ name, outcome: await attempt(() => idleMemory(target, fresh(dir))) });
    }
    const idleBase = idle[0]!.outcome;
    for (const { name, outcome } of idle) {
      const row = `idle memory, ${IDLE_CHANNELS} streams × ${IDLE_PER_CHANNEL} viewers — ${name}`;
      if ('failed' in outcome) {
        rows.push({ name: row, value: 'did not complete', note: outcome.failed });
        continue;
      }
      const m = outcome.ok;
      const kib = (bytes: number) => `${(bytes / 1024).toFixed(1)} KiB`;
      rows.push({
        name: row,
        value: `${kib(m.perViewerBytes)} per viewer`,
        ratio:
          'ok' in idleBase ? `${(m.perViewerBytes / idleBase.ok.perViewerBytes).toFixed(1)} ×` : '',
        note: [
          `PSS of every process ${(m.beforeKiB / 1024).toFixed(1)} → ${(m.afterKiB / 1024).toFixed(1)} MiB`,
          `${fmt(idleViewers)} opened in ${(m.openMs / 1000).toFixed(1)} s, 100 at a time`,
          ...(m.retried > 0
            ? [
                `${m.retried} opens answered \`${m.firstRetried?.replace('status ', '')}\` and tried again (an EventSource would have given up)`,
              ]
            : []),
          `idle server CPU ${(m.idleCpu * 100).toFixed(1)} % of a core`,
        ].join('; '),
      });
    }

    for (const row of rows)
      console.log(`${row.name}: ${row.value} (${row.ratio ?? ''}) — ${row.note ?? ''}`);
    const minutes = (performance.now() - started) / 60_000;
    writeSection(
      'peers',
      'Peers: nchan and Pushpin',
      [
        `Tailwater beside the two servers a team would otherwise put in front of browsers, measured in one run (${minutes.toFixed(0)} min) with the same viewer client (bench/viewer-client.ts: raw sockets, frames counted by their blank line, a chunked body's size lines taken out), the same producer and the same ~1 KiB frames (\`id\`, \`event: progress\`, a \`data\` line of {"seq","time","kind","data"}); every server gets fresh processes for each measurement and is started on free loopback ports by the benchmark (bench/peer-nchan.ts, bench/peer-pushpin.ts). The baseline of each part is nchan with one nginx worker per core. Server CPU is user + system time of every process of the server and every thread of each: nginx's master and workers; Pushpin's runner, condure, zurl, pushpin-proxy and pushpin-handler (not its origin, bench/grip-origin.ts, which only answers each viewer's first request). Goal (issue #30): Tailwater, durable, at least nchan's deliveries per server CPU-second, and ahead of Pushpin.`,
        '',
        `- **nchan** (Debian's \`libnginx-mod-nchan\`): its defaults (messages in shared memory, 10 kept per channel for \`Last-Event-ID\` resume), EventSource subscribers, no access log, limits raised. It takes one message per \`POST\`, so its producer sends each entry as its own request, a batch's ${100} at once over up to 64 keep-alive connections. Tailwater is measured both ways: its own batches of 100 per append, and fed exactly as nchan is.`,
        `- **Pushpin** (Debian's \`pushpin\`): the package's settings except every port on loopback, warnings-only logs, and its handler's delivery shaping off (\`message_rate=0\`; its default delivers 2,500 messages, one item to one viewer, a second, and any rate held deliveries back while publishes came faster than every 25 ms: see bench/peer-pushpin.ts). Its publish API takes a batch of items per request. Its handler holds at most 100 items per connection and drops the rest (PUBLISH_QUEUE_MAX in its httpsession.cpp), so a producer that bursts loses entries: its fan-out producer publishes batches of 50 and never more than 100 entries ahead of the slowest viewer, which it can do only because the benchmark's producer sees every viewer.`,
        `- **Fan-out**: bench/fanout.ts's measurement (entries × viewers ÷ time from the first publish to the last viewer holding every entry; a warm-up round of ${FANOUT.warmup}, then the median of ${ROUNDS} rounds of ${fmt(FANOUT.entries)} entries at ${fmt(FANOUT.viewers)} viewers and ${ROUNDS_10K} rounds of ${fmt(ENTRIES_10K)} at ${fmt(VIEWERS_10K)}). **Latency**: bench/latency.ts's open-loop load, one entry per request, on the same connections. **Idle memory**: proportional set size (PSS, /proc/<pid>/smaps_rollup: a page shared by nginx's workers counted once) of every process of the server, after ${fmt(idleViewers)} idle viewers (${IDLE_CHANNELS} streams × ${IDLE_PER_CHANNEL}) minus before, once readings settle; Tailwater's after a full garbage collection.`,
        `- The server and the client share this machine's ${CORES} cores; a server that uses both (nchan with ${CORES} workers, Pushpin's several processes) competes with the client for them. Run it alone with \`npm run bench -- peers\`; \`bash scripts/services.sh --peers\` installs both from Debian's packages.`,
      ].join('\n'),
      rows,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
