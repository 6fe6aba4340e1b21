import { request as httpRequest } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SignJWT, exportJWK, exportSPKI, generateKeyPair } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runPath } from '../helpers/api.js';
import { startServerProcess } from '../helpers/server-process.js';
import type { ServerProcess } from '../helpers/server-process.js';
import { closedWithin, endOf, entryEvents, hasSeq, openSse, seqs } from '../helpers/sse.js';
import type { SseEvent, SseReader } from '../helpers/sse.js';
import { sleep } from '../helpers/wait.js';

// Authentication and scopes against real `tailwater serve` processes (dist/: `npm run build`
// first), route family by route family: docs/SECURITY.md ("Tokens and scopes", "Who may do
// what", "What is logged") and docs/API.md (the opening paragraphs, the error codes, the
// streaming `end` reasons and each dialect's own words).

const SECRET = 'an-auth-matrix-e2e-secret-of-more-than-thirty-two-bytes';
const HS_KEY = new TextEncoder().encode(SECRET);
const AUDIENCE = 'tailwater-e2e';
const ISSUER = 'https://issuer.e2e.test';
const REALM = 'Bearer realm="tailwater"';
/** The fixed token that may read /metrics and nothing else (docs/SECURITY.md). */
const METRICS_TOKEN = 'a-fixed-metrics-token-for-prometheus';

type SigningKey = Parameters<SignJWT['sign']>[0];
type PrivateKey = Awaited<ReturnType<typeof generateKeyPair>>['privateKey'];

interface Claim {
  read?: string[];
  write?: string[];
  admin?: boolean;
}

interface MintOptions {
  key?: SigningKey;
  alg?: string;
  kid?: string;
  /** exp, in seconds since the epoch; default an hour from now. */
  exp?: number;
  nbf?: number;
  aud?: string;
  iss?: string;
  sub?: string;
}

const nowSeconds = () => Math.floor(Date.now() / 1000);

/** A JWT with the `tailwater` claim (docs/SECURITY.md, "Tokens and scopes"). */
function mint(claim: Claim, options: MintOptions = {}): Promise<string> {
  let jwt = new SignJWT({ tailwater: claim })
    .setProtectedHeader({
      alg: options.alg ?? 'HS256',
      typ: 'JWT',
      ...(options.kid ? { kid: options.kid } : {}),
    })
    .setIssuedAt()
    .setExpirationTime(options.exp ?? nowSeconds() + 3600);
  if (options.nbf !== undefined) jwt = jwt.setNotBefore(options.nbf);
  if (options.aud !== undefined) jwt = jwt.setAudience(options.aud);
  if (options.iss !== undefined) jwt = jwt.setIssuer(options.iss);
  if (options.sub !== undefined) jwt = jwt.setSubject(options.sub);
  return jwt.sign(options.key ?? HS_KEY);
}

const b64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

// ---------------------------------------------------------------------------------------------
// Servers: one per describe block, each in its own data directory.

interface Served {
  server: ServerProcess;
  dir: string;
}

