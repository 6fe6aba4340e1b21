import { SignJWT } from 'jose';
import { afterEach, describe, expect, it } from 'vitest';
import { statsTable } from '../../src/cli/stats.js';
import { runPath } from '../helpers/api.js';
import { createTestApp } from '../helpers/app.js';
import type { TestApp } from '../helpers/app.js';

// What each pipeline's history holds (docs/SEARCH.md, "History"): GET /api/v1/stats, the
// tailwater_pipeline_* gauges of /metrics, and `tailwater stats`' table.

const apps: TestApp[] = [];
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close();
});

async function start(overrides: Record<string, unknown> = {}) {
  const t = await createTestApp(overrides);
  apps.push(t);
  return t;
}

type Stats = {
  pipelines: Array<{ pipeline: string; runs: number; logBytes: number }>;
  next?: string;
};

describe('pipeline stats', () => {
  it('counts each pipeline’s runs and the bytes of their logs, and follows a delete', async () => {
    const t = await start();
    await t.ingest.appendLog('etl.daily', 'r1', { text: 'héllo\n' });
    await t.ingest.appendLog('etl.daily', 'r2', { text: 'a longer line of text\n' });
    await t.ingest.appendEvents({ type: 'run', pipeline: 'ml.train', runId: 'r1' }, [
      { kind: 'metric', data: { loss: 0.1 } },
    ]);
    const first = (await t.app.inject({ url: '/api/v1/stats' })).json<Stats>();
    expect(first.pipelines).toEqual([
      {
        pipeline: 'etl.daily',
        runs: 2,
        logBytes: Buffer.byteLength('héllo\n') + Buffer.byteLength('a longer line of text\n'),
      },
      { pipeline: 'ml.train', runs: 1, logBytes: 0 },
    ]);
    await t.app.inject({ method: 'DELETE', url: runPath('etl.daily', 'r2') });
    const after = (await t.app.inject({ url: '/api/v1/stats' })).json<Stats>();
    expect(after.pipelines[0]).toEqual({
      pipeline: 'etl.daily',
      runs: 1,
      logBytes: Buffer.byteLength('héllo\n'),
    });
  });

  it('pages by pipeline name, each pipeline once', async () => {
    const t = await start();
    for (const fqn of ['a.one', 'b.two', 'c.three', 'd.four', 'e.five']) {
      await t.ingest.appendLog(fqn, 'r1', { text: 'x\n' });
    }
    const seen: string[] = [];
    let after: string | undefined;
    do {
      const page = (
        await t.app.inject({ url: `/api/v1/stats?limit=2${after ? `&after=${after}` : ''}` })
      ).json<Stats>();
      expect(page.pipelines.length).toBeLessThanOrEqual(2);
      seen.push(...page.pipelines.map((p) => p.pipeline));
      after = page.next;
    } while (after !== undefined);
    expect(seen).toEqual(['a.one', 'b.two', 'c.three', 'd.four', 'e.five']);
  });

  it('shows a token only the pipelines it may read', async () => {
    const secret = 'a-test-secret-of-more-than-thirty-two-bytes';
    const t = await start({ authSecret: secret });
    await t.ingest.appendLog('etl.daily', 'r1', { text: 'x\n' });
    await t.ingest.appendLog('ml.secret', 'r1', { text: 'x\n' });
    const token = await new SignJWT({ tailwater: { read: ['pipeline:etl.*'] } })
      .setProtectedHeader({ alg: 'HS256' })
      .setExpirationTime('1h')
      .sign(new TextEncoder().encode(secret));
    const answer = await t.app.inject({
      url: '/api/v1/stats',
      headers: { authorization: `Bearer ${token}` },
    });
    expect(answer.json<Stats>().pipelines.map((p) => p.pipeline)).toEqual(['etl.daily']);
    expect(answer.body).not.toContain('ml.secret');
    expect((await t.app.inject({ url: '/api/v1/stats' })).statusCode).toBe(401);
  });

  it('reports runs and log bytes per pipeline in /metrics', async () => {
    const t = await start();
    await t.ingest.appendLog('etl.daily', 'r1', { text: 'twelve bytes' });
    const metrics = (await t.app.inject({ url: '/metrics' })).body;
    expect(metrics).toContain('tailwater_pipeline_runs{pipeline="etl.daily"} 1');
    expect(metrics).toContain('tailwater_pipeline_log_bytes{pipeline="etl.daily"} 12');
  });

  it('prints a table with a total line for `tailwater stats`', () => {
    const table = statsTable([
      { pipeline: 'etl.daily', runs: 41, logBytes: 1024 * 1024 },
      { pipeline: 'ml.train', runs: 3, logBytes: 2048 },
    ]);
    const lines = table.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^PIPELINE\s+RUNS\s+LOG$/);
    expect(lines[1]).toMatch(/^etl\.daily\s+41\s+1\.0 MiB$/);
    expect(lines[2]).toMatch(/^ml\.train\s+3\s+2\.0 KiB$/);
    expect(lines[3]).toMatch(/^\(2 pipelines\)\s+44\s+1\.0 MiB$/);
    expect(statsTable([])).toBe('No pipelines yet.\n');
  });
});
