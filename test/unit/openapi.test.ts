import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { SignJWT } from 'jose';
import { afterEach, describe, expect, test } from 'vitest';
import { isNativeRoute, isPublicOperation, OPENAPI_ROUTE } from '../../src/http/openapi.js';
import { TAILWATER_VERSION } from '../../src/model/version.js';
import { createTestApp } from '../helpers/app.js';
import type { TestApp } from '../helpers/app.js';

// The OpenAPI document (docs/API.md, "OpenAPI"): valid OpenAPI 3.1, generated from the routes'
// own schemas, covering every native route the app registers; and the native routes' real
// answers, a stream's frames included, match what it says of them.

interface Operation {
  parameters?: { name: string; in: string }[];
  requestBody?: { content: Record<string, { schema: object }> };
  responses: Record<string, { description: string; content?: Record<string, { schema: object }> }>;
  security?: Record<string, string[]>[];
}
interface Document {
  openapi: string;
  info: { title: string; version: string };
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, object>; securitySchemes: Record<string, object> };
}

const SECRET = 'a-test-secret-of-more-than-thirty-two-bytes';
const FQN = 'etl.daily';
const RUN = `/api/v1/pipelines/${FQN}/runs`;
const RUN_ROUTE = '/api/v1/pipelines/{fqn}/runs/{runId}';

const apps: TestApp[] = [];
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close();
});

async function start(overrides: Record<string, unknown> = {}): Promise<TestApp> {
  const t = await createTestApp({ finishGraceSeconds: 0.1, maxStreamSeconds: 5, ...overrides });
  apps.push(t);
  return t;
}

async function documentOf(t: TestApp): Promise<Document> {
  const res = await t.app.inject({ method: 'GET', url: OPENAPI_ROUTE });
  expect(res.statusCode).toBe(200);
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  return res.json() as Document;
}

/**
 * Every route the app registers, from its own router (`printRoutes` draws a tree of path
 * pieces, four columns a level): so a route added without a schema is found missing.
 */
function registeredRoutes(t: TestApp): { method: string; url: string }[] {
  const routes: { method: string; url: string }[] = [];
  const stack: string[] = [];
  for (const line of t.app.printRoutes({ commonPrefix: false }).split('\n')) {
    const match = /^([ │]*)[└├]── (.*?)(?: \(([A-Z, ]+)\))?$/.exec(line);
    if (!match) continue;
    const depth = match[1]!.length / 4;
    stack.length = depth;
    // A wildcard is drawn under its prefix without the slash before it (`ui` then `*`).
    const piece = match[2]! === '*' && !stack.join('').endsWith('/') ? '/*' : match[2]!;
    stack.push(piece);
    const url = stack.join('');
    for (const method of (match[3] ?? '').split(', ').filter(Boolean)) {
      if (method !== 'HEAD') routes.push({ method, url });
    }
  }
  return routes;
}

/** Fastify's `/:name` as OpenAPI's `/{name}`. */
const template = (url: string) => url.replace(/:([A-Za-z]+)/g, '{$1}');

const ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: true });

/** Validates `value` against a schema of the document (its `$ref`s resolved in it). */
function expectMatches(doc: Document, schema: object, value: unknown, what: string): void {
  const validate = ajv.compile({ ...schema, components: doc.components });
  const valid = validate(value);
  expect(valid, `${what}: ${ajv.errorsText(validate.errors)}\n${JSON.stringify(value)}`).toBe(true);
}

/** Checks real answers against the document, and counts which operations were seen. */
function checker(doc: Document) {
  const seen = new Set<string>();
  return {
    seen,
    check(route: string, method: string, res: LightMyRequestResponse): void {
      const what = `${method} ${route} → ${res.statusCode}`;
      const operation = doc.paths[route]?.[method.toLowerCase()];
      expect(operation, `${method} ${route} is documented`).toBeDefined();
      const response = operation!.responses[String(res.statusCode)];
      expect(response, `${what} is documented`).toBeDefined();
      seen.add(`${method} ${route}`);
      if (response!.content === undefined) {
        expect(res.body, what).toBe('');
        return;
      }
      const type = String(res.headers['content-type']).split(';')[0]!.trim();
      const media = response!.content[type];
      expect(media, `${what}: ${type} is documented`).toBeDefined();
      if (type === 'application/json') expectMatches(doc, media!.schema, res.json(), what);
      else expectMatches(doc, media!.schema, res.body, what);
    },
  };
}

