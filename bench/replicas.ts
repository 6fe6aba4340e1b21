/**
 * The fleet (docs/DEPLOYMENT.md): three real `tailwater serve` replicas on one fresh PostgreSQL
 * database and the Redis of scripts/services.sh, nginx (docs/nginx.conf) in front where it
 * matters. Four measurements, each against a baseline of the same run:
 *   1. ingest through one replica and through three, against bare `pg` inserts of the same rows;
 *   2. latency, append acknowledged on replica B → received by a viewer on A, against writer and
 *      viewer both on A;
 *   3. fan-out, 3 replicas × 1,000 viewers of one run against 1 replica × 1,000;
 *   4. store reads for 300 streams × 10 viewers, round robin and routed by stream through
 *      nginx, against every viewer on one replica (one reader per stream by construction).
 * `npm run bench -- replicas` runs just this one (the services first: `npm run services`).
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { splitLogText } from '../src/model/log-chunks.js';
import type { Fleet, Replica } from './fleet.js';
import { missingServices, REDIS_URL, scrape, startFleet, startNginx, Writer } from './fleet.js';
import type { ViewerClient } from './procs.js';
import { cpuMs, machineCpuMs, sleep, startViewerClient } from './procs.js';
import { fmt, median, perSecond, writeSection } from './report.js';
import type { Row } from './report.js';
import type { FanoutReply, LatencyReply, OpenedReply, Percentiles } from './viewer-client.js';

const env = (name: string, fallback: number) => Number(process.env[name] ?? fallback);

const REPLICAS = 3;
/** Ingest: seconds per measurement, writers per replica, events per batch, lines per append. */
const INGEST_SECONDS = env('BENCH_REPLICAS_INGEST_SECONDS', 3);
/** Of the same load, before the clock starts: connections, JIT, prepared statements. */
const INGEST_WARMUP_SECONDS = 1;
const WRITERS_PER_REPLICA = env('BENCH_REPLICAS_WRITERS', 4);
const BATCH_EVENTS = 1000;
const LOG_LINES = 1000;
/** Most requests one writer sends in one measurement, whatever the time. */
const MAX_REQUESTS = 100_000;
const GOAL_EVENTS = 20_000;
const GOAL_SCALING = 2;

const LATENCY_VIEWERS = env('BENCH_REPLICAS_LATENCY_VIEWERS', 100);
const LATENCY_RATE = env('BENCH_REPLICAS_LATENCY_RATE', 100);
const LATENCY_SECONDS = env('BENCH_REPLICAS_LATENCY_SECONDS', 5);
const LATENCY_WARMUP_SECONDS = 2;
const GOAL_LATENCY = 2;

const FANOUT_VIEWERS = env('BENCH_REPLICAS_FANOUT_VIEWERS', 1000);
const FANOUT_ENTRIES = env('BENCH_REPLICAS_FANOUT_ENTRIES', 1000);
const FANOUT_ROUNDS = env('BENCH_REPLICAS_FANOUT_ROUNDS', 3);
const FANOUT_BATCH = 100;
const FANOUT_WARMUP = 200;
const FANOUT_PAD = 900;
const FANOUT_TIMEOUT_MS = 30_000;
const GOAL_FANOUT = 2.5;

const READ_STREAMS = env('BENCH_REPLICAS_READ_STREAMS', 300);
const READ_VIEWERS = env('BENCH_REPLICAS_READ_VIEWERS', 10);
/** The same for each measurement, and low enough that every one of them keeps up. */
const READ_APPENDS_PER_SECOND = env('BENCH_REPLICAS_READ_RATE', 100);
const READ_SECONDS = env('BENCH_REPLICAS_READ_SECONDS', 5);
const POLL_SECONDS = 2;

/** This run's own: its Redis namespace, and a prefix of its pipelines' names. */
const TAG = randomBytes(4).toString('hex');

/** Settings every replica gets beside STREAM_ENV (raised caps, no heartbeats). */
const REPLICA_ENV: Record<string, string> = {
  TAILWATER_POLL_SECONDS: String(POLL_SECONDS),
  // Apart from anything else on the shared Redis.
  TAILWATER_BUS_NAMESPACE: `bench-${TAG}`,
  // A stream's reader goes soon after its last viewer, so one measurement's readers are gone
  // before the next one's are counted.
  TAILWATER_TAILER_IDLE_GRACE_SECONDS: '1',
};

/** Stream names of this run only, so its runs never meet another run's in the database. */
const pipeline = (name: string) => `bench.replicas-${TAG}.${name}`;
const runPath = (name: string, runId: string) =>
  `/api/v1/pipelines/${encodeURIComponent(pipeline(name))}/runs/${encodeURIComponent(runId)}`;

