import type { StreamKey } from '../../src/model/stream-key.js';
import { runKey } from '../../src/model/stream-key.js';
import { planSearch } from '../../src/model/search-query.js';
import { search } from '../../src/engine/search.js';
import type { SealedStoreOptions } from '../../src/store/sealed-store.js';
import type { Store } from '../../src/store/store.js';

/**
 * A history to seal, and everything a reader can ask of it, for the tests that read it through
 * every path before and after sealing (docs/STORAGE.md, "Sealed segments").
 */

export const PIPELINE = 'etl.nightly';

/** Small segments and blocks, so the history spans many of each. */
export const SMALL_SEGMENTS: SealedStoreOptions = {
  segmentBytes: 24_000,
  blockBytes: 4_000,
  level: 3,
  settleMs: 0,
  graceMs: 0,
  cacheMs: 0,
};

/** Indexes everything for search: a run is sealed once the search index holds it. */
export async function indexAll(store: Store): Promise<void> {
  while ((await store.indexForSearch({ maxEntries: 5000, maxBytes: 1 << 20 })).more);
}

/** Lines of the kind real programs print, with some that only a few hold. */
function line(run: number, n: number): string {
  if (n % 997 === 0) return `ERROR rare-needle-${run}-${n} connection reset by peer`;
  if (n % 13 === 0)
    return `2026-12-06T04:00:${String(n % 60).padStart(2, '0')}Z WARN retrying é✓ 𝄞 ${n}`;
  return `2026-12-06T04:00:00Z INFO task ${n} of run ${run} wrote ${n * 37} rows`;
}

/** Writes the runs: finished ones with steps, ids and events among the log; one left running. */
export async function writeHistory(store: Store): Promise<void> {
  for (const run of [1, 2, 3]) {
    const id = `run-${run}`;
    await store.putRun(PIPELINE, id, { status: 'running' });
    let n = 0;
    for (let batch = 0; batch < 40; batch += 1) {
      const chunks = [];
      for (let c = 0; c < 3; c += 1) {
        const lines = Array.from({ length: 7 + ((batch + c) % 5) }, () => line(run, ++n));
        // Some chunks end inside a line: its rest comes with the next append.
        let text = `${lines.join('\n')}\n`;
        if ((batch + c) % 4 === 0) text = text.slice(0, -9);
        chunks.push({ text, ...(c === 1 ? { step: `step-${batch % 3}` } : {}) });
      }
      await store.appendLog(PIPELINE, id, chunks);
      if (batch % 3 === 0) {
        await store.appendEvents(runKey(PIPELINE, id), [
          { kind: 'metric', data: { loss: 1 / (batch + 1) }, id: `m-${batch}` },
          {
            kind: 'commit',
            data: null,
            dataJson: `{"snapshotId": 1234567890123456789${batch % 10}, "note": "exact"}`,
          },
          { kind: 'progress', data: { done: batch, of: 40 }, step: `step-${batch % 3}` },
        ]);
      }
      if (batch === 20) {
        await store.appendLog(PIPELINE, id, [
          { text: `${'x'.repeat(70_000)} long line needle-long\n`, id: `long-${run}` },
        ]);
      }
    }
    await store.putRun(PIPELINE, id, { status: run === 2 ? 'failed' : 'success' });
  }
  // A run of events only.
  await store.putRun(PIPELINE, 'events-only', { status: 'running' });
  await store.appendEvents(
    runKey(PIPELINE, 'events-only'),
    Array.from({ length: 50 }, (_, i) => ({
      kind: 'commit',
      data: { snapshot: i, table: 'db.t' },
    })),
  );
  await store.putRun(PIPELINE, 'events-only', { status: 'success' });
  // A run deleted and made again: its stream holds a tombstone before the new entries.
  await store.appendLog(PIPELINE, 'again', [{ text: 'first life\n' }]);
  await store.putRun(PIPELINE, 'again', { status: 'success' });
  await store.deleteRun(PIPELINE, 'again');
  await store.appendLog(PIPELINE, 'again', [{ text: 'second life\nneedle-again\n' }]);
  await store.putRun(PIPELINE, 'again', { status: 'success' });
  // A run still going: never sealed.
  await store.appendLog(PIPELINE, 'live', [{ text: 'still going needle-live\n' }]);
}

