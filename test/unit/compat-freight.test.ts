import { afterEach, describe, expect, it } from 'vitest';
import type { Run, RunStatus } from '../../src/model/run.js';
import { runKey } from '../../src/model/stream-key.js';
import { liveApps } from '../helpers/app.js';
import type { TestApp } from '../helpers/app.js';
import { sleep } from '../helpers/wait.js';

// The Freight dialect (docs/API.md, "Freight"): the deploy-log offset API, checked against the
// original's "hello world" tests byte for byte, and the deploy itself (details, status, cancel)
// as Freight's UI reads it, where the deploy {app}/{env}#{number} is the run {number} of the
// pipeline {app}.{env}.

const PIPELINE = 'freight.deploy.web';
const TASK = 'deploy-1234';
const PREFIX = '/compat/freight/api/0';
const NOT_FOUND = {
  error: 'Invalid deploy',
  error_name: 'invalid_resource',
  code: 'TW_RUN_NOT_FOUND',
};
/** Freight's time format: naive UTC with six decimals and a literal Z. */
const FREIGHT_DATE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

interface Chunk {
  text: string;
  date: string;
  offset: number;
  size: number;
}
interface LogPage {
  nextOffset: number;
  chunks: Chunk[];
}

const { start, closeAll } = liveApps();

afterEach(closeAll);

const logPath = (id = TASK, query = '', resource = 'tasks') =>
  `${PREFIX}/${resource}/${encodeURIComponent(id)}/log/${query ? `?${query}` : ''}`;

async function get(t: TestApp, path: string) {
  const response = await fetch(`${t.url}${path}`);
  const text = await response.text();
  return { status: response.status, headers: response.headers, text };
}

