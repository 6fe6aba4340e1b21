import net from 'node:net';
import { afterEach, describe, expect, test } from 'vitest';
import type { Entry } from '../../src/model/entry.js';
import type { PartialSettings } from '../../src/model/settings.js';
import { runKey, topicKey } from '../../src/model/stream-key.js';
import { RUNS_FEED_TOPIC } from '../../src/store/store.js';
import { runPath } from '../helpers/api.js';
import { createTestApp, liveApps } from '../helpers/app.js';
import type { TestApp } from '../helpers/app.js';
import { openSse } from '../helpers/sse.js';

// What the server defends against without authentication (docs/SECURITY.md), through
// app.inject() and, for streams, a listening app.

const JSON_TYPE = { 'content-type': 'application/json' };
const RUN = runPath('etl.daily', 'r1');

let t: TestApp | undefined;
const live = liveApps({ pollSeconds: 0.05 });

afterEach(async () => {
  await t?.close();
  t = undefined;
  await live.closeAll();
});

async function app(overrides: PartialSettings = {}): Promise<TestApp> {
  t = await createTestApp(overrides);
  return t;
}

/** Everything a refused request could have touched. */
async function snapshot(a: TestApp) {
  return {
    run: await a.store.getRun('etl.daily', 'r1'),
    runStream: await a.store.bounds(runKey('etl.daily', 'r1')),
    feed: await a.store.bounds(topicKey(RUNS_FEED_TOPIC)),
    topic: await a.store.bounds(topicKey('t')),
  };
}

/**
 * The Tailwater code of an error answer, whatever the dialect's body (docs/API.md): `error.code`
 * where `error` is an object, else `code` (Freight's `error` is the message).
 */
const errorCode = (res: { json: () => unknown }) => {
  const body = res.json() as { error?: unknown; code?: unknown };
  return typeof body.error === 'object' && body.error !== null
    ? (body.error as { code: string }).code
    : (body.code as string);
};

describe('DNS rebinding: the Host must name this server', () => {
  test('a request whose Host is another name is 421 TW_MISDIRECTED, and stores nothing', async () => {
    const a = await app();
    await a.ingest.putRun('etl.daily', 'r1', { status: 'running' });
    const before = await snapshot(a);
    for (const [method, url, payload] of [
      ['GET', '/api/v1/pipelines', undefined],
      ['GET', `${RUN}/entries`, undefined],
      ['POST', `${RUN}/logs`, 'a line\n'],
      ['POST', `${RUN}/cancel`, undefined],
      // The dialects, each with its own error body.
      [
        'GET',
        '/compat/openmetadata/api/v1/services/ingestionPipelines/logs/etl.daily/last',
        undefined,
      ],
      ['GET', '/compat/freight/api/0/deploys/etl/daily/r1/', undefined],
      ['PUT', '/compat/freight/api/0/deploys/etl/daily/r1/', '{"status":"cancelled"}'],
      ['GET', '/compat/zenml/api/v1/runs/r1/events/stream', undefined],
    ] as const) {
      const res = await a.app.inject({
        method,
        url,
        headers: { host: 'evil.example:8585', 'content-type': 'text/plain' },
        ...(payload === undefined ? {} : { payload }),
      });
      expect(res.statusCode, `${method} ${url}`).toBe(421);
      expect(errorCode(res)).toBe('TW_MISDIRECTED');
    }
    expect(await snapshot(a)).toEqual(before);
  });

  test('loopback names in any spelling are this server', async () => {
    const a = await app();
    for (const host of [
      'localhost',
      'localhost:8585',
      '127.0.0.1:8585',
      '127.3.2.1',
      '[::1]:8585',
      'app.localhost',
      'LOCALHOST.',
    ]) {
      const res = await a.app.inject({ method: 'GET', url: '/healthz', headers: { host } });
      expect(res.statusCode, host).toBe(200);
    }
  });

  test('allowedHosts adds names, exactly or as a domain with its subdomains', async () => {
    const a = await app({ allowedHosts: ['tailwater.example.com', '.corp.example'] });
    const status = async (host: string) =>
      (await a.app.inject({ method: 'GET', url: '/healthz', headers: { host } })).statusCode;
    expect(await status('tailwater.example.com')).toBe(200);
    expect(await status('Tailwater.Example.Com:443')).toBe(200);
    expect(await status('corp.example')).toBe(200);
    expect(await status('logs.corp.example')).toBe(200);
    expect(await status('evilcorp.example')).toBe(421);
    expect(await status('tailwater.example.com.evil.example')).toBe(421);
  });

  test('the address the server listens on is one of its names', async () => {
    const a = await app({ host: '10.1.2.3' });
    const status = async (host: string) =>
      (await a.app.inject({ method: 'GET', url: '/healthz', headers: { host } })).statusCode;
    expect(await status('10.1.2.3:8585')).toBe(200);
    expect(await status('10.1.2.4:8585')).toBe(421);
  });

  test('listening on a wildcard address with no allowedHosts, any Host is taken', async () => {
    const a = await app({ host: '0.0.0.0' });
    const res = await a.app.inject({
      method: 'GET',
      url: '/healthz',
      headers: { host: 'anything.example' },
    });
    expect(res.statusCode).toBe(200);
  });
});

