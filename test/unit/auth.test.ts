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

  it('lets the fixed metricsToken read /metrics and nothing else; a wrong one is 401', async () => {
    const metricsToken = 'a-scrape-token-for-prometheus';
    const t = await start({ metricsToken });
    const scrape = await t.app.inject({ url: '/metrics', headers: bearer(metricsToken) });
    expect(scrape.statusCode).toBe(200);
    expect(scrape.body).toMatch(/^# HELP tailwater_/m);
    const elsewhere = await t.app.inject({
      url: '/api/v1/pipelines',
      headers: bearer(metricsToken),
    });
    expect(elsewhere.statusCode).toBe(401);
    const cookie = await t.app.inject({
      url: '/metrics',
      headers: { cookie: `tailwater_token=${metricsToken}` },
    });
    expect(cookie.statusCode).toBe(401);
    const wrong = await t.app.inject({ url: '/metrics', headers: bearer(`${metricsToken}x`) });
    expect(wrong.statusCode).toBe(401);
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

describe('the runs feed as a topic', () => {
  it('is read as a topic by admin tokens only, and listed to them only: it names every pipeline', async () => {
    const t = await start();
    await t.ingest.appendLog('ml.secret', 'r1', { text: 'x\n' });
    const anyTopic = bearer(await token({ read: ['topic:*', 'pipeline:etl.*'] }));
    for (const url of ['/api/v1/topics/_runs/entries', '/api/v1/topics/_runs/stream']) {
      const refused = await t.app.inject({ url, headers: anyTopic });
      expect(refused.statusCode).toBe(403);
    }
    const listed = await t.app.inject({ url: '/api/v1/topics', headers: anyTopic });
    expect(listed.json<{ topics: string[] }>().topics).not.toContain('_runs');
    const admin = bearer(await token({ admin: true }));
    const entries = await t.app.inject({ url: '/api/v1/topics/_runs/entries', headers: admin });
    expect(entries.statusCode).toBe(200);
    expect(entries.body).toContain('ml.secret');
    const adminList = await t.app.inject({ url: '/api/v1/topics', headers: admin });
    expect(adminList.json<{ topics: string[] }>().topics).toContain('_runs');
  });
});

describe('OpenMetadata pipelines named by id', () => {
  it('checks the scope of the pipeline the id names, not the text of the id', async () => {
    const t = await start();
    await t.ingest.appendLog('etl.daily', 'r1', { text: 'etl log\n' });
    await t.ingest.appendLog('ml.train', 'r1', { text: 'ml log\n' });
    const idOf = async (fqn: string) =>
      (await t.store.listPipelines({ limit: 10 })).items.find((p) => p.fqn === fqn)!.id;
    const last = (id: string) =>
      `/compat/openmetadata/api/v1/services/ingestionPipelines/logs/${id}/last`;
    const etl = bearer(await token({ read: ['pipeline:etl.*'] }));
    const byId = await t.app.inject({ url: last(await idOf('etl.daily')), headers: etl });
    expect(byId.statusCode).toBe(200);
    expect(byId.json()).toMatchObject({ ingestion_task: 'etl log\n' });
    // A glob that matches the id's first character but not the pipeline's name.
    const mlId = await idOf('ml.train');
    const idGlob = bearer(await token({ read: [`pipeline:${mlId[0]}*`] }));
    const refused = await t.app.inject({ url: last(mlId), headers: idGlob });
    expect(refused.statusCode).toBe(403);
    expect(refused.body).not.toContain('ml log');
  });
});

describe('the dashboard session', () => {
  it('signs in with a valid token into an HttpOnly, SameSite=Strict cookie that then authenticates', async () => {
    const t = await start();
    const value = await token({ read: ['pipeline:etl.*'] });
    const signIn = await t.app.inject({
      method: 'POST',
      url: '/api/v1/session',
      payload: { token: value },
    });
    expect(signIn.statusCode).toBe(204);
    const cookie = String(signIn.headers['set-cookie']);
    expect(cookie).toMatch(
      /^tailwater_token=[^;]+; Path=\/; HttpOnly; SameSite=Strict; Max-Age=\d+$/,
    );
    const maxAge = Number(/Max-Age=(\d+)/.exec(cookie)![1]);
    expect(maxAge).toBeGreaterThan(3500);
    expect(maxAge).toBeLessThanOrEqual(3600);
    const sent = cookie.split(';')[0]!;
    const who = await t.app.inject({ url: '/api/v1/session', headers: { cookie: sent } });
    expect(who.json()).toMatchObject({
      authentication: true,
      grants: { read: ['pipeline:etl.*'], write: [], admin: false },
    });
    expect((await t.app.inject({ url: RUN, headers: { cookie: sent } })).statusCode).toBe(404);
  });

  it('refuses to sign in with a bad token, setting no cookie, and signs out by clearing it', async () => {
    const t = await start();
    const bad = await t.app.inject({
      method: 'POST',
      url: '/api/v1/session',
      payload: { token: 'not-a-token' },
    });
    expect(bad.statusCode).toBe(401);
    expect(bad.headers['set-cookie']).toBeUndefined();
    expect(
      (await t.app.inject({ method: 'POST', url: '/api/v1/session', payload: { tok: 'x' } }))
        .statusCode,
    ).toBe(400);
    const out = await t.app.inject({ method: 'DELETE', url: '/api/v1/session' });
    expect(out.statusCode).toBe(204);
    expect(String(out.headers['set-cookie'])).toMatch(/^tailwater_token=; .*Max-Age=0$/);
    expect((await t.app.inject({ url: '/api/v1/session' })).statusCode).toBe(401);
  });

  it('says there is no authentication when none is configured', async () => {
    const t = await createTestApp();
    apps.push(t);
    expect((await t.app.inject({ url: '/api/v1/session' })).json()).toEqual({
      authentication: false,
    });
  });
});

describe('the dialects with authentication', () => {
  it("checks a ZenML run's scope against the pipeline its run id resolves to", async () => {
    const t = await start();
    await t.ingest.appendLog('etl.daily', 'zr1', { text: 'x\n' });
    const stream = '/compat/zenml/api/v1/runs/zr1/events/stream';
    const other = bearer(await token({ read: ['pipeline:ml.*'] }));
    const refused = await t.app.inject({ url: stream, headers: other });
    expect(refused.statusCode).toBe(403);
    // The URL named only a run id: the refusal does not name the pipeline behind it.
    expect(refused.body).not.toContain('etl.daily');
    // An unknown run is filed under the zenmlPipeline setting: that is its scope.
    const post = (headers: Record<string, string>) =>
      t.app.inject({
        method: 'POST',
        url: '/compat/zenml/api/v1/runs/new-run/events',
        headers,
        payload: { events: [{ pipeline_run_id: 'new-run', kind: 'k', payload: { text: '{}' } }] },
      });
    expect((await post(bearer(await token({ write: ['pipeline:etl.*'] })))).statusCode).toBe(403);
    expect((await post(bearer(await token({ write: ['pipeline:zenml'] })))).statusCode).toBe(200);
    expect(await t.store.getRun('zenml', 'new-run')).toBeDefined();
  });

  it("checks a Freight deploy's scope against pipeline {app}.{env}, and lists only readable apps", async () => {
    const t = await start();
    await t.ingest.appendLog('web.production', '7', { text: 'deploying\n' });
    await t.ingest.appendLog('billing.production', '3', { text: 'deploying\n' });
    const reader = bearer(await token({ read: ['pipeline:web.*'] }));
    const deploy = '/compat/freight/api/0/deploys/web/production/7/';
    expect((await t.app.inject({ url: deploy, headers: reader })).statusCode).toBe(200);
    expect((await t.app.inject({ url: `${deploy}log/`, headers: reader })).statusCode).toBe(200);
    const billing = '/compat/freight/api/0/deploys/billing/production/3/';
    expect((await t.app.inject({ url: billing, headers: reader })).statusCode).toBe(403);
    const byId = (await t.store.getRun('billing.production', '3'))!.id;
    expect(
      (await t.app.inject({ url: `/compat/freight/api/0/deploys/${byId}/`, headers: reader }))
        .statusCode,
    ).toBe(403);
    const cancel = await t.app.inject({
      method: 'PUT',
      url: deploy,
      headers: reader,
      payload: { status: 'cancelled' },
    });
    expect(cancel.statusCode).toBe(403);
    const apps = await t.app.inject({ url: '/compat/freight/api/0/apps/', headers: reader });
    expect(apps.json<{ name: string }[]>().map((app) => app.name)).toEqual(['web']);
  });

  it("checks the Iceberg stream's scope against its topic", async () => {
    const t = await start();
    const refused = await t.app.inject({
      url: '/compat/iceberg/events',
      headers: bearer(await token({ read: ['topic:other'] })),
    });
    expect(refused.statusCode).toBe(403);
  });
});

describe('cross-origin pages with authentication on', () => {
  it('refuses pages of other loopback ports by default (a cookie is sent to any port), and allows a named one with credentials', async () => {
    const t = await start();
    const reader = bearer(await token({ read: ['*'] }));
    const devServer = { origin: 'http://localhost:5173' };
    const refused = await t.app.inject({
      url: '/api/v1/pipelines',
      headers: { ...reader, ...devServer },
    });
    expect(refused.statusCode).toBe(403);
    expect(refused.json()).toMatchObject({ error: { code: 'TW_FORBIDDEN_ORIGIN' } });
    expect(refused.headers['access-control-allow-origin']).toBeUndefined();

    const named = await start({ allowedOrigins: ['http://localhost:5173'] });
    const allowed = await named.app.inject({
      url: '/api/v1/pipelines',
      headers: { ...reader, ...devServer },
    });
    expect(allowed.statusCode).toBe(200);
    expect(allowed.headers['access-control-allow-origin']).toBe('http://localhost:5173');
    expect(allowed.headers['access-control-allow-credentials']).toBe('true');
  });
});

describe('failed authentications', () => {
  it('answers an address 429 with Retry-After past authFailuresPerMinute bad tokens, even with a good one, and no other address', async () => {
    const t = await start({ authFailuresPerMinute: 3 });
    const good = bearer(await token({ read: ['*'] }));
    for (let i = 0; i < 3; i += 1) {
      expect((await t.app.inject({ url: RUN, headers: bearer(`bad-${i}`) })).statusCode).toBe(401);
    }
    const blocked = await t.app.inject({ url: RUN, headers: good });
    expect(blocked.statusCode).toBe(429);
    expect(blocked.json()).toMatchObject({ error: { code: 'TW_TOO_MANY_AUTH_FAILURES' } });
    expect(Number(blocked.headers['retry-after'])).toBeGreaterThan(0);
    expect(Number(blocked.headers['retry-after'])).toBeLessThanOrEqual(60);
    // Another address is not held to this one's failures.
    const other = await t.app.inject({ url: RUN, headers: good, remoteAddress: '127.0.0.9' });
    expect(other.statusCode).toBe(404);
  });

  it('does not count requests that carry no token', async () => {
    const t = await start({ authFailuresPerMinute: 2 });
    for (let i = 0; i < 5; i += 1) expect((await t.app.inject({ url: RUN })).statusCode).toBe(401);
    const good = bearer(await token({ read: ['*'] }));
    expect((await t.app.inject({ url: RUN, headers: good })).statusCode).toBe(404);
  });
});

describe('writes per token', () => {
  it('answers a token past appendsPerMinutePerToken writes 429 with Retry-After, another token and reads unaffected', async () => {
    const t = await start({ appendsPerMinutePerToken: 3 });
    const sign = (sub: string) =>
      new SignJWT({ tailwater: { read: ['*'], write: ['*'] } })
        .setProtectedHeader({ alg: 'HS256' })
        .setSubject(sub)
        .setExpirationTime('1h')
        .sign(new TextEncoder().encode(SECRET));
    const [busy, calm] = [bearer(await sign('busy-job')), bearer(await sign('calm-job'))];
    const append = (headers: Record<string, string>) =>
      t.app.inject({
        method: 'POST',
        url: `${RUN}/logs`,
        headers: { ...headers, 'content-type': 'text/plain' },
        payload: 'line\n',
      });
    for (let i = 0; i < 3; i += 1) expect((await append(busy)).statusCode).toBe(200);
    const limited = await append(busy);
    expect(limited.statusCode).toBe(429);
    expect(limited.json()).toMatchObject({ error: { code: 'TW_TOO_MANY_APPENDS' } });
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    expect((await append(calm)).statusCode).toBe(200);
    expect((await t.app.inject({ url: RUN, headers: busy })).statusCode).toBe(200);
    // What was refused was not stored: one status entry and four lines.
    expect(
      (await t.store.bounds({ type: 'run', pipeline: 'etl.daily', runId: 'r1' })).lastSeq,
    ).toBe(5);
  });
});

describe('signing in with a token just past its exp', () => {
  it('refuses it with 401 and sets no cookie, though requests still allow for clocks', async () => {
    const t = await start();
    const justExpired = await token(
      { read: ['*'] },
      { expiresIn: Math.floor(Date.now() / 1000) - 5 },
    );
    const signIn = await t.app.inject({
      method: 'POST',
      url: '/api/v1/session',
      payload: { token: justExpired },
    });
    expect(signIn.statusCode).toBe(401);
    expect(signIn.headers['set-cookie']).toBeUndefined();
    expect((await t.app.inject({ url: RUN, headers: bearer(justExpired) })).statusCode).toBe(404);
  });

  it('opens no stream with it (401), so a client reconnecting with it is told to get a new one', async () => {
    const t = await start();
    await t.ingest.appendLog('etl.daily', 'r1', { text: 'x\n' });
    const justExpired = await token(
      { read: ['*'] },
      { expiresIn: Math.floor(Date.now() / 1000) - 5 },
    );
    const stream = await t.app.inject({ url: `${RUN}/stream`, headers: bearer(justExpired) });
    expect(stream.statusCode).toBe(401);
    expect(stream.json()).toMatchObject({ error: { code: 'TW_UNAUTHENTICATED' } });
    expect(stream.json<{ error: { message: string } }>().error.message).toMatch(/expired/);
    expect(t.hub.activeConnections).toBe(0);
  });
});
