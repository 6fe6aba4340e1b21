import { EventSource } from 'eventsource';
import type { LogStreamEvent } from '../helpers/original-clients.js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Subscription } from '../../src/engine/subscription.js';
import type { ViewerTransport } from '../../src/engine/viewer-transport.js';
import { OpenMetadataEncoder } from '../../src/http/openmetadata.js';
import { pipelineId as pipelineUuid } from '../../src/model/pipeline-id.js';
import type { Entry } from '../../src/model/entry.js';
import { defaultSettings } from '../../src/model/settings.js';
import { runKey } from '../../src/model/stream-key.js';
import { http, postLog, putStatus, runPath } from '../helpers/api.js';
import { liveApps, seedRunningRun } from '../helpers/app.js';
import type { TestApp } from '../helpers/app.js';
import { closedWithin, watchClosed } from '../helpers/sse.js';
import type { SseReader } from '../helpers/sse.js';
import { until } from '../helpers/wait.js';

// The OpenMetadata dialect (docs/API.md, "OpenMetadata"): the seed's
// own browser reader and the original's behaviours, over real loopback sockets.

const PIPELINE = 'sample_data.ingest.metadata';
const RUN = 'scheduled__2026-08-10T00:00:00+00:00';
const KEY = runKey(PIPELINE, RUN);
const RUN_PATH = runPath(PIPELINE, RUN);
const PREFIX = '/compat/openmetadata/api/v1/services/ingestionPipelines/logs';

/** LogStreamEvent's properties (logStreamEvent.json); it allows no others. */
const EVENT_PROPERTIES = [
  'eventType',
  'runId',
  'logs',
  'after',
  'replay',
  'truncated',
  'reason',
  'message',
];
const REASONS = ['runFinished', 'idleTimeout', 'maxDuration', 'maxBytes'];

const { start, open, closeAll } = liveApps({ finishGraceSeconds: 0.3, pollSeconds: 0.05 });
const seedClients: Array<{ abort(): void }> = [];

afterEach(async () => {
  vi.restoreAllMocks();
  for (const client of seedClients.splice(0)) client.abort();
  await closeAll();
});

// ---- OpenMetadata's browser reader, runnable in Node 20 ------------------------------------------

interface SeedViewer {
  appendToViewer(logs: string): void;
  onStreamEnd(reason: string): void;
  onStreamError(message: string): void;
}

/**
 * The reader that OpenMetadata's live-log write-up gives for browsers ("从浏览器使用"). `tail` is its code as written (fetch, getReader,
 * TextDecoder, split('\n'), the `data: ` prefix, `cursor = event.after ?? cursor`); only what it
 * took from the page is supplied: the origin and base path (the one thing a deployment changes),
 * the OIDC token and the viewer's three callbacks.
 */
function seedLogTail(origin: string, token: string, viewer: SeedViewer) {
  const window = { location: { origin } };
  const getBasePath = () => '/compat/openmetadata';
  const getEncodedFqn = (fqn: string) => encodeURIComponent(fqn);
  const getOidcToken = async () => token;
  const { appendToViewer, onStreamEnd, onStreamError } = viewer;

  // ---- the seed's code, unchanged in logic ----
  const controller = new AbortController();
  let cursor: string | undefined;
  const tail = async (fqn: string, runId: string) => {
    const url = new URL(
      `${getBasePath()}/api/v1/services/ingestionPipelines/logs/${getEncodedFqn(
        fqn,
      )}/stream/${encodeURIComponent(runId)}`,
      window.location.origin,
    );
    if (cursor) {
      url.searchParams.set('after', cursor);
    }
    const response = await fetch(url, {
      headers: { Authorization: `Bearer ${await getOidcToken()}` },
      signal: controller.signal,
    });
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    for (;;) {
      const { done, value } = await reader.read();
      if (done) {
        break;
      }
      buffer += decoder.decode(value, { stream: true });
      const frames = buffer.split('\n');
      buffer = frames.pop() ?? '';
      for (const frame of frames) {
        if (!frame.startsWith('data: ')) {
          continue; // a heartbeat comment or the blank line between frames
        }
        const event = JSON.parse(frame.slice(6));
        cursor = event.after ?? cursor;
        if (event.eventType === 'logs') {
          appendToViewer(event.logs);
        } else if (event.eventType === 'complete') {
          onStreamEnd(event.reason); // reasons other than runFinished reconnect here
        } else {
          onStreamError(event.message);
        }
      }
    }
  };
  // ---- end of the seed's code ----

  const client = {
    tail,
    get cursor() {
      return cursor;
    },
    abort: () => controller.abort(),
  };
  seedClients.push(client);
  return client;
}

// ---- helpers ----------------------------------------------------------------------------

function streamPath(fqnOrId = PIPELINE, runId = RUN, after?: string): string {
  const path = `${PREFIX}/${encodeURIComponent(fqnOrId)}/stream/${encodeURIComponent(runId)}`;
  return after === undefined ? path : `${path}?after=${encodeURIComponent(after)}`;
}

function eventsOf(reader: SseReader): LogStreamEvent[] {
  return reader.events.map((event) => JSON.parse(event.data) as LogStreamEvent);
}

function logsOf(reader: SseReader): LogStreamEvent[] {
  return eventsOf(reader).filter((event) => event.eventType === 'logs');
}

const textOf = (events: LogStreamEvent[]) => events.map((event) => event.logs).join('');

const logCount = (n: number) => (events: Array<{ data: string }>) =>
  events.filter((event) => (JSON.parse(event.data) as LogStreamEvent).eventType === 'logs')
    .length >= n;

async function within<T>(promise: Promise<T>, what: string, timeoutMs = 10_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), timeoutMs);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** A running run with `lines` log lines `line 1\n`…; returns the seq of the last. */
const seedRun = (t: TestApp, lines: number, fqn = PIPELINE, runId = RUN) =>
  seedRunningRun(t, fqn, runId, lines);

const lines = (from: number, to: number) =>
  Array.from({ length: to - from + 1 }, (_, i) => `line ${from + i}\n`).join('');

/** The exact bytes of one unnamed frame: one with `after` carries it as its SSE id, last. */
const frame = (event: LogStreamEvent) =>
  `data: ${JSON.stringify(event)}\n${event.after === undefined ? '' : `id: ${event.after}\n`}\n`;

/** The byte length of some log text in UTF-8: the unit of every OpenMetadata cursor. */
const bytes = (text: string) => Buffer.byteLength(text, 'utf8');

