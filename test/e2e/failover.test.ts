import { execFile, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { afterEach, describe, expect, it } from 'vitest';
import type { Entry } from '../../src/model/entry.js';
import { MIGRATIONS } from '../../src/store/postgres-schema.js';
import { putStatus, readAllEntries, runPath, runStreamPath } from '../helpers/api.js';
import { follow, percentile, within } from '../helpers/fleet.js';
import type { Viewer } from '../helpers/fleet.js';
import { freePort } from '../helpers/net.js';
import { freshDatabase, pgAdmin } from '../helpers/postgres.js';
import { PrivatePostgres } from '../helpers/private-postgres.js';
import { PrivateRedis } from '../helpers/redis-server.js';
import { BIN, startServerProcess } from '../helpers/server-process.js';
import type { ServerProcess } from '../helpers/server-process.js';
import { sleep } from '../helpers/wait.js';

// The failures docs/DEPLOYMENT.md promises a fleet survives, for real: `tailwater serve`
// processes (dist/, so `npm run build` first) on a Redis and a PostgreSQL of the test's own,
// which it stops and starts again; the shared services of docs/SERVICES.md are never stopped,
// since other test files use them at the same time.

const cleanups: Array<() => Promise<unknown>> = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
});

/** Starts a replica and has it killed after the test, before what it runs on is torn down. */
async function replica(args: string[], env: Record<string, string>): Promise<ServerProcess> {
  const server = await startServerProcess(args, env);
  cleanups.push(() => server.stop('SIGKILL'));
  return server;
}

interface Answer {
  status: number;
  retryAfter: string | null;
  body: {
    seqs?: number[];
    duplicates?: number;
    error?: { code?: string; message?: string };
  } | null;
}

/** POSTs a batch of events; status 0 when the request itself failed. */
async function post(base: string, run: string, events: readonly unknown[]): Promise<Answer> {
  try {
    const response = await fetch(`${base}${run}/events`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ events }),
      signal: AbortSignal.timeout(15_000),
    });
    const text = await response.text();
    let body: Answer['body'] = null;
    try {
      body = JSON.parse(text) as Answer['body'];
    } catch {
      // not JSON: the status says enough
    }
    return { status: response.status, retryAfter: response.headers.get('retry-after'), body };
  } catch {
    return { status: 0, retryAfter: null, body: null };
  }
}

interface Readiness {
  status: number;
  body: { status?: string; bus?: { status?: string }; store?: { status?: string } };
}

async function readyz(base: string): Promise<Readiness> {
  try {
    const response = await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(5_000) });
    return { status: response.status, body: (await response.json()) as Readiness['body'] };
  } catch {
    return { status: 0, body: {} };
  }
}

/** Asks every replica's /readyz every 100 ms until `ok` holds for all of them, or fails. */
async function readyzUntil(
  servers: readonly ServerProcess[],
  ok: (answer: Readiness) => boolean,
  what: string,
  timeoutMs: number,
): Promise<number> {
  const started = performance.now();
  const deadline = Date.now() + timeoutMs;
  let last: Readiness[] = [];
  for (let round = 0; round < 10_000 && Date.now() <= deadline; round += 1) {
    last = await Promise.all(servers.map((server) => readyz(server.url)));
    if (last.every(ok)) return performance.now() - started;
    await sleep(100);
  }
  throw new Error(`/readyz never said ${what} within ${timeoutMs} ms: ${JSON.stringify(last)}`);
}

const oneTo = (n: number): number[] => Array.from({ length: n }, (_, index) => index + 1);
/** The seq of a native frame's id, `<seq>` or `<seq>-<epoch>` (docs/API.md, Streaming). */
const seqOfId = (id: string | undefined): number => Number(/^(\d+)(?:-|$)/.exec(id ?? '')?.[1]);
const seqsOf = (viewer: Viewer): number[] => viewer.entries.map((frame) => seqOfId(frame.id));
const highestSeq = (viewer: Viewer): number =>
  viewer.frames.reduce((top, frame) => Math.max(top, seqOfId(frame.id) || 0), 0);

