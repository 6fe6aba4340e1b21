import { SignJWT } from 'jose';
import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { SearchIndexer } from '../../src/engine/search-indexer.js';
import type { SearchHit, SearchPage } from '../../src/model/search-result.js';
import { runKey } from '../../src/model/stream-key.js';
import { createTestApp } from '../helpers/app.js';
import type { TestApp } from '../helpers/app.js';

// GET /api/v1/search over HTTP (docs/SEARCH.md, docs/API.md): the answer's shape, every query
// parameter and its refusals, what a token may find (docs/SECURITY.md), and the index's lag.
// What the store finds is the store contract's business (test/unit/search.contract.ts).

const SECRET = 'a-search-test-secret-of-more-than-thirty-two-bytes';
const apps: TestApp[] = [];
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close();
});

async function start(overrides: Record<string, unknown> = {}): Promise<TestApp> {
  const t = await createTestApp(overrides);
  apps.push(t);
  return t;
}

async function catchUp(t: TestApp): Promise<void> {
  await new SearchIndexer(t.store, { intervalSeconds: 1 }).catchUp();
}

const ETL_LOG = [
  'starting etl\n',
  'loading batch 1\n',
  'java.lang.OutOfMemoryError: Java heap space\n',
  'exiting with 1\n',
].join('');
const ML_LOG = 'training zebrafish model\nml OutOfMemoryError on gpu\n';
const OK_LOG = 'étape 1 ok\nall good, no OutOfMemoryError this time\n';

interface Fixture {
  t: TestApp;
  /** The seq of each run's one log entry. */
  seqs: { etlFailed: number; etlOk: number; ml: number; event: number };
}

/**
 * etl.daily/r1 (failed, an OOM on line 3 and an event), etl.daily/r2 (success, an OOM mention
 * on line 2 after a line with a two-byte character) and ml.train/r1 (failed, an OOM on line 2),
 * created in that order, all indexed.
 */
async function fixture(overrides: Record<string, unknown> = {}): Promise<Fixture> {
  const t = await start(overrides);
  await t.ingest.putRun('etl.daily', 'r1', { status: 'running' });
  const etlFailed = (await t.ingest.appendLog('etl.daily', 'r1', { text: ETL_LOG })).seq;
  const event = (
    await t.ingest.appendEvents(runKey('etl.daily', 'r1'), [
      { kind: 'alert', data: { message: 'quota widgetcount exceeded' } },
    ])
  ).seqs[0]!;
  await t.ingest.putRun('etl.daily', 'r1', { status: 'failed' });
  // Times are to the millisecond: r2 must be created after r1 for `since` to tell them apart.
  await new Promise((resolve) => setTimeout(resolve, 5));
  await t.ingest.putRun('etl.daily', 'r2', { status: 'running' });
  const etlOk = (await t.ingest.appendLog('etl.daily', 'r2', { text: OK_LOG })).seq;
  await t.ingest.putRun('etl.daily', 'r2', { status: 'success' });
  await t.ingest.putRun('ml.train', 'r1', { status: 'running' });
  const ml = (await t.ingest.appendLog('ml.train', 'r1', { text: ML_LOG })).seq;
  await t.ingest.putRun('ml.train', 'r1', { status: 'failed' });
  await catchUp(t);
  return { t, seqs: { etlFailed, etlOk, ml, event } };
}

function searchUrl(params: Record<string, string>): string {
  return `/api/v1/search?${new URLSearchParams(params)}`;
}

async function searchOk(
  t: TestApp,
  params: Record<string, string>,
  headers: Record<string, string> = {},
): Promise<SearchPage> {
  const res = await t.app.inject({ url: searchUrl(params), headers });
  expect(res.statusCode, res.body).toBe(200);
  return res.json<SearchPage>();
}

const where = (hit: SearchHit) => `${hit.pipeline}/${hit.runId}:${hit.line ?? `@${hit.seq}`}`;

/** Everything a request could have touched: the fixture's streams and the index. */
async function snapshot(t: TestApp) {
  const keys = [runKey('etl.daily', 'r1'), runKey('etl.daily', 'r2'), runKey('ml.train', 'r1')];
  return {
    bounds: await Promise.all(keys.map((key) => t.store.bounds(key))),
    index: await t.store.searchIndexStatus(),
    runs: await Promise.all([t.store.getRun('etl.daily', 'r1'), t.store.getRun('ml.train', 'r1')]),
  };
}