describe('cross-site requests: the Origin must be the server or an allowed one', () => {
  test('a page of another site cannot append log text with a simple text/plain POST', async () => {
    const a = await app();
    await a.ingest.putRun('etl.daily', 'r1', { status: 'running' });
    const before = await snapshot(a);
    const res = await a.app.inject({
      method: 'POST',
      url: `${RUN}/logs`,
      headers: { origin: 'https://evil.example', 'content-type': 'text/plain' },
      payload: 'rm -rf /\n',
    });
    expect(res.statusCode).toBe(403);
    expect(errorCode(res)).toBe('TW_FORBIDDEN_ORIGIN');
    expect(await snapshot(a)).toEqual(before);
  });

  test('a page of another site cannot cancel a run with a body-less POST', async () => {
    const a = await app();
    await a.ingest.putRun('etl.daily', 'r1', { status: 'running' });
    const res = await a.app.inject({
      method: 'POST',
      url: `${RUN}/cancel`,
      headers: { origin: 'https://evil.example' },
    });
    expect(res.statusCode).toBe(403);
    expect((await a.store.getRun('etl.daily', 'r1'))?.cancelRequested).toBe(false);
  });

  test('a page of another site cannot read the API, and gets no CORS header', async () => {
    const a = await app();
    const res = await a.app.inject({
      method: 'GET',
      url: '/api/v1/pipelines',
      headers: { origin: 'https://evil.example' },
    });
    expect(res.statusCode).toBe(403);
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
  });

  test('Origin "null" (a sandboxed frame, a file:// page) is refused', async () => {
    const a = await app();
    const res = await a.app.inject({
      method: 'GET',
      url: '/api/v1/pipelines',
      headers: { origin: 'null' },
    });
    expect(res.statusCode).toBe(403);
  });

  test("the dashboard's own pages (Origin equal to the Host) are served, without CORS headers", async () => {
    const a = await app();
    const res = await a.app.inject({
      method: 'POST',
      url: `${RUN}/logs`,
      headers: {
        host: '127.0.0.1:8585',
        origin: 'http://127.0.0.1:8585',
        'content-type': 'text/plain',
      },
      payload: 'ok\n',
    });
    expect(res.statusCode).toBe(200);
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
  });

  test('a page on another loopback port (a dev server) is allowed by default, with CORS headers', async () => {
    const a = await app();
    const res = await a.app.inject({
      method: 'GET',
      url: '/api/v1/pipelines',
      headers: { origin: 'http://localhost:5173' },
    });
    expect(res.statusCode).toBe(200);
    expect(res.headers['access-control-allow-origin']).toBe('http://localhost:5173');
    expect(res.headers['access-control-allow-credentials']).toBe('true');
    expect(res.headers['vary']).toMatch(/Origin/);
  });

  test('a CORS preflight from an allowed origin is 204 with the methods and the headers asked for', async () => {
    const a = await app({ allowedOrigins: ['https://om.example.com'] });
    const res = await a.app.inject({
      method: 'OPTIONS',
      url: '/compat/openmetadata/api/v1/services/ingestionPipelines/logs/p/stream/r',
      headers: {
        origin: 'https://om.example.com',
        'access-control-request-method': 'GET',
        'access-control-request-headers': 'authorization, last-event-id',
      },
    });
    expect(res.statusCode).toBe(204);
    expect(res.headers['access-control-allow-origin']).toBe('https://om.example.com');
    expect(res.headers['access-control-allow-methods']).toMatch(/GET/);
    expect(res.headers['access-control-allow-headers']).toBe('authorization, last-event-id');
    const refused = await a.app.inject({
      method: 'OPTIONS',
      url: '/api/v1/pipelines',
      headers: { origin: 'http://localhost:5173', 'access-control-request-method': 'POST' },
    });
    expect(refused.statusCode).toBe(403);
  });

  test('allowedOrigins "*" lets any page read, but never with credentials', async () => {
    const a = await app({ allowedOrigins: ['*'] });
    const res = await a.app.inject({
      method: 'GET',
      url: '/api/v1/pipelines',
      headers: { origin: 'https://anywhere.example' },
    });
    expect(res.statusCode).toBe(200);
    expect(res.headers['access-control-allow-origin']).toBe('https://anywhere.example');
    expect(res.headers['access-control-allow-credentials']).toBeUndefined();
  });

  test('a stream opened by an allowed page carries the CORS headers in its own head', async () => {
    const a = await live.start();
    const stream = await live.open(a, '/api/v1/topics/t/stream', {
      origin: 'http://127.0.0.1:3000',
    });
    expect(stream.status).toBe(200);
    expect(stream.headers.get('access-control-allow-origin')).toBe('http://127.0.0.1:3000');
    expect(stream.headers.get('content-type')).toMatch(/^text\/event-stream/);
  });
});

