import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Entry } from '../../src/model/entry.js';
import { readAllEntries, runPath, runStreamPath } from '../helpers/api.js';
import {
  follow,
  gauge,
  percentile,
  readUntil,
  startFleet,
  startNginx,
  within,
} from '../helpers/fleet.js';
import type { Fleet, Viewer } from '../helpers/fleet.js';
import { seqOfId } from '../helpers/sse.js';
import { sleep } from '../helpers/wait.js';

// Issue 13's fleet, for real: three `tailwater serve` processes on one PostgreSQL database and
// one Redis, behind nginx running docs/nginx.conf (ports replaced). Needs the services of
// scripts/services.sh (docs/SERVICES.md) and a build (`npm run build`): it runs dist/.

const REPLICAS = 3;
// The fleet's pollSeconds: far above a push's latency, so what arrives sooner was pushed.
const POLL_SECONDS = 30;

/** The seqs of a viewer's entry frames, in the order received. */
const seqsOf = (viewer: Viewer): number[] => viewer.entries.map((frame) => seqOfId(frame.id));

const oneTo = (n: number): number[] => Array.from({ length: n }, (_, index) => index + 1);

/** POSTs a batch of events, answering the status and the body (null when the request failed). */
async function post(
  base: string,
  run: string,
  events: readonly unknown[],
): Promise<{ status: number; body: { seqs: number[]; duplicates: number } | null }> {
  try {
    const response = await fetch(`${base}${run}/events`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ events }),
    });
    const text = await response.text();
    return { status: response.status, body: response.ok ? JSON.parse(text) : null };
  } catch {
    return { status: 0, body: null };
  }
}

/** A request retried, with a pause, until it answers 2xx: a producer behind a failing replica. */
async function withRetries<T extends { status: number }>(
  send: () => Promise<T>,
  attempts = 40,
): Promise<T & { tries: number }> {
  let last: T | undefined;
  for (let tries = 1; tries <= attempts; tries += 1) {
    last = await send();
    if (last.status >= 200 && last.status < 300) return { ...last, tries };
    await sleep(100);
  }
  throw new Error(`still failing after ${attempts} attempts: ${last?.status}`);
}

const ticks = (entries: readonly Entry[]) => entries.filter((entry) => entry.kind === 'tick');

