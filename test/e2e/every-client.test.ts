import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import type { Browser, BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Entry } from '../../src/model/entry.js';
import { putStatus, readAllEntries, runPath } from '../helpers/api.js';
import { checkBrowserPrerequisites, launchChromium } from '../helpers/browser.js';
import { startServerProcess } from '../helpers/server-process.js';
import type { ServerProcess } from '../helpers/server-process.js';
import {
  classify,
  pollLikeFreightUi,
  readInChromium,
  readWithEventsourcePackage,
  readWithFetchEventSource,
  readWithUndici,
  tailLikeOpenMetadataUi,
} from '../helpers/sse-clients.js';
import type {
  ClientHandle,
  Frame,
  FrameRules,
  FreightPollRead,
  LogStreamEvent,
  OpenMetadataTailRead,
  StreamPlan,
  StreamRead,
} from '../helpers/sse-clients.js';
import { startTcpProxy } from '../helpers/tcp-proxy.js';
import type { TcpProxy } from '../helpers/tcp-proxy.js';

// One stream, every client. One run of 2,000 entries (log text with multi-line text, CRLF, lone
// CRs and astral characters; events of kinds with `:` and `.`, one of 64 KiB of data) and an
// Iceberg topic of 2,000 events are written to a real `tailwater serve` while every client a
// user would pick reads them through each dialect (docs/API.md, "Streaming" and "Dialects for
// the seed systems' own clients"). Each client reads through a loopback proxy of its own, which
// cuts its connection once it has about half of the entries; the second half is not written yet
// then, so the client has to resume by itself, and it must end with exactly what the store
// holds, in order, with no duplicate and no gap.

const PIPELINE = 'every.client';
const RUN_ID = '42';
const RUN = runPath(PIPELINE, RUN_ID);
/** Freight's deploy every/client#42 is the run 42 of every.client (docs/API.md, "Freight"). */
const DEPLOY = '/compat/freight/api/0/deploys/every/client/42';
/** The defaults of icebergTopic and icebergKind (docs/CONFIGURATION.md). */
const ICEBERG_TOPIC = 'iceberg';
const ICEBERG_KIND = 'iceberg-mutation';
const MAX_EVENT_BYTES = 64 * 1024;

const ROUNDS = 100;
const LOG_APPENDS = 1000;
const BIG_LOG_AT = 500;
const RUN_EVENTS = 997;
const BIG_EVENT_AT = 400;
const ICEBERG_EVENTS = 2000;
const BIG_ICEBERG_AT = 1000;
/** Status running, 1,001 log entries (the big append is stored as two), 997 events, status success. */
const RUN_ENTRIES = 2000;
const LOG_ENTRIES = 1001;
/** The pause between rounds of writes, so the run takes a few seconds to write. */
const PACE_MS = 15;
/**
 * What a client gets to read everything. It counts from the client's start, before Chromium and
 * the other clients start and before the paced writes, so it is the setup's own budget (the
 * beforeAll's 180 s): a loaded machine that takes longer to write does not make a client give up.
 */
const READ_TIMEOUT_MS = 180_000;
/** The delay @microsoft/fetch-event-source's onerror answers, and the OpenMetadata UI's wait. */
const CLIENT_RETRY_MS = 250;

const RUN_KINDS = [
  'train:step.start',
  'train:step.end',
  'metric.loss',
  'eval:batch.done',
  'deploy:phase.ready',
];
const BIG_EVENT_KIND = 'checkpoint:blob.saved';

// ---- the data set -------------------------------------------------------------------------

/** A string with every awkward line ending and astral characters (JSON escapes CR and LF). */
const note = (n: number): string =>
  `commit ${n}\nsecond line 😀\r\nthird line 𝄞\rafter a lone CR\u2028after U+2028 🎉`;

interface LogAppend {
  text: string;
  step?: string;
  /** Sent as a text/plain body rather than JSON {"text"}. */
  plain: boolean;
}

function bigLog(): string {
  let text = '';
  for (let i = 0; text.length < 96 * 1024; i += 1) {
    text +=
      i % 3 === 0
        ? `big ${i}: 😀 𝄞 ${'x'.repeat(40)}\r\n`
        : `big ${i}: progress 1%\r50%\r100% ${'y'.repeat(20)}\n`;
  }
  return text;
}

