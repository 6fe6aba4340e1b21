import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { RESERVED_KINDS } from '../../src/model/names.js';
import type { StreamKey } from '../../src/model/stream-key.js';
import { runKey, topicKey } from '../../src/model/stream-key.js';
import { RUNS_FEED_TOPIC } from '../../src/store/store.js';
import { createTestApp } from '../helpers/app.js';
import { openSse } from '../helpers/sse.js';
import type { SseReader } from '../helpers/sse.js';
import { allPipelines } from './store.contract.js';
import type { TestApp } from '../helpers/app.js';

// Bad input gets a clear error and loses nothing: every refusal below is checked for its status,
// its error code in the `{"error": {"code", "message"}}` body, and a store left exactly as it was.

const FQN = 'ingest.daily';
const RUN = 'run-1';
const TOPIC = 'builds';
const RUN_PATH = `/api/v1/pipelines/${FQN}/runs/${RUN}`;
const LOGS = `${RUN_PATH}/logs`;
const EVENTS = `${RUN_PATH}/events`;
const TOPIC_EVENTS = `/api/v1/topics/${TOPIC}/events`;
const KiB = 1024;
const MiB = 1024 * KiB;

const JSON_TYPE = { 'content-type': 'application/json' };
const TEXT_TYPE = { 'content-type': 'text/plain' };

let t: TestApp;

/** A server whose run and topic already hold some entries, so "nothing changed" means something. */
async function populatedApp(overrides: Parameters<typeof createTestApp>[0] = {}): Promise<TestApp> {
  // A stream opened by mistake ends on its own instead of hanging the test.
  const app = await createTestApp({ maxStreamSeconds: 2, ...overrides });
  const send = async (options: InjectOptions) => {
    const res = await app.app.inject(options);
    if (res.statusCode !== 200) throw new Error(`setup failed: ${res.statusCode} ${res.body}`);
  };
  await send({
    method: 'PUT',
    url: RUN_PATH,
    payload: { status: 'running', meta: { who: 'setup' } },
  });
  await send({ method: 'POST', url: LOGS, headers: TEXT_TYPE, payload: 'hello\n' });
  await send({ method: 'POST', url: LOGS, payload: { text: 'wörld ✓\n', step: 'load' } });
  await send({
    method: 'POST',
    url: EVENTS,
    payload: {
      events: [
        { kind: 'progress', data: { pct: 10 }, id: 'p-1' },
        { kind: 'progress', data: { pct: 20 }, id: 'p-2' },
      ],
    },
  });
  await send({
    method: 'POST',
    url: TOPIC_EVENTS,
    payload: { events: [{ kind: 'build', data: { n: 1 } }] },
  });
  return app;
}

beforeEach(async () => {
  t = await populatedApp();
});

afterEach(async () => {
  await t.close();
});

/** Everything a refused request could have touched. */
async function snapshot(extraKeys: readonly StreamKey[] = []) {
  const keys = [runKey(FQN, RUN), topicKey(TOPIC), topicKey(RUNS_FEED_TOPIC), ...extraKeys];
  return {
    bounds: await Promise.all(keys.map((key) => t.store.bounds(key))),
    pipelines: await allPipelines(t.store),
    run: await t.store.getRun(FQN, RUN),
  };
}

function expectError(res: LightMyRequestResponse, status: number, code: string): string {
  expect({ status: res.statusCode, body: res.json() as unknown }).toEqual({
    status,
    body: { error: { code, message: expect.any(String) as unknown } },
  });
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  const message = (res.json() as { error: { message: string } }).error.message;
  expect(message.length).toBeGreaterThan(0);
  return message;
}

/** Sends a request that must be refused; the store must be exactly as it was before. */
async function expectRefused(
  options: InjectOptions,
  status: number,
  code: string,
  extraKeys: readonly StreamKey[] = [],
): Promise<string> {
  const before = await snapshot(extraKeys);
  expect(before.bounds[0]!.lastSeq).toBeGreaterThan(0);
  expect(before.bounds[0]!.logBytes).toBeGreaterThan(0);
  const res = await t.app.inject(options);
  const message = expectError(res, status, code);
  expect(await snapshot(extraKeys)).toEqual(before);
  return message;
}

/**
 * Opens `url` of the test app as an EventSource would, over a real loopback socket (the app
 * starts listening on first use): the reader, which the caller closes.
 */
async function openStream(url: string, headers: Record<string, string>): Promise<SseReader> {
  const base = t.url || (await t.listen());
  return openSse(`${base}${url}`, headers);
}

function withBadBytes(before: string, bytes: number[], after: string): Buffer {
  return Buffer.concat([
    Buffer.from(before, 'utf8'),
    Buffer.from(bytes),
    Buffer.from(after, 'utf8'),
  ]);
}

