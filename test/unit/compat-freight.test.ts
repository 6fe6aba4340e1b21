import { afterEach, describe, expect, it } from 'vitest';
import { runKey } from '../../src/model/stream-key.js';
import { liveApps } from '../helpers/app.js';
import type { TestApp } from '../helpers/app.js';

// The Freight dialect (docs/API.md, "Freight"): the deploy-log offset
// API, checked against the original's "hello world" tests byte for byte.

const PIPELINE = 'freight.deploy.web';
const TASK = 'deploy-1234';
const PREFIX = '/compat/freight/api/0';
const NOT_FOUND = '{"error":"Invalid deploy","error_name":"invalid_resource"}';

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

/** The chunks as the original serializes them, dated from the store. */
function expectedChunks(
  stored: Awaited<ReturnType<typeof helloWorld>>['stored'],
  from: number,
  to: number,
) {
  return stored.slice(from, to).map((chunk) => ({
    text: chunk.text,
    date: chunk.time,
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
  it.each([
    ['no params', '', 0, 11, 11],
    ['limit=1', 'limit=1', 0, 1, 1],
    ['limit=1&offset=1', 'limit=1&offset=1', 1, 2, 2],
    ['offset=-1&limit=1', 'offset=-1&limit=1', 10, 11, 11],
    ['offset=-1&limit=11', 'offset=-1&limit=11', 0, 11, 11],
  ])('%s', async (_name, query, from, to, nextOffset) => {
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
      expect(new Date(chunk.date).toISOString()).toBe(chunk.date);
    }
    // offset = the sum of the sizes before it.
    answer.body.chunks.forEach((chunk, i) => expect(chunk.offset).toBe(from + i));

    const link = linkOf(answer.headers);
    expect(link.searchParams.get('cursor')).toBe(String(nextOffset));
    expect(link.pathname).toBe(logPath(TASK));
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
  it('answers an unknown task or deploy with 404 {"error":"Invalid deploy","error_name":"invalid_resource"}', async () => {
    const t = await start();
    await helloWorld(t);
    for (const resource of ['tasks', 'deploys']) {
      const answer = await get(t, logPath('no-such-deploy', '', resource));
      expect(answer.status).toBe(404);
      expect(answer.headers.get('content-type')).toMatch(/^application\/json/);
      expect(answer.text).toBe(NOT_FOUND);
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
  it('answers a page of many megabytes whole, each chunk once and in order, however the reads are cut', async () => {
    const t = await start();
    // 45 appends of 70,001 bytes: chunks of 64 KiB and odd remainders, straddling every MiB.
    const line = `${'x'.repeat(70_000)}\n`;
    for (let i = 0; i < 45; i += 1) await t.ingest.appendLog(PIPELINE, TASK, { text: line });
    const stored = await t.store.readLog(runKey(PIPELINE, TASK), 0, 16 * 1024 * 1024);
    const total = 45 * line.length;
    const whole = await page(t, logPath(TASK, `offset=0&limit=${16 * 1024 * 1024}`));
    expect(whole.body.nextOffset).toBe(total);
    expect(whole.body.chunks.map((c) => [c.offset, c.size])).toEqual(
      stored.map((c) => [c.offset, c.size]),
    );
    expect(whole.body.chunks.map((c) => c.text).join('')).toBe(line.repeat(45));
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
