import { EventSource } from 'eventsource';
import { afterEach, describe, expect, it } from 'vitest';
import { formatFrame } from '../../src/http/sse.js';
import { runKey } from '../../src/model/stream-key.js';
import { sendEvents } from '../helpers/api.js';
import { liveApps } from '../helpers/app.js';
import type { TestApp } from '../helpers/app.js';
import { closedWithin, entryEvents } from '../helpers/sse.js';
import type { SseEvent } from '../helpers/sse.js';
import { until } from '../helpers/wait.js';

// The ZenML dialect (docs/API.md, "ZenML"): the batch publish endpoint
// and the SSE stream, with the original's test names where they apply.

const RUN = '5f0c6e7a-1b2d-4c3e-9f80-a1b2c3d4e5f6';
const ZENML_PIPELINE = 'zenml';
const KEY = runKey(ZENML_PIPELINE, RUN);
const PREFIX = '/compat/zenml/api/v1/runs';

interface StreamEvent {
  pipeline_run_id: string;
  step_run_id?: string | null;
  step_name?: string | null;
  kind?: string;
  correlation_id?: string | null;
  index?: number | null;
  payload?: unknown;
}

const { start, open, closeAll } = liveApps({ finishGraceSeconds: 0.3, pollSeconds: 0.05 });
const sources: EventSource[] = [];

afterEach(async () => {
  for (const source of sources.splice(0)) source.close();
  await closeAll();
});

// ---- helpers ----------------------------------------------------------------------------

const streamPath = (runId = RUN, query = '') =>
  `${PREFIX}/${encodeURIComponent(runId)}/events/stream${query ? `?${query}` : ''}`;

async function publish(t: TestApp, events: unknown[], runId = RUN) {
  const response = await sendEvents(t, `${PREFIX}/${encodeURIComponent(runId)}`, events);
  const text = await response.text();
  return { status: response.status, headers: response.headers, text, body: JSON.parse(text) };
}

/** A StreamEvent of this run with the given fields. */
const event = (fields: Partial<StreamEvent> = {}): StreamEvent => ({
  pipeline_run_id: RUN,
  payload: {},
  ...fields,
});

const producerFrames = (events: readonly SseEvent[]) =>
  entryEvents(events).filter((e) => e.event !== 'status');
const hasId = (id: number) => (events: SseEvent[]) => events.some((e) => e.id === String(id));

/** A GET expected to be refused before any stream opens (a 200 is aborted at once). */
async function refused(t: TestApp, path: string, headers: Record<string, string> = {}) {
  const controller = new AbortController();
  const response = await fetch(`${t.url}${path}`, { headers, signal: controller.signal });
  if (response.status === 200) {
    controller.abort();
    return { status: 200, headers: response.headers, body: undefined };
  }
  return {
    status: response.status,
    headers: response.headers,
    body: (await response.json()) as { detail: string; error: { code: string; message: string } },
  };
}

/** What the run under the ZenML pipeline holds: no run row and no entry when nothing was stored. */
async function stored(t: TestApp) {
  return {
    runs: (await t.store.findRuns(RUN)).length,
    lastSeq: (await t.store.bounds(KEY)).lastSeq,
  };
}

async function finishRun(t: TestApp, pipeline = ZENML_PIPELINE, runId = RUN) {
  return (await t.ingest.putRun(pipeline, runId, { status: 'success' })).run;
}

// ---- frame bytes --------------------------------------------------------------------------