describe('three replicas behind nginx, on one PostgreSQL and one Redis', () => {
  let fleet: Fleet;

  beforeAll(async () => {
    fleet = await startFleet(REPLICAS, { TAILWATER_POLL_SECONDS: String(POLL_SECONDS) });
  }, 60_000);

  afterAll(async () => {
    await fleet?.stop();
  }, 30_000);

  it('three replicas behind nginx: a writer appending through any replica and viewers reading through any replica see every entry, in order, once', async () => {
    const run = runPath('fleet.order', 'run-1');
    const stream = runStreamPath('fleet.order', 'run-1');
    const urls = fleet.replicas.map((replica) => replica.url);
    // Six viewers: three through nginx (round robin spreads them), one on each replica.
    const viewers = [
      ...[0, 1, 2].map(() => follow(`${fleet.nginx.url}${stream}`, { timeoutMs: 45_000 })),
      ...urls.map((url) => follow(`${url}${stream}`, { timeoutMs: 45_000 })),
    ];
    // One writer, its batches sent in turn to each replica and to nginx.
    const targets = [...urls, fleet.nginx.url];
    const TOTAL = 1_000;
    const BATCH = 50;
    for (let batch = 0; batch < TOTAL / BATCH; batch += 1) {
      const events = Array.from({ length: BATCH }, (_, index) => ({
        kind: 'tick',
        data: { i: batch * BATCH + index + 1 },
      }));
      const answer = await post(targets[batch % targets.length]!, run, events);
      expect(answer.status).toBe(200);
    }
    const stored = await readAllEntries(fleet.nginx.url, run);
    const lastSeq = stored.length;
    await Promise.all(viewers.map((viewer) => readUntil(viewer, lastSeq, 20_000)));

    expect(stored.map((entry) => entry.seq)).toEqual(oneTo(lastSeq));
    expect(ticks(stored).map((entry) => (entry.data as { i: number }).i)).toEqual(oneTo(TOTAL));
    for (const viewer of viewers) {
      expect(viewer.reconnects).toBe(0);
      expect(viewer.frames.filter((frame) => frame.event === 'gap')).toEqual([]);
      expect(seqsOf(viewer)).toEqual(oneTo(lastSeq));
      const seen = viewer.entries.filter((frame) => frame.event === 'tick');
      expect(
        seen.map((frame) => (JSON.parse(frame.data) as { data: { i: number } }).data.i),
      ).toEqual(oneTo(TOTAL));
    }
  });

  it('a viewer on replica A sees each entry appended through replica B before the next is sent, 50 in less than one poll: pushed, not polled', async () => {
    const [a, b] = fleet.replicas;
    const run = runPath('fleet.latency', 'run-1');
    // The run exists and the viewer is live on A before the first measured append.
    expect((await post(b!.url, run, [{ kind: 'warmup', data: {} }])).status).toBe(200);
    const viewer = follow(`${a!.url}${runStreamPath('fleet.latency', 'run-1')}`, {
      timeoutMs: 60_000,
    });
    await within(() => viewer.entries.length >= 1, 'the viewer on A to catch up', 10_000);

    const APPENDS = 50;
    const latencies: number[] = [];
    const started = performance.now();
    for (let index = 0; index < APPENDS; index += 1) {
      const answer = await post(b!.url, run, [{ kind: 'tick', data: { i: index } }]);
      const acked = performance.now();
      expect(answer.status).toBe(200);
      const seq = answer.body!.seqs[0]!;
      await within(
        () => viewer.entries.some((frame) => seqOfId(frame.id) === seq),
        `seq ${seq} on replica A`,
        POLL_SECONDS * 1000,
      );
      const frame = viewer.entries.find((candidate) => seqOfId(candidate.id) === seq)!;
      // A frame may even beat the acknowledgement back to the writer: that counts as 0.
      latencies.push(Math.max(0, frame.at - acked));
      await sleep(10);
    }
    const elapsedMs = performance.now() - started;
    viewer.close();
    await viewer.done;

    const p50 = percentile(latencies, 50);
    const p99 = percentile(latencies, 99);
    const max = Math.max(...latencies);
    console.log(
      `cross-replica latency (ack on B → frame on A), ${APPENDS} appends: ` +
        `p50 ${p50.toFixed(1)} ms, p99 ${p99.toFixed(1)} ms, max ${max.toFixed(1)} ms; ` +
        `${elapsedMs.toFixed(0)} ms in all`,
    );
    // Each append waited for its frame before the next was sent, and all of them took less
    // than one pollSeconds: at most one poll fell among them, so at most one frame was polled.
    expect(latencies).toHaveLength(APPENDS);
    expect(elapsedMs).toBeLessThan(POLL_SECONDS * 1000);
  });

  it("routed by stream (docs/nginx.conf's hash $uri consistent): all viewers of one stream land on one replica, where round robin spreads them", async () => {
    const ports = fleet.replicas.map((replica) => Number(new URL(replica.url).port));
    const routed = await startNginx(ports, { routeByStream: true });
    const STREAMS = 4;
    const PER_STREAM = 4;
    /** Sums a gauge over the replicas once it has settled on `expected`, or fails. */
    const settled = async (name: string, expected: number) => {
      let sum = Number.NaN;
      for (let round = 0; round < 100; round += 1) {
        const values = await Promise.all(fleet.replicas.map((replica) => gauge(replica.url, name)));
        sum = values.reduce((a, b) => a + b, 0);
        if (sum === expected) return sum;
        await sleep(50);
      }
      return sum;
    };
    /** Opens PER_STREAM viewers of each of STREAMS streams through `base`; answers them. */
    const open = (base: string, label: string) =>
      Array.from({ length: STREAMS * PER_STREAM }, (_, index) =>
        follow(`${base}${runStreamPath('fleet.routed', `${label}-${index % STREAMS}`)}`, {
          timeoutMs: 20_000,
        }),
      );
    const closeAll = async (viewers: Viewer[]) => {
      for (const viewer of viewers) viewer.close();
      await Promise.all(viewers.map((viewer) => viewer.done));
    };
    try {
      expect(await settled('tailwater_stream_connections', 0)).toBe(0);
      const byStream = open(routed.url, 'hashed');
      expect(await settled('tailwater_stream_connections', STREAMS * PER_STREAM)).toBe(
        STREAMS * PER_STREAM,
      );
      // One replica per stream: the fleet holds exactly one reader for each.
      expect(await settled('tailwater_active_streams', STREAMS)).toBe(STREAMS);
      await closeAll(byStream);
      expect(await settled('tailwater_stream_connections', 0)).toBe(0);

      const roundRobin = open(fleet.nginx.url, 'spread');
      expect(await settled('tailwater_stream_connections', STREAMS * PER_STREAM)).toBe(
        STREAMS * PER_STREAM,
      );
      const spread = await settled('tailwater_active_streams', STREAMS * REPLICAS);
      await closeAll(roundRobin);
      console.log(
        `${STREAMS} streams × ${PER_STREAM} viewers: ${STREAMS} store readers routed by stream, ` +
          `${spread} round robin`,
      );
      expect(spread).toBeGreaterThan(STREAMS);
    } finally {
      await routed.stop();
    }
  });

  it('kill -9 of a replica mid-stream: its viewers resume through nginx on another replica, 0 lost, 0 duplicated; writers retrying with producer ids leave no duplicates', async () => {
    const run = runPath('fleet.failover', 'run-1');
    const stream = runStreamPath('fleet.failover', 'run-1');
    // Six viewers through nginx: round robin puts two on each replica, the victim's included.
    const viewers = Array.from({ length: 6 }, () =>
      follow(`${fleet.nginx.url}${stream}`, { maxReconnects: 20, timeoutMs: 60_000 }),
    );
    const victim = fleet.replicas[1]!;
    // Four writers at once through nginx, each with its own producer ids, retrying any failure
    // (a refused connection, a 502 for a request the dying replica had taken) with the same ids.
    const WRITERS = 4;
    const PER_WRITER = 250;
    const BATCH = 25;
    const TOTAL = WRITERS * PER_WRITER;
    const batchOf = (writer: number, batch: number) =>
      Array.from({ length: BATCH }, (_, index) => {
        const i = writer * PER_WRITER + batch * BATCH + index + 1;
        return { kind: 'tick', id: `writer-${i}`, data: { i } };
      });
    let acked = 0;
    let retried = 0;
    let duplicates = 0;
    let killed: Promise<number | string> | undefined;
    const acks = new Map<string, number[]>();
    const writer = async (w: number) => {
      for (let batch = 0; batch < PER_WRITER / BATCH; batch += 1) {
        const answer = await withRetries(() => post(fleet.nginx.url, run, batchOf(w, batch)));
        acks.set(`${w}/${batch}`, answer.body!.seqs);
        retried += answer.tries - 1;
        duplicates += answer.body!.duplicates;
        acked += 1;
        // Halfway, while the other writers' requests are in flight and the viewers are live.
        if (acked === (WRITERS * PER_WRITER) / BATCH / 2) killed = victim.stop('SIGKILL');
        await sleep(10);
      }
    };
    await Promise.all(Array.from({ length: WRITERS }, (_, w) => writer(w)));
    expect(await killed).toBe('SIGKILL');
    // A writer that never saw its acknowledgement sends the batch again, with the same ids:
    // every event is acknowledged as a duplicate with its original seq, nothing is stored twice.
    const replay = await withRetries(() => post(fleet.nginx.url, run, batchOf(0, 0)));
    expect(replay.body!.duplicates).toBe(BATCH);
    expect(replay.body!.seqs).toEqual(acks.get('0/0'));

    const stored = await readAllEntries(fleet.nginx.url, run);
    const lastSeq = stored.length;
    expect(stored.map((entry) => entry.seq)).toEqual(oneTo(lastSeq));
    const storedTicks = ticks(stored);
    const written = storedTicks.map((entry) => (entry.data as { i: number }).i);
    expect(written.sort((x, y) => x - y)).toEqual(oneTo(TOTAL));
    const ids = storedTicks.map((entry) => entry.id);
    expect(new Set(ids).size).toBe(TOTAL);
    await Promise.all(viewers.map((viewer) => readUntil(viewer, lastSeq, 30_000)));
    for (const viewer of viewers) {
      expect(viewer.frames.filter((frame) => frame.event === 'gap')).toEqual([]);
      expect(seqsOf(viewer)).toEqual(oneTo(lastSeq));
    }
    const resumed = viewers.filter((viewer) => viewer.reconnects > 0).length;
    console.log(
      `kill -9 mid-stream: ${resumed} of ${viewers.length} viewers resumed through nginx, ` +
        `${retried} append retries, ${duplicates} acknowledged as duplicates, ` +
        `${lastSeq} entries stored`,
    );
    expect(resumed).toBeGreaterThan(0);
  });
});
