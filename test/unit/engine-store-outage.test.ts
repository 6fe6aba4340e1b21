import { afterEach, describe, expect, it, vi } from 'vitest';
import { TailwaterError } from '../../src/model/errors.js';
import { runKey, streamId } from '../../src/model/stream-key.js';
import { runStreamPath } from '../helpers/api.js';
import { appendLogLine, liveApps, seedRunningRun } from '../helpers/app.js';
import type { TestApp } from '../helpers/app.js';
import { hasSeq, range, seqs, watchClosed } from '../helpers/sse.js';
import { sleep, until } from '../helpers/wait.js';

// A store that says it cannot answer for now (TW_STORE_UNAVAILABLE: PostgreSQL restarting) is
// waited out with the stream open, however many reads fail, where any other failure that repeats
// ends the stream with an error frame (engine-rules.test.ts). docs/DEPLOYMENT.md, "What each
// component guarantees".

const PIPELINE = 'etl.daily';
const POLL_SECONDS = 0.05;
const { start, open, closeAll } = liveApps({ pollSeconds: POLL_SECONDS, finishGraceSeconds: 0.2 });

afterEach(async () => {
  vi.restoreAllMocks();
  await closeAll();
});

/** Makes reads of the run `runId` (those `when` picks) answer TW_STORE_UNAVAILABLE until `restore()`. */
function storeGoesAway(
  t: TestApp,
  runId: string,
  when: (options: { afterSeq: number; limit: number }) => boolean = () => true,
) {
  const read = t.store.readEntries.bind(t.store);
  const target = streamId(runKey(PIPELINE, runId));
  let refused = 0;
  const spy = vi.spyOn(t.store, 'readEntries').mockImplementation(async (key, options) => {
    if (streamId(key) === target && when(options)) {
      refused += 1;
      throw new TailwaterError('TW_STORE_UNAVAILABLE', 'PostgreSQL is not answering.');
    }
    return read(key, options);
  });
  return { refused: () => refused, restore: () => spy.mockRestore() };
}

describe('a store that is unavailable for a while', () => {
  it('keeps a live stream open through many failed reads, then delivers everything appended meanwhile', async () => {
    const t = await start();
    await seedRunningRun(t, PIPELINE, 'r', 2);
    const reader = await open(t, runStreamPath(PIPELINE, 'r'));
    const closed = watchClosed(reader);
    await reader.waitFor(hasSeq(3));
    const outage = storeGoesAway(t, 'r');
    const written: number[] = [];
    for (let i = 1; i <= 5; i += 1) written.push(await appendLogLine(t, PIPELINE, 'r', `${i}\n`));
    // Many times the failures that end a stream for any other error.
    await until(() => outage.refused() >= 10, 'ten refused reads', 5_000);
    await sleep(POLL_SECONDS * 1000 * 3);
    expect(closed.closed).toBe(false);
    expect(reader.events.filter((e) => e.event === 'error' || e.event === 'end')).toEqual([]);
    outage.restore();
    await reader.waitFor(hasSeq(written.at(-1)!));
    expect(seqs(reader.events)).toEqual(range(1, written.at(-1)!));
    expect(t.hub.activeConnections).toBe(1);
  });

  it('keeps a viewer catching up from the store open through many failed reads, then it catches up', async () => {
    // No replay buffer and small pages: a viewer starting at 0 pages from the store, and the
    // store goes away once it has read a few pages.
    const t = await start({ replayBufferBytes: 0, readBatchEntries: 5 });
    const last = await seedRunningRun(t, PIPELINE, 'r', 60);
    const outage = storeGoesAway(t, 'r', (options) => options.afterSeq >= 20 && options.limit > 1);
    const reader = await open(t, runStreamPath(PIPELINE, 'r'));
    const closed = watchClosed(reader);
    await until(() => outage.refused() >= 10, 'ten refused reads', 5_000);
    expect(seqs(reader.events).at(-1)).toBeLessThan(last);
    expect(closed.closed).toBe(false);
    expect(reader.events.filter((e) => e.event === 'error' || e.event === 'end')).toEqual([]);
    outage.restore();
    await reader.waitFor(hasSeq(last));
    expect(seqs(reader.events)).toEqual(range(1, last));
  });
});
