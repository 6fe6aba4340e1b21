import { afterEach, describe, expect, it, vi } from 'vitest';
import type { EndReason } from '../../src/engine/frames.js';
import type { PartialSettings } from '../../src/model/settings.js';
import type { StreamKey } from '../../src/model/stream-key.js';
import { runKey, streamId } from '../../src/model/stream-key.js';
import { runStreamPath } from '../helpers/api.js';
import { appendLogLine, liveApps, seedRunningRun } from '../helpers/app.js';
import type { TestApp } from '../helpers/app.js';
import {
  closedWithin,
  CONTROL_FRAMES,
  endOf,
  hasEvent,
  hasSeq,
  range,
  seqOfId,
  seqs,
  watchClosed,
} from '../helpers/sse.js';
import type { SseReader } from '../helpers/sse.js';
import { sleep, until } from '../helpers/wait.js';

// The engine's rules from issue #3, where native-stream.test.ts does not already show them.
// Already there: every end reason (runFinished, idleTimeout, maxDuration, maxBytes while catching
// up, shutdown), the three caps answering 503 + Retry-After: 5 + JSON, the run state learnt from a
// status entry and not looked up again, one failed shared read, and a persistent failure's error
// frame. Here: every end reason freeing its slot, maxBytes on a live viewer, caps never queueing,
// the run-state lookup interval itself (and a lookup finding the run finished, or failing), two
// hiccups in a row and a hiccup while catching up, and what a persistent failure leaves intact.

const PIPELINE = 'etl.daily';

const { start, open, closeAll } = liveApps({ pollSeconds: 0.05, finishGraceSeconds: 0.2 });

afterEach(async () => {
  vi.restoreAllMocks();
  await closeAll();
});

// ---- helpers ----------------------------------------------------------------------------

const runPath = (runId: string, query = '') => runStreamPath(PIPELINE, runId, query);

const seedRun = (t: TestApp, runId: string, lines: number) =>
  seedRunningRun(t, PIPELINE, runId, lines);

const appendLine = (t: TestApp, runId: string, text: string) =>
  appendLogLine(t, PIPELINE, runId, text);

/** A GET expected to be refused; a stream that opens after all is aborted at once. */
async function refused(t: TestApp, path: string) {
  const controller = new AbortController();
  const response = await fetch(`${t.url}${path}`, { signal: controller.signal });
  if (response.status === 200) {
    controller.abort();
    return { status: 200, retryAfter: response.headers.get('retry-after'), body: undefined };
  }
  return {
    status: response.status,
    retryAfter: response.headers.get('retry-after'),
    contentType: response.headers.get('content-type'),
    body: (await response.json()) as { error: { code: string; message: string } },
  };
}

/** Makes store.readEntries fail for one stream (or for calls `when` picks), others unharmed. */
function failReads(
  t: TestApp,
  when: (key: StreamKey, options: { afterSeq: number; limit: number }) => boolean,
  error = new Error('disk I/O error'),
) {
  const read = t.store.readEntries.bind(t.store);
  const failed: number[] = [];
  const spy = vi.spyOn(t.store, 'readEntries').mockImplementation(async (key, options) => {
    if (when(key, options)) {
      failed.push(options.afterSeq);
      throw error;
    }
    return read(key, options);
  });
  return { failed, restore: () => spy.mockRestore() };
}

// ---- how a stream ends ----------------------------------------------------------------------