function logAppend(n: number): LogAppend {
  if (n === BIG_LOG_AT) return { text: bigLog(), plain: false };
  const plain = n % 7 === 0;
  const step = !plain && n % 3 === 0 ? { step: 'train' } : {};
  switch (n % 8) {
    case 0:
      return { text: `step ${n}: loading shard ${n % 13}/13\n`, plain, ...step };
    case 1:
      return {
        text: `Traceback (most recent call last):\n  File "train.py", line ${n}, in <module>\n    main()\nValueError: bad value ${n}\n`,
        plain,
        ...step,
      };
    case 2:
      return { text: `windows tool ${n}\r\nsecond line ${n}\r\n`, plain, ...step };
    case 3:
      return { text: `progress ${n}: 10%\r20%\r100%\n`, plain, ...step };
    case 4:
      return { text: `astral ${n}: 😀 𝄞 🎉 naïve café\n`, plain, ...step };
    case 5:
      return { text: `a line written in two appends (${n}) `, plain, ...step };
    case 6:
      return { text: `… ends here\n`, plain, ...step };
    default:
      return { text: `tab\tand "quotes" and \\backslash ${n}, then a lone CR\r`, plain, ...step };
  }
}

interface WrittenEvent {
  kind: string;
  id?: string;
  step?: string;
  correlationId?: string;
  /** The data as JSON text, exactly as sent. */
  raw: string;
}

/** An integer no double holds: the text must come back as it was sent. */
const bigInteger = (n: number): string => `87346283648723640${String(n).padStart(4, '0')}`;

/** JSON text of `fields` plus a `blob` string that makes it exactly `bytes` bytes of UTF-8. */
function jsonOfBytes(bytes: number, fields: Record<string, unknown>): string {
  const base = JSON.stringify({ ...fields, blob: '' });
  const unit = 'checkpoint 😀 𝄞\nline\r\n'; // 4-byte characters and escapes
  const unitBytes = Buffer.byteLength(JSON.stringify(unit)) - 2;
  const fill = bytes - Buffer.byteLength(base);
  const blob = unit.repeat(Math.floor(fill / unitBytes)) + 'x'.repeat(fill % unitBytes);
  const raw = JSON.stringify({ ...fields, blob });
  if (Buffer.byteLength(raw) !== bytes) throw new Error('jsonOfBytes miscounted');
  return raw;
}

function runEvent(n: number): WrittenEvent {
  if (n === BIG_EVENT_AT) {
    return {
      kind: BIG_EVENT_KIND,
      id: `evt-${n}`,
      raw: jsonOfBytes(MAX_EVENT_BYTES - 1, { n, note: note(n) }),
    };
  }
  const doc = {
    n,
    loss: 1 / (n + 3),
    note: note(n),
    tags: ['a', 'b:c.d'],
    nested: { big: '__BIG__', deeper: { ok: n % 2 === 0, none: null } },
  };
  return {
    kind: RUN_KINDS[n % RUN_KINDS.length]!,
    raw: JSON.stringify(doc).replace('"__BIG__"', bigInteger(n)),
    ...(n % 2 === 0 ? { id: `evt-${n}` } : {}),
    ...(n % 4 === 1 ? { step: 'train' } : {}),
    ...(n % 6 === 2 ? { correlationId: `gen-${n % 7}` } : {}),
  };
}

/**
 * A Spark commit as the Iceberg dashboard's producer sends it. A third have no eventId, the
 * last before the cut among them, so a client resumes from a `seq:N` id.
 */
function icebergEvent(n: number): WrittenEvent {
  const eventId = n % 3 === 0 ? undefined : `spark-commit-${String(n).padStart(5, '0')}`;
  const head = {
    ...(eventId ? { eventId } : {}),
    eventTimestamp: new Date(Date.UTC(2026, 10, 29, 8, 0, 0, n)).toISOString(),
    sourceApplication: 'spark-daily-etl-job-05',
    tableIdentifier: `production.reporting.table_${n % 9}`,
    eventType: 'COMMIT_SUCCESS',
  };
  if (n === BIG_ICEBERG_AT) {
    return { kind: ICEBERG_KIND, id: eventId, raw: jsonOfBytes(MAX_EVENT_BYTES - 1, head) };
  }
  const doc = {
    ...head,
    payload: {
      operation: n % 5 === 0 ? 'overwrite' : 'append',
      snapshotId: '__BIG__',
      summary: { 'added-records': String(n * 7), 'changed-partition-count': String(n % 4) },
      note: note(n),
      schemaChanged: n % 11 === 0,
    },
  };
  // Now and then pretty-printed: its data then takes several `data:` lines.
  const text = n % 50 === 7 ? JSON.stringify(doc, null, 2) : JSON.stringify(doc);
  return {
    kind: ICEBERG_KIND,
    raw: text.replace('"__BIG__"', bigInteger(n)),
    ...(eventId ? { id: eventId } : {}),
  };
}

const LOGS = Array.from({ length: LOG_APPENDS }, (_, n) => logAppend(n));
const RUN_EVENT_LIST = Array.from({ length: RUN_EVENTS }, (_, n) => runEvent(n));
const ICEBERG_EVENT_LIST = Array.from({ length: ICEBERG_EVENTS }, (_, n) => icebergEvent(n));
const WHOLE_LOG = LOGS.map((log) => log.text).join('');
const LOG_BYTES = Buffer.byteLength(WHOLE_LOG);