describe('the OpenAPI document', () => {
  test('is a valid OpenAPI 3.1 document of Tailwater', async () => {
    const doc = await documentOf(await start());
    const validator = new Validator();
    const result = await validator.validate(doc as never);
    expect(result.errors ?? [], JSON.stringify(result.errors, null, 2)).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.1');
    expect(doc.info).toMatchObject({ title: 'Tailwater', version: TAILWATER_VERSION });
    // Every component schema compiles as JSON Schema 2020-12, as 3.1 says.
    for (const name of Object.keys(doc.components.schemas)) {
      expect(() =>
        ajv.compile({ $ref: `#/components/schemas/${name}`, components: doc.components }),
      ).not.toThrow();
    }
  });

  test('covers every native route the app registers, and no other', async () => {
    const t = await start();
    const doc = await documentOf(t);
    const routes = registeredRoutes(t);
    const native = routes.filter(({ url }) => isNativeRoute(url));
    // The tree was read: the dialects are there, and so are the native routes.
    expect(routes.some(({ url }) => url.startsWith('/compat/'))).toBe(true);
    expect(native.length).toBeGreaterThan(20);
    const documented = Object.entries(doc.paths).flatMap(([url, operations]) =>
      Object.keys(operations).map((method) => `${method.toUpperCase()} ${url}`),
    );
    expect(documented.sort()).toEqual(
      native.map(({ method, url }) => `${method} ${template(url)}`).sort(),
    );
  });

  test('gives every operation its answers: a success, and errors in the shared Error shape', async () => {
    const doc = await documentOf(await start());
    for (const [url, operations] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(operations)) {
        const statuses = Object.keys(operation.responses);
        expect(
          statuses.some((status) => /^2/.test(status)),
          `${method} ${url}`,
        ).toBe(true);
        for (const status of statuses.filter((code) => /^[45]/.test(code))) {
          // /readyz says why it is not ready in a shape of its own.
          const shape = url === '/readyz' && status === '503' ? 'Unready' : 'Error';
          expect(operation.responses[status]!.content?.['application/json']?.schema).toEqual({
            $ref: `#/components/schemas/${shape}`,
          });
        }
      }
    }
    const stream = doc.paths[`${RUN_ROUTE}/stream`]!.get!;
    expect(Object.keys(stream.responses['200']!.content!)).toEqual(['text/event-stream']);
    expect(stream.responses['200']!.content!['text/event-stream']!.schema).toEqual({
      $ref: '#/components/schemas/StreamFrame',
    });
    for (const name of ['EntryFrame', 'CursorFrame', 'GapFrame', 'EndFrame', 'ErrorFrame']) {
      expect(doc.components.schemas[name], name).toBeDefined();
    }
    expect(Object.keys(doc.paths[`${RUN_ROUTE}/logs`]!.post!.requestBody!.content).sort()).toEqual([
      'application/json',
      'text/plain',
    ]);
    // Without authentication nothing needs a token.
    const secured = Object.values(doc.paths).flatMap((ops) =>
      Object.values(ops).filter((op) => op.security !== undefined),
    );
    expect(secured).toEqual([]);
  });

  test("the native routes' real answers match it", async () => {
    const t = await start({ maxEventBytes: 1024 });
    const doc = await documentOf(t);
    const { check, seen } = checker(doc);
    const call = async (route: string, options: InjectOptions, status: number) => {
      const res = await t.app.inject(options);
      expect(res.statusCode, `${options.method} ${options.url}: ${res.body}`).toBe(status);
      check(route, String(options.method), res);
      return res;
    };
    const json = { 'content-type': 'application/json' };
    const text = { 'content-type': 'text/plain; charset=utf-8' };

    // Runs.
    await call(RUN_ROUTE, { method: 'PUT', url: `${RUN}/r1`, payload: { status: 'running' } }, 200);
    await call(
      RUN_ROUTE,
      {
        method: 'PUT',
        url: `${RUN}/r2`,
        payload: { status: 'queued', meta: { sha: 'abc', n: 1 } },
      },
      200,
    );
    await call(RUN_ROUTE, { method: 'PUT', url: `${RUN}/r1`, payload: { status: 'nope' } }, 400);
    await call(
      RUN_ROUTE,
      {
        method: 'PUT',
        url: `${RUN}/r2`,
        payload: { status: 'queued', meta: { big: 'x'.repeat(2048) } },
      },
      413,
    );
    await call(
      RUN_ROUTE,
      { method: 'PUT', url: `${RUN}/r1`, headers: json, payload: '{"status": "running"' },
      400,
    );
    await call(RUN_ROUTE, { method: 'PUT', url: `${RUN}/r1`, headers: text, payload: 'x' }, 415);
    await call(RUN_ROUTE, { method: 'GET', url: `${RUN}/r1` }, 200);
    await call(RUN_ROUTE, { method: 'GET', url: `${RUN}/latest` }, 200);
    await call(RUN_ROUTE, { method: 'GET', url: `${RUN}/unknown` }, 404);
    await call(RUN_ROUTE, { method: 'GET', url: `${RUN}/%01` }, 400);
    await call('/api/v1/pipelines/{fqn}/runs', { method: 'GET', url: RUN }, 200);
    await call('/api/v1/pipelines/{fqn}/runs', { method: 'GET', url: `${RUN}?status=bogus` }, 400);
    await call('/api/v1/pipelines', { method: 'GET', url: '/api/v1/pipelines?limit=1' }, 200);
    await call('/api/v1/pipelines', { method: 'GET', url: '/api/v1/pipelines?after=' }, 400);
    await call('/api/v1/pipelines', { method: 'GET', url: '/api/v1/pipelines?limit=0' }, 400);

    // Appends, with data a double cannot hold, kept as sent.
    await call(
      `${RUN_ROUTE}/logs`,
      { method: 'POST', url: `${RUN}/r1/logs`, headers: text, payload: 'line 1\nline 2\n' },
      200,
    );
    await call(
      `${RUN_ROUTE}/logs`,
      {
        method: 'POST',
        url: `${RUN}/r1/logs`,
        payload: { text: 'OutOfMemoryError here\n', step: 'train', id: 'p-1' },
      },
      200,
    );
    await call(
      `${RUN_ROUTE}/logs`,
      { method: 'POST', url: `${RUN}/r1/logs`, headers: json, payload: '{"text": 1}' },
      400,
    );
    const events =
      '{"events":[{"kind":"progress","data":{"pct":50,"id":12345678901234567890}},{"kind":"metric","data":[1.50,1e400],"step":"train","correlationId":"c-1","id":"e-1"}]}';
    await call(
      `${RUN_ROUTE}/events`,
      { method: 'POST', url: `${RUN}/r1/events`, headers: json, payload: events },
      200,
    );
    await call(
      `${RUN_ROUTE}/events`,
      { method: 'POST', url: `${RUN}/r1/events`, payload: { events: [{ kind: 7 }] } },
      400,
    );
    await call(
      `${RUN_ROUTE}/events`,
      {
        method: 'POST',
        url: `${RUN}/r1/events`,
        payload: { events: [{ kind: 'metric', data: 2, id: 'e-1' }] },
      },
      409,
    );
    await call(
      '/api/v1/topics/{topic}/events',
      {
        method: 'POST',
        url: '/api/v1/topics/iceberg/events',
        payload: { events: [{ kind: 'commit', data: { snapshotId: 1 } }] },
      },
      200,
    );
    await call(
      '/api/v1/topics/{topic}/events',
      { method: 'POST', url: '/api/v1/topics/_runs/events', payload: { events: [] } },
      400,
    );

    // Reads.
    const page = await call(
      `${RUN_ROUTE}/entries`,
      { method: 'GET', url: `${RUN}/r1/entries` },
      200,
    );
    expect(page.body).toContain('12345678901234567890');
    await call(`${RUN_ROUTE}/entries`, { method: 'GET', url: `${RUN}/r1/entries?after=x` }, 400);
    await call(`${RUN_ROUTE}/entries`, { method: 'GET', url: `${RUN}/nope/entries` }, 404);
    await call(
      '/api/v1/topics/{topic}/entries',
      { method: 'GET', url: '/api/v1/topics/iceberg/entries?limit=5&kinds=commit' },
      200,
    );
    await call(
      '/api/v1/topics/{topic}/entries',
      { method: 'GET', url: '/api/v1/topics/_runs/entries' },
      200,
    );
    await call(
      `${RUN_ROUTE}/log`,
      { method: 'GET', url: `${RUN}/r1/log?offset=-1&limit=100` },
      200,
    );
    await call(`${RUN_ROUTE}/log`, { method: 'GET', url: `${RUN}/r1/log?limit=abc` }, 400);
    await call(`${RUN_ROUTE}/log.txt`, { method: 'GET', url: `${RUN}/r1/log.txt` }, 200);
    await call(`${RUN_ROUTE}/log.txt`, { method: 'GET', url: `${RUN}/nope/log.txt` }, 404);
    const ranged = (range: string) => ({
      method: 'GET' as const,
      url: `${RUN}/r1/log.txt`,
      headers: { range },
    });
    await call(`${RUN_ROUTE}/log.txt`, ranged('bytes=0-3'), 206);
    await call(`${RUN_ROUTE}/log.txt`, ranged('bytes=999999-'), 416);
    await call('/api/v1/topics', { method: 'GET', url: '/api/v1/topics' }, 200);
    await call('/api/v1/stats', { method: 'GET', url: '/api/v1/stats' }, 200);
    await call('/api/v1/search', { method: 'GET', url: '/api/v1/search?q=OutOfMemory' }, 200);
    await call('/api/v1/search', { method: 'GET', url: '/api/v1/search?q=Out&kind=x' }, 400);
    await call('/api/v1/search', { method: 'GET', url: '/api/v1/search' }, 400);

    // Streams refused before they open are JSON errors like any other.
    await call(`${RUN_ROUTE}/stream`, { method: 'GET', url: `${RUN}/r1/stream?after=x` }, 400);
    await call(
      `${RUN_ROUTE}/stream`,
      { method: 'GET', url: '/api/v1/pipelines/none.yet/runs/latest/stream' },
      404,
    );
    await call(
      '/api/v1/topics/{topic}/stream',
      { method: 'GET', url: '/api/v1/topics/iceberg/stream?tail=-1' },
      400,
    );
    await call('/api/v1/runs/stream', { method: 'GET', url: '/api/v1/runs/stream?from=x' }, 400);

    // Cancel, conflicts, delete.
    await call(`${RUN_ROUTE}/cancel`, { method: 'POST', url: `${RUN}/r1/cancel` }, 202);
    await call(
      RUN_ROUTE,
      { method: 'PUT', url: `${RUN}/r1`, payload: { status: 'cancelled' } },
      200,
    );
    await call(RUN_ROUTE, { method: 'PUT', url: `${RUN}/r1`, payload: { status: 'running' } }, 409);
    await call(`${RUN_ROUTE}/cancel`, { method: 'POST', url: `${RUN}/r1/cancel` }, 409);
    await call(`${RUN_ROUTE}/cancel`, { method: 'POST', url: `${RUN}/nope/cancel` }, 404);
    await call(RUN_ROUTE, { method: 'DELETE', url: `${RUN}/r2` }, 204);

    // Health, metrics, session, and the document itself.
    await call('/healthz', { method: 'GET', url: '/healthz' }, 200);
    await call('/readyz', { method: 'GET', url: '/readyz' }, 200);
    await call('/metrics', { method: 'GET', url: '/metrics' }, 200);
    await call('/api/v1/session', { method: 'GET', url: '/api/v1/session' }, 200);
    await call(
      '/api/v1/session',
      { method: 'POST', url: '/api/v1/session', payload: { token: 'x' } },
      404,
    );
    await call('/api/v1/session', { method: 'DELETE', url: '/api/v1/session' }, 204);
    await call(OPENAPI_ROUTE, { method: 'GET', url: OPENAPI_ROUTE }, 200);

    // Every operation was seen answering.
    const operations = Object.entries(doc.paths).flatMap(([url, ops]) =>
      Object.keys(ops).map((method) => `${method.toUpperCase()} ${url}`),
    );
    expect([...seen].sort()).toEqual(operations.sort());
  });

  test("a stream's frames match the frame schemas", async () => {
    const t = await start();
    const doc = await documentOf(t);
    await t.listen();
    await t.app.inject({ method: 'PUT', url: `${RUN}/r1`, payload: { status: 'running' } });
    await t.app.inject({
      method: 'POST',
      url: `${RUN}/r1/logs`,
      headers: { 'content-type': 'text/plain' },
      payload: 'line 1\r\nline 2\n',
    });
    await t.app.inject({
      method: 'POST',
      url: `${RUN}/r1/events`,
      headers: { 'content-type': 'application/json' },
      payload:
        '{"events":[{"kind":"progress","data":{"big":12345678901234567890}},{"kind":"other"}]}',
    });
    await t.app.inject({ method: 'PUT', url: `${RUN}/r1`, payload: { status: 'success' } });

    const frameSchema =
      doc.paths[`${RUN_ROUTE}/stream`]!.get!.responses['200']!.content!['text/event-stream']!
        .schema;
    const framesOf = async (url: string, headers: Record<string, string> = {}) => {
      const res = await fetch(`${t.url}${url}`, { headers });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
      // The run has finished: the stream ends (`end runFinished`) and the server closes it.
      const body = await res.text();
      return body
        .split('\n\n')
        .filter((block) => block !== '' && !block.startsWith(':'))
        .map((block) => {
          const frame: Record<string, unknown> = {};
          const data: string[] = [];
          for (const line of block.split('\n')) {
            const [field, ...rest] = line.split(': ');
            const value = rest.join(': ');
            if (field === 'data') data.push(value);
            else if (field === 'retry') frame['retry'] = Number(value);
            else frame[field!] = value;
          }
          if (data.length > 0) frame['data'] = JSON.parse(data.join('\n'));
          return frame;
        });
    };

    const frames = await framesOf(`${RUN}/r1/stream`);
    expect(frames.map((frame) => frame['event'] ?? 'retry')).toEqual([
      'retry',
      'status',
      'log',
      'progress',
      'other',
      'status',
      'end',
    ]);
    // A cursor the server cannot place: `gap reset`, then the stream from its start.
    const moved = await framesOf(`${RUN}/r1/stream?kinds=other`, {
      'last-event-id': '1718000000000-0',
    });
    expect(moved.map((frame) => frame['event'] ?? 'retry')).toEqual([
      'retry',
      'gap',
      'other',
      'cursor',
      'end',
    ]);
    for (const frame of [...frames, ...moved]) {
      expectMatches(doc, frameSchema, frame, `frame ${JSON.stringify(frame)}`);
    }
    // Each frame matches the schema of its own kind, not just any of them.
    const byEvent = (event: string) => ({ $ref: `#/components/schemas/${event}Frame` });
    expectMatches(doc, byEvent('Retry'), frames[0], 'retry frame');
    expectMatches(doc, byEvent('Entry'), frames[1], 'status frame');
    expectMatches(doc, byEvent('Entry'), frames[2], 'log frame');
    expectMatches(doc, byEvent('End'), frames[6], 'end frame');
    expect(frames[6]!['data']).toMatchObject({ reason: 'runFinished', status: 'success' });
    expectMatches(doc, byEvent('Gap'), moved[1], 'gap frame');
    expectMatches(doc, byEvent('Cursor'), moved[3], 'cursor frame');
    // A frame of one kind does not pass for another.
    expect(ajv.validate({ ...byEvent('End'), components: doc.components }, moved[1])).toBe(false);
    expect(ajv.validate({ ...byEvent('Entry'), components: doc.components }, moved[3])).toBe(false);
  });

  test('with authentication on: the routes that need a token say so, and the rest are public', async () => {
    const t = await start({ authSecret: SECRET });
    const res = await t.app.inject({ method: 'GET', url: OPENAPI_ROUTE });
    // The document reveals no data: it is public, like /healthz.
    expect(res.statusCode).toBe(200);
    const doc = res.json() as Document;
    const { check } = checker(doc);
    const token = await new SignJWT({ tailwater: { read: ['*'], write: ['*'], admin: false } })
      .setProtectedHeader({ alg: 'HS256' })
      .setIssuedAt()
      .setExpirationTime('1h')
      .sign(new TextEncoder().encode(SECRET));
    for (const [url, operations] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(operations)) {
        const open = isPublicOperation(method, url);
        expect(operation.security === undefined, `${method} ${url}`).toBe(open);
        if (!open) {
          expect(operation.security).toContainEqual({ bearerAuth: [] });
          expect(operation.responses['401'], `${method} ${url}`).toBeDefined();
        }
      }
    }
    expect(doc.components.securitySchemes['bearerAuth']).toMatchObject({
      type: 'http',
      scheme: 'bearer',
      bearerFormat: 'JWT',
    });
    // A token is refused as documented; with one, the answer matches too.
    const url = `${RUN}/r1`;
    check(RUN_ROUTE, 'GET', await t.app.inject({ method: 'GET', url }));
    check(
      RUN_ROUTE,
      'GET',
      await t.app.inject({ method: 'GET', url, headers: { authorization: 'Basic x' } }),
    );
    const signedIn = await t.app.inject({
      method: 'GET',
      url: '/api/v1/session',
      headers: { authorization: `Bearer ${token}` },
    });
    expect(signedIn.statusCode).toBe(200);
    check('/api/v1/session', 'GET', signedIn);
    const forbidden = await t.app.inject({
      method: 'DELETE',
      url,
      headers: { authorization: `Bearer ${token}` },
    });
    expect(forbidden.statusCode).toBe(403);
    check(RUN_ROUTE, 'DELETE', forbidden);
    expect((await t.app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
  });
});
