import { request as httpRequest } from 'node:http';
import type { ClientRequest } from 'node:http';
import { EventSource } from 'eventsource';
import { createParser } from 'eventsource-parser';
import { MemoryBus } from '../../src/bus/memory.js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Entry, NewEvent } from '../../src/model/entry.js';
import type { Run } from '../../src/model/run.js';
import type { StreamKey } from '../../src/model/stream-key.js';
import { runKey, streamId, topicKey } from '../../src/model/stream-key.js';
import { RUNS_FEED_TOPIC } from '../../src/store/store.js';
import { httpJson, runPath as runUrl, runStreamPath } from '../helpers/api.js';
import { appendLogLine, liveApps, seedRunningRun } from '../helpers/app.js';
import type { TestApp } from '../helpers/app.js';
import {
  closedWithin,
  CONTROL_FRAMES,
  endOf,
  entryEvents,
  hasEvent,
  hasSeq,
  openSse,
  range,
  seqs,
  watchClosed,
} from '../helpers/sse.js';
import type { SseEvent, SseReader } from '../helpers/sse.js';
import { sleep, until } from '../helpers/wait.js';

// Native SSE streaming over real loopback sockets (docs/API.md, "Streaming"),
// with the behaviours of the OpenMetadata and ZenML originals (docs/API.md, "Dialects").

const PIPELINE = 'etl.daily';
const RUN = 'scheduled__2026-08-10T00:00:00+00:00';
const KEY = runKey(PIPELINE, RUN);

const { start, open, track, closeAll } = liveApps({ pollSeconds: 0.05, finishGraceSeconds: 0.2 });
const sources: EventSource[] = [];

afterEach(async () => {
  vi.restoreAllMocks();
  for (const source of sources.splice(0)) source.close();
  for (const req of pausedRequests.splice(0)) req.destroy();
  await closeAll();
});

// ---- helpers ----------------------------------------------------------------------------

const runPath = (fqn = PIPELINE, runId = RUN, query = '') => runStreamPath(fqn, runId, query);

/** Resolves with the time the events first satisfied `predicate` (stamped as they are parsed). */
function timeWhen(
  reader: SseReader,
  predicate: (events: SseEvent[]) => boolean,
  timeoutMs = 10_000,
): Promise<number> {
  let at = 0;
  return reader
    .waitFor((events) => {
      if (at === 0 && predicate(events)) at = Date.now();
      return at !== 0;
    }, timeoutMs)
    .then(() => at);
}

const seedRun = (t: TestApp, lines: number, fqn = PIPELINE, runId = RUN) =>
  seedRunningRun(t, fqn, runId, lines);

const appendLine = (t: TestApp, text: string, fqn = PIPELINE, runId = RUN) =>
  appendLogLine(t, fqn, runId, text);

async function storedEntries(t: TestApp, key: StreamKey = KEY): Promise<Entry[]> {
  return t.store.readEntries(key, { afterSeq: 0, limit: 1000 });
}

/** The store's epoch: every native `id:` is `<seq>-<epoch>` (docs/API.md, "Streaming"). */
async function epochOf(t: TestApp, key: StreamKey = KEY): Promise<string> {
  return (await t.store.bounds(key)).epoch;
}

/**
 * A plain GET of a stream that is expected to be refused before it opens. A stream that opens
 * after all (200) is aborted at once, so the assertion on its status fails instead of hanging.
 */
async function refused(t: TestApp, path: string) {
  const controller = new AbortController();
  const response = await fetch(`${t.url}${path}`, { signal: controller.signal });
  if (response.status === 200) {
    controller.abort();
    return { status: response.status, headers: response.headers, text: '' };
  }
  return { status: response.status, headers: response.headers, text: await response.text() };
}

function expectCapacityRefusal(
  answer: Awaited<ReturnType<typeof refused>>,
  code: string,
  message: RegExp,
): void {
  expect(answer.status).toBe(503);
  expect(answer.headers.get('retry-after')).toBe('5');
  expect(answer.headers.get('content-type')).toMatch(/^application\/json/);
  const body = JSON.parse(answer.text) as { error: { code: string; message: string } };
  expect(body.error.code).toBe(code);
  expect(body.error.message).toMatch(message);
}

/** Records every store.readEntries call from now on: per stream, and the cursor read after. */
function recordStoreReads(t: TestApp): Map<string, number[]> {
  const calls = new Map<string, number[]>();
  const original = t.store.readEntries.bind(t.store);
  vi.spyOn(t.store, 'readEntries').mockImplementation((key, options) => {
    const list = calls.get(streamId(key)) ?? [];
    list.push(options.afterSeq);
    calls.set(streamId(key), list);
    return original(key, options);
  });
  return calls;
}

const readsOf = (calls: Map<string, number[]>, key: StreamKey): number[] =>
  calls.get(streamId(key)) ?? [];

/** A viewer whose socket stops reading until `resume()`: a slow network, for the pending cap. */
interface PausedViewer {
  events: SseEvent[];
  resume(): void;
  close(): void;
}
const pausedRequests: ClientRequest[] = [];