describe('security headers', () => {
  test('API answers, downloads and streams say nosniff, no framing and no referrer', async () => {
    const a = await live.start();
    await a.ingest.appendLog('etl.daily', 'r1', { text: '<script>alert(1)</script>\n' });
    for (const path of [
      '/api/v1/pipelines',
      `${RUN}/log.txt`,
      '/compat/openmetadata/api/v1/services/ingestionPipelines/logs/etl.daily/last/download',
    ]) {
      const res = await fetch(`${a.url}${path}`);
      expect(res.headers.get('x-content-type-options'), path).toBe('nosniff');
      expect(res.headers.get('x-frame-options'), path).toBe('DENY');
      expect(res.headers.get('referrer-policy'), path).toBe('no-referrer');
      expect(res.headers.get('content-security-policy'), path).toMatch(/frame-ancestors 'none'/);
      await res.arrayBuffer();
    }
    const stream = await live.open(a, `${RUN}/stream`);
    expect(stream.headers.get('x-content-type-options')).toBe('nosniff');
  });

  test("the dashboard's policy lets it load only its own files and talk only to its own server", async () => {
    const a = await app();
    const res = await a.app.inject({ method: 'GET', url: '/ui/' });
    const csp = res.headers['content-security-policy'] as string;
    expect(csp).toMatch(/default-src 'self'/);
    expect(csp).toMatch(/script-src 'self'(;|$)/);
    expect(csp).toMatch(/connect-src 'self'/);
    expect(csp).toMatch(/object-src 'none'/);
    expect(csp).not.toMatch(/unsafe-inline|unsafe-eval|upgrade-insecure-requests/);
    expect(res.headers['strict-transport-security']).toBeUndefined();
  });
});