describe('end of stream', () => {
  type Scenario = {
    settings: PartialSettings;
    prepare: (t: TestApp) => Promise<void>;
    path: string;
    trigger?: (t: TestApp, reader: SseReader) => Promise<void>;
  };
  const scenarios: Array<[EndReason, Scenario]> = [
    [
      'runFinished',
      {
        settings: { finishGraceSeconds: 0.2 },
        prepare: async (t) => {
          await seedRun(t, 'r', 2);
          await t.ingest.putRun(PIPELINE, 'r', { status: 'success' });
        },
        path: runPath('r'),
      },
    ],
    [
      'idleTimeout',
      {
        settings: { maxIdleSeconds: 0.3 },
        prepare: async (t) => void (await seedRun(t, 'r', 2)),
        path: runPath('r'),
      },
    ],
    [
      'maxDuration',
      {
        settings: { maxStreamSeconds: 0.3 },
        prepare: async (t) => void (await seedRun(t, 'r', 2)),
        path: runPath('r'),
      },
    ],
    [
      'maxBytes',
      {
        settings: { maxStreamBytes: 200 },
        prepare: async (t) => void (await seedRun(t, 'r', 10)),
        path: runPath('r'),
      },
    ],
    [
      'shutdown',
      {
        settings: {},
        prepare: async (t) => void (await seedRun(t, 'r', 2)),
        path: runPath('r'),
        trigger: async (t, reader) => {
          await reader.waitFor(hasSeq(3));
          t.hub.shutdown();
        },
      },
    ],
  ];

  it.each(scenarios)(
    'ends with %s as the last frame, closes the body and frees the connection slot',
    async (reason, scenario) => {
      const t = await start(scenario.settings);
      await scenario.prepare(t);
      const reader = await open(t, scenario.path);
      expect(reader.status).toBe(200);
      await scenario.trigger?.(t, reader);
      await closedWithin(reader);

      const last = reader.events.at(-1)!;
      expect(last.event).toBe('end');
      expect(last.id).toBeUndefined();
      const end = JSON.parse(last.data) as { reason: string; lastSeq: number };
      expect(end.reason).toBe(reason);
      // lastSeq is the viewer's own cursor: the last entry it was sent.
      expect(end.lastSeq).toBe(seqs(reader.events).at(-1));
      expect(reader.events.filter((e) => e.event === 'end')).toHaveLength(1);
      await until(() => t.hub.activeConnections === 0, 'the connection slot to be freed');
      expect(t.hub.stats.ends.get(reason)).toBe(1);
    },
  );

  it('stops streaming a live viewer once it has sent as much as it will', async () => {
    const maxBytes = 600;
    const t = await start({ maxStreamBytes: maxBytes });
    await t.ingest.putRun(PIPELINE, 'r', { status: 'running' });
    const reader = await open(t, runPath('r'));
    await reader.waitFor(hasSeq(1));
    const state = watchClosed(reader);

    // Every entry from here reaches the viewer live, one at a time.
    let last = 1;
    for (let i = 1; i <= 40 && !state.closed && !hasEvent('end')(reader.events); i += 1) {
      last = await appendLine(t, 'r', `live line ${i} ${'x'.repeat(30)}\n`);
      await reader.waitFor((events) => hasSeq(last)(events) || hasEvent('end')(events));
    }
    await closedWithin(reader);
    expect(endOf(reader.events)).toEqual({
      reason: 'maxBytes',
      status: 'running',
      lastSeq: seqs(reader.events).at(-1),
    });
    const beforeEnd = reader.raw.slice(0, reader.raw.indexOf('event: end'));
    expect(Buffer.byteLength(beforeEnd)).toBeGreaterThanOrEqual(maxBytes);
    expect(seqs(reader.events)).toEqual(range(1, seqs(reader.events).at(-1)!));
    expect(seqs(reader.events).length).toBeLessThan(41);
    await until(() => t.hub.activeConnections === 0, 'the connection slot to be freed');
  });
});

// ---- capacity --------------------------------------------------------------------------------