function events(count: number, make: (index: number) => object = () => ({})) {
  return Array.from({ length: count }, (_, index) => ({
    kind: 'progress',
    data: { index },
    ...make(index),
  }));
}

describe('malformed and empty JSON', () => {
  const endpoints = [
    { name: 'the run events endpoint', method: 'POST', url: EVENTS },
    { name: 'the topic events endpoint', method: 'POST', url: TOPIC_EVENTS },
    { name: 'PUT run', method: 'PUT', url: RUN_PATH },
    { name: 'a JSON log append', method: 'POST', url: LOGS },
  ] as const;

  test.each(endpoints)('malformed JSON on $name is 400 TW_BAD_JSON', async ({ method, url }) => {
    await expectRefused(
      { method, url, headers: JSON_TYPE, payload: '{"events": [{"kind": "x",' },
      400,
      'TW_BAD_JSON',
    );
  });

  test.each(endpoints)(
    'an empty JSON body on $name is 400 TW_BAD_JSON',
    async ({ method, url }) => {
      await expectRefused({ method, url, headers: JSON_TYPE, payload: '' }, 400, 'TW_BAD_JSON');
    },
  );

  test.each(endpoints)(
    'a whitespace-only JSON body on $name is 400 TW_BAD_JSON',
    async ({ method, url }) => {
      await expectRefused(
        { method, url, headers: JSON_TYPE, payload: ' \n\t ' },
        400,
        'TW_BAD_JSON',
      );
    },
  );

  test.each(endpoints)(
    'a JSON body that is not an object (null) on $name is 400 TW_BAD_REQUEST',
    async ({ method, url }) => {
      await expectRefused(
        { method, url, headers: JSON_TYPE, payload: 'null' },
        400,
        'TW_BAD_REQUEST',
      );
    },
  );

  test.each([
    { name: 'events missing', payload: {} },
    { name: 'events not an array', payload: { events: 'progress' } },
    { name: 'an event without a kind', payload: { events: [{ data: 1 }] } },
    { name: 'a kind that is a number', payload: { events: [{ kind: 7, data: 1 }] } },
    { name: 'an empty step', payload: { events: [{ kind: 'progress', data: 1, step: '' }] } },
    { name: 'an id that is a number', payload: { events: [{ kind: 'progress', data: 1, id: 5 }] } },
  ])('an events body with $name is 400 TW_BAD_REQUEST', async ({ payload }) => {
    await expectRefused({ method: 'POST', url: EVENTS, payload }, 400, 'TW_BAD_REQUEST');
  });

  test.each([
    { name: 'an unknown status', payload: { status: 'done' } },
    { name: 'no status', payload: { meta: { a: 1 } } },
    { name: 'meta that is not an object', payload: { status: 'running', meta: [1, 2] } },
  ])('a PUT run body with $name is 400 TW_BAD_REQUEST', async ({ payload }) => {
    await expectRefused({ method: 'PUT', url: RUN_PATH, payload }, 400, 'TW_BAD_REQUEST');
  });

  test.each([
    { name: 'no text', payload: { step: 'load' } },
    { name: 'text that is not a string', payload: { text: 42 } },
    { name: 'empty text', payload: { text: '' } },
  ])('a JSON log body with $name is 400 TW_BAD_REQUEST', async ({ payload }) => {
    await expectRefused({ method: 'POST', url: LOGS, payload }, 400, 'TW_BAD_REQUEST');
  });

  test('an empty text/plain log body is 400 TW_BAD_REQUEST', async () => {
    await expectRefused(
      { method: 'POST', url: LOGS, headers: TEXT_TYPE, payload: '' },
      400,
      'TW_BAD_REQUEST',
    );
  });
});