/** Creates runs of one pipeline by a first append to each, 50 at a time. */
async function createRuns(
  writer: Writer,
  appends: ReadonlyArray<{ url: string; body: string; type?: string }>,
): Promise<void> {
  for (let i = 0; i < appends.length; i += 50) {
    await Promise.all(appends.slice(i, i + 50).map((a) => writer.ok(a.url, a.body, a.type)));
  }
}

const ms = (n: number) => `${n.toFixed(1)} ms`;
const pct = (n: number) => `${(n * 100).toFixed(0)} %`;
const times = (n: number) => `${n.toFixed(2)} ×`;
const met = (ok: boolean) => (ok ? 'met' : 'not met');

/** Runs `fn`, answering its result with the machine's busy share and each pid's CPU over it. */
async function withCpu<T>(
  pids: readonly number[],
  fn: () => Promise<T>,
): Promise<{ result: T; busy: number; cpu: number[]; elapsed: number }> {
  const machine = machineCpuMs();
  const before = pids.map(cpuMs);
  const started = performance.now();
  const result = await fn();
  const elapsed = performance.now() - started;
  const after = machineCpuMs();
  return {
    result,
    elapsed,
    busy: (after.busy - machine.busy) / Math.max(1, after.total - machine.total),
    cpu: pids.map((pid, i) => (cpuMs(pid) - before[i]!) / elapsed),
  };
}

// ---- 1. ingest -------------------------------------------------------------------------------

function eventBody(writer: number): string {
  const events = Array.from({ length: BATCH_EVENTS }, (_, j) => ({
    kind: 'progress',
    data: { writer, n: j, pct: j % 100, msg: `table_${j % 97}: wrote batch ${j} of the load step` },
  }));
  return JSON.stringify({ events });
}

function logText(): string {
  let out = '';
  for (let i = 0; i < LOG_LINES; i += 1) {
    out += `2026-11-29T08:00:00.000Z INFO [load] table_${i % 97}: wrote batch ${i}\n`;
  }
  return out;
}

interface Rate {
  perSecond: number;
  requests: number;
}

/**
 * `writers` loops, each sending `step(w, i)` one after the other for INGEST_SECONDS or
 * MAX_REQUESTS, whichever ends first; answers the units per second.
 */
async function closedLoop(
  writers: number,
  unitsPerStep: number,
  step: (w: number, i: number) => Promise<void>,
): Promise<Rate> {
  const warmup = performance.now();
  let started = Infinity;
  let units = 0;
  let requests = 0;
  // Counted: steps that start once the warm-up is over (the writers keep going meanwhile).
  await Promise.all(
    Array.from({ length: writers }, async (_, w) => {
      for (let i = 0; i < MAX_REQUESTS; i += 1) {
        const now = performance.now();
        if (now - warmup >= (INGEST_WARMUP_SECONDS + INGEST_SECONDS) * 1000) break;
        const counted = now - warmup >= INGEST_WARMUP_SECONDS * 1000;
        if (counted) started = Math.min(started, now);
        await step(w, i);
        if (counted) {
          units += unitsPerStep;
          requests += 1;
        }
      }
    }),
  );
  return { perSecond: perSecond(units, performance.now() - started), requests };
}

/** The baseline: the same rows INSERTed by `pg` into a table shaped like the store's. */
async function barePg(
  database: string,
  connections: number,
  kind: 'events' | 'logs',
): Promise<Rate> {
  const pool = new pg.Pool({ connectionString: database, max: connections });
  try {
    const table = `bench_entries_${kind}_${connections}`;
    // The columns, key and indexes of the store's `entries` (src/store/postgres-schema.ts).
    await pool.query(`CREATE TABLE ${table} (
      stream_id bigint NOT NULL, seq bigint NOT NULL, time bigint NOT NULL,
      kind text COLLATE "C" NOT NULL, step text COLLATE "C", correlation_id text COLLATE "C",
      producer_id text COLLATE "C", log_offset bigint, body text NOT NULL, extra text,
      PRIMARY KEY (stream_id, seq))`);
    await pool.query(`CREATE UNIQUE INDEX ON ${table} (stream_id, producer_id)
      WHERE producer_id IS NOT NULL`);
    await pool.query(`CREATE INDEX ON ${table} (stream_id, log_offset)
      WHERE log_offset IS NOT NULL`);
    await pool.query(`CREATE INDEX ON ${table} (stream_id, kind, seq) WHERE log_offset IS NULL`);
    const insert = `INSERT INTO ${table} (stream_id, seq, time, kind, log_offset, body)
      SELECT $1::bigint, u.seq, $2::bigint, $3::text, u.log_offset, u.body
      FROM unnest($4::bigint[], $5::bigint[], $6::text[]) AS u (seq, log_offset, body)`;
    const bodies = Array.from({ length: connections }, (_, w) =>
      kind === 'events'
        ? (JSON.parse(eventBody(w)) as { events: Array<{ data: unknown }> }).events.map((e) =>
            JSON.stringify(e.data),
          )
        : splitLogText(logText(), 64 * 1024),
    );
    const next = Array.from({ length: connections }, () => ({ seq: 0, offset: 0 }));
    return await closedLoop(
      connections,
      kind === 'events' ? BATCH_EVENTS : LOG_LINES,
      async (w) => {
        const rows = bodies[w]!;
        const at = next[w]!;
        const seqs: number[] = [];
        const offsets: Array<number | null> = [];
        for (const body of rows) {
          seqs.push((at.seq += 1));
          if (kind === 'logs') {
            offsets.push(at.offset);
            at.offset += Buffer.byteLength(body);
          } else {
            offsets.push(null);
          }
        }
        await pool.query({
          name: `insert-${table}`,
          text: insert,
          values: [w + 1, Date.now(), kind === 'events' ? 'progress' : 'log', seqs, offsets, rows],
        });
      },
    );
  } finally {
    await pool.end();
  }
}