describe('capacity', () => {
  const caps: Array<[string, PartialSettings, string[], string, string, RegExp]> = [
    [
      'maxActiveConnections',
      { maxActiveConnections: 2 },
      ['a', 'b'],
      'c',
      'TW_TOO_MANY_CONNECTIONS',
      /maximum number of stream connections \(2\)/,
    ],
    [
      'maxActiveStreams',
      { maxActiveStreams: 2 },
      ['a', 'b'],
      'c',
      'TW_TOO_MANY_STREAMS',
      /maximum number of streams \(2\)/,
    ],
    [
      'maxSubscribersPerStream',
      { maxSubscribersPerStream: 2 },
      ['a', 'a'],
      'a',
      'TW_TOO_MANY_SUBSCRIBERS',
      /subscriber cap \(2\)/,
    ],
  ];

  it.each(caps)(
    'a viewer past %s is refused at once with 503, Retry-After: 5 and a JSON error, and never queued',
    async (_cap, settings, held, extra, code, message) => {
      const t = await start(settings);
      const holders = [];
      for (const runId of held) holders.push(await open(t, runPath(runId)));
      expect(holders.map((h) => h.status)).toEqual([200, 200]);
      await until(() => t.hub.activeConnections === 2, 'both viewers to hold their slots');

      // The answer comes while every slot is still held: the request did not wait for one.
      const answer = await refused(t, runPath(extra));
      expect(answer.status).toBe(503);
      expect(answer.retryAfter).toBe('5');
      expect(answer.contentType).toMatch(/^application\/json/);
      expect(answer.body!.error.code).toBe(code);
      expect(answer.body!.error.message).toMatch(message);
      expect(t.hub.activeConnections).toBe(2);

      // Freeing a slot does not bring the refused request back: nothing was queued.
      holders[0]!.close();
      await until(() => t.hub.activeConnections === 1, 'a slot to be freed');
      await sleep(200);
      expect(t.hub.activeConnections).toBe(1);
      // The freed slot serves the next request.
      const next = await open(t, runPath(extra));
      expect(next.status).toBe(200);
      expect(t.hub.activeConnections).toBe(2);
    },
  );
});

// ---- run state -------------------------------------------------------------------------------

describe('run state probing', () => {
  it('looks up the run state at most every runStatePollSeconds while the run is still going', async () => {
    const t = await start({ runStatePollSeconds: 0.2, pollSeconds: 0.05, maxIdleSeconds: 30 });
    await seedRun(t, 'r', 1);
    const lookupTimes: number[] = [];
    const getRun = t.store.getRun.bind(t.store);
    vi.spyOn(t.store, 'getRun').mockImplementation(async (pipeline, runId) => {
      lookupTimes.push(Date.now());
      return getRun(pipeline, runId);
    });
    const openedAt = Date.now();
    const reader = await open(t, runPath('r'));
    await reader.waitFor(hasSeq(2));
    const tailer = t.hub.tailer(runKey(PIPELINE, 'r'))!;

    // A running run keeps being looked up, but sparingly: polls come every 50 ms.
    await until(() => tailer.runStateLookups >= 5, 'five lookups');
    const elapsed = Date.now() - openedAt;
    expect(tailer.runStateLookups).toBeLessThanOrEqual(Math.floor(elapsed / 200) + 1);
    expect(lookupTimes.length).toBe(tailer.runStateLookups);
    for (let i = 1; i < lookupTimes.length; i += 1) {
      expect(lookupTimes[i]! - lookupTimes[i - 1]!, `lookup ${i}`).toBeGreaterThanOrEqual(199);
    }
  });

  it('never looks the run state up again once a lookup found it finished', async () => {
    // The run's last entry is a late log line, not its status entry: only a lookup can tell
    // the stream reader that the run finished.
    const t = await start({ runStatePollSeconds: 0.2, pollSeconds: 0.05, finishGraceSeconds: 30 });
    await seedRun(t, 'r', 1);
    await t.ingest.putRun(PIPELINE, 'r', { status: 'success' });
    const late = await appendLine(t, 'r', 'late flush\n');
    const reader = await open(t, runPath('r', 'from=latest'));
    await until(() => t.hub.tailer(runKey(PIPELINE, 'r'))?.viewerCount === 1, 'the viewer');
    const tailer = t.hub.tailer(runKey(PIPELINE, 'r'))!;
    expect(tailer.runStateLookups).toBe(1);

    await sleep(1200); // six lookup intervals, 24 polls
    expect(tailer.runStateLookups).toBe(1);
    expect(reader.events).toEqual([]);
    expect(tailer.top).toBe(late);
  });

  it('counts a failed run-state lookup as running, so a flaky store never ends the stream early', async () => {
    // No run row and no entry: with a working store this is runFinished after 0.2 s
    // (unknownRunGraceSeconds). A lookup that fails says nothing, so the run counts as running
    // and only maxIdleSeconds ends it.
    const idle = 0.8;
    const t = await start({
      runStatePollSeconds: 0.2,
      unknownRunGraceSeconds: 0.2,
      maxIdleSeconds: idle,
    });
    vi.spyOn(t.store, 'getRun').mockRejectedValue(new Error('SQLITE_BUSY'));
    const openedAt = Date.now();
    const reader = await open(t, runPath('ghost'));
    await reader.waitFor(hasEvent('end'));
    const endedAfter = Date.now() - openedAt;
    expect(endedAfter).toBeGreaterThanOrEqual(idle * 1000);
    expect(endOf(reader.events)).toEqual({ reason: 'idleTimeout', lastSeq: 0 });
    await closedWithin(reader);
  });
});

