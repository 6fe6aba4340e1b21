import { SignJWT } from 'jose';
import { afterEach, describe, expect, it } from 'vitest';
import { SearchIndexer } from '../../src/engine/search-indexer.js';
import { search } from '../../src/engine/search.js';
import { planSearch } from '../../src/model/search-query.js';
import { runKey, topicKey } from '../../src/model/stream-key.js';
import { RUNS_FEED_TOPIC } from '../../src/store/store.js';
import { runPath, runStreamPath } from '../helpers/api.js';
import { liveApps } from '../helpers/app.js';
import type { TestApp } from '../helpers/app.js';
import { closedWithin, endOf, hasSeq, seqs } from '../helpers/sse.js';

// Deleting a run (docs/SEARCH.md, "History"): DELETE …/runs/{runId} (admin) removes its row,
// entries and search documents; its viewers get `gap retention` then `end runDeleted`; the runs
// feed says so; the run id may be used again, and its seqs never go back.

const { start, open, closeAll } = liveApps({ pollSeconds: 0.05, finishGraceSeconds: 0.2 });
afterEach(closeAll);

const RUN = runPath('etl.daily', 'r1');
const indexAll = (t: TestApp) => new SearchIndexer(t.store, { intervalSeconds: 1 }).catchUp();
const hits = async (t: TestApp, q: string) =>
  (await search(t.store, { plan: planSearch(q, false), limit: 100 })).hits;

async function deleteRun(t: TestApp, path = RUN, headers: Record<string, string> = {}) {
  return t.app.inject({ method: 'DELETE', url: path, headers });
}

