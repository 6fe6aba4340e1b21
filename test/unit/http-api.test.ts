import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import type { Entry } from '../../src/model/entry.js';
import type { Run } from '../../src/model/run.js';
import { runKey, topicKey } from '../../src/model/stream-key.js';
import { RUNS_FEED_TOPIC } from '../../src/store/store.js';
import { runPath } from '../helpers/api.js';
import { createTestApp } from '../helpers/app.js';
import type { TestApp } from '../helpers/app.js';

// The happy paths of the HTTP API, as docs/API.md describes them.

const FQN = 'ingest.daily';
const RUN_PATH = (runId: string, fqn = FQN) => runPath(fqn, runId);
const TEXT_TYPE = { 'content-type': 'text/plain; charset=utf-8' };
const KiB = 1024;

const RUN_FIELDS = [
  'id',
  'pipeline',
  'runId',
  'status',
  'cancelRequested',
  'createdAt',
  'startedAt',
  'endedAt',
  'lastSeq',
  'logBytes',
  'meta',
];

interface EntriesPage {
  entries: Entry[];
  next: number;
  hasMore: boolean;
}

interface LogPage {
  chunks: { offset: number; size: number; text: string }[];
  nextOffset: number;
}

let t: TestApp;

beforeEach(async () => {
  t = await createTestApp({ maxStreamSeconds: 2 });
});

afterEach(async () => {
  await t.close();
});

async function ok<T = unknown>(options: InjectOptions, status = 200): Promise<T> {
  const res: LightMyRequestResponse = await t.app.inject(options);
  if (res.statusCode !== status) {
    throw new Error(`${options.method} ${options.url}: ${res.statusCode} ${res.body}`);
  }
  return res.json() as T;
}

const putRun = (runId: string, body: object, fqn = FQN) =>
  ok<Run>({ method: 'PUT', url: RUN_PATH(runId, fqn), payload: body });

const appendText = (runId: string, text: string, fqn = FQN) =>
  ok<{ seq: number; offset: number; size: number; duplicate?: boolean }>({
    method: 'POST',
    url: `${RUN_PATH(runId, fqn)}/logs`,
    headers: TEXT_TYPE,
    payload: Buffer.from(text, 'utf8'),
  });

const entriesOf = (runId: string, query = '') =>
  ok<EntriesPage>({ method: 'GET', url: `${RUN_PATH(runId)}/entries${query}` });

const logOf = (runId: string, query = '') =>
  ok<LogPage>({ method: 'GET', url: `${RUN_PATH(runId)}/log${query}` });

function isIsoTime(value: unknown): boolean {
  return typeof value === 'string' && new Date(value).toISOString() === value;
}