/** A request that must be refused with the standard error body, leaving the store as it was. */
async function expectRefused(
  t: TestApp,
  options: InjectOptions | string,
  status: number,
  code: string,
): Promise<string> {
  const before = await snapshot(t);
  expect(before.bounds[0]!.lastSeq).toBeGreaterThan(0);
  const res: LightMyRequestResponse = await t.app.inject(options);
  expect({ status: res.statusCode, body: res.json() as unknown }).toEqual({
    status,
    body: { error: { code, message: expect.any(String) as unknown } },
  });
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  const message = res.json<{ error: { message: string } }>().error.message;
  expect(message.length).toBeGreaterThan(0);
  expect(await snapshot(t)).toEqual(before);
  return message;
}

describe('GET /api/v1/search: the answer', () => {
  it('answers each hit with its run, kind, seq, exact line, byte offset, line text and match span, and the index lag', async () => {
    const { t, seqs } = await fixture();
    const page = await searchOk(t, { q: 'outofmemoryerror' });
    expect(Object.keys(page).sort()).toEqual(['hits', 'index']);
    expect(page.index).toEqual({ pendingEntries: 0, lagSeconds: 0 });
    const etlRun = await t.store.getRun('etl.daily', 'r1');
    const okRun = await t.store.getRun('etl.daily', 'r2');
    const mlRun = await t.store.getRun('ml.train', 'r1');
    // Newest runs first.
    expect(page.hits).toEqual([
      {
        pipeline: 'ml.train',
        runId: 'r1',
        runStatus: 'failed',
        runCreatedAt: mlRun!.createdAt,
        kind: 'log',
        seq: seqs.ml,
        line: 2,
        offset: Buffer.byteLength('training zebrafish model\n'),
        text: 'ml OutOfMemoryError on gpu',
        textStart: 0,
        truncated: false,
        matches: [[3, 19]],
      },
      {
        pipeline: 'etl.daily',
        runId: 'r2',
        runStatus: 'success',
        runCreatedAt: okRun!.createdAt,
        kind: 'log',
        seq: seqs.etlOk,
        line: 2,
        // "é" is two bytes: the offset counts bytes, not characters.
        offset: Buffer.byteLength('étape 1 ok\n'),
        text: 'all good, no OutOfMemoryError this time',
        textStart: 0,
        truncated: false,
        matches: [[13, 29]],
      },
      {
        pipeline: 'etl.daily',
        runId: 'r1',
        runStatus: 'failed',
        runCreatedAt: etlRun!.createdAt,
        kind: 'log',
        seq: seqs.etlFailed,
        line: 3,
        offset: Buffer.byteLength('starting etl\nloading batch 1\n'),
        text: 'java.lang.OutOfMemoryError: Java heap space',
        textStart: 0,
        truncated: false,
        matches: [[10, 26]],
      },
    ]);
    expect(new Date(page.hits[0]!.runCreatedAt).toISOString()).toBe(page.hits[0]!.runCreatedAt);
  });

  it('answers an event hit with the event seq, no line or offset, and the match in its data', async () => {
    const { t, seqs } = await fixture();
    const page = await searchOk(t, { q: 'widgetcount' });
    expect(page.hits).toHaveLength(1);
    const hit = page.hits[0]!;
    expect(hit).toMatchObject({
      pipeline: 'etl.daily',
      runId: 'r1',
      runStatus: 'failed',
      kind: 'event',
      seq: seqs.event,
      line: null,
      offset: null,
      truncated: false,
    });
    expect(hit.matches).toHaveLength(1);
    const [from, to] = hit.matches[0]!;
    expect(hit.text.slice(from, to)).toBe('widgetcount');
  });

  it('answers zero hits and no next for text nothing holds', async () => {
    const { t } = await fixture();
    expect(await searchOk(t, { q: 'no-such-phrase-anywhere' })).toEqual({
      hits: [],
      index: { pendingEntries: 0, lagSeconds: 0 },
    });
  });
});