describe('deleting a run', () => {
  it('answers 204, and leaves no row, no entries, no hit, and a pipeline count one lower', async () => {
    const t = await start();
    await t.ingest.appendLog('etl.daily', 'r1', { text: 'the deleted needle\n' });
    await t.ingest.appendLog('etl.daily', 'r2', { text: 'the kept needle\n' });
    await indexAll(t);
    expect(await hits(t, 'needle')).toHaveLength(2);

    const answer = await deleteRun(t);
    expect(answer.statusCode).toBe(204);
    expect(answer.body).toBe('');
    expect(await t.store.getRun('etl.daily', 'r1')).toBeUndefined();
    expect((await t.app.inject({ url: RUN })).statusCode).toBe(404);
    // Only its tombstone is left on the stream, and nothing before it can be read.
    const bounds = await t.store.bounds(runKey('etl.daily', 'r1'));
    const left = await t.store.readEntries(runKey('etl.daily', 'r1'), { afterSeq: 0, limit: 10 });
    expect(left.map((entry) => entry.seq)).toEqual([bounds.lastSeq]);
    expect(bounds.firstSeq).toBe(bounds.lastSeq);
    expect(left[0]).toMatchObject({ kind: 'status', data: { deleted: true } });
    const pipeline = (await t.store.listPipelines({ limit: 10 })).items[0]!;
    expect(pipeline).toMatchObject({ fqn: 'etl.daily', runs: 1, lastRun: { runId: 'r2' } });
    await indexAll(t);
    expect((await hits(t, 'needle')).map((hit) => hit.runId)).toEqual(['r2']);
    expect((await t.store.searchIndexStatus()).pendingEntries).toBe(0);
  });

  it('drops a pipeline left with no run from the listing, and says so on the runs feed', async () => {
    const t = await start();
    await t.ingest.appendLog('ml.train', 'only', { text: 'x\n' });
    expect((await deleteRun(t, runPath('ml.train', 'only'))).statusCode).toBe(204);
    expect((await t.store.listPipelines({ limit: 10 })).items).toEqual([]);
    const feed = await t.store.readEntries(topicKey(RUNS_FEED_TOPIC), { afterSeq: 0, limit: 10 });
    expect(feed.at(-1)).toMatchObject({
      kind: 'status',
      data: { pipeline: 'ml.train', runId: 'only', deleted: true },
    });
  });

  it('answers 404 for a run it does not know, and refuses `latest`: a delete names its run', async () => {
    const t = await start();
    await t.ingest.appendLog('etl.daily', 'r1', { text: 'x\n' });
    const unknown = await deleteRun(t, runPath('etl.daily', 'nope'));
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json()).toMatchObject({ error: { code: 'TW_RUN_NOT_FOUND' } });
    expect((await deleteRun(t, runPath('etl.daily', 'latest'))).statusCode).toBe(404);
    expect(await t.store.getRun('etl.daily', 'r1')).toBeDefined();
  });

  it('tells a live viewer: gap retention, then end runDeleted, and the stream closes', async () => {
    const t = await start();
    await t.ingest.appendLog('etl.daily', 'r1', { text: 'one\n' });
    const viewer = await open(t, runStreamPath('etl.daily', 'r1'));
    await viewer.waitFor(hasSeq(2));
    await deleteRun(t);
    await closedWithin(viewer, 5000);
    const names = viewer.events.map((event) => event.event);
    expect(names.slice(-2)).toEqual(['gap', 'end']);
    const gap = JSON.parse(viewer.events.at(-2)!.data) as Record<string, unknown>;
    expect(gap).toMatchObject({ reason: 'retention', fromSeq: 3, toSeq: 3 });
    expect(endOf(viewer.events)).toMatchObject({ reason: 'runDeleted', lastSeq: 3 });
  });

  it('tells a viewer who comes back with a cursor what it missed is gone, then ends', async () => {
    const t = await start();
    for (let i = 0; i < 5; i += 1) await t.ingest.appendLog('etl.daily', 'r1', { text: `${i}\n` });
    await deleteRun(t);
    const viewer = await open(t, runStreamPath('etl.daily', 'r1'), { 'last-event-id': '2' });
    await closedWithin(viewer, 5000);
    expect(seqs(viewer.events)).toEqual([]);
    // What it missed was removed (3–6), and then the tombstone (7): the gaps cover it all.
    const gaps = viewer.events
      .filter((event) => event.event === 'gap')
      .map((event) => JSON.parse(event.data) as { reason: string; fromSeq: number; toSeq: number });
    expect(gaps.every((gap) => gap.reason === 'retention')).toBe(true);
    expect(gaps[0]!.fromSeq).toBe(3);
    expect(gaps.at(-1)!.toSeq).toBe(7);
    expect(gaps.slice(1).every((gap, i) => gap.fromSeq === gaps[i]!.toSeq + 1)).toBe(true);
    expect(viewer.events.at(-1)!.event).toBe('end');
    expect(endOf(viewer.events)).toMatchObject({ reason: 'runDeleted' });
  });

  it("ends OpenMetadata's and ZenML's streams as finished, so their clients do not come back", async () => {
    const t = await start();
    await t.ingest.appendLog('etl.daily', 'zr1', { text: 'x\n' });
    const om = await open(
      t,
      '/compat/openmetadata/api/v1/services/ingestionPipelines/logs/etl.daily/stream/zr1',
    );
    const zenml = await open(t, '/compat/zenml/api/v1/runs/zr1/events/stream');
    await om.waitFor((events) => events.length > 0);
    await deleteRun(t, runPath('etl.daily', 'zr1'));
    await closedWithin(om, 5000);
    await closedWithin(zenml, 5000);
    const complete = JSON.parse(om.events.at(-1)!.data) as Record<string, unknown>;
    expect(complete).toMatchObject({ eventType: 'complete', reason: 'runFinished' });
    expect(zenml.events.at(-1)!.event).toBe('end');
  });

  it('lets the run id be used again: a new run, from line 1, with seqs that never go back', async () => {
    const t = await start();
    await t.ingest.appendLog('etl.daily', 'r1', { text: 'old first\nold second\n' });
    await indexAll(t);
    const before = await t.store.bounds(runKey('etl.daily', 'r1'));
    await deleteRun(t);
    await t.ingest.appendLog('etl.daily', 'r1', { text: 'new first\nnew needle\n' });
    const run = await t.store.getRun('etl.daily', 'r1');
    expect(run).toMatchObject({ status: 'running' });
    const entries = await t.store.readEntries(runKey('etl.daily', 'r1'), {
      afterSeq: 0,
      limit: 10,
    });
    expect(entries[0]!.seq).toBeGreaterThan(before.lastSeq + 1);
    expect(entries.some((entry) => (entry.data as { deleted?: boolean })?.deleted)).toBe(false);
    await indexAll(t);
    const [hit] = await hits(t, 'new needle');
    expect(hit).toMatchObject({ runId: 'r1', line: 2, text: 'new needle' });
    expect(await hits(t, 'old second')).toEqual([]);
    const log = await t.app.inject({ url: `${RUN}/log.txt` });
    expect(log.body).toBe('new first\nnew needle\n');
    // A viewer from the start of the new run sees it whole and is not ended by the old tombstone.
    const viewer = await open(t, runStreamPath('etl.daily', 'r1'));
    await viewer.waitFor((events) => seqs(events).length >= 2);
    expect(viewer.events.some((event) => event.event === 'end')).toBe(false);
  });
});

describe('deleting a run with authentication on', () => {
  const SECRET = 'a-test-secret-of-more-than-thirty-two-bytes';
  const token = (claim: object) =>
    new SignJWT({ tailwater: claim })
      .setProtectedHeader({ alg: 'HS256' })
      .setExpirationTime('1h')
      .sign(new TextEncoder().encode(SECRET));

  it('needs admin: a token that may write the pipeline gets 403 and the run stays', async () => {
    const t = await start({ authSecret: SECRET });
    await t.ingest.appendLog('etl.daily', 'r1', { text: 'x\n' });
    const writer = { authorization: `Bearer ${await token({ read: ['*'], write: ['*'] })}` };
    expect((await deleteRun(t, RUN, writer)).statusCode).toBe(403);
    expect(await t.store.getRun('etl.daily', 'r1')).toBeDefined();
    const admin = { authorization: `Bearer ${await token({ admin: true })}` };
    expect((await deleteRun(t, RUN, admin)).statusCode).toBe(204);
    expect(await t.store.getRun('etl.daily', 'r1')).toBeUndefined();
  });
});