describe('runs', () => {
  test('PUT creates a run and answers 200 with every field of the run JSON', async () => {
    const run = await putRun('r1', { status: 'running', meta: { owner: 'data-team', tries: 1 } });
    expect(Object.keys(run).sort()).toEqual([...RUN_FIELDS].sort());
    expect(run).toMatchObject({
      pipeline: FQN,
      runId: 'r1',
      status: 'running',
      cancelRequested: false,
      endedAt: null,
      logBytes: 0,
      meta: { owner: 'data-team', tries: 1 },
    });
    expect(isIsoTime(run.createdAt)).toBe(true);
    expect(isIsoTime(run.startedAt)).toBe(true);
    // The status entry the server wrote is the run stream's first entry.
    expect(run.lastSeq).toBe(1);
  });

  test('a queued run has no start time until it runs, and a terminal status sets its end time', async () => {
    const queued = await putRun('r1', { status: 'queued' });
    expect(queued).toMatchObject({ status: 'queued', startedAt: null, endedAt: null, meta: {} });
    const running = await putRun('r1', { status: 'running' });
    expect(isIsoTime(running.startedAt)).toBe(true);
    expect(running.endedAt).toBeNull();
    expect(running.createdAt).toBe(queued.createdAt);
    const done = await putRun('r1', { status: 'success' });
    expect(done.status).toBe('success');
    expect(isIsoTime(done.endedAt)).toBe(true);
    expect(done.startedAt).toBe(running.startedAt);
  });

  test('PUT on an existing run replaces its meta, and keeps it when meta is absent', async () => {
    await putRun('r1', { status: 'running', meta: { a: 1 } });
    expect((await putRun('r1', { status: 'running', meta: { b: 2 } })).meta).toEqual({ b: 2 });
    expect((await putRun('r1', { status: 'failed' })).meta).toEqual({ b: 2 });
  });

  test('GET returns the run as PUT left it', async () => {
    const put = await putRun('r1', { status: 'running', meta: { x: 'y' } });
    expect(await ok<Run>({ method: 'GET', url: RUN_PATH('r1') })).toEqual(put);
  });

  test('each status change writes a status entry to the run stream and to the runs feed', async () => {
    await putRun('r1', { status: 'queued' });
    await putRun('r1', { status: 'running' });
    await putRun('r1', { status: 'running' }); // no change, no entry
    const done = await putRun('r1', { status: 'success' });
    const page = await entriesOf('r1');
    expect(page.entries.map((entry) => [entry.kind, entry.data])).toEqual([
      ['status', { status: 'queued' }],
      ['status', { status: 'running' }],
      ['status', { status: 'success' }],
    ]);
    const feed = await ok<EntriesPage>({ method: 'GET', url: '/api/v1/topics/_runs/entries' });
    expect(feed.entries.map((entry) => entry.kind)).toEqual(['status', 'status', 'status']);
    const { meta: _meta, ...summary } = done;
    expect(feed.entries[2]!.data).toEqual(summary);
  });

  test('a meta over maxEventBytes is refused with 413 TW_META_TOO_LARGE, and nothing is written', async () => {
    await putRun('r1', { status: 'running', meta: { small: true } });
    const before = await t.store.bounds(topicKey(RUNS_FEED_TOPIC));
    const res = await t.app.inject({
      method: 'PUT',
      url: RUN_PATH('r1'),
      payload: { status: 'success', meta: { big: 'x'.repeat(64 * 1024) } },
    });
    expect(res.statusCode).toBe(413);
    expect(res.json()).toMatchObject({
      error: { code: expect.stringMatching(/^TW_(META|BODY)_TOO_LARGE$/) },
    });
    const oneMiB = await t.app.inject({
      method: 'PUT',
      url: RUN_PATH('r1'),
      payload: { status: 'success', meta: { big: 'x'.repeat(1024 * 1024) } },
    });
    expect(oneMiB.statusCode).toBe(413);
    const run = await ok<Run>({ method: 'GET', url: RUN_PATH('r1') });
    expect(run).toMatchObject({ status: 'running', meta: { small: true } });
    expect(await t.store.bounds(topicKey(RUNS_FEED_TOPIC))).toEqual(before);
  });

  test('a meta just under maxEventBytes is kept; a new meta alone writes no status entry', async () => {
    await putRun('r1', { status: 'running' });
    const before = await t.store.bounds(runKey(FQN, 'r1'));
    const meta = { big: 'x'.repeat(64 * 1024 - 20) };
    const run = await putRun('r1', { status: 'running', meta });
    expect(run.meta).toEqual(meta);
    expect(await t.store.bounds(runKey(FQN, 'r1'))).toEqual(before);
  });

  test('"latest" names the newest run of the pipeline', async () => {
    await putRun('first', { status: 'success' });
    await putRun('second', { status: 'running' });
    await putRun('other-pipeline-run', { status: 'running' }, 'other.pipeline');
    const latest = await ok<Run>({ method: 'GET', url: RUN_PATH('latest') });
    expect(latest.runId).toBe('second');
    await appendText('latest', 'to the newest\n');
    expect((await entriesOf('second', '?kinds=log')).entries.map((e) => e.text)).toEqual([
      'to the newest\n',
    ]);
    expect((await logOf('latest')).chunks.map((chunk) => chunk.text)).toEqual(['to the newest\n']);
  });

  test('listing pipelines gives each FQN with its run count and last run', async () => {
    await putRun('a1', { status: 'success' }, 'alpha');
    await putRun('a2', { status: 'running' }, 'alpha');
    await putRun('b1', { status: 'failed' }, 'beta.jobs');
    const { pipelines } = await ok<{ pipelines: { fqn: string; runs: number; lastRun: Run }[] }>({
      method: 'GET',
      url: '/api/v1/pipelines',
    });
    expect(pipelines.map(({ fqn, runs, lastRun }) => [fqn, runs, lastRun.runId])).toEqual([
      ['alpha', 2, 'a2'],
      ['beta.jobs', 1, 'b1'],
    ]);
    expect(Object.keys(pipelines[0]!).sort()).toEqual(['fqn', 'id', 'lastRun', 'runs']);
  });

  test('listing pipelines pages by ?limit and ?after=<next>, ending without a next', async () => {
    for (const name of ['p.c', 'p.a', 'p.e', 'p.b', 'p.d'])
      await putRun('r', { status: 'running' }, name);
    const seen: string[] = [];
    let url = '/api/v1/pipelines?limit=2';
    const pages: number[] = [];
    for (;;) {
      const page = await ok<{ pipelines: { fqn: string }[]; next?: string }>({
        method: 'GET',
        url,
      });
      pages.push(page.pipelines.length);
      seen.push(...page.pipelines.map((p) => p.fqn));
      if (page.next === undefined) break;
      url = `/api/v1/pipelines?limit=2&after=${encodeURIComponent(page.next)}`;
    }
    expect(seen).toEqual(['p.a', 'p.b', 'p.c', 'p.d', 'p.e']);
    expect(pages).toEqual([2, 2, 1]);
  });

  /** Every run id of the pipeline's listing with `query`, read 2 a page by following `next`. */
  const allRunIds = async (query: string) => {
    const ids: string[] = [];
    let after = '';
    for (;;) {
      const page = await ok<{ runs: Run[]; next?: string }>({
        method: 'GET',
        url: `/api/v1/pipelines/${FQN}/runs?limit=2${query}${after}`,
      });
      ids.push(...page.runs.map((run) => run.runId));
      if (page.next === undefined) return ids;
      after = `&after=${encodeURIComponent(page.next)}`;
    }
  };

  test('listing runs pages newest first by ?after=<next>, with or without ?status', async () => {
    for (const id of ['r1', 'r2', 'r3', 'r4', 'r5']) {
      await putRun(id, { status: id === 'r3' ? 'failed' : 'success' });
    }
    const all = allRunIds;
    expect(await all('')).toEqual(['r5', 'r4', 'r3', 'r2', 'r1']);
    expect(await all('&status=success')).toEqual(['r5', 'r4', 'r2', 'r1']);
    const bad = await t.app.inject({
      method: 'GET',
      url: `/api/v1/pipelines/${FQN}/runs?after=nope`,
    });
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toMatchObject({ error: { code: 'TW_BAD_CURSOR' } });
  });

  test('listing pipelines by ?name (text it holds, or a glob) and ?status of the newest run', async () => {
    await putRun('r1', { status: 'failed' }, 'etl.daily');
    await putRun('r2', { status: 'success' }, 'etl.daily');
    await putRun('r1', { status: 'failed' }, 'etl.hourly');
    await putRun('r1', { status: 'running' }, 'ml.daily_train');
    const fqns = async (query: string) =>
      (
        await ok<{ pipelines: { fqn: string }[] }>({
          method: 'GET',
          url: `/api/v1/pipelines?${query}`,
        })
      ).pipelines.map((p) => p.fqn);
    expect(await fqns('name=daily')).toEqual(['etl.daily', 'ml.daily_train']);
    expect(await fqns('name=etl.*')).toEqual(['etl.daily', 'etl.hourly']);
    expect(await fqns('name=*.daily')).toEqual(['etl.daily']);
    expect(await fqns('name=DAILY')).toEqual([]);
    expect(await fqns('status=failed')).toEqual(['etl.hourly']);
    expect(await fqns('name=daily&status=running')).toEqual(['ml.daily_train']);
    expect(await fqns('name=&limit=1&after=etl.daily')).toEqual(['etl.hourly']);
    for (const query of ['status=bogus', `name=${'x'.repeat(257)}`]) {
      const bad = await t.app.inject({ method: 'GET', url: `/api/v1/pipelines?${query}` });
      expect(bad.statusCode, query).toBe(400);
      expect(bad.json(), query).toMatchObject({ error: { code: 'TW_BAD_QUERY' } });
    }
  });

  test('listing runs by ?since and ?until (ISO times or spans back from now), paged', async () => {
    const day = 86_400_000;
    const now = Date.now();
    const clock = vi.spyOn(Date, 'now');
    try {
      for (let i = 0; i < 5; i += 1) {
        clock.mockReturnValue(now - (5 - i) * day); // r0 five days ago … r4 one day ago
        await putRun(`r${i}`, { status: 'success' });
      }
    } finally {
      clock.mockRestore();
    }
    const all = allRunIds;
    const iso = (ms: number) => encodeURIComponent(new Date(ms).toISOString());
    expect(await all(`&since=${iso(now - 3 * day)}`)).toEqual(['r4', 'r3', 'r2']);
    expect(await all(`&until=${iso(now - 3 * day)}`)).toEqual(['r1', 'r0']);
    expect(await all('&since=108h&until=36h')).toEqual(['r3', 'r2', 'r1']);
    expect(await all('&since=1h')).toEqual([]);
    const bad = await t.app.inject({
      method: 'GET',
      url: `/api/v1/pipelines/${FQN}/runs?since=yesterday`,
    });
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toMatchObject({ error: { code: 'TW_BAD_QUERY' } });
  });

  test('a page of runs stops early once its runs carry megabytes of meta, and says where to go on', async () => {
    const meta = { notes: 'm'.repeat(60_000) };
    for (let i = 1; i <= 80; i += 1) await putRun(`r${i}`, { status: 'success', meta });
    const page = await ok<{ runs: Run[]; next?: string }>({
      method: 'GET',
      url: `/api/v1/pipelines/${FQN}/runs?limit=1000`,
    });
    expect(page.runs.length).toBeLessThan(80);
    expect(page.runs.length).toBeGreaterThan(0);
    expect(page.next).toBeDefined();
    const rest = await ok<{ runs: Run[]; next?: string }>({
      method: 'GET',
      url: `/api/v1/pipelines/${FQN}/runs?limit=1000&after=${page.next}`,
    });
    expect(page.runs.length + rest.runs.length).toBe(80);
  });

  test('listing topics pages by name, the runs feed among them', async () => {
    await putRun('r1', { status: 'running' });
    for (const topic of ['b', 'a', 'c']) {
      await t.app.inject({
        method: 'POST',
        url: `/api/v1/topics/${topic}/events`,
        payload: { events: [{ kind: 'k', data: 1 }] },
      });
    }
    const first = await ok<{ topics: string[]; next?: string }>({
      method: 'GET',
      url: '/api/v1/topics?limit=3',
    });
    expect(first.topics).toEqual(['_runs', 'a', 'b']);
    const second = await ok<{ topics: string[]; next?: string }>({
      method: 'GET',
      url: `/api/v1/topics?limit=3&after=${first.next}`,
    });
    expect(second).toEqual({ topics: ['c'] });
  });

  test('listing runs is newest first, filtered by ?status and capped by ?limit', async () => {
    await putRun('r1', { status: 'success' });
    await putRun('r2', { status: 'failed' });
    await putRun('r3', { status: 'success' });
    await putRun('r4', { status: 'running' });
    const list = (query: string) =>
      ok<{ runs: Run[] }>({ method: 'GET', url: `/api/v1/pipelines/${FQN}/runs${query}` }).then(
        ({ runs }) => runs.map((run) => run.runId),
      );
    expect(await list('')).toEqual(['r4', 'r3', 'r2', 'r1']);
    expect(await list('?status=success')).toEqual(['r3', 'r1']);
    expect(await list('?limit=2')).toEqual(['r4', 'r3']);
    expect(await list('?status=success&limit=1')).toEqual(['r3']);
    expect(await list('?status=cancelled')).toEqual([]);
  });

  test('a cancel sent with a JSON content type and no body is a cancel, not malformed JSON', async () => {
    await putRun('r1', { status: 'running' });
    const res = await t.app.inject({
      method: 'POST',
      url: `${RUN_PATH('r1')}/cancel`,
      headers: { 'content-type': 'application/json' },
    });
    expect(res.statusCode).toBe(202);
    expect(res.json()).toMatchObject({ cancelRequested: true });
  });

  test('a repeated cancel answers 202 again and writes nothing more', async () => {
    await putRun('r1', { status: 'running' });
    await t.app.inject({ method: 'POST', url: `${RUN_PATH('r1')}/cancel` });
    const before = await t.store.bounds(runKey(FQN, 'r1'));
    const feedBefore = await t.store.bounds(topicKey(RUNS_FEED_TOPIC));
    for (let i = 0; i < 3; i += 1) {
      const again = await t.app.inject({ method: 'POST', url: `${RUN_PATH('r1')}/cancel` });
      expect(again.statusCode).toBe(202);
      expect(again.json()).toMatchObject({ cancelRequested: true });
    }
    expect(await t.store.bounds(runKey(FQN, 'r1'))).toEqual(before);
    expect(await t.store.bounds(topicKey(RUNS_FEED_TOPIC))).toEqual(feedBefore);
  });

  test('cancel answers 202 with cancelRequested true and writes a status entry', async () => {
    await putRun('r1', { status: 'running' });
    const res = await t.app.inject({ method: 'POST', url: `${RUN_PATH('r1')}/cancel` });
    expect(res.statusCode).toBe(202);
    const run = res.json() as Run;
    expect(run).toMatchObject({ runId: 'r1', status: 'running', cancelRequested: true });
    expect((await ok<Run>({ method: 'GET', url: RUN_PATH('r1') })).cancelRequested).toBe(true);
    const last = (await entriesOf('r1')).entries.at(-1)!;
    expect(last).toMatchObject({
      seq: run.lastSeq,
      kind: 'status',
      data: { status: 'running', cancelRequested: true },
    });
    // The runner then reports the end of the run.
    expect((await putRun('r1', { status: 'cancelled' })).status).toBe('cancelled');
  });
});