describe('GET /api/v1/search: q and regex', () => {
  it('refuses a missing or empty q with 400 TW_BAD_QUERY', async () => {
    const { t } = await fixture();
    expect(await expectRefused(t, '/api/v1/search', 400, 'TW_BAD_QUERY')).toMatch(/\bq\b/);
    await expectRefused(t, '/api/v1/search?q=', 400, 'TW_BAD_QUERY');
    await expectRefused(t, '/api/v1/search?q=abc&q=def', 400, 'TW_BAD_QUERY');
  });

  it('refuses a 2-character q with 400 saying 3 are needed, and takes 3', async () => {
    const { t } = await fixture();
    const message = await expectRefused(t, searchUrl({ q: 'ou' }), 400, 'TW_BAD_QUERY');
    expect(message).toMatch(/3 characters/);
    const page = await searchOk(t, { q: 'gpu' });
    expect(page.hits.map(where)).toEqual(['ml.train/r1:2']);
  });

  it('refuses a q of 1025 characters with 400 and takes one of 1024', async () => {
    const { t } = await fixture();
    const message = await expectRefused(t, searchUrl({ q: 'x'.repeat(1025) }), 400, 'TW_BAD_QUERY');
    expect(message).toMatch(/1024/);
    expect((await searchOk(t, { q: 'x'.repeat(1024) })).hits).toEqual([]);
  });

  it('matches case-insensitively and takes q as plain text unless regex=true', async () => {
    const { t } = await fixture();
    // As plain text, the dots and brackets are themselves: nothing holds "o.t.f".
    expect((await searchOk(t, { q: 'Out.f' })).hits).toEqual([]);
    expect((await searchOk(t, { q: 'Out.f', regex: 'false' })).hits).toEqual([]);
    expect((await searchOk(t, { q: 'JAVA.LANG' })).hits.map(where)).toEqual(['etl.daily/r1:3']);
    const regex = await searchOk(t, { q: 'out\\w+error: java', regex: 'true' });
    expect(regex.hits.map(where)).toEqual(['etl.daily/r1:3']);
    expect(regex.hits[0]!.matches).toEqual([[10, 32]]);
    expect((await searchOk(t, { q: 'out\\w+error: java', regex: '1' })).hits).toHaveLength(1);
  });

  it('takes quotes, operators and wildcards of the index query language in q as plain text', async () => {
    const { t } = await fixture();
    await t.ingest.putRun('etl.daily', 'r5', { status: 'running' });
    await t.ingest.appendLog('etl.daily', 'r5', {
      text: 'say "hi" there\nNEAR(x) AND OR NOT *** a-b-c\n50% of_it\n',
    });
    await catchUp(t);
    const found = async (q: string) => (await searchOk(t, { q })).hits.map(where);
    expect(await found('"hi" there')).toEqual(['etl.daily/r5:1']);
    expect(await found('NEAR(x)')).toEqual(['etl.daily/r5:2']);
    expect(await found('AND OR NOT')).toEqual(['etl.daily/r5:2']);
    expect(await found('***')).toEqual(['etl.daily/r5:2']);
    expect(await found('a-b-c')).toEqual(['etl.daily/r5:2']);
    expect(await found('50% of_it')).toEqual(['etl.daily/r5:3']);
    expect(await found('"""')).toEqual([]);
  });

  it('refuses a regex value other than true or false with 400 naming it', async () => {
    const { t } = await fixture();
    const message = await expectRefused(
      t,
      searchUrl({ q: 'OutOfMemory', regex: 'yes' }),
      400,
      'TW_BAD_QUERY',
    );
    expect(message).toMatch(/regex/);
  });

  it('refuses a regular expression with no 3-character literal with 400 saying the index needs one', async () => {
    const { t } = await fixture();
    for (const q of ['\\d+', '.*', 'a.b', '(abc|.)x']) {
      const message = await expectRefused(t, searchUrl({ q, regex: 'true' }), 400, 'TW_BAD_QUERY');
      expect(message, q).toMatch(/literal of 3 characters/);
      expect(message, q).toMatch(/index/);
    }
  });

  it('refuses a backreference and a malformed regular expression with 400 naming RE2', async () => {
    const { t } = await fixture();
    for (const q of ['(java)\\1', 'Out(OfMemory', 'Out[']) {
      const message = await expectRefused(t, searchUrl({ q, regex: 'true' }), 400, 'TW_BAD_QUERY');
      expect(message, q).toMatch(/RE2/);
    }
  });
});