/** Waits until the viewer has received `seq` (then closes it), or fails after `timeoutMs`. */
async function readUntilSeq(viewer: Viewer, seq: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (let round = 0; round < 100_000 && highestSeq(viewer) < seq; round += 1) {
    if (Date.now() > deadline) break;
    // A viewer that gave up (reconnects or time ran out) says why.
    await Promise.race([viewer.done, sleep(10)]);
  }
  const reached = highestSeq(viewer) >= seq;
  viewer.close();
  await viewer.done;
  if (!reached) {
    throw new Error(
      `the viewer stopped at seq ${highestSeq(viewer)} of ${seq} (${viewer.reconnects} ` +
        `reconnects, failures ${JSON.stringify(viewer.failures)})`,
    );
  }
}
const ticks = (entries: readonly Entry[]) => entries.filter((entry) => entry.kind === 'tick');
const ms = (value: number) => `${value.toFixed(0)} ms`;
const alive = (server: ServerProcess): string => {
  const { exitCode, signalCode } = server.child;
  return exitCode === null && signalCode === null
    ? 'running'
    : `exited (${exitCode ?? signalCode})`;
};

describe('failover: the fleet through an outage of Redis or PostgreSQL', () => {
  it('Redis stopped for 12 s during appends and reads: 0 lost, 0 duplicated, in order; polled in batches while down, /readyz says the bus is degraded, and pushed one by one again once Redis is back', async () => {
    const POLL_SECONDS = 2;
    // Six polls long at least: long enough to show the polling, short enough for the suite.
    const OUTAGE_MS = 12_000;
    // How many appends each window holds: a window ends on its count (and the outage's
    // length), never on the clock alone, so a slow machine makes it longer, not emptier.
    const BEFORE_APPENDS = 10;
    const DOWN_APPENDS = 60;
    const DOWN_ANSWERS = 20;
    const AFTER_APPENDS = 30;
    const MAX_APPENDS = 1_000;
    // Pushed, an entry goes out on its own long before the next one is sent; polled, the
    // entries of a whole poll (2 s of 100 ms appends) go out as one write.
    const PUSH_PAUSE_MS = 250;
    const DOWN_PAUSE_MS = 100;

    const redis = await PrivateRedis.start();
    cleanups.push(() => redis.dispose());
    const database = await freshDatabase();
    cleanups.push(database.drop);
    const args = ['--store', database.url, '--bus', redis.url];
    const env = { TAILWATER_POLL_SECONDS: String(POLL_SECONDS) };
    // The first alone applies the migrations; the second finds them done.
    const a = await replica(args, env);
    const b = await replica(args, env);
    const both = [a, b];
    await readyzUntil(both, (r) => r.body.status === 'ready', 'ready', 10_000);

    const run = runPath('failover.redis', 'run-1');
    await putStatus(b.url, run, 'running');
    const viewer = follow(`${a.url}${runStreamPath('failover.redis', 'run-1')}`, {
      timeoutMs: 170_000,
    });
    cleanups.push(async () => viewer.close());
    await within(() => highestSeq(viewer) >= 1, 'the viewer on A to see the run start', 10_000);

    type Phase = 'before' | 'stopping' | 'down' | 'starting' | 'recovering' | 'after';
    let phase = 'before' as Phase;
    interface Ack {
      i: number;
      seq: number;
      at: number;
      phase: Phase;
    }
    const acks: Ack[] = [];
    const acksIn = (wanted: Phase) => acks.filter((ack) => ack.phase === wanted);
    const acked = (wanted: Phase) => acksIn(wanted).length;
    const refused: Array<{ i: number; status: number }> = [];
    let stop = false;
    // One writer through B, one append at a time: each entry's latency is its own.
    const writer = (async () => {
      for (let i = 1; i <= MAX_APPENDS && !stop; i += 1) {
        const sentIn = phase;
        const answer = await post(b.url, run, [{ kind: 'tick', id: `tick-${i}`, data: { i } }]);
        const at = performance.now();
        // An append counts in a phase only if it was sent and acknowledged within it.
        const inPhase: Phase = phase === sentIn ? phase : 'stopping';
        if (answer.status !== 200) refused.push({ i, status: answer.status });
        else acks.push({ i, seq: answer.body!.seqs![0]!, at, phase: inPhase });
        if (acked('after') >= AFTER_APPENDS) stop = true;
        await sleep(phase === 'down' ? DOWN_PAUSE_MS : PUSH_PAUSE_MS);
      }
    })();

    let toDegraded = 0;
    let toUp = 0;
    let outageMs = 0;
    let restartAt = 0;
    const duringOutage: Readiness[] = [];
    try {
      await within(() => acked('before') >= BEFORE_APPENDS, 'the appends before', 60_000);
      phase = 'stopping';
      await redis.stop();
      const stoppedAt = performance.now();
      phase = 'down';
      toDegraded = await readyzUntil(
        both,
        (r) =>
          r.status === 200 && r.body.status === 'degraded' && r.body.bus?.status === 'degraded',
        'bus degraded',
        10_000,
      );
      // Every answer while Redis is gone: still ready to serve (200), the bus degraded.
      const full = () =>
        performance.now() - stoppedAt >= OUTAGE_MS &&
        acked('down') >= DOWN_APPENDS &&
        duringOutage.length >= DOWN_ANSWERS;
      for (let round = 0; round < 120 && !full() && !stop; round += 1) {
        duringOutage.push(...(await Promise.all(both.map((server) => readyz(server.url)))));
        await sleep(500);
      }
      phase = 'starting';
      restartAt = performance.now();
      outageMs = restartAt - stoppedAt;
      await redis.start();
      phase = 'recovering';
      toUp = await readyzUntil(
        both,
        (r) => r.status === 200 && r.body.status === 'ready' && r.body.bus?.status === 'up',
        'ready, bus up',
        20_000,
      );
      phase = 'after';
      await writer;
    } finally {
      stop = true;
      await writer;
    }

    const stored = await readAllEntries(b.url, run);
    const lastSeq = stored.length;
    await readUntilSeq(viewer, lastSeq, 20_000);

    const frameOf = new Map(viewer.entries.map((frame) => [seqOfId(frame.id), frame]));
    const latency = (ack: Ack) => Math.max(0, (frameOf.get(ack.seq)?.at ?? Infinity) - ack.at);
    const before = acksIn('before');
    const down = acksIn('down');
    const after = acksIn('after');
    // How many entries came with each read of the body that brought one of a phase's entries.
    const perChunk = (phaseAcks: readonly Ack[]) => {
      const chunks = new Set(phaseAcks.map((ack) => frameOf.get(ack.seq)?.chunk));
      return [...chunks].map(
        (chunk) => viewer.entries.filter((frame) => frame.chunk === chunk).length,
      );
    };
    const summary = (phaseAcks: readonly Ack[]) => {
      const values = phaseAcks.map(latency);
      return (
        `${values.length} appends in ${perChunk(phaseAcks).length} reads, ` +
        `p50 ${ms(percentile(values, 50))}, p90 ${ms(percentile(values, 90))}, ` +
        `max ${ms(Math.max(...values))}`
      );
    };
    console.log(
      `Redis outage of ${ms(outageMs)}, pollSeconds ${POLL_SECONDS} (ack on B → frame on A):\n` +
        `  before: ${summary(before)}\n  down:   ${summary(down)}\n  after:  ${summary(after)}\n` +
        `  /readyz degraded ${ms(toDegraded)} after the stop, up ${ms(toUp)} after the start; ` +
        `${duringOutage.length} answers during the outage; ${lastSeq} entries stored`,
    );

    // Nothing refused, lost, duplicated or reordered: in the store and on the viewer.
    expect(refused).toEqual([]);
    const written = acks.length;
    expect(stored.map((entry) => entry.seq)).toEqual(oneTo(lastSeq));
    expect(ticks(stored).map((entry) => (entry.data as { i: number }).i)).toEqual(oneTo(written));
    expect(acks.map((ack) => ack.seq)).toEqual(ticks(stored).map((entry) => entry.seq));
    expect(viewer.reconnects).toBe(0);
    expect(
      viewer.frames.filter((frame) => frame.event === 'gap' || frame.event === 'error'),
    ).toEqual([]);
    expect(seqsOf(viewer)).toEqual(oneTo(lastSeq));

    // While Redis was gone, /readyz said so on every replica and every answer.
    expect(duringOutage.length).toBeGreaterThanOrEqual(DOWN_ANSWERS);
    for (const answer of duringOutage) {
      expect(answer).toMatchObject({
        status: 200,
        body: { status: 'degraded', store: { status: 'up' }, bus: { status: 'degraded' } },
      });
    }
    // While it was gone the viewer still got what was written, before Redis came back (all
    // but the last poll's worth), polled: a poll's entries together, one read per poll at most.
    expect(down.length).toBeGreaterThanOrEqual(DOWN_APPENDS);
    const seenWhileDown = down.filter((ack) => (frameOf.get(ack.seq)?.at ?? Infinity) < restartAt);
    expect(seenWhileDown.length).toBeGreaterThanOrEqual(down.length / 2);
    expect(perChunk(down).length).toBeLessThanOrEqual(outageMs / (POLL_SECONDS * 1000) + 2);
    // Before the outage and after it, pushed: most entries went out on their own, each as it
    // was appended, where a poll would have brought several at once.
    expect(before.length).toBe(BEFORE_APPENDS);
    expect(percentile(perChunk(before), 50)).toBe(1);
    expect(after.length).toBe(AFTER_APPENDS);
    expect(percentile(perChunk(after), 50)).toBe(1);
  }, 180_000);

  it('PostgreSQL restarted during appends: 503 with Retry-After meanwhile (never 500), every acknowledged append stored once, retries by producer id leave no duplicate, and the open stream catches up', async () => {
    const POLL_SECONDS = 1;
    const DOWN_MS = 5_000;
    const WRITERS = 2;
    const BATCHES = 80;
    const BATCH = 10;
    const STOP_AFTER = 20;
    const MAX_ATTEMPTS = 60;

    const postgres = await PrivatePostgres.start();
    cleanups.push(() => postgres.dispose());
    const redis = await PrivateRedis.start();
    cleanups.push(() => redis.dispose());
    const store = await postgres.createDatabase('tailwater');
    const args = ['--store', store, '--bus', redis.url];
    const env = { TAILWATER_POLL_SECONDS: String(POLL_SECONDS) };
    const a = await replica(args, env);
    const b = await replica(args, env);
    const both = [a, b];
    await readyzUntil(both, (r) => r.status === 200, 'ready', 10_000);

    const run = runPath('failover.postgres', 'run-1');
    await putStatus(b.url, run, 'running');
    const viewer = follow(`${a.url}${runStreamPath('failover.postgres', 'run-1')}`, {
      maxReconnects: 60,
      timeoutMs: 150_000,
    });
    cleanups.push(async () => viewer.close());
    await within(() => highestSeq(viewer) >= 1, 'the viewer on A to see the run start', 10_000);

    type Phase = 'before' | 'stopping' | 'down' | 'starting' | 'after';
    let phase = 'before' as Phase;
    const batchOf = (writer: number, batch: number) =>
      Array.from({ length: BATCH }, (_, index) => {
        const i = (writer * BATCHES + batch) * BATCH + index + 1;
        return { kind: 'tick', id: `w${writer}-${i}`, data: { i } };
      });
    interface Attempt {
      writer: number;
      batch: number;
      status: number;
      retryAfter: string | null;
      code: string | undefined;
      message: string | undefined;
      phase: Phase;
    }
    const attempts: Attempt[] = [];
    const acked = new Map<string, { seqs: number[]; duplicates: number; tries: number }>();
    const lastBefore = new Map<number, number>();
    // A writer that gives up stops the other one too: no loop outlives the test.
    let abort = false;
    let outage: Promise<void> | undefined;
    let stoppedAt = 0;
    let startedAt = 0;
    const restart = async () => {
      phase = 'stopping';
      await postgres.stop();
      stoppedAt = performance.now();
      phase = 'down';
      await sleep(DOWN_MS);
      phase = 'starting';
      await postgres.start();
      startedAt = performance.now();
      phase = 'after';
    };
    // Each writer sends its batches in turn, retrying a refused one with the same producer ids
    // after the Retry-After it was given, as a producer following docs/API.md does.
    const writer = async (w: number, server: ServerProcess) => {
      const base = server.url;
      for (let batch = 0; batch < BATCHES; batch += 1) {
        // Past STOP_AFTER a writer waits for PostgreSQL to be stopped, so that its next batches
        // are sent into the outage however long the stop takes.
        if (batch > STOP_AFTER) {
          await within(() => !['before', 'stopping'].includes(phase), 'the stop', 60_000);
        }
        const events = batchOf(w, batch);
        let done = false;
        for (let tries = 1; tries <= MAX_ATTEMPTS && !done && !abort; tries += 1) {
          const sentIn = phase;
          const answer = await post(base, run, events);
          attempts.push({
            writer: w,
            batch,
            status: answer.status,
            retryAfter: answer.retryAfter,
            code: answer.body?.error?.code,
            message: answer.body?.error?.message,
            phase: sentIn,
          });
          if (answer.status === 200) {
            acked.set(`${w}/${batch}`, {
              seqs: answer.body!.seqs!,
              duplicates: answer.body!.duplicates!,
              tries,
            });
            if (sentIn === 'before') lastBefore.set(w, batch);
            done = true;
          } else if (answer.status === 0 && alive(server) !== 'running') {
            abort = true;
            throw new Error(
              `writer ${w}: replica ${server.url} ${alive(server)} during the outage:\n` +
                server.output().slice(-4_000),
            );
          } else {
            const seconds = Number(answer.retryAfter);
            await sleep(
              Number.isFinite(seconds) && seconds > 0 ? Math.min(seconds, 2) * 1000 : 250,
            );
          }
        }
        if (!done) {
          abort = true;
          const last = attempts.filter((x) => x.writer === w && x.batch === batch).slice(-3);
          throw new Error(
            `writer ${w}: batch ${batch} still refused: ${JSON.stringify(last)}; ` +
              `its replica ${alive(server)}:\n${server.output().slice(-4_000)}`,
          );
        }
        if (w === 0 && batch === STOP_AFTER) outage = restart();
        await sleep(20);
      }
    };
    // /readyz on both replicas, every 250 ms, for as long as the writers run.
    const samples: Array<Readiness & { phase: Phase }> = [];
    let writing = true;
    const sampler = (async () => {
      for (let round = 0; round < 2_000 && writing; round += 1) {
        const sentIn = phase;
        for (const answer of await Promise.all(both.map((server) => readyz(server.url)))) {
          samples.push({ ...answer, phase: sentIn === phase ? sentIn : 'stopping' });
        }
        await sleep(250);
      }
    })();
    try {
      await Promise.all([writer(0, b), writer(1, a)]);
    } finally {
      abort = true;
      writing = false;
      await sampler;
      await outage?.catch(() => undefined);
    }
    expect(outage).toBeDefined();
    await readyzUntil(both, (r) => r.status === 200, 'ready again', 10_000);

    // A retry after the restart of what was acknowledged, with the same ids, stores nothing:
    // the first batch, the last acknowledged before the stop, and every batch that was refused.
    const refusedBatches = new Set(
      attempts.filter((x) => x.status !== 200).map((x) => `${x.writer}/${x.batch}`),
    );
    const replays = new Set<string>(refusedBatches);
    for (let w = 0; w < WRITERS; w += 1) {
      replays.add(`${w}/0`);
      replays.add(`${w}/${lastBefore.get(w) ?? 0}`);
    }
    const replayed: Array<{ key: string; answer: Answer }> = [];
    for (const key of replays) {
      const [w, batch] = key.split('/').map(Number) as [number, number];
      replayed.push({ key, answer: await post(b.url, run, batchOf(w, batch)) });
    }

    const stored = await readAllEntries(b.url, run);
    const lastSeq = stored.length;
    await readUntilSeq(viewer, lastSeq, 30_000);

    const refusals = attempts.filter((x) => x.status !== 200);
    const duplicatesOnRetry = [...acked.values()].reduce((sum, x) => sum + x.duplicates, 0);
    const errorFrames = viewer.frames.filter((frame) => frame.event === 'error');
    const downSamples = samples.filter((x) => x.phase === 'down');
    console.log(
      `PostgreSQL stopped (fast) for ${ms(startedAt - stoppedAt)} during appends of ${WRITERS} writers: ` +
        `${refusals.length} refusals (statuses ${JSON.stringify([...new Set(refusals.map((x) => x.status))])}, ` +
        `Retry-After ${JSON.stringify([...new Set(refusals.map((x) => x.retryAfter))])}), ` +
        `${refusedBatches.size} batches retried, ${duplicatesOnRetry} events acknowledged as duplicates on retry, ` +
        `${replayed.length} batches replayed after the restart; /readyz while down: ` +
        `${JSON.stringify([...new Set(downSamples.map((x) => x.status))])} (${downSamples.length} answers); ` +
        `viewer: ${viewer.reconnects} reconnects by Last-Event-ID, error frames ` +
        `${JSON.stringify(errorFrames.map((frame) => frame.data))}, failed attempts ` +
        `${JSON.stringify(viewer.failures)}; ${lastSeq} entries stored`,
    );

    // Neither replica died of the outage.
    expect(both.map(alive)).toEqual(['running', 'running']);
    // Refused while PostgreSQL was gone, and only then, always as 503 with Retry-After.
    expect(refusals.length).toBeGreaterThan(0);
    for (const refusal of refusals) {
      expect(refusal).toMatchObject({ status: 503, code: 'TW_STORE_UNAVAILABLE' });
      expect(refusal.retryAfter).toMatch(/^\d+$/);
    }
    expect(attempts.filter((x) => x.status === 200 && x.phase === 'down')).toEqual([]);
    // Every acknowledged event stored exactly once, at the seq it was acknowledged with.
    expect(stored.map((entry) => entry.seq)).toEqual(oneTo(lastSeq));
    const storedTicks = ticks(stored);
    expect(storedTicks).toHaveLength(WRITERS * BATCHES * BATCH);
    const seqById = new Map(storedTicks.map((entry) => [entry.id, entry.seq]));
    expect(seqById.size).toBe(storedTicks.length);
    for (const [key, ack] of acked) {
      const [w, batch] = key.split('/').map(Number) as [number, number];
      expect(batchOf(w, batch).map((event) => seqById.get(event.id))).toEqual(ack.seqs);
    }
    expect(acked.size).toBe(WRITERS * BATCHES);
    for (const { key, answer } of replayed) {
      expect({ key, status: answer.status, duplicates: answer.body?.duplicates }).toEqual({
        key,
        status: 200,
        duplicates: BATCH,
      });
      expect(answer.body?.seqs).toEqual(acked.get(key)!.seqs);
    }
    // /readyz said the store was gone while it was, and ready again after.
    expect(downSamples.length).toBeGreaterThan(0);
    for (const sample of downSamples) expect(sample.status).toBe(503);
    // The viewer on A waited the outage out on its open stream (docs/DEPLOYMENT.md: a store
    // that is unavailable for a while is not an error of the stream) and got everything once,
    // in order, when PostgreSQL was back.
    expect(viewer.frames.filter((frame) => frame.event === 'gap')).toEqual([]);
    expect(errorFrames).toEqual([]);
    expect(viewer.reconnects).toBe(0);
    expect(viewer.failures).toEqual([]);
    expect(seqsOf(viewer)).toEqual(oneTo(lastSeq));
  }, 180_000);
});