describe('log appends', () => {
  test('a text/plain append answers {seq, offset, size} in UTF-8 bytes', async () => {
    const first = await appendText('r1', 'héllo ✓\n'); // h é(2) l l o ␠ ✓(3) \n = 11 bytes
    expect(first).toMatchObject({ offset: 0, size: 11 });
    const second = await appendText('r1', '😀 done\n'); // 4 + 6 = 10 bytes
    expect(second).toMatchObject({ seq: first.seq + 1, offset: 11, size: 10 });
    const { entries } = await entriesOf('r1', '?kinds=log');
    expect(entries.map(({ seq, offset, text }) => ({ seq, offset, text }))).toEqual([
      { seq: first.seq, offset: 0, text: 'héllo ✓\n' },
      { seq: second.seq, offset: 11, text: '😀 done\n' },
    ]);
  });

  test('a log append creates the run as running', async () => {
    const { seq } = await appendText('new-run', 'first line\n');
    const run = await ok<Run>({ method: 'GET', url: RUN_PATH('new-run') });
    expect(run).toMatchObject({ status: 'running', logBytes: 11, lastSeq: seq });
    expect(isIsoTime(run.startedAt)).toBe(true);
  });

  test('a JSON append stores its text with its step', async () => {
    const res = await ok<{ seq: number; offset: number; size: number }>({
      method: 'POST',
      url: `${RUN_PATH('r1')}/logs`,
      payload: { text: 'naïve\n', step: 'ingest' },
    });
    expect(res).toMatchObject({ offset: 0, size: 7 });
    const log = (await entriesOf('r1', '?kinds=log')).entries;
    expect(log).toEqual([
      {
        seq: res.seq,
        time: expect.any(String) as unknown,
        kind: 'log',
        offset: 0,
        text: 'naïve\n',
        step: 'ingest',
      },
    ]);
  });

  test('text/plain without a charset and with charset=UTF8 are both taken as UTF-8', async () => {
    await ok({
      method: 'POST',
      url: `${RUN_PATH('r1')}/logs`,
      headers: { 'content-type': 'text/plain' },
      payload: Buffer.from('ça\n', 'utf8'),
    });
    await ok({
      method: 'POST',
      url: `${RUN_PATH('r1')}/logs`,
      headers: { 'content-type': 'text/plain; charset=UTF8' },
      payload: Buffer.from('va\n', 'utf8'),
    });
    expect((await logOf('r1')).chunks.map((chunk) => chunk.text).join('')).toBe('ça\nva\n');
  });

  test('the same append with the same id twice is acknowledged twice and stored once', async () => {
    await appendText('r1', 'before\n');
    const send = () =>
      ok<{ seq: number; offset: number; size: number; duplicate: boolean }>({
        method: 'POST',
        url: `${RUN_PATH('r1')}/logs`,
        payload: { text: 'exactly once ✓\n', id: 'flush-7' },
      });
    const first = await send();
    expect(first.duplicate).toBe(false);
    const bounds = await t.store.bounds(runKey(FQN, 'r1'));
    const second = await send();
    expect(second).toEqual({ ...first, duplicate: true });
    expect(await t.store.bounds(runKey(FQN, 'r1'))).toEqual(bounds);
    const texts = (await entriesOf('r1', '?kinds=log')).entries.map((entry) => entry.text);
    expect(texts).toEqual(['before\n', 'exactly once ✓\n']);
  });

  test('appending to a finished run stores the text and leaves the run finished', async () => {
    await appendText('r1', 'work\n');
    const done = await putRun('r1', { status: 'success' });
    const late = await appendText('r1', 'late flush\n');
    expect(late).toMatchObject({ offset: 5, size: 11 });
    const run = await ok<Run>({ method: 'GET', url: RUN_PATH('r1') });
    expect(run).toMatchObject({ status: 'success', endedAt: done.endedAt, logBytes: 16 });
  });

  test('an append over 64 KiB is split into entries of at most 64 KiB, cut after newlines', async () => {
    await appendText('r1', 'head\n');
    const lines = Array.from(
      { length: 3000 },
      (_, index) => `line ${index} ${'é'.repeat(index % 40)} ${'x'.repeat(index % 23)}\n`,
    );
    const text = lines.join('');
    const total = Buffer.byteLength(text, 'utf8');
    expect(total).toBeGreaterThan(2 * 64 * KiB);

    const res = await appendText('r1', text);
    expect(res).toMatchObject({ offset: 5, size: total });

    const log = (await entriesOf('r1', '?kinds=log&limit=1000')).entries.slice(1);
    expect(log.length).toBeGreaterThanOrEqual(3);
    expect(log.map((entry) => entry.text).join('')).toBe(text);
    expect(log.at(-1)!.seq).toBe(res.seq);
    let offset = 5;
    log.forEach((entry, index) => {
      const size = Buffer.byteLength(entry.text!, 'utf8');
      expect(size).toBeLessThanOrEqual(64 * KiB);
      expect(entry.offset).toBe(offset);
      expect(entry.text!.endsWith('\n')).toBe(true);
      const next = log[index + 1];
      if (next) {
        // Cut after the last newline that fits: the next line would not have fitted.
        const nextLine = next.text!.slice(0, next.text!.indexOf('\n') + 1);
        expect(size + Buffer.byteLength(nextLine, 'utf8')).toBeGreaterThan(64 * KiB);
        expect(next.seq).toBe(entry.seq + 1);
      }
      offset += size;
    });
    expect((await t.store.bounds(runKey(FQN, 'r1'))).logBytes).toBe(5 + total);
  });

  test('an append over 64 KiB without newlines is split without breaking a character', async () => {
    const text = 'aé€😀'.repeat(7000); // 10 bytes each: 70000 bytes, no newline
    const res = await appendText('r1', text);
    expect(res).toMatchObject({ offset: 0, size: 70000 });
    const log = (await entriesOf('r1', '?kinds=log')).entries;
    expect(log.length).toBe(2);
    expect(log.map((entry) => entry.text).join('')).toBe(text);
    expect(log.some((entry) => entry.text!.includes('\ufffd'))).toBe(false);
    expect(Buffer.byteLength(log[0]!.text!, 'utf8')).toBeLessThanOrEqual(64 * KiB);
    expect(log[1]!.offset).toBe(Buffer.byteLength(log[0]!.text!, 'utf8'));
  });

  test('a split append resent with the same id is a duplicate and stores nothing', async () => {
    const text = `${'y'.repeat(100)}\n`.repeat(1500); // 151500 bytes: three entries
    const send = () =>
      ok<{ seq: number; offset: number; size: number; duplicate: boolean }>({
        method: 'POST',
        url: `${RUN_PATH('r1')}/logs`,
        payload: { text, id: 'big-1' },
      });
    const first = await send();
    const bounds = await t.store.bounds(runKey(FQN, 'r1'));
    const second = await send();
    expect(second).toEqual({ ...first, duplicate: true });
    expect(await t.store.bounds(runKey(FQN, 'r1'))).toEqual(bounds);
  });
});