describe('GET /api/v1/search: filters', () => {
  it('kind=log finds only log lines, kind=event only events, kind=all and no kind both', async () => {
    const { t } = await fixture();
    // "quota" is in etl.daily/r1's event and in etl.daily/r3's log.
    await t.ingest.putRun('etl.daily', 'r3', { status: 'running' });
    await t.ingest.appendLog('etl.daily', 'r3', { text: 'quota line of the log\n' });
    await catchUp(t);
    const kinds = async (kind?: string) =>
      (await searchOk(t, { q: 'quota', ...(kind === undefined ? {} : { kind }) })).hits.map(
        (hit) => `${hit.kind} ${where(hit)}`,
      );
    expect(await kinds('log')).toEqual(['log etl.daily/r3:1']);
    expect(await kinds('event')).toEqual([expect.stringMatching(/^event etl\.daily\/r1:@\d+$/)]);
    expect(await kinds('all')).toEqual(await kinds());
    expect(await kinds()).toHaveLength(2);
    const message = await expectRefused(
      t,
      searchUrl({ q: 'quota', kind: 'bad' }),
      400,
      'TW_BAD_QUERY',
    );
    expect(message).toMatch(/kind/);
  });

  it('status=failed,success keeps only runs of those statuses; a bad status is 400', async () => {
    const { t } = await fixture();
    const statuses = async (status: string) =>
      (await searchOk(t, { q: 'OutOfMemoryError', status })).hits.map(where);
    expect(await statuses('failed')).toEqual(['ml.train/r1:2', 'etl.daily/r1:3']);
    expect(await statuses('success')).toEqual(['etl.daily/r2:2']);
    expect(await statuses('failed,success')).toEqual([
      'ml.train/r1:2',
      'etl.daily/r2:2',
      'etl.daily/r1:3',
    ]);
    expect(await statuses('running')).toEqual([]);
    const message = await expectRefused(
      t,
      searchUrl({ q: 'OutOfMemoryError', status: 'failed,exploded' }),
      400,
      'TW_BAD_QUERY',
    );
    expect(message).toMatch(/exploded/);
  });

  it('pipeline=<glob> keeps only the pipelines it matches', async () => {
    const { t } = await fixture();
    const pipelines = async (pipeline: string) =>
      (await searchOk(t, { q: 'OutOfMemoryError', pipeline })).hits.map(where);
    expect(await pipelines('etl.*')).toEqual(['etl.daily/r2:2', 'etl.daily/r1:3']);
    expect(await pipelines('*.train')).toEqual(['ml.train/r1:2']);
    expect(await pipelines('etl.daily')).toEqual(['etl.daily/r2:2', 'etl.daily/r1:3']);
    expect(await pipelines('etl')).toEqual([]);
    expect(await pipelines('*')).toHaveLength(3);
    // Only `*` is special: `?` and brackets are themselves.
    expect(await pipelines('etl.dail?')).toEqual([]);
    expect(await pipelines('etl.[d]aily')).toEqual([]);
  });

  it('since and until take ISO-8601 times and spans back from now, and refuse anything else', async () => {
    const { t } = await fixture();
    const found = async (params: Record<string, string>) =>
      (await searchOk(t, { q: 'OutOfMemoryError', ...params })).hits.length;
    // Every run was created moments ago.
    expect(await found({ since: '7d' })).toBe(3);
    expect(await found({ since: '30m' })).toBe(3);
    expect(await found({ until: '30m' })).toBe(0);
    expect(await found({ since: '2000-01-01T00:00:00Z' })).toBe(3);
    expect(await found({ since: '2000-01-01' })).toBe(3);
    expect(await found({ until: '2000-01-01T00:00:00Z' })).toBe(0);
    expect(await found({ since: '2999-01-01T00:00:00Z' })).toBe(0);
    expect(await found({ until: '2999-01-01T00:00:00Z' })).toBe(3);
    expect(await found({ since: '1h', until: '2999-01-01T00:00:00+00:00' })).toBe(3);
    // Only the runs created since the second one.
    const okRun = await t.store.getRun('etl.daily', 'r2');
    const since = await searchOk(t, { q: 'OutOfMemoryError', since: okRun!.createdAt });
    expect(since.hits.map(where)).toEqual(['ml.train/r1:2', 'etl.daily/r2:2']);
    for (const [name, value] of [
      ['since', 'yesterday'],
      ['since', '7 days'],
      ['until', '30x'],
      ['until', '2026-13-45T99:99:99Z'],
    ] as const) {
      const message = await expectRefused(
        t,
        searchUrl({ q: 'OutOfMemoryError', [name]: value }),
        400,
        'TW_BAD_QUERY',
      );
      expect(message, value).toContain(name);
      expect(message, value).toContain(value);
    }
  });
});