/** Batched appends over the HTTP API, WRITERS_PER_REPLICA writers (one run each) per replica. */
async function httpIngest(
  replicas: readonly Replica[],
  kind: 'events' | 'logs',
  label: string,
): Promise<Rate> {
  const writer = new Writer();
  try {
    const writers = replicas.length * WRITERS_PER_REPLICA;
    const bodies = Array.from({ length: writers }, (_, w) =>
      kind === 'events' ? eventBody(w) : logText(),
    );
    const urls = bodies.map(
      (_, w) =>
        `${replicas[w % replicas.length]!.url}${runPath(`ingest-${label}`, `w${w}`)}/${kind}`,
    );
    const type = kind === 'events' ? 'application/json' : 'text/plain';
    // Each run exists before the clock starts.
    await createRuns(
      writer,
      urls.map((url, w) => ({ url, body: bodies[w]!, type })),
    );
    return await closedLoop(writers, kind === 'events' ? BATCH_EVENTS : LOG_LINES, async (w) => {
      await writer.ok(urls[w]!, bodies[w]!, type);
    });
  } finally {
    writer.close();
  }
}

async function ingestRows(fleet: Fleet): Promise<Row[]> {
  const rows: Row[] = [];
  const pids = fleet.replicas.map((r) => r.pid);
  for (const kind of ['events', 'logs'] as const) {
    const unit = kind === 'events' ? 'events/s' : 'lines/s';
    const connections1 = WRITERS_PER_REPLICA;
    const connections3 = WRITERS_PER_REPLICA * REPLICAS;
    const bare1 = await withCpu([], () => barePg(fleet.database.url, connections1, kind));
    const bare3 = await withCpu([], () => barePg(fleet.database.url, connections3, kind));
    const one = await withCpu(pids, () =>
      httpIngest(fleet.replicas.slice(0, 1), kind, `1-${kind}`),
    );
    const three = await withCpu(pids, () => httpIngest(fleet.replicas, kind, `3-${kind}`));
    const scaling = three.result.perSecond / one.result.perSecond;
    const what =
      kind === 'events'
        ? `batches of ${BATCH_EVENTS} events of ~100 B (\`POST …/events\`)`
        : `text/plain bodies of ${LOG_LINES} lines of ~70 B (\`POST …/logs\`)`;
    const replicaCpu = (cpu: number[], n: number) =>
      `replica CPU ${cpu
        .slice(0, n)
        .map((c) => pct(c))
        .join(', ')} of a core`;
    rows.push(
      {
        name: `${kind}: baseline: bare \`pg\` INSERTs, ${connections1} connections`,
        value: `${fmt(bare1.result.perSecond)} ${unit}`,
        ratio: '100 %',
        note: `the same rows as the store writes, ${kind === 'events' ? `${BATCH_EVENTS} rows` : 'the 64 KiB chunks of each append'} per INSERT; machine ${pct(bare1.busy)} busy`,
      },
      {
        name: `${kind}: baseline: bare \`pg\` INSERTs, ${connections3} connections`,
        value: `${fmt(bare3.result.perSecond)} ${unit}`,
        ratio: `${((bare3.result.perSecond / bare1.result.perSecond) * 100).toFixed(0)} %`,
        note: `machine ${pct(bare3.busy)} busy`,
      },
      {
        name: `${kind}: 1 replica, ${connections1} writers`,
        value: `${fmt(one.result.perSecond)} ${unit}`,
        ratio: `${((one.result.perSecond / bare1.result.perSecond) * 100).toFixed(0)} %`,
        note: [
          what,
          `${one.result.requests.toLocaleString('en-US')} requests`,
          replicaCpu(one.cpu, 1),
          `machine ${pct(one.busy)} busy`,
          kind === 'events'
            ? `goal ≥ ${fmt(GOAL_EVENTS)} events/s: ${met(one.result.perSecond >= GOAL_EVENTS)}`
            : '',
        ]
          .filter(Boolean)
          .join('; '),
      },
      {
        name: `${kind}: 3 replicas, ${connections3} writers (${WRITERS_PER_REPLICA} per replica)`,
        value: `${fmt(three.result.perSecond)} ${unit}`,
        ratio: `${((three.result.perSecond / bare3.result.perSecond) * 100).toFixed(0)} %`,
        note: [
          `against bare \`pg\` at ${connections3} connections`,
          `3 replicas ÷ 1 = ${times(scaling)}`,
          `goal ≥ ${GOAL_SCALING} ×: ${met(scaling >= GOAL_SCALING)}`,
          `${three.result.requests.toLocaleString('en-US')} requests`,
          replicaCpu(three.cpu, 3),
          `machine ${pct(three.busy)} busy`,
        ].join('; '),
      },
    );
  }
  return rows;
}

