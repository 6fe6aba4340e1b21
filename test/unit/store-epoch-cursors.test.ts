import { afterEach, describe, expect, it } from 'vitest';
import { tail } from '../../src/client/tail.js';
import { runKey } from '../../src/model/stream-key.js';
import { runStreamPath } from '../helpers/api.js';
import { liveApps, seedRunningRun } from '../helpers/app.js';
import type { TestApp } from '../helpers/app.js';
import { entryEvents, epochOfId, hasSeq, range, seqs } from '../helpers/sse.js';

// A native cursor carries the store's epoch (docs/API.md, "Streaming"; docs/STORAGE.md): a
// cursor handed out before the database was replaced or restored is answered with `gap reset`
// and the stream from its start, never trusted to number the same entries.

const PIPELINE = 'etl.epoch';
const { start, open, closeAll } = liveApps({ pollSeconds: 0.05, finishGraceSeconds: 0.2 });

afterEach(closeAll);

const path = runStreamPath(PIPELINE, 'r');
const epochOf = async (t: TestApp) => (await t.store.bounds(runKey(PIPELINE, 'r'))).epoch;

describe('cursors and the store epoch', () => {
  it("writes every native id as <seq>-<the store's epoch>", async () => {
    const t = await start();
    const last = await seedRunningRun(t, PIPELINE, 'r', 3);
    const reader = await open(t, path);
    await reader.waitFor(hasSeq(last));
    const epoch = await epochOf(t);
    expect(epoch).toMatch(/^[0-9a-f]{8}$/);
    expect(entryEvents(reader.events).map((event) => event.id)).toEqual(
      range(1, last).map((seq) => `${seq}-${epoch}`),
    );
  });

  it('resumes exactly after a cursor of this epoch, and after a bare seq', async () => {
    const t = await start();
    const last = await seedRunningRun(t, PIPELINE, 'r', 5);
    const epoch = await epochOf(t);
    const withEpoch = await open(t, path, { 'last-event-id': `3-${epoch}` });
    const bare = await open(t, `${path}?after=3`);
    for (const reader of [withEpoch, bare]) {
      await reader.waitFor(hasSeq(last));
      expect(reader.events.some((event) => event.event === 'gap')).toBe(false);
      expect(seqs(reader.events)).toEqual(range(4, last));
    }
  });

  it.each([
    ['Last-Event-ID', (id: string) => [path, { 'last-event-id': id }] as const],
    ['?after=', (id: string) => [`${path}?after=${id}`, {}] as const],
  ])(
    'answers a %s cursor of another epoch with gap reset, then the stream from its start',
    async (_how, request) => {
      const t = await start();
      const last = await seedRunningRun(t, PIPELINE, 'r', 5);
      const other = (await epochOf(t)) === '00000000' ? '00000001' : '00000000';
      const [url, headers] = request(`3-${other}`);
      const reader = await open(t, url, headers);
      await reader.waitFor(hasSeq(last));
      expect(reader.events[0]).toMatchObject({ event: 'gap', data: '{"reason":"reset"}' });
      expect(seqs(reader.events)).toEqual(range(1, last));
    },
  );

  it('answers a cursor from before renewEpoch (a restore) with gap reset, though its seq exists', async () => {
    const t = await start();
    const last = await seedRunningRun(t, PIPELINE, 'r', 5);
    const first = await open(t, path);
    await first.waitFor(hasSeq(last));
    const cursor = entryEvents(first.events).at(2)!.id!;
    first.close();

    const renewed = await t.store.renewEpoch();
    const resumed = await open(t, path, { 'last-event-id': cursor });
    await resumed.waitFor(hasSeq(last));
    expect(resumed.events[0]).toMatchObject({ event: 'gap', data: '{"reason":"reset"}' });
    expect(seqs(resumed.events)).toEqual(range(1, last));
    expect(epochOfId(entryEvents(resumed.events)[0]!.id)).toBe(renewed);
  });

  it('refuses an ?after= that is neither a seq nor <seq>-<epoch> with 400 TW_BAD_CURSOR', async () => {
    const t = await start();
    await seedRunningRun(t, PIPELINE, 'r', 1);
    for (const bad of ['3-', '3-XYZ', '3-0000000', '3-000000000', '-3', '3.5']) {
      const response = await fetch(`${t.url}${path}?after=${encodeURIComponent(bad)}`);
      expect(response.status, bad).toBe(400);
      expect(((await response.json()) as { error: { code: string } }).error.code).toBe(
        'TW_BAD_CURSOR',
      );
    }
  });

  it("the SDK's tail() hands out the cursor with its epoch and resumes from it", async () => {
    const t = await start();
    const last = await seedRunningRun(t, PIPELINE, 'r', 4);
    const epoch = await epochOf(t);
    const cursors: string[] = [];
    for await (const event of tail({ server: t.url, target: { pipeline: PIPELINE, runId: 'r' } })) {
      if (event.type !== 'entry') continue;
      cursors.push(event.cursor);
      if (event.entry.seq === 2) break;
    }
    expect(cursors).toEqual([`1-${epoch}`, `2-${epoch}`]);
    const seen: number[] = [];
    for await (const event of tail({
      server: t.url,
      target: { pipeline: PIPELINE, runId: 'r' },
      after: cursors[1]!,
    })) {
      if (event.type === 'gap') throw new Error('a cursor of this epoch must not be reset');
      if (event.type !== 'entry') continue;
      seen.push(event.entry.seq);
      if (event.entry.seq === last) break;
    }
    expect(seen).toEqual(range(3, last));
  });
});