describe('ZenML frame bytes', () => {
  it('test_format_sse_frame_basic', () => {
    expect(formatFrame({ event: 'event', data: '{"a":1}' })).toBe(
      'event: event\ndata: {"a":1}\n\n',
    );
    expect(formatFrame({ id: '42', event: 'event', data: '{"a":1}' })).toBe(
      'event: event\ndata: {"a":1}\nid: 42\n\n',
    );
  });

  it('test_format_sse_frame_rejects_newlines_in_kind', async () => {
    for (const kind of ['tok\nen', 'tok\ren', 'token\r\n']) {
      expect(() => formatFrame({ event: kind, data: '{}' })).toThrow();
    }
    expect(() => formatFrame({ id: '1\n2', event: 'event', data: '{}' })).toThrow();

    // Such a kind never reaches the wire: the publish endpoint refuses it and stores nothing.
    const t = await start();
    const answer = await publish(t, [event({ kind: 'tok\nen' })]);
    expect(answer.status).toBe(400);
    expect(typeof answer.body.detail).toBe('string');
    expect(await stored(t)).toEqual({ runs: 0, lastSeq: 0 });
  });

  it('sends a published StreamEvent as event: <kind> / data: <StreamEvent JSON> / id, byte for byte', async () => {
    const t = await start();
    const full = {
      pipeline_run_id: RUN,
      step_run_id: '0d1e2f30-4152-6374-8596-a7b8c9d0e1f2',
      step_name: 'summarize',
      kind: 'token',
      correlation_id: 'gen-42',
      index: 7,
      payload: { text: 'Hel', n: [1, 2] },
    };
    const minimal = { pipeline_run_id: RUN, payload: { phase: 'warmup' } };
    const answer = await publish(t, [full, minimal]);
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ count: 2, last_id: '3' });

    const reader = await open(t, streamPath(RUN, 'since=1'));
    expect(reader.status).toBe(200);
    expect(reader.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(reader.headers.get('cache-control')).toBe('no-cache, no-store, no-transform');
    expect(reader.headers.get('x-accel-buffering')).toBe('no');
    await reader.waitFor(hasId(3));
    expect(reader.raw).toBe(
      `event: token\ndata: ${JSON.stringify(full)}\nid: 2\n\n` +
        `event: event\ndata: ${JSON.stringify({
          pipeline_run_id: RUN,
          step_run_id: null,
          step_name: null,
          kind: 'event',
          correlation_id: null,
          index: null,
          payload: { phase: 'warmup' },
        })}\nid: 3\n\n`,
    );
  });
});

// ---- filters and cursors ----------------------------------------------------------------------

describe('ZenML filters and cursors', () => {
  it('test_frame_for_event_kind_filter_skipped_but_id_advances', async () => {
    const t = await start();
    await publish(t, [event({ kind: 'a' }), event({ kind: 'b' }), event({ kind: 'a' })]);
    const reader = await open(t, streamPath(RUN, 'kinds=b'));
    await reader.waitFor(hasId(4));

    const bFrame = `event: b\ndata: ${JSON.stringify({
      pipeline_run_id: RUN,
      step_run_id: null,
      step_name: null,
      kind: 'b',
      correlation_id: null,
      index: null,
      payload: {},
    })}\nid: 3\n\n`;
    // The filtered trailing event is a cursor frame carrying its id and `{}`.
    expect(reader.raw).toBe(`${bFrame}event: cursor\ndata: {}\nid: 4\n\n`);

    // A reconnect with that id replays nothing the filter skipped.
    reader.close();
    const resumed = await open(t, streamPath(RUN, 'kinds=b'), { 'Last-Event-ID': '4' });
    await publish(t, [event({ kind: 'b' })]);
    await resumed.waitFor(hasId(5));
    expect(resumed.events.map((e) => [e.id, e.event])).toEqual([['5', 'b']]);
  });

  it('test_event_filter_combines_fields_as_and', async () => {
    const t = await start();
    const published = [
      event({ kind: 'token', step_name: 'summarize', correlation_id: 'gen-1' }), // 2 ✓
      event({ kind: 'token', step_name: 'train', correlation_id: 'gen-1' }), // 3 step ✗
      event({ kind: 'progress', step_name: 'summarize', correlation_id: 'gen-2' }), // 4 ✓
      event({ kind: 'progress', step_name: 'summarize', correlation_id: 'gen-3' }), // 5 corr ✗
      event({ kind: 'metric', step_name: 'summarize', correlation_id: 'gen-1' }), // 6 kind ✗
      event({ kind: 'token', step_name: 'summarize' }), // 7 no correlation ✗
      event({ kind: 'token', correlation_id: 'gen-2' }), // 8 no step ✗
    ];
    expect((await publish(t, published)).status).toBe(200);
    const query =
      'kinds=token&kinds=progress&step_names=summarize&correlation_ids=gen-1&correlation_ids=gen-2';
    const reader = await open(t, streamPath(RUN, query));
    await reader.waitFor(hasId(8));

    expect(reader.events.map((e) => [e.id, e.event])).toEqual([
      ['2', 'token'],
      ['4', 'progress'],
      ['8', 'cursor'],
    ]);
    expect(JSON.parse(reader.events[1]!.data)).toMatchObject({
      kind: 'progress',
      step_name: 'summarize',
      correlation_id: 'gen-2',
    });
  });

  it('lets Last-Event-ID win over ?since=', async () => {
    const t = await start();
    await publish(t, [event(), event(), event()]); // ids 2, 3, 4
    const sinceOnly = await open(t, streamPath(RUN, 'since=2'));
    const both = await open(t, streamPath(RUN, 'since=2'), { 'Last-Event-ID': '3' });
    await sinceOnly.waitFor(hasId(4));
    await both.waitFor(hasId(4));
    expect(sinceOnly.events.map((e) => e.id)).toEqual(['3', '4']);
    expect(both.events.map((e) => e.id)).toEqual(['4']);
  });

  it.each([
    ['?since=abc', 'since=abc'],
    ['?since=-1', 'since=-1'],
  ])('answers a malformed ?since= (%s) with 400', async (_what, query) => {
    const t = await start();
    await publish(t, [event()]);
    const answer = await refused(t, streamPath(RUN, query));
    expect(answer.status).toBe(400);
    expect(answer.headers.get('content-type')).toMatch(/^application\/json/);
    expect(typeof answer.body!.detail).toBe('string');
    expect(answer.body!.detail.length).toBeGreaterThan(0);
  });

  it.each([
    ['a Redis stream id', '', { 'Last-Event-ID': '1718000000000-0' }],
    ['an id that is no cursor at all, over a good ?since=', 'since=1', { 'Last-Event-ID': 'xyz' }],
  ])(
    'answers a Last-Event-ID it did not issue (%s) with gap reset and the stream from its start',
    async (_what, query, headers) => {
      const t = await start();
      await publish(t, [event(), event()]); // ids 2, 3 (1 is the run's status entry)
      const reader = await open(t, streamPath(RUN, query), headers);
      expect(reader.status).toBe(200);
      await reader.waitFor(hasId(3));
      expect(reader.events[0]).toMatchObject({ event: 'gap', data: '{"reason":"reset"}' });
      expect(reader.events.slice(1).map((e) => e.id)).toEqual(['1', '2', '3']);
    },
  );

  it('sends a `: ping` comment while nothing else is sent', async () => {
    const t = await start({ heartbeatSeconds: 0.2 });
    await publish(t, [event()]);
    const reader = await open(t, streamPath(RUN, 'since=2'));
    await until(() => reader.comments.length >= 2, 'two heartbeats');
    expect(new Set(reader.comments)).toEqual(new Set(['ping']));
    expect(reader.raw).toMatch(/^: ping\n\n: ping\n\n/);
    expect(reader.events).toEqual([]);
  });
});

