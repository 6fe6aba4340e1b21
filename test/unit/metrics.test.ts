import { request as httpRequest } from 'node:http';
import type { ClientRequest } from 'node:http';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { SearchIndexer } from '../../src/engine/search-indexer.js';
import { runKey, topicKey } from '../../src/model/stream-key.js';
import { runStreamPath, topicStreamPath } from '../helpers/api.js';
import { liveApps } from '../helpers/app.js';
import type { TestApp } from '../helpers/app.js';
import { hasEvent, seqOfId } from '../helpers/sse.js';
import type { SseEvent } from '../helpers/sse.js';

// GET /metrics: Prometheus' text format (prom-client), the engine's counts and what its viewers
// hold right now, plus the process's own metrics, all prefixed tailwater_.

const COUNTERS = [
  'tailwater_store_shared_reads_total',
  'tailwater_store_catch_up_reads_total',
  'tailwater_slow_viewer_demotions_total',
  'tailwater_stream_ends_total',
];
const GAUGES = [
  'tailwater_stream_connections',
  'tailwater_active_streams',
  'tailwater_viewers_paging',
  'tailwater_viewer_pending_bytes',
  'tailwater_viewer_pending_bytes_max',
  'tailwater_search_index_lag_seconds',
  'tailwater_search_index_pending_entries',
];

const { start, open, closeAll } = liveApps({ pollSeconds: 0.05 });
const pausedRequests: ClientRequest[] = [];

afterEach(async () => {
  vi.restoreAllMocks();
  for (const req of pausedRequests.splice(0)) req.destroy();
  await closeAll();
});

// ---- helpers ----------------------------------------------------------------------------

async function scrape(t: TestApp): Promise<string> {
  const response = await t.app.inject({ method: 'GET', url: '/metrics' });
  expect(response.statusCode).toBe(200);
  return response.body;
}

/** The value of one sample (`name` or `name{labels}`), or undefined if it is not there. */
function sample(
  text: string,
  name: string,
  labels: Record<string, string> = {},
): number | undefined {
  const wanted = Object.entries(labels)
    .map(([key, value]) => `${key}="${value}"`)
    .join(',');
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || line.trim() === '') continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    if ((match[2] ?? '') !== wanted) continue;
    return Number(match[3]);
  }
  return undefined;
}

async function metric(t: TestApp, name: string, labels?: Record<string, string>) {
  return sample(await scrape(t), name, labels);
}

/** Scrapes until `name` satisfies `check`, or fails after `timeoutMs`. */
async function untilMetric(
  t: TestApp,
  name: string,
  check: (value: number | undefined) => boolean,
  labels?: Record<string, string>,
  timeoutMs = 10_000,
): Promise<number | undefined> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await metric(t, name, labels);
    if (check(value)) return value;
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting on ${name}${JSON.stringify(labels ?? {})}: ${value}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const seqs = (events: readonly SseEvent[]) =>
  events.filter((e) => e.id !== undefined && e.event !== 'cursor').map((e) => seqOfId(e.id));
const hasSeq = (seq: number) => (events: SseEvent[]) => seqs(events).includes(seq);

async function tick(t: TestApp, topic: string, data: unknown): Promise<number> {
  return (await t.ingest.appendEvents(topicKey(topic), [{ kind: 'tick', data }])).seqs[0]!;
}

