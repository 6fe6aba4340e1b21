import { afterEach, describe, expect, it } from 'vitest';
import { runKey } from '../../src/model/stream-key.js';
import { createTestApp } from '../helpers/app.js';
import type { TestApp } from '../helpers/app.js';

// A program's output may hold U+0000, which PostgreSQL's text cannot: every store keeps it as
// U+FFFD, so an append is never refused for it on one backend and taken on another
// (docs/API.md, "Appending"). Runs on every backend pair.

const apps: TestApp[] = [];
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close();
});

const logsPath = '/api/v1/pipelines/etl.nul/runs/r/logs';

describe('log text with a NUL', () => {
  it('is stored with U+FFFD in its place, its size and offset counted as stored', async () => {
    const t = await createTestApp();
    apps.push(t);
    const response = await t.app.inject({
      method: 'POST',
      url: logsPath,
      headers: { 'content-type': 'text/plain; charset=utf-8' },
      payload: 'before\u0000after\n',
    });
    expect(response.statusCode).toBe(200);
    expect(response.json()).toMatchObject({ offset: 0, size: 15, duplicate: false });
    const [line] = await t.store.readEntries(runKey('etl.nul', 'r'), {
      afterSeq: 0,
      limit: 10,
      kinds: ['log'],
    });
    expect(line?.text).toBe('before\uFFFDafter\n');
  });

  it('sent again with its producer id is the same append, acknowledged as a duplicate', async () => {
    const t = await createTestApp();
    apps.push(t);
    const append = () =>
      t.app.inject({
        method: 'POST',
        url: logsPath,
        payload: { text: 'a\u0000b\n', id: 'chunk-1' },
      });
    const first = await append();
    const again = await append();
    expect(first.statusCode).toBe(200);
    expect(again.json()).toMatchObject({ duplicate: true, seq: first.json<{ seq: number }>().seq });
  });
});
