import fc from 'fast-check';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { runKey, topicKey } from '../../src/model/stream-key.js';
import { createTestApp } from '../helpers/app.js';
import type { TestApp } from '../helpers/app.js';

// Fuzzing with tokens (docs/SECURITY.md): random and hostile Authorization headers, cookies and
// access_token values, on every route family. Whatever comes in, the answer is never a 5xx,
// never lets a request through that its token does not allow (a 2xx or a stored entry), and
// nothing already stored changes. Seeded as test/unit/fuzz-routes.test.ts is.

const RUNS = Number(process.env['TAILWATER_FUZZ_RUNS'] ?? 150);
const SEED =
  process.env['TAILWATER_FUZZ_SEED'] === 'random'
    ? (Date.now() ^ Math.floor(Math.random() * 0x7fffffff)) | 0
    : Number(process.env['TAILWATER_FUZZ_SEED'] || 20261201);
const SECRET = 'a-fuzz-secret-of-more-than-thirty-two-bytes!';
const WRONG = 'another-secret-of-more-than-thirty-two-bytes';

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp({ authSecret: SECRET, authFailuresPerMinute: 1_000_000 });
  await t.ingest.appendLog('etl.daily', 'r1', { text: 'seeded\n' });
  await t.ingest.appendEvents(topicKey('iceberg'), [{ kind: 'iceberg-mutation', data: { n: 1 } }]);
});
afterAll(async () => {
  await t.close();
});

const b64 = (value: unknown) =>
  Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url');

/** Header-safe text: what a client could put on the wire (no CR, LF or NUL). */
const headerText = fc
  .string({
    unit: fc.constantFrom(...' !"#$%&\'()*+,-./0123456789:;<=>?@AZaz[\\]^_`{|}~é€'),
    maxLength: 300,
  })
  .map((s) => s.replace(/[^\x20-\x7e]/g, 'x'));

/** Claims a token might carry: good, wrong and hostile. */
const claim = fc.oneof(
  fc.constant(undefined),
  fc.constant({ read: ['pipeline:other.*'] }),
  fc.constant({ write: ['*'] }),
  fc.constant({ read: '*' }),
  fc.constant({ read: [1, 2] }),
  fc.constant({ admin: 'true' }),
  fc.constant({ read: ['*'], extra: true }),
  fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 }),
);

/** A token that must not let anything through: malformed, forged, unsigned or out of time. */
const badToken = fc.oneof(
  headerText,
  fc.tuple(headerText, headerText, headerText).map(([a, b, c]) => `${a}.${b}.${c}`),
  claim.map(
    (c) => `${b64({ alg: 'none', typ: 'JWT' })}.${b64({ tailwater: { admin: true }, c })}.`,
  ),
  claim.map((c) => ({ sign: WRONG, claim: { admin: true, ...(c ?? {}) } })),
  fc.constant({ sign: SECRET, claim: { admin: true }, expired: true }),
  fc.constant({ sign: SECRET, claim: { admin: true }, early: true }),
  fc.constant({ sign: SECRET, claim: { admin: true }, alg: 'HS512' }),
);

type Spec =
  string | { sign: string; claim: object; expired?: boolean; early?: boolean; alg?: string };

async function materialise(spec: Spec): Promise<string> {
  if (typeof spec === 'string') return spec;
  const now = Math.floor(Date.now() / 1000);
  let jwt = new SignJWT({ tailwater: spec.claim }).setProtectedHeader({ alg: spec.alg ?? 'HS256' });
  jwt = jwt.setExpirationTime(spec.expired ? now - 3600 : now + 3600);
  if (spec.early) jwt = jwt.setNotBefore(now + 3600);
  return jwt.sign(new TextEncoder().encode(spec.sign));
}

const ROUTES = [
  { method: 'GET', url: '/api/v1/pipelines/etl.daily/runs/r1' },
  { method: 'GET', url: '/api/v1/pipelines/etl.daily/runs/r1/entries' },
  { method: 'POST', url: '/api/v1/pipelines/etl.daily/runs/r1/logs', payload: 'more\n' },
  {
    method: 'POST',
    url: '/api/v1/topics/iceberg/events',
    payload: '{"events":[{"kind":"k","data":1}]}',
  },
  { method: 'PUT', url: '/api/v1/pipelines/etl.daily/runs/r1', payload: '{"status":"failed"}' },
  { method: 'GET', url: '/api/v1/pipelines' },
  { method: 'GET', url: '/metrics' },
  { method: 'GET', url: '/api/v1/session' },
  {
    method: 'GET',
    url: '/compat/openmetadata/api/v1/services/ingestionPipelines/logs/etl.daily/last',
  },
  { method: 'POST', url: '/compat/zenml/api/v1/runs/r1/events', payload: '{"events":[]}' },
  { method: 'GET', url: '/compat/freight/api/0/deploys/etl/daily/r1/' },
] as const;