describe('GET /api/v1/search: pages', () => {
  /** A run with `count` lines holding "pagetoken", all indexed. */
  async function manyHits(count: number): Promise<TestApp> {
    const t = await start();
    await t.ingest.putRun('etl.pages', 'r1', { status: 'running' });
    const log = Array.from({ length: count }, (_, i) => `pagetoken number ${i + 1}\n`).join('');
    await t.ingest.appendLog('etl.pages', 'r1', { text: log });
    await t.ingest.putRun('etl.pages', 'r1', { status: 'success' });
    await catchUp(t);
    return t;
  }

  it('answers 50 hits by default with a next, and at most limit hits otherwise', async () => {
    const t = await manyHits(60);
    const first = await searchOk(t, { q: 'pagetoken' });
    expect(first.hits).toHaveLength(50);
    expect(typeof first.next).toBe('string');
    // Later lines first within a run.
    expect(first.hits[0]!.line).toBe(60);
    expect(first.hits[49]!.line).toBe(11);
    expect((await searchOk(t, { q: 'pagetoken', limit: '500' })).hits).toHaveLength(60);
    expect((await searchOk(t, { q: 'pagetoken', limit: '1' })).hits).toHaveLength(1);
  });

  it('refuses limit 0, 501 and a non-integer with 400 TW_BAD_QUERY', async () => {
    const t = await manyHits(3);
    for (const limit of ['0', '501', 'ten', '-1', '2.5']) {
      const res = await t.app.inject(searchUrl({ q: 'pagetoken', limit }));
      expect(res.statusCode, limit).toBe(400);
      expect(res.json(), limit).toEqual({
        error: { code: 'TW_BAD_QUERY', message: expect.stringContaining('limit') as unknown },
      });
    }
  });

  it('walks every hit exactly once through next, in the order of one big page, ending without next', async () => {
    const t = await manyHits(23);
    const all = (await searchOk(t, { q: 'pagetoken', limit: '500' })).hits;
    expect(all.map((hit) => hit.line)).toEqual(Array.from({ length: 23 }, (_, i) => 23 - i));
    const walked: SearchHit[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await searchOk(t, {
        q: 'pagetoken',
        limit: '5',
        ...(cursor === undefined ? {} : { cursor }),
      });
      expect(page.hits.length).toBeLessThanOrEqual(5);
      walked.push(...page.hits);
      cursor = page.next;
      pages += 1;
    } while (cursor !== undefined && pages < 20);
    expect(cursor).toBeUndefined();
    expect(walked).toEqual(all);
  });

  it('answers the last page without next once every hit was given', async () => {
    const t = await manyHits(60);
    const first = await searchOk(t, { q: 'pagetoken' });
    const second = await searchOk(t, { q: 'pagetoken', cursor: first.next! });
    expect(second.hits.map((hit) => hit.line)).toEqual(
      Array.from({ length: 10 }, (_, i) => 10 - i),
    );
    expect(second.next).toBeUndefined();
  });

  it('answers an empty last page without next after a page that ended on the last hit', async () => {
    const t = await manyHits(4);
    const first = await searchOk(t, { q: 'pagetoken', limit: '4' });
    expect(first.hits.map((hit) => hit.line)).toEqual([4, 3, 2, 1]);
    // A page that fills its limit may offer a next; it must lead to nothing more.
    if (first.next !== undefined) {
      expect(await searchOk(t, { q: 'pagetoken', limit: '4', cursor: first.next })).toEqual({
        hits: [],
        index: { pendingEntries: 0, lagSeconds: 0 },
      });
    }
  });

  it('refuses a cursor it did not give out with 400 TW_BAD_CURSOR', async () => {
    const t = await manyHits(3);
    for (const cursor of ['garbage', Buffer.from('12:x').toString('base64url'), '%%%']) {
      const res = await t.app.inject(searchUrl({ q: 'pagetoken', cursor }));
      expect(res.statusCode, cursor).toBe(400);
      expect(res.json(), cursor).toEqual({
        error: { code: 'TW_BAD_CURSOR', message: expect.any(String) as unknown },
      });
    }
  });

  it('refuses a bad cursor without changing the store', async () => {
    const { t } = await fixture();
    await expectRefused(
      t,
      searchUrl({ q: 'OutOfMemoryError', cursor: 'garbage' }),
      400,
      'TW_BAD_CURSOR',
    );
  });
});

