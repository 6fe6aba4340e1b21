import { createHmac, generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SignJWT, exportJWK } from 'jose';
import { afterEach, describe, expect, it } from 'vitest';
import { createTestApp } from '../helpers/app.js';
import type { TestApp } from '../helpers/app.js';

// Authentication and scopes (docs/SECURITY.md, "Tokens and scopes"): every /api and /compat
// request with a token, 401 without a valid one, 403 without the scope, listings filtered.

const SECRET = 'a-test-secret-of-more-than-thirty-two-bytes';
const apps: TestApp[] = [];
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close();
});

async function start(overrides: Record<string, unknown> = {}) {
  const t = await createTestApp({ authSecret: SECRET, ...overrides });
  apps.push(t);
  return t;
}

type Claim = { read?: string[]; write?: string[]; admin?: boolean };

function token(
  claim: Claim,
  options: {
    secret?: string;
    expiresIn?: string | number;
    notBefore?: number;
    audience?: string;
  } = {},
) {
  let jwt = new SignJWT({ tailwater: claim })
    .setProtectedHeader({ alg: 'HS256' })
    .setIssuedAt()
    .setExpirationTime(options.expiresIn ?? '1h');
  if (options.notBefore !== undefined) jwt = jwt.setNotBefore(options.notBefore);
  if (options.audience !== undefined) jwt = jwt.setAudience(options.audience);
  return jwt.sign(new TextEncoder().encode(options.secret ?? SECRET));
}

const bearer = (value: string) => ({ authorization: `Bearer ${value}` });

const RUN = '/api/v1/pipelines/etl.daily/runs/r1';
const OTHER_RUN = '/api/v1/pipelines/ml.train/runs/r1';

/** One route of each family, with what it needs. */
const ROUTES = [
  { method: 'GET', url: RUN },
  { method: 'GET', url: `${RUN}/entries` },
  { method: 'GET', url: `${RUN}/log.txt` },
  { method: 'POST', url: `${RUN}/logs`, payload: 'a line\n', type: 'text/plain' },
  { method: 'PUT', url: RUN, payload: '{"status":"running"}', type: 'application/json' },
  { method: 'GET', url: '/api/v1/topics/iceberg/entries' },
  { method: 'GET', url: '/api/v1/pipelines' },
  { method: 'GET', url: '/metrics' },
  {
    method: 'GET',
    url: '/compat/openmetadata/api/v1/services/ingestionPipelines/logs/etl.daily/last',
  },
  { method: 'GET', url: '/compat/zenml/api/v1/runs/r1/events/stream' },
  { method: 'GET', url: '/compat/freight/api/0/apps/' },
] as const;

function inject(t: TestApp, route: (typeof ROUTES)[number], headers: Record<string, string> = {}) {
  return t.app.inject({
    method: route.method,
    url: route.url,
    headers: { ...('type' in route ? { 'content-type': route.type } : {}), ...headers },
    ...('payload' in route ? { payload: route.payload } : {}),
  });
}