interface Outcome {
  code: number | string;
  stdout: string;
  stderr: string;
  listening: boolean;
}

/**
 * `tailwater serve` run as a user would, with no TAILWATER_* settings from this environment;
 * answers how it exited. One that starts listening fails the test: it is killed and reported.
 */
async function serveOnce(args: string[], timeoutMs = 30_000): Promise<Outcome> {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([key]) => !key.startsWith('TAILWATER_')),
  );
  // The default SQLite store lives under ./tailwater-data: not in the checkout.
  const cwd = await mkdtemp(join(tmpdir(), 'tailwater-serve-'));
  cleanups.push(() => rm(cwd, { recursive: true, force: true }));
  return new Promise((resolve) => {
    const child = spawn(
      process.execPath,
      [BIN, 'serve', '--port', '0', '--log-level', 'warn', ...args],
      { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stdout = '';
    let stderr = '';
    let listening = false;
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      if (/listening on/.test(stdout)) {
        listening = true;
        child.kill('SIGKILL');
      }
    });
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ code: code ?? signal ?? -1, stdout, stderr, listening });
    });
  });
}

function migrate(store: string): Promise<number> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, 'migrate', '--store', store], { timeout: 30_000 }, (error) =>
      resolve(error ? (typeof error.code === 'number' ? error.code : -1) : 0),
    );
  });
}