// ---- 2. latency ------------------------------------------------------------------------------

async function openOn(
  client: ViewerClient,
  port: number,
  paths: string[],
  perPath: number,
  label: string,
): Promise<OpenedReply> {
  const opened = await client.ask<OpenedReply>(
    { op: 'open', port, paths, perPath, parallel: 50, timeoutMs: 60_000 },
    65_000,
  );
  if (opened.failed > 0) {
    throw new Error(`${label}: ${opened.failed} viewers failed to open: ${opened.firstFailure}`);
  }
  return opened;
}

async function latencyOnce(
  viewerOn: Replica,
  writerOn: Replica,
  label: string,
): Promise<LatencyReply> {
  const client = await startViewerClient();
  try {
    const run = runPath('latency', label);
    await openOn(client, viewerOn.port, [`${run}/stream`], LATENCY_VIEWERS, label);
    const warmup = Math.round(LATENCY_RATE * LATENCY_WARMUP_SECONDS);
    const measured = Math.round(LATENCY_RATE * LATENCY_SECONDS);
    const timeoutMs = ((warmup + measured) / LATENCY_RATE) * 1000 + 15_000;
    const reply = await client.ask<LatencyReply>(
      {
        op: 'latency',
        appendUrl: `${writerOn.url}${run}/events`,
        rate: LATENCY_RATE,
        warmup,
        measured,
        pad: 100,
        maxInFlight: 64,
        timeoutMs,
      },
      timeoutMs + 5000,
    );
    if (reply.samples === 0) throw new Error(`${label}: no deliveries measured`);
    return reply;
  } finally {
    await client.stop();
  }
}

async function latencyRows(fleet: Fleet): Promise<Row[]> {
  const [a, b] = fleet.replicas as [Replica, Replica];
  const single = await latencyOnce(a, a, 'single');
  const cross = await latencyOnce(a, b, 'cross');
  const triple = (p: Percentiles) => `${ms(p.p50)} / ${ms(p.p99)} / ${ms(p.max)}`;
  const conditions = (r: LatencyReply) =>
    [
      `${r.sendRate.toFixed(0)} appends/s sent`,
      `append round trip p50 ${ms(r.ack.p50)}, p99 ${ms(r.ack.p99)}`,
      r.failedAppends > 0 ? `${r.failedAppends} appends failed (${r.firstFailure})` : '',
      r.missing > 0 ? `${fmt(r.missing)} deliveries not seen in time` : '',
      r.mismatched > 0 ? `${r.mismatched} viewers out of step` : '',
    ]
      .filter(Boolean)
      .join('; ');
  const ratio = cross.fromAck.p99 / single.fromAck.p99;
  const load = `${fmt(LATENCY_VIEWERS)} viewers on A, ${LATENCY_RATE} appends/s`;
  return [
    {
      name: `${load} — baseline: writer on A, acknowledged → received, p50 / p99 / max`,
      value: triple(single.fromAck),
      ratio: '1.0 ×',
      note: `${conditions(single)}; below zero where a frame reached the viewer before the answer reached the writer`,
    },
    {
      name: `${load} — writer on B, acknowledged → received, p50 / p99 / max`,
      value: triple(cross.fromAck),
      ratio: `${ratio.toFixed(1)} × (p99)`,
      note: `${conditions(cross)}; goal p99 ≤ ${GOAL_LATENCY} × single-replica: ${met(ratio <= GOAL_LATENCY)}`,
    },
    {
      name: `${load} — baseline: writer on A, sent → received`,
      value: triple(single.fromSend),
      ratio: '1.0 ×',
    },
    {
      name: `${load} — writer on B, sent → received`,
      value: triple(cross.fromSend),
      ratio: `${(cross.fromSend.p99 / single.fromSend.p99).toFixed(1)} × (p99)`,
    },
  ];
}