// ---- subscribing --------------------------------------------------------------------------

describe('ZenML subscriptions', () => {
  it('test_subscribe_replays_history_then_goes_live (with the eventsource client, as a browser would)', async () => {
    const t = await start();
    await publish(t, [event({ payload: { phase: 'warmup' } }), event({ payload: { i: 0 } })]);

    // ZenML's browser example: listen for `event`, close on `end`.
    const got: Array<{ id: string; payload: unknown }> = [];
    let ended = false;
    const es = new EventSource(`${t.url}${streamPath()}`);
    sources.push(es);
    es.addEventListener('event', (e) => {
      const data = JSON.parse(String(e.data)) as StreamEvent;
      got.push({ id: e.lastEventId, payload: data.payload });
    });
    es.addEventListener('end', () => {
      ended = true;
      es.close();
    });
    await until(() => got.length === 2, 'the history');

    await publish(t, [event({ payload: { i: 1 } })]);
    await until(() => got.length === 3, 'a live event');
    await publish(t, [event({ payload: { phase: 'done' } })]);
    await until(() => got.length === 4, 'another live event');
    await finishRun(t);
    await until(() => ended, 'end');

    expect(got).toEqual([
      { id: '2', payload: { phase: 'warmup' } },
      { id: '3', payload: { i: 0 } },
      { id: '4', payload: { i: 1 } },
      { id: '5', payload: { phase: 'done' } },
    ]);
  });

  it('test_stale_run_close_emits_only_end', async () => {
    const t = await start({ finishGraceSeconds: 0.1 });
    await publish(t, [event(), event()]);
    const run = await finishRun(t);

    const upToDate = await open(t, streamPath(), { 'Last-Event-ID': String(run.lastSeq) });
    await closedWithin(upToDate);
    expect(upToDate.raw).toBe('event: end\ndata: {}\n\n');

    // Without a cursor: the retained history, then end.
    const fromStart = await open(t, streamPath());
    await closedWithin(fromStart);
    expect(producerFrames(fromStart.events).map((e) => e.id)).toEqual(['2', '3']);
    expect(fromStart.raw.endsWith('event: end\ndata: {}\n\n')).toBe(true);
    expect(fromStart.events.filter((e) => e.event === 'end')).toHaveLength(1);
  });

  it('test_capacity_cap_enforced', async () => {
    const t = await start({ maxSubscribersPerStream: 2 });
    await publish(t, [event()]);
    const first = await open(t, streamPath());
    const second = await open(t, streamPath());
    for (const reader of [first, second]) await reader.waitFor(hasId(2));

    const answer = await refused(t, streamPath());
    expect(answer.status).toBe(503);
    expect(answer.headers.get('retry-after')).toBe('5');
    expect(answer.headers.get('content-type')).toMatch(/^application\/json/);
    expect(answer.body!.detail).toBe(
      'This pipeline run has reached the per-run subscriber cap (2); retry shortly or close an existing subscriber.',
    );

    // Closing a subscriber frees its slot.
    first.close();
    await until(() => t.hub.tailer(KEY)?.viewerCount === 1, 'the slot to be freed');
    const third = await open(t, streamPath());
    expect(third.status).toBe(200);
    await third.waitFor(hasId(2));
  });

  it('sends gap {"reason":"shutdown"} then end when the server shuts down', async () => {
    const t = await start();
    await publish(t, [event()]);
    const reader = await open(t, streamPath(RUN, 'since=1'));
    await reader.waitFor(hasId(2));
    t.hub.shutdown();
    await closedWithin(reader);
    expect(
      reader.raw.endsWith('event: gap\ndata: {"reason":"shutdown"}\n\nevent: end\ndata: {}\n\n'),
    ).toBe(true);
    expect(reader.events.slice(-2)).toEqual([
      { id: undefined, event: 'gap', data: '{"reason":"shutdown"}' },
      { id: undefined, event: 'end', data: '{}' },
    ]);
  });

  it("resolves {runId} by a run's id across pipelines, or by the UUID the server gave it", async () => {
    const t = await start();
    const { run } = await t.ingest.putRun('training.pipeline', 'run-77', { status: 'running' });
    const answer = await publish(t, [{ pipeline_run_id: 'run-77', payload: { ok: 1 } }], 'run-77');
    expect(answer.status).toBe(200);
    const native = await t.store.readEntries(runKey('training.pipeline', 'run-77'), {
      afterSeq: 0,
      limit: 10,
    });
    expect(native.map((e) => e.kind)).toEqual(['status', 'event']);
    expect(await t.store.getRun(ZENML_PIPELINE, 'run-77')).toBeUndefined();

    const byUuid = await open(t, streamPath(run.id));
    await byUuid.waitFor(hasId(2));
    expect(JSON.parse(producerFrames(byUuid.events)[0]!.data)).toMatchObject({
      pipeline_run_id: run.id,
      payload: { ok: 1 },
    });

    // A run the server has never seen is filed under the zenmlPipeline setting.
    expect((await publish(t, [event()])).status).toBe(200);
    expect((await t.store.getRun(ZENML_PIPELINE, RUN))?.status).toBe('running');
  });
});