describe('one client cannot take every stream', () => {
  test('past maxStreamsPerClient a client gets 429 TW_TOO_MANY_CLIENT_STREAMS before any stream opens', async () => {
    const a = await live.start({ maxStreamsPerClient: 2 });
    const first = await live.open(a, '/api/v1/topics/a/stream');
    await live.open(a, '/api/v1/topics/b/stream');
    const third = await fetch(`${a.url}/api/v1/topics/c/stream`);
    expect(third.status).toBe(429);
    expect(third.headers.get('retry-after')).toBe('5');
    expect(await third.json()).toMatchObject({ error: { code: 'TW_TOO_MANY_CLIENT_STREAMS' } });
    // The server's own counts are untouched by the refusal, and a slot frees when a stream closes.
    expect(a.hub.activeConnections).toBe(2);
    first.close();
    await expect.poll(() => a.hub.activeConnections).toBe(1);
    const again = await live.open(a, '/api/v1/topics/c/stream');
    expect(again.status).toBe(200);
  });

  test('the OpenMetadata stream refuses with an error event on a 200, as for its other limits', async () => {
    const a = await live.start({ maxStreamsPerClient: 1 });
    await a.ingest.appendLog('etl.daily', 'r1', { text: 'x\n' });
    await live.open(a, '/api/v1/topics/a/stream');
    const path = '/compat/openmetadata/api/v1/services/ingestionPipelines/logs/etl.daily/stream/r1';
    const refused = await live.open(a, path);
    expect(refused.status).toBe(200);
    await refused.waitFor((events) => events.length > 0);
    expect(JSON.parse(refused.events[0]!.data)).toMatchObject({
      eventType: 'error',
      message: expect.stringMatching(/as many logs as one client may/),
    });
  });
});