const where = fc.constantFrom('authorization', 'bearer', 'cookie', 'query', 'all');

describe('fuzzing with tokens', () => {
  test('no hostile token, wherever it is put, gets a 5xx or through to a route, and nothing stored changes', async () => {
    const before = {
      run: await t.store.bounds(runKey('etl.daily', 'r1')),
      topic: await t.store.bounds(topicKey('iceberg')),
      status: (await t.store.getRun('etl.daily', 'r1'))?.status,
    };
    const statuses = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...ROUTES),
        badToken,
        where,
        headerText,
        async (route, spec, place, noise) => {
          const value = await materialise(spec as Spec);
          const headers: Record<string, string> = {};
          let url: string = route.url;
          if (place === 'authorization') headers['authorization'] = value;
          if (place === 'bearer' || place === 'all') headers['authorization'] = `Bearer ${value}`;
          if (place === 'cookie' || place === 'all') {
            headers['cookie'] = `${noise.replace(/[;=]/g, '')}=1; tailwater_token=${value}`;
          }
          if (place === 'query' || place === 'all') {
            url += `${url.includes('?') ? '&' : '?'}access_token=${encodeURIComponent(value)}`;
          }
          if ('payload' in route) {
            headers['content-type'] = route.payload.startsWith('{')
              ? 'application/json'
              : 'text/plain';
          }
          let response;
          try {
            response = await t.app.inject({
              method: route.method,
              url,
              headers,
              ...('payload' in route ? { payload: route.payload } : {}),
            });
          } catch (error) {
            // A header no HTTP client could send (inject validates them as Node does).
            if (error instanceof TypeError && /header/i.test(error.message)) return;
            throw error;
          }
          statuses.set(response.statusCode, (statuses.get(response.statusCode) ?? 0) + 1);
          expect(response.statusCode, `${route.method} ${url}`).toBeGreaterThanOrEqual(400);
          expect(response.statusCode).toBeLessThan(500);
          expect([400, 401, 403, 404, 429]).toContain(response.statusCode);
        },
      ),
      { seed: SEED, numRuns: RUNS },
    );
    console.log(
      `[fuzz] tokens: seed ${SEED}; answers ${JSON.stringify(Object.fromEntries(statuses))}`,
    );
    expect(await t.store.bounds(runKey('etl.daily', 'r1'))).toEqual(before.run);
    expect(await t.store.bounds(topicKey('iceberg'))).toEqual(before.topic);
    expect((await t.store.getRun('etl.daily', 'r1'))?.status).toBe(before.status);
  }, 120_000);

  test('a good token with a scope that does not match is 403 on every route, and one that matches goes through', async () => {
    const sign = (c: object) =>
      new SignJWT({ tailwater: c })
        .setProtectedHeader({ alg: 'HS256' })
        .setExpirationTime('1h')
        .sign(new TextEncoder().encode(SECRET));
    const narrow = await sign({ read: ['pipeline:nothing.*'], write: ['topic:nothing'] });
    for (const route of ROUTES) {
      if (route.url === '/api/v1/pipelines' || route.url === '/api/v1/session') continue;
      const response = await t.app.inject({
        method: route.method,
        url: route.url,
        headers: {
          authorization: `Bearer ${narrow}`,
          ...('payload' in route
            ? { 'content-type': route.payload.startsWith('{') ? 'application/json' : 'text/plain' }
            : {}),
        },
        ...('payload' in route ? { payload: route.payload } : {}),
      });
      expect(response.statusCode, `${route.method} ${route.url}`).toBe(403);
    }
    const admin = await sign({ admin: true });
    const through = await t.app.inject({
      url: ROUTES[0].url,
      headers: { authorization: `Bearer ${admin}` },
    });
    expect(through.statusCode).toBe(200);
  });
});