describe('events', () => {
  test('a batch answers {first, last, duplicates} and is stored with every field', async () => {
    const res = await ok<{ first: number; last: number; duplicates: number }>({
      method: 'POST',
      url: `${RUN_PATH('r1')}/events`,
      payload: {
        events: [
          { kind: 'progress', data: { pct: 50 }, step: 'train', correlationId: 'gen-42', id: 'e1' },
          { kind: 'metric:loss', data: 0.25 },
          { kind: 'note', data: null, step: 'eval' },
        ],
      },
    });
    // seq 1 is the status entry of the run the batch created.
    expect(res).toMatchObject({ first: 2, last: 4, duplicates: 0 });
    const { entries } = await entriesOf('r1', '?after=1');
    expect(entries.map(({ time: _time, ...rest }) => rest)).toEqual([
      {
        seq: 2,
        kind: 'progress',
        data: { pct: 50 },
        step: 'train',
        correlationId: 'gen-42',
        id: 'e1',
      },
      { seq: 3, kind: 'metric:loss', data: 0.25 },
      { seq: 4, kind: 'note', data: null, step: 'eval' },
    ]);
    expect((await ok<Run>({ method: 'GET', url: RUN_PATH('r1') })).status).toBe('running');
  });

  test('events with ids already stored are acknowledged with their seqs and not stored again', async () => {
    const url = `${RUN_PATH('r1')}/events`;
    const batch = [
      { kind: 'progress', data: 1, id: 'a' },
      { kind: 'progress', data: 2, id: 'b' },
    ];
    const first = await ok<{ first: number; last: number }>({
      method: 'POST',
      url,
      payload: { events: batch },
    });
    const bounds = await t.store.bounds(runKey(FQN, 'r1'));
    const again = await ok({ method: 'POST', url, payload: { events: batch } });
    expect(again).toMatchObject({ first: first.first, last: first.last, duplicates: 2 });
    expect(await t.store.bounds(runKey(FQN, 'r1'))).toEqual(bounds);

    const mixed = await ok<{ first: number; last: number; duplicates: number }>({
      method: 'POST',
      url,
      payload: { events: [batch[1], { kind: 'progress', data: 3, id: 'c' }] },
    });
    expect(mixed).toMatchObject({ duplicates: 1, last: bounds.lastSeq + 1 });
    expect((await entriesOf('r1', '?kinds=progress')).entries.map((e) => e.id)).toEqual([
      'a',
      'b',
      'c',
    ]);
  });

  test('topic events are numbered per topic and read back from the topic', async () => {
    const url = '/api/v1/topics/iceberg/events';
    const one = await ok({
      method: 'POST',
      url,
      payload: { events: [{ kind: 'iceberg-mutation', data: { table: 't1' }, id: 'm1' }] },
    });
    expect(one).toMatchObject({ first: 1, last: 1, duplicates: 0 });
    const two = await ok({
      method: 'POST',
      url,
      payload: {
        events: [
          { kind: 'iceberg-mutation', data: { table: 't1' }, id: 'm1' },
          { kind: 'iceberg-mutation', data: { table: 't2' }, id: 'm2' },
        ],
      },
    });
    expect(two).toMatchObject({ first: 1, last: 2, duplicates: 1 });
    const page = await ok<EntriesPage>({ method: 'GET', url: '/api/v1/topics/iceberg/entries' });
    expect(page.entries.map((entry) => [entry.seq, entry.data])).toEqual([
      [1, { table: 't1' }],
      [2, { table: 't2' }],
    ]);
    expect(page).toMatchObject({ next: 2, hasMore: false });
    expect((await t.store.bounds(topicKey('other'))).lastSeq).toBe(0);
  });
});