/** A viewer whose socket stops reading until `resume()`. */
function openPaused(t: TestApp, path: string): Promise<{ resume(): void }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${t.url}${path}`, { agent: false }, (res) => {
      res.pause();
      res.on('error', () => undefined);
      resolve({ resume: () => res.resume() });
    });
    req.on('error', reject);
    pausedRequests.push(req);
    req.end();
  });
}

// ---- the format ---------------------------------------------------------------------------

describe('GET /metrics', () => {
  it('answers 200 in the Prometheus text format with every Tailwater metric', async () => {
    const t = await start();
    const response = await fetch(`${t.url}/metrics`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(
      /^text\/plain; version=0\.0\.4; charset=utf-8$/,
    );
    const text = await response.text();

    for (const name of COUNTERS) {
      expect(text).toMatch(new RegExp(`^# HELP ${name} \\S`, 'm'));
      expect(text).toContain(`\n# TYPE ${name} counter\n`);
    }
    for (const name of GAUGES) {
      expect(text).toMatch(new RegExp(`^# HELP ${name} \\S`, 'm'));
      expect(text).toContain(`\n# TYPE ${name} gauge\n`);
    }
    // Nothing is open yet, and nothing was read.
    for (const name of [
      ...COUNTERS.filter((n) => n !== 'tailwater_stream_ends_total'),
      ...GAUGES,
    ]) {
      expect(sample(text, name), name).toBe(0);
    }
  });

  it('reports the longest event-loop block of the last seconds, and a scrape does not reset it', async () => {
    const t = await start();
    // A monitor measures gaps between its ticks: it needs one tick first.
    await new Promise((resolve) => setTimeout(resolve, 50));
    await scrape(t);
    // Hold the loop for 150 ms, right after a scrape (where prom-client's own maximum is blind).
    const until = performance.now() + 150;
    while (performance.now() < until) {
      // busy: nothing else runs
    }
    await new Promise((resolve) => setTimeout(resolve, 30));
    const first = sample(await scrape(t), 'tailwater_event_loop_block_seconds');
    const second = sample(await scrape(t), 'tailwater_event_loop_block_seconds');
    expect(first).toBeGreaterThanOrEqual(0.14);
    expect(second).toBe(first);
  });

  it('reports how far the search index is behind: entries waiting and the age of the oldest, 0 once indexed', async () => {
    const t = await start();
    await t.ingest.appendLog('etl.daily', 'r1', { text: 'to be indexed\n' });
    await new Promise((resolve) => setTimeout(resolve, 30));
    const behind = await scrape(t);
    expect(sample(behind, 'tailwater_search_index_pending_entries')).toBeGreaterThan(0);
    expect(sample(behind, 'tailwater_search_index_lag_seconds')).toBeGreaterThan(0);
    await new SearchIndexer(t.store, { intervalSeconds: 1 }).catchUp();
    const current = await scrape(t);
    expect(sample(current, 'tailwater_search_index_pending_entries')).toBe(0);
    expect(sample(current, 'tailwater_search_index_lag_seconds')).toBe(0);
  });

  it("includes the process's default metrics, prefixed tailwater_", async () => {
    const t = await start();
    const text = await scrape(t);
    for (const name of [
      'tailwater_process_cpu_user_seconds_total',
      'tailwater_process_start_time_seconds',
      'tailwater_nodejs_heap_size_used_bytes',
      'tailwater_nodejs_eventloop_lag_seconds',
    ]) {
      expect(text).toContain(`# TYPE ${name} `);
      expect(Number.isFinite(sample(text, name)), name).toBe(true);
    }
    expect(sample(text, 'tailwater_process_start_time_seconds')).toBeGreaterThan(1.7e9);
    // Every metric is prefixed.
    const names = [...text.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]!);
    expect(names.length).toBeGreaterThan(COUNTERS.length + GAUGES.length);
    expect(names.filter((name) => !name.startsWith('tailwater_'))).toEqual([]);
  });

  it('keeps each app its own registry, so two servers in one process count apart', async () => {
    const a = await start();
    const b = await start();
    await tick(a, 'prices', 1);
    const viewer = await open(a, topicStreamPath('prices'));
    await viewer.waitFor(hasSeq(1));
    expect(await metric(a, 'tailwater_stream_connections')).toBe(1);
    expect(await metric(b, 'tailwater_stream_connections')).toBe(0);
  });
});

// ---- the gauges -----------------------------------------------------------------------------