/** `{"events": […]}` written by hand, so each event's data is the exact text given. */
function eventsBody(events: readonly WrittenEvent[]): string {
  const items = events.map((event) => {
    const fields = [`"kind":${JSON.stringify(event.kind)}`];
    if (event.id !== undefined) fields.push(`"id":${JSON.stringify(event.id)}`);
    if (event.step !== undefined) fields.push(`"step":${JSON.stringify(event.step)}`);
    if (event.correlationId !== undefined) {
      fields.push(`"correlationId":${JSON.stringify(event.correlationId)}`);
    }
    fields.push(`"data":${event.raw}`);
    return `{${fields.join(',')}}`;
  });
  return `{"events":[${items.join(',')}]}`;
}

async function post(server: string, path: string, type: string, body: string): Promise<unknown> {
  const response = await fetch(`${server}${path}`, {
    method: 'POST',
    headers: { 'content-type': type },
    body,
    signal: AbortSignal.timeout(10_000),
  });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`POST ${path}: ${response.status} ${text}`);
  return JSON.parse(text);
}

/** The producer's seqs: where each written event landed. */
const runEventSeqs: number[] = [];
const icebergSeqs: number[] = [];

/** Writes the data set in rounds: ten log appends, ten run events, twenty Iceberg events. */
async function produce(server: string): Promise<void> {
  const logsPerRound = LOG_APPENDS / ROUNDS;
  const eventsPerRound = Math.ceil(RUN_EVENTS / ROUNDS);
  const icebergPerRound = ICEBERG_EVENTS / ROUNDS;
  for (let round = 0; round < ROUNDS; round += 1) {
    for (const log of LOGS.slice(round * logsPerRound, (round + 1) * logsPerRound)) {
      if (log.plain) {
        await post(server, `${RUN}/logs`, 'text/plain; charset=utf-8', log.text);
      } else {
        const body = { text: log.text, ...(log.step ? { step: log.step } : {}) };
        await post(server, `${RUN}/logs`, 'application/json', JSON.stringify(body));
      }
    }
    const events = RUN_EVENT_LIST.slice(round * eventsPerRound, (round + 1) * eventsPerRound);
    if (events.length > 0) {
      const answer = await post(server, `${RUN}/events`, 'application/json', eventsBody(events));
      runEventSeqs.push(...(answer as { seqs: number[] }).seqs);
    }
    const commits = ICEBERG_EVENT_LIST.slice(
      round * icebergPerRound,
      (round + 1) * icebergPerRound,
    );
    const answer = await post(
      server,
      `/api/v1/topics/${ICEBERG_TOPIC}/events`,
      'application/json',
      eventsBody(commits),
    );
    icebergSeqs.push(...(answer as { seqs: number[] }).seqs);
    await new Promise((resolve) => setTimeout(resolve, PACE_MS));
  }
}

// ---- what the store holds, and what each dialect should make of it --------------------------

let runEntries: Entry[] = [];
let icebergEntries: Entry[] = [];
/** The store's epoch, which every native id carries (docs/STORAGE.md). */
let storeEpoch = '';

/** The epoch of the server's SQLite store in `dataDir`, read from the database itself. */
function readStoreEpoch(dataDir: string): string {
  const db = new Database(join(dataDir, 'tailwater.db'), { readonly: true, fileMustExist: true });
  try {
    return db
      .prepare<[], { value: string }>(`SELECT value FROM store_meta WHERE key = 'epoch'`)
      .get()!.value;
  } finally {
    db.close();
  }
}
/** Each event's data text as sent, by seq. */
const runRawBySeq = new Map<number, string>();
const icebergRawBySeq = new Map<number, string>();

interface ExpectedFrame {
  id: string;
  event: string;
  /** The frame's data, parsed. */
  data: unknown;
  /** Text the frame's data must hold exactly (the producer's JSON as sent). */
  raw?: string;
}

/** The native dialect: `id: <seq>-<epoch>`, `event: kind`, the entry as JSON. */
const nativeFrames = (): ExpectedFrame[] =>
  runEntries.map((entry) => {
    const raw = runRawBySeq.get(entry.seq);
    return {
      id: `${entry.seq}-${storeEpoch}`,
      event: entry.kind,
      data: entry,
      ...(raw ? { raw: `"data":${raw}` } : {}),
    };
  });

/** ZenML's StreamEvent for each entry (docs/API.md, "ZenML"). */
const zenmlFrames = (): ExpectedFrame[] =>
  runEntries.map((entry) => {
    const raw = runRawBySeq.get(entry.seq);
    return {
      id: String(entry.seq),
      event: entry.kind,
      data: {
        pipeline_run_id: RUN_ID,
        step_run_id: null,
        step_name: entry.step ?? null,
        kind: entry.kind,
        correlation_id: entry.correlationId ?? null,
        index: null,
        payload: entry.kind === 'log' ? { text: entry.text, offset: entry.offset } : entry.data,
      },
      ...(raw ? { raw: `"payload":${raw}` } : {}),
    };
  });