describe('ids that cannot collide', () => {
  test('a producer id may not take the form of the ids the server makes up ("seq:")', async () => {
    const a = await app();
    const res = await a.app.inject({
      method: 'POST',
      url: '/api/v1/topics/iceberg/events',
      headers: JSON_TYPE,
      payload: { events: [{ kind: 'iceberg-mutation', data: {}, id: 'seq:5' }] },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({
      error: { code: 'TW_BAD_NAME', message: /events\[0\]\.id/ },
    });
  });

  test('an Iceberg dashboard resumes at the right event when an eventId looks like another event seq', async () => {
    const a = await live.start();
    const post = (events: unknown[]) =>
      a.app.inject({
        method: 'POST',
        url: '/api/v1/topics/iceberg/events',
        headers: JSON_TYPE,
        payload: { events },
      });
    // seq 1: no eventId (sent as "seq:1"); seq 2: eventId "1"; seq 3: no eventId; seq 4: eventId "3".
    await post([
      { kind: 'iceberg-mutation', data: { n: 1 } },
      { kind: 'iceberg-mutation', data: { n: 2 }, id: '1' },
      { kind: 'iceberg-mutation', data: { n: 3 } },
      { kind: 'iceberg-mutation', data: { n: 4 }, id: '3' },
    ]);
    const first = await live.open(a, '/compat/iceberg/events');
    await first.waitFor(
      (events) => events.filter((e) => e.event === 'iceberg-mutation').length === 4,
    );
    const ids = first.events.filter((e) => e.event === 'iceberg-mutation').map((e) => e.id);
    expect(ids).toEqual(['seq:1', '1', 'seq:3', '3']);
    expect(new Set(ids).size).toBe(4);
    for (const [lastEventId, expected] of [
      ['seq:1', [2, 3, 4]],
      ['1', [3, 4]],
      ['seq:3', [4]],
      ['3', []],
    ] as const) {
      const resumed = await live.open(a, '/compat/iceberg/events', {
        'Last-Event-ID': lastEventId,
      });
      await post([{ kind: 'iceberg-mutation', data: { marker: lastEventId } }]);
      await resumed.waitFor((events) =>
        events.some((e) => e.data.includes(`"marker":"${lastEventId}"`)),
      );
      const got = resumed.events
        .filter((e) => e.event === 'iceberg-mutation')
        .map((e) => (JSON.parse(e.data) as { n?: number }).n)
        .filter((n) => n !== undefined);
      expect(got, `after ${lastEventId}`).toEqual(expected);
      resumed.close();
    }
  });

  test('an Iceberg Last-Event-ID the server cannot place gets gap reset and the latest events, never a silent skip', async () => {
    const a = await live.start({ icebergReplayOnConnect: 2 });
    await a.app.inject({
      method: 'POST',
      url: '/api/v1/topics/iceberg/events',
      headers: JSON_TYPE,
      payload: {
        events: [1, 2, 3].map((n) => ({ kind: 'iceberg-mutation', data: { n }, id: `e${n}` })),
      },
    });
    const resumed = await live.open(a, '/compat/iceberg/events', { 'Last-Event-ID': 'never-sent' });
    await resumed.waitFor(
      (events) => events.filter((e) => e.event === 'iceberg-mutation').length === 2,
    );
    const names = resumed.events.map((e) => e.event);
    expect(names.slice(0, 2)).toEqual(['connected', 'gap']);
    expect(JSON.parse(resumed.events[1]!.data)).toEqual({ reason: 'reset' });
    expect(resumed.events.filter((e) => e.event === 'iceberg-mutation').map((e) => e.id)).toEqual([
      'e2',
      'e3',
    ]);
  });
});

describe('runs named without their pipeline', () => {
  test('a bare ZenML run id that two pipelines have is 409 TW_AMBIGUOUS_RUN; its UUID still works', async () => {
    const a = await live.start();
    const one = (await a.ingest.putRun('ml.train', 'run-7', { status: 'running' })).run;
    await a.ingest.putRun('etl.daily', 'run-7', { status: 'running' });
    const before = await snapshot(a);
    const post = await a.app.inject({
      method: 'POST',
      url: '/compat/zenml/api/v1/runs/run-7/events',
      headers: JSON_TYPE,
      payload: { events: [{ pipeline_run_id: 'run-7', kind: 'metric', payload: { x: 1 } }] },
    });
    expect(post.statusCode).toBe(409);
    expect(post.json()).toMatchObject({
      detail: expect.stringMatching(/etl\.daily.*ml\.train|ml\.train.*etl\.daily/),
    });
    expect(await snapshot(a)).toEqual(before);
    const stream = await fetch(`${a.url}/compat/zenml/api/v1/runs/run-7/events/stream`);
    expect(stream.status).toBe(409);
    const byId = await a.app.inject({
      method: 'POST',
      url: `/compat/zenml/api/v1/runs/${one.id}/events`,
      headers: JSON_TYPE,
      payload: { events: [{ pipeline_run_id: one.id, kind: 'metric', payload: { x: 1 } }] },
    });
    expect(byId.statusCode).toBe(200);
    expect((await a.store.bounds(runKey('ml.train', 'run-7'))).lastSeq).toBe(2);
  });

  test("Freight's Link header is built from the run's id percent-encoded, whatever its path held", async () => {
    const a = await app();
    const runId = 'deploy <7> "x" é';
    await a.ingest.appendLog('app.prod', runId, { text: 'hello\n' });
    const res = await a.app.inject({
      method: 'GET',
      url: `/compat/freight/api/0/deploys/${encodeURIComponent(runId)}/log/`,
    });
    expect(res.statusCode).toBe(200);
    const link = res.headers['link'] as string;
    expect(link).toBe(
      `</compat/freight/api/0/deploys/${encodeURIComponent(runId)}/log/?offset=6&cursor=6>; rel="next"`,
    );
    expect(link).not.toMatch(/[<>"]\S*[<>"]\S*"x"/);
  });
});

describe('names', () => {
  test('the NFC and NFD spellings of a pipeline name are one pipeline', async () => {
    const a = await app();
    const nfd = runPath('cafe\u0301.daily', 'r1');
    const nfc = runPath('caf\u00e9.daily', 'r1');
    await a.app.inject({
      method: 'POST',
      url: `${nfd}/logs`,
      headers: { 'content-type': 'text/plain' },
      payload: 'one\n',
    });
    await a.app.inject({
      method: 'POST',
      url: `${nfc}/logs`,
      headers: { 'content-type': 'text/plain' },
      payload: 'two\n',
    });
    const listed = (await a.app.inject({ method: 'GET', url: '/api/v1/pipelines' })).json() as {
      pipelines: { fqn: string }[];
    };
    expect(listed.pipelines.map((p) => p.fqn)).toEqual(['caf\u00e9.daily']);
    const entries = (
      await a.app.inject({ method: 'GET', url: `${nfd}/entries?kinds=log` })
    ).json() as {
      entries: Entry[];
    };
    expect(entries.entries.map((e) => e.text)).toEqual(['one\n', 'two\n']);
  });

  test('a pipeline name with a bidi override is 400 TW_BAD_NAME', async () => {
    const a = await app();
    const res = await a.app.inject({
      method: 'PUT',
      url: runPath('reports\u202eexe.daily', 'r1'),
      payload: { status: 'running' },
    });
    expect(res.statusCode).toBe(400);
    expect(errorCode(res)).toBe('TW_BAD_NAME');
  });

  test('a step with NFD accents is stored in NFC and found by either spelling', async () => {
    const a = await app();
    await a.app.inject({
      method: 'POST',
      url: `${RUN}/events`,
      headers: JSON_TYPE,
      payload: { events: [{ kind: 'progress', step: 'e\u0301tape', data: 1 }] },
    });
    const [, progress] = await a.store.readEntries(runKey('etl.daily', 'r1'), {
      afterSeq: 0,
      limit: 10,
    });
    expect(progress?.step).toBe('\u00e9tape');
  });
});

describe('bodies that used to answer 500', () => {
  test('an event of kind "log" is 400 TW_RESERVED_KIND: log text goes to the logs endpoint', async () => {
    const a = await app();
    const res = await a.app.inject({
      method: 'POST',
      url: `${RUN}/events`,
      headers: JSON_TYPE,
      payload: { events: [{ kind: 'log', data: { text: 'x' } }] },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({
      error: { code: 'TW_RESERVED_KIND', message: /events\[0\]/ },
    });
    expect(await a.store.getRun('etl.daily', 'r1')).toBeUndefined();
  });

  test('data nested deeper than 64 levels is 400 TW_BAD_JSON; 60 levels are stored', async () => {
    const a = await app();
    const nested = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);
    const post = (data: string) =>
      a.app.inject({
        method: 'POST',
        url: `${RUN}/events`,
        headers: JSON_TYPE,
        payload: `{"events":[{"kind":"k","data":${data}}]}`,
      });
    const deep = await post(nested(3000));
    expect(deep.statusCode).toBe(400);
    expect(deep.json()).toMatchObject({
      error: { code: 'TW_BAD_JSON', message: /deeper than 64/ },
    });
    expect((await post(nested(60))).statusCode).toBe(200);
  });

  test('a log append retried with the same id but other text is 409 TW_ID_CONFLICT', async () => {
    const a = await app();
    const send = (text: string) =>
      a.app.inject({
        method: 'POST',
        url: `${RUN}/logs`,
        headers: JSON_TYPE,
        payload: { text, id: 'chunk-1' },
      });
    const first = await send('first\n');
    expect(first.statusCode).toBe(200);
    const retry = await send('first\n');
    expect(retry.json()).toMatchObject({ duplicate: true, seq: first.json<{ seq: number }>().seq });
    const other = await send('other\n');
    expect(other.statusCode).toBe(409);
    expect(errorCode(other)).toBe('TW_ID_CONFLICT');
  });

  test('a producer id like an old internal chunk id ("x#1") is an ordinary id', async () => {
    const a = await app({ maxEventBytes: 1024 });
    const big = `${'a'.repeat(1000)}\n${'b'.repeat(1000)}\n`;
    const one = await a.app.inject({
      method: 'POST',
      url: `${RUN}/logs`,
      headers: JSON_TYPE,
      payload: { text: big, id: 'x' },
    });
    expect(one.json()).toMatchObject({ duplicate: false });
    const two = await a.app.inject({
      method: 'POST',
      url: `${RUN}/events`,
      headers: JSON_TYPE,
      payload: { events: [{ kind: 'k', data: 1, id: 'x#1' }] },
    });
    expect(two.statusCode).toBe(200);
  });

  test('a JSON log body with more than a few values, or a compressed body, is refused before parsing', async () => {
    const a = await app();
    const junk = await a.app.inject({
      method: 'POST',
      url: `${RUN}/logs`,
      headers: JSON_TYPE,
      payload: `{"text":"x","junk":[${'0,'.repeat(100)}0]}`,
    });
    expect(junk.statusCode).toBe(413);
    expect(errorCode(junk)).toBe('TW_BODY_TOO_LARGE');
    const gzip = await a.app.inject({
      method: 'POST',
      url: `${RUN}/logs`,
      headers: { 'content-type': 'text/plain', 'content-encoding': 'gzip' },
      payload: Buffer.from([0x1f, 0x8b, 0x08, 0x00]),
    });
    expect(gzip.statusCode).toBe(415);
    expect(await a.store.getRun('etl.daily', 'r1')).toBeUndefined();
  });

  test('the 1001st event of a batch is refused as it arrives, naming the limit', async () => {
    const a = await app();
    const res = await a.app.inject({
      method: 'POST',
      url: '/api/v1/topics/t/events',
      headers: JSON_TYPE,
      payload: `{"events":[${'{},'.repeat(200_000)}{}]}`,
    });
    expect(res.statusCode).toBe(413);
    expect(res.json()).toMatchObject({
      error: { code: 'TW_BATCH_TOO_LARGE', message: /at most 1000/ },
    });
    expect(res.headers['connection']).toBe('close');
  });
});

describe('SSE reading of the hardened stream', () => {
  test('a filtered read of a kind that matches nothing, on a long stream, is an empty last page, and a stream with that filter opens', async () => {
    const a = await app();
    const events = Array.from({ length: 1000 }, (_, i) => ({ kind: 'k', data: i }));
    for (let i = 0; i < 20; i += 1) await a.ingest.appendEvents(topicKey('long'), events);
    const res = await a.app.inject({
      method: 'GET',
      url: '/api/v1/topics/long/entries?kinds=nomatch&limit=1',
    });
    expect(res.json()).toEqual({ entries: [], next: 0, hasMore: false });
    const stream = await openSse(
      `${await a.listen()}/api/v1/topics/long/stream?tail=3&kinds=nomatch`,
    );
    expect(stream.status).toBe(200);
    stream.close();
  });
});

describe('request bodies held at once', () => {
  test('past maxBodyBytesInFlight a body is 503 TW_SERVER_BUSY, and the budget comes back when bodies are done', async () => {
    const a = await live.start({ maxBodyBytesInFlight: 100_000 });
    const { port } = new URL(a.url);
    // A slow producer sends 80 KB of a 90 KB append, and holds it.
    const slow = net.connect(Number(port), '127.0.0.1');
    await new Promise<void>((resolve) => slow.once('connect', resolve));
    slow.write(
      `POST ${RUN}/logs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\nContent-Length: 90000\r\n\r\n`,
    );
    slow.write(`${'x'.repeat(79_999)}\n`);
    await expect.poll(async () => (await post(a, 30_000)).status).toBe(503);
    const busy = await post(a, 30_000);
    expect(busy.headers.get('retry-after')).toBe('5');
    expect(await busy.json()).toMatchObject({ error: { code: 'TW_SERVER_BUSY' } });
    // A small one still fits beside it.
    expect((await post(a, 10_000)).status).toBe(200);
    // The slow one finishes; its share is given back, and refused bodies kept none.
    const answered = new Promise<string>((resolve) =>
      slow.once('data', (d) => resolve(d.toString())),
    );
    slow.end(`${'y'.repeat(9_999)}\n`);
    expect(await answered).toMatch(/^HTTP\/1\.1 200/);
    for (let i = 0; i < 3; i += 1) expect((await post(a, 60_000)).status).toBe(200);
  });
});

function post(a: TestApp, bytes: number) {
  return fetch(`${a.url}${RUN}/logs`, {
    method: 'POST',
    headers: { 'content-type': 'text/plain' },
    body: `${'z'.repeat(bytes - 1)}\n`,
  });
}