/** The cursor just past an append: where its text ends in the run's log. */
const endOf = (append: { offset: number; size: number }) => String(append.offset + append.size);

// ---- the seed's own browser reader ------------------------------------------------------------

describe("OpenMetadata's browser reader against the OpenMetadata dialect", () => {
  it('tails a live run to complete with runFinished, then reconnects with its saved after and gets nothing twice', async () => {
    const t = await start({ finishGraceSeconds: 0.3, pollSeconds: 0.05 });
    await putStatus(t, RUN_PATH, 'running');
    await postLog(t, RUN_PATH, 'line 1\n');
    await postLog(t, RUN_PATH, 'line 2\n');

    const shown: string[] = [];
    const ends: string[] = [];
    const errors: string[] = [];
    const client = seedLogTail(t.url, 'om-token', {
      appendToViewer: (logs) => shown.push(logs),
      onStreamEnd: (reason) => ends.push(reason),
      onStreamError: (message) => errors.push(message),
    });
    const tailing = client.tail(PIPELINE, RUN);
    await until(() => shown.length === 2, 'the backlog');
    // Lines appended while it reads reach it live.
    for (let i = 3; i <= 6; i += 1) {
      await postLog(t, RUN_PATH, `line ${i}\n`);
      await until(() => shown.length === i, `line ${i}`);
    }
    expect(ends).toEqual([]);
    await putStatus(t, RUN_PATH, 'success');
    await within(tailing, 'the stream to end on its own');

    expect(shown.join('')).toBe(lines(1, 6));
    expect(ends).toEqual(['runFinished']);
    expect(errors).toEqual([]);
    // The saved cursor is the complete event's: just past everything the run wrote, in bytes.
    expect(client.cursor).toBe(String(bytes(lines(1, 6))));

    // Reconnecting with the saved cursor: only the complete, nothing shown twice.
    await within(client.tail(PIPELINE, RUN), 'the resumed stream to end');
    expect(shown.join('')).toBe(lines(1, 6));
    expect(shown).toHaveLength(6);
    expect(ends).toEqual(['runFinished', 'runFinished']);
    expect(errors).toEqual([]);
    expect(client.cursor).toBe(String(bytes(lines(1, 6))));
  });
});

// ---- opening ----------------------------------------------------------------------------