/** The Iceberg dashboard's frames: the eventId (or `seq:N`) and the producer's JSON as sent. */
const icebergFrames = (): ExpectedFrame[] =>
  icebergEntries.map((entry) => ({
    id: entry.id ?? `seq:${entry.seq}`,
    event: ICEBERG_KIND,
    data: entry.data,
    raw: icebergRawBySeq.get(entry.seq)!,
  }));

/** OpenMetadata's `logs` events: one per log entry, its `after` the byte just past it. */
const openMetadataLogs = (): LogStreamEvent[] =>
  runEntries
    .filter((entry) => entry.kind === 'log')
    .map((entry) => ({
      eventType: 'logs',
      runId: RUN_ID,
      logs: entry.text!,
      after: String(entry.offset! + Buffer.byteLength(entry.text!)),
      replay: expect.any(Boolean) as unknown as boolean,
      truncated: false,
    }));

/**
 * How a received list of ids differs from the expected one, in a few words (an empty list: it
 * does not): what is missing, what came twice, what should not be there, where order breaks.
 */
function sequenceProblems(got: readonly string[], want: readonly string[]): string[] {
  const problems: string[] = [];
  const counts = new Map<string, number>();
  for (const id of got) counts.set(id, (counts.get(id) ?? 0) + 1);
  const wanted = new Set(want);
  const few = (ids: string[]) => `${ids.length} (${ids.slice(0, 8).join(', ')})`;
  const missing = want.filter((id) => !counts.has(id));
  const twice = [...counts].filter(([, count]) => count > 1).map(([id]) => id);
  const unexpected = got.filter((id) => !wanted.has(id));
  if (missing.length > 0) problems.push(`missing ${few(missing)}`);
  if (twice.length > 0) problems.push(`received more than once ${few(twice)}`);
  if (unexpected.length > 0) problems.push(`not in the store ${few(unexpected)}`);
  const at = got.findIndex((id, i) => id !== want[i]);
  if (problems.length === 0 && (at !== -1 || got.length !== want.length)) {
    problems.push(`out of order from frame ${at}: ${got[at]} where ${want[at]} belongs`);
  }
  return problems;
}

/** Every entry frame as expected, and nothing else but the allowed control frames. */
function expectEntryFrames(
  read: StreamRead,
  rules: FrameRules,
  expected: readonly ExpectedFrame[],
): { control: Frame[] } {
  const entries: Frame[] = [];
  const control: Frame[] = [];
  for (const frame of read.frames) {
    (classify(rules, frame, 0).entry ? entries : control).push(frame);
  }
  expect(
    sequenceProblems(
      entries.map((frame) => frame.id ?? '(no id)'),
      expected.map((frame) => frame.id),
    ),
  ).toEqual([]);
  entries.forEach((frame, i) => {
    const want = expected[i]!;
    expect(frame.event, `the event of frame ${frame.id}`).toBe(want.event);
    expect(JSON.parse(frame.data), `the data of frame ${frame.id}`).toEqual(want.data);
    if (want.raw !== undefined) {
      expect(frame.data.includes(want.raw), `frame ${frame.id} holds the JSON as sent`).toBe(true);
    }
  });
  return { control };
}

/** The connection was cut about halfway, and the client came back by itself. */
function expectResumedAfterTheCut(
  read: { cutAfter: number | undefined; opens: number; timedOut: boolean },
  total: number,
): void {
  expect(read.timedOut, 'the read ended within its time').toBe(false);
  expect(read.cutAfter, 'the connection was cut about halfway').toBeGreaterThanOrEqual(total / 3);
  expect(read.cutAfter!).toBeLessThan(total);
  expect(read.opens, 'connections the client opened').toBeGreaterThanOrEqual(2);
}

/** The last cursor a reader had before its last connection: where it should have resumed. */
function lastBefore<T>(
  items: readonly T[],
  connectionOf: (item: T, index: number) => number,
  cursorOf: (item: T) => string | undefined,
  connection: number,
): string | undefined {
  let last: string | undefined;
  items.forEach((item, i) => {
    if (connectionOf(item, i) < connection) last = cursorOf(item) ?? last;
  });
  return last;
}

/**
 * The last reconnect sent, as Last-Event-ID, the id of the last frame the client had been
 * handed before it: no more (a frame it never got), no less.
 */
