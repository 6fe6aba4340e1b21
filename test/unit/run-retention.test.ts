import { afterEach, describe, expect, it } from 'vitest';
import type { Run } from '../../src/model/run.js';
import { loadSettings, SettingsError } from '../../src/model/settings.js';
import { RetentionLoop, runRule, runsToRemove } from '../../src/store/retention.js';
import { runStreamPath } from '../helpers/api.js';
import { liveApps } from '../helpers/app.js';
import type { TestApp } from '../helpers/app.js';
import { closedWithin, endOf, hasSeq } from '../helpers/sse.js';

// Runs kept by pipeline glob (`runRetention`, docs/SEARCH.md "History"): the first matching
// rule applies, `maxRuns` keeps the newest, `maxAgeDays` removes runs that ended before, and a
// run still going is never removed.

const { start, open, closeAll } = liveApps({ pollSeconds: 0.05 });
afterEach(closeAll);

const DAY = 86_400_000;

async function finishedRuns(t: TestApp, pipeline: string, count: number) {
  for (let i = 1; i <= count; i += 1) {
    await t.ingest.appendLog(pipeline, `r${i}`, { text: `run ${i}\n` });
    await t.ingest.putRun(pipeline, `r${i}`, { status: 'success' });
  }
}

const runIds = async (t: TestApp, pipeline: string) =>
  (await t.store.listRuns(pipeline, { limit: 100 })).items.map((run) => run.runId);

function loop(t: TestApp, runRetention: TestApp['settings']['runRetention'], now = Date.now) {
  return new RetentionLoop(
    t.store,
    { ...t.settings, runRetention },
    (error) => {
      throw error;
    },
    now,
    (pipeline, runId) => t.ingest.deleteRun(pipeline, runId),
  );
}

describe('run retention', () => {
  it('keeps the newest maxRuns runs of a pipeline its rule matches, and leaves other pipelines', async () => {
    const t = await start();
    await finishedRuns(t, 'ci.build', 5);
    await finishedRuns(t, 'etl.daily', 3);
    const removed = await loop(t, [{ pipeline: 'ci.*', maxRuns: 2 }]).runOnce();
    expect(removed).toBe(3);
    expect(await runIds(t, 'ci.build')).toEqual(['r5', 'r4']);
    expect(await runIds(t, 'etl.daily')).toEqual(['r3', 'r2', 'r1']);
    const pipeline = (await t.store.listPipelines({ limit: 10 })).items.find(
      (p) => p.fqn === 'ci.build',
    );
    expect(pipeline?.runs).toBe(2);
  });

  it('applies the first rule that matches, so a catch-all comes last', async () => {
    const t = await start();
    await finishedRuns(t, 'ci.build', 4);
    await finishedRuns(t, 'etl.daily', 4);
    await loop(t, [
      { pipeline: 'ci.*', maxRuns: 1 },
      { pipeline: '*', maxRuns: 3 },
    ]).runOnce();
    expect(await runIds(t, 'ci.build')).toEqual(['r4']);
    expect(await runIds(t, 'etl.daily')).toEqual(['r4', 'r3', 'r2']);
  });

  it('removes runs that ended more than maxAgeDays ago, by the time they ended', async () => {
    const t = await start();
    await finishedRuns(t, 'ci.build', 2);
    const inTenDays = () => Date.now() + 10 * DAY;
    expect(await loop(t, [{ pipeline: '*', maxAgeDays: 30 }], inTenDays).runOnce()).toBe(0);
    expect(await runIds(t, 'ci.build')).toEqual(['r2', 'r1']);
    const inFortyDays = () => Date.now() + 40 * DAY;
    expect(await loop(t, [{ pipeline: '*', maxAgeDays: 30 }], inFortyDays).runOnce()).toBe(2);
    expect(await runIds(t, 'ci.build')).toEqual([]);
  });

  it('never removes a run still going, however old or however many newer runs there are', async () => {
    const t = await start();
    await t.ingest.appendLog('ci.build', 'still-going', { text: 'working\n' });
    await finishedRuns(t, 'ci.build', 3);
    const later = () => Date.now() + 365 * DAY;
    await loop(t, [{ pipeline: 'ci.*', maxRuns: 1, maxAgeDays: 1 }], later).runOnce();
    expect(await runIds(t, 'ci.build')).toEqual(['still-going']);
  });

  it("ends a removed run's viewers with end runDeleted, as an admin's delete does", async () => {
    const t = await start();
    await finishedRuns(t, 'ci.build', 2);
    const viewer = await open(t, runStreamPath('ci.build', 'r1'));
    await viewer.waitFor(hasSeq(2));
    await loop(t, [{ pipeline: 'ci.*', maxRuns: 1 }]).runOnce();
    await closedWithin(viewer, 5000);
    expect(endOf(viewer.events)).toMatchObject({ reason: 'runDeleted' });
  });
});

describe('runRetention rules', () => {
  const run = (runId: string, status: Run['status'], endedAt: string | null): Run => ({
    id: runId,
    pipeline: 'p',
    runId,
    status,
    cancelRequested: false,
    createdAt: '2026-01-01T00:00:00.000Z',
    startedAt: '2026-01-01T00:00:00.000Z',
    endedAt,
    lastSeq: 1,
    logBytes: 0,
    meta: {},
  });

  it('picks the first rule whose glob matches the pipeline, or none', () => {
    const settings = {
      ...loadSettings({ env: {} }),
      runRetention: [
        { pipeline: 'ci.*', maxRuns: 1 },
        { pipeline: '*.nightly', maxAgeDays: 7 },
      ],
    };
    expect(runRule('ci.build', settings)).toEqual({ pipeline: 'ci.*', maxRuns: 1 });
    expect(runRule('etl.nightly', settings)).toEqual({ pipeline: '*.nightly', maxAgeDays: 7 });
    expect(runRule('etl.daily', settings)).toBeUndefined();
  });

  it('counts maxRuns from the newest, and skips runs still going without counting them out', () => {
    const runs = [
      run('r4', 'running', null),
      run('r3', 'success', '2026-01-04T00:00:00.000Z'),
      run('r2', 'failed', '2026-01-03T00:00:00.000Z'),
      run('r1', 'success', '2026-01-02T00:00:00.000Z'),
    ];
    expect(
      runsToRemove(runs, { pipeline: '*', maxRuns: 2 }, Date.now()).map((r) => r.runId),
    ).toEqual(['r2', 'r1']);
    const now = Date.parse('2026-01-05T12:00:00.000Z');
    expect(runsToRemove(runs, { pipeline: '*', maxAgeDays: 2 }, now).map((r) => r.runId)).toEqual([
      'r2',
      'r1',
    ]);
  });

  it('reads rules from TAILWATER_RUN_RETENTION as JSON, and refuses one with no limit', () => {
    const rules = [
      { pipeline: 'ci.*', maxAgeDays: 30 },
      { pipeline: '*', maxRuns: 1000 },
    ];
    const settings = loadSettings({ env: { TAILWATER_RUN_RETENTION: JSON.stringify(rules) } });
    expect(settings.runRetention).toEqual(rules);
    expect(loadSettings({ env: {} }).runRetention).toEqual([]);
    expect(() =>
      loadSettings({ env: { TAILWATER_RUN_RETENTION: '[{"pipeline": "ci.*"}]' } }),
    ).toThrow(SettingsError);
    expect(() =>
      loadSettings({ env: { TAILWATER_RUN_RETENTION: '[{"pipeline": "*", "maxRuns": 0}]' } }),
    ).toThrow(/TAILWATER_RUN_RETENTION/);
  });
});