async function serve(env: Record<string, string>, args: string[] = []): Promise<Served> {
  const dir = mkdtempSync(join(tmpdir(), 'tailwater-auth-matrix-'));
  try {
    const server = await startServerProcess(['--data', dir, ...args], env);
    return { server, dir };
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
}

async function stop(served: Served | undefined): Promise<void> {
  if (!served) return;
  await served.server.stop('SIGKILL');
  rmSync(served.dir, { recursive: true, force: true });
}

/** A write as a producer makes it; fails the test unless it is a 2xx. */
async function write(
  server: ServerProcess,
  token: string,
  method: string,
  path: string,
  body: unknown,
  type = 'application/json',
): Promise<void> {
  const response = await fetch(`${server.url}${path}`, {
    method,
    headers: { ...bearer(token), 'content-type': type },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  expect(response.status, `${method} ${path}: ${await response.text()}`).toBeLessThan(300);
}

const setStatus = (
  server: ServerProcess,
  token: string,
  fqn: string,
  runId: string,
  status = 'running',
) => write(server, token, 'PUT', runPath(fqn, runId), { status });
const appendLog = (
  server: ServerProcess,
  token: string,
  fqn: string,
  runId: string,
  text: string,
) => write(server, token, 'POST', `${runPath(fqn, runId)}/logs`, text, 'text/plain; charset=utf-8');
const appendTopic = (server: ServerProcess, token: string, topic: string, events: unknown[]) =>
  write(server, token, 'POST', `/api/v1/topics/${topic}/events`, { events });

// ---------------------------------------------------------------------------------------------
// The route families, one row each (docs/SECURITY.md, "Who may do what").

type Need = 'read' | 'write' | 'admin' | 'listing';

interface Row {
  name: string;
  method: 'GET' | 'POST' | 'PUT';
  path: string;
  need: Need;
  body?: string;
  type?: string;
  stream?: boolean;
}

const PIPELINE = 'etl.daily';
const RUN = runPath(PIPELINE, 'r1');
const CANCEL_RUN = runPath(PIPELINE, 'c1');
const TOPIC = 'alerts';
const OM = '/compat/openmetadata/api/v1/services/ingestionPipelines/logs';
const ZENML = '/compat/zenml/api/v1/runs';
const FREIGHT = '/compat/freight/api/0';
const JSON_TYPE = 'application/json';

const get = (name: string, path: string, need: Need, stream = false): Row => ({
  name,
  method: 'GET',
  path,
  need,
  stream,
});

const ROWS: readonly Row[] = [
  get('native GET run', RUN, 'read'),
  get('native runs of a pipeline', `/api/v1/pipelines/${PIPELINE}/runs`, 'read'),
  get('native entries', `${RUN}/entries`, 'read'),
  get('native log', `${RUN}/log`, 'read'),
  get('native log.txt', `${RUN}/log.txt`, 'read'),
  get('native run stream', `${RUN}/stream`, 'read', true),
  get('topic entries', `/api/v1/topics/${TOPIC}/entries`, 'read'),
  get('topic stream', `/api/v1/topics/${TOPIC}/stream`, 'read', true),
  get('runs feed', '/api/v1/runs/stream', 'listing', true),
  get('pipelines listing', '/api/v1/pipelines', 'listing'),
  get('topics listing', '/api/v1/topics', 'listing'),
  get('session', '/api/v1/session', 'listing'),
  get('search', '/api/v1/search?q=first', 'listing'),
  get('pipeline stats', '/api/v1/stats', 'listing'),
  {
    name: 'POST logs',
    method: 'POST',
    path: `${RUN}/logs`,
    need: 'write',
    body: 'a line\n',
    type: 'text/plain; charset=utf-8',
  },
  {
    name: 'POST run events',
    method: 'POST',
    path: `${RUN}/events`,
    need: 'write',
    body: JSON.stringify({ events: [{ kind: 'step', data: { n: 1 } }] }),
    type: JSON_TYPE,
  },
  {
    name: 'POST topic events',
    method: 'POST',
    path: `/api/v1/topics/${TOPIC}/events`,
    need: 'write',
    body: JSON.stringify({ events: [{ kind: 'alert', data: { level: 'info' } }] }),
    type: JSON_TYPE,
  },
  {
    name: 'PUT run status',
    method: 'PUT',
    path: RUN,
    need: 'write',
    body: JSON.stringify({ status: 'running' }),
    type: JSON_TYPE,
  },
  { name: 'POST cancel', method: 'POST', path: `${CANCEL_RUN}/cancel`, need: 'write' },
  get('OpenMetadata stream', `${OM}/${PIPELINE}/stream/r1`, 'read', true),
  get('OpenMetadata last', `${OM}/${PIPELINE}/last`, 'read'),
  get('OpenMetadata download', `${OM}/${PIPELINE}/last/download`, 'read'),
  {
    name: 'ZenML publish',
    method: 'POST',
    path: `${ZENML}/z1/events`,
    need: 'write',
    body: JSON.stringify({ events: [{ pipeline_run_id: 'z1', kind: 'step', payload: { n: 1 } }] }),
    type: JSON_TYPE,
  },
  get('ZenML stream', `${ZENML}/z1/events/stream`, 'read', true),
  get('Freight config', `${FREIGHT}/config/`, 'listing'),
  get('Freight apps', `${FREIGHT}/apps/`, 'listing'),
  // Freight's deploy {app}/{env}/{number} is the run {number} of the pipeline {app}.{env}.
  get('Freight deploy', `${FREIGHT}/deploys/etl/daily/7/`, 'read'),
  get('Freight deploy log', `${FREIGHT}/deploys/etl/daily/7/log/`, 'read'),
  {
    name: 'Freight cancel',
    method: 'PUT',
    path: `${FREIGHT}/deploys/etl/daily/7/`,
    need: 'write',
    body: JSON.stringify({ status: 'cancelled' }),
    type: JSON_TYPE,
  },
  get('Iceberg stream', '/compat/iceberg/events', 'read', true),
  get('metrics', '/metrics', 'admin'),
];

/** Everything the rows need to exist, written with an admin token. */
async function seed(server: ServerProcess, admin: string): Promise<void> {
  await setStatus(server, admin, PIPELINE, 'r1');
  await appendLog(server, admin, PIPELINE, 'r1', 'first line\n');
  await setStatus(server, admin, PIPELINE, 'c1');
  await setStatus(server, admin, PIPELINE, 'z1');
  await setStatus(server, admin, PIPELINE, '7');
  await appendTopic(server, admin, TOPIC, [{ kind: 'alert', data: { level: 'warn' } }]);
  await appendTopic(server, admin, 'iceberg', [
    { kind: 'iceberg-mutation', id: 'seed-1', data: { table: 't' } },
  ]);
}

interface Answer {
  status: number;
  type: string;
  headers: Headers;
  /** The body, or for an event stream its first chunk. */
  text: string;
}

/** Sends a row's request; an event stream is read to its first chunk, then closed. */
async function call(
  server: ServerProcess,
  row: Row,
  headers: Record<string, string>,
): Promise<Answer> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), 5000);
  try {
    const response = await fetch(`${server.url}${row.path}`, {
      method: row.method,
      headers: { ...(row.type ? { 'content-type': row.type } : {}), ...headers },
      ...(row.body !== undefined ? { body: row.body } : {}),
      signal: controller.signal,
    });
    const type = response.headers.get('content-type') ?? '';
    let text = '';
    if (type.startsWith('text/event-stream')) {
      const reader = response.body!.getReader();
      const first = await reader.read();
      if (first.value) text = new TextDecoder().decode(first.value);
      controller.abort();
    } else {
      text = await response.text();
    }
    return { status: response.status, type, headers: response.headers, text };
  } catch (error) {
    throw new Error(`${row.name} (${row.method} ${row.path}): ${String(error)}`, { cause: error });
  } finally {
    clearTimeout(timer);
  }
}

/** The Tailwater code of an error body, in whichever dialect's shape it came. */
function codeOf(text: string): string {
  try {
    const body = JSON.parse(text) as { error?: unknown; code?: unknown };
    // Native, OpenMetadata and ZenML: {"error": {"code"}}; Freight: {"error": "…", "code"}.
    if (typeof body.error === 'object' && body.error !== null) {
      return String((body.error as { code?: unknown }).code);
    }
    return String(body.code);
  } catch {
    return `not JSON: ${text.slice(0, 60)}`;
  }
}

/**
 * An answer in a few words, so that one toEqual over every route names each one that differs:
 * `2xx`, `stream` (200, text/event-stream, a first frame that is not an error), or the status
 * and code of a refusal, with what is wrong with it (not JSON, no WWW-Authenticate on a 401).
 */
function summary(answer: Answer): string {
  if (answer.status >= 200 && answer.status < 300) {
    if (!answer.type.startsWith('text/event-stream')) return '2xx';
    if (answer.status !== 200) return `stream with status ${answer.status}`;
    if (answer.text === '') return 'stream that sent nothing';
    if (/^event: error$|"eventType":"error"/m.test(answer.text)) {
      return `stream that refused: ${answer.text}`;
    }
    return 'stream';
  }
  const notes: string[] = [];
  if (!answer.type.startsWith('application/json')) notes.push(`content-type ${answer.type}`);
  const challenge = answer.headers.get('www-authenticate');
  if (answer.status === 401 && challenge !== REALM) notes.push(`WWW-Authenticate ${challenge}`);
  return [`${answer.status} ${codeOf(answer.text)}`, ...notes].join(' ');
}