describe('opening an OpenMetadata log stream', () => {
  it('testStreamCommitsImmediatelyAndEndsOnItsOwn', async () => {
    const t = await start();
    await t.ingest.putRun(PIPELINE, RUN, { status: 'running' });
    const reader = await open(t, streamPath());

    // Committed before there is anything to send: the headers came with an empty body.
    expect(reader.status).toBe(200);
    expect(reader.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(reader.headers.get('cache-control')).toBe('no-cache, no-store, no-transform');
    expect(reader.raw).toBe('');

    await t.ingest.putRun(PIPELINE, RUN, { status: 'success' });
    await closedWithin(reader);
    // A run with no log: the cursor is its start.
    expect(reader.raw).toBe(
      frame({ eventType: 'complete', runId: RUN, after: '0', reason: 'runFinished' }),
    );
  });

  it('testStreamForUnknownPipelineReturns404', async () => {
    const t = await start();
    await seedRun(t, 1);

    const unknown = await http(t, 'GET', streamPath('no.such.pipeline'));
    expect(unknown.status).toBe(404);
    expect(unknown.headers.get('content-type')).toMatch(/^application\/json/);
    const unknownId = await http(t, 'GET', streamPath('00000000-0000-5000-8000-000000000000'));
    expect(unknownId.status).toBe(404);

    // A run the known pipeline does not have (yet) is a 200 stream, not a 404.
    const unknownRun = await open(t, streamPath(PIPELINE, 'manual__not-started-yet'));
    expect(unknownRun.status).toBe(200);
    expect(unknownRun.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
  });

  it('resolves a UUID path segment as the pipeline id and anything else as its FQN', async () => {
    const t = await start();
    await seedRun(t, 2);
    const id = pipelineUuid(PIPELINE);
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);

    const byFqn = await open(t, streamPath(PIPELINE));
    const byId = await open(t, streamPath(id));
    const byUpperId = await open(t, streamPath(id.toUpperCase()));
    for (const reader of [byFqn, byId, byUpperId]) {
      expect(reader.status).toBe(200);
      await reader.waitFor(logCount(2));
      expect(textOf(logsOf(reader))).toBe(lines(1, 2));
    }

    const last = await http(t, 'GET', `${PREFIX}/${id}/last`);
    expect(last.status).toBe(200);
    expect(JSON.parse(last.text)).toMatchObject({ ingestion_task: lines(1, 2) });
  });
});

// ---- frames --------------------------------------------------------------------------------

describe('OpenMetadata frames', () => {
  it('are unnamed data frames whose SSE id is their after, so EventSource.onmessage sees them all and resumes by itself', async () => {
    const t = await start();
    await seedRun(t, 3);
    const reader = await open(t, streamPath());
    await reader.waitFor(logCount(3));
    await t.ingest.putRun(PIPELINE, RUN, { status: 'success' });
    await closedWithin(reader);

    expect(reader.raw).not.toMatch(/^(event|retry):/m);
    const frames = reader.raw.split('\n\n');
    expect(frames.pop()).toBe('');
    expect(frames).toHaveLength(4);
    for (const text of frames) expect(text).toMatch(/^data: \{[^\n]*\}\nid: \d+$/);
    expect(reader.events.every((e) => e.event === 'message')).toBe(true);
    for (const event of reader.events) {
      expect(event.id).toBe((JSON.parse(event.data) as LogStreamEvent).after);
    }

    for (const event of eventsOf(reader)) {
      for (const key of Object.keys(event)) expect(EVENT_PROPERTIES).toContain(key);
      expect(['logs', 'complete', 'error']).toContain(event.eventType);
      expect(event.runId).toBe(RUN);
    }
  });

  it('everyEventCarriesTheCursorNeededToResume', async () => {
    const t = await start();
    await seedRun(t, 3);
    const reader = await open(t, streamPath());
    await reader.waitFor(logCount(3));
    const events = logsOf(reader);
    expect(events.map((e) => e.logs)).toEqual(['line 1\n', 'line 2\n', 'line 3\n']);
    // The cursor is the byte offset just past the event's text.
    expect(events.map((e) => e.after)).toEqual(['7', '14', '21']);

    // Each event's cursor resumes just past its own content.
    for (let i = 0; i < events.length; i += 1) {
      const resumed = await open(t, streamPath(PIPELINE, RUN, events[i]!.after));
      const next = await t.ingest.appendLog(PIPELINE, RUN, { text: `probe ${i}\n` });
      await resumed.waitFor((all) =>
        all.some((e) => (JSON.parse(e.data) as LogStreamEvent).after === endOf(next)),
      );
      const expected = events
        .slice(i + 1)
        .map((e) => e.logs)
        .join('');
      const probes = Array.from({ length: i + 1 }, (_, p) => `probe ${p}\n`).join('');
      expect(textOf(logsOf(resumed))).toBe(expected + probes);
      resumed.close();
    }
  });

  it('aViewerResumingFromItsCursorOnlyGetsWhatItMissed', async () => {
    const t = await start();
    await seedRun(t, 3);
    const first = await open(t, streamPath());
    await first.waitFor(logCount(3));
    const saved = logsOf(first).at(-1)!.after!;
    first.close();

    await t.ingest.appendLog(PIPELINE, RUN, { text: 'line 4\n' });
    await t.ingest.appendLog(PIPELINE, RUN, { text: 'line 5\n' });
    const resumed = await open(t, streamPath(PIPELINE, RUN, saved));
    await resumed.waitFor(logCount(2));
    await t.ingest.appendLog(PIPELINE, RUN, { text: 'line 6\n' });
    await resumed.waitFor(logCount(3));

    expect(logsOf(resumed).map((e) => e.logs)).toEqual(['line 4\n', 'line 5\n', 'line 6\n']);
    expect(logsOf(resumed).every((e) => e.truncated === false)).toBe(true);
  });

  it('aViewerAlreadyUpToDateIsNotSentTheBacklogAgain', async () => {
    const t = await start();
    await seedRun(t, 3);
    const upToDate = await open(t, streamPath(PIPELINE, RUN, String(bytes(lines(1, 3)))));
    const next = await t.ingest.appendLog(PIPELINE, RUN, { text: 'new\n' });
    await upToDate.waitFor(logCount(1));

    // The first thing it was sent is the new line.
    expect(eventsOf(upToDate)).toEqual([
      {
        eventType: 'logs',
        runId: RUN,
        logs: 'new\n',
        after: endOf(next),
        replay: false,
        truncated: false,
      },
    ]);
  });

  it.each([
    ['a cursor from another backend', 'chunk:3:120'],
    ['garbage', 'garbage'],
    ['a cursor past the end of this server', '999999'],
    ['an offset inside a log chunk', '3'],
    ['one byte past the end of the log', '22'],
    ['a negative number', '-1'],
  ])(
    'aViewerWhoseCursorTheServerCannotPlaceIsToldTheReplayIsIncomplete (%s)',
    async (_what, after) => {
      const t = await start();
      await seedRun(t, 3);
      const reader = await open(t, streamPath(PIPELINE, RUN, after));
      await reader.waitFor(logCount(4));

      // First a reset notice with no cursor, then everything, as a replay.
      const notice = frame({
        eventType: 'logs',
        runId: RUN,
        logs: '',
        replay: true,
        truncated: true,
      });
      expect(reader.raw.startsWith(notice)).toBe(true);
      const [first, ...rest] = logsOf(reader);
      expect(first).not.toHaveProperty('after');
      expect(rest.map((e) => e.logs)).toEqual(['line 1\n', 'line 2\n', 'line 3\n']);
      expect(rest.every((e) => e.replay === true && e.truncated === false)).toBe(true);
    },
  );

  it('marks catch-up content as replay and live content as not', async () => {
    const t = await start();
    await seedRun(t, 2);
    const reader = await open(t, streamPath());
    await reader.waitFor(logCount(2));
    await t.ingest.appendLog(PIPELINE, RUN, { text: 'line 3\n' });
    await reader.waitFor(logCount(3));

    expect(logsOf(reader).map((e) => [e.logs, e.replay, e.truncated])).toEqual([
      ['line 1\n', true, false],
      ['line 2\n', true, false],
      ['line 3\n', false, false],
    ]);
  });
});

// ---- how a stream ends ---------------------------------------------------------------------

describe('how an OpenMetadata log stream ends', () => {
  it('closesTheStreamOnceAFinishedRunHasGoneQuiet, with a complete that carries no message', async () => {
    const t = await start();
    await seedRun(t, 1);
    const reader = await open(t, streamPath());
    await reader.waitFor(logCount(1));
    await t.ingest.putRun(PIPELINE, RUN, { status: 'success' });
    await closedWithin(reader);
    expect(eventsOf(reader).at(-1)).toEqual({
      eventType: 'complete',
      runId: RUN,
      after: String(bytes('line 1\n')),
      reason: 'runFinished',
    });
  });

  it.each([
    [
      'idleTimeout',
      { maxIdleSeconds: 0.4 },
      'No new logs for this run. Reconnect with the last cursor to resume.',
    ],
    [
      'maxDuration',
      { maxStreamSeconds: 0.4 },
      'Stream lifetime limit reached. Reconnect with the last cursor to resume.',
    ],
  ] as const)('ends a running run with %s and its message', async (reason, settings, message) => {
    const t = await start(settings);
    await seedRun(t, 1);
    const last = bytes('line 1\n');
    const reader = await open(t, streamPath());
    await closedWithin(reader);
    expect(eventsOf(reader)).toEqual([
      {
        eventType: 'logs',
        runId: RUN,
        logs: 'line 1\n',
        after: String(last),
        replay: true,
        truncated: false,
      },
      { eventType: 'complete', runId: RUN, after: String(last), reason, message },
    ]);
  });

  it('stopsStreamingOnceItHasSentAsMuchAsItWill: maxBytes and its message, and the cursor resumes the rest', async () => {
    const t = await start({ maxStreamBytes: 400 });
    await seedRun(t, 12);
    const first = await open(t, streamPath());
    await closedWithin(first);
    const complete = eventsOf(first).at(-1)!;
    const got = logsOf(first);
    expect(got.length).toBeGreaterThan(0);
    expect(got.length).toBeLessThan(12);
    expect(complete).toEqual({
      eventType: 'complete',
      runId: RUN,
      after: got.at(-1)!.after,
      reason: 'maxBytes',
      message: 'Stream size limit reached. Download the full log to see the rest of this run.',
    });

    // Resuming with the cursor (as often as it takes) delivers the rest exactly once.
    let text = textOf(got);
    let cursor = complete.after!;
    for (let attempt = 0; attempt < 20 && text !== lines(1, 12); attempt += 1) {
      const next = await open(t, streamPath(PIPELINE, RUN, cursor));
      await closedWithin(next);
      text += textOf(logsOf(next));
      cursor = eventsOf(next).at(-1)!.after ?? cursor;
    }
    expect(text).toBe(lines(1, 12));
  });

  it('keepsStreamingWhileTheRunIsStillGoing', async () => {
    const t = await start({
      finishGraceSeconds: 0.1,
      unknownRunGraceSeconds: 0.1,
      heartbeatSeconds: 0.1,
    });
    await seedRun(t, 1);
    const reader = await open(t, streamPath());
    const state = watchClosed(reader);
    await reader.waitFor(logCount(1));

    // Heartbeats as the clock: ten grace periods of silence, and the stream is still open.
    await until(() => reader.comments.length >= 10, 'ten heartbeats');
    expect(eventsOf(reader).map((e) => e.eventType)).toEqual(['logs']);
    expect(state.closed).toBe(false);
    await t.ingest.appendLog(PIPELINE, RUN, { text: 'still going\n' });
    await reader.waitFor(logCount(2));
    expect(state.closed).toBe(false);
  });

  it('aRunWithNoStatusRowIsGivenTimeToStartWritingBeforeTheStreamCloses', async () => {
    const t = await start({
      finishGraceSeconds: 0.1,
      unknownRunGraceSeconds: 5,
      heartbeatSeconds: 0.1,
    });
    await seedRun(t, 1);
    const reader = await open(t, streamPath(PIPELINE, 'manual__starts-late'));
    const state = watchClosed(reader);
    await until(() => reader.comments.length >= 5, 'five heartbeats');
    expect(reader.events).toEqual([]);
    expect(state.closed).toBe(false);

    await t.ingest.appendLog(PIPELINE, 'manual__starts-late', { text: 'started late\n' });
    await reader.waitFor(logCount(1));
    expect(textOf(logsOf(reader))).toBe('started late\n');
    expect(state.closed).toBe(false);
  });

  it('givesUpOnARunThatNeverReportsAndNeverLogs', async () => {
    const grace = 0.5;
    const t = await start({ unknownRunGraceSeconds: grace });
    await seedRun(t, 1);
    const openedAt = Date.now();
    const reader = await open(t, streamPath(PIPELINE, 'manual__never'));
    await closedWithin(reader);
    expect(Date.now() - openedAt).toBeGreaterThanOrEqual(grace * 1000);
    expect(eventsOf(reader)).toEqual([
      { eventType: 'complete', runId: 'manual__never', after: '0', reason: 'runFinished' },
    ]);
  });

  it('aBackendHiccupDoesNotEndTheStream', async () => {
    const t = await start();
    await seedRun(t, 1);
    const reader = await open(t, streamPath());
    await reader.waitFor(logCount(1));

    vi.spyOn(t.store, 'readEntries').mockRejectedValueOnce(new Error('SQLITE_BUSY'));
    await t.ingest.appendLog(PIPELINE, RUN, { text: 'line 2\n' });
    await reader.waitFor(logCount(2));
    expect(eventsOf(reader).map((e) => e.eventType)).toEqual(['logs', 'logs']);
    expect(textOf(logsOf(reader))).toBe(lines(1, 2));
  });

  it('aPersistentSourceFailureEndsTheStreamWithAnErrorEvent', async () => {
    const t = await start();
    await seedRun(t, 1);
    const reader = await open(t, streamPath());
    await reader.waitFor(logCount(1));

    vi.spyOn(t.store, 'readEntries').mockRejectedValue(new Error('disk I/O error'));
    await t.ingest.appendLog(PIPELINE, RUN, { text: 'unreadable\n' });
    await closedWithin(reader);
    const error = eventsOf(reader).at(-1)!;
    expect(Object.keys(error).sort()).toEqual(['eventType', 'message', 'runId']);
    expect(error).toMatchObject({ eventType: 'error', runId: RUN });
    expect(error.message).toContain('disk I/O error');
  });

  it('ends every viewer at server shutdown with a complete whose reason the schema allows', async () => {
    const t = await start();
    await seedRun(t, 1);
    const reader = await open(t, streamPath());
    await reader.waitFor(logCount(1));
    t.hub.shutdown();
    await closedWithin(reader);
    const complete = eventsOf(reader).at(-1)!;
    expect(complete.eventType).toBe('complete');
    expect(REASONS).toContain(complete.reason);
    expect(complete.after).toBe(logsOf(reader).at(-1)!.after);
  });
});

// ---- refusals, heartbeats, sharing -------------------------------------------------------------

describe('OpenMetadata refusals, heartbeats and sharing', () => {
  it('aRunPastTheServersCapacityIsRefusedRatherThanQueued: one error event on a 200 stream', async () => {
    const t = await start({ maxActiveStreams: 1 });
    await seedRun(t, 1, PIPELINE, 'run-1');
    await seedRun(t, 1, PIPELINE, 'run-2');
    const first = await open(t, streamPath(PIPELINE, 'run-1'));
    await first.waitFor(logCount(1));

    const refused = await open(t, streamPath(PIPELINE, 'run-2'));
    expect(refused.status).toBe(200);
    expect(refused.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    await closedWithin(refused);
    expect(refused.raw).toBe(
      frame({
        eventType: 'error',
        runId: 'run-2',
        message:
          'The server is already streaming the maximum number of pipeline runs. Retry shortly or use the paginated log endpoint.',
      }),
    );
  });

  it('aViewerPastTheConnectionCapIsRefusedRatherThanQueued: one error event on a 200 stream', async () => {
    const t = await start({ maxActiveConnections: 1 });
    await seedRun(t, 1);
    const first = await open(t, streamPath());
    await first.waitFor(logCount(1));

    const refused = await open(t, streamPath());
    expect(refused.status).toBe(200);
    expect(refused.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    await closedWithin(refused);
    expect(refused.raw).toBe(
      frame({
        eventType: 'error',
        runId: RUN,
        message:
          'The server is already serving the maximum number of log stream connections. Retry shortly or use the paginated log endpoint.',
      }),
    );
  });

  it('refuses a viewer past the per-run viewer cap with an error event too, not an HTTP status', async () => {
    const t = await start({ maxSubscribersPerStream: 1 });
    await seedRun(t, 1);
    const first = await open(t, streamPath());
    await first.waitFor(logCount(1));
    const refused = await open(t, streamPath());
    expect(refused.status).toBe(200);
    await closedWithin(refused);
    const events = eventsOf(refused);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ eventType: 'error', runId: RUN });
    expect(Object.keys(events[0]!).sort()).toEqual(['eventType', 'message', 'runId']);
  });

  it('sends a `: heartbeat` comment every heartbeatSeconds, the first one heartbeatSeconds after connect', async () => {
    expect(defaultSettings().heartbeatSeconds).toBe(25);
    const t = await start({ heartbeatSeconds: 0.3 });
    await t.ingest.putRun(PIPELINE, RUN, { status: 'running' });
    const openedAt = Date.now();
    const reader = await open(t, streamPath());
    await until(() => reader.raw.includes(': heartbeat\n\n'), 'a heartbeat');
    expect(Date.now() - openedAt).toBeGreaterThanOrEqual(300);
    await until(() => reader.comments.length >= 2, 'a second heartbeat');
    expect(reader.raw.startsWith(': heartbeat\n\n: heartbeat\n\n')).toBe(true);
    expect(reader.events).toEqual([]);
  });

  it('twoViewersOfTheSameRunShareASingleReader', async () => {
    // A slow poll, so only appends wake the reader and its reads can be counted exactly.
    const t = await start({ pollSeconds: 30 });
    await seedRun(t, 1);
    const one = await open(t, streamPath());
    await one.waitFor(logCount(1));
    const tailer = t.hub.tailer(KEY)!;

    const before1 = tailer.sharedReads;
    await t.ingest.appendLog(PIPELINE, RUN, { text: 'line 2\n' });
    await one.waitFor(logCount(2));
    await tailer.sync();
    const readsForOne = tailer.sharedReads - before1;

    const two = await open(t, streamPath());
    const three = await open(t, streamPath());
    for (const reader of [two, three]) await reader.waitFor(logCount(2));
    expect(t.hub.tailer(KEY)).toBe(tailer);
    expect(tailer.viewerCount).toBe(3);

    const before3 = tailer.sharedReads;
    await t.ingest.appendLog(PIPELINE, RUN, { text: 'line 3\n' });
    for (const reader of [one, two, three]) await reader.waitFor(logCount(3));
    await tailer.sync();
    expect(tailer.sharedReads - before3).toBe(readsForOne);
    for (const reader of [one, two, three]) expect(textOf(logsOf(reader))).toBe(lines(1, 3));
  });

  it('chargesMultiByteContentByWhatItWeighsEncoded', () => {
    const heavy = '例'.repeat(200);
    expect(heavy.length).toBe(200);
    expect(Buffer.byteLength(heavy, 'utf8')).toBe(600);
    const encoder = new OpenMetadataEncoder(RUN);
    const entry: Entry = {
      seq: 2,
      time: new Date().toISOString(),
      kind: 'log',
      offset: 0,
      text: heavy,
    };
    const encoded = encoder.entry(entry, false)!;
    const expected = frame({
      eventType: 'logs',
      runId: RUN,
      logs: heavy,
      after: '600',
      replay: false,
      truncated: false,
    });
    expect(encoded.toString('utf8')).toBe(expected);
    expect(encoded.length).toBe(Buffer.byteLength(expected, 'utf8'));
    expect(encoded.length - expected.length).toBe(400);

    // A socket that never drains; the cap sits between the frame's weight in characters and
    // in bytes, so only counting encoded bytes puts this viewer over it.
    const viewer = (cap: number) => {
      const transport: ViewerTransport & { pending: number } = {
        pending: 0,
        write(chunk) {
          this.pending += chunk.length;
          return false;
        },
        get pendingBytes() {
          return this.pending;
        },
        closed: false,
        attach: () => undefined,
        close: () => undefined,
      };
      const limits = { maxStreamBytes: 1 << 30, maxPendingBytes: cap };
      const subscription = new Subscription(encoder, transport, 1, undefined, limits, Date.now());
      subscription.mode = 'live';
      return { transport, subscription };
    };
    const cap = expected.length + 100;
    const heavyViewer = viewer(cap);
    heavyViewer.subscription.deliver([entry], Date.now());
    expect(heavyViewer.transport.pendingBytes).toBe(encoded.length);
    expect(heavyViewer.subscription.bytesSent).toBe(encoded.length);
    expect(heavyViewer.subscription.overPendingCap).toBe(true);

    // The same number of ASCII characters stays under the same cap.
    const light: Entry = { ...entry, text: 'x'.repeat(200) };
    const lightViewer = viewer(cap);
    lightViewer.subscription.deliver([light], Date.now());
    expect(lightViewer.transport.pendingBytes).toBe(expected.length);
    expect(lightViewer.subscription.overPendingCap).toBe(false);
  });
});

// ---- the paginated endpoints -------------------------------------------------------------------

describe('OpenMetadata /last and /last/download', () => {
  it('pages the latest run as {ingestion_task, after, total}, all strings, after omitted at the end', async () => {
    const t = await start();
    await t.ingest.putRun(PIPELINE, 'older', { status: 'success' });
    await t.ingest.appendLog(PIPELINE, 'older', { text: 'old\n' });
    await t.ingest.putRun(PIPELINE, RUN, { status: 'running' });
    for (const text of ['a\n', '例\n', 'c\n']) await t.ingest.appendLog(PIPELINE, RUN, { text });
    const total = String(Buffer.byteLength('a\n例\nc\n', 'utf8'));

    const firstPage = await http(
      t,
      'GET',
      `${PREFIX}/${encodeURIComponent(PIPELINE)}/last?limit=2`,
    );
    expect(firstPage.status).toBe(200);
    const first = JSON.parse(firstPage.text) as Record<string, unknown>;
    expect(Object.keys(first).sort()).toEqual(['after', 'ingestion_task', 'total']);
    expect(first).toMatchObject({ ingestion_task: 'a\n例\n', total });
    expect(typeof first['after']).toBe('string');

    const secondPage = await http(
      t,
      'GET',
      `${PREFIX}/${encodeURIComponent(PIPELINE)}/last?after=${first['after'] as string}&limit=2`,
    );
    expect(JSON.parse(secondPage.text)).toEqual({ ingestion_task: 'c\n', total });

    const whole = await http(t, 'GET', `${PREFIX}/${encodeURIComponent(PIPELINE)}/last`);
    expect(JSON.parse(whole.text)).toEqual({ ingestion_task: 'a\n例\nc\n', total });
    for (const value of Object.values(JSON.parse(whole.text) as object)) {
      expect(typeof value).toBe('string');
    }

    expect((await http(t, 'GET', `${PREFIX}/no.such.pipeline/last`)).status).toBe(404);
  });

  it.each([
    ['ASCII', 'x'],
    ['multi-byte', '例'],
  ])(
    'pages a log of several MiB (%s) to its end by following after, losing nothing',
    async (_what, char) => {
      const t = await start();
      // 80 lines of 64 KiB each (UTF-8), stored as 80 entries: more than one 4 MiB page.
      const line = char.repeat(Math.floor((64 * 1024 - 1) / Buffer.byteLength(char))) + '\n';
      const whole = line.repeat(80);
      await t.ingest.putRun(PIPELINE, RUN, { status: 'success' });
      await t.ingest.appendLog(PIPELINE, RUN, { text: whole });
      const total = String(Buffer.byteLength(whole, 'utf8'));

      let text = '';
      let after: string | undefined;
      let pages = 0;
      do {
        const query = after === undefined ? '' : `?after=${after}`;
        const answer = await http(
          t,
          'GET',
          `${PREFIX}/${encodeURIComponent(PIPELINE)}/last${query}`,
        );
        expect(answer.status).toBe(200);
        const body = JSON.parse(answer.text) as {
          ingestion_task: string;
          after?: string;
          total: string;
        };
        expect(body.total).toBe(total);
        text += body.ingestion_task;
        after = body.after;
        pages += 1;
      } while (after !== undefined && pages < 10);

      // Compared by length first: a diff of 5 MiB strings would drown the report.
      expect(text.length).toBe(whole.length);
      expect(text === whole).toBe(true);
      expect(pages).toBeGreaterThan(1);
    },
  );

  it('downloads the whole log as an attachment named ingestion_logs_<name>_<epochMs>.txt', async () => {
    const t = await start();
    await seedRun(t, 3);
    const before = Date.now();
    const response = await fetch(`${t.url}${PREFIX}/${encodeURIComponent(PIPELINE)}/last/download`);
    const after = Date.now();
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('application/octet-stream');
    const disposition = response.headers.get('content-disposition') ?? '';
    const match =
      /^attachment; filename="ingestion_logs_(.+)_(\d+)\.txt"; filename\*=UTF-8''ingestion_logs_.+_\2\.txt$/.exec(
        disposition,
      );
    expect(match, disposition).not.toBeNull();
    expect(match![1]).toBe(PIPELINE);
    expect(Number(match![2])).toBeGreaterThanOrEqual(before);
    expect(Number(match![2])).toBeLessThanOrEqual(after);
    expect(await response.text()).toBe(lines(1, 3));
  });
});

// ---- cursors in bytes of the log ------------------------------------------------------------

describe('OpenMetadata cursors are byte offsets into the run log', () => {
  /** A run whose log lines have events between them: its seqs run far ahead of its bytes. */
  async function logWithEvents(t: TestApp, texts: readonly string[], eventsBetween: number) {
    await t.ingest.putRun(PIPELINE, RUN, { status: 'running' });
    const appends = [];
    for (const text of texts) {
      appends.push(await t.ingest.appendLog(PIPELINE, RUN, { text }));
      const events = Array.from({ length: eventsBetween }, (_, i) => ({
        kind: 'progress',
        data: undefined,
        dataJson: JSON.stringify({ i }),
      }));
      if (events.length > 0) await t.ingest.appendEvents(KEY, events);
    }
    return appends;
  }

  it('gives each logs frame the byte offset just past its text, multi-byte text counted in bytes', async () => {
    const t = await start();
    const appends = await logWithEvents(t, ['a\n', '例\n', 'c\n'], 5);
    expect(appends.at(-1)!.seq).toBeGreaterThan(bytes('a\n例\nc\n'));
    const reader = await open(t, streamPath());
    await reader.waitFor(logCount(3));
    expect(logsOf(reader).map((e) => [e.logs, e.after])).toEqual([
      ['a\n', '2'],
      ['例\n', '6'],
      ['c\n', '8'],
    ]);
    expect(reader.events.map((e) => e.id)).toEqual(['2', '6', '8']);
  });

  it('resumes from the end of any chunk with exactly what follows, however many events sit between', async () => {
    const t = await start();
    await logWithEvents(t, ['a\n', '例\n', 'c\n'], 5);
    let probes = '';
    for (const [after, expected] of [
      ['0', 'a\n例\nc\n'],
      ['2', '例\nc\n'],
      ['6', 'c\n'],
    ] as const) {
      const resumed = await open(t, streamPath(PIPELINE, RUN, after));
      const probe = await t.ingest.appendLog(PIPELINE, RUN, { text: `probe ${after}\n` });
      probes += `probe ${after}\n`;
      await resumed.waitFor((all) => all.some((e) => e.id === endOf(probe)));
      const got = logsOf(resumed);
      expect(
        got.every((e) => e.truncated === false),
        after,
      ).toBe(true);
      // What followed the cursor, then the probes appended since the first resume.
      expect(textOf(got), after).toBe(expected + probes);
      resumed.close();
    }
  });

  it('resumes by Last-Event-ID as a plain EventSource does, the header winning over ?after=', async () => {
    const t = await start();
    await seedRun(t, 3);
    for (const [path, headers] of [
      [streamPath(), { 'Last-Event-ID': '7' }],
      [streamPath(PIPELINE, RUN, '0'), { 'Last-Event-ID': '7' }],
      [streamPath(PIPELINE, RUN, '14'), { 'Last-Event-ID': '7' }],
    ] as const) {
      const reader = await open(t, path, headers);
      await reader.waitFor(logCount(2));
      expect(
        logsOf(reader).map((e) => e.logs),
        path,
      ).toEqual(['line 2\n', 'line 3\n']);
      expect(
        logsOf(reader).every((e) => e.truncated === false),
        path,
      ).toBe(true);
      reader.close();
    }
  });

  it.each([
    ['a Redis stream id', '1718000000000-0'],
    ['text', 'x'],
    ['an offset inside a chunk', '3'],
    ['an offset past the end', '999'],
  ])(
    'answers a Last-Event-ID it cannot place (%s) with the truncated notice, then the whole log',
    async (_what, id) => {
      const t = await start();
      await seedRun(t, 3);
      const reader = await open(t, streamPath(PIPELINE, RUN, '7'), { 'Last-Event-ID': id });
      expect(reader.status).toBe(200);
      await reader.waitFor(logCount(4));
      expect(
        reader.raw.startsWith(
          frame({ eventType: 'logs', runId: RUN, logs: '', replay: true, truncated: true }),
        ),
      ).toBe(true);
      expect(reader.events[0]!.id).toBeUndefined();
      expect(
        logsOf(reader)
          .slice(1)
          .map((e) => [e.logs, e.after]),
      ).toEqual([
        ['line 1\n', '7'],
        ['line 2\n', '14'],
        ['line 3\n', '21'],
      ]);
    },
  );

  it('lets an EventSource that knows nothing of OpenMetadata resume by itself after a maxDuration end', async () => {
    const t = await start({ maxStreamSeconds: 0.5 });
    await seedRun(t, 3);
    const sent: Array<string | null> = [];
    const shown: string[] = [];
    const completes: LogStreamEvent[] = [];
    const es = new EventSource(`${t.url}${streamPath()}`, {
      fetch: (input, init) => {
        sent.push(new Headers(init?.headers).get('last-event-id'));
        return fetch(input, init);
      },
    });
    seedClients.push({ abort: () => es.close() });
    es.onmessage = (message) => {
      const event = JSON.parse(String(message.data)) as LogStreamEvent;
      if (event.eventType === 'logs') shown.push(event.logs!);
      if (event.eventType === 'complete') completes.push(event);
    };
    await until(() => shown.length === 3, 'the backlog');
    // The first stream ends after 0.5 s; line 4 is written while the EventSource is away.
    await until(() => completes.length === 1, 'the end of the first stream');
    expect(completes[0]).toMatchObject({ reason: 'maxDuration', after: '21' });
    await t.ingest.appendLog(PIPELINE, RUN, { text: 'line 4\n' });
    // It reconnects after its own delay (3 s), with the id of the last frame it got.
    await until(() => shown.length === 4, 'line 4 after the reconnect', 15_000);
    es.close();
    expect(shown.join('')).toBe(lines(1, 4));
    expect(sent.slice(0, 2)).toEqual([null, '21']);
  }, 20_000);

  it('ends with a complete whose after is the cursor resumed from when nothing followed it', async () => {
    const t = await start();
    await seedRun(t, 3);
    await t.ingest.putRun(PIPELINE, RUN, { status: 'success' });
    const reader = await open(t, streamPath(PIPELINE, RUN, '21'));
    await closedWithin(reader);
    expect(reader.raw).toBe(
      frame({ eventType: 'complete', runId: RUN, after: '21', reason: 'runFinished' }),
    );
  });

  it('ends a replay after the truncated notice with a complete at the end of what it replayed', async () => {
    const t = await start();
    await seedRun(t, 2);
    await t.ingest.putRun(PIPELINE, RUN, { status: 'success' });
    const reader = await open(t, streamPath(PIPELINE, RUN, 'garbage'));
    await closedWithin(reader);
    expect(eventsOf(reader).map((e) => [e.eventType, e.after])).toEqual([
      ['logs', undefined],
      ['logs', '7'],
      ['logs', '14'],
      ['complete', '14'],
    ]);
  });
});

// ---- refusals: always an event on a 200 stream once the pipeline is known ------------------------

describe('OpenMetadata refusals after the pipeline is known', () => {
  it('refuses a run id it cannot take with one error event on a 200 stream, not an HTTP error', async () => {
    const t = await start();
    await seedRun(t, 1);
    const runId = 'r'.repeat(300);
    const refused = await open(t, streamPath(PIPELINE, runId));
    expect(refused.status).toBe(200);
    expect(refused.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    await closedWithin(refused);
    const events = eventsOf(refused);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ eventType: 'error', runId });
    expect(Object.keys(events[0]!).sort()).toEqual(['eventType', 'message', 'runId']);
    expect(events[0]!.message!.length).toBeGreaterThan(0);
    // An error frame has no cursor, so it has no id.
    expect(refused.raw).not.toMatch(/^id:/m);
  });

  it('answers a stream asked for while the server shuts down with 200, never a 503', async () => {
    const t = await start();
    await seedRun(t, 1);
    t.hub.shutdown();
    const reader = await open(t, streamPath());
    expect(reader.status).toBe(200);
    expect(reader.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    await closedWithin(reader);
  });

  it('ends a stream asked for while the server shuts down with no frame at all, which the UI retries, not an error event that would stop it', async () => {
    const t = await start();
    await seedRun(t, 1);
    t.hub.shutdown();
    const reader = await open(t, streamPath());
    expect(reader.status).toBe(200);
    await closedWithin(reader);
    expect(eventsOf(reader)).toEqual([]);
    expect(reader.raw).toBe('');
  });

  it.each([
    ['the stream', (fqn: string) => streamPath(fqn)],
    ['the paginated log', (fqn: string) => `${PREFIX}/${encodeURIComponent(fqn)}/last`],
    ['the download', (fqn: string) => `${PREFIX}/${encodeURIComponent(fqn)}/last/download`],
  ])(
    "answers an unknown pipeline on %s with 404 in OpenMetadata's error shape",
    async (_what, path) => {
      const t = await start();
      await seedRun(t, 1);
      const answer = await http(t, 'GET', path('no.such.pipeline'));
      expect(answer.status).toBe(404);
      expect(answer.headers.get('content-type')).toMatch(/^application\/json/);
      const body = JSON.parse(answer.text) as Record<string, unknown>;
      expect(Object.keys(body)).toEqual(['code', 'message', 'error']);
      expect(body).toEqual({
        code: 404,
        message: expect.stringContaining('no.such.pipeline'),
        error: { code: 'TW_PIPELINE_NOT_FOUND', message: body['message'] },
      });
    },
  );

  it("answers a bad query on the paginated log with 400 in OpenMetadata's error shape", async () => {
    const t = await start();
    await seedRun(t, 1);
    const answer = await http(t, 'GET', `${PREFIX}/${encodeURIComponent(PIPELINE)}/last?limit=0`);
    expect(answer.status).toBe(400);
    const body = JSON.parse(answer.text) as Record<string, unknown>;
    expect(body).toEqual({
      code: 400,
      message: expect.stringMatching(/limit/),
      error: { code: 'TW_BAD_QUERY', message: body['message'] },
    });
  });
});

// ---- /last in bytes ---------------------------------------------------------------------------

describe('OpenMetadata /last pages by byte offsets', () => {
  const lastPath = (query = '') =>
    `${PREFIX}/${encodeURIComponent(PIPELINE)}/last${query ? `?${query}` : ''}`;

  interface LastPage {
    ingestion_task: string;
    after?: string;
    total: string;
  }

  async function last(t: TestApp, query = ''): Promise<LastPage> {
    const answer = await http(t, 'GET', lastPath(query));
    expect(answer.status, answer.text).toBe(200);
    const body = JSON.parse(answer.text) as LastPage;
    for (const value of Object.values(body)) expect(typeof value).toBe('string');
    return body;
  }

  it('pages a run with far more events than log bytes to its end, following after until it is absent', async () => {
    const t = await start();
    await t.ingest.putRun(PIPELINE, RUN, { status: 'running' });
    const chars = 'abcdefghijklmnopqrstuvwxyz0123456789'.split('');
    for (const char of chars) {
      await t.ingest.appendLog(PIPELINE, RUN, { text: char });
      await t.ingest.appendEvents(
        KEY,
        Array.from({ length: 20 }, () => ({ kind: 'progress', data: undefined, dataJson: '{}' })),
      );
    }
    const whole = chars.join('');
    expect((await t.store.bounds(KEY)).lastSeq).toBeGreaterThan(20 * whole.length);

    // OpenMetadata's pager: stop when after is absent or Number(after) >= Number(total).
    let text = '';
    let after: string | undefined;
    let pages = 0;
    for (; pages < 100; pages += 1) {
      const body = await last(t, `limit=5${after === undefined ? '' : `&after=${after}`}`);
      expect(body.total).toBe(String(whole.length));
      text += body.ingestion_task;
      if (body.after === undefined) break;
      expect(Number(body.after)).toBeLessThan(Number(body.total));
      after = body.after;
    }
    expect(text).toBe(whole);
    expect(pages + 1).toBe(Math.ceil(whole.length / 5));
  });

  it('starts a page at the first chunk that starts at or after the offset asked for', async () => {
    const t = await start();
    await t.ingest.putRun(PIPELINE, RUN, { status: 'running' });
    for (const text of ['a\n', '例\n', 'c\n']) await t.ingest.appendLog(PIPELINE, RUN, { text });
    expect(await last(t, 'after=2')).toEqual({ ingestion_task: '例\nc\n', total: '8' });
    expect(await last(t, 'after=1')).toEqual({ ingestion_task: '例\nc\n', total: '8' });
    expect(await last(t, 'after=2&limit=1')).toEqual({
      ingestion_task: '例\n',
      after: '6',
      total: '8',
    });
    expect(await last(t, 'after=0&limit=1')).toEqual({
      ingestion_task: 'a\n',
      after: '2',
      total: '8',
    });
  });

  it('answers the end of the log, or an offset inside its last chunk, as the last page: no after', async () => {
    const t = await start();
    await t.ingest.putRun(PIPELINE, RUN, { status: 'running' });
    for (const text of ['a\n', '例\n', 'c\n']) await t.ingest.appendLog(PIPELINE, RUN, { text });
    expect(await last(t, 'after=8')).toEqual({ ingestion_task: '', total: '8' });
    // Nothing starts after byte 7: a pager that followed an after of 7 would never end.
    expect(await last(t, 'after=7')).toEqual({ ingestion_task: '', total: '8' });
  });

  it('answers an offset past the end with an empty last page whose total is still the log length', async () => {
    const t = await start();
    await t.ingest.putRun(PIPELINE, RUN, { status: 'running' });
    for (const text of ['a\n', '例\n', 'c\n']) await t.ingest.appendLog(PIPELINE, RUN, { text });
    expect(await last(t, 'after=50')).toEqual({ ingestion_task: '', total: '8' });
  });

  it('answers a run with no log with an empty page and total "0"', async () => {
    const t = await start();
    await t.ingest.putRun(PIPELINE, RUN, { status: 'queued' });
    expect(await last(t)).toEqual({ ingestion_task: '', total: '0' });
  });

  it('counts limit in log chunks: 1000 by default, at most 10000', async () => {
    const t = await start();
    await t.ingest.putRun(PIPELINE, RUN, { status: 'running' });
    // 1001 chunks of one byte each, written in one go.
    await t.store.appendLog(
      PIPELINE,
      RUN,
      Array.from({ length: 1001 }, () => ({ text: 'z', step: undefined, id: undefined })),
    );
    const first = await last(t);
    expect(first).toEqual({ ingestion_task: 'z'.repeat(1000), after: '1000', total: '1001' });
    expect(await last(t, 'after=1000')).toEqual({ ingestion_task: 'z', total: '1001' });
    expect(await last(t, 'limit=10000')).toEqual({
      ingestion_task: 'z'.repeat(1001),
      total: '1001',
    });
    expect((await http(t, 'GET', lastPath('limit=10001'))).status).toBe(400);
  });
});

describe('OpenMetadata frames name the run', () => {
  it('the same way in every frame of a stream, whichever spelling (NFC or NFD) another viewer of the run used', async () => {
    const t = await start();
    const nfc = 'caf\u00e9';
    const nfd = 'cafe\u0301';
    await t.ingest.putRun(PIPELINE, nfc, { status: 'running' });
    await t.ingest.appendLog(PIPELINE, nfc, { text: 'line 1\n' });
    // Both spellings name one run (names are kept in NFC): one reader serves both viewers.
    const first = await open(t, streamPath(PIPELINE, nfd));
    await first.waitFor(logCount(1));
    const second = await open(t, streamPath(PIPELINE, nfc));
    await second.waitFor(logCount(1));
    await t.ingest.appendLog(PIPELINE, nfc, { text: 'line 2\n' });
    for (const reader of [first, second]) await reader.waitFor(logCount(2));
    expect(textOf(logsOf(second))).toBe(lines(1, 2));
    for (const reader of [first, second]) {
      const names = [...new Set(eventsOf(reader).map((e) => e.runId!))];
      const spelled = names.map((name) => (name === name.normalize('NFC') ? 'NFC' : 'NFD'));
      expect(spelled, 'the spellings of the run id in one stream').toHaveLength(1);
    }
  });
});