export const KEYS: StreamKey[] = ['run-1', 'run-2', 'run-3', 'events-only', 'again', 'live'].map(
  (id) => runKey(PIPELINE, id),
);

/** Everything a reader can ask of the history, answered by `store`, as plain JSON. */
export async function readEverything(store: Store): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  for (const key of KEYS) {
    const name = key.type === 'run' ? key.runId : key.topic;
    const bounds = await store.bounds(key);
    const { epoch: _epoch, ...counters } = bounds;
    out[`${name} bounds`] = counters;
    const all = await store.readEntries(key, { afterSeq: 0, limit: 100_000 });
    out[`${name} all`] = all;
    for (const afterSeq of [0, 1, 7, 50, 133, bounds.lastSeq - 3]) {
      for (const limit of [1, 17, 500]) {
        out[`${name} after ${afterSeq} limit ${limit}`] = (
          await store.readEntries(key, { afterSeq, limit })
        ).map((e) => e.seq);
      }
      out[`${name} after ${afterSeq} bytes`] = (
        await store.readEntries(key, { afterSeq, limit: 1000, maxBytes: 3000 })
      ).map((e) => e.seq);
      out[`${name} after ${afterSeq} metric`] = await store.readEntries(key, {
        afterSeq,
        limit: 100,
        kinds: ['metric', 'status'],
      });
      out[`${name} after ${afterSeq} log kind`] = (
        await store.readEntries(key, { afterSeq, limit: 100, kinds: ['log'] })
      ).map((e) => e.seq);
      out[`${name} after ${afterSeq} without log`] = await store.readEntries(key, {
        afterSeq,
        limit: 100,
        withoutLog: true,
      });
    }
    for (const n of [1, 2, 10, 99, 1000, 100_000]) {
      out[`${name} nth ${n}`] = await store.nthLatestSeq(key, n);
      out[`${name} nth ${n} log`] = await store.nthLatestSeq(key, n, ['log']);
      out[`${name} nth ${n} metric`] = await store.nthLatestSeq(key, n, ['metric', 'progress']);
    }
    for (const id of ['m-0', 'm-18', 'm-39', 'long-1', 'long-2', 'nope']) {
      out[`${name} id ${id}`] = await store.seqOfProducerId(key, id);
    }
    const total = bounds.logBytes;
    for (const [offset, limit] of [
      [0, 100],
      [0, 1_000_000],
      [5000, 20_000],
      [total - 1, 10],
      [-1, 10],
      [-1, 5000],
      [-1, 100_000],
      [-1, 10_000_000],
    ] as const) {
      out[`${name} log ${offset} ${limit}`] = await store.readLog(key, offset, limit);
    }
    for (const byte of [0, 1, 999, 5000, 70_000, total - 1, total, total + 5]) {
      out[`${name} chunk at ${byte}`] = await store.logChunkAt(key, byte);
    }
    for (const lineNo of [
      0,
      1,
      2,
      3,
      50,
      257,
      1000,
      bounds.logLines,
      bounds.logLines + 1,
      bounds.logLines + 2,
    ]) {
      out[`${name} line ${lineNo}`] = await store.logLineStart(key, lineNo);
    }
  }
  for (const q of [
    'rare-needle',
    'rare-needle-2-997',
    'needle-long',
    'needle',
    'WARN retrying',
    'snapshot',
    'task 1',
    'é✓ 𝄞',
    'loss',
  ]) {
    const plan = planSearch(q, false);
    const pages = [];
    let cursor: string | undefined;
    for (let page = 0; page < 6; page += 1) {
      const answer = await search(store, { plan, limit: 25, cursor });
      pages.push(answer.hits);
      cursor = answer.next;
      if (!cursor) break;
    }
    out[`search ${q}`] = pages;
    out[`documents ${q}`] = (
      await store.searchDocuments({ query: plan.index, limit: 40, kind: 'event' })
    ).map((d) => [d.id, d.seq, d.text]);
  }
  return out;
}