async function outcomes(
  server: ServerProcess,
  rows: readonly Row[],
  headers: Record<string, string>,
): Promise<Record<string, string>> {
  const result: Record<string, string> = {};
  for (const row of rows) result[row.name] = summary(await call(server, row, headers));
  return result;
}

const success = (row: Row) => (row.stream ? 'stream' : '2xx');

/** The outcome every row should have: success where `allowed` holds, else `refusal`. */
function expected(
  rows: readonly Row[],
  allowed: (row: Row) => boolean,
  refusal: string,
): Record<string, string> {
  return Object.fromEntries(rows.map((row) => [row.name, allowed(row) ? success(row) : refusal]));
}

const UNAUTHENTICATED = '401 TW_UNAUTHENTICATED';
const FORBIDDEN = '403 TW_FORBIDDEN';

// ---------------------------------------------------------------------------------------------
// 5 (first half). Failed authentications, limited per address (docs/SECURITY.md): this server
// is started first so that the one-minute window it locks an address for passes while the
// other blocks run; the last block checks that the address may try again afterwards.

let limited: Served | undefined;
/** When the locked-out address may try again (ms since the epoch), as Retry-After said. */
let unlockedAt: number | undefined;

afterAll(() => stop(limited));

/** A GET from a chosen loopback source address (another client, to the per-address limits). */
function getFrom(
  localAddress: string,
  url: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { localAddress, headers, timeout: 5000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${url} from ${localAddress} timed out`)));
    req.on('error', reject);
    req.end();
  });
}

describe('failed authentications from one address, past authFailuresPerMinute', () => {
  beforeAll(async () => {
    limited = await serve({
      TAILWATER_AUTH_SECRET: SECRET,
      TAILWATER_AUTH_FAILURES_PER_MINUTE: '5',
      TAILWATER_METRICS_TOKEN: METRICS_TOKEN,
    });
  });

  it('are 429 TW_TOO_MANY_AUTH_FAILURES with Retry-After for the rest of the minute, whatever is sent; requests without a token are not counted', async () => {
    const { server } = limited!;
    const good = await mint({ read: ['pipeline:etl.*'] });
    const bad = await mint({ admin: true }, { key: new TextEncoder().encode(`${SECRET}-other`) });
    const pipelines = `${server.url}/api/v1/pipelines`;

    // Twenty requests without a token: each a 401, none counted.
    for (let n = 0; n < 20; n += 1) {
      const response = await fetch(pipelines);
      expect(response.status, `request ${n + 1} without a token`).toBe(401);
      await response.body?.cancel();
    }
    expect((await fetch(pipelines, { headers: bearer(good) })).status).toBe(200);
    const metrics = `${server.url}/metrics`;
    expect((await fetch(metrics, { headers: bearer(METRICS_TOKEN) })).status).toBe(200);

    // Five tokens that do not verify are answered 401; the sixth request is refused unread.
    const statuses: number[] = [];
    let refusal: Response | undefined;
    const firstFailureAt = Date.now();
    for (let n = 0; n < 6; n += 1) {
      const response = await fetch(pipelines, { headers: bearer(bad) });
      statuses.push(response.status);
      if (response.status === 429) refusal = response;
      else await response.body?.cancel();
    }
    expect(statuses).toEqual([401, 401, 401, 401, 401, 429]);
    expect(await refusal!.json()).toMatchObject({ error: { code: 'TW_TOO_MANY_AUTH_FAILURES' } });
    const retryAfter = Number(refusal!.headers.get('retry-after'));
    expect(Number.isInteger(retryAfter)).toBe(true);
    // The window is the minute that began with the first failure, a moment ago.
    const sinceFirst = Math.ceil((Date.now() - firstFailureAt) / 1000);
    expect(retryAfter).toBeGreaterThanOrEqual(60 - sinceFirst);
    expect(retryAfter).toBeLessThanOrEqual(60);
    unlockedAt = Date.now() + retryAfter * 1000;

    // Whatever the address sends now: a good token, no token, a token in the query.
    for (const [what, init, url] of [
      ['a good token', { headers: bearer(good) }, pipelines],
      ['no token', {}, pipelines],
      ['a good token in the query', {}, `${server.url}/api/v1/runs/stream?access_token=${good}`],
    ] as const) {
      const response = await fetch(url, init);
      expect(response.status, what).toBe(429);
      expect(response.headers.get('content-type')).toMatch(/^application\/json/);
      expect(Number(response.headers.get('retry-after')), what).toBeGreaterThan(0);
      expect(await response.json()).toMatchObject({
        error: { code: 'TW_TOO_MANY_AUTH_FAILURES' },
      });
    }
    // The window is fixed: the requests it refuses do not lengthen it.
    const refusedAt = Date.now();
    await sleep(1200);
    const later = await fetch(pipelines, { headers: bearer(bad) });
    expect(later.status).toBe(429);
    await later.body?.cancel();
    const retryLater = Number(later.headers.get('retry-after'));
    expect(retryLater).toBeLessThanOrEqual(retryAfter - 1);
    expect(retryLater).toBeGreaterThanOrEqual(
      retryAfter - Math.ceil((Date.now() - refusedAt) / 1000) - 1,
    );
    // Public routes need no token, so they are not refused.
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
    // Another address (127.0.0.2 is loopback too) is not held to this one's failures.
    const other = await getFrom('127.0.0.2', pipelines, bearer(good));
    expect(other.status).toBe(200);
    expect((await getFrom('127.0.0.2', pipelines, bearer(bad))).status).toBe(401);
  });

  it('refuses the locked-out address even with the metricsToken, so it cannot be guessed at speed either', async () => {
    // "for the rest of that minute, whatever it sends" (docs/SECURITY.md, "Who may do what").
    expect(unlockedAt, 'the lock-out test above ran first').toBeDefined();
    const { server } = limited!;
    const response = await fetch(`${server.url}/metrics`, { headers: bearer(METRICS_TOKEN) });
    const text = await response.text();
    expect(`${response.status} ${codeOf(text)}`).toBe('429 TW_TOO_MANY_AUTH_FAILURES');
    // From another address, the same token reads /metrics.
    expect(
      (await getFrom('127.0.0.2', `${server.url}/metrics`, bearer(METRICS_TOKEN))).status,
    ).toBe(200);
  });
});

// ---------------------------------------------------------------------------------------------
// 1. The token matrix, on every route family.

describe('the token matrix on every route family (HS256, with an audience and an issuer)', () => {
  let served: Served | undefined;
  let server: ServerProcess;
  const tokens: Record<string, string> = {};

  const good = (claim: Claim, options: MintOptions = {}) =>
    mint(claim, { aud: AUDIENCE, iss: ISSUER, ...options });
  const SCOPES = ['pipeline:etl.*', `topic:${TOPIC}`, 'topic:iceberg'];

  beforeAll(async () => {
    served = await serve({
      TAILWATER_AUTH_SECRET: SECRET,
      TAILWATER_AUTH_AUDIENCE: AUDIENCE,
      TAILWATER_AUTH_ISSUER: ISSUER,
      // This block sends hundreds of bad tokens from one address on purpose.
      TAILWATER_AUTH_FAILURES_PER_MINUTE: '1000000',
      TAILWATER_METRICS_TOKEN: METRICS_TOKEN,
    });
    server = served.server;
    tokens['admin'] = await good({ admin: true });
    tokens['scoped'] = await good({ read: SCOPES, write: SCOPES });
    tokens['readOnly'] = await good({ read: SCOPES });
    tokens['writeOnly'] = await good({ write: SCOPES });
    tokens['other'] = await good({
      read: ['pipeline:other.*', 'topic:other'],
      write: ['pipeline:other.*', 'topic:other'],
    });
    await seed(server, tokens['admin']);
  });
  afterAll(() => stop(served));

  it('answers every route with a token that has the scope: 2xx, or a stream that opens', async () => {
    const scoped = await outcomes(
      server,
      ROWS.filter((row) => row.need !== 'admin'),
      bearer(tokens['scoped']!),
    );
    expect(scoped).toEqual(
      expected(
        ROWS.filter((row) => row.need !== 'admin'),
        () => true,
        '',
      ),
    );
    const admin = await outcomes(server, ROWS, bearer(tokens['admin']!));
    expect(admin).toEqual(expected(ROWS, () => true, ''));
  });

  it('serves the public routes without a token', async () => {
    for (const path of ['/healthz', '/readyz', '/ui/']) {
      const response = await fetch(`${server.url}${path}`);
      expect(response.status, path).toBe(200);
      await response.body?.cancel();
    }
    const ui = await fetch(`${server.url}/ui/`);
    expect(ui.headers.get('content-type')).toMatch(/^text\/html/);
    await ui.body?.cancel();
  });

  // Each bad token, as the Authorization header it goes in (undefined: none at all).
  const BAD: ReadonlyArray<[string, () => Promise<Record<string, string>>]> = [
    ['no token', async () => ({})],
    ['"Bearer abc"', async () => ({ authorization: 'Bearer abc' })],
    ['"Basic xyz"', async () => ({ authorization: 'Basic xyz' })],
    ['an empty Bearer', async () => ({ authorization: 'Bearer ' })],
    ['a JWT of garbage segments', async () => bearer('eyJnYXJiYWdl.Z2FyYmFnZQ.Z2FyYmFnZQ')],
    [
      'a token signed with another secret',
      async () =>
        bearer(await good({ admin: true }, { key: new TextEncoder().encode(`${SECRET}!`) })),
    ],
    [
      'an unsigned alg:none token',
      async () =>
        bearer(
          `${b64url({ alg: 'none', typ: 'JWT' })}.${b64url({
            tailwater: { admin: true },
            aud: AUDIENCE,
            iss: ISSUER,
            exp: nowSeconds() + 3600,
          })}.`,
        ),
    ],
    [
      'a valid token whose payload was replaced by one granting admin',
      async () => {
        const [head, payload, signature] = (await good({ read: ['pipeline:nothing'] })).split('.');
        const claims = JSON.parse(Buffer.from(payload!, 'base64url').toString()) as object;
        const tampered = b64url({ ...claims, tailwater: { admin: true } });
        return bearer(`${head}.${tampered}.${signature}`);
      },
    ],
    [
      'an expired token (beyond the 30 s allowance)',
      async () => bearer(await good({ admin: true }, { exp: nowSeconds() - 120 })),
    ],
    [
      'a token not valid for an hour yet',
      async () =>
        bearer(await good({ admin: true }, { nbf: nowSeconds() + 3600, exp: nowSeconds() + 7200 })),
    ],
    [
      'a token for another audience',
      async () => bearer(await good({ admin: true }, { aud: 'another-service' })),
    ],
    [
      'a token without an audience',
      async () => bearer(await mint({ admin: true }, { iss: ISSUER })),
    ],
    [
      'a token of another issuer',
      async () => bearer(await good({ admin: true }, { iss: 'https://elsewhere.e2e.test' })),
    ],
  ];

  it.each(BAD)(
    'refuses %s with 401 TW_UNAUTHENTICATED and WWW-Authenticate on every route, streams before any frame',
    async (_kind, headers) => {
      expect(await outcomes(server, ROWS, await headers())).toEqual(
        expected(ROWS, () => false, UNAUTHENTICATED),
      );
    },
  );

  it('refuses a token that may only touch pipeline:other.* with 403 TW_FORBIDDEN on every pipeline, topic and admin route; its listings answer', async () => {
    expect(await outcomes(server, ROWS, bearer(tokens['other']!))).toEqual(
      expected(ROWS, (row) => row.need === 'listing', FORBIDDEN),
    );
  });

  it('refuses a read-only token on every write route, and a token without admin on /metrics', async () => {
    expect(await outcomes(server, ROWS, bearer(tokens['readOnly']!))).toEqual(
      expected(ROWS, (row) => row.need === 'read' || row.need === 'listing', FORBIDDEN),
    );
    expect(
      await outcomes(
        server,
        ROWS.filter((row) => row.need === 'admin'),
        bearer(tokens['scoped']!),
      ),
    ).toEqual({ metrics: FORBIDDEN });
  });

  it('lets the metricsToken read /metrics and refuses it with 401 everywhere else', async () => {
    expect(await outcomes(server, ROWS, bearer(METRICS_TOKEN))).toEqual(
      expected(ROWS, (row) => row.name === 'metrics', UNAUTHENTICATED),
    );
  });

  it('refuses a write-only token on every read route: writing does not allow reading', async () => {
    expect(await outcomes(server, ROWS, bearer(tokens['writeOnly']!))).toEqual(
      expected(ROWS, (row) => row.need === 'write' || row.need === 'listing', FORBIDDEN),
    );
  });

  it('takes the token from the header, the tailwater_token cookie or ?access_token=, and refuses a bad one in each', async () => {
    const stream = ROWS.find((row) => row.name === 'native run stream')!;
    const read = ROWS.find((row) => row.name === 'native GET run')!;
    const forged = await good({ admin: true }, { key: new TextEncoder().encode(`${SECRET}?`) });
    for (const row of [read, stream]) {
      const query = { ...row, path: `${row.path}?access_token=${tokens['readOnly']}` };
      const badQuery = { ...row, path: `${row.path}?access_token=${forged}` };
      expect(summary(await call(server, query, {})), `${row.name} ?access_token=`).toBe(
        success(row),
      );
      expect(summary(await call(server, badQuery, {})), `${row.name} ?access_token=`).toBe(
        UNAUTHENTICATED,
      );
      const cookie = { cookie: `tailwater_token=${tokens['readOnly']}` };
      expect(summary(await call(server, row, cookie)), `${row.name} cookie`).toBe(success(row));
      const badCookie = { cookie: `tailwater_token=${forged}` };
      expect(summary(await call(server, row, badCookie)), `${row.name} cookie`).toBe(
        UNAUTHENTICATED,
      );
    }
  });
});

// ---------------------------------------------------------------------------------------------
// 1 (continued). RS256 and ES256 tokens, with a PEM public key and with a JWKS.

describe('RS256 tokens verified with authPublicKeyFile', () => {
  let served: Served | undefined;
  let server: ServerProcess;
  let keyDir: string;
  let signer: PrivateKey;
  let publicPem: string;
  const rows = ROWS.filter((row) =>
    [
      'native GET run',
      'native run stream',
      'POST logs',
      'OpenMetadata last',
      'ZenML stream',
      'Iceberg stream',
      'metrics',
    ].includes(row.name),
  );

  beforeAll(async () => {
    const pair = await generateKeyPair('RS256');
    signer = pair.privateKey;
    publicPem = await exportSPKI(pair.publicKey);
    keyDir = mkdtempSync(join(tmpdir(), 'tailwater-auth-keys-'));
    writeFileSync(join(keyDir, 'public.pem'), publicPem);
    served = await serve({
      TAILWATER_AUTH_PUBLIC_KEY_FILE: join(keyDir, 'public.pem'),
      TAILWATER_AUTH_FAILURES_PER_MINUTE: '1000000',
    });
    server = served.server;
    await seed(server, await mint({ admin: true }, { alg: 'RS256', key: signer }));
  });
  afterAll(async () => {
    await stop(served);
    if (keyDir) rmSync(keyDir, { recursive: true, force: true });
  });

  it('takes a token signed with the key, and refuses another key, alg none, an ES256 token and HS256 made with the public key as its secret', async () => {
    const admin = await mint({ admin: true }, { alg: 'RS256', key: signer });
    expect(await outcomes(server, rows, bearer(admin))).toEqual(expected(rows, () => true, ''));
    const reader = await mint(
      { read: ['pipeline:etl.*', 'topic:iceberg'] },
      { alg: 'RS256', key: signer },
    );
    expect(await outcomes(server, rows, bearer(reader))).toEqual(
      expected(rows, (row) => row.need === 'read', FORBIDDEN),
    );

    const otherKey = (await generateKeyPair('RS256')).privateKey;
    const es = (await generateKeyPair('ES256')).privateKey;
    const forged = [
      await mint({ admin: true }, { alg: 'RS256', key: otherKey }),
      await mint({ admin: true }, { alg: 'ES256', key: es }),
      await mint({ admin: true }, { alg: 'HS256', key: new TextEncoder().encode(publicPem) }),
      `${b64url({ alg: 'none' })}.${b64url({ tailwater: { admin: true } })}.`,
    ];
    for (const token of forged) {
      expect(await outcomes(server, rows, bearer(token))).toEqual(
        expected(rows, () => false, UNAUTHENTICATED),
      );
    }
  });
});

describe('RS256 and ES256 tokens verified with authJwksFile, by kid', () => {
  let served: Served | undefined;
  let server: ServerProcess;
  let keyDir: string;
  let rsa: PrivateKey;
  let ec: PrivateKey;
  const rows = ROWS.filter((row) =>
    ['native GET run', 'native run stream', 'PUT run status', 'Freight deploy', 'metrics'].includes(
      row.name,
    ),
  );

  beforeAll(async () => {
    const rsaPair = await generateKeyPair('RS256');
    const ecPair = await generateKeyPair('ES256');
    rsa = rsaPair.privateKey;
    ec = ecPair.privateKey;
    const keys = [
      { ...(await exportJWK(rsaPair.publicKey)), kid: 'rsa-1', alg: 'RS256', use: 'sig' },
      { ...(await exportJWK(ecPair.publicKey)), kid: 'ec-1', alg: 'ES256', use: 'sig' },
    ];
    keyDir = mkdtempSync(join(tmpdir(), 'tailwater-auth-jwks-'));
    writeFileSync(join(keyDir, 'jwks.json'), JSON.stringify({ keys }));
    served = await serve({
      TAILWATER_AUTH_JWKS_FILE: join(keyDir, 'jwks.json'),
      TAILWATER_AUTH_FAILURES_PER_MINUTE: '1000000',
    });
    server = served.server;
    await seed(server, await mint({ admin: true }, { alg: 'RS256', kid: 'rsa-1', key: rsa }));
  });
  afterAll(async () => {
    await stop(served);
    if (keyDir) rmSync(keyDir, { recursive: true, force: true });
  });

  it('takes a token signed with the key its kid names, and refuses an unknown kid or a kid with another key', async () => {
    for (const [alg, kid, key] of [
      ['RS256', 'rsa-1', rsa],
      ['ES256', 'ec-1', ec],
    ] as const) {
      const admin = await mint({ admin: true }, { alg, kid, key });
      expect(await outcomes(server, rows, bearer(admin)), kid).toEqual(
        expected(rows, () => true, ''),
      );
    }
    const stranger = (await generateKeyPair('RS256')).privateKey;
    for (const token of [
      await mint({ admin: true }, { alg: 'RS256', kid: 'rsa-2', key: stranger }),
      await mint({ admin: true }, { alg: 'RS256', kid: 'rsa-1', key: stranger }),
      // The EC key's kid on an RSA signature.
      await mint({ admin: true }, { alg: 'RS256', kid: 'ec-1', key: rsa }),
      await mint({ admin: true }, { alg: 'HS256', kid: 'rsa-1', key: HS_KEY }),
    ]) {
      expect(await outcomes(server, rows, bearer(token))).toEqual(
        expected(rows, () => false, UNAUTHENTICATED),
      );
    }
  });
});

// ---------------------------------------------------------------------------------------------
// 2. Listings and the runs feed show a token only what it may read (docs/SECURITY.md).

interface FeedEntry {
  data: { pipeline: string; runId: string; status: string };
}
const feedRuns = (events: readonly SseEvent[]) =>
  entryEvents(events).map((event) => {
    const { data } = JSON.parse(event.data) as FeedEntry;
    return `${data.pipeline}/${data.runId}`;
  });

describe('listings and the runs feed, filtered by the token', () => {
  let served: Served | undefined;
  let server: ServerProcess;
  let admin: string;
  let etlReader: string;
  const readers: SseReader[] = [];

  beforeAll(async () => {
    served = await serve({ TAILWATER_AUTH_SECRET: SECRET, TAILWATER_POLL_SECONDS: '0.1' });
    server = served.server;
    admin = await mint({ admin: true }, { sub: 'producer' });
    etlReader = await mint({ read: ['pipeline:etl.*', 'topic:alerts'] }, { sub: 'etl-viewer' });
    for (const fqn of ['etl.daily', 'etl.hourly', 'ml.train']) {
      await setStatus(server, admin, fqn, 'r1');
      await appendLog(server, admin, fqn, 'r1', `log of ${fqn}\n`);
    }
    for (const topic of ['alerts', 'audit', 'secrets']) {
      await appendTopic(server, admin, topic, [{ kind: 'note', data: { topic } }]);
    }
  });
  afterAll(async () => {
    for (const reader of readers.splice(0)) reader.close();
    await stop(served);
  });

  async function getJson<T>(path: string, token: string): Promise<T> {
    const response = await fetch(`${server.url}${path}`, { headers: bearer(token) });
    expect(response.status, path).toBe(200);
    return (await response.json()) as T;
  }
  const pipelinesSeenBy = async (token: string) =>
    (await getJson<{ pipelines: Array<{ fqn: string }> }>('/api/v1/pipelines', token)).pipelines
      .map((pipeline) => pipeline.fqn)
      .sort();
  const topicsSeenBy = async (token: string) =>
    (await getJson<{ topics: string[] }>('/api/v1/topics', token)).topics.sort();
  const appsSeenBy = async (token: string) =>
    (
      await getJson<Array<{ id: string; environments: Record<string, unknown> }>>(
        `${FREIGHT}/apps/`,
        token,
      )
    ).map((app) => `${app.id}: ${Object.keys(app.environments).sort().join(', ')}`);

  it('lists only the pipelines a token may read', async () => {
    expect(await pipelinesSeenBy(admin)).toEqual(['etl.daily', 'etl.hourly', 'ml.train']);
    expect(await pipelinesSeenBy(etlReader)).toEqual(['etl.daily', 'etl.hourly']);
    const writer = await mint({ write: ['*'] });
    expect(await pipelinesSeenBy(writer)).toEqual([]);
  });

  it('lists only the topics a token may read (topic: grants)', async () => {
    expect(await topicsSeenBy(admin)).toEqual(
      expect.arrayContaining(['alerts', 'audit', 'secrets']),
    );
    expect(await topicsSeenBy(etlReader)).toEqual(['alerts']);
    const auditor = await mint({ read: ['topic:a*'] });
    expect(await topicsSeenBy(auditor)).toEqual(['alerts', 'audit']);
  });

  it('lists only the Freight apps a token may read: the app {app} of the pipelines {app}.{env}', async () => {
    expect(await appsSeenBy(admin)).toEqual(['etl: daily, hourly', 'ml: train']);
    expect(await appsSeenBy(etlReader)).toEqual(['etl: daily, hourly']);
    const dailyOnly = await mint({ read: ['pipeline:etl.daily'] });
    expect(await appsSeenBy(dailyOnly)).toEqual(['etl: daily']);
  });

  it('carries on the runs feed only the runs of pipelines the token may read, history and live', async () => {
    const open = async (token: string) => {
      const reader = await openSse(`${server.url}/api/v1/runs/stream?access_token=${token}`);
      readers.push(reader);
      expect(reader.status).toBe(200);
      return reader;
    };
    const mine = await open(etlReader);
    const all = await open(admin);
    // History: one status entry per run created in beforeAll.
    const has = (run: string) => (events: SseEvent[]) => feedRuns(events).includes(run);
    await all.waitFor(has('ml.train/r1'), 5000);
    await mine.waitFor(has('etl.hourly/r1'), 5000);
    expect(feedRuns(mine.events)).toEqual(['etl.daily/r1', 'etl.hourly/r1']);

    // Live: a change to ml.train reaches the admin's feed but not this one; one to etl.daily does.
    await setStatus(server, admin, 'ml.train', 'r2');
    await all.waitFor(has('ml.train/r2'), 5000);
    await setStatus(server, admin, 'etl.daily', 'r2');
    await mine.waitFor(has('etl.daily/r2'), 5000);
    await all.waitFor(has('etl.daily/r2'), 5000);
    expect(feedRuns(mine.events)).toEqual(['etl.daily/r1', 'etl.hourly/r1', 'etl.daily/r2']);
    expect(feedRuns(all.events)).toEqual([
      'etl.daily/r1',
      'etl.hourly/r1',
      'ml.train/r1',
      'ml.train/r2',
      'etl.daily/r2',
    ]);
    // Naming ml.train in ?pipeline= shows nothing more.
    const narrowed = await openSse(
      `${server.url}/api/v1/runs/stream?pipeline=ml.train&pipeline=etl.hourly&access_token=${etlReader}`,
    );
    readers.push(narrowed);
    await narrowed.waitFor(has('etl.hourly/r1'), 5000);
    await setStatus(server, admin, 'etl.hourly', 'r1', 'success');
    await narrowed.waitFor((events) => feedRuns(events).length >= 2, 5000);
    expect(feedRuns(narrowed.events)).toEqual(['etl.hourly/r1', 'etl.hourly/r1']);
  });

  // OpenMetadata's {fqnOrId} may be the pipeline's UUID (docs/API.md, "OpenMetadata"); what a
  // token needs is a grant on the pipeline behind it (docs/SECURITY.md, "Who may do what").
  async function omGet(fqn: string, token: string, tail: string, by: 'id' | 'name') {
    const listed = await getJson<{ pipelines: Array<{ fqn: string; id: string }> }>(
      '/api/v1/pipelines',
      admin,
    );
    const id = listed.pipelines.find((pipeline) => pipeline.fqn === fqn)!.id;
    const segment = by === 'id' ? id : fqn;
    const response = await fetch(`${server.url}${OM}/${segment}/${tail}`, {
      headers: bearer(token),
    });
    return { id, status: response.status, body: await response.text() };
  }
  const byId = (fqn: string, token: string, tail = 'last') => omGet(fqn, token, tail, 'id');

  it('lets a token read an OpenMetadata pipeline by its id as by its name', async () => {
    for (const tail of ['last', 'last/download']) {
      const byName = await omGet('etl.daily', etlReader, tail, 'name');
      expect(byName.status, tail).toBe(200);
      expect(await byId('etl.daily', etlReader, tail), tail).toEqual(byName);
    }
  });

  it("refuses an OpenMetadata pipeline by id to a grant that matches only the id's text", async () => {
    const { id } = await byId('ml.train', admin);
    // A grant for the pipelines whose names start as ml.train's id does (`pipeline:e*`, say).
    const prefix = await mint({ read: [`pipeline:${id.slice(0, 1)}*`] });
    for (const tail of ['last', 'last/download']) {
      const answer = await byId('ml.train', prefix, tail);
      expect(`${answer.status} ${codeOf(answer.body)}`, tail).toBe(FORBIDDEN);
    }
  });
});

// ---------------------------------------------------------------------------------------------
// 3. A stream whose token expires ends then, in each streaming dialect's own words. The
// verifier allows 30 s for clocks when it checks a token, but an open stream ends at the
// token's exp itself, at the reader's next check, within pollSeconds (docs/SECURITY.md): so
// each stream below must close after exp and long before exp + 30 s. Freight's dialect has no
// stream (its UI polls the deploy and its log), so it has nothing to end.

describe('streams whose token expires', () => {
  let served: Served | undefined;
  let server: ServerProcess;
  let admin: string;
  const readers: SseReader[] = [];
  const POLL_SECONDS = 0.1;

  beforeAll(async () => {
    served = await serve({
      TAILWATER_AUTH_SECRET: SECRET,
      TAILWATER_POLL_SECONDS: String(POLL_SECONDS),
    });
    server = served.server;
    admin = await mint({ admin: true });
    await setStatus(server, admin, PIPELINE, 'r1');
    await appendLog(server, admin, PIPELINE, 'r1', 'first line\n');
    await setStatus(server, admin, PIPELINE, 'z1');
    await write(server, admin, 'POST', `${ZENML}/z1/events`, {
      events: [{ pipeline_run_id: 'z1', kind: 'step', payload: { n: 1 } }],
    });
    await appendTopic(server, admin, 'iceberg', [
      { kind: 'iceberg-mutation', id: 'commit-1', data: { snapshotId: 1 } },
      { kind: 'iceberg-mutation', id: 'commit-2', data: { snapshotId: 2 } },
    ]);
  });
  afterAll(async () => {
    for (const reader of readers.splice(0)) reader.close();
    await stop(served);
  });

  async function open(path: string, headers: Record<string, string> = {}) {
    const reader = await openSse(`${server.url}${path}`, headers);
    readers.push(reader);
    expect(reader.status, path).toBe(200);
    expect(reader.headers.get('content-type')).toMatch(/^text\/event-stream/);
    // When the server closed the body, as the client saw it.
    const closedAt = reader.closed.then(() => Date.now());
    return { reader, closedAt };
  }

  it('ends the native, OpenMetadata, ZenML and Iceberg streams at exp, and a fresh token resumes them from their cursors', async () => {
    const reads = ['pipeline:etl.*', 'topic:iceberg'];
    // Seconds enough to open four streams and see a live event on a busy machine first.
    const exp = nowSeconds() + 8;
    const short = await mint({ read: reads }, { exp });
    const q = `access_token=${short}`;
    const native = await open(`${RUN}/stream?${q}`);
    const om = await open(`${OM}/${PIPELINE}/stream/r1?${q}`);
    const zenml = await open(`${ZENML}/z1/events/stream?${q}`);
    const iceberg = await open(`/compat/iceberg/events?${q}`);

    // Each is open and has sent what was there.
    await native.reader.waitFor(hasSeq(2), 5000);
    await om.reader.waitFor((events) => events.some((e) => e.data.includes('first line')), 5000);
    await zenml.reader.waitFor((events) => events.some((e) => e.event === 'step'), 5000);
    await iceberg.reader.waitFor((events) => events.some((e) => e.id === 'commit-2'), 5000);
    expect(Date.now()).toBeLessThan(exp * 1000);
    // Live events still arrive before exp.
    await appendTopic(server, admin, 'iceberg', [
      { kind: 'iceberg-mutation', id: 'commit-3', data: { snapshotId: 3 } },
    ]);
    await iceberg.reader.waitFor((events) => events.some((e) => e.id === 'commit-3'), 5000);

    // At exp, not at exp + 30 s when the verifier itself would refuse the token: long before
    // that however slow the reader's next check is.
    const deadline = exp * 1000 + 15_000;
    for (const [name, stream] of Object.entries({ native, om, zenml, iceberg })) {
      await closedWithin(stream.reader, Math.max(deadline - Date.now(), 0) + 500);
      const closedAt = await stream.closedAt;
      expect(closedAt, `${name} closed before exp`).toBeGreaterThanOrEqual(exp * 1000);
      expect(closedAt, `${name} closed late`).toBeLessThanOrEqual(deadline);
    }

    // Native: `end {"reason":"tokenExpired"}` (docs/API.md, "Streaming").
    expect(native.reader.events.at(-1)!.event).toBe('end');
    expect(endOf(native.reader.events)).toMatchObject({ reason: 'tokenExpired', lastSeq: 2 });
    // OpenMetadata: `complete` with reason maxDuration, which its UI reconnects after, and the
    // message saying why (docs/API.md, "OpenMetadata").
    const complete = JSON.parse(om.reader.events.at(-1)!.data) as Record<string, unknown>;
    expect(complete).toMatchObject({ eventType: 'complete', runId: 'r1', reason: 'maxDuration' });
    expect(complete['message']).toMatch(/token expired/);
    // ZenML: `end` would tell its client the run is over, so the body just closes.
    expect(zenml.reader.events.map((event) => event.event)).not.toContain('end');
    expect(zenml.reader.events.map((event) => event.event)).not.toContain('error');
    // Iceberg: the dashboard knows no control frames; the body just closes.
    expect(iceberg.reader.events.map((event) => event.event)).toEqual([
      'connected',
      'iceberg-mutation',
      'iceberg-mutation',
      'iceberg-mutation',
    ]);

    // The same token, a moment past its exp: a plain request still allows 30 s for clocks, but
    // a stream does not open, or a client reconnecting with it would open one that ends at once,
    // again and again, until the allowance ran out.
    const lapsed = await fetch(`${server.url}${RUN}/stream?${q}`);
    expect(lapsed.status).toBe(401);
    expect(lapsed.headers.get('content-type')).toMatch(/^application\/json/);
    expect(((await lapsed.json()) as { error: { message: string } }).error.message).toMatch(
      /expired/,
    );
    const plain = await fetch(`${server.url}${RUN}?${q}`);
    expect(plain.status).toBe(200);

    // While they were away.
    await appendLog(server, admin, PIPELINE, 'r1', 'while away\n');
    await appendTopic(server, admin, 'iceberg', [
      { kind: 'iceberg-mutation', id: 'commit-4', data: { snapshotId: 4 } },
    ]);
    const fresh = await mint({ read: reads });
    const cursor = entryEvents(native.reader.events).at(-1)!.id!;
    const nativeAgain = await open(`${RUN}/stream?access_token=${fresh}`, {
      'last-event-id': cursor,
    });
    await nativeAgain.reader.waitFor(hasSeq(3), 5000);
    expect(seqs(nativeAgain.reader.events)).toEqual([3]);
    // The Iceberg dashboard's EventSource resends the id of the last event it got.
    const icebergAgain = await open(`/compat/iceberg/events?access_token=${fresh}`, {
      'last-event-id': 'commit-3',
    });
    await icebergAgain.reader.waitFor((events) => events.some((e) => e.id === 'commit-4'), 5000);
    expect(icebergAgain.reader.events.map((event) => event.id ?? event.event)).toEqual([
      'connected',
      'commit-4',
    ]);
  });
});

// ---------------------------------------------------------------------------------------------
// 4. A token in the query never reaches the server's log (docs/SECURITY.md, "What is logged").

describe('the server log, at --log-level info', () => {
  let served: Served | undefined;

  beforeAll(async () => {
    served = await serve({ TAILWATER_AUTH_SECRET: SECRET }, ['--log-level', 'info']);
  });
  afterAll(() => stop(served));

  it('holds neither a token given in ?access_token= nor its signature, good or bad', async () => {
    const { server } = served!;
    const good = await mint({ read: ['pipeline:etl.*'], write: ['pipeline:etl.*'] });
    const [head, payload, signature] = good.split('.');
    const tampered = `${head}.${b64url({ tailwater: { admin: true } })}.${signature}`;
    const expired = await mint({ admin: true }, { exp: nowSeconds() - 600 });
    const forged = await mint({ admin: true }, { key: new TextEncoder().encode(`${SECRET}#`) });
    await write(server, good, 'PUT', RUN, { status: 'running' });
    for (const token of [good, tampered, expired, forged, 'not-a-jwt-but-secret-text']) {
      const q = `access_token=${encodeURIComponent(token)}`;
      for (const path of [
        `${RUN}?${q}`,
        `${RUN}/entries?limit=x&${q}`,
        `/api/v1/pipelines/ml.train/runs/r1?${q}`,
        `/api/v1/nothing/here?${q}`,
        `${OM}/unknown.pipeline/last?${q}`,
        `/metrics?${q}`,
      ]) {
        const response = await fetch(`${server.url}${path}`);
        await response.body?.cancel();
      }
      const stream = await openSse(`${server.url}${RUN}/stream?${q}`);
      stream.close();
    }
    // Give the child a moment to write whatever it would.
    await sleep(300);
    const output = server.output();
    expect(output).toMatch(/listening on/);
    for (const [what, text] of Object.entries({
      good,
      'its payload': payload!,
      'its signature': signature!,
      tampered,
      expired,
      'the expired signature': expired.split('.')[2]!,
      forged,
      'the forged signature': forged.split('.')[2]!,
      'a non-JWT token': 'not-a-jwt-but-secret-text',
    })) {
      expect(output.includes(text), `the log holds ${what}`).toBe(false);
    }
    // Requests are not logged line by line, but wherever a URL with access_token is (an error's
    // context), its value is `[redacted]`.
    for (const match of output.matchAll(/access_token=([^&\s"]*)/g)) {
      expect(match[1]).toBe('[redacted]');
    }
  });
});

// ---------------------------------------------------------------------------------------------
// 5 (second half). Once the minute of the first failure has passed, the address may try again.

describe('failed authentications, once the window has passed', () => {
  it('answers the address that was locked out again: a good token 200, a bad one 401', async () => {
    expect(unlockedAt, 'the lock-out test above ran first').toBeDefined();
    const { server } = limited!;
    // Bounded: at most the minute, most of which the blocks above already took.
    const wait = unlockedAt! - Date.now() + 1000;
    expect(wait).toBeLessThanOrEqual(61_000);
    if (wait > 0) await sleep(wait);
    const good = await mint({ read: ['pipeline:etl.*'] });
    const pipelines = `${server.url}/api/v1/pipelines`;
    expect((await fetch(pipelines, { headers: bearer(good) })).status).toBe(200);
    const bad = await fetch(pipelines, { headers: bearer(`${good}x`) });
    expect(bad.status).toBe(401);
    expect(bad.headers.get('www-authenticate')).toBe(REALM);
  }, 90_000);
});