describe('authentication', () => {
  it('answers 401 with WWW-Authenticate to every route family without a token, and stores nothing', async () => {
    const t = await start();
    for (const route of ROUTES) {
      const response = await inject(t, route);
      expect(response.statusCode, `${route.method} ${route.url}`).toBe(401);
      expect(response.headers['www-authenticate']).toBe('Bearer realm="tailwater"');
      // Each dialect answers in its own error body; the native one names the code.
      if (!route.url.startsWith('/compat/')) {
        expect(response.json()).toMatchObject({ error: { code: 'TW_UNAUTHENTICATED' } });
      }
    }
    expect(await t.store.getRun('etl.daily', 'r1')).toBeUndefined();
  });

  it('serves /healthz and /readyz without a token', async () => {
    const t = await start();
    expect((await t.app.inject('/healthz')).statusCode).toBe(200);
    expect((await t.app.inject('/readyz')).statusCode).toBe(200);
  });

  it.each([
    ['not a Bearer header', { authorization: 'Basic dXNlcjpwdw==' }],
    ['an empty Bearer', { authorization: 'Bearer ' }],
    ['a token that is no JWT', bearer('not-a-jwt')],
    ['a tampered token', { authorization: 'tamper' }],
  ])('refuses %s with 401', async (_what, headers) => {
    const t = await start();
    let sent = headers as Record<string, string>;
    if (sent.authorization === 'tamper') {
      // The payload swapped for one that grants everything, the signature kept.
      const [head, , signature] = (await token({ read: ['pipeline:nothing'] })).split('.');
      const body = Buffer.from(JSON.stringify({ tailwater: { admin: true } })).toString(
        'base64url',
      );
      sent = bearer(`${head}.${body}.${signature}`);
    }
    const response = await t.app.inject({ url: RUN, headers: sent });
    expect(response.statusCode).toBe(401);
  });

  it('refuses a token signed with another secret, one with alg none, and one signed with HS256 over the wrong key', async () => {
    const t = await start();
    const forged = await token(
      { admin: true },
      { secret: 'another-secret-of-more-than-thirty-two-bytes' },
    );
    const head = Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url');
    const body = Buffer.from(JSON.stringify({ tailwater: { admin: true } })).toString('base64url');
    const unsigned = `${head}.${body}.`;
    // A hand-made HS256 signature with a key that is not the secret.
    const mac = createHmac('sha256', 'guess').update(`${head}.${body}`).digest('base64url');
    const guessed = `${Buffer.from('{"alg":"HS256"}').toString('base64url')}.${body}.${mac}`;
    for (const value of [forged, unsigned, guessed]) {
      const response = await t.app.inject({ url: RUN, headers: bearer(value) });
      expect(response.statusCode).toBe(401);
      expect(response.json().error.message).not.toContain(value);
    }
  });

  it('refuses an expired token and one not valid yet (beyond the clock allowance), and takes one within it', async () => {
    const t = await start();
    const now = Math.floor(Date.now() / 1000);
    const expired = await token({ admin: true }, { expiresIn: now - 120 });
    const early = await token({ admin: true }, { notBefore: now + 120 });
    const justExpired = await token({ admin: true }, { expiresIn: now - 5 });
    expect(
      (await t.app.inject({ url: RUN, headers: bearer(expired) })).json().error.message,
    ).toMatch(/expired/);
    expect((await t.app.inject({ url: RUN, headers: bearer(early) })).statusCode).toBe(401);
    // 404: through authentication, to a run that does not exist.
    expect((await t.app.inject({ url: RUN, headers: bearer(justExpired) })).statusCode).toBe(404);
  });

  it('checks the audience and issuer when they are configured', async () => {
    const t = await start({ authAudience: 'tailwater.example.com' });
    const wrong = await token({ admin: true }, { audience: 'someone-else' });
    const none = await token({ admin: true });
    const right = await token({ admin: true }, { audience: 'tailwater.example.com' });
    expect((await t.app.inject({ url: RUN, headers: bearer(wrong) })).statusCode).toBe(401);
    expect((await t.app.inject({ url: RUN, headers: bearer(none) })).statusCode).toBe(401);
    expect((await t.app.inject({ url: RUN, headers: bearer(right) })).statusCode).toBe(404);
  });

  it('takes the token from the tailwater_token cookie and from ?access_token=', async () => {
    const t = await start();
    const value = await token({ read: ['pipeline:etl.*'] });
    expect(
      (await t.app.inject({ url: RUN, headers: { cookie: `a=b; tailwater_token=${value}` } }))
        .statusCode,
    ).toBe(404);
    expect((await t.app.inject({ url: `${RUN}?access_token=${value}` })).statusCode).toBe(404);
  });

  it('verifies RS256 tokens against a JWKS, picking the key by kid (two keys: rotation)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tailwater-jwks-'));
    const pairs = [
      generateKeyPairSync('rsa', { modulusLength: 2048 }),
      generateKeyPairSync('rsa', { modulusLength: 2048 }),
    ];
    const keys = await Promise.all(
      pairs.map(async (pair, i) => ({
        ...(await exportJWK(pair.publicKey)),
        kid: `k${i}`,
        alg: 'RS256',
        use: 'sig',
      })),
    );
    const file = join(dir, 'jwks.json');
    writeFileSync(file, JSON.stringify({ keys }));
    const t = await createTestApp({ authJwksFile: file });
    apps.push(t);
    for (const [i, pair] of pairs.entries()) {
      const value = await new SignJWT({ tailwater: { read: ['*'] } })
        .setProtectedHeader({ alg: 'RS256', kid: `k${i}` })
        .setExpirationTime('1h')
        .sign(pair.privateKey);
      expect((await t.app.inject({ url: RUN, headers: bearer(value) })).statusCode).toBe(404);
    }
    const unknownKid = await new SignJWT({ tailwater: { read: ['*'] } })
      .setProtectedHeader({ alg: 'RS256', kid: 'k9' })
      .setExpirationTime('1h')
      .sign(pairs[0]!.privateKey);
    expect((await t.app.inject({ url: RUN, headers: bearer(unknownKid) })).statusCode).toBe(401);
  });

  it('refuses to start with a secret shorter than 32 bytes, or with two kinds of key', async () => {
    await expect(createTestApp({ authSecret: 'short' })).rejects.toThrow(/^authSecret: /);
    await expect(createTestApp({ authSecret: SECRET, authJwksFile: '/x.json' })).rejects.toThrow(
      /^auth: /,
    );
  });
});