// ---- 3. fan-out ------------------------------------------------------------------------------

interface FanoutMeasured {
  rates: number[];
  appendMs: number[];
  busy: number;
  serverCpuPer1k: number;
  clientCpuPer1k: number;
  viewers: number;
}

async function fanoutOnce(fleet: Fleet, replicas: number, label: string): Promise<FanoutMeasured> {
  const client = await startViewerClient();
  try {
    const run = runPath('fanout', label);
    for (const replica of fleet.replicas.slice(0, replicas)) {
      await openOn(client, replica.port, [`${run}/stream`], FANOUT_VIEWERS, label);
    }
    const appendUrl = `${fleet.replicas[0]!.url}${run}/events`;
    const round = async (entries: number) => {
      const reply = await client.ask<FanoutReply>(
        {
          op: 'fanout',
          appendUrl,
          entries,
          batch: FANOUT_BATCH,
          pad: FANOUT_PAD,
          timeoutMs: FANOUT_TIMEOUT_MS,
        },
        FANOUT_TIMEOUT_MS + 5000,
      );
      if (reply.complete !== reply.viewers) {
        throw new Error(
          `${label}: only ${reply.complete} of ${reply.viewers} viewers got every entry within ${FANOUT_TIMEOUT_MS} ms`,
        );
      }
      return reply;
    };
    await round(FANOUT_WARMUP);
    const pids = [...fleet.replicas.map((r) => r.pid), client.pid];
    const measured = await withCpu(pids, async () => {
      const rates: number[] = [];
      const appendMs: number[] = [];
      let viewers = 0;
      for (let i = 0; i < FANOUT_ROUNDS; i += 1) {
        const reply = await round(FANOUT_ENTRIES);
        rates.push(perSecond(FANOUT_ENTRIES * reply.viewers, reply.ms));
        appendMs.push(reply.appendMs);
        viewers = reply.viewers;
      }
      return { rates, appendMs, viewers };
    });
    const deliveries = (FANOUT_ROUNDS * FANOUT_ENTRIES * measured.result.viewers) / 1000;
    const cpuOf = (share: number) => (share * measured.elapsed) / deliveries;
    const servers = measured.cpu.slice(0, fleet.replicas.length).reduce((a, b) => a + b, 0);
    return {
      ...measured.result,
      busy: measured.busy,
      serverCpuPer1k: cpuOf(servers),
      clientCpuPer1k: cpuOf(measured.cpu[fleet.replicas.length]!),
    };
  } finally {
    await client.stop();
  }
}

async function fanoutRows(fleet: Fleet): Promise<Row[]> {
  const one = await fanoutOnce(fleet, 1, 'one');
  const three = await fanoutOnce(fleet, REPLICAS, 'three');
  const base = median(one.rates);
  const note = (m: FanoutMeasured) =>
    [
      `rounds ${fmt(Math.min(...m.rates))}–${fmt(Math.max(...m.rates))}`,
      `replicas' CPU ${m.serverCpuPer1k.toFixed(2)} ms, client ${m.clientCpuPer1k.toFixed(2)} ms per 1k deliveries`,
      `machine ${pct(m.busy)} busy`,
      `appends answered ${fmt(median(m.appendMs))} ms into a round`,
    ].join('; ');
  const ratio = median(three.rates) / base;
  return [
    {
      name: `baseline: 1 replica × ${fmt(FANOUT_VIEWERS)} viewers`,
      value: `${fmt(base)} deliveries/s`,
      ratio: '1.00 ×',
      note: note(one),
    },
    {
      name: `${REPLICAS} replicas × ${fmt(FANOUT_VIEWERS)} viewers (${fmt(three.viewers)} in all)`,
      value: `${fmt(median(three.rates))} deliveries/s`,
      ratio: times(ratio),
      note: `${note(three)}; goal ≥ ${GOAL_FANOUT} ×: ${met(ratio >= GOAL_FANOUT)}`,
    },
  ];
}

// ---- 4. store reads --------------------------------------------------------------------------

const READ_METRICS = [
  'tailwater_store_shared_reads_total',
  'tailwater_store_catch_up_reads_total',
  'tailwater_active_streams',
  'tailwater_stream_connections',
] as const;