describe('GET /api/v1/search: the index lag', () => {
  it('does not find a line appended since the last indexing pass, says entries are pending, and finds it after catchUp', async () => {
    const { t } = await fixture();
    await t.ingest.putRun('etl.daily', 'r4', { status: 'running' });
    await t.ingest.appendLog('etl.daily', 'r4', { text: 'fresh lagphrase line\n' });
    const before = await searchOk(t, { q: 'lagphrase' });
    expect(before.hits).toEqual([]);
    expect(before.index.pendingEntries).toBeGreaterThan(0);
    expect(before.index.lagSeconds).toBeGreaterThanOrEqual(0);
    await catchUp(t);
    const after = await searchOk(t, { q: 'lagphrase' });
    expect(after.hits.map(where)).toEqual(['etl.daily/r4:1']);
    expect(after.index).toEqual({ pendingEntries: 0, lagSeconds: 0 });
  });
});

describe('GET /api/v1/search with authentication', () => {
  type Claim = { read?: string[]; write?: string[]; admin?: boolean };
  const token = (claim: Claim) =>
    new SignJWT({ tailwater: claim })
      .setProtectedHeader({ alg: 'HS256' })
      .setIssuedAt()
      .setExpirationTime('1h')
      .sign(new TextEncoder().encode(SECRET));
  const bearer = async (claim: Claim) => ({ authorization: `Bearer ${await token(claim)}` });

  it('answers 401 TW_UNAUTHENTICATED without a token, and stores nothing', async () => {
    const { t } = await fixture({ authSecret: SECRET });
    await expectRefused(t, searchUrl({ q: 'OutOfMemoryError' }), 401, 'TW_UNAUTHENTICATED');
    const res = await t.app.inject(searchUrl({ q: 'OutOfMemoryError' }));
    expect(res.headers['www-authenticate']).toBe('Bearer realm="tailwater"');
  });

  it('gives a token reading pipeline:etl.* only the etl.* hits though ml.* runs hold the text', async () => {
    const { t } = await fixture({ authSecret: SECRET });
    const etl = await bearer({ read: ['pipeline:etl.*'] });
    const page = await searchOk(t, { q: 'OutOfMemoryError' }, etl);
    expect(page.hits.map(where)).toEqual(['etl.daily/r2:2', 'etl.daily/r1:3']);
    // An admin sees the ml.train hit too: it is there to be hidden.
    const admin = await searchOk(t, { q: 'OutOfMemoryError' }, await bearer({ admin: true }));
    expect(admin.hits.map(where)).toEqual(['ml.train/r1:2', 'etl.daily/r2:2', 'etl.daily/r1:3']);
  });

  it('gives a token zero hits and no hint when the only matches are in pipelines it may not read', async () => {
    const { t } = await fixture({ authSecret: SECRET });
    const etl = await bearer({ read: ['pipeline:etl.*'] });
    const res = await t.app.inject({ url: searchUrl({ q: 'zebrafish' }), headers: etl });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ hits: [], index: { pendingEntries: 0, lagSeconds: 0 } });
    expect(res.body).not.toContain('ml.train');
    // The same page, one hit at a time, hides it too.
    const one = await t.app.inject({
      url: searchUrl({ q: 'zebrafish', limit: '1' }),
      headers: etl,
    });
    expect(one.json()).toEqual({ hits: [], index: { pendingEntries: 0, lagSeconds: 0 } });
    const admin = await searchOk(t, { q: 'zebrafish' }, await bearer({ admin: true }));
    expect(admin.hits.map(where)).toEqual(['ml.train/r1:1']);
  });

  it('lets any valid token call it: a write-only token gets 200 with zero hits', async () => {
    const { t } = await fixture({ authSecret: SECRET });
    const writer = await bearer({ write: ['pipeline:*'] });
    const res = await t.app.inject({ url: searchUrl({ q: 'OutOfMemoryError' }), headers: writer });
    expect(res.statusCode).toBe(200);
    expect(res.json<SearchPage>().hits).toEqual([]);
    expect(res.json<SearchPage>().next).toBeUndefined();
  });

  it('still refuses a bad query from a valid token with 400', async () => {
    const { t } = await fixture({ authSecret: SECRET });
    const etl = await bearer({ read: ['pipeline:etl.*'] });
    await expectRefused(t, { url: searchUrl({ q: 'ab' }), headers: etl }, 400, 'TW_BAD_QUERY');
  });
});
