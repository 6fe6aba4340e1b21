import { afterEach, describe, expect, test } from 'vitest';
import { stringifyWith } from '../../src/http/exact-json.js';
import { runPath } from '../helpers/api.js';
import { createTestApp } from '../helpers/app.js';
import type { TestApp } from '../helpers/app.js';
import { openSse } from '../helpers/sse.js';

// Event data goes in and out of the native API as the producer wrote it: numbers JSON.parse
// would round (integers past 2^53, an Iceberg snapshotId; decimals longer than a double; 1e400)
// included, whatever else the body holds.

const JSON_TYPE = { 'content-type': 'application/json' };
const BIG = '1234567890123456789'; // 2^60-ish: JSON.parse makes it 1234567890123456800
const PAST_2_53 = '9007199254740993'; // 2^53 + 1: JSON.parse makes it ...992
const LONG_DECIMAL = '0.12345678901234567891';
const DATA = `{"snapshotId":${BIG},"nested":[${PAST_2_53},{"ratio":${LONG_DECIMAL}}],"small":42,"text":"${BIG}x"}`;

describe('exact numbers on the native API', () => {
  let t: TestApp | undefined;
  afterEach(async () => {
    await t?.close();
    t = undefined;
  });

  test.each([
    ['a run', `${runPath('exact.p', 'r1')}/events`, `${runPath('exact.p', 'r1')}`],
    ['a topic', '/api/v1/topics/exact-topic/events', '/api/v1/topics/exact-topic'],
  ])('%s: stored, listed and streamed digit for digit', async (_name, post, base) => {
    t = await createTestApp();
    const url = await t.listen();
    const body = `{"events":[{"kind":"commit","data":${DATA}},{"kind":"plain","data":{"n":1.50}}]}`;
    const answer = await t.app.inject({
      method: 'POST',
      url: post,
      headers: JSON_TYPE,
      payload: body,
    });
    expect(answer.statusCode).toBe(200);

    const listed = await t.app.inject({ method: 'GET', url: `${base}/entries` });
    expect(listed.statusCode).toBe(200);
    expect(listed.headers['content-type']).toMatch(/^application\/json/);
    expect(listed.body).toContain(`"data":${DATA}`);
    // Everything else about the answer is what JSON.parse makes of it.
    const page = listed.json<{ entries: { kind: string; data: unknown }[]; hasMore: boolean }>();
    expect(page.hasMore).toBe(false);
    expect(page.entries.map((e) => e.kind)).toContain('commit');
    // The other event of the batch is as its producer wrote it too, not as JSON.stringify would.
    expect(listed.body).toContain('"data":{"n":1.50}');

    const sse = await openSse(`${url}${base}/stream`);
    try {
      await sse.waitFor((events) => events.some((e) => e.event === 'plain'));
      const commit = sse.events.find((e) => e.event === 'commit')!;
      expect(commit.data).toContain(`"data":${DATA}`);
      expect(JSON.parse(commit.data)).toMatchObject({ kind: 'commit', seq: expect.any(Number) });
    } finally {
      sse.close();
    }
  });

  test('1e400 is kept as written on every path, with or without a long number beside it', async () => {
    t = await createTestApp();
    const url = await t.listen();
    const post = `${runPath('exact.p', 'big')}/events`;
    for (const body of [
      '{"events":[{"kind":"k","data":{"x":1e400}}]}',
      `{"events":[{"kind":"k","data":{"x":1e400,"id":${BIG}}}]}`,
      `{"events":[{"kind":"k","data":{"x":1e400}},{"kind":"k","data":${BIG}}]}`,
    ]) {
      const answer = await t.app.inject({
        method: 'POST',
        url: post,
        headers: JSON_TYPE,
        payload: body,
      });
      expect(answer.statusCode).toBe(200);
    }
    const listed = await t.app.inject({
      method: 'GET',
      url: `${runPath('exact.p', 'big')}/entries`,
    });
    expect(listed.body.match(/"data":\{"x":1e400[,}]/g)).toHaveLength(3);
    const sse = await openSse(`${url}${runPath('exact.p', 'big')}/stream`);
    try {
      await sse.waitFor((events) => events.filter((e) => e.event === 'k').length === 4);
      const frames = sse.events.filter((e) => e.event === 'k').map((e) => e.data);
      expect(frames.filter((data) => data.includes('"data":{"x":1e400'))).toHaveLength(3);
    } finally {
      sse.close();
    }
  });

  test('duplicate keys beside a 16-digit number are kept as written, not a 500', async () => {
    t = await createTestApp();
    const data = `{"a":1,"a":2,"id":${BIG}}`;
    const post = `${runPath('exact.p', 'dup')}/events`;
    const answer = await t.app.inject({
      method: 'POST',
      url: post,
      headers: JSON_TYPE,
      payload: `{"events":[{"kind":"k","data":${data}}]}`,
    });
    expect(answer.statusCode).toBe(200);
    const listed = await t.app.inject({
      method: 'GET',
      url: `${runPath('exact.p', 'dup')}/entries`,
    });
    expect(listed.body).toContain(`"data":${data}`);
    // Parsed, the last key wins, as JSON.parse has it.
    expect(listed.json<{ entries: { data: { a: number } }[] }>().entries[1]!.data.a).toBe(2);
  });

  test('a 20-digit string is a string, and a body without long numbers is unchanged', async () => {
    t = await createTestApp();
    const body = `{"events":[{"kind":"k","data":{"id":"12345678901234567890","n":7}}]}`;
    const post = `${runPath('exact.p', 'r2')}/events`;
    await t.app.inject({ method: 'POST', url: post, headers: JSON_TYPE, payload: body });
    const listed = await t.app.inject({
      method: 'GET',
      url: `${runPath('exact.p', 'r2')}/entries`,
    });
    expect(listed.body).toContain('"data":{"id":"12345678901234567890","n":7}');
  });

  test('a retried batch with long numbers is still recognised by its ids', async () => {
    t = await createTestApp();
    const body = `{"events":[{"kind":"commit","id":"e1","data":{"snapshotId":${BIG}}}]}`;
    const post = `${runPath('exact.p', 'r3')}/events`;
    const first = await t.app.inject({
      method: 'POST',
      url: post,
      headers: JSON_TYPE,
      payload: body,
    });
    const again = await t.app.inject({
      method: 'POST',
      url: post,
      headers: JSON_TYPE,
      payload: body,
    });
    expect(first.json()).toMatchObject({ duplicates: 0 });
    expect(again.json()).toMatchObject({
      duplicates: 1,
      seqs: first.json<{ seqs: number[] }>().seqs,
    });
  });
});

describe('stringifyWith', () => {
  test('writes data verbatim where it belongs, whatever the other fields hold', () => {
    const text = stringifyWith(
      { seq: 1, kind: 'k', data: 0, step: '"data":', correlationId: '\u0000exact-' },
      'data',
      `{"big":${BIG}}`,
    );
    expect(text).toBe(
      `{"seq":1,"kind":"k","data":{"big":${BIG}},"step":"\\"data\\":","correlationId":"\\u0000exact-"}`,
    );
  });
});