function expectResumedFromItsLastId(read: StreamRead): void {
  expect(read.lastEventIds.length, 'reconnects that sent Last-Event-ID').toBeGreaterThanOrEqual(1);
  const want = lastBefore(
    read.frames,
    (frame) => frame.connection,
    (frame) => frame.id,
    read.opens,
  );
  expect(read.lastEventIds.at(-1), 'the Last-Event-ID of the last connection').toBe(want);
}

// ---- the endpoints and the clients ----------------------------------------------------------

interface StreamEndpoint {
  name: string;
  path: string;
  events: readonly string[];
  rules: FrameRules;
  /** Entries the whole stream holds. */
  total: number;
  verify(read: StreamRead): void;
}

const CONTROL = ['end', 'gap', 'error', 'cursor'];
const RUN_STREAM_EVENTS = ['log', 'status', ...RUN_KINDS, BIG_EVENT_KIND, ...CONTROL];
const RUN_STREAM_RULES: FrameRules = {
  control: CONTROL,
  endEvents: ['end', 'error'],
  endEventTypes: [],
};

const NATIVE: StreamEndpoint = {
  name: 'the native run stream',
  path: `${RUN}/stream`,
  events: RUN_STREAM_EVENTS,
  rules: RUN_STREAM_RULES,
  total: RUN_ENTRIES,
  verify(read) {
    const { control } = expectEntryFrames(read, this.rules, nativeFrames());
    expect(control.map((frame) => frame.event)).toEqual(['end']);
    expect(JSON.parse(control[0]!.data)).toEqual({
      reason: 'runFinished',
      status: 'success',
      lastSeq: RUN_ENTRIES,
    });
    expect(read.frames.at(-1)).toBe(control[0]);
  },
};

const ZENML: StreamEndpoint = {
  name: 'the ZenML event stream',
  path: `/compat/zenml/api/v1/runs/${RUN_ID}/events/stream`,
  events: RUN_STREAM_EVENTS,
  rules: RUN_STREAM_RULES,
  total: RUN_ENTRIES,
  verify(read) {
    const { control } = expectEntryFrames(read, this.rules, zenmlFrames());
    expect(control.map((frame) => [frame.event, frame.data])).toEqual([['end', '{}']]);
    expect(read.frames.at(-1)).toBe(control[0]);
  },
};

const ICEBERG: StreamEndpoint = {
  name: 'the Iceberg dashboard stream',
  path: '/compat/iceberg/events',
  events: [ICEBERG_KIND, 'connected', 'gap'],
  rules: {
    control: ['connected', 'gap'],
    endEvents: [],
    endEventTypes: [],
    endAfterEntries: ICEBERG_EVENTS,
  },
  total: ICEBERG_EVENTS,
  verify(read) {
    const { control } = expectEntryFrames(read, this.rules, icebergFrames());
    // One `connected` per connection, and never a `gap`.
    expect(control.every((frame) => frame.event === 'connected')).toBe(true);
    expect(control.length).toBe(read.opens);
    for (const frame of control) {
      expect(JSON.parse(frame.data)).toEqual({ clientId: expect.any(String) });
    }
  },
};

/**
 * The whole OpenMetadata read: every `logs` event once, in order, then `complete`; `replay`
 * true only while a connection catches up, and never on the first, which was open before the
 * first line was written (docs/API.md, "OpenMetadata").
 */
function expectOpenMetadataEvents(
  events: readonly LogStreamEvent[],
  connections: readonly number[],
): void {
  const logs = events.filter((event) => event.eventType === 'logs');
  const others = events.filter((event) => event.eventType !== 'logs');
  const expected = openMetadataLogs();
  expect(
    sequenceProblems(
      logs.map((event) => event.after ?? '(no after)'),
      expected.map((event) => event.after!),
    ),
  ).toEqual([]);
  // Byte for byte the run's log, its CRLFs and lone CRs included.
  expect(logs.map((event) => event.logs).join('') === WHOLE_LOG, 'the logs are the whole log').toBe(
    true,
  );
  logs.forEach((event, i) =>
    expect(event, `the event ending at ${event.after}`).toEqual(expected[i]),
  );
  expect(others).toEqual([
    { eventType: 'complete', runId: RUN_ID, after: String(LOG_BYTES), reason: 'runFinished' },
  ]);
  expect(events.at(-1)).toBe(others[0]);
  const replays = new Map<number, boolean[]>();
  events.forEach((event, i) => {
    if (event.eventType !== 'logs') return;
    const connection = connections[i]!;
    replays.set(connection, [...(replays.get(connection) ?? []), event.replay!]);
  });
  expect(replays.get(1)?.includes(true), 'replay on the first connection').toBe(false);
  for (const [connection, flags] of replays) {
    const live = flags.indexOf(false);
    expect(
      live === -1 || !flags.slice(live).includes(true),
      `connection ${connection}: replay after live content`,
    ).toBe(true);
  }
}