interface ReadsMeasured {
  sharedPerSecond: number;
  catchUpPerSecond: number;
  readers: number;
  readersEach: number[];
  appendsPerSecond: number;
  /** Reads per second with viewers and no appends: the readers' polls. */
  idlePerSecond: number;
  nginxCpu: number | undefined;
}

/** Waits (at most 30 s) until the replicas hold `connections` stream connections in all. */
async function settle(replicas: readonly Replica[], connections: number) {
  let last = await scrape(replicas, READ_METRICS);
  for (let i = 0; i < 300; i += 1) {
    if (last.total['tailwater_stream_connections'] === connections) break;
    await sleep(100);
    last = await scrape(replicas, READ_METRICS);
  }
  if (last.total['tailwater_stream_connections'] !== connections) {
    throw new Error(
      `store reads: ${last.total['tailwater_stream_connections']} of ${connections} connections`,
    );
  }
  return last;
}

async function readsOnce(
  fleet: Fleet,
  via: 'direct' | 'round robin' | 'routed',
  label: string,
): Promise<ReadsMeasured> {
  const nginx =
    via === 'direct'
      ? undefined
      : await startNginx(
          fleet.replicas.map((r) => r.port),
          {
            routeByStream: via === 'routed',
            connections: READ_STREAMS * READ_VIEWERS * 2 + 1024,
          },
        );
  const client = await startViewerClient();
  const writer = new Writer();
  try {
    const runs = Array.from({ length: READ_STREAMS }, (_, i) => runPath(`reads-${label}`, `s${i}`));
    const appendTo = (i: number) =>
      `${fleet.replicas[i % fleet.replicas.length]!.url}${runs[i]!}/events`;
    const body = JSON.stringify({ events: [{ kind: 'tick', data: { pad: 'x'.repeat(100) } }] });
    // Every run exists (one entry) before its viewers come.
    await createRuns(
      writer,
      runs.map((_, i) => ({ url: appendTo(i), body })),
    );
    await openOn(
      client,
      nginx?.port ?? fleet.replicas[0]!.port,
      runs.map((run) => `${run}/stream`),
      READ_VIEWERS,
      `store reads (${via})`,
    );
    await settle(fleet.replicas, READ_STREAMS * READ_VIEWERS);
    // Catch-up and the first polls done, before the counters are read; then a spell with no
    // appends, whose reads are the readers' own polls.
    await sleep(POLL_SECONDS * 1000 + 500);
    const idleFrom = await scrape(fleet.replicas, READ_METRICS);
    const idleStarted = performance.now();
    await sleep(POLL_SECONDS * 1000);
    const before = await scrape(fleet.replicas, READ_METRICS);
    const idlePerSecond = perSecond(
      before.total['tailwater_store_shared_reads_total']! -
        idleFrom.total['tailwater_store_shared_reads_total']! +
        before.total['tailwater_store_catch_up_reads_total']! -
        idleFrom.total['tailwater_store_catch_up_reads_total']!,
      performance.now() - idleStarted,
    );
    const worker = nginx?.workerPid();
    const nginxBefore = worker ? cpuMs(worker) : 0;
    const started = performance.now();
    // Open loop: appends of one event, the streams in turn, READ_APPENDS_PER_SECOND spread over
    // the replicas (straight, not through nginx), at most 64 in flight.
    const total = Math.round(READ_APPENDS_PER_SECOND * READ_SECONDS);
    let inFlight = 0;
    let failed: unknown;
    let sent = 0;
    const pending = new Set<Promise<void>>();
    for (let i = 0; i < total; i += 1) {
      if (performance.now() - started > READ_SECONDS * 1000 + 10_000) break;
      const wait = started + (i * 1000) / READ_APPENDS_PER_SECOND - performance.now();
      if (wait >= 1) await sleep(Math.floor(wait));
      for (let spin = 0; inFlight >= 64 && spin < 10_000; spin += 1) await sleep(1);
      inFlight += 1;
      sent += 1;
      const p: Promise<void> = writer
        .ok(appendTo(i % READ_STREAMS), body)
        .then(
          () => undefined,
          (error: unknown) => {
            failed ??= error;
          },
        )
        .finally(() => {
          inFlight -= 1;
          pending.delete(p);
        });
      pending.add(p);
    }
    await Promise.all(pending);
    const elapsed = performance.now() - started;
    if (failed) throw failed;
    // The reads the last appends woke.
    await sleep(200);
    const after = await scrape(fleet.replicas, READ_METRICS);
    const delta = (name: string) => after.total[name]! - before.total[name]!;
    return {
      sharedPerSecond: perSecond(delta('tailwater_store_shared_reads_total'), elapsed),
      catchUpPerSecond: perSecond(delta('tailwater_store_catch_up_reads_total'), elapsed),
      readers: after.total['tailwater_active_streams']!,
      readersEach: after.each.map((e) => e['tailwater_active_streams']!),
      appendsPerSecond: perSecond(sent, elapsed),
      idlePerSecond,
      nginxCpu: worker ? (cpuMs(worker) - nginxBefore) / elapsed : undefined,
    };
  } finally {
    writer.close();
    await client.stop();
    await nginx?.stop();
    // The readers retire (tailerIdleGraceSeconds) before the next measurement opens its own.
    await sleep(1500);
  }
}