function openPaused(t: TestApp, path: string): Promise<PausedViewer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${t.url}${path}`, { agent: false }, (res) => {
      const events: SseEvent[] = [];
      const parser = createParser({
        onEvent(message) {
          events.push({ id: message.id, event: message.event ?? 'message', data: message.data });
        },
      });
      res.setEncoding('utf8');
      res.pause();
      res.on('data', (chunk: string) => parser.feed(chunk));
      res.on('error', () => undefined);
      resolve({ events, resume: () => res.resume(), close: () => req.destroy() });
    });
    req.on('error', reject);
    pausedRequests.push(req);
    req.end();
  });
}

// ---- opening ----------------------------------------------------------------------------

describe('opening a native stream', () => {
  it('answers 200 at once with the SSE headers for a run that does not exist yet', async () => {
    const t = await start();
    const reader = await open(t, runPath());

    expect(reader.status).toBe(200);
    expect(reader.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(reader.headers.get('cache-control')).toBe('no-cache, no-store, no-transform');
    expect(reader.headers.get('x-accel-buffering')).toBe('no');
    await until(() => reader.raw.length > 0, 'the first bytes');
    expect(reader.raw).toBe('retry: 2000\n\n');
    expect(await t.store.getRun(PIPELINE, RUN)).toBeUndefined();

    // The stream is really open: the run's first write reaches it.
    await appendLine(t, 'starting\n');
    await reader.waitFor(hasEvent('log'));
    expect(entryEvents(reader.events).map((e) => e.event)).toEqual(['status', 'log']);
  });

  it('delivers new content to a viewer as it appears', async () => {
    const t = await start();
    await t.ingest.putRun(PIPELINE, RUN, { status: 'running' });
    const reader = await open(t, runPath());
    await reader.waitFor(hasSeq(1));

    expect(await appendLine(t, 'line 1\n')).toBe(2);
    await reader.waitFor(hasSeq(2));
    expect(await appendLine(t, 'line 2\n')).toBe(3);
    await reader.waitFor(hasSeq(3));

    const stored = await storedEntries(t);
    expect(stored).toHaveLength(3);
    const epoch = await epochOf(t);
    expect(reader.events).toEqual(
      stored.map((entry) => ({
        id: `${entry.seq}-${epoch}`,
        event: entry.kind,
        data: JSON.stringify(entry),
      })),
    );
    expect(JSON.parse(reader.events[1]!.data)).toMatchObject({
      seq: 2,
      kind: 'log',
      offset: 0,
      text: 'line 1\n',
    });
    expect(JSON.parse(reader.events[2]!.data)).toMatchObject({
      seq: 3,
      offset: 7,
      text: 'line 2\n',
    });
    for (const entry of stored) {
      expect(reader.raw).toContain(
        `event: ${entry.kind}\ndata: ${JSON.stringify(entry)}\nid: ${entry.seq}-${epoch}\n\n`,
      );
    }
  });

  it('is read by the eventsource package with lastEventId = seq-epoch, type = kind and data = the entry', async () => {
    const t = await start();
    await t.ingest.putRun(PIPELINE, RUN, { status: 'running' });
    await appendLine(t, 'hello 例\n');

    const source = new EventSource(`${t.url}${runPath()}`);
    sources.push(source);
    const got: Array<{ lastEventId: string; type: string; data: string }> = [];
    for (const kind of ['status', 'log', 'progress']) {
      source.addEventListener(kind, (event) => {
        got.push({ lastEventId: event.lastEventId, type: event.type, data: String(event.data) });
      });
    }
    await until(() => got.length >= 2, 'the history through eventsource');

    await t.ingest.appendEvents(KEY, [{ kind: 'progress', step: 'train', data: { pct: 50 } }]);
    await until(() => got.length >= 3, 'a live event through eventsource');

    const stored = await storedEntries(t);
    const epoch = await epochOf(t);
    expect(got).toEqual(
      stored.map((entry) => ({
        lastEventId: `${entry.seq}-${epoch}`,
        type: entry.kind,
        data: JSON.stringify(entry),
      })),
    );
    expect(JSON.parse(got[2]!.data)).toMatchObject({ seq: 3, kind: 'progress', data: { pct: 50 } });
  });
});

// ---- where a stream starts -----------------------------------------------------------------

describe('where a native stream starts', () => {
  it('a viewer resuming from its cursor with Last-Event-ID only gets what it missed', async () => {
    const t = await start();
    expect(await seedRun(t, 4)).toBe(5);
    const reader = await open(t, runPath(), { 'Last-Event-ID': '3' });
    await reader.waitFor(hasSeq(5));
    expect(seqs(reader.events)).toEqual([4, 5]);

    await appendLine(t, 'more\n');
    await reader.waitFor(hasSeq(6));
    expect(seqs(reader.events)).toEqual([4, 5, 6]);
  });

  it('resumes after ?after= and after its alias ?since=', async () => {
    const t = await start();
    await seedRun(t, 4);
    const after = await open(t, runPath(PIPELINE, RUN, 'after=2'));
    const since = await open(t, runPath(PIPELINE, RUN, 'since=2'));
    await after.waitFor(hasSeq(5));
    await since.waitFor(hasSeq(5));
    expect(seqs(after.events)).toEqual([3, 4, 5]);
    expect(seqs(since.events)).toEqual([3, 4, 5]);
  });

  it('lets the Last-Event-ID header win over ?after= and ?since=', async () => {
    const t = await start();
    await seedRun(t, 4);
    const withAfter = await open(t, runPath(PIPELINE, RUN, 'after=1'), { 'Last-Event-ID': '4' });
    const withSince = await open(t, runPath(PIPELINE, RUN, 'since=1'), { 'Last-Event-ID': '4' });
    await withAfter.waitFor(hasSeq(5));
    await withSince.waitFor(hasSeq(5));
    expect(seqs(withAfter.events)).toEqual([5]);
    expect(seqs(withSince.events)).toEqual([5]);
  });

  it('sends only entries written after the viewer came with ?from=latest', async () => {
    const t = await start();
    await seedRun(t, 3);
    const reader = await open(t, runPath(PIPELINE, RUN, 'from=latest'));
    const next = await appendLine(t, 'new\n');
    await reader.waitFor(hasSeq(next));
    expect(seqs(reader.events)).toEqual([next]);
    expect(reader.events).toHaveLength(1);
  });

  it('sends only new entries with ?from=latest even while the stream reader idles between viewers', async () => {
    // tailerIdleGraceSeconds (default 30 s) keeps the stream's reader after its last viewer
    // left; an entry written meanwhile is not news to a viewer that comes later.
    const t = await start();
    const last = await seedRun(t, 2);
    const first = await open(t, runPath());
    await first.waitFor(hasSeq(last));
    first.close();
    await until(() => t.hub.tailer(KEY)?.viewerCount === 0, 'the first viewer to be gone');

    const unseen = await appendLine(t, 'written while nobody watched\n');
    const reader = await open(t, runPath(PIPELINE, RUN, 'from=latest'));
    const next = await appendLine(t, 'new\n');
    await reader.waitFor(hasSeq(next));
    expect(seqs(reader.events)).not.toContain(unseen);
    expect(seqs(reader.events)).toEqual([next]);
  });

  it('sends the last N entries first with ?tail=N', async () => {
    const t = await start();
    await seedRun(t, 4);
    const two = await open(t, runPath(PIPELINE, RUN, 'tail=2'));
    const many = await open(t, runPath(PIPELINE, RUN, 'tail=50'));
    const none = await open(t, runPath(PIPELINE, RUN, 'tail=0'));
    await two.waitFor(hasSeq(5));
    await many.waitFor(hasSeq(5));
    expect(seqs(two.events)).toEqual([4, 5]);
    expect(seqs(many.events)).toEqual([1, 2, 3, 4, 5]);

    await appendLine(t, 'new\n');
    await none.waitFor(hasSeq(6));
    await two.waitFor(hasSeq(6));
    expect(seqs(none.events)).toEqual([6]);
    expect(seqs(two.events)).toEqual([4, 5, 6]);
  });

  it('says gap reset and streams from the start when the cursor is past the end', async () => {
    const t = await start();
    await seedRun(t, 2);
    const byHeader = await open(t, runPath(), { 'Last-Event-ID': '50' });
    const byQuery = await open(t, runPath(PIPELINE, RUN, 'after=4'));
    const epoch = await epochOf(t);
    for (const reader of [byHeader, byQuery]) {
      await reader.waitFor(hasSeq(3));
      expect(reader.events[0]).toEqual({ id: undefined, event: 'gap', data: '{"reason":"reset"}' });
      expect(reader.events.slice(1).map((e) => e.id)).toEqual([
        `1-${epoch}`,
        `2-${epoch}`,
        `3-${epoch}`,
      ]);
    }
  });

  it('a viewer already up to date is not sent the backlog again', async () => {
    const t = await start();
    const last = await seedRun(t, 3);
    const early = await open(t, runPath());
    await early.waitFor(hasSeq(last));
    const upToDate = await open(t, runPath(), { 'Last-Event-ID': String(last) });

    const next = await appendLine(t, 'new\n');
    await upToDate.waitFor(hasSeq(next));
    await early.waitFor(hasSeq(next));
    expect(upToDate.events.map((e) => e.id)).toEqual([`${next}-${await epochOf(t)}`]);
    expect(seqs(early.events)).toEqual(range(1, next));
  });

  it.each([
    ['from the replay buffer', {}, false],
    ['from the store, page by page', { replayBufferBytes: 0, readBatchEntries: 2 }, true],
  ] as const)('a viewer joining late sees what it missed (%s)', async (_how, settings, paged) => {
    const t = await start(settings);
    await t.ingest.putRun(PIPELINE, RUN, { status: 'running' });
    const early = await open(t, runPath());
    await early.waitFor(hasSeq(1));
    for (let i = 1; i <= 6; i += 1) await appendLine(t, `line ${i}\n`);
    await early.waitFor(hasSeq(7));

    const reads = recordStoreReads(t);
    const fromStart = await open(t, runPath());
    const fromCursor = await open(t, runPath(), { 'Last-Event-ID': '3' });
    await fromStart.waitFor(hasSeq(7));
    await fromCursor.waitFor(hasSeq(7));
    expect(seqs(fromStart.events)).toEqual(range(1, 7));
    expect(seqs(fromCursor.events)).toEqual(range(4, 7));
    // The viewer resuming after 3 was served from memory, or paged from the store.
    expect(readsOf(reads, KEY).includes(3)).toBe(paged);

    await appendLine(t, 'live\n');
    for (const reader of [early, fromStart, fromCursor]) await reader.waitFor(hasSeq(8));
    expect(seqs(early.events)).toEqual(range(1, 8));
    expect(seqs(fromStart.events)).toEqual(range(1, 8));
    expect(seqs(fromCursor.events)).toEqual(range(4, 8));
  });

  it('gives every viewer joining during a burst of appends every entry once and in order', async () => {
    const t = await start({ readBatchEntries: 3, replayBufferBytes: 2000 });
    await t.ingest.putRun(PIPELINE, RUN, { status: 'running' });
    const viewers: Array<{ reader: SseReader; firstSeq: number }> = [];
    let last = 1;
    for (let i = 1; i <= 150; i += 1) {
      if (i === 1) viewers.push({ reader: await open(t, runPath()), firstSeq: 1 });
      if (i === 40) viewers.push({ reader: await open(t, runPath()), firstSeq: 1 });
      if (i === 70) {
        viewers.push({
          reader: await open(t, runPath(), { 'Last-Event-ID': '20' }),
          firstSeq: 21,
        });
      }
      if (i === 100) {
        viewers.push({
          reader: await open(t, runPath(PIPELINE, RUN, 'tail=5')),
          firstSeq: last - 4,
        });
      }
      if (i === 120) {
        viewers.push({
          reader: await open(t, runPath(PIPELINE, RUN, 'from=latest')),
          firstSeq: last + 1,
        });
      }
      last = await appendLine(t, `burst ${i} ${'x'.repeat(i % 50)}\n`);
      if (i % 7 === 0) await new Promise((resolve) => setImmediate(resolve));
    }
    for (const { reader, firstSeq } of viewers) {
      await reader.waitFor(hasSeq(last));
      expect(seqs(reader.events)).toEqual(range(firstSeq, last));
      expect(reader.events.filter((e) => CONTROL_FRAMES.has(e.event))).toEqual([]);
    }
  });
});

// ---- filters ----------------------------------------------------------------------------

const FILTER_EVENTS: NewEvent[] = [
  { kind: 'progress', step: 'train', correlationId: 'g1', data: { n: 2 } }, // 2 ✓
  { kind: 'metric', step: 'train', correlationId: 'g2', data: { n: 3 } }, // 3
  { kind: 'progress', step: 'eval', correlationId: 'g1', data: { n: 4 } }, // 4 ✓
  { kind: 'artifact', step: 'train', correlationId: 'g1', data: { n: 5 } }, // 5 ✓
  { kind: 'metric', step: 'eval', correlationId: 'g3', data: { n: 6 } }, // 6
  { kind: 'progress', step: 'load', correlationId: 'g1', data: { n: 7 } }, // 7
  { kind: 'note', step: 'train', correlationId: 'g1', data: { n: 8 } }, // 8
  { kind: 'metric', step: 'load', correlationId: 'g2', data: { n: 9 } }, // 9
];
const FILTER = 'kinds=progress,metric&kinds=artifact&steps=train&steps=eval&correlationIds=g1';

async function seedFilterRun(t: TestApp): Promise<void> {
  await t.ingest.putRun(PIPELINE, RUN, { status: 'running' });
  const { seqs: written } = await t.ingest.appendEvents(KEY, FILTER_EVENTS);
  expect(written).toEqual(range(2, 9));
}

describe('filters on a native stream', () => {
  it('combines kinds, steps and correlationIds as OR within one and AND across, repeated or comma-separated', async () => {
    const t = await start();
    await seedFilterRun(t);
    const epoch = await epochOf(t);
    const cases: Array<[string, number[]]> = [
      [FILTER, [2, 4, 5]],
      ['steps=load', [7, 9]],
      ['correlationIds=g2,g3&kinds=metric', [3, 6, 9]],
      ['kinds=note&kinds=artifact', [5, 8]],
      ['kinds=status', [1]],
      ['kinds=progress&steps=eval,load&correlationIds=g2', []],
    ];
    for (const [query, expected] of cases) {
      const reader = await open(t, runPath(PIPELINE, RUN, query));
      // Every case ends its history with seq 9, as an entry or as a cursor frame.
      await reader.waitFor((events) => events.some((e) => e.id === `9-${epoch}`));
      expect(seqs(reader.events), query).toEqual(expected);
      const stored = await storedEntries(t);
      for (const event of entryEvents(reader.events)) {
        expect(event.data).toBe(
          JSON.stringify(stored.find((e) => `${e.seq}-${epoch}` === event.id)),
        );
      }
    }
  });

  it('carries the id of trailing filtered entries in one cursor frame, so a reconnect with the last id does not replay them', async () => {
    const t = await start();
    await seedFilterRun(t);
    const epoch = await epochOf(t);
    const first = await open(t, runPath(PIPELINE, RUN, FILTER));
    await first.waitFor(hasEvent('cursor'));
    expect(first.events.map((e) => [e.id, e.event])).toEqual([
      [`2-${epoch}`, 'progress'],
      [`4-${epoch}`, 'progress'],
      [`5-${epoch}`, 'artifact'],
      [`9-${epoch}`, 'cursor'],
    ]);
    expect(first.events[3]!.data).toBe('{}');
    expect(first.raw.endsWith(`event: cursor\ndata: {}\nid: 9-${epoch}\n\n`)).toBe(true);
    first.close();

    const lastId = first.events[first.events.length - 1]!.id!;
    const again = await open(t, runPath(PIPELINE, RUN, FILTER), { 'Last-Event-ID': lastId });
    const { seqs: written } = await t.ingest.appendEvents(KEY, [
      { kind: 'note', step: 'train', correlationId: 'g1', data: {} },
      { kind: 'progress', step: 'train', correlationId: 'g1', data: { n: 11 } },
    ]);
    expect(written).toEqual([10, 11]);
    await again.waitFor(hasSeq(11));
    expect(again.events.map((e) => [e.id, e.event])).toEqual([[`11-${epoch}`, 'progress']]);
  });

  it('sends one cursor frame for a live batch that the filter drops entirely', async () => {
    const t = await start();
    await seedFilterRun(t);
    const epoch = await epochOf(t);
    const reader = await open(t, runPath(PIPELINE, RUN, FILTER));
    await reader.waitFor(hasEvent('cursor'));

    await t.ingest.appendEvents(KEY, [
      { kind: 'note', step: 'train', correlationId: 'g1', data: {} },
      { kind: 'metric', step: 'load', correlationId: 'g2', data: {} },
      { kind: 'progress', step: 'train', correlationId: 'g9', data: {} },
    ]);
    await reader.waitFor((events) => events.some((e) => e.id === `12-${epoch}`));
    await t.ingest.appendEvents(KEY, [
      { kind: 'metric', step: 'eval', correlationId: 'g1', data: {} },
    ]);
    await reader.waitFor(hasSeq(13));
    expect(reader.events.map((e) => [e.id, e.event])).toEqual([
      [`2-${epoch}`, 'progress'],
      [`4-${epoch}`, 'progress'],
      [`5-${epoch}`, 'artifact'],
      [`9-${epoch}`, 'cursor'],
      [`12-${epoch}`, 'cursor'],
      [`13-${epoch}`, 'metric'],
    ]);
  });
});

// ---- how a stream ends ----------------------------------------------------------------

describe('how a native stream ends', () => {
  it('closes the stream once a finished run has gone quiet', async () => {
    const grace = 0.5;
    const t = await start({ finishGraceSeconds: grace });
    await seedRun(t, 1);
    const reader = await open(t, runPath());
    await reader.waitFor(hasSeq(2));

    const ended = timeWhen(reader, hasEvent('end'));
    const finishedAt = Date.now();
    const put = await httpJson(t, 'PUT', runUrl(PIPELINE, RUN), { status: 'success' });
    expect(put.status).toBe(200);
    const endAt = await ended;

    expect(endAt - finishedAt).toBeGreaterThanOrEqual(grace * 1000);
    await closedWithin(reader);
    expect(reader.events.map((e) => e.event)).toEqual(['status', 'log', 'status', 'end']);
    expect(JSON.parse(reader.events[2]!.data)).toMatchObject({
      seq: 3,
      data: { status: 'success' },
    });
    expect(reader.events[3]!.data).toBe('{"reason":"runFinished","status":"success","lastSeq":3}');
    expect(
      reader.raw.endsWith(
        'event: end\ndata: {"reason":"runFinished","status":"success","lastSeq":3}\n\n',
      ),
    ).toBe(true);
    await until(() => t.hub.activeConnections === 0, 'the connection to be released');
  });

  it('keeps streaming while the run is still going', async () => {
    const t = await start({ finishGraceSeconds: 0.2, unknownRunGraceSeconds: 0.2 });
    await seedRun(t, 1);
    const reader = await open(t, runPath());
    const state = watchClosed(reader);
    await reader.waitFor(hasSeq(2));

    await sleep(1200); // six grace periods of silence
    expect(endOf(reader.events)).toBeUndefined();
    expect(state.closed).toBe(false);

    const next = await appendLine(t, 'still going\n');
    await reader.waitFor(hasSeq(next));
    expect(seqs(reader.events)).toEqual([1, 2, next]);
    expect(state.closed).toBe(false);
  });

  it('a run with no status row is given time to start writing before the stream closes', async () => {
    // finishGraceSeconds is short; a run not created yet gets unknownRunGraceSeconds instead.
    const t = await start({ finishGraceSeconds: 0.1, unknownRunGraceSeconds: 5 });
    const reader = await open(t, runPath());
    const state = watchClosed(reader);
    await sleep(600);
    expect(reader.events).toEqual([]);
    expect(state.closed).toBe(false);

    const seq = await appendLine(t, 'started late\n');
    await reader.waitFor(hasSeq(seq));
    expect(reader.events.map((e) => e.event)).toEqual(['status', 'log']);
    await sleep(600);
    expect(endOf(reader.events)).toBeUndefined();
    expect(state.closed).toBe(false);
  });

  it('gives up on a run that never reports and never logs', async () => {
    const grace = 0.5;
    const t = await start({ unknownRunGraceSeconds: grace });
    const openedAt = Date.now();
    const reader = await open(t, runPath());
    const endAt = await timeWhen(reader, hasEvent('end'));
    expect(endAt - openedAt).toBeGreaterThanOrEqual(grace * 1000);
    await closedWithin(reader);
    expect(reader.events).toEqual([
      { id: undefined, event: 'end', data: '{"reason":"runFinished","lastSeq":0}' },
    ]);
  });

  it('answers only end, without waiting for a poll, for a finished run with nothing after the cursor', async () => {
    // With a 30 s poll, an end within the 10 s wait can only come from the stream's opening.
    const t = await start({ pollSeconds: 30, finishGraceSeconds: 0.1 });
    await seedRun(t, 1);
    await t.ingest.putRun(PIPELINE, RUN, { status: 'success' });
    await sleep(300);

    const reader = await open(t, runPath(), { 'Last-Event-ID': '3' });
    await closedWithin(reader);
    const end = 'event: end\ndata: {"reason":"runFinished","status":"success","lastSeq":3}\n\n';
    expect(reader.raw).toBe(`retry: 2000\n\n${end}`);
    expect(reader.events.map((e) => e.event)).toEqual(['end']);

    const epoch = await epochOf(t);
    const fromStart = await open(t, runPath());
    await closedWithin(fromStart);
    expect(fromStart.events.map((e) => e.id ?? e.event)).toEqual([
      `1-${epoch}`,
      `2-${epoch}`,
      `3-${epoch}`,
      'end',
    ]);
    expect(fromStart.raw.endsWith(end)).toBe(true);
  });

  it('a viewer resuming a finished run is sent the late flush it missed before end', async () => {
    // docs/API.md, "Appending": appending to a run that ended is allowed (late flushes). The stream's reader
    // is still idling (tailerIdleGraceSeconds) from the first viewer when the second comes.
    const t = await start({ finishGraceSeconds: 0.2 });
    await seedRun(t, 1);
    await t.ingest.putRun(PIPELINE, RUN, { status: 'success' });
    const epoch = await epochOf(t);
    const first = await open(t, runPath());
    await closedWithin(first);
    expect(first.events.map((e) => e.id ?? e.event)).toEqual([
      `1-${epoch}`,
      `2-${epoch}`,
      `3-${epoch}`,
      'end',
    ]);
    await until(() => t.hub.tailer(KEY)?.viewerCount === 0, 'the first viewer to be gone');

    const late = await appendLine(t, 'late flush\n');
    expect(late).toBe(4);
    const resumed = await open(t, runPath(), { 'Last-Event-ID': '3' });
    await closedWithin(resumed);
    expect(resumed.events.map((e) => e.id ?? e.event)).toEqual([`4-${epoch}`, 'end']);
    expect(endOf(resumed.events)).toEqual({ reason: 'runFinished', status: 'success', lastSeq: 4 });
  });

  it('a viewer resuming a finished run gets what the store holds though the bus has not rung for it yet', async () => {
    // Another server's bus message can come after the viewer does (Redis delivers it when it
    // will): a late flush written straight to the store, no bus (and a reader with no viewers does not poll).
    const t = await start({ finishGraceSeconds: 0.2 });
    await seedRun(t, 1);
    await t.ingest.putRun(PIPELINE, RUN, { status: 'success' });
    const epoch = await epochOf(t);
    const first = await open(t, runPath());
    await closedWithin(first);
    await until(() => t.hub.tailer(KEY)?.viewerCount === 0, 'the first viewer to be gone');
    const { seq } = await t.store.appendLog(PIPELINE, RUN, [{ text: 'late flush\n' }]);
    expect(seq).toBe(4);
    await sleep(300); // past finishGraceSeconds: the run looks finished and quiet to the reader
    const resumed = await open(t, runPath(), { 'Last-Event-ID': '3' });
    await closedWithin(resumed);
    expect(resumed.events.map((e) => e.id ?? e.event)).toEqual([`4-${epoch}`, 'end']);
    expect(endOf(resumed.events)).toEqual({ reason: 'runFinished', status: 'success', lastSeq: 4 });
  });

  it('ends with idleTimeout when a running run writes nothing for maxIdleSeconds', async () => {
    const idle = 0.4;
    const t = await start({ maxIdleSeconds: idle });
    const quietSince = Date.now();
    await t.ingest.putRun(PIPELINE, RUN, { status: 'running' });
    const reader = await open(t, runPath());
    const endAt = await timeWhen(reader, hasEvent('end'));
    expect(endAt - quietSince).toBeGreaterThanOrEqual(idle * 1000);
    await closedWithin(reader);
    expect(reader.events.map((e) => e.event)).toEqual(['status', 'end']);
    expect(endOf(reader.events)).toEqual({ reason: 'idleTimeout', status: 'running', lastSeq: 1 });
  });

  it('stops streaming once it has sent as much as it will, and a reconnect with the last id resumes without loss', async () => {
    const maxBytes = 700;
    const t = await start({ maxStreamBytes: maxBytes });
    await t.ingest.putRun(PIPELINE, RUN, { status: 'running' });
    for (let i = 1; i <= 20; i += 1) await appendLine(t, `line ${i} ${'x'.repeat(40)}\n`);

    const first = await open(t, runPath());
    await closedWithin(first);
    expect(first.events.at(-1)!.event).toBe('end');
    const lastReceived = seqs(first.events).at(-1)!;
    // lastSeq is this viewer's own cursor: where it resumes from.
    expect(endOf(first.events)).toEqual({
      reason: 'maxBytes',
      status: 'running',
      lastSeq: lastReceived,
    });
    const beforeEnd = first.raw.slice(0, first.raw.indexOf('event: end'));
    const epoch = await epochOf(t);
    const frameSizes = (await storedEntries(t)).map((e) =>
      Buffer.byteLength(`id: ${e.seq}-${epoch}\nevent: ${e.kind}\ndata: ${JSON.stringify(e)}\n\n`),
    );
    expect(Buffer.byteLength(beforeEnd)).toBeGreaterThanOrEqual(maxBytes);
    expect(Buffer.byteLength(beforeEnd)).toBeLessThan(maxBytes + Math.max(...frameSizes));
    expect(seqs(first.events).length).toBeLessThan(21);

    const all = seqs(first.events);
    let cursor = first.events.filter((e) => e.id !== undefined).at(-1)!.id!;
    for (let attempt = 0; attempt < 40 && !all.includes(21); attempt += 1) {
      const reader = await open(t, runPath(), { 'Last-Event-ID': cursor });
      await reader.waitFor((events) => hasEvent('end')(events) || hasSeq(21)(events));
      all.push(...seqs(reader.events));
      cursor = reader.events.filter((e) => e.id !== undefined).at(-1)?.id ?? cursor;
      reader.close();
    }
    expect(all).toEqual(range(1, 21));
  });

  it('ends with maxDuration after maxStreamSeconds', async () => {
    const lifetime = 0.4;
    const t = await start({ maxStreamSeconds: lifetime });
    await seedRun(t, 1);
    const openedAt = Date.now();
    const reader = await open(t, runPath());
    const endAt = await timeWhen(reader, hasEvent('end'));
    expect(endAt - openedAt).toBeGreaterThanOrEqual(lifetime * 1000);
    await closedWithin(reader);
    expect(endOf(reader.events)).toEqual({ reason: 'maxDuration', status: 'running', lastSeq: 2 });
    expect(seqs(reader.events)).toEqual([1, 2]);
  });

  it('sends a heartbeat comment every heartbeatSeconds while nothing else is sent', async () => {
    const t = await start({ heartbeatSeconds: 0.2 });
    await seedRun(t, 1);
    const reader = await open(t, runPath());
    await until(() => reader.comments.length >= 2, 'two heartbeats');
    expect(new Set(reader.comments)).toEqual(new Set(['heartbeat']));
    expect(reader.raw).toContain('\n\n: heartbeat\n\n');
    expect(seqs(reader.events)).toEqual([1, 2]);
    expect(reader.events.every((e) => e.event !== 'heartbeat')).toBe(true);
  });

  it('sends end shutdown to every open viewer when the server shuts down, and refuses new ones', async () => {
    const t = await start();
    await seedRun(t, 1);
    await httpJson(t, 'POST', '/api/v1/topics/prices/events', {
      events: [{ kind: 'tick', data: 1 }],
    });
    const runViewers = [await open(t, runPath()), await open(t, runPath())];
    const topicViewer = await open(t, '/api/v1/topics/prices/stream');
    for (const reader of runViewers) await reader.waitFor(hasSeq(2));
    await topicViewer.waitFor(hasSeq(1));

    t.hub.shutdown();
    for (const reader of [...runViewers, topicViewer]) await closedWithin(reader);
    for (const reader of runViewers) {
      expect(reader.events.at(-1)).toEqual({
        id: undefined,
        event: 'end',
        data: '{"reason":"shutdown","status":"running","lastSeq":2}',
      });
    }
    expect(topicViewer.events.at(-1)!.data).toBe('{"reason":"shutdown","lastSeq":1}');
    await until(() => t.hub.activeConnections === 0, 'every connection to be released');
    expectCapacityRefusal(await refused(t, runPath()), 'TW_SHUTTING_DOWN', /shutting down/);
  });

  it('ends a viewer that was still connecting when the server shut down, rather than leaving it hanging', async () => {
    const t = await start();
    await seedRun(t, 1);
    // Hold the stream's first store look-up so the viewer is mid-way in when shutdown comes.
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const bounds = t.store.bounds.bind(t.store);
    vi.spyOn(t.store, 'bounds').mockImplementation(async (key) => {
      await gate;
      return bounds(key);
    });
    const opening = openSse(`${t.url}${runPath()}`);
    opening.catch(() => undefined); // if the test fails early, cleanup aborts it
    await until(() => t.hub.activeConnections === 1, 'the viewer to reserve its slot');
    t.hub.shutdown();
    release();
    const reader = track(await opening);

    if (reader.status === 200) {
      await reader.waitFor(hasEvent('end'), 3000);
      expect(endOf(reader.events)).toMatchObject({ reason: 'shutdown' });
      await closedWithin(reader, 3000);
    } else {
      expect(reader.status).toBe(503);
    }
    await until(() => t.hub.activeConnections === 0, 'the connection to be released', 3000);
  });
});

// ---- sharing one reader, and capacity ----------------------------------------------------------

describe('sharing and capacity', () => {
  it('every viewer of a run shares one reader', async () => {
    // No poll during the test: every read is one a new entry caused.
    const t = await start({ pollSeconds: 60 });
    const one = runKey(PIPELINE, 'one-viewer');
    const three = runKey(PIPELINE, 'three-viewers');
    await t.ingest.putRun(PIPELINE, 'one-viewer', { status: 'running' });
    await t.ingest.putRun(PIPELINE, 'three-viewers', { status: 'running' });
    const single = await open(t, runPath(PIPELINE, 'one-viewer'));
    const triple = [
      await open(t, runPath(PIPELINE, 'three-viewers')),
      await open(t, runPath(PIPELINE, 'three-viewers')),
      await open(t, runPath(PIPELINE, 'three-viewers')),
    ];
    for (const reader of [single, ...triple]) await reader.waitFor(hasSeq(1));
    expect(t.hub.tailer(three)?.viewerCount).toBe(3);

    const reads = recordStoreReads(t);
    const sharedBefore = [t.hub.tailer(one)!.sharedReads, t.hub.tailer(three)!.sharedReads];
    for (let i = 1; i <= 5; i += 1) {
      await appendLine(t, `line ${i}\n`, PIPELINE, 'one-viewer');
      await appendLine(t, `line ${i}\n`, PIPELINE, 'three-viewers');
      for (const reader of [single, ...triple]) await reader.waitFor(hasSeq(i + 1));
    }
    const sharedDeltas = [
      t.hub.tailer(one)!.sharedReads - sharedBefore[0]!,
      t.hub.tailer(three)!.sharedReads - sharedBefore[1]!,
    ];

    // Three viewers cost the reads of one, not three times as many. On a bus that rings
    // asynchronously (Redis), a doorbell can land just before or after a read, so two streams
    // fed alike may differ by a read or two; on the memory bus they are equal.
    const slack = t.bus instanceof MemoryBus ? 0 : 2;
    expect(sharedDeltas[0]).toBeGreaterThan(0);
    expect(Math.abs(sharedDeltas[1]! - sharedDeltas[0]!)).toBeLessThanOrEqual(slack);
    const [readsOfThree, readsOfOne] = [readsOf(reads, three).length, readsOf(reads, one).length];
    expect(readsOfThree).toBeGreaterThan(0);
    expect(Math.abs(readsOfThree - readsOfOne)).toBeLessThanOrEqual(slack);
    for (const reader of [single, ...triple]) expect(seqs(reader.events)).toEqual(range(1, 6));
  });

  it('a slow viewer is paged from the store without loss and does not hold back a fast one', async () => {
    const t = await start({
      maxPendingBytesPerViewer: 64 * 1024,
      replayBufferBytes: 128 * 1024,
      readBatchEntries: 8,
    });
    await t.ingest.putRun(PIPELINE, RUN, { status: 'running' });
    const fast = await open(t, runPath());
    const slow = await openPaused(t, runPath());
    await fast.waitFor(hasSeq(1));

    const chunk = 'y'.repeat(32 * 1024);
    let last = 1;
    for (let i = 1; i <= 600; i += 1) last = await appendLine(t, `${i} ${chunk}\n`);
    await fast.waitFor(hasSeq(last), 20_000);
    expect(seqs(fast.events)).toEqual(range(1, last));
    // The slow viewer has read nothing so far, and yet the fast one got everything.
    expect(slow.events).toEqual([]);

    const reads = recordStoreReads(t);
    slow.resume();
    await until(() => seqs(slow.events).includes(last), 'the slow viewer to catch up', 20_000);
    expect(seqs(slow.events)).toEqual(range(1, last));
    expect(slow.events.filter((e) => CONTROL_FRAMES.has(e.event))).toEqual([]);
    const stored = await storedEntries(t);
    expect(slow.events.at(-1)!.data).toBe(JSON.stringify(stored.at(-1)));
    // ~19 MiB is more than loopback socket buffers hold: the viewer fell behind its pending
    // cap and caught up by paging from the store.
    expect(readsOf(reads, KEY).length).toBeGreaterThan(0);
  });

  it('stops reading the store when the last viewer leaves', async () => {
    const t = await start();
    await seedRun(t, 1);
    const reader = await open(t, runPath());
    await reader.waitFor(hasSeq(2));
    const tailer = t.hub.tailer(KEY)!;
    reader.close();
    await until(() => tailer.viewerCount === 0, 'the viewer to be gone');
    await until(() => t.hub.activeConnections === 0, 'the connection to be released');

    const reads = recordStoreReads(t);
    const sharedBefore = tailer.sharedReads;
    for (let i = 0; i < 3; i += 1) await appendLine(t, `unwatched ${i}\n`);
    await sleep(500); // ten polls
    expect(tailer.sharedReads).toBe(sharedBefore);
    expect(readsOf(reads, KEY)).toEqual([]);

    // Nothing is lost: the next viewer picks up what was written meanwhile.
    const again = await open(t, runPath(), { 'Last-Event-ID': '2' });
    await again.waitFor(hasSeq(5));
    expect(seqs(again.events)).toEqual([3, 4, 5]);
    expect(t.hub.tailer(KEY)).toBe(tailer);
  });

  it('retires the reader once the last viewer has been gone for tailerIdleGraceSeconds', async () => {
    const t = await start({ tailerIdleGraceSeconds: 0.2 });
    await seedRun(t, 1);
    const reader = await open(t, runPath());
    await reader.waitFor(hasSeq(2));
    const tailer = t.hub.tailer(KEY)!;
    expect(t.bus.subscribedStreams).toBe(1);
    reader.close();

    await until(() => t.hub.tailer(KEY) === undefined, 'the reader to retire');
    expect(t.bus.subscribedStreams).toBe(0);
    expect(t.hub.activeConnections).toBe(0);
    expect(t.hub.activeStreams).toBe(0);
    const sharedBefore = tailer.sharedReads;
    await appendLine(t, 'after retirement\n');
    await sleep(300);
    expect(tailer.sharedReads).toBe(sharedBefore);
  });

  it('looks up the run state sparingly rather than on every poll', async () => {
    const t = await start({ pollSeconds: 0.05, runStatePollSeconds: 0.5, finishGraceSeconds: 30 });
    await seedRun(t, 1);
    const openedAt = Date.now();
    const reader = await open(t, runPath());
    await reader.waitFor(hasSeq(2));
    const tailer = t.hub.tailer(KEY)!;
    await sleep(1200);
    const elapsed = Date.now() - openedAt;
    expect(tailer.runStateLookups).toBeGreaterThanOrEqual(1);
    expect(tailer.runStateLookups).toBeLessThanOrEqual(Math.floor(elapsed / 500) + 2);

    // A finished run is learnt from its status entry and never looked up again.
    await t.ingest.putRun(PIPELINE, RUN, { status: 'failed' });
    await reader.waitFor(hasSeq(3));
    const lookups = tailer.runStateLookups;
    await sleep(1200);
    expect(tailer.runStateLookups).toBe(lookups);
  });

  it('refuses the viewer past maxSubscribersPerStream with 503 and Retry-After, and frees the slot when a viewer leaves', async () => {
    const t = await start({ maxSubscribersPerStream: 2 });
    await seedRun(t, 1);
    const a = await open(t, runPath());
    const b = await open(t, runPath());
    expect([a.status, b.status]).toEqual([200, 200]);

    expectCapacityRefusal(
      await refused(t, runPath()),
      'TW_TOO_MANY_SUBSCRIBERS',
      /subscriber cap \(2\)/,
    );
    // The cap is per stream: another run is still served.
    await t.ingest.putRun(PIPELINE, 'other', { status: 'running' });
    const other = await open(t, runPath(PIPELINE, 'other'));
    expect(other.status).toBe(200);

    a.close();
    await until(() => t.hub.tailer(KEY)?.viewerCount === 1, 'the slot to be freed');
    const c = await open(t, runPath());
    expect(c.status).toBe(200);
    await c.waitFor(hasSeq(2));
    expect(seqs(c.events)).toEqual([1, 2]);
  });

  it('a viewer past the connection cap is refused rather than queued', async () => {
    const t = await start({ maxActiveConnections: 2 });
    await seedRun(t, 1, PIPELINE, 'a');
    const a = await open(t, runPath(PIPELINE, 'a'));
    const topic = await open(t, '/api/v1/topics/prices/stream');
    expect([a.status, topic.status]).toEqual([200, 200]);
    expect(t.hub.activeConnections).toBe(2);

    const message = /maximum number of stream connections \(2\)/;
    expectCapacityRefusal(
      await refused(t, runPath(PIPELINE, 'c')),
      'TW_TOO_MANY_CONNECTIONS',
      message,
    );
    expectCapacityRefusal(
      await refused(t, runPath(PIPELINE, 'a')),
      'TW_TOO_MANY_CONNECTIONS',
      message,
    );
    expect(t.hub.activeConnections).toBe(2);

    topic.close();
    await until(() => t.hub.activeConnections === 1, 'the connection to be released');
    const c = await open(t, runPath(PIPELINE, 'c'));
    expect(c.status).toBe(200);
  });

  it("a run past the server's capacity is refused rather than queued", async () => {
    const t = await start({ maxActiveStreams: 2 });
    const a = await open(t, runPath(PIPELINE, 'a'));
    const b = await open(t, runPath(PIPELINE, 'b'));
    expect([a.status, b.status]).toEqual([200, 200]);
    expect(t.hub.activeStreams).toBe(2);

    expectCapacityRefusal(
      await refused(t, runPath(PIPELINE, 'c')),
      'TW_TOO_MANY_STREAMS',
      /maximum number of streams \(2\)/,
    );
    // Another viewer of a stream already served is not a new stream.
    const a2 = await open(t, runPath(PIPELINE, 'a'));
    expect(a2.status).toBe(200);

    b.close();
    await until(() => t.hub.activeStreams === 1, 'the stream to be released');
    const c = await open(t, runPath(PIPELINE, 'c'));
    expect(c.status).toBe(200);
  });

  it("a run past the server's capacity is refused even when its reader is still idling from an earlier viewer", async () => {
    const t = await start({ maxActiveStreams: 1 });
    const early = await open(t, runPath(PIPELINE, 'a'));
    await until(() => t.hub.activeStreams === 1, 'the first stream');
    early.close();
    await until(() => t.hub.activeStreams === 0, 'the first stream to be released');
    expect(t.hub.tailer(runKey(PIPELINE, 'a'))).toBeDefined(); // idling, not retired

    const b = await open(t, runPath(PIPELINE, 'b'));
    expect(b.status).toBe(200);
    expectCapacityRefusal(
      await refused(t, runPath(PIPELINE, 'a')),
      'TW_TOO_MANY_STREAMS',
      /maximum number of streams \(1\)/,
    );
    expect(t.hub.activeStreams).toBe(1);
  });
});

// ---- store failures ----------------------------------------------------------------------

describe('store failures during a native stream', () => {
  it('a store hiccup does not end the stream', async () => {
    const t = await start();
    await seedRun(t, 1);
    const reader = await open(t, runPath());
    await reader.waitFor(hasSeq(2));

    vi.spyOn(t.store, 'readEntries').mockRejectedValueOnce(new Error('SQLITE_BUSY'));
    const next = await appendLine(t, 'after the hiccup\n');
    await reader.waitFor(hasSeq(next));
    expect(reader.events.map((e) => e.event)).toEqual(['status', 'log', 'log']);
  });

  it('a persistent store failure ends the stream with an error event', async () => {
    const t = await start();
    await seedRun(t, 1);
    const reader = await open(t, runPath());
    await reader.waitFor(hasSeq(2));

    vi.spyOn(t.store, 'readEntries').mockRejectedValue(new Error('disk I/O error'));
    await appendLine(t, 'unreadable\n');
    await reader.waitFor(hasEvent('error'));
    await closedWithin(reader);
    const error = reader.events.at(-1)!;
    expect(error.event).toBe('error');
    expect(error.id).toBeUndefined();
    const body = JSON.parse(error.data) as { code: string; message: string };
    expect(body.code).toBe('TW_STORE_UNAVAILABLE');
    expect(body.message).toContain('disk I/O error');
    await until(() => t.hub.activeConnections === 0, 'the connection to be released');
  });
});

// ---- the runs feed and topics ------------------------------------------------------------

describe('the runs feed and topic streams', () => {
  it('the runs feed sends one status entry per run status change, with the run (without meta) as data', async () => {
    const t = await start();
    const feed = await open(t, '/api/v1/runs/stream');
    expect(feed.status).toBe(200);

    const runs: Run[] = [];
    for (const status of ['queued', 'running', 'success']) {
      const put = await httpJson(t, 'PUT', runUrl(PIPELINE, 'r1'), { status });
      expect(put.status).toBe(200);
      runs.push(put.body as Run);
    }
    // No change, no entry.
    await httpJson(t, 'PUT', runUrl(PIPELINE, 'r1'), { status: 'success' });
    runs.push(
      (await httpJson(t, 'PUT', runUrl('other.pipe', 'r2'), { status: 'running' })).body as Run,
    );

    await feed.waitFor(hasSeq(4));
    const epoch = await epochOf(t, topicKey(RUNS_FEED_TOPIC));
    expect(feed.events.map((e) => [e.id, e.event])).toEqual([
      [`1-${epoch}`, 'status'],
      [`2-${epoch}`, 'status'],
      [`3-${epoch}`, 'status'],
      [`4-${epoch}`, 'status'],
    ]);
    const entries = feed.events.map((e) => JSON.parse(e.data) as Entry);
    expect(entries.map((e) => e.data)).toEqual(runs.map(({ meta: _meta, ...summary }) => summary));
    expect(runs.map((run) => run.status)).toEqual(['queued', 'running', 'success', 'running']);
    expect(entries.every((e) => e.kind === 'status')).toBe(true);

    // It has history and resumes like any other stream.
    const resumed = await open(t, '/api/v1/runs/stream', { 'Last-Event-ID': '2' });
    await resumed.waitFor(hasSeq(4));
    expect(seqs(resumed.events)).toEqual([3, 4]);
  });

  it('narrows the runs feed to the pipelines named by ?pipeline=', async () => {
    const t = await start();
    const narrow = await open(t, `/api/v1/runs/stream?pipeline=${PIPELINE}`);
    const two = await open(t, `/api/v1/runs/stream?pipeline=${PIPELINE}&pipeline=third`);
    await httpJson(t, 'PUT', runUrl('other.pipe', 'r9'), { status: 'running' }); // 1
    await httpJson(t, 'PUT', runUrl(PIPELINE, 'r1'), { status: 'running' }); // 2
    await httpJson(t, 'PUT', runUrl('third', 'r3'), { status: 'running' }); // 3
    await httpJson(t, 'PUT', runUrl('other.pipe', 'r9'), { status: 'success' }); // 4
    await httpJson(t, 'PUT', runUrl(PIPELINE, 'r1'), { status: 'failed' }); // 5
    await httpJson(t, 'PUT', runUrl('other.pipe', 'r10'), { status: 'queued' }); // 6

    const lastId = `6-${await epochOf(t, topicKey(RUNS_FEED_TOPIC))}`;
    await narrow.waitFor((events) => events.some((e) => e.id === lastId));
    await two.waitFor((events) => events.some((e) => e.id === lastId));
    expect(seqs(narrow.events)).toEqual([2, 5]);
    expect(seqs(two.events)).toEqual([2, 3, 5]);
    for (const reader of [narrow, two]) {
      const others = reader.events.filter((e) => e.event !== 'status');
      expect(others.every((e) => e.event === 'cursor')).toBe(true);
      for (const event of entryEvents(reader.events)) {
        const run = (JSON.parse(event.data) as Entry).data as Run;
        expect([PIPELINE, 'third']).toContain(run.pipeline);
      }
    }
    const statuses = entryEvents(narrow.events).map(
      (e) => ((JSON.parse(e.data) as Entry).data as Run).status,
    );
    expect(statuses).toEqual(['running', 'failed']);
  });

  it('takes each ?pipeline= of the runs feed as one whole FQN: commas and all, in NFC', async () => {
    const t = await start();
    const commaName = 'etl,nightly';
    const byComma = await open(t, `/api/v1/runs/stream?pipeline=${encodeURIComponent(commaName)}`);
    // "café" as e + U+0301: the server stores names in NFC.
    const byNfd = await open(t, `/api/v1/runs/stream?pipeline=${encodeURIComponent('cafe\u0301')}`);
    await httpJson(t, 'PUT', runUrl('etl', 'r1'), { status: 'running' }); // 1
    await httpJson(t, 'PUT', runUrl('nightly', 'r2'), { status: 'running' }); // 2
    await httpJson(t, 'PUT', runUrl(commaName, 'r3'), { status: 'running' }); // 3
    await httpJson(t, 'PUT', runUrl('caf\u00e9', 'r4'), { status: 'running' }); // 4

    const lastId = `4-${await epochOf(t, topicKey(RUNS_FEED_TOPIC))}`;
    for (const reader of [byComma, byNfd]) {
      await reader.waitFor((events) => events.some((e) => e.id === lastId));
    }
    expect(seqs(byComma.events)).toEqual([3]);
    expect(seqs(byNfd.events)).toEqual([4]);

    const bad = await refused(t, '/api/v1/runs/stream?pipeline=%01');
    expect(bad.status).toBe(400);
    expect((JSON.parse(bad.text) as { error: { code: string } }).error.code).toBe('TW_BAD_NAME');
  });

  it("streams a topic's events, its history first and then live", async () => {
    const t = await start();
    const posted = await httpJson(t, 'POST', '/api/v1/topics/prices/events', {
      events: [
        { kind: 'tick', data: { p: 1 } },
        { kind: 'tick', data: { p: 2 }, correlationId: 'x' },
      ],
    });
    expect(posted.status).toBe(200);
    expect(posted.body).toMatchObject({ first: 1, last: 2, duplicates: 0 });

    const reader = await open(t, '/api/v1/topics/prices/stream');
    expect(reader.status).toBe(200);
    expect(reader.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    await reader.waitFor(hasSeq(2));
    await httpJson(t, 'POST', '/api/v1/topics/prices/events', {
      events: [{ kind: 'trade', data: { q: 3 } }],
    });
    await reader.waitFor(hasSeq(3));

    const stored = await storedEntries(t, topicKey('prices'));
    const epoch = await epochOf(t, topicKey('prices'));
    expect(reader.events).toEqual(
      stored.map((entry) => ({
        id: `${entry.seq}-${epoch}`,
        event: entry.kind,
        data: JSON.stringify(entry),
      })),
    );
    expect(stored.map((e) => e.data)).toEqual([{ p: 1 }, { p: 2 }, { q: 3 }]);
  });
});