// ---- store failures ----------------------------------------------------------------------------

describe('store failures', () => {
  it('two failed reads in a row are still a hiccup: the stream carries on without loss', async () => {
    const t = await start();
    await seedRun(t, 'r', 1);
    const reader = await open(t, runPath('r'));
    await reader.waitFor(hasSeq(2));

    const spy = vi
      .spyOn(t.store, 'readEntries')
      .mockRejectedValueOnce(new Error('SQLITE_BUSY'))
      .mockRejectedValueOnce(new Error('SQLITE_BUSY'));
    const next = await appendLine(t, 'r', 'after two hiccups\n');
    await reader.waitFor(hasSeq(next));
    expect(spy.mock.calls.length).toBeGreaterThanOrEqual(3);
    expect(reader.events.map((e) => e.event)).toEqual(['status', 'log', 'log']);
    const more = await appendLine(t, 'r', 'and more\n');
    await reader.waitFor(hasSeq(more));
    expect(seqs(reader.events)).toEqual(range(1, more));
  });

  it('a backend hiccup while a viewer catches up from the store does not end its stream', async () => {
    const t = await start({ replayBufferBytes: 0, readBatchEntries: 5 });
    const last = await seedRun(t, 'r', 30);
    const key = runKey(PIPELINE, 'r');
    // Fail the viewer's second and third page reads (two in a row), then let them through.
    let pages = 0;
    const { failed } = failReads(
      t,
      (k, options) =>
        streamId(k) === streamId(key) &&
        options.limit === 5 &&
        options.afterSeq < last &&
        [2, 3].includes(++pages),
      new Error('SQLITE_BUSY'),
    );

    const reader = await open(t, runPath('r'));
    await reader.waitFor(hasSeq(last));
    expect(failed).toEqual([5, 5]);
    expect(seqs(reader.events)).toEqual(range(1, last));
    expect(reader.events.filter((e) => CONTROL_FRAMES.has(e.event))).toEqual([]);

    const next = await appendLine(t, 'r', 'live after catching up\n');
    await reader.waitFor(hasSeq(next));
    expect(seqs(reader.events)).toEqual(range(1, next));
  });

  it("a persistent source failure ends its own stream with an error event and leaves another stream's reader unharmed", async () => {
    const t = await start();
    await seedRun(t, 'broken', 1);
    await seedRun(t, 'healthy', 1);
    const broken = await open(t, runPath('broken'));
    const healthy = await open(t, runPath('healthy'));
    await broken.waitFor(hasSeq(2));
    await healthy.waitFor(hasSeq(2));
    const healthyKey = runKey(PIPELINE, 'healthy');
    const healthyTailer = t.hub.tailer(healthyKey)!;

    failReads(t, (key) => streamId(key) === streamId(runKey(PIPELINE, 'broken')));
    await appendLine(t, 'broken', 'unreadable\n');
    await closedWithin(broken);
    const error = broken.events.at(-1)!;
    expect(error.event).toBe('error');
    expect(JSON.parse(error.data)).toMatchObject({ code: 'TW_STORE_UNAVAILABLE' });
    expect(JSON.parse(error.data).message).toContain('disk I/O error');

    // The other stream goes on with the same reader, live.
    const readsBefore = healthyTailer.sharedReads;
    for (let i = 1; i <= 3; i += 1) {
      const seq = await appendLine(t, 'healthy', `still fine ${i}\n`);
      await healthy.waitFor(hasSeq(seq));
    }
    expect(seqs(healthy.events)).toEqual(range(1, 5));
    expect(healthy.events.some((e) => e.event === 'error' || e.event === 'end')).toBe(false);
    expect(t.hub.tailer(healthyKey)).toBe(healthyTailer);
    expect(healthyTailer.sharedReads).toBeGreaterThan(readsBefore);
    expect(t.hub.activeConnections).toBe(1);
  });

  it("a persistent source failure frees the failed reader's slot, so a new viewer can open", async () => {
    const t = await start({ maxActiveStreams: 1 });
    await seedRun(t, 'r', 1);
    await seedRun(t, 'other', 1);
    const key = runKey(PIPELINE, 'r');
    const reader = await open(t, runPath('r'));
    await reader.waitFor(hasSeq(2));
    const failedTailer = t.hub.tailer(key)!;
    // The one stream slot is taken.
    expect((await refused(t, runPath('other'))).status).toBe(503);

    const failure = failReads(t, (k) => streamId(k) === streamId(key));
    const missed = await appendLine(t, 'r', 'unreadable\n');
    await reader.waitFor(hasEvent('error'));
    await closedWithin(reader);
    await until(() => t.hub.tailer(key) === undefined, 'the failed reader to be dropped');
    expect(t.hub.activeStreams).toBe(0);
    expect(t.hub.activeConnections).toBe(0);
    expect(t.bus.subscribedStreams).toBe(0);

    // Its slot serves another stream…
    const other = await open(t, runPath('other'));
    expect(other.status).toBe(200);
    await other.waitFor(hasSeq(2));
    other.close();
    await until(() => t.hub.activeStreams === 0, 'the other stream to be released');

    // …and, once the store is back, a new reader of the failed stream, from the viewer's cursor.
    failure.restore();
    const again = await open(t, runPath('r'), { 'Last-Event-ID': '2' });
    expect(again.status).toBe(200);
    await again.waitFor(hasSeq(missed));
    expect(seqs(again.events)).toEqual([missed]);
    expect(t.hub.tailer(key)).not.toBe(failedTailer);
  });

  it('a persistent failure while a viewer catches up ends that viewer alone with an error event', async () => {
    const t = await start({ replayBufferBytes: 0, readBatchEntries: 5 });
    const key = runKey(PIPELINE, 'r');
    const last = await seedRun(t, 'r', 20);
    const live = await open(t, runPath('r'), { 'Last-Event-ID': String(last) });
    await until(() => t.hub.tailer(key)?.viewerCount === 1, 'the live viewer');

    // Pages behind the stream's newest entry fail; the shared reader's reads go through.
    const { failed } = failReads(
      t,
      (k, options) =>
        streamId(k) === streamId(key) &&
        options.limit === 5 &&
        options.afterSeq < (t.hub.tailer(key)?.top ?? 0),
    );
    const behind = await open(t, runPath('r'), { 'Last-Event-ID': '5' });
    await closedWithin(behind);
    expect(failed.length).toBeGreaterThanOrEqual(3);
    expect(seqs(behind.events)).toEqual([]);
    expect(behind.events.at(-1)!.event).toBe('error');
    expect(JSON.parse(behind.events.at(-1)!.data)).toMatchObject({ code: 'TW_STORE_UNAVAILABLE' });

    // The stream itself, and its live viewer, go on.
    const next = await appendLine(t, 'r', 'live\n');
    await live.waitFor(hasSeq(next));
    expect(seqs(live.events)).toEqual([next]);
    expect(live.events.some((e) => e.event === 'error')).toBe(false);
    expect(t.hub.tailer(key)?.viewerCount).toBe(1);
    await until(() => t.hub.activeConnections === 1, 'the failed viewer to be released');
    expect(t.hub.stats.ends.get('error')).toBe(1);
  });
});