const OPENMETADATA: StreamEndpoint = {
  name: 'the OpenMetadata log stream',
  path: `/compat/openmetadata/api/v1/services/ingestionPipelines/logs/${PIPELINE}/stream/${RUN_ID}`,
  events: ['message'],
  rules: {
    control: [],
    entryEventType: 'logs',
    endEvents: [],
    endEventTypes: ['complete', 'error'],
  },
  total: LOG_ENTRIES,
  verify(read) {
    const events = read.frames.map((frame) => JSON.parse(frame.data) as LogStreamEvent);
    expect(read.frames.every((frame) => frame.event === 'message')).toBe(true);
    expectOpenMetadataEvents(
      events,
      read.frames.map((frame) => frame.connection),
    );
    // Each frame's SSE id is its cursor, which is what the client resumed with.
    read.frames.forEach((frame, i) =>
      expect(frame.id, `the id of frame ${i}`).toBe(events[i]!.after),
    );
  },
};

interface StartContext {
  proxy: TcpProxy;
  newContext(): Promise<BrowserContext>;
}

interface Cell<T> {
  title: string;
  start(context: StartContext): Promise<ClientHandle<T>>;
  verify(read: T): void;
  describe(read: T): string;
}

const cellOf = <T>(cell: Cell<T>): Cell<unknown> => cell as unknown as Cell<unknown>;

type SseClient = {
  name: string;
  read(plan: StreamPlan, context: StartContext): Promise<ClientHandle<StreamRead>>;
};

const SSE_CLIENTS: SseClient[] = [
  { name: 'the eventsource package', read: async (plan) => readWithEventsourcePackage(plan) },
  { name: "undici's EventSource", read: async (plan) => readWithUndici(plan) },
  {
    name: '@microsoft/fetch-event-source',
    read: async (plan) => readWithFetchEventSource(plan, CLIENT_RETRY_MS),
  },
  {
    name: "Chromium's EventSource",
    read: async (plan, context) => {
      const browserContext = await context.newContext();
      return readInChromium(await browserContext.newPage(), plan);
    },
  },
];

const describeStreamRead = (read: StreamRead): string =>
  `${read.elapsedMs} ms, ${read.opens} connections, cut after ${read.cutAfter} entries, ` +
  `${read.frames.length} frames, Last-Event-ID ${read.lastEventIds.join(' ')}` +
  `${read.skipped ? `, ${read.skipped} empty messages skipped` : ''}` +
  `${read.failure ? `, failed: ${read.failure}` : ''}`;

const CELLS: Array<Cell<unknown>> = [];
for (const endpoint of [NATIVE, OPENMETADATA, ZENML, ICEBERG]) {
  for (const client of SSE_CLIENTS) {
    CELLS.push(
      cellOf<StreamRead>({
        title: `${client.name} reads ${endpoint.name} whole and in order across a cut connection`,
        start: ({ proxy, newContext }) =>
          client.read(
            {
              url: `${proxy.url}${endpoint.path}`,
              events: endpoint.events,
              rules: endpoint.rules,
              cutAt: Math.floor(endpoint.total / 2),
              cut: () => proxy.cutAll(),
              timeoutMs: READ_TIMEOUT_MS,
            },
            { proxy, newContext },
          ),
        verify(read) {
          expect(read.failure, 'the client gave up').toBeUndefined();
          expectResumedAfterTheCut(read, endpoint.total);
          expectResumedFromItsLastId(read);
          endpoint.verify(read);
        },
        describe: describeStreamRead,
      }),
    );
  }
}