describe('connection and stream gauges', () => {
  it('follow viewers opening and closing', async () => {
    const t = await start();
    const gauges = async () => {
      const text = await scrape(t);
      return [
        sample(text, 'tailwater_stream_connections'),
        sample(text, 'tailwater_active_streams'),
      ];
    };
    expect(await gauges()).toEqual([0, 0]);

    const a1 = await open(t, topicStreamPath('a'));
    const a2 = await open(t, topicStreamPath('a'));
    const b = await open(t, runStreamPath('etl.daily', 'r1'));
    expect([a1.status, a2.status, b.status]).toEqual([200, 200, 200]);
    expect(await gauges()).toEqual([3, 2]);

    a1.close();
    await untilMetric(t, 'tailwater_stream_connections', (v) => v === 2);
    expect(await gauges()).toEqual([2, 2]);

    b.close();
    await untilMetric(t, 'tailwater_stream_connections', (v) => v === 1);
    expect(await gauges()).toEqual([1, 1]);

    a2.close();
    await untilMetric(t, 'tailwater_stream_connections', (v) => v === 0);
    expect(await gauges()).toEqual([0, 0]);
    expect(t.hub.activeConnections).toBe(0);
  });

  it('show a viewer whose socket fell behind as paging, with its pending bytes, until it drains', async () => {
    const t = await start({ maxPendingBytesPerViewer: 64 * 1024, replayBufferBytes: 0 });
    await tick(t, 'big', 'first');
    const slow = await openPaused(t, topicStreamPath('big'));
    await untilMetric(t, 'tailwater_stream_connections', (v) => v === 1);
    await untilMetric(t, 'tailwater_viewers_paging', (v) => v === 0); // it has gone live

    // Write until the paused socket's buffers are full and the engine sends it back to paging.
    const payload = 'z'.repeat(32 * 1024);
    for (let i = 0; i < 2000 && t.hub.stats.slowViewerDemotions === 0; i += 1) {
      await tick(t, 'big', payload);
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(t.hub.stats.slowViewerDemotions).toBe(1);
    const text = await scrape(t);
    expect(sample(text, 'tailwater_slow_viewer_demotions_total')).toBe(1);
    expect(sample(text, 'tailwater_viewers_paging')).toBe(1);
    const pending = sample(text, 'tailwater_viewer_pending_bytes')!;
    const pendingMax = sample(text, 'tailwater_viewer_pending_bytes_max')!;
    expect(pendingMax).toBeGreaterThan(64 * 1024);
    expect(pending).toBe(pendingMax); // one viewer holds all of it

    // Once it reads again, it catches up from the store and rejoins live with nothing pending.
    slow.resume();
    await untilMetric(t, 'tailwater_viewers_paging', (v) => v === 0, undefined, 20_000);
    await untilMetric(t, 'tailwater_viewer_pending_bytes_max', (v) => v === 0, undefined, 20_000);
    expect(await metric(t, 'tailwater_viewer_pending_bytes')).toBe(0);
    expect(await metric(t, 'tailwater_store_catch_up_reads_total')).toBeGreaterThan(0);
    expect(await metric(t, 'tailwater_slow_viewer_demotions_total')).toBe(1);
  });
});

// ---- the counters ---------------------------------------------------------------------------

describe('read counters', () => {
  it('count shared reads growing with appends while a viewer watches, and not at all before', async () => {
    // No poll: every shared read is one an append caused.
    const t = await start({ pollSeconds: 60 });
    for (let i = 1; i <= 3; i += 1) await tick(t, 'prices', i);
    expect(await metric(t, 'tailwater_store_shared_reads_total')).toBe(0);

    const viewer = await open(t, topicStreamPath('prices'));
    await viewer.waitFor(hasSeq(3));
    let before = (await metric(t, 'tailwater_store_shared_reads_total'))!;
    for (let i = 4; i <= 8; i += 1) {
      await tick(t, 'prices', i);
      await viewer.waitFor(hasSeq(i));
      const now = (await metric(t, 'tailwater_store_shared_reads_total'))!;
      expect(now, `after append ${i}`).toBeGreaterThan(before);
      before = now;
    }
    expect(before).toBe(t.hub.stats.sharedReads);
    expect(before).toBe(t.hub.tailer(topicKey('prices'))!.sharedReads);
  });

  it('time each batch fanned out to live viewers by phase, and none while no viewer is live', async () => {
    const t = await start({ pollSeconds: 60 });
    const count = (phase: string) => metric(t, 'tailwater_live_delivery_seconds_count', { phase });
    await tick(t, 'prices', 1);
    expect((await count('write')) ?? 0).toBe(0);
    const viewer = await open(t, topicStreamPath('prices'));
    await viewer.waitFor(hasSeq(1));
    for (let i = 2; i <= 4; i += 1) {
      await tick(t, 'prices', i);
      await viewer.waitFor(hasSeq(i));
    }
    const text = await scrape(t);
    // Each append was its own batch: three batches, each timed in all three phases.
    for (const phase of ['queued', 'read', 'write']) {
      expect(sample(text, 'tailwater_live_delivery_seconds_count', { phase }), phase).toBe(3);
      const sum = sample(text, 'tailwater_live_delivery_seconds_sum', { phase })!;
      expect(sum, phase).toBeGreaterThanOrEqual(0);
      // Well under the seconds a stuck clock or a misread time would show.
      expect(sum, phase).toBeLessThan(10);
    }
  });

  it('counts catch-up reads of a viewer paging from the store, and none for one served live', async () => {
    const t = await start({ replayBufferBytes: 0, readBatchEntries: 5 });
    for (let i = 1; i <= 20; i += 1) await tick(t, 'prices', i);
    const live = await open(t, topicStreamPath('prices'), { 'Last-Event-ID': '20' });
    await untilMetric(t, 'tailwater_stream_connections', (v) => v === 1);
    await tick(t, 'prices', 21);
    await live.waitFor(hasSeq(21));
    expect(await metric(t, 'tailwater_store_catch_up_reads_total')).toBe(0);

    const late = await open(t, topicStreamPath('prices'));
    await late.waitFor(hasSeq(21));
    // 21 entries, 5 a page: at least 5 pages.
    expect(await metric(t, 'tailwater_store_catch_up_reads_total')).toBeGreaterThanOrEqual(5);
  });
});

describe('tailwater_stream_ends_total', () => {
  it('counts streams ended by the server, by reason: maxBytes, then shutdown', async () => {
    const t = await start({ maxStreamBytes: 300 });
    for (let i = 1; i <= 20; i += 1) await tick(t, 'prices', `tick number ${i}`);
    expect(await metric(t, 'tailwater_stream_ends_total', { reason: 'maxBytes' })).toBeUndefined();

    const capped = await open(t, topicStreamPath('prices'));
    await capped.waitFor(hasEvent('end'));
    expect(JSON.parse(capped.events.at(-1)!.data)).toMatchObject({ reason: 'maxBytes' });
    await untilMetric(t, 'tailwater_stream_ends_total', (v) => v === 1, { reason: 'maxBytes' });

    // A viewer leaving on its own is not an end the server made.
    const leaving = await open(t, topicStreamPath('prices'), { 'Last-Event-ID': '20' });
    expect(leaving.status).toBe(200);
    await untilMetric(t, 'tailwater_stream_connections', (v) => v === 1);
    leaving.close();
    await untilMetric(t, 'tailwater_stream_connections', (v) => v === 0);

    const watchers = [
      await open(t, topicStreamPath('prices'), { 'Last-Event-ID': '20' }),
      await open(t, runStreamPath('etl.daily', 'r1')),
    ];
    await untilMetric(t, 'tailwater_stream_connections', (v) => v === 2);
    t.hub.shutdown();
    for (const watcher of watchers) await watcher.waitFor(hasEvent('end'));
    await untilMetric(t, 'tailwater_stream_ends_total', (v) => v === 2, { reason: 'shutdown' });
    const text = await scrape(t);
    expect(sample(text, 'tailwater_stream_ends_total', { reason: 'maxBytes' })).toBe(1);
    const ends = text.split('\n').filter((line) => line.startsWith('tailwater_stream_ends_total'));
    expect(ends.sort()).toEqual([
      'tailwater_stream_ends_total{reason="maxBytes"} 1',
      'tailwater_stream_ends_total{reason="shutdown"} 2',
    ]);
  });

  it('counts runFinished, idleTimeout and maxDuration ends, and a store failure as error', async () => {
    const t = await start({
      finishGraceSeconds: 0.1,
      maxIdleSeconds: 0.3,
      maxStreamSeconds: 0.6,
    });
    await t.ingest.putRun('etl.daily', 'done', { status: 'running' });
    await t.ingest.putRun('etl.daily', 'done', { status: 'success' });
    await t.ingest.putRun('etl.daily', 'idle', { status: 'running' });
    const finished = await open(t, runStreamPath('etl.daily', 'done'));
    const idle = await open(t, runStreamPath('etl.daily', 'idle'));
    // A topic never ends on its own: only its lifetime ends it.
    const lifetime = await open(t, topicStreamPath('prices'));
    for (const reader of [finished, idle, lifetime]) await reader.waitFor(hasEvent('end'));
    await untilMetric(t, 'tailwater_stream_ends_total', (v) => v === 1, { reason: 'maxDuration' });
    const text = await scrape(t);
    expect(sample(text, 'tailwater_stream_ends_total', { reason: 'runFinished' })).toBe(1);
    expect(sample(text, 'tailwater_stream_ends_total', { reason: 'idleTimeout' })).toBe(1);

    await t.ingest.putRun('etl.daily', 'broken', { status: 'running' });
    const broken = await open(t, runStreamPath('etl.daily', 'broken'));
    await broken.waitFor(hasSeq(1));
    vi.spyOn(t.store, 'readEntries').mockRejectedValue(new Error('disk I/O error'));
    await t.ingest.appendLog('etl.daily', 'broken', { text: 'unreadable\n' });
    await broken.waitFor(hasEvent('error'));
    await untilMetric(t, 'tailwater_stream_ends_total', (v) => v === 1, { reason: 'error' });
    expect(t.hub.tailer(runKey('etl.daily', 'broken'))).toBeUndefined();
  });
});