describe('content types', () => {
  test.each([
    { method: 'POST', url: EVENTS },
    { method: 'POST', url: TOPIC_EVENTS },
    { method: 'PUT', url: RUN_PATH },
    { method: 'POST', url: LOGS },
  ] as const)('application/xml on $method $url is 415', async ({ method, url }) => {
    await expectRefused(
      { method, url, headers: { 'content-type': 'application/xml' }, payload: '<events/>' },
      415,
      'TW_UNSUPPORTED_MEDIA_TYPE',
    );
  });

  test.each([
    { method: 'POST', url: EVENTS },
    { method: 'POST', url: TOPIC_EVENTS },
    { method: 'PUT', url: RUN_PATH },
  ] as const)(
    'text/plain on $method $url (a JSON-only endpoint) is 415',
    async ({ method, url }) => {
      await expectRefused(
        { method, url, headers: TEXT_TYPE, payload: '{"events":[{"kind":"progress","data":1}]}' },
        415,
        'TW_UNSUPPORTED_MEDIA_TYPE',
      );
    },
  );

  test('an events request with no body and no content type is 415', async () => {
    await expectRefused({ method: 'POST', url: EVENTS }, 415, 'TW_UNSUPPORTED_MEDIA_TYPE');
  });

  test.each([
    { url: LOGS, type: 'text/plain; charset=iso-8859-1', payload: 'caf\xe9\n' },
    { url: LOGS, type: 'text/plain; charset="windows-1252"', payload: 'abc\n' },
    { url: LOGS, type: 'application/json; charset=utf-16', payload: '{"text":"abc"}' },
    {
      url: EVENTS,
      type: 'application/json; charset=latin1',
      payload: '{"events":[{"kind":"progress","data":1}]}',
    },
    { url: RUN_PATH, type: 'application/json; charset=us-ascii', payload: '{"status":"failed"}' },
  ])('a $type body to $url is 415 (only UTF-8 is accepted)', async ({ url, type, payload }) => {
    const method = url === RUN_PATH ? 'PUT' : 'POST';
    const message = await expectRefused(
      { method, url, headers: { 'content-type': type }, payload: Buffer.from(payload, 'latin1') },
      415,
      'TW_UNSUPPORTED_MEDIA_TYPE',
    );
    expect(message).toMatch(/UTF-8/);
  });
});

describe('broken UTF-8', () => {
  test.each([
    { name: '0xff 0xfe', bytes: [0xff, 0xfe] },
    { name: 'a truncated three-byte sequence', bytes: [0xe2, 0x82] },
    { name: 'an overlong encoding of "/"', bytes: [0xc0, 0xaf] },
    { name: 'an encoded surrogate', bytes: [0xed, 0xa0, 0x80] },
  ])('a text/plain log body with $name is 400 TW_BAD_UTF8', async ({ bytes }) => {
    await expectRefused(
      {
        method: 'POST',
        url: LOGS,
        headers: TEXT_TYPE,
        payload: withBadBytes('line ', bytes, '\n'),
      },
      400,
      'TW_BAD_UTF8',
    );
  });

  test('a JSON log body with invalid bytes in its text is 400 TW_BAD_UTF8', async () => {
    await expectRefused(
      {
        method: 'POST',
        url: LOGS,
        headers: JSON_TYPE,
        payload: withBadBytes('{"text":"line ', [0xff, 0xfe], '\\n"}'),
      },
      400,
      'TW_BAD_UTF8',
    );
  });

  test('a JSON events body with invalid bytes in its data is 400 TW_BAD_UTF8', async () => {
    await expectRefused(
      {
        method: 'POST',
        url: EVENTS,
        headers: JSON_TYPE,
        payload: withBadBytes('{"events":[{"kind":"progress","data":"', [0xff, 0xfe], '"}]}'),
      },
      400,
      'TW_BAD_UTF8',
    );
  });

  test('a PUT run body with invalid bytes in its meta is 400 TW_BAD_UTF8', async () => {
    await expectRefused(
      {
        method: 'PUT',
        url: RUN_PATH,
        headers: JSON_TYPE,
        payload: withBadBytes('{"status":"running","meta":{"a":"', [0xc3], '"}}'),
      },
      400,
      'TW_BAD_UTF8',
    );
  });

  test('a JSON log text with a lone surrogate escape is refused with 400, not stored as U+FFFD', async () => {
    // "\ud800" is valid JSON but no UTF-8 text: storing it would need a replacement character.
    const before = await snapshot();
    const res = await t.app.inject({
      method: 'POST',
      url: LOGS,
      headers: JSON_TYPE,
      payload: '{"text":"half a pair: \\ud800 here\\n"}',
    });
    expect(res.statusCode).toBe(400);
    expect((res.json() as { error: { code: string } }).error.code).toMatch(
      /^TW_BAD_(UTF8|REQUEST)$/,
    );
    expect(await snapshot()).toEqual(before);
  });

  test('log offsets stay contiguous and U+FFFD-free after a JSON append with a lone surrogate', async () => {
    await t.app.inject({
      method: 'POST',
      url: LOGS,
      headers: JSON_TYPE,
      payload: '{"text":"a\\ud800b\\n"}',
    });
    await t.app.inject({ method: 'POST', url: LOGS, headers: TEXT_TYPE, payload: 'next\n' });
    const page = (await t.app.inject({ method: 'GET', url: `${RUN_PATH}/log` })).json() as {
      chunks: { offset: number; size: number; text: string }[];
      nextOffset: number;
    };
    let offset = 0;
    for (const chunk of page.chunks) {
      expect(chunk.offset).toBe(offset);
      expect(chunk.size).toBe(Buffer.byteLength(chunk.text, 'utf8'));
      expect(chunk.text).not.toContain('\ufffd');
      offset += chunk.size;
    }
    expect(page.nextOffset).toBe(offset);
    expect((await t.store.bounds(runKey(FQN, RUN))).logBytes).toBe(offset);
  });

  test.each([
    ['an event step', EVENTS, '{"events":[{"kind":"progress","data":1,"step":"s\\ud800"}]}'],
    [
      'an event correlationId',
      EVENTS,
      '{"events":[{"kind":"progress","data":1,"correlationId":"c\\udfff"}]}',
    ],
    ['an event id', EVENTS, '{"events":[{"kind":"progress","data":1,"id":"p\\ud800"}]}'],
    ['a log step', LOGS, '{"text":"ok\\n","step":"s\\ud800"}'],
    ['a log id', LOGS, '{"text":"ok\\n","id":"l\\udc00"}'],
  ])(
    '%s with a lone surrogate escape is refused with 400, not stored as U+FFFD',
    async (_field, url, body) => {
      const before = await snapshot();
      const res = await t.app.inject({ method: 'POST', url, headers: JSON_TYPE, payload: body });
      expect(res.statusCode).toBe(400);
      expect((res.json() as { error: { code: string } }).error.code).toMatch(
        /^TW_BAD_(UTF8|REQUEST)$/,
      );
      expect(await snapshot()).toEqual(before);
    },
  );

  test('an event id differing from a stored one only in a lone surrogate is not dropped as its duplicate', async () => {
    // "x\ud800" and "x\ud801" are different ids; stored as text both would become "x\ufffd", so
    // the second would be taken for a retry of the first and silently lost. Either it is refused
    // with 400, or it is stored as a new entry.
    const send = (id: string, data: number) =>
      t.app.inject({
        method: 'POST',
        url: EVENTS,
        headers: JSON_TYPE,
        payload: `{"events":[{"kind":"progress","data":${data},"id":"${id}"}]}`,
      });
    const first = await send('x\\ud800', 1);
    if (first.statusCode !== 200) {
      expect(first.statusCode).toBe(400);
      return;
    }
    const before = await t.store.bounds(runKey(FQN, RUN));
    const second = await send('x\\ud801', 2);
    const after = await t.store.bounds(runKey(FQN, RUN));
    if (second.statusCode === 200) {
      expect(second.json()).toMatchObject({ duplicates: 0 });
      expect(after.lastSeq).toBe(before.lastSeq + 1);
    } else {
      expect(second.statusCode).toBe(400);
      expect(after).toEqual(before);
    }
  });
});