CELLS.push(
  cellOf<OpenMetadataTailRead>({
    title:
      "the OpenMetadata UI's log tail reads the OpenMetadata log stream whole and in order across a cut connection, resuming with ?after=",
    start: async ({ proxy }) =>
      tailLikeOpenMetadataUi({
        url: `${proxy.url}${OPENMETADATA.path}`,
        cutAt: Math.floor(LOG_ENTRIES / 2),
        cut: () => proxy.cutAll(),
        retryMs: CLIENT_RETRY_MS,
        maxConnections: 10,
        timeoutMs: READ_TIMEOUT_MS,
      }),
    verify(read) {
      expectResumedAfterTheCut(read, LOG_ENTRIES);
      expect(read.afters.length, 'reconnects with ?after=').toBeGreaterThanOrEqual(1);
      const want = lastBefore(
        read.events,
        (_event, i) => read.eventConnections[i]!,
        (event) => event.after,
        read.opens,
      );
      expect(read.afters.at(-1), 'the ?after= of the last connection').toBe(want);
      expectOpenMetadataEvents(read.events, read.eventConnections);
    },
    describe: (read) =>
      `${read.elapsedMs} ms, ${read.opens} connections, cut after ${read.cutAfter} logs events, ` +
      `?after= ${read.afters.join(' ')}, replayed per connection ${[1, 2, 3]
        .map(
          (c) =>
            read.events.filter((e, i) => e.replay === true && read.eventConnections[i] === c)
              .length,
        )
        .join('/')}`,
  }),
  cellOf<FreightPollRead>({
    title:
      "the Freight UI's log poller reads the Freight deploy log whole and in order across a cut connection and a lost answer",
    start: async ({ proxy }) =>
      pollLikeFreightUi({
        deployUrl: `${proxy.url}${DEPLOY}`,
        intervalMs: 1000,
        cutAtBytes: LOG_BYTES / 2,
        // A poller's connection is idle between polls, so cutting it alone tests little: the
        // answer to the next request is lost as well, and the poller must ask again.
        cut: () => {
          proxy.cutAll();
          proxy.dropNextResponses(1);
        },
        maxPolls: READ_TIMEOUT_MS / 1000,
        timeoutMs: READ_TIMEOUT_MS,
      }),
    verify(read) {
      expect(read.timedOut, 'the poller saw the end').toBe(false);
      expect(read.cutAfter).toBeGreaterThanOrEqual(LOG_BYTES / 3);
      expect(read.cutAfter!).toBeLessThan(LOG_BYTES);
      expect(read.failedPolls, 'polls that failed and were asked again').toBeGreaterThanOrEqual(1);
      expect(read.status).toBe('finished');
      // Chunks follow one another with nothing missing or repeated.
      const problems: string[] = [];
      let offset = 0;
      for (const chunk of read.chunks) {
        if (chunk.offset !== offset) {
          problems.push(`chunk at ${chunk.offset} where ${offset} belongs`);
        }
        if (chunk.size !== Buffer.byteLength(chunk.text)) {
          problems.push(`chunk at ${chunk.offset}: size ${chunk.size} for its text`);
        }
        offset = chunk.offset + chunk.size;
      }
      expect(problems.slice(0, 5)).toEqual([]);
      expect(offset).toBe(LOG_BYTES);
      expect(read.chunks.map((chunk) => chunk.text).join('') === WHOLE_LOG, 'the whole log').toBe(
        true,
      );
      expect(read.chunks.length).toBe(LOG_ENTRIES);
    },
    describe: (read) =>
      `${read.elapsedMs} ms, ${read.polls} polls (${read.failedPolls} failed), cut after ${read.cutAfter} bytes`,
  }),
);

// ---- the test ------------------------------------------------------------------------------

