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

interface LogStreamEvent {
  eventType: 'logs' | 'complete' | 'error';
  runId?: string;
  logs?: string;
  after?: string;
  replay?: boolean;
  truncated?: boolean;
  reason?: string;
  message?: string;
}

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

/** The exact bytes of one unnamed frame. */
const frame = (event: object) => `data: ${JSON.stringify(event)}\n\n`;

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
    const finished = await putStatus(t, RUN_PATH, 'success');
    await within(tailing, 'the stream to end on its own');

    expect(shown.join('')).toBe(lines(1, 6));
    expect(ends).toEqual(['runFinished']);
    expect(errors).toEqual([]);
    // The saved cursor is the complete event's: just past everything the run wrote.
    expect(client.cursor).toBe(String(finished.lastSeq));

    // Reconnecting with the saved cursor: only the complete, nothing shown twice.
    await within(client.tail(PIPELINE, RUN), 'the resumed stream to end');
    expect(shown.join('')).toBe(lines(1, 6));
    expect(shown).toHaveLength(6);
    expect(ends).toEqual(['runFinished', 'runFinished']);
    expect(errors).toEqual([]);
    expect(client.cursor).toBe(String(finished.lastSeq));
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

    const finished = await t.ingest.putRun(PIPELINE, RUN, { status: 'success' });
    await closedWithin(reader);
    expect(reader.raw).toBe(
      frame({
        eventType: 'complete',
        runId: RUN,
        after: String(finished.run.lastSeq),
        reason: 'runFinished',
      }),
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
  it('are unnamed data frames with no id or event line, so EventSource.onmessage sees them all', async () => {
    const t = await start();
    await seedRun(t, 3);
    const reader = await open(t, streamPath());
    await reader.waitFor(logCount(3));
    await t.ingest.putRun(PIPELINE, RUN, { status: 'success' });
    await closedWithin(reader);

    expect(reader.raw).not.toMatch(/^(id|event|retry):/m);
    const frames = reader.raw.split('\n\n');
    expect(frames.pop()).toBe('');
    expect(frames).toHaveLength(4);
    for (const text of frames) expect(text).toMatch(/^data: \{[^\n]*\}$/);
    expect(reader.events.every((e) => e.event === 'message' && e.id === undefined)).toBe(true);

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
    for (const event of events) {
      expect(typeof event.after).toBe('string');
      expect(event.after).not.toBe('');
    }

    // Each event's cursor resumes just past its own content.
    for (let i = 0; i < events.length; i += 1) {
      const resumed = await open(t, streamPath(PIPELINE, RUN, events[i]!.after));
      const next = await t.ingest.appendLog(PIPELINE, RUN, { text: `probe ${i}\n` });
      await resumed.waitFor((all) =>
        all.some((e) => (JSON.parse(e.data) as LogStreamEvent).after === String(next.seq)),
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
    const last = await seedRun(t, 3);
    const upToDate = await open(t, streamPath(PIPELINE, RUN, String(last)));
    const next = await t.ingest.appendLog(PIPELINE, RUN, { text: 'new\n' });
    await upToDate.waitFor(logCount(1));

    // The first thing it was sent is the new line.
    expect(eventsOf(upToDate)).toEqual([
      {
        eventType: 'logs',
        runId: RUN,
        logs: 'new\n',
        after: String(next.seq),
        replay: false,
        truncated: false,
      },
    ]);
  });

  it.each([
    ['a cursor from another backend', 'chunk:3:120'],
    ['garbage', 'garbage'],
    ['a cursor past the end of this server', '999999'],
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
    const finished = await t.ingest.putRun(PIPELINE, RUN, { status: 'success' });
    await closedWithin(reader);
    expect(eventsOf(reader).at(-1)).toEqual({
      eventType: 'complete',
      runId: RUN,
      after: String(finished.run.lastSeq),
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
    const last = await seedRun(t, 1);
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
    const bytes = encoder.entry(entry, false)!;
    const expected = frame({
      eventType: 'logs',
      runId: RUN,
      logs: heavy,
      after: '2',
      replay: false,
      truncated: false,
    });
    expect(bytes.toString('utf8')).toBe(expected);
    expect(bytes.length).toBe(Buffer.byteLength(expected, 'utf8'));
    expect(bytes.length - expected.length).toBe(400);

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
        onDrain: () => undefined,
        onClose: () => undefined,
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
    expect(heavyViewer.transport.pendingBytes).toBe(bytes.length);
    expect(heavyViewer.subscription.bytesSent).toBe(bytes.length);
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