describe('reading entries', () => {
  beforeEach(async () => {
    await putRun('r1', { status: 'running' }); // seq 1
    await ok({
      method: 'POST',
      url: `${RUN_PATH('r1')}/events`,
      payload: {
        events: [
          { kind: 'progress', data: 1 }, // 2
          { kind: 'metric', data: 2 }, // 3
          { kind: 'progress', data: 3 }, // 4
        ],
      },
    });
    await appendText('r1', 'one\n'); // 5
    await appendText('r1', 'two\n'); // 6
  });

  const seqs = (page: EntriesPage) => page.entries.map((entry) => entry.seq);

  test('entries page through with after, limit, next and hasMore', async () => {
    const p1 = await entriesOf('r1', '?limit=2');
    expect([seqs(p1), p1.next, p1.hasMore]).toEqual([[1, 2], 2, true]);
    const p2 = await entriesOf('r1', `?after=${p1.next}&limit=2`);
    expect([seqs(p2), p2.next, p2.hasMore]).toEqual([[3, 4], 4, true]);
    const p3 = await entriesOf('r1', `?after=${p2.next}&limit=2`);
    expect([seqs(p3), p3.next, p3.hasMore]).toEqual([[5, 6], 6, false]);
    const p4 = await entriesOf('r1', `?after=${p3.next}&limit=2`);
    expect([seqs(p4), p4.next, p4.hasMore]).toEqual([[], 6, false]);
  });

  test('without parameters entries come from the start, and ?since= is an alias of ?after=', async () => {
    expect(seqs(await entriesOf('r1'))).toEqual([1, 2, 3, 4, 5, 6]);
    expect(seqs(await entriesOf('r1', '?since=4'))).toEqual([5, 6]);
    expect(await entriesOf('r1', '?after=100')).toEqual({ entries: [], next: 100, hasMore: false });
  });

  test('?kinds filters entries, comma-separated or repeated', async () => {
    expect(seqs(await entriesOf('r1', '?kinds=progress'))).toEqual([2, 4]);
    expect(seqs(await entriesOf('r1', '?kinds=log,metric'))).toEqual([3, 5, 6]);
    expect(seqs(await entriesOf('r1', '?kinds=status&kinds=log'))).toEqual([1, 5, 6]);
    const page = await entriesOf('r1', '?kinds=progress,log&limit=2');
    expect([seqs(page), page.next, page.hasMore]).toEqual([[2, 4], 4, true]);
    const rest = await entriesOf('r1', `?kinds=progress,log&limit=2&after=${page.next}`);
    expect([seqs(rest), rest.next, rest.hasMore]).toEqual([[5, 6], 6, false]);
  });

  test('limit=1000 is accepted', async () => {
    expect(seqs(await entriesOf('r1', '?limit=1000'))).toHaveLength(6);
  });
});