async function send(t: TestApp, method: string, path: string, body?: unknown) {
  const response = await fetch(`${t.url}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, headers: response.headers, text };
}

async function page(t: TestApp, path: string) {
  const answer = await get(t, path);
  expect(answer.status, answer.text).toBe(200);
  return { ...answer, body: JSON.parse(answer.text) as LogPage };
}

/** The original's fixture: "hello world" as 11 one-character chunks. */
async function helloWorld(t: TestApp) {
  const { run } = await t.ingest.putRun(PIPELINE, TASK, { status: 'running' });
  for (const char of 'hello world') await t.ingest.appendLog(PIPELINE, TASK, { text: char });
  const stored = await t.store.readLog(runKey(PIPELINE, TASK), 0, 1000);
  expect(stored.map((chunk) => chunk.text).join('')).toBe('hello world');
  return { run, stored };
}

/**
 * A time the store wrote (ISO 8601 with milliseconds) as Freight writes it: the same instant with
 * six decimals.
 */
function freightTime(iso: string): string {
  expect(iso).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
  return `${iso.slice(0, -1)}000Z`;
}

/** The chunks as the original serializes them, dated from the store. */
function expectedChunks(
  stored: Awaited<ReturnType<typeof helloWorld>>['stored'],
  from: number,
  to: number,
) {
  return stored.slice(from, to).map((chunk) => ({
    text: chunk.text,
    date: freightTime(chunk.time),
    offset: chunk.offset,
    size: chunk.size,
  }));
}

function linkOf(headers: Headers): URL {
  const link = headers.get('link') ?? '';
  const match = /^<([^>]+)>; rel="next"$/.exec(link);
  expect(match, link).not.toBeNull();
  return new URL(match![1]!, 'http://placeholder');
}

describe("Freight's hello world", () => {
  // Without `limit` (or with limit=0) Freight answers the whole log from `offset`.
  it.each([
    ['no params', '', 0, 11, 11, null],
    ['limit=0', 'limit=0', 0, 11, 11, null],
    ['offset=5 (no limit: the rest of the log)', 'offset=5', 5, 11, 11, null],
    ['offset=-1 (no limit: the whole log)', 'offset=-1', 0, 11, 11, null],
    ['limit=1', 'limit=1', 0, 1, 1, '1'],
    ['limit=1&offset=1', 'limit=1&offset=1', 1, 2, 2, '1'],
    ['offset=-1&limit=1', 'offset=-1&limit=1', 10, 11, 11, '1'],
    ['offset=-1&limit=11', 'offset=-1&limit=11', 0, 11, 11, '11'],
  ])('%s', async (_name, query, from, to, nextOffset, linkLimit) => {
    const t = await start();
    const { stored } = await helloWorld(t);
    const answer = await page(t, logPath(TASK, query));

    expect(answer.body).toEqual({ nextOffset, chunks: expectedChunks(stored, from, to) });
    expect(answer.body.chunks.map((chunk) => chunk.text).join('')).toBe(
      'hello world'.slice(from, to),
    );
    for (const chunk of answer.body.chunks) {
      expect(Object.keys(chunk).sort()).toEqual(['date', 'offset', 'size', 'text']);
      expect(chunk.size).toBe(chunk.text.length);
      expect(chunk.date).toMatch(FREIGHT_DATE);
    }
    // offset = the sum of the sizes before it.
    answer.body.chunks.forEach((chunk, i) => expect(chunk.offset).toBe(from + i));

    // The next page starts where this one ended, with the same limit (none when none was given).
    const link = linkOf(answer.headers);
    expect(link.pathname).toBe(logPath(TASK));
    expect(link.searchParams.get('offset')).toBe(String(nextOffset));
    expect(link.searchParams.get('limit')).toBe(linkLimit);
    expect(link.searchParams.get('cursor')).toBe(String(nextOffset));
  });

  it("dates each chunk in Freight's format, at the instant the store gave it", async () => {
    const t = await start();
    const { stored } = await helloWorld(t);
    const answer = await page(t, logPath(TASK));
    expect(answer.body.chunks).toHaveLength(stored.length);
    answer.body.chunks.forEach((chunk, i) => {
      expect(chunk.date).toMatch(FREIGHT_DATE);
      expect(Date.parse(chunk.date)).toBe(Date.parse(stored[i]!.time));
    });
  });

  it("polls a live log as Freight's UI does: the whole log, then from each nextOffset only what is new", async () => {
    const t = await start();
    await helloWorld(t);
    const first = await page(t, logPath(TASK));
    expect(first.body.nextOffset).toBe(11);
    expect(first.body.chunks.map((c) => c.text).join('')).toBe('hello world');

    // Nothing new yet: no chunks, and the same offset to poll from.
    const idle = await page(t, logPath(TASK, `offset=${first.body.nextOffset}`));
    expect(idle.body).toEqual({ nextOffset: 11, chunks: [] });

    await t.ingest.appendLog(PIPELINE, TASK, { text: '!\n' });
    await t.ingest.appendLog(PIPELINE, TASK, { text: 'done\n' });
    const next = await page(t, logPath(TASK, `offset=${idle.body.nextOffset}`));
    expect(next.body.chunks.map((c) => [c.text, c.offset, c.size])).toEqual([
      ['!\n', 11, 2],
      ['done\n', 13, 5],
    ]);
    expect(next.body.nextOffset).toBe(18);
  });

  it('follows the Link header page by page through the whole log', async () => {
    const t = await start();
    await helloWorld(t);
    let path = logPath(TASK, 'limit=2');
    let text = '';
    for (let pages = 0; pages < 20; pages += 1) {
      const answer = await page(t, path);
      if (answer.body.chunks.length === 0) {
        expect(answer.body.nextOffset).toBe(11);
        break;
      }
      text += answer.body.chunks.map((chunk) => chunk.text).join('');
      const link = linkOf(answer.headers);
      path = `${link.pathname}${link.search}`;
    }
    expect(text).toBe('hello world');
  });

  it('returns whole chunks: a chunk is never cut to fit the limit', async () => {
    const t = await start();
    await t.ingest.appendLog(PIPELINE, TASK, { text: 'hello' });
    await t.ingest.appendLog(PIPELINE, TASK, { text: ' world' });
    const first = await page(t, logPath(TASK, 'limit=1'));
    expect(first.body.chunks.map((c) => [c.text, c.offset, c.size])).toEqual([['hello', 0, 5]]);
    expect(first.body.nextOffset).toBe(5);
    const tail = await page(t, logPath(TASK, 'offset=-1&limit=1'));
    expect(tail.body.chunks.map((c) => [c.text, c.offset, c.size])).toEqual([[' world', 5, 6]]);
    expect(tail.body.nextOffset).toBe(11);
  });
});

describe('Freight lookups', () => {
  it('answers an unknown task or deploy with 404 {"error":"Invalid deploy","error_name":"invalid_resource"} and its code', async () => {
    const t = await start();
    await helloWorld(t);
    for (const resource of ['tasks', 'deploys']) {
      const answer = await get(t, logPath('no-such-deploy', '', resource));
      expect(answer.status).toBe(404);
      expect(answer.headers.get('content-type')).toMatch(/^application\/json/);
      expect(JSON.parse(answer.text)).toEqual(NOT_FOUND);
    }
  });

  it('serves the same log under /api/0/deploys/{id}/log/', async () => {
    const t = await start();
    await helloWorld(t);
    for (const query of ['', 'limit=1&offset=1', 'offset=-1&limit=1']) {
      const tasks = await page(t, logPath(TASK, query, 'tasks'));
      const deploys = await page(t, logPath(TASK, query, 'deploys'));
      expect(deploys.body).toEqual(tasks.body);
      expect(linkOf(deploys.headers).searchParams.get('cursor')).toBe(
        String(tasks.body.nextOffset),
      );
    }
  });

  it('finds a run by the UUID the server gave it', async () => {
    const t = await start();
    const { run } = await helloWorld(t);
    const byUuid = await page(t, logPath(run.id));
    const byRunId = await page(t, logPath(TASK));
    expect(byUuid.body).toEqual(byRunId.body);
    expect(byUuid.body.nextOffset).toBe(11);
  });

  it.each([
    ['no params', '', 0],
    ['offset=5', 'offset=5', 5],
    ['offset=-1', 'offset=-1', -1],
  ])(
    'answers a run with no log yet (%s) with chunks [] and nextOffset = the requested offset',
    async (_name, query, nextOffset) => {
      const t = await start();
      await t.ingest.putRun(PIPELINE, TASK, { status: 'queued' });
      const answer = await page(t, logPath(TASK, query));
      expect(answer.body).toEqual({ chunks: [], nextOffset });
      expect(linkOf(answer.headers).searchParams.get('cursor')).toBe(String(nextOffset));
    },
  );

  it('answers past the end of the log with chunks [] and nextOffset = the requested offset', async () => {
    const t = await start();
    await helloWorld(t);
    const answer = await page(t, logPath(TASK, 'offset=11'));
    expect(answer.body).toEqual({ chunks: [], nextOffset: 11 });
  });
});

describe('a long log', () => {
  it('answers a page of many megabytes whole (with a large limit or none), each chunk once and in order, however the reads are cut', async () => {
    const t = await start();
    // 45 appends of 70,001 bytes: chunks of 64 KiB and odd remainders, straddling every MiB.
    const line = `${'x'.repeat(70_000)}\n`;
    for (let i = 0; i < 45; i += 1) await t.ingest.appendLog(PIPELINE, TASK, { text: line });
    const stored = await t.store.readLog(runKey(PIPELINE, TASK), 0, 16 * 1024 * 1024);
    const total = 45 * line.length;
    // A limit above the log, and no limit at all (Freight's whole log): the same whole page.
    for (const query of [`offset=0&limit=${16 * 1024 * 1024}`, '']) {
      const whole = await page(t, logPath(TASK, query));
      expect(whole.body.nextOffset).toBe(total);
      expect(whole.body.chunks.map((c) => [c.offset, c.size])).toEqual(
        stored.map((c) => [c.offset, c.size]),
      );
      expect(whole.body.chunks.map((c) => c.text).join('') === line.repeat(45)).toBe(true);
    }
    // A page that ends inside a chunk holds the chunks that start in it; the next page goes on.
    const limit = 1_500_000;
    const first = await page(t, logPath(TASK, `offset=0&limit=${limit}`));
    const starts = first.body.chunks.map((c) => c.offset);
    expect(starts).toEqual(stored.filter((c) => c.offset < limit).map((c) => c.offset));
    const last = first.body.chunks[first.body.chunks.length - 1]!;
    expect(first.body.nextOffset).toBe(last.offset + last.size);
    const tail = await page(t, logPath(TASK, `offset=-1&limit=${limit}`));
    expect(tail.body.nextOffset).toBe(total);
    expect(
      tail.body.chunks[tail.body.chunks.length - 1]!.offset +
        tail.body.chunks[tail.body.chunks.length - 1]!.size,
    ).toBe(total);
    expect(tail.body.chunks[0]!.offset).toBeLessThanOrEqual(total - limit);
  });
});

// ---- the deploy: {app}/{env}/{number} --------------------------------------------------------

const APP = 'myapp';
const ENV = 'production';
const DEPLOY_PIPELINE = `${APP}.${ENV}`;

interface Deploy {
  id: string;
  name: string;
  app: { id: string; name: string };
  environment: string;
  number: number | string;
  status: string;
  sha: string | null;
  sha_url: string;
  ref: string;
  remote: { name: string; url: string };
  user: { id: string; name: string; dateCreated: string };
  duration: number | null;
  estimatedDuration: number | null;
  dateCreated: string;
  dateStarted: string | null;
  dateFinished: string | null;
}

const deployPath = (number: string, suffix = '/', resource = 'deploys', app = APP, env = ENV) =>
  `${PREFIX}/${resource}/${[app, env, number].map(encodeURIComponent).join('/')}${suffix}`;

async function deploy(t: TestApp, path: string): Promise<Deploy> {
  const answer = await get(t, path);
  expect(answer.status, answer.text).toBe(200);
  expect(answer.headers.get('content-type')).toMatch(/^application\/json/);
  return JSON.parse(answer.text) as Deploy;
}

/** Seconds between two ISO times, to two decimals (Freight's durations). */
const secondsBetween = (from: string, to: string) =>
  Math.round((Date.parse(to) - Date.parse(from)) / 10) / 100;

/** A run that ran for at least `ms` and ended with `status`. */
async function finishedRun(
  t: TestApp,
  runId: string,
  status: RunStatus = 'success',
  ms = 30,
  pipeline = DEPLOY_PIPELINE,
): Promise<Run> {
  await t.ingest.putRun(pipeline, runId, { status: 'running' });
  await sleep(ms);
  return (await t.ingest.putRun(pipeline, runId, { status })).run;
}

describe('a deploy named {app}/{env}/{number}', () => {
  it('serves the log of run {number} of pipeline {app}.{env} under every path Freight uses', async () => {
    const t = await start();
    const { run } = await t.ingest.putRun(DEPLOY_PIPELINE, '7', { status: 'running' });
    for (const char of 'hello world')
      await t.ingest.appendLog(DEPLOY_PIPELINE, '7', { text: char });
    const stored = await t.store.readLog(runKey(DEPLOY_PIPELINE, '7'), 0, 1000);
    const expected = { nextOffset: 11, chunks: expectedChunks(stored, 0, 11) };

    const paths = [
      deployPath('7', '/log/'),
      deployPath('7', '/log'),
      deployPath('7', '/log/', 'tasks'),
      deployPath('7', '/log', 'tasks'),
      `${PREFIX}/deploys/${run.id}/log/`,
      `${PREFIX}/deploys/${run.id}/log`,
      `${PREFIX}/tasks/${run.id}/log/`,
      `${PREFIX}/tasks/${run.id}/log`,
    ];
    for (const path of paths) {
      const answer = await page(t, path);
      expect(answer.body, path).toEqual(expected);
    }
    const tail = await page(t, deployPath('7', '/log/?offset=-1&limit=5'));
    expect(tail.body.chunks.map((c) => c.text).join('')).toBe('world');
  });

  it("links the next page by the deploy's own path, each name percent-encoded", async () => {
    const t = await start();
    const [app, env, number] = ['my app', 'prod é', '7'];
    await t.ingest.appendLog(`${app}.${env}`, number, { text: 'hello\n' });
    for (const resource of ['deploys', 'tasks']) {
      const res = await get(t, deployPath(number, '/log/?offset=0', resource, app, env));
      expect(res.status, res.text).toBe(200);
      expect(res.headers.get('link')).toBe(
        `<${PREFIX}/${resource}/my%20app/prod%20%C3%A9/7/log/?offset=6&cursor=6>; rel="next"`,
      );
      const limited = await get(t, deployPath(number, '/log/?limit=100', resource, app, env));
      expect(limited.headers.get('link')).toBe(
        `<${PREFIX}/${resource}/my%20app/prod%20%C3%A9/7/log/?offset=6&limit=100&cursor=6>; rel="next"`,
      );
    }
  });

  it('answers the details Freight shows: name app/env#number, app, environment, number, user, dates', async () => {
    const t = await start();
    const { run } = await t.ingest.putRun(DEPLOY_PIPELINE, '7', { status: 'running' });
    const answer = await deploy(t, deployPath('7'));
    expect(answer).toEqual({
      id: run.id,
      name: 'myapp/production#7',
      app: { id: expect.any(String), name: APP },
      environment: ENV,
      number: 7,
      status: 'in_progress',
      sha: null,
      sha_url: '',
      ref: '',
      remote: { name: '', url: '' },
      user: { id: 'tailwater', name: 'tailwater', dateCreated: freightTime(run.createdAt) },
      duration: null,
      estimatedDuration: null,
      dateCreated: freightTime(run.createdAt),
      dateStarted: freightTime(run.startedAt!),
      dateFinished: null,
    });
    for (const date of [answer.dateCreated, answer.dateStarted, answer.user.dateCreated]) {
      expect(date).toMatch(FREIGHT_DATE);
    }
  });

  it('answers the same deploy by {app}/{env}/{number}, by its id, under /tasks/, with or without the trailing slash', async () => {
    const t = await start();
    const { run } = await t.ingest.putRun(DEPLOY_PIPELINE, '7', { status: 'running' });
    const expected = await deploy(t, deployPath('7'));
    for (const path of [
      deployPath('7', ''),
      deployPath('7', '/', 'tasks'),
      deployPath('7', '', 'tasks'),
      `${PREFIX}/deploys/${run.id}/`,
      `${PREFIX}/deploys/${run.id}`,
      `${PREFIX}/tasks/${run.id}/`,
    ]) {
      expect(await deploy(t, path), path).toEqual(expected);
    }
  });

  it('keeps a run id that is not a number as the deploy number, a string', async () => {
    const t = await start();
    await t.ingest.putRun(PIPELINE, TASK, { status: 'queued' });
    const byId = await deploy(t, `${PREFIX}/deploys/${TASK}/`);
    expect(byId).toMatchObject({
      name: 'freight.deploy/web#deploy-1234',
      app: { name: 'freight.deploy' },
      environment: 'web',
      number: TASK,
    });
    expect(await deploy(t, deployPath(TASK, '/', 'deploys', 'freight.deploy', 'web'))).toEqual(
      byId,
    );
  });

  it.each([
    ['queued', 'pending'],
    ['running', 'in_progress'],
    ['success', 'finished'],
    ['failed', 'failed'],
    ['partialSuccess', 'failed'],
    ['stopped', 'cancelled'],
    ['cancelled', 'cancelled'],
  ] as const)('shows a %s run as a deploy %s', async (status, freight) => {
    const t = await start();
    await t.ingest.putRun(DEPLOY_PIPELINE, '7', { status });
    expect((await deploy(t, deployPath('7'))).status).toBe(freight);
  });

  it('has no start date while queued, and no finish date or duration until it ends', async () => {
    const t = await start();
    await t.ingest.putRun(DEPLOY_PIPELINE, '7', { status: 'queued' });
    expect(await deploy(t, deployPath('7'))).toMatchObject({
      status: 'pending',
      dateStarted: null,
      dateFinished: null,
      duration: null,
    });
    await t.ingest.putRun(DEPLOY_PIPELINE, '7', { status: 'running' });
    const running = await deploy(t, deployPath('7'));
    expect(running.dateStarted).toMatch(FREIGHT_DATE);
    expect(running).toMatchObject({ dateFinished: null, duration: null });
  });

  it('gives a finished deploy its duration in seconds to two decimals, and the same as its estimate', async () => {
    const t = await start();
    const run = await finishedRun(t, '7', 'success', 60);
    const answer = await deploy(t, deployPath('7'));
    const seconds = secondsBetween(run.startedAt!, run.endedAt!);
    expect(seconds).toBeGreaterThanOrEqual(0.06);
    expect(answer.duration).toBe(seconds);
    // Two decimals: a whole number of hundredths.
    const hundredths = answer.duration! * 100;
    expect(Math.abs(hundredths - Math.round(hundredths))).toBeLessThan(1e-9);
    expect(answer.estimatedDuration).toBe(seconds);
    expect(answer.dateStarted).toBe(freightTime(run.startedAt!));
    expect(answer.dateFinished).toBe(freightTime(run.endedAt!));
  });

  it("estimates a running deploy's duration as the mean of the pipeline's successful runs", async () => {
    const t = await start();
    const done = [
      await finishedRun(t, '1', 'success', 30),
      await finishedRun(t, '2', 'success', 80),
    ];
    // A failed run is no estimate of a deploy that succeeds.
    await finishedRun(t, '3', 'failed', 200);
    await t.ingest.putRun(DEPLOY_PIPELINE, '4', { status: 'running' });
    const durations = done.map((run) => secondsBetween(run.startedAt!, run.endedAt!));
    const mean = Math.round(((durations[0]! + durations[1]!) / 2) * 100) / 100;
    const answer = await deploy(t, deployPath('4'));
    expect(answer.duration).toBeNull();
    expect(answer.estimatedDuration).toBe(mean);
  });

  it("takes the commit, the ref, the remote and the user from the run's meta", async () => {
    const t = await start();
    await t.ingest.putRun(DEPLOY_PIPELINE, '7', {
      status: 'running',
      meta: {
        sha: '0b1c2d3e',
        sha_url: 'https://git.example/myapp/commit/0b1c2d3e',
        ref: 'main',
        remote: 'origin',
        remote_url: 'https://git.example/myapp.git',
        user: 'alice',
      },
    });
    expect(await deploy(t, deployPath('7'))).toMatchObject({
      sha: '0b1c2d3e',
      sha_url: 'https://git.example/myapp/commit/0b1c2d3e',
      ref: 'main',
      remote: { name: 'origin', url: 'https://git.example/myapp.git' },
      user: { id: 'alice', name: 'alice' },
    });
    // A user given as an object is named by its name.
    await t.ingest.putRun(DEPLOY_PIPELINE, '8', {
      status: 'running',
      meta: { user: { name: 'bob', email: 'bob@example.com' } },
    });
    expect((await deploy(t, deployPath('8'))).user).toMatchObject({ id: 'bob', name: 'bob' });
  });

  it.each([
    ['an unknown number', deployPath('99')],
    ['an unknown environment', deployPath('7', '/', 'deploys', APP, 'staging')],
    ['an unknown app', deployPath('7', '/', 'deploys', 'otherapp')],
    ['an unknown id', `${PREFIX}/deploys/no-such-deploy/`],
    ['the log of an unknown number', deployPath('99', '/log/')],
    ['an unknown number under /tasks/', deployPath('99', '/', 'tasks')],
  ])('answers %s with 404 Invalid deploy', async (_what, path) => {
    const t = await start();
    await t.ingest.putRun(DEPLOY_PIPELINE, '7', { status: 'running' });
    const answer = await get(t, path);
    expect(answer.status).toBe(404);
    expect(answer.headers.get('content-type')).toMatch(/^application\/json/);
    expect(JSON.parse(answer.text)).toEqual(NOT_FOUND);
  });

  it("answers every other error in Freight's shape: the message, its name and Tailwater's code", async () => {
    const t = await start();
    await t.ingest.putRun(DEPLOY_PIPELINE, '7', { status: 'running' });
    const badQuery = await get(t, deployPath('7', '/log/?offset=-2'));
    expect(badQuery.status).toBe(400);
    const body = JSON.parse(badQuery.text) as Record<string, unknown>;
    expect(Object.keys(body)).toEqual(['error', 'error_name', 'code']);
    expect(body).toEqual({
      error: expect.stringMatching(/offset/),
      error_name: 'bad_query',
      code: 'TW_BAD_QUERY',
    });
  });
});

describe("Freight's Cancel: PUT {status: cancelled}", () => {
  /** The run's cancel request as its runner sees it: the flag, and the status entry it rode on. */
  async function cancelState(t: TestApp, runId: string) {
    const run = await t.store.getRun(DEPLOY_PIPELINE, runId);
    const entries = await t.store.readEntries(runKey(DEPLOY_PIPELINE, runId), {
      afterSeq: 0,
      limit: 100,
      kinds: ['status'],
    });
    return {
      cancelRequested: run?.cancelRequested,
      status: run?.status,
      statusEntries: entries.map((e) => e.data),
    };
  }

  it("requests the run's cancel, as POST …/cancel does, and answers the deploy", async () => {
    const t = await start();
    const { run } = await t.ingest.putRun(DEPLOY_PIPELINE, '7', { status: 'running' });
    const answer = await send(t, 'PUT', deployPath('7'), { status: 'cancelled' });
    expect(answer.status, answer.text).toBe(200);
    const body = JSON.parse(answer.text) as Deploy;
    expect(body).toMatchObject({ id: run.id, name: 'myapp/production#7', number: 7 });
    // Still running until its runner stops the command; the request is what changed.
    expect(body.status).toBe('in_progress');

    // The same as the native cancel of a twin run.
    await t.ingest.putRun(DEPLOY_PIPELINE, '8', { status: 'running' });
    const native = await send(t, 'POST', `/api/v1/pipelines/${DEPLOY_PIPELINE}/runs/8/cancel`);
    expect(native.status).toBe(202);
    const viaFreight = await cancelState(t, '7');
    expect(viaFreight).toEqual({
      cancelRequested: true,
      status: 'running',
      statusEntries: [{ status: 'running' }, { status: 'running', cancelRequested: true }],
    });
    expect(viaFreight).toEqual(await cancelState(t, '8'));
  });

  it('cancels by every deploy path: /tasks/, by id, without the trailing slash', async () => {
    const t = await start();
    const runs = await Promise.all(
      ['1', '2', '3'].map(
        async (n) => (await t.ingest.putRun(DEPLOY_PIPELINE, n, { status: 'running' })).run,
      ),
    );
    const paths = [
      deployPath('1', '', 'tasks'),
      `${PREFIX}/deploys/${runs[1]!.id}/`,
      `${PREFIX}/tasks/${runs[2]!.id}`,
    ];
    for (const [i, path] of paths.entries()) {
      const answer = await send(t, 'PUT', path, { status: 'cancelled' });
      expect(answer.status, `${path}: ${answer.text}`).toBe(200);
      expect((await t.store.getRun(DEPLOY_PIPELINE, runs[i]!.runId))!.cancelRequested).toBe(true);
    }
  });

  it.each([
    ['another status', { status: 'finished' }],
    ['no status', {}],
    ['a status that is not a string', { status: 1 }],
    ['not an object', ['cancelled']],
  ])('refuses %s with 400 and requests nothing', async (_what, body) => {
    const t = await start();
    await t.ingest.putRun(DEPLOY_PIPELINE, '7', { status: 'running' });
    const before = await cancelState(t, '7');
    const answer = await send(t, 'PUT', deployPath('7'), body);
    expect(answer.status).toBe(400);
    expect(JSON.parse(answer.text)).toEqual({
      error: expect.any(String),
      error_name: 'bad_request',
      code: 'TW_BAD_REQUEST',
    });
    expect(await cancelState(t, '7')).toEqual(before);
  });

  it.each(['success', 'failed', 'partialSuccess', 'stopped', 'cancelled'] as const)(
    'refuses to cancel a deploy that ended (%s) with 409 and changes nothing',
    async (status) => {
      const t = await start();
      await t.ingest.putRun(DEPLOY_PIPELINE, '7', { status });
      const before = await cancelState(t, '7');
      const answer = await send(t, 'PUT', deployPath('7'), { status: 'cancelled' });
      expect(answer.status).toBe(409);
      expect(JSON.parse(answer.text)).toEqual({
        error: expect.any(String),
        error_name: 'status_conflict',
        code: 'TW_STATUS_CONFLICT',
      });
      expect(await cancelState(t, '7')).toEqual(before);
    },
  );

  it('answers an unknown deploy with 404 Invalid deploy and creates no run', async () => {
    const t = await start();
    const answer = await send(t, 'PUT', deployPath('99'), { status: 'cancelled' });
    expect(answer.status).toBe(404);
    expect(JSON.parse(answer.text)).toEqual(NOT_FOUND);
    expect(await t.store.getRun(DEPLOY_PIPELINE, '99')).toBeUndefined();
  });
});