// ---- the batch publish endpoint -------------------------------------------------------------

describe('ZenML batch publishing', () => {
  it('test_batch_accepts_at_cap', async () => {
    const t = await start();
    const events = Array.from({ length: 1000 }, (_, index) => event({ index, payload: { index } }));
    const answer = await publish(t, events);
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ count: 1000, last_id: expect.any(String) });

    // last_id is the id the stream gives the batch's last event.
    const reader = await open(t, streamPath(RUN, `since=${Number(answer.body.last_id) - 1}`));
    await reader.waitFor(hasId(Number(answer.body.last_id)));
    expect(reader.events).toHaveLength(1);
    expect(reader.events[0]!.id).toBe(answer.body.last_id);
    expect(JSON.parse(reader.events[0]!.data)).toMatchObject({ index: 999 });
    expect((await stored(t)).lastSeq).toBe(Number(answer.body.last_id));
  });

  it('test_batch_rejects_oversize', async () => {
    const t = await start();
    const answer = await publish(
      t,
      Array.from({ length: 1001 }, () => event()),
    );
    expect(answer.status).toBe(422);
    expect(typeof answer.body.detail).toBe('string');
    expect(await stored(t)).toEqual({ runs: 0, lastSeq: 0 });
  });

  it('answers an empty batch with {"count": 0, "last_id": null} and stores nothing', async () => {
    const t = await start();
    const answer = await publish(t, []);
    expect(answer.status).toBe(200);
    expect(answer.text).toBe('{"count":0,"last_id":null}');
    expect(await stored(t)).toEqual({ runs: 0, lastSeq: 0 });
  });

  it('refuses a batch with a mismatched pipeline_run_id (400) and stores none of it', async () => {
    const t = await start();
    const answer = await publish(t, [event(), { ...event(), pipeline_run_id: 'another-run' }]);
    expect(answer.status).toBe(400);
    expect(answer.body.detail).toMatch(/pipeline_run_id/);
    expect(await stored(t)).toEqual({ runs: 0, lastSeq: 0 });
  });

  it.each(['end', 'gap', 'error', 'cursor', 'system'])(
    'refuses the reserved kind %s (400) and stores none of the batch',
    async (kind) => {
      const t = await start();
      expect((await publish(t, [event()])).status).toBe(200);
      const before = await stored(t);
      const answer = await publish(t, [event(), event({ kind })]);
      expect(answer.status).toBe(400);
      expect(answer.body.detail).toContain(kind);
      expect(await stored(t)).toEqual(before);
    },
  );

  it('refuses an event over 64 KiB + 4 KiB envelope with 413 "Event exceeds 69632 bytes (was N)." and stores nothing', async () => {
    const t = await start();
    const big = event({ kind: 'event', payload: { blob: 'x'.repeat(70_000) } });
    const size = Buffer.byteLength(JSON.stringify(big), 'utf8');
    expect(size).toBeGreaterThan(69_632);
    const answer = await publish(t, [event(), big]);
    expect(answer.status).toBe(413);
    expect(answer.body.detail).toBe(`Event exceeds 69632 bytes (was ${size}).`);
    expect(await stored(t)).toEqual({ runs: 0, lastSeq: 0 });
  });

  it('accepts an event whose payload is exactly 64 KiB', async () => {
    const t = await start();
    const overhead = Buffer.byteLength(JSON.stringify({ blob: '' }), 'utf8');
    const payload = { blob: 'x'.repeat(64 * 1024 - overhead) };
    expect(Buffer.byteLength(JSON.stringify(payload), 'utf8')).toBe(64 * 1024);
    const answer = await publish(t, [event({ payload })]);
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ count: 1, last_id: '2' });
  });

  it("takes its limits from the server's maxBatchEntries and maxEventBytes, and refuses past them in ZenML's words", async () => {
    const t = await start({ maxBatchEntries: 3, maxEventBytes: 100 });
    const tooMany = await publish(
      t,
      Array.from({ length: 4 }, () => event()),
    );
    expect(tooMany.status).toBe(422);
    expect(tooMany.body.detail).toBe('A batch holds at most 3 events (was 4 or more).');
    expect(tooMany.body.error).toEqual({ code: 'TW_UNPROCESSABLE', message: tooMany.body.detail });
    expect(await stored(t)).toEqual({ runs: 0, lastSeq: 0 });

    // A payload over 100 bytes, in an event well within 100 bytes + the 4 KiB envelope.
    const payload = { blob: 'x'.repeat(200) };
    const payloadSize = Buffer.byteLength(JSON.stringify(payload), 'utf8');
    const heavy = await publish(t, [event(), event({ payload })]);
    expect(heavy.status).toBe(413);
    expect(heavy.body.detail).toBe(`Event exceeds 100 bytes (was ${payloadSize}).`);
    expect(heavy.body.error.code).toBe('TW_EVENT_TOO_LARGE');

    // An event over 100 bytes + the 4 KiB envelope is refused as it arrives.
    const big = event({ payload: { blob: 'x'.repeat(5000) } });
    const size = Buffer.byteLength(JSON.stringify(big), 'utf8');
    const huge = await publish(t, [big]);
    expect(huge.status).toBe(413);
    expect(huge.body.detail).toBe(`Event exceeds ${100 + 4096} bytes (was ${size}).`);
    expect(await stored(t)).toEqual({ runs: 0, lastSeq: 0 });

    // At the limits: accepted.
    const overhead = Buffer.byteLength(JSON.stringify({ blob: '' }), 'utf8');
    const atLimit = { blob: 'x'.repeat(100 - overhead) };
    const accepted = await publish(t, [event(), event(), event({ payload: atLimit })]);
    expect(accepted.status).toBe(200);
    expect(accepted.body).toEqual({ count: 3, last_id: '4' });
  });

  it('refuses an event whose payload is not an object (422) and stores nothing', async () => {
    const t = await start();
    const answer = await publish(t, [event(), { pipeline_run_id: RUN, payload: [1, 2] }]);
    expect(answer.status).toBe(422);
    expect(answer.body.detail).toMatch(/^events\[1\]/);
    expect(await stored(t)).toEqual({ runs: 0, lastSeq: 0 });
  });
});
