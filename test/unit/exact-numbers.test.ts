import { afterEach, describe, expect, test } from 'vitest';
import { stringifyWithData } from '../../src/http/exact-json.js';
import { runPath } from '../helpers/api.js';
import { createTestApp } from '../helpers/app.js';
import type { TestApp } from '../helpers/app.js';
import { openSse } from '../helpers/sse.js';

// Numbers JSON.parse would round — integers past 2^53 (an Iceberg snapshotId), decimals longer
// than a double — go in and out of the native API as the producer wrote them.

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
    // A number that fits a double is not rewritten: 1.50 is stored as JSON.stringify makes it.
    expect(listed.body).toContain('"data":{"n":1.5}');

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

describe('stringifyWithData', () => {
  test('writes data verbatim where it belongs, whatever the other fields hold', () => {
    const text = stringifyWithData(
      { seq: 1, kind: 'k', data: 0, step: '"data":', correlationId: '\u0000exact-' },
      `{"big":${BIG}}`,
    );
    expect(text).toBe(
      `{"seq":1,"kind":"k","data":{"big":${BIG}},"step":"\\"data\\":","correlationId":"\\u0000exact-"}`,
    );
  });
});