describe('reading the log', () => {
  // Freight's hello-world: eleven one-character appends.
  beforeEach(async () => {
    for (const char of 'hello world') await appendText('hw', char);
  });

  const texts = (page: LogPage) => page.chunks.map((chunk) => chunk.text).join('');

  test('offset=-1&limit=1 returns the last chunk "d" and nextOffset 11', async () => {
    expect(await logOf('hw', '?offset=-1&limit=1')).toEqual({
      chunks: [{ offset: 10, size: 1, text: 'd' }],
      nextOffset: 11,
    });
  });

  test('no parameters return the whole log and nextOffset 11', async () => {
    const page = await logOf('hw');
    expect(texts(page)).toBe('hello world');
    expect(page.chunks).toHaveLength(11);
    expect(page.chunks.map((chunk) => chunk.offset)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(page.nextOffset).toBe(11);
  });

  test('limit=1 returns "h" and nextOffset 1', async () => {
    expect(await logOf('hw', '?limit=1')).toEqual({
      chunks: [{ offset: 0, size: 1, text: 'h' }],
      nextOffset: 1,
    });
  });

  test('limit=1&offset=1 returns "e" and nextOffset 2', async () => {
    expect(await logOf('hw', '?limit=1&offset=1')).toEqual({
      chunks: [{ offset: 1, size: 1, text: 'e' }],
      nextOffset: 2,
    });
  });

  test('offset=-1&limit=11 returns the whole text', async () => {
    const page = await logOf('hw', '?offset=-1&limit=11');
    expect(texts(page)).toBe('hello world');
    expect(page.nextOffset).toBe(11);
  });

  test('reading at the end returns no chunks and keeps the offset', async () => {
    expect(await logOf('hw', '?offset=11')).toEqual({ chunks: [], nextOffset: 11 });
  });

  test('offsets and sizes count UTF-8 bytes', async () => {
    await appendText('mb', 'é');
    await appendText('mb', '😀');
    await appendText('mb', 'z');
    expect((await logOf('mb')).chunks).toEqual([
      { offset: 0, size: 2, text: 'é' },
      { offset: 2, size: 4, text: '😀' },
      { offset: 6, size: 1, text: 'z' },
    ]);
    expect(await logOf('mb', '?offset=-1&limit=5')).toEqual({
      chunks: [
        { offset: 2, size: 4, text: '😀' },
        { offset: 6, size: 1, text: 'z' },
      ],
      nextOffset: 7,
    });
  });

  test('log.txt returns the whole log as a text/plain attachment', async () => {
    await appendText('hw', ' — ✓ 😀\n');
    const res = await t.app.inject({ method: 'GET', url: `${RUN_PATH('hw')}/log.txt` });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain/);
    expect(String(res.headers['content-disposition'])).toMatch(/^attachment/);
    expect(res.rawPayload.toString('utf8')).toBe('hello world — ✓ 😀\n');
  });

  test('log.txt of a log of several megabytes is the whole log, each byte once, in order', async () => {
    // Lines of 70,001 bytes with multi-byte text: pieces of up to 64 KiB that straddle every MiB.
    const line = (i: number) => `${i} ${'例'.repeat(23_330)}\n`;
    let whole = '';
    for (let i = 0; i < 60; i += 1) {
      whole += line(i);
      await appendText('big', line(i));
    }
    expect(Buffer.byteLength(whole)).toBeGreaterThan(4 * 1024 * 1024);
    const res = await t.app.inject({ method: 'GET', url: `${RUN_PATH('big')}/log.txt` });
    expect(res.statusCode).toBe(200);
    expect(res.rawPayload.equals(Buffer.from(whole, 'utf8'))).toBe(true);
  });

  test('log.txt of a run with no log text is empty', async () => {
    await putRun('quiet', { status: 'running' });
    const res = await t.app.inject({ method: 'GET', url: `${RUN_PATH('quiet')}/log.txt` });
    expect(res.statusCode).toBe(200);
    expect(res.body).toBe('');
  });
});