describe('catching up a viewer that keeps some kinds', () => {
  const topic = (name: string, query = '') =>
    `/api/v1/topics/${name}/stream${query ? `?${query}` : ''}`;

  it('reads only the entries of its kinds: a few rare events among thousands cost a few reads', async () => {
    const t = await start({ readBatchEntries: 100, replayBufferBytes: 0 });
    const key: StreamKey = { type: 'topic', topic: 'mixed' };
    for (let batch = 0; batch < 30; batch += 1) {
      const events = Array.from({ length: 100 }, (_, i) => ({
        kind: (batch * 100 + i) % 997 === 0 ? 'rare' : 'common',
        data: batch * 100 + i,
      }));
      await t.ingest.appendEvents(key, events);
    }
    const all = await t.store.readEntries(key, { afterSeq: 0, limit: 10_000 });
    const rare = all.filter((entry) => entry.kind === 'rare').map((entry) => entry.seq);
    expect(rare).toEqual([1, 998, 1995, 2992]);
    const readsBefore = t.hub.stats.catchUpReads;
    const viewer = await open(t, topic('mixed', 'kinds=rare'));
    await viewer.waitFor((events) =>
      events.some((e) => e.event === 'cursor' && seqOfId(e.id) === 3000),
    );
    expect(seqs(viewer.events.filter((e) => e.event === 'rare'))).toEqual(rare);
    // One read finds all four: 3000 entries at 100 a page would be 30 reads scanned in full.
    expect(t.hub.stats.catchUpReads - readsBefore).toBeLessThanOrEqual(2);
    // It is live from there: a new rare entry arrives, a new common one moves only the cursor.
    await t.ingest.appendEvents(key, [{ kind: 'rare', data: 'new' }]);
    await viewer.waitFor(hasSeq(3001));
  });

  it('sends every entry of its kinds when the byte budget cuts pages of multi-byte text', async () => {
    const t = await start({ readBatchEntries: 1000, maxBytesPerTick: 4096, replayBufferBytes: 0 });
    const runId = 'cjk';
    await t.ingest.putRun(PIPELINE, runId, { status: 'running' });
    const expected: number[] = [];
    for (let i = 0; i < 60; i += 1) {
      // 300 characters of 3 UTF-8 bytes each: 900 bytes, a third of that in UTF-16 length.
      expected.push(await appendLine(t, runId, `${'例'.repeat(300)} ${i}\n`));
      await t.ingest.appendEvents(runKey(PIPELINE, runId), [{ kind: 'tick', data: i }]);
    }
    const viewer = await open(t, runPath(runId, 'kinds=log'));
    await viewer.waitFor(hasSeq(expected[expected.length - 1]!));
    expect(seqs(viewer.events.filter((e) => e.event === 'log'))).toEqual(expected);
  });

  it('is told of entries retention removed before its cursor, then gets what remains of its kinds', async () => {
    const t = await start({ replayBufferBytes: 0 });
    const key: StreamKey = { type: 'topic', topic: 'trimmed' };
    await t.ingest.appendEvents(
      key,
      Array.from({ length: 20 }, (_, i) => ({ kind: i % 2 === 0 ? 'even' : 'odd', data: i })),
    );
    await t.store.trimTopic('trimmed', { maxEntries: 10 });
    const viewer = await open(t, topic('trimmed', 'kinds=even'), { 'Last-Event-ID': '3' });
    await viewer.waitFor(hasSeq(19));
    const gap = viewer.events.find((e) => e.event === 'gap');
    expect(JSON.parse(gap!.data)).toEqual({ reason: 'retention', fromSeq: 4, toSeq: 10 });
    expect(seqs(viewer.events.filter((e) => e.event === 'even'))).toEqual([11, 13, 15, 17, 19]);
  });
});