describe('sizes', () => {
  test('an event whose data is over 64 KiB encoded is 413 TW_EVENT_TOO_LARGE naming its index', async () => {
    // JSON.stringify adds the two quotes: 65535 + 2 bytes.
    const big = 'x'.repeat(64 * KiB - 1);
    const batch = events(4);
    batch[2]!.data = big as never;
    const message = await expectRefused(
      { method: 'POST', url: EVENTS, payload: { events: batch } },
      413,
      'TW_EVENT_TOO_LARGE',
    );
    expect(message).toContain('events[2]');
  });

  test('event data size is counted in UTF-8 bytes, not characters', async () => {
    // 32767 two-byte characters: 65534 bytes + 2 quotes = 65536 fits; one more character does not.
    const fits = 'é'.repeat(32767);
    const res = await t.app.inject({
      method: 'POST',
      url: EVENTS,
      payload: { events: [{ kind: 'progress', data: fits }] },
    });
    expect(res.statusCode).toBe(200);
    const message = await expectRefused(
      {
        method: 'POST',
        url: EVENTS,
        payload: { events: [{ kind: 'progress', data: fits + 'é' }] },
      },
      413,
      'TW_EVENT_TOO_LARGE',
    );
    expect(message).toContain('events[0]');
  });

  test('an oversize event on a topic is 413 and the topic keeps what it had', async () => {
    const message = await expectRefused(
      {
        method: 'POST',
        url: TOPIC_EVENTS,
        payload: { events: [{ kind: 'build', data: { blob: 'y'.repeat(70 * KiB) } }] },
      },
      413,
      'TW_EVENT_TOO_LARGE',
    );
    expect(message).toContain('events[0]');
  });

  test('a batch of 1001 events is 413 TW_BATCH_TOO_LARGE', async () => {
    await expectRefused(
      { method: 'POST', url: EVENTS, payload: { events: events(1001) } },
      413,
      'TW_BATCH_TOO_LARGE',
    );
  });

  test('a batch of exactly 1000 events is accepted and numbered gaplessly', async () => {
    const before = await t.store.bounds(runKey(FQN, RUN));
    const res = await t.app.inject({
      method: 'POST',
      url: EVENTS,
      payload: { events: events(1000) },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({
      first: before.lastSeq + 1,
      last: before.lastSeq + 1000,
      duplicates: 0,
    });
    expect((await t.store.bounds(runKey(FQN, RUN))).lastSeq).toBe(before.lastSeq + 1000);
  });

  test('an empty batch is 400 TW_BAD_REQUEST', async () => {
    await expectRefused(
      { method: 'POST', url: EVENTS, payload: { events: [] } },
      400,
      'TW_BAD_REQUEST',
    );
  });

  test('an empty batch to a run that does not exist does not create it', async () => {
    await expectRefused(
      {
        method: 'POST',
        url: `/api/v1/pipelines/${FQN}/runs/never/events`,
        payload: { events: [] },
      },
      400,
      'TW_BAD_REQUEST',
      [runKey(FQN, 'never')],
    );
    expect(await t.store.getRun(FQN, 'never')).toBeUndefined();
  });

  describe('with maxAppendBytes 1024', () => {
    beforeEach(async () => {
      await t.close();
      t = await populatedApp({ maxAppendBytes: 1024 });
    });

    test('a text/plain log body over the limit is 413 TW_BODY_TOO_LARGE', async () => {
      await expectRefused(
        { method: 'POST', url: LOGS, headers: TEXT_TYPE, payload: 'z'.repeat(1025) },
        413,
        'TW_BODY_TOO_LARGE',
      );
    });

    test('a JSON log body over the limit is 413 TW_BODY_TOO_LARGE', async () => {
      await expectRefused(
        { method: 'POST', url: LOGS, payload: { text: 'z'.repeat(2000) } },
        413,
        'TW_BODY_TOO_LARGE',
      );
    });

    test('a log body of exactly the limit is accepted', async () => {
      const res = await t.app.inject({
        method: 'POST',
        url: LOGS,
        headers: TEXT_TYPE,
        payload: 'z'.repeat(1024),
      });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toMatchObject({ size: 1024 });
    });
  });
});

describe('kinds', () => {
  const reserved = ['end', 'gap', 'error', 'cursor', 'status', 'system', 'connected'];

  test('the reserved kinds are exactly the ones docs/API.md names', () => {
    expect([...RESERVED_KINDS].sort()).toEqual([...reserved].sort());
  });

  test.each(reserved)(
    'a run batch whose events[2] has the reserved kind %s is 400 TW_RESERVED_KIND and nothing of it is stored',
    async (kind) => {
      const batch = events(5, (index) => ({ id: `r-${index}` }));
      batch[2]!.kind = kind;
      const message = await expectRefused(
        { method: 'POST', url: EVENTS, payload: { events: batch } },
        400,
        'TW_RESERVED_KIND',
      );
      expect(message).toContain('events[2]');
      // The good events' ids were not stored either: resending them without the bad one stores all.
      const retry = await t.app.inject({
        method: 'POST',
        url: EVENTS,
        payload: { events: batch.filter((_, index) => index !== 2) },
      });
      expect(retry.json()).toMatchObject({ duplicates: 0 });
    },
  );

  test.each(reserved)(
    'a topic batch whose events[2] has the reserved kind %s is 400 TW_RESERVED_KIND',
    async (kind) => {
      const batch = events(3);
      batch[2]!.kind = kind;
      const message = await expectRefused(
        { method: 'POST', url: TOPIC_EVENTS, payload: { events: batch } },
        400,
        'TW_RESERVED_KIND',
      );
      expect(message).toContain('events[2]');
    },
  );

  test('a reserved kind in a batch to a new run creates neither the run nor any entry', async () => {
    const batch = events(3);
    batch[2]!.kind = 'status';
    await expectRefused(
      {
        method: 'POST',
        url: `/api/v1/pipelines/${FQN}/runs/fresh/events`,
        payload: { events: batch },
      },
      400,
      'TW_RESERVED_KIND',
      [runKey(FQN, 'fresh')],
    );
    expect(await t.store.getRun(FQN, 'fresh')).toBeUndefined();
  });

  test.each([
    { name: 'spaces', kind: 'my kind' },
    { name: 'a slash', kind: 'a/b' },
    { name: 'nothing', kind: '' },
    { name: '65 characters', kind: 'k'.repeat(65) },
    { name: 'a newline', kind: 'progress\nevent: end' },
    { name: 'a non-ASCII letter', kind: 'étape' },
  ])('a kind with $name is 400 TW_BAD_NAME naming its index', async ({ kind }) => {
    const batch = events(3);
    batch[1]!.kind = kind;
    const message = await expectRefused(
      { method: 'POST', url: EVENTS, payload: { events: batch } },
      400,
      'TW_BAD_NAME',
    );
    expect(message).toContain('events[1]');
  });
});

describe('names', () => {
  const longAscii = 'a'.repeat(257);
  // 129 two-byte characters: 258 bytes, though only 129 characters.
  const longMultiByte = 'é'.repeat(129);

  test.each([
    { name: 'a space', topic: 'bad%20topic' },
    { name: 'a non-ASCII letter', topic: 't%C3%B3pic' },
    { name: '129 characters', topic: 't'.repeat(129) },
    { name: 'a colon', topic: 'a:b' },
  ])('posting to a topic name with $name is 400 TW_BAD_NAME', async ({ topic }) => {
    await expectRefused(
      { method: 'POST', url: `/api/v1/topics/${topic}/events`, payload: { events: events(1) } },
      400,
      'TW_BAD_NAME',
      [topicKey(decodeURIComponent(topic))],
    );
  });

  test.each(['entries', 'stream'])(
    'reading a bad topic name (%s) is 400 TW_BAD_NAME',
    async (what) => {
      await expectRefused(
        { method: 'GET', url: `/api/v1/topics/bad%20topic/${what}` },
        400,
        'TW_BAD_NAME',
      );
    },
  );

  test.each([RUNS_FEED_TOPIC, '_private'])(
    'posting to the server topic %s is 400 and its feed is untouched',
    async (topic) => {
      await expectRefused(
        {
          method: 'POST',
          url: `/api/v1/topics/${topic}/events`,
          payload: { events: [{ kind: 'progress', data: { forged: true } }] },
        },
        400,
        'TW_BAD_NAME',
        [topicKey(topic)],
      );
    },
  );

  const badRunIds = [
    { name: 'over 256 bytes', runId: longAscii },
    { name: 'over 256 bytes in 129 two-byte characters', runId: encodeURIComponent(longMultiByte) },
    { name: 'a newline', runId: 'run%0A1' },
    { name: 'a NUL', runId: 'run%001' },
    { name: 'an escape', runId: 'run%1B%5B31m' },
    { name: 'a DEL', runId: 'run%7F' },
    { name: 'a C1 control (NEL)', runId: 'run%C2%85' },
  ];

  test.each(badRunIds)('PUT a run id with $name is 400 TW_BAD_NAME', async ({ runId }) => {
    await expectRefused(
      {
        method: 'PUT',
        url: `/api/v1/pipelines/${FQN}/runs/${runId}`,
        payload: { status: 'running' },
      },
      400,
      'TW_BAD_NAME',
    );
  });

  test.each(badRunIds)(
    'a log append to a run id with $name is 400 TW_BAD_NAME',
    async ({ runId }) => {
      await expectRefused(
        {
          method: 'POST',
          url: `/api/v1/pipelines/${FQN}/runs/${runId}/logs`,
          headers: TEXT_TYPE,
          payload: 'text\n',
        },
        400,
        'TW_BAD_NAME',
      );
    },
  );

  test.each(badRunIds)('events to a run id with $name are 400 TW_BAD_NAME', async ({ runId }) => {
    await expectRefused(
      {
        method: 'POST',
        url: `/api/v1/pipelines/${FQN}/runs/${runId}/events`,
        payload: { events: events(1) },
      },
      400,
      'TW_BAD_NAME',
    );
  });

  test.each(['', '/entries', '/log', '/log.txt', '/stream'])(
    'GET a run id with a control character (%s) is 400 TW_BAD_NAME',
    async (suffix) => {
      await expectRefused(
        { method: 'GET', url: `/api/v1/pipelines/${FQN}/runs/run%0A1${suffix}` },
        400,
        'TW_BAD_NAME',
      );
    },
  );

  test.each([
    { name: 'over 256 bytes', fqn: longAscii },
    { name: 'over 256 bytes in 129 two-byte characters', fqn: encodeURIComponent(longMultiByte) },
    { name: 'a tab', fqn: 'ingest%09daily' },
    { name: 'a carriage return', fqn: 'ingest%0D' },
  ])('a pipeline FQN with $name is 400 TW_BAD_NAME', async ({ fqn }) => {
    await expectRefused(
      {
        method: 'POST',
        url: `/api/v1/pipelines/${fqn}/runs/${RUN}/logs`,
        headers: TEXT_TYPE,
        payload: 'text\n',
      },
      400,
      'TW_BAD_NAME',
    );
    await expectRefused(
      { method: 'GET', url: `/api/v1/pipelines/${fqn}/runs` },
      400,
      'TW_BAD_NAME',
    );
  });

  test('a run id of 2000 bytes (far over 256) is 400 TW_BAD_NAME like any other long name', async () => {
    await expectRefused(
      {
        method: 'PUT',
        url: `/api/v1/pipelines/${FQN}/runs/${'a'.repeat(2000)}`,
        payload: { status: 'running' },
      },
      400,
      'TW_BAD_NAME',
    );
  });

  test('a run id whose percent-encoding is not UTF-8 is 400 with the Tailwater error body', async () => {
    const before = await snapshot();
    const res = await t.app.inject({
      method: 'PUT',
      url: `/api/v1/pipelines/${FQN}/runs/run%FF`,
      payload: { status: 'running' },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({
      error: {
        code: expect.stringMatching(/^TW_BAD_(NAME|REQUEST)$/) as unknown,
        message: expect.any(String) as unknown,
      },
    });
    expect(await snapshot()).toEqual(before);
  });

  test('PUT to the run id "latest" is 400 TW_BAD_NAME (it names the newest run)', async () => {
    await expectRefused(
      { method: 'PUT', url: `/api/v1/pipelines/${FQN}/runs/latest`, payload: { status: 'failed' } },
      400,
      'TW_BAD_NAME',
    );
  });
});

describe('cursors', () => {
  const runEntries = `${RUN_PATH}/entries`;
  const runStream = `${RUN_PATH}/stream`;

  test.each(['after=-1', 'after=abc', 'after=1.5', 'after=', 'after=0x10', 'since=-1'])(
    'entries?%s is 400 TW_BAD_CURSOR',
    async (query) => {
      await expectRefused({ method: 'GET', url: `${runEntries}?${query}` }, 400, 'TW_BAD_CURSOR');
    },
  );

  test('topic entries?after=-1 is 400 TW_BAD_CURSOR', async () => {
    await expectRefused(
      { method: 'GET', url: `/api/v1/topics/${TOPIC}/entries?after=-1` },
      400,
      'TW_BAD_CURSOR',
    );
  });

  test.each([
    { name: 'after=-1', url: `${runStream}?after=-1`, headers: {} },
    { name: 'after=abc', url: `${runStream}?after=abc`, headers: {} },
    { name: 'since=x', url: `${runStream}?since=x`, headers: {} },
    { name: 'after=-1 on the runs feed', url: '/api/v1/runs/stream?after=-1', headers: {} },
  ])(
    'a stream with $name is 400 TW_BAD_CURSOR before any stream opens',
    async ({ url, headers }) => {
      await expectRefused({ method: 'GET', url, headers }, 400, 'TW_BAD_CURSOR');
    },
  );

  // An EventSource never reconnects after a 4xx, so a header it sends by itself is not refused.
  test.each([
    { name: 'x', url: runStream, headers: { 'last-event-id': 'x' } },
    { name: '-1', url: runStream, headers: { 'last-event-id': '-1' } },
    { name: 'a Redis stream id', url: runStream, headers: { 'last-event-id': '1718000000000-0' } },
    {
      name: 'x beside a good ?after (the header wins)',
      url: `${runStream}?after=2`,
      headers: { 'last-event-id': 'x' },
    },
    {
      name: 'x on a topic stream',
      url: `/api/v1/topics/${TOPIC}/stream`,
      headers: { 'last-event-id': 'x' },
    },
    {
      name: 'x on the runs feed',
      url: '/api/v1/runs/stream',
      headers: { 'last-event-id': 'x' },
    },
  ])(
    'a stream with Last-Event-ID: $name opens with gap reset, the stream from its start',
    async ({ url, headers }) => {
      const before = await snapshot();
      const reader = await openStream(url, headers);
      try {
        expect(reader.status).toBe(200);
        expect(reader.headers.get('content-type')).toMatch(/^text\/event-stream/);
        await reader.waitFor((events) => events.length >= 2);
        expect(reader.events[0]).toMatchObject({ event: 'gap', data: '{"reason":"reset"}' });
        const { epoch } = await t.store.bounds(runKey(FQN, RUN));
        expect(reader.events[1]!.id).toBe(`1-${epoch}`);
      } finally {
        reader.close();
      }
      expect(await snapshot()).toEqual(before);
    },
  );
});

describe('limits and offsets are refused, never clamped', () => {
  test.each(['limit=0', 'limit=1001', 'limit=-5', 'limit=abc', 'limit=2.5', 'limit=1&limit=2'])(
    'entries?%s is 400 TW_BAD_QUERY',
    async (query) => {
      await expectRefused(
        { method: 'GET', url: `${RUN_PATH}/entries?${query}` },
        400,
        'TW_BAD_QUERY',
      );
    },
  );

  test('topic entries?limit=1001 is 400 TW_BAD_QUERY', async () => {
    await expectRefused(
      { method: 'GET', url: `/api/v1/topics/${TOPIC}/entries?limit=1001` },
      400,
      'TW_BAD_QUERY',
    );
  });

  test.each([
    'limit=0',
    `limit=${MiB + 1}`,
    'limit=-1',
    'offset=-2',
    'offset=-100&limit=10',
    'offset=abc',
  ])('log?%s is 400 TW_BAD_QUERY', async (query) => {
    await expectRefused({ method: 'GET', url: `${RUN_PATH}/log?${query}` }, 400, 'TW_BAD_QUERY');
  });

  test('log?limit=1 MiB exactly is accepted', async () => {
    const res = await t.app.inject({ method: 'GET', url: `${RUN_PATH}/log?limit=${MiB}` });
    expect(res.statusCode).toBe(200);
  });

  test.each(['limit=0', 'limit=1001', 'status=done'])(
    'listing runs with ?%s is 400 TW_BAD_QUERY',
    async (query) => {
      await expectRefused(
        { method: 'GET', url: `/api/v1/pipelines/${FQN}/runs?${query}` },
        400,
        'TW_BAD_QUERY',
      );
    },
  );

  test.each(['tail=-1', 'tail=abc', 'from=middle'])(
    'a stream with ?%s is 400 TW_BAD_QUERY',
    async (query) => {
      await expectRefused(
        { method: 'GET', url: `${RUN_PATH}/stream?${query}` },
        400,
        'TW_BAD_QUERY',
      );
    },
  );
});

describe('status conflicts', () => {
  const terminal = ['success', 'failed', 'partialSuccess', 'stopped', 'cancelled'] as const;

  const finish = async (status: string) => {
    const res = await t.app.inject({ method: 'PUT', url: RUN_PATH, payload: { status } });
    expect(res.statusCode).toBe(200);
  };

  test.each(terminal.flatMap((from) => ['running', 'queued'].map((to) => ({ from, to }))))(
    'PUT $to after $from is 409 TW_STATUS_CONFLICT and the run stays $from',
    async ({ from, to }) => {
      await finish(from);
      await expectRefused(
        { method: 'PUT', url: RUN_PATH, payload: { status: to } },
        409,
        'TW_STATUS_CONFLICT',
      );
      expect((await t.store.getRun(FQN, RUN))?.status).toBe(from);
    },
  );

  test.each(terminal)(
    'cancel of a run that ended with %s is 409 TW_STATUS_CONFLICT',
    async (from) => {
      await finish(from);
      await expectRefused({ method: 'POST', url: `${RUN_PATH}/cancel` }, 409, 'TW_STATUS_CONFLICT');
      expect((await t.store.getRun(FQN, RUN))?.cancelRequested).toBe(false);
    },
  );
});

describe('unknown things', () => {
  const unknownRun = `/api/v1/pipelines/${FQN}/runs/no-such-run`;
  const unknownPipelineRun = `/api/v1/pipelines/no.such.pipeline/runs/${RUN}`;

  test.each([
    { method: 'GET', suffix: '' },
    { method: 'GET', suffix: '/entries' },
    { method: 'GET', suffix: '/log' },
    { method: 'GET', suffix: '/log.txt' },
    { method: 'POST', suffix: '/cancel' },
  ] as const)(
    '$method of an unknown run$suffix is 404 TW_RUN_NOT_FOUND',
    async ({ method, suffix }) => {
      await expectRefused({ method, url: `${unknownRun}${suffix}` }, 404, 'TW_RUN_NOT_FOUND', [
        runKey(FQN, 'no-such-run'),
      ]);
      await expectRefused(
        { method, url: `${unknownPipelineRun}${suffix}` },
        404,
        'TW_RUN_NOT_FOUND',
        [runKey('no.such.pipeline', RUN)],
      );
      expect(await t.store.getRun(FQN, 'no-such-run')).toBeUndefined();
    },
  );

  test.each(['', '/entries', '/log', '/log.txt', '/events', '/logs', '/cancel'])(
    '"latest" of a pipeline with no runs%s is 404 TW_RUN_NOT_FOUND',
    async (suffix) => {
      const method = ['/events', '/logs', '/cancel'].includes(suffix) ? 'POST' : 'GET';
      const payload =
        suffix === '/events'
          ? { events: events(1) }
          : suffix === '/logs'
            ? { text: 'late\n' }
            : undefined;
      await expectRefused(
        {
          method,
          url: `/api/v1/pipelines/empty.pipeline/runs/latest${suffix}`,
          ...(payload ? { payload } : {}),
        },
        404,
        'TW_RUN_NOT_FOUND',
      );
    },
  );

  test.each([
    { method: 'GET', url: '/api/v1/nothing-here' },
    { method: 'GET', url: '/api/v2/pipelines' },
    { method: 'DELETE', url: `${RUN_PATH}/logs` },
    { method: 'POST', url: `${RUN_PATH}/unknown` },
  ] as const)('$method $url is 404 TW_NOT_FOUND', async ({ method, url }) => {
    await expectRefused({ method, url }, 404, 'TW_NOT_FOUND');
  });
});