describe('health', () => {
  test('/healthz answers 200', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/healthz' });
    expect(res.statusCode).toBe(200);
  });

  test('/readyz answers 200 when the store is reachable', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/readyz' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ status: 'ready' });
  });
});

describe('names in paths', () => {
  test('a dotted FQN and a run id like scheduled__2026-08-10T00:00:00+00:00 work percent-encoded', async () => {
    const fqn = 'warehouse.ingest.daily_orders';
    const runId = 'scheduled__2026-08-10T00:00:00+00:00';
    const run = await putRun(runId, { status: 'running' }, fqn);
    expect(run).toMatchObject({ pipeline: fqn, runId });
    await appendText(runId, 'scheduled\n', fqn);
    const got = await ok<Run>({ method: 'GET', url: RUN_PATH(runId, fqn) });
    expect(got).toMatchObject({ pipeline: fqn, runId, logBytes: 10 });
    const { runs } = await ok<{ runs: Run[] }>({
      method: 'GET',
      url: `/api/v1/pipelines/${fqn}/runs`,
    });
    expect(runs.map((r) => r.runId)).toEqual([runId]);
  });

  test('the run id written without percent-encoding names the same run', async () => {
    const runId = 'scheduled__2026-08-10T00:00:00+00:00';
    await putRun(runId, { status: 'running' });
    const got = await ok<Run>({ method: 'GET', url: `/api/v1/pipelines/${FQN}/runs/${runId}` });
    expect(got.runId).toBe(runId);
  });

  test('a FQN containing "/" percent-encoded as %2F works', async () => {
    const fqn = 'team/ingest.daily';
    expect(RUN_PATH('r1', fqn)).toContain('team%2Fingest.daily');
    await putRun('r1', { status: 'running' }, fqn);
    await appendText('r1', 'slash\n', fqn);
    const got = await ok<Run>({ method: 'GET', url: RUN_PATH('r1', fqn) });
    expect(got).toMatchObject({ pipeline: fqn, runId: 'r1', logBytes: 6 });
    const log = await ok<LogPage>({ method: 'GET', url: `${RUN_PATH('r1', fqn)}/log` });
    expect(log.chunks.map((chunk) => chunk.text)).toEqual(['slash\n']);
    const { pipelines } = await ok<{ pipelines: { fqn: string }[] }>({
      method: 'GET',
      url: '/api/v1/pipelines',
    });
    expect(pipelines.map((p) => p.fqn)).toEqual([fqn]);
  });

  test('a non-ASCII FQN and a run id of exactly 256 bytes work', async () => {
    const fqn = 'données.quotidiennes';
    const runId = 'é'.repeat(128); // 256 bytes
    const run = await putRun(runId, { status: 'queued' }, fqn);
    expect(run).toMatchObject({ pipeline: fqn, runId });
    expect((await ok<Run>({ method: 'GET', url: RUN_PATH(runId, fqn) })).runId).toBe(runId);
  });
});