describe('one stream, every client', () => {
  let server: ServerProcess | undefined;
  let browser: Browser | undefined;
  let dataDir: string | undefined;
  const proxies: TcpProxy[] = [];
  const reads = new Map<string, Promise<unknown>>();
  let writeMs = 0;

  beforeAll(async () => {
    checkBrowserPrerequisites();
    dataDir = mkdtempSync(join(tmpdir(), 'tailwater-every-client-'));
    server = await startServerProcess(['--data', dataDir], {
      // Ends come quickly once the run is finished and quiet (docs/CONFIGURATION.md).
      TAILWATER_POLL_SECONDS: '0.05',
      TAILWATER_FINISH_GRACE_SECONDS: '0.3',
      // The `retry:` the native stream sends; the other dialects send none.
      TAILWATER_RETRY_MILLIS: '100',
      // A new dashboard gets the whole topic, should one connect once events are written.
      TAILWATER_ICEBERG_REPLAY_ON_CONNECT: String(10 * ICEBERG_EVENTS),
    });
    await putStatus(server, RUN, 'running');
    browser = await launchChromium();
    const handles: Array<ClientHandle<unknown>> = [];
    for (const cell of CELLS) {
      const proxy = await startTcpProxy(server.url);
      proxies.push(proxy);
      const handle = await cell.start({ proxy, newContext: () => browser!.newContext() });
      handles.push(handle);
      reads.set(cell.title, handle.result);
    }
    // Every client is reading before the first entry is written.
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.all(handles.map((handle) => handle.opened)),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error('not every client connected')), 20_000);
      }),
    ]).finally(() => clearTimeout(timer));

    const startedAt = Date.now();
    await produce(server.url);
    await putStatus(server, RUN, 'success');
    writeMs = Date.now() - startedAt;
    console.log(
      `wrote ${RUN_ENTRIES} run entries and ${ICEBERG_EVENTS} Iceberg events in ${writeMs} ms`,
    );

    runEntries = await readAllEntries(server, RUN);
    icebergEntries = await readAllEntries(server, `/api/v1/topics/${ICEBERG_TOPIC}`);
    storeEpoch = readStoreEpoch(dataDir);
    RUN_EVENT_LIST.forEach((event, i) => runRawBySeq.set(runEventSeqs[i]!, event.raw));
    ICEBERG_EVENT_LIST.forEach((event, i) => icebergRawBySeq.set(icebergSeqs[i]!, event.raw));
    // A server, Chromium and seven clients, then 4,000 paced writes: 15 s here when the machine
    // is quiet, but a loaded CI machine has taken over the project's 60 s hook timeout.
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    for (const proxy of proxies) await proxy.close();
    await server?.stop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('the store holds the run and the topic as they were written', () => {
    expect(storeEpoch).toMatch(/^[0-9a-f]{8}$/);
    expect(runEntries.map((entry) => entry.seq)).toEqual(
      Array.from({ length: RUN_ENTRIES }, (_, i) => i + 1),
    );
    expect(runEntries[0]!.data).toEqual({ status: 'running' });
    expect(runEntries.at(-1)!.data).toEqual({ status: 'success' });
    const logs = runEntries.filter((entry) => entry.kind === 'log');
    expect(logs).toHaveLength(LOG_ENTRIES);
    expect(logs.map((entry) => entry.text).join('') === WHOLE_LOG, 'the log as written').toBe(true);
    const events = runEntries.filter((entry) => entry.kind !== 'log' && entry.kind !== 'status');
    expect(events.map((entry) => entry.seq)).toEqual(runEventSeqs);
    expect(
      events.map(({ kind, id, step, correlationId, data }) => ({
        kind,
        id,
        step,
        correlationId,
        data,
      })),
    ).toEqual(
      RUN_EVENT_LIST.map(({ kind, id, step, correlationId, raw }) => ({
        kind,
        id,
        step,
        correlationId,
        data: JSON.parse(raw),
      })),
    );
    const big = events.find((entry) => entry.kind === BIG_EVENT_KIND)!;
    expect(Buffer.byteLength(runRawBySeq.get(big.seq)!)).toBe(MAX_EVENT_BYTES - 1);

    expect(icebergEntries.map((entry) => entry.seq)).toEqual(icebergSeqs);
    expect(icebergEntries.map(({ kind, id, data }) => ({ kind, id, data }))).toEqual(
      ICEBERG_EVENT_LIST.map(({ kind, id, raw }) => ({ kind, id, data: JSON.parse(raw) })),
    );
  });

  it.each(CELLS.map((cell) => [cell.title, cell] as const))('%s', async (_title, cell) => {
    const read = await reads.get(cell.title)!;
    console.log(`${cell.title}: ${cell.describe(read)}`);
    cell.verify(read);
  });

  // A browser sends Last-Event-ID as UTF-8 (the HTML standard's EventSource), and an eventId
  // may be any UTF-8 (docs/API.md, "Names"): the dashboard must resume right after it.
  it("Chromium's EventSource resumes the Iceberg dashboard stream right after an event whose eventId is not ASCII", async () => {
    const topic = `/api/v1/topics/${ICEBERG_TOPIC}/events`;
    const named: WrittenEvent = {
      kind: ICEBERG_KIND,
      id: 'spark-commit-é-😀-𝄞',
      raw: JSON.stringify({ eventId: 'spark-commit-é-😀-𝄞', note: note(ICEBERG_EVENTS) }),
    };
    const next: WrittenEvent = { kind: ICEBERG_KIND, id: 'spark-commit-after', raw: '{"n":1}' };
    await post(server!.url, topic, 'application/json', eventsBody([named]));
    const proxy = await startTcpProxy(server!.url);
    proxies.push(proxy);
    let markCut!: () => void;
    const cut = new Promise<void>((resolve) => (markCut = resolve));
    const page = await (await browser!.newContext()).newPage();
    const handle = readInChromium(page, {
      url: `${proxy.url}${ICEBERG.path}`,
      events: ICEBERG.events,
      rules: { ...ICEBERG.rules, endAfterEntries: ICEBERG_EVENTS + 2 },
      // Cut once the non-ASCII event, the last one, has arrived; then the next one is written.
      cutAt: ICEBERG_EVENTS + 1,
      cut: () => {
        proxy.cutAll();
        markCut();
      },
      timeoutMs: READ_TIMEOUT_MS,
    });
    await cut;
    await post(server!.url, topic, 'application/json', eventsBody([next]));
    const read = await handle.result;
    console.log(`non-ASCII eventId: ${describeStreamRead(read)}`);

    const entries = await readAllEntries(server!, `/api/v1/topics/${ICEBERG_TOPIC}`);
    expect(entries.slice(-2).map((entry) => entry.id)).toEqual([named.id, next.id]);
    expect(read.timedOut, 'the read ended within its time').toBe(false);
    expect(read.opens, 'connections Chromium opened').toBe(2);
    const frames = read.frames.filter((frame) => frame.connection === 2);
    // The second connection: `connected`, then the one event written after the cut.
    expect(frames.map((frame) => [frame.event, frame.id])).toEqual([
      ['connected', named.id],
      [ICEBERG_KIND, next.id],
    ]);
  });
});