// test/services/backends-by-url.test.ts checks what openStore/openBus throw, in-process; these
// check what the operator sees: the process exits before it listens, with one line and a code.
describe('bad configuration is a clear error at start', () => {
  const LATEST = MIGRATIONS[MIGRATIONS.length - 1]!.version;

  it('a database at a newer schema version than the server knows: it exits at start, non-zero, with one line naming the versions, and leaves the database untouched', async () => {
    const database = await freshDatabase();
    cleanups.push(database.drop);
    expect(await migrate(database.url)).toBe(0);
    await pgAdmin(
      (client) =>
        client.query("INSERT INTO schema_migrations (version, name) VALUES ($1, 'future')", [
          LATEST + 1,
        ]),
      database.name,
    );
    const started = performance.now();
    const outcome = await serveOnce(['--store', database.url, '--bus', 'memory']);
    console.log(
      `newer schema: exit ${outcome.code} after ${ms(performance.now() - started)}: ${outcome.stderr.trim()}`,
    );
    expect(outcome.listening).toBe(false);
    expect(typeof outcome.code).toBe('number');
    expect(outcome.code).not.toBe(0);
    expect(outcome.stderr).toMatch(
      new RegExp(
        `^tailwater: .*database at .* has schema version ${LATEST + 1}, newer than this Tailwater knows \\(${LATEST}\\)`,
      ),
    );
    expect(outcome.stderr.trim().split('\n')).toHaveLength(1);
    const versions = await pgAdmin(
      async (client) =>
        (await client.query<{ version: number }>('SELECT version FROM schema_migrations')).rows,
      database.name,
    );
    expect(versions.map((row) => row.version).sort((x, y) => x - y)).toEqual([
      ...MIGRATIONS.map((migration) => migration.version),
      LATEST + 1,
    ]);
  }, 60_000);

  it('an unreachable PostgreSQL: exit 1 with one line naming it, without its password', async () => {
    const port = await freePort();
    const outcome = await serveOnce([
      '--store',
      `postgres://postgres:hunter2@127.0.0.1:${port}/db`,
    ]);
    expect(outcome).toMatchObject({ listening: false, code: 1 });
    expect(outcome.stderr).toMatch(new RegExp(`^tailwater: .*127\\.0\\.0\\.1:${port}`));
    expect(outcome.stderr).not.toContain('hunter2');
    expect(outcome.stderr.trim().split('\n')).toHaveLength(1);
  }, 60_000);

  it('an unreachable Redis: exit 1 with one line naming it', async () => {
    const database = await freshDatabase();
    cleanups.push(database.drop);
    const port = await freePort();
    const outcome = await serveOnce([
      '--store',
      database.url,
      '--bus',
      `redis://127.0.0.1:${port}`,
    ]);
    console.log(`unreachable Redis: exit ${outcome.code}: ${outcome.stderr.trim()}`);
    expect(outcome.listening).toBe(false);
    expect(outcome.stderr).toMatch(new RegExp(`^tailwater: .*redis://127\\.0\\.0\\.1:${port}`));
    expect(outcome.stderr.trim().split('\n')).toHaveLength(1);
    // docs/DEPLOYMENT.md: 1 for a service it cannot reach, 2 for a bad setting.
    expect(outcome.code).toBe(1);
  }, 60_000);

  it.each([
    [
      'a store of an unknown scheme',
      ['--store', 'mysql://root@127.0.0.1/db'],
      /^tailwater: bad setting: store: /,
    ],
    [
      'a bus of an unknown scheme',
      ['--bus', 'kafka://127.0.0.1:9092'],
      /^tailwater: bad setting: bus: /,
    ],
    [
      'a Redis URL that is not one',
      ['--bus', 'redis://127.0.0.1:6379/x'],
      /^tailwater: bad setting: bus: /,
    ],
  ])(
    '%s: exit 2 with one line naming the setting',
    async (_what, args, message) => {
      const outcome = await serveOnce(args);
      expect(outcome).toMatchObject({ listening: false, code: 2 });
      expect(outcome.stderr).toMatch(message);
      expect(outcome.stderr.trim().split('\n')).toHaveLength(1);
    },
    60_000,
  );
});