describe('scopes', () => {
  it('lets read patterns read what they match, and nothing else; 403 names what was refused', async () => {
    const t = await start();
    await t.ingest.appendLog('etl.daily', 'r1', { text: 'hello\n' });
    await t.ingest.appendLog('ml.train', 'r1', { text: 'secret\n' });
    const reader = bearer(await token({ read: ['pipeline:etl.*'] }));
    expect((await t.app.inject({ url: RUN, headers: reader })).statusCode).toBe(200);
    const refused = await t.app.inject({ url: OTHER_RUN, headers: reader });
    expect(refused.statusCode).toBe(403);
    expect(refused.json()).toMatchObject({ error: { code: 'TW_FORBIDDEN' } });
    // Reading does not allow writing.
    const append = await t.app.inject({
      method: 'POST',
      url: `${RUN}/logs`,
      headers: { ...reader, 'content-type': 'text/plain' },
      payload: 'more\n',
    });
    expect(append.statusCode).toBe(403);
    expect(
      (await t.store.bounds({ type: 'run', pipeline: 'etl.daily', runId: 'r1' })).lastSeq,
    ).toBe(2);
  });

  it('lets write patterns append and change status, and does not let them read', async () => {
    const t = await start();
    const writer = bearer(await token({ write: ['pipeline:etl.daily'] }));
    const append = await t.app.inject({
      method: 'POST',
      url: `${RUN}/logs`,
      headers: { ...writer, 'content-type': 'text/plain' },
      payload: 'a line\n',
    });
    expect(append.statusCode).toBe(200);
    const status = await t.app.inject({
      method: 'PUT',
      url: RUN,
      headers: writer,
      payload: { status: 'success' },
    });
    expect(status.statusCode).toBe(200);
    expect((await t.app.inject({ url: RUN, headers: writer })).statusCode).toBe(403);
  });

  it('keeps /metrics and routes without a rule to admin tokens', async () => {
    const t = await start();
    const everything = bearer(await token({ read: ['*'], write: ['*'] }));
    const admin = bearer(await token({ admin: true }));
    expect((await t.app.inject({ url: '/metrics', headers: everything })).statusCode).toBe(403);
    expect((await t.app.inject({ url: '/metrics', headers: admin })).statusCode).toBe(200);
  });

  it('filters the pipeline and topic listings: a token does not learn what it may not read exists', async () => {
    const t = await start();
    for (const fqn of ['etl.daily', 'etl.hourly', 'ml.train']) {
      await t.ingest.appendLog(fqn, 'r1', { text: 'x\n' });
    }
    await t.ingest.appendEvents({ type: 'topic', topic: 'iceberg' }, [{ kind: 'k', data: 1 }]);
    await t.ingest.appendEvents({ type: 'topic', topic: 'private' }, [{ kind: 'k', data: 1 }]);
    const reader = bearer(await token({ read: ['pipeline:etl.*', 'topic:iceberg'] }));
    const pipelines = await t.app.inject({ url: '/api/v1/pipelines', headers: reader });
    expect(pipelines.json<{ pipelines: { fqn: string }[] }>().pipelines.map((p) => p.fqn)).toEqual([
      'etl.daily',
      'etl.hourly',
    ]);
    const topics = await t.app.inject({ url: '/api/v1/topics', headers: reader });
    expect(topics.json<{ topics: string[] }>().topics).toEqual(['iceberg']);
    const none = bearer(await token({ write: ['*'] }));
    expect((await t.app.inject({ url: '/api/v1/pipelines', headers: none })).json()).toEqual({
      pipelines: [],
    });
  });
});