async function readsRows(fleet: Fleet): Promise<Row[]> {
  const direct = await readsOnce(fleet, 'direct', 'direct');
  const roundRobin = await readsOnce(fleet, 'round robin', 'rr');
  const routed = await readsOnce(fleet, 'routed', 'routed');
  const base = direct.sharedPerSecond + direct.catchUpPerSecond;
  const row = (name: string, m: ReadsMeasured, extra: string): Row => {
    const reads = m.sharedPerSecond + m.catchUpPerSecond;
    return {
      name,
      value: `${fmt(reads)} reads/s`,
      ratio: times(reads / base),
      note: [
        `${fmt(m.readers)} stream readers (${m.readersEach.join(' + ')})`,
        `${fmt(m.sharedPerSecond)} shared + ${fmt(m.catchUpPerSecond)} catch-up reads/s`,
        `${(reads / m.appendsPerSecond).toFixed(2)} reads per append`,
        `${m.appendsPerSecond.toFixed(0)} appends/s`,
        `with no appends ${fmt(m.idlePerSecond)} reads/s (the polls)`,
        m.nginxCpu === undefined ? '' : `nginx worker ${pct(m.nginxCpu)} of a core`,
        extra,
      ]
        .filter(Boolean)
        .join('; '),
    };
  };
  const routedRatio = (routed.sharedPerSecond + routed.catchUpPerSecond) / base;
  const shape = `${READ_STREAMS} streams × ${READ_VIEWERS} viewers`;
  return [
    row(`${shape}, baseline: every viewer on replica A (one reader per stream)`, direct, ''),
    row(`${shape}, through nginx, round robin`, roundRobin, ''),
    row(
      `${shape}, through nginx, routed by stream (\`hash $uri consistent\`)`,
      routed,
      `goal ≈ one reader per stream (reads ≈ the baseline, taken as ≤ 1.2 ×): ${met(routed.readers === READ_STREAMS && routedRatio <= 1.2)}`,
    ),
  ];
}

// ---- the section -----------------------------------------------------------------------------

export { missingServices };

/**
 * BENCH_REPLICAS_PARTS=latency,reads runs only those parts (1 ingest, 2 latency, 3 fanout,
 * 4 reads) and prints them without writing docs/BENCHMARKS.md.
 */
const PARTS = (process.env['BENCH_REPLICAS_PARTS'] ?? 'ingest,latency,fanout,reads').split(',');
const ALL_PARTS = ['ingest', 'latency', 'fanout', 'reads'].every((part) => PARTS.includes(part));

/** The machine's busy share over `ms` with nothing of this benchmark running. */
async function idleBusy(ms: number): Promise<number> {
  const before = machineCpuMs();
  await sleep(ms);
  const after = machineCpuMs();
  return (after.busy - before.busy) / Math.max(1, after.total - before.total);
}

export async function benchReplicas(): Promise<void> {
  const missing = await missingServices();
  if (missing.length > 0) {
    throw new Error(
      `replicas: ${missing.join(', ')} not reachable; run \`npm run services\` first`,
    );
  }
  const started = performance.now();
  const background = await idleBusy(1000);
  const fleet = await startFleet(REPLICAS, REPLICA_ENV);
  const rows: Row[] = [];
  const parts: Array<[string, string, (fleet: Fleet) => Promise<Row[]>]> = [
    ['ingest', '1. Ingest (PostgreSQL)', ingestRows],
    ['latency', '2. Latency across replicas', latencyRows],
    ['fanout', '3. Fan-out across replicas', fanoutRows],
    ['reads', '4. Store reads', readsRows],
  ];
  try {
    console.log(`replicas: database ${fleet.database.name}, streams bench.replicas-${TAG}.*`);
    // Ingest, which writes the most, last: its aftermath in PostgreSQL (autovacuum, checkpoints)
    // would otherwise fall on the latency measured after it. The section keeps the order 1–4.
    const measured = new Map<string, Row[]>();
    for (const part of ['latency', 'reads', 'fanout', 'ingest']) {
      const [, , measure] = parts.find(([name]) => name === part)!;
      if (!PARTS.includes(part)) continue;
      measured.set(part, await measure(fleet));
      console.log(`replicas: ${part} done`);
    }
    for (const [part, title] of parts) {
      const partRows = measured.get(part);
      if (partRows) rows.push({ name: `**${title}**`, value: '' }, ...partRows);
    }
  } finally {
    await fleet.stop();
  }
  const minutes = (performance.now() - started) / 60_000;
  for (const row of rows) {
    console.log(
      row.value
        ? `${row.name}: ${row.value} (${row.ratio ?? ''})\n    ${row.note ?? ''}`
        : row.name,
    );
  }
  console.log(`machine ${pct(background)} busy before the benchmark started`);
  if (!ALL_PARTS) {
    console.log(
      'replicas: not all parts ran (BENCH_REPLICAS_PARTS); docs/BENCHMARKS.md left as it is',
    );
    return;
  }
  writeSection(
    'replicas',
    'Replicas',
    [
      `The fleet of [DEPLOYMENT.md](DEPLOYMENT.md) on one machine: ${REPLICAS} real \`tailwater serve --store postgres://… --bus ${REDIS_URL}\` processes (the benchmarks' raised connection caps and no heartbeats, given as configuration; \`pollSeconds\` ${POLL_SECONDS}, \`tailerIdleGraceSeconds\` 1) on a fresh database \`tw_bench_<random>\` of the PostgreSQL of scripts/services.sh (fsync off), dropped afterwards, and its Redis; nginx running docs/nginx.conf (ports replaced, one worker) where the measurement says so. Each run has a Redis namespace of its own (\`busNamespace\` \`bench-<random>\`) and streams named \`bench.replicas-<random>.…\`. Everything shares the machine's cores (the replicas, PostgreSQL, Redis, nginx and the benchmark's own processes), so on a small machine the fleet cannot scale as it would over machines; "machine busy" says how close to that wall each load was. Before the first measurement, with nothing of the benchmark running, the machine was ${pct(background)} busy (other work on it is in every figure). This part took ${minutes.toFixed(1)} min. Run it alone with \`npm run services && npm run bench -- replicas\` (the other sections are kept).`,
      '',
      `1. Ingest: closed-loop writers in the benchmark process over keep-alive connections, each on a run of its own, ${WRITERS_PER_REPLICA} per replica (spread over the replicas), each counted for ${INGEST_SECONDS} s after its run was created and a ${INGEST_WARMUP_SECONDS} s warm-up of the same load. The baseline is \`pg\` in the benchmark process inserting the same rows (the store's columns, key and indexes, in a table of its own) with one \`INSERT … SELECT FROM unnest(…)\` per batch, as many connections as writers; it skips what an append adds (the stream row's lock and counters, the run row, the HTTP request, the Redis notification). Goals: ≥ ${fmt(GOAL_EVENTS)} events/s through one replica; three ≥ ${GOAL_SCALING} × one.`,
      `2. Latency: ${fmt(LATENCY_VIEWERS)} viewers of one run on replica A and a producer appending one ~250 B event per request open-loop at ${LATENCY_RATE}/s, for ${LATENCY_SECONDS} s after a ${LATENCY_WARMUP_SECONDS} s warm-up, all in one client process (bench/viewer-client.ts) so every time is read from one clock; over every (entry, viewer) pair. Baseline: the producer appends on A too; then on B, so each entry reaches A through Redis and A's read of PostgreSQL. Goal: p99 ≤ ${GOAL_LATENCY} × single-replica.`,
      `3. Fan-out: as in "Fan-out" (bench/viewer-client.ts's raw sockets, ${fmt(FANOUT_ENTRIES)} entries of ~1 KiB per round in sequential batches of ${FANOUT_BATCH} appended on replica A, the median of ${FANOUT_ROUNDS} rounds after a warm-up of ${FANOUT_WARMUP}), with ${fmt(FANOUT_VIEWERS)} viewers of one run on one replica (baseline) and ${fmt(FANOUT_VIEWERS)} on each of ${REPLICAS}, all held by one client process. Goal: ≥ ${GOAL_FANOUT} × the baseline.`,
      `4. Store reads: ${READ_STREAMS} runs × ${READ_VIEWERS} viewers (opened through nginx, or straight to replica A for the baseline, where each stream has one reader by construction) while ${READ_APPENDS_PER_SECOND} one-event appends per second go to the runs in turn, straight to the replicas in turn, for ${READ_SECONDS} s. Reads are the increase of \`tailwater_store_shared_reads_total\` plus \`tailwater_store_catch_up_reads_total\` summed over the replicas' /metrics; readers are \`tailwater_active_streams\`. A reader also reads once per \`pollSeconds\` on its own. Goal: routed by stream, one reader per stream and reads ≈ the baseline.`,
    ].join('\n'),
    rows,
  );
}
