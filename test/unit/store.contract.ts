import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Entry, NewEvent, NewLog } from '../../src/model/entry.js';
import { pipelineId } from '../../src/model/pipeline-id.js';
import type { RunStatus } from '../../src/model/run.js';
import type { StreamKey } from '../../src/model/stream-key.js';
import { runKey, topicKey } from '../../src/model/stream-key.js';
import { canLease } from '../../src/store/lease.js';
import type { ReadEntriesOptions, Store } from '../../src/store/store.js';
import { RUNS_FEED_TOPIC } from '../../src/store/store.js';

export interface StoreUnderTest {
  store: Store;
  /**
   * Opens a new store on the same data. The suite closes `store` first; the factory's `cleanup`
   * must close every store it opened (close is called again on an already closed store).
   */
  reopen?: () => Promise<Store>;
  cleanup: () => Promise<void>;
}

const FEED = topicKey(RUNS_FEED_TOPIC);
const TERMINAL: RunStatus[] = ['success', 'failed', 'partialSuccess', 'stopped', 'cancelled'];
const NON_TERMINAL: RunStatus[] = ['queued', 'running'];

const event = (kind: string, data: unknown, extra: Partial<NewEvent> = {}): NewEvent => ({
  kind,
  data,
  ...extra,
});

/**
 * The guarantees of the `Store` port (src/store/store.ts and docs/API.md), run against every
 * implementation through a factory that gives each test an empty store.
 */
/** Every page of a listing, followed to its end. */
export async function everyPage<T>(
  list: (page: { after?: string; limit: number }) => Promise<{ items: T[]; next?: string }>,
  limit = 1000,
): Promise<T[]> {
  const items: T[] = [];
  let after: string | undefined;
  do {
    const page = await list({ after, limit });
    items.push(...page.items);
    after = page.next;
  } while (after !== undefined);
  return items;
}

export const allPipelines = (store: Store) => everyPage((page) => store.listPipelines(page));
export const allTopics = (store: Store) => everyPage((page) => store.listTopics(page));
export const runsOf = async (
  store: Store,
  pipeline: string,
  options: { status?: RunStatus; limit: number },
) => (await store.listRuns(pipeline, options)).items;

/** readLog's chunks without their append times, which a test cannot know (each is checked). */
async function readLogChunks(store: Store, key: StreamKey, offset: number, limit: number) {
  const chunks = await store.readLog(key, offset, limit);
  for (const chunk of chunks) expect(Number.isNaN(Date.parse(chunk.time))).toBe(false);
  return chunks.map(({ offset: at, size, text }) => ({ offset: at, size, text }));
}

/** A store epoch as every store makes them (docs/STORAGE.md). */
const AN_EPOCH = expect.stringMatching(/^[0-9a-f]{8}$/) as unknown as string;

export function runStoreContract(name: string, makeStore: () => Promise<StoreUnderTest>): void {
  describe(`${name} store contract`, () => {
    let subject: StoreUnderTest;
    let store: Store;

    beforeEach(async () => {
      subject = await makeStore();
      store = subject.store;
    });

    afterEach(async () => {
      await subject.cleanup();
    });

    const all = (key: StreamKey, kinds?: string[]): Promise<Entry[]> =>
      store.readEntries(key, { afterSeq: 0, limit: 1000, kinds });
    const seqsOf = async (key: StreamKey) => (await all(key)).map((entry) => entry.seq);
    const dataOf = async (key: StreamKey) => (await all(key)).map((entry) => entry.data);
    const logTexts = async (pipeline: string, runId: string) =>
      (await all(runKey(pipeline, runId), ['log'])).map((entry) => entry.text);
    const appendOne = (pipeline: string, runId: string, text: string, id?: string) =>
      store.appendLog(pipeline, runId, [id === undefined ? { text } : { text, id }]);

    describe('sequence numbers', () => {
      it('numbers the entries of a new stream 1, 2, 3… without gaps', async () => {
        const key = topicKey('iceberg');
        expect((await store.appendEvents(key, [event('a', 1)])).seqs).toEqual([1]);
        expect((await store.appendEvents(key, [event('a', 2), event('a', 3)])).seqs).toEqual([
          2, 3,
        ]);
        expect((await store.appendEvents(key, [event('a', 4)])).seqs).toEqual([4]);
        expect(await seqsOf(key)).toEqual([1, 2, 3, 4]);
        expect(await dataOf(key)).toEqual([1, 2, 3, 4]);
        expect((await store.bounds(key)).lastSeq).toBe(4);
      });

      it('numbers each stream on its own, however appends interleave', async () => {
        const a = topicKey('a');
        const b = topicKey('b');
        const run = runKey('warehouse.ingest', 'r1');
        await store.appendEvents(a, [event('k', 'a1')]);
        await store.appendEvents(b, [event('k', 'b1'), event('k', 'b2')]);
        await store.appendEvents(a, [event('k', 'a2')]);
        await store.appendEvents(run, [event('k', 'r')]);
        await store.appendEvents(b, [event('k', 'b3')]);
        expect(await seqsOf(a)).toEqual([1, 2]);
        expect(await dataOf(a)).toEqual(['a1', 'a2']);
        expect(await seqsOf(b)).toEqual([1, 2, 3]);
        expect(await dataOf(b)).toEqual(['b1', 'b2', 'b3']);
        // The run's own stream starts with the status entry that created it.
        expect(await seqsOf(run)).toEqual([1, 2]);
      });

      it('numbers log entries and events of one run in a single sequence', async () => {
        await store.putRun('p', 'r', { status: 'running' });
        await appendOne('p', 'r', 'one\n');
        await store.appendEvents(runKey('p', 'r'), [event('progress', { pct: 50 })]);
        await appendOne('p', 'r', 'two\n');
        const entries = await all(runKey('p', 'r'));
        expect(entries.map((entry) => [entry.seq, entry.kind])).toEqual([
          [1, 'status'],
          [2, 'log'],
          [3, 'progress'],
          [4, 'log'],
        ]);
      });

      it('reports the bounds of a stream never written as firstSeq 1, lastSeq 0, logBytes 0', async () => {
        const empty = { firstSeq: 1, lastSeq: 0, logBytes: 0, logLines: 0, epoch: AN_EPOCH };
        expect(await store.bounds(topicKey('nothing-here'))).toEqual(empty);
        expect(await store.bounds(runKey('no.such.pipeline', 'no-run'))).toEqual(empty);
        expect(await all(topicKey('nothing-here'))).toEqual([]);
        expect(await readLogChunks(store, runKey('no.such.pipeline', 'no-run'), 0, 100)).toEqual(
          [],
        );
        expect(await readLogChunks(store, runKey('no.such.pipeline', 'no-run'), -1, 100)).toEqual(
          [],
        );
      });

      it('never goes back in time within a stream, even when the clock does', async () => {
        const key = topicKey('clock');
        await store.appendEvents(key, [event('k', 1)]);
        const [first] = await store.readEntries(key, { afterSeq: 0, limit: 1 });
        // The clock is set an hour back (a replica whose clock is behind, a clock stepped back).
        const behind = Date.parse(first!.time) - 3_600_000;
        const clock = vi.spyOn(Date, 'now').mockReturnValue(behind);
        try {
          await store.appendEvents(key, [event('k', 2)]);
          await store.appendLog('p', 'r', [{ text: 'a line\n' }]);
        } finally {
          clock.mockRestore();
        }
        const entries = await store.readEntries(key, { afterSeq: 0, limit: 5 });
        expect(entries.map((entry) => entry.time)).toEqual([first!.time, first!.time]);
        // A stream with no entries before takes the clock as it is.
        const [line] = await store.readEntries(runKey('p', 'r'), {
          afterSeq: 0,
          limit: 5,
          kinds: ['log'],
        });
        expect(Date.parse(line!.time)).toBe(behind);
      });

      it("carries the store's epoch in every stream's bounds, written or not", async () => {
        await store.appendEvents(topicKey('t'), [event('k', 1)]);
        const { epoch } = await store.bounds(topicKey('t'));
        expect(epoch).toMatch(/^[0-9a-f]{8}$/);
        expect((await store.bounds(topicKey('never-written'))).epoch).toBe(epoch);
        await store.putRun('p', 'r', { status: 'running' });
        expect((await store.bounds(runKey('p', 'r'))).epoch).toBe(epoch);
        expect((await store.bounds(FEED)).epoch).toBe(epoch);
      });

      it('gives the database a new epoch on renewEpoch, and keeps every entry and counter', async () => {
        const key = topicKey('t');
        await store.appendEvents(key, [event('k', 1), event('k', 2)]);
        const before = await store.bounds(key);
        const entries = await all(key);
        const renewed = await store.renewEpoch();
        expect(renewed).toMatch(/^[0-9a-f]{8}$/);
        expect(renewed).not.toBe(before.epoch);
        expect(await store.bounds(key)).toEqual({ ...before, epoch: renewed });
        expect((await store.bounds(topicKey('other'))).epoch).toBe(renewed);
        expect(await all(key)).toEqual(entries);
        expect((await store.appendEvents(key, [event('k', 3)])).seqs).toEqual([3]);
      });

      it('reports the bounds of a written stream as firstSeq 1 and its newest seq', async () => {
        await store.appendEvents(topicKey('t'), [event('k', 1), event('k', 2)]);
        expect(await store.bounds(topicKey('t'))).toEqual({
          firstSeq: 1,
          lastSeq: 2,
          logBytes: 0,
          logLines: 0,
          epoch: AN_EPOCH,
        });
      });
    });

    describe('stored entries', () => {
      it('keeps kind, data, step, correlation id and producer id of an event', async () => {
        const key = topicKey('t');
        await store.appendEvents(key, [
          event(
            'progress',
            { pct: 50, note: '例 😀' },
            { step: 'train', correlationId: 'gen-42', id: 'c0ffee' },
          ),
          event('plain', null),
        ]);
        const [first, second] = await all(key);
        expect(first).toEqual({
          seq: 1,
          time: expect.any(String),
          kind: 'progress',
          data: { pct: 50, note: '例 😀' },
          step: 'train',
          correlationId: 'gen-42',
          id: 'c0ffee',
        });
        expect(new Date(first!.time).toISOString()).toBe(first!.time);
        // Optional fields are absent, not null.
        expect(second).toEqual({ seq: 2, time: expect.any(String), kind: 'plain', data: null });
      });

      it('keeps the text, byte offset, step and producer id of a log entry', async () => {
        await store.appendLog('p', 'r', [{ text: 'line 1\nline 2\n', step: 'ingest', id: 'L1' }]);
        const [log] = await all(runKey('p', 'r'), ['log']);
        expect(log).toEqual({
          seq: 2,
          time: expect.any(String),
          kind: 'log',
          offset: 0,
          text: 'line 1\nline 2\n',
          step: 'ingest',
          id: 'L1',
        });
      });
    });

    describe('all-or-nothing batches', () => {
      // `kind` is required by the type and by the store's own schema; a null one makes the
      // store itself fail on the second event, after the first was already written.
      const broken = { kind: null as unknown as string, data: 'broken' };

      it('refuses a batch whose second event the store cannot write, and stores none of it', async () => {
        const key = topicKey('t');
        await store.appendEvents(key, [event('k', 'before')]);
        await expect(store.appendEvents(key, [event('k', 'first'), broken])).rejects.toThrow();
        expect(await dataOf(key)).toEqual(['before']);
        expect(await store.bounds(key)).toEqual({
          firstSeq: 1,
          lastSeq: 1,
          logBytes: 0,
          logLines: 0,
          epoch: AN_EPOCH,
        });
        expect((await store.appendEvents(key, [event('k', 'after')])).seqs).toEqual([2]);
      });

      it('refuses a log append whose second chunk the store cannot write, and stores none of it', async () => {
        await appendOne('p', 'r', 'before\n');
        const before = await store.bounds(runKey('p', 'r'));
        const chunks: NewLog[] = [{ text: 'first\n' }, { text: null as unknown as string }];
        await expect(store.appendLog('p', 'r', chunks)).rejects.toThrow();
        expect(await store.bounds(runKey('p', 'r'))).toEqual(before);
        expect(await logTexts('p', 'r')).toEqual(['before\n']);
        expect((await store.getRun('p', 'r'))?.logBytes).toBe(7);
      });

      it('never shows a reader part of a batch while it is written, however large the batch', async () => {
        const key = topicKey('big');
        await store.appendEvents(key, [event('k', 'before')]);
        // 1000 events of 60 KB: about 60 MB, long enough for many reads to happen meanwhile.
        const blob = 'x'.repeat(60_000);
        const batch = Array.from({ length: 1000 }, (_, i) => event('k', { i, blob }));
        const seen: number[] = [];
        let writing = true;
        const watch = async () => {
          while (writing) {
            await new Promise((resolve) => setImmediate(resolve));
            seen.push((await store.bounds(key)).lastSeq);
            const page = await store.readEntries(key, { afterSeq: 0, limit: 1001 });
            seen.push(page.length, page[page.length - 1]!.seq);
          }
        };
        const watching = watch();
        await store.appendEvents(key, batch);
        writing = false;
        await watching;
        // Every look saw the stream before the batch (1 entry, seq 1) or with all of it.
        expect(seen.every((n) => n === 1 || n === 1001)).toBe(true);
        expect((await store.bounds(key)).lastSeq).toBe(1001);
      });

      it('creates neither the run, its stream nor a runs-feed entry when the first batch of a new run is refused', async () => {
        const feedBefore = await store.bounds(FEED);
        await expect(
          store.appendEvents(runKey('p', 'new-run'), [event('k', 'first'), broken]),
        ).rejects.toThrow();
        expect(await store.getRun('p', 'new-run')).toBeUndefined();
        expect(await store.latestRun('p')).toBeUndefined();
        expect(await allPipelines(store)).toEqual([]);
        expect(await store.bounds(runKey('p', 'new-run'))).toEqual({
          firstSeq: 1,
          lastSeq: 0,
          logBytes: 0,
          logLines: 0,
          epoch: AN_EPOCH,
        });
        expect(await store.bounds(FEED)).toEqual(feedBefore);
      });

      it('numbers a topic from 1 after its first batch was refused, apart from other streams', async () => {
        await expect(
          store.appendEvents(topicKey('first'), [event('k', 'x'), broken]),
        ).rejects.toThrow();
        await store.appendEvents(topicKey('other'), [event('k', 'other')]);
        const retried = await store.appendEvents(topicKey('first'), [event('k', 'first')]);
        expect(await dataOf(topicKey('other'))).toEqual(['other']);
        expect(await dataOf(topicKey('first'))).toEqual(['first']);
        expect(retried.seqs).toEqual([1]);
      });

      it('creates a run normally after its first batch was refused, and reports it in the runs feed', async () => {
        await expect(
          store.appendEvents(runKey('p', 'r'), [event('k', 'x'), broken]),
        ).rejects.toThrow();
        await store.putRun('p', 'other', { status: 'queued' });
        const result = await store.appendEvents(runKey('p', 'r'), [event('k', 'retried')]);
        expect(result.seqs).toEqual([2]);
        expect((await all(runKey('p', 'r'))).map((entry) => entry.kind)).toEqual(['status', 'k']);
        expect((await all(runKey('p', 'other'))).map((entry) => entry.kind)).toEqual(['status']);
        const feedRuns = (await all(FEED)).map((entry) => (entry.data as { runId: string }).runId);
        expect(feedRuns).toEqual(['other', 'r']);
      });
    });

    describe('producer ids', () => {
      it('acknowledges a repeated event id with its original seq and does not store it twice', async () => {
        const key = topicKey('t');
        const first = await store.appendEvents(key, [event('k', 'original', { id: 'e1' })]);
        await store.appendEvents(key, [event('k', 'between')]);
        const again = await store.appendEvents(key, [event('k', 'original', { id: 'e1' })]);
        expect(first).toMatchObject({ seqs: [1], duplicates: 0 });
        expect(again).toMatchObject({ seqs: [1], duplicates: 1 });
        expect(again.written).toEqual([]);
        expect(await dataOf(key)).toEqual(['original', 'between']);
        expect((await store.bounds(key)).lastSeq).toBe(2);
      });

      it('refuses a repeated event id naming a different event with TW_ID_CONFLICT, storing none of its batch', async () => {
        const key = topicKey('t');
        await store.appendEvents(key, [event('k', 'original', { id: 'e1', step: 's' })]);
        const variants: NewEvent[] = [
          event('k', 'changed', { id: 'e1', step: 's' }),
          event('other', 'original', { id: 'e1', step: 's' }),
          event('k', 'original', { id: 'e1', step: 't' }),
          event('k', 'original', { id: 'e1' }),
          event('k', 'original', { id: 'e1', step: 's', correlationId: 'c' }),
          event('k', 'original', { id: 'e1', step: 's', extra: { index: 1 } }),
        ];
        for (const variant of variants) {
          await expect(
            store.appendEvents(key, [event('k', 'fresh', { id: 'new' }), variant]),
          ).rejects.toMatchObject({ code: 'TW_ID_CONFLICT', message: /events\[1\].*"e1".*seq 1/ });
        }
        expect(await dataOf(key)).toEqual(['original']);
        expect(await store.seqOfProducerId(key, 'new')).toBeUndefined();
      });

      it('refuses an event whose id names a stored log append, and a log append whose id names an event', async () => {
        await store.appendLog('p', 'r', [{ text: 'line\n', id: 'L' }]);
        await store.appendEvents(runKey('p', 'r'), [event('k', 1, { id: 'E' })]);
        await expect(
          store.appendEvents(runKey('p', 'r'), [event('k', 1, { id: 'L' })]),
        ).rejects.toMatchObject({ code: 'TW_ID_CONFLICT' });
        await expect(
          store.appendLog('p', 'r', [{ text: 'line\n', id: 'E' }]),
        ).rejects.toMatchObject({ code: 'TW_ID_CONFLICT' });
        expect(await logTexts('p', 'r')).toEqual(['line\n']);
      });

      it('stores the new events of a batch that also holds repeats, and counts the repeats', async () => {
        const key = topicKey('t');
        await store.appendEvents(key, [event('k', 'a', { id: 'a' }), event('k', 'b', { id: 'b' })]);
        const result = await store.appendEvents(key, [
          event('k', 'b', { id: 'b' }),
          event('k', 'c', { id: 'c' }),
          event('k', 'no id'),
          event('k', 'a', { id: 'a' }),
        ]);
        expect(result.seqs).toEqual([2, 3, 4, 1]);
        expect(result.duplicates).toBe(2);
        expect(await dataOf(key)).toEqual(['a', 'b', 'c', 'no id']);
      });

      it('stores an id repeated within one batch once, and gives both the same seq', async () => {
        const key = topicKey('t');
        const result = await store.appendEvents(key, [
          event('k', 'same', { id: 'x' }),
          event('k', 'other'),
          event('k', 'same', { id: 'x' }),
        ]);
        expect(result.seqs).toEqual([1, 2, 1]);
        expect(result.duplicates).toBe(1);
        expect(await dataOf(key)).toEqual(['same', 'other']);
        expect((await store.bounds(key)).lastSeq).toBe(2);
      });

      it('refuses a batch that uses one id for two different events, storing nothing', async () => {
        const key = topicKey('t');
        await expect(
          store.appendEvents(key, [
            event('k', 'first', { id: 'x' }),
            event('k', 'other'),
            event('k', 'second', { id: 'x' }),
          ]),
        ).rejects.toMatchObject({
          code: 'TW_ID_CONFLICT',
          message: /events\[2\].*earlier in this batch/,
        });
        expect((await store.bounds(key)).lastSeq).toBe(0);
      });

      it('treats the same id on two different streams as two different events', async () => {
        await store.appendEvents(topicKey('a'), [event('k', 'a', { id: 'same' })]);
        const b = await store.appendEvents(topicKey('b'), [event('k', 'b', { id: 'same' })]);
        expect(b).toMatchObject({ seqs: [1], duplicates: 0 });
        expect(await dataOf(topicKey('b'))).toEqual(['b']);
      });

      it('acknowledges a repeated log append as a duplicate with its original seq, offset and size', async () => {
        const first = await appendOne('p', 'r', 'hello\n', 'L1');
        await appendOne('p', 'r', 'between\n');
        const before = await store.bounds(runKey('p', 'r'));
        const again = await appendOne('p', 'r', 'hello\n', 'L1');
        expect(first.duplicate).toBe(false);
        expect(again).toMatchObject({
          duplicate: true,
          seq: first.seq,
          firstSeq: first.firstSeq,
          offset: first.offset,
          size: first.size,
        });
        expect(again.written).toEqual([]);
        expect(await store.bounds(runKey('p', 'r'))).toEqual(before);
        expect(await logTexts('p', 'r')).toEqual(['hello\n', 'between\n']);
      });

      it('recognises a repeated multi-chunk log append by the id of its first chunk', async () => {
        await appendOne('p', 'r', 'start\n');
        const chunks: NewLog[] = [{ text: 'ab', id: 'M' }, { text: '例\n' }];
        const first = await store.appendLog('p', 'r', chunks);
        const again = await store.appendLog('p', 'r', chunks);
        expect(first).toMatchObject({ firstSeq: 3, seq: 4, offset: 6, size: 6, duplicate: false });
        expect(again).toMatchObject({ firstSeq: 3, seq: 4, offset: 6, size: 6, duplicate: true });
        expect(await logTexts('p', 'r')).toEqual(['start\n', 'ab', '例\n']);
        expect((await store.bounds(runKey('p', 'r'))).logBytes).toBe(12);
      });

      it('refuses a log append whose id was used for other text, or other pieces, or another step', async () => {
        await store.appendLog('p', 'r', [
          { text: 'ab', id: 'M', step: 's' },
          { text: 'cd\n', step: 's' },
        ]);
        const before = await store.bounds(runKey('p', 'r'));
        const variants: NewLog[][] = [
          [
            { text: 'ab', id: 'M', step: 's' },
            { text: 'cX\n', step: 's' },
          ],
          [{ text: 'abcd\n', id: 'M', step: 's' }],
          [
            { text: 'ab', id: 'M', step: 's' },
            { text: 'cd\n', step: 's' },
            { text: 'e', step: 's' },
          ],
          [{ text: 'ab', id: 'M' }, { text: 'cd\n' }],
        ];
        for (const chunks of variants) {
          await expect(store.appendLog('p', 'r', chunks)).rejects.toMatchObject({
            code: 'TW_ID_CONFLICT',
          });
        }
        expect(await store.bounds(runKey('p', 'r'))).toEqual(before);
      });

      it('keeps a producer id on the first piece of an append only, so no other id can collide with its pieces', async () => {
        await store.appendLog('p', 'r', [{ text: 'ab', id: 'x' }, { text: 'cd\n' }]);
        // A producer may use any id, `x#1` included: it names nothing stored yet.
        const other = await store.appendLog('p', 'r', [{ text: 'other\n', id: 'x#1' }]);
        expect(other.duplicate).toBe(false);
        const ids = (await all(runKey('p', 'r'), ['log'])).map((entry) => entry.id);
        expect(ids).toEqual(['x', undefined, 'x#1']);
      });
    });

    describe('log offsets', () => {
      it('gives log entries contiguous offsets in UTF-8 bytes, with multi-byte text', async () => {
        const a = await appendOne('p', 'r', 'héllo\n'); // 7 bytes
        const b = await appendOne('p', 'r', '例😀\n'); // 3 + 4 + 1 bytes
        const c = await appendOne('p', 'r', 'x');
        expect([a.offset, a.size]).toEqual([0, 7]);
        expect([b.offset, b.size]).toEqual([7, 8]);
        expect([c.offset, c.size]).toEqual([15, 1]);
        const logs = await all(runKey('p', 'r'), ['log']);
        expect(logs.map((entry) => entry.offset)).toEqual([0, 7, 15]);
        expect((await store.bounds(runKey('p', 'r'))).logBytes).toBe(16);
        expect((await store.getRun('p', 'r'))?.logBytes).toBe(16);
      });

      it('gives the chunks of one append consecutive seqs and contiguous offsets', async () => {
        await appendOne('p', 'r', 'é'); // 2 bytes
        const result = await store.appendLog('p', 'r', [
          { text: '例例\n' },
          { text: '😀' },
          { text: 'tail' },
        ]);
        expect(result).toMatchObject({
          firstSeq: 3,
          seq: 5,
          offset: 2,
          size: 15,
          duplicate: false,
        });
        const logs = await all(runKey('p', 'r'), ['log']);
        expect(logs.map((entry) => [entry.seq, entry.offset])).toEqual([
          [2, 0],
          [3, 2],
          [4, 9],
          [5, 13],
        ]);
        expect(await readLogChunks(store, runKey('p', 'r'), 0, 1000)).toEqual([
          { offset: 0, size: 2, text: 'é' },
          { offset: 2, size: 7, text: '例例\n' },
          { offset: 9, size: 4, text: '😀' },
          { offset: 13, size: 4, text: 'tail' },
        ]);
      });

      it('does not count events in the log bytes of a run', async () => {
        await appendOne('p', 'r', 'abc');
        await store.appendEvents(runKey('p', 'r'), [event('k', { big: 'x'.repeat(100) })]);
        const next = await appendOne('p', 'r', 'def');
        expect(next.offset).toBe(3);
        expect((await store.bounds(runKey('p', 'r'))).logBytes).toBe(6);
      });
    });

    describe('log lines', () => {
      const run = runKey('p', 'r');
      /** Where each line begins in `text`, in UTF-8 bytes, by line number (index 0: line 1). */
      const lineStarts = (text: string) => {
        const bytes = Buffer.from(text, 'utf8');
        const starts = bytes.length > 0 ? [0] : [];
        bytes.forEach((byte, at) => {
          if (byte === 0x0a && at + 1 < bytes.length) starts.push(at + 1);
        });
        return starts;
      };

      it('finds where every line begins, in bytes, however the appends cut the lines', async () => {
        // Seeded, so a failure is the same every run.
        let seed = 11;
        const random = (n: number) => {
          seed = (seed * 1103515245 + 12345) % 2147483648;
          return seed % n;
        };
        const words = ['é', '例😀', 'ascii', '', 'a much longer line of text'];
        let text = '';
        for (let n = 0; n < 120; n += 1) text += `${n} ${words[random(words.length)]}\n`;
        text += 'no line feed at the end';
        // Appends of 1 to 40 characters (a character is never cut), some of several chunks,
        // and events between them.
        const characters = [...text];
        for (let at = 0; at < characters.length;) {
          const chunks: NewLog[] = [];
          for (let pieces = 1 + random(3); pieces > 0 && at < characters.length; pieces -= 1) {
            const size = 1 + random(40);
            chunks.push({ text: characters.slice(at, at + size).join('') });
            at += size;
          }
          await store.appendLog('p', 'r', chunks);
          if (random(5) === 0) await store.appendEvents(run, [event('k', { n: at })]);
        }
        const starts = lineStarts(text);
        expect(starts).toHaveLength(121);
        const found = await Promise.all(starts.map((_, i) => store.logLineStart(run, i + 1)));
        expect(found).toEqual(starts);
        expect((await store.bounds(run)).logLines).toBe(120);
        // The last line has no line feed: it is a line still. There is none after it.
        expect(await store.logLineStart(run, 122)).toBeUndefined();
        for (const line of [0, -1, 1.5, Number.MAX_SAFE_INTEGER]) {
          expect(await store.logLineStart(run, line), String(line)).toBeUndefined();
        }
      });

      it('has no line after a last line feed, and none at all in an empty or unknown log', async () => {
        expect(await store.logLineStart(run, 1)).toBeUndefined();
        await store.appendEvents(run, [event('k', {})]);
        expect(await store.logLineStart(run, 1)).toBeUndefined();
        expect((await store.bounds(run)).logLines).toBe(0);
        await appendOne('p', 'r', '\n');
        await appendOne('p', 'r', 'b\n\n');
        expect(await Promise.all([1, 2, 3, 4].map((n) => store.logLineStart(run, n)))).toEqual([
          0,
          1,
          3,
          undefined,
        ]);
        expect((await store.bounds(run)).logLines).toBe(3);
        expect(await store.logLineStart(runKey('p', 'none'), 1)).toBeUndefined();
      });
    });

    describe('readEntries', () => {
      const key = topicKey('t');
      async function fill(count: number, kind = 'k'): Promise<void> {
        const events = Array.from({ length: count }, (_, i) => event(kind, i));
        await store.appendEvents(key, events);
      }

      it('returns the entries after the given seq, oldest first', async () => {
        await fill(5);
        const read = await store.readEntries(key, { afterSeq: 2, limit: 100 });
        expect(read.map((entry) => entry.seq)).toEqual([3, 4, 5]);
      });

      it('reads from the start when after is 0, and nothing when after is the last seq', async () => {
        await fill(3);
        expect((await store.readEntries(key, { afterSeq: 0, limit: 100 })).length).toBe(3);
        expect(await store.readEntries(key, { afterSeq: 3, limit: 100 })).toEqual([]);
        expect(await store.readEntries(key, { afterSeq: 99, limit: 100 })).toEqual([]);
      });

      it('returns at most limit entries', async () => {
        await fill(5);
        const read = await store.readEntries(key, { afterSeq: 1, limit: 2 });
        expect(read.map((entry) => entry.seq)).toEqual([2, 3]);
      });

      it('returns only the given kinds, and fills limit with them past non-matching entries', async () => {
        await fill(10, 'noise');
        await store.appendEvents(key, [event('rare', 'r1')]);
        await fill(10, 'noise');
        await store.appendEvents(key, [event('rare', 'r2'), event('other', 'o1')]);
        const rare = await store.readEntries(key, { afterSeq: 0, limit: 2, kinds: ['rare'] });
        expect(rare.map((entry) => [entry.seq, entry.data])).toEqual([
          [11, 'r1'],
          [22, 'r2'],
        ]);
        const two = await store.readEntries(key, {
          afterSeq: 11,
          limit: 3,
          kinds: ['rare', 'other'],
        });
        expect(two.map((entry) => entry.seq)).toEqual([22, 23]);
        expect(await store.readEntries(key, { afterSeq: 0, limit: 5, kinds: ['none'] })).toEqual(
          [],
        );
      });

      it('reads every entry but log text when asked, in seq order, with limit and maxBytes', async () => {
        const run = runKey('p', 'r');
        await appendOne('p', 'r', 'line one\n');
        await store.appendEvents(run, [event('status', 's1'), event('progress', 'p1')]);
        await appendOne('p', 'r', 'line two\n');
        await appendOne('p', 'r', 'line three\n');
        await store.appendEvents(run, [event('status', 's2')]);
        const seqKinds = (entries: Entry[]) => entries.map((entry) => [entry.seq, entry.kind]);
        const events = seqKinds((await all(run)).filter((entry) => entry.kind !== 'log'));
        expect(events.length).toBeGreaterThanOrEqual(3);
        const read = (options: Partial<ReadEntriesOptions>) =>
          store.readEntries(run, { afterSeq: 0, limit: 10, withoutLog: true, ...options });
        expect(seqKinds(await read({}))).toEqual(events);
        const [, second, third] = events;
        expect(seqKinds(await read({ afterSeq: second![0] as number, limit: 1 }))).toEqual([third]);
        expect(seqKinds(await read({ maxBytes: 1 }))).toEqual([events[0]]);
        expect(await read({ afterSeq: events[events.length - 1]![0] as number })).toEqual([]);
        // `kinds` wins: log text asked for by kind is read.
        expect((await read({ kinds: ['log'] })).map((entry) => entry.text)).toEqual([
          'line one\n',
          'line two\n',
          'line three\n',
        ]);
      });

      it('returns at least one entry even when it alone exceeds maxBytes', async () => {
        await appendOne('p', 'r', 'x'.repeat(100));
        await appendOne('p', 'r', 'y'.repeat(100));
        const read = await store.readEntries(runKey('p', 'r'), {
          afterSeq: 1,
          limit: 10,
          maxBytes: 10,
        });
        expect(read.map((entry) => entry.text)).toEqual(['x'.repeat(100)]);
      });

      it('stops once the entries read reach maxBytes of payload', async () => {
        for (const text of ['aaaa', 'bbbb', 'cccc', 'dddd']) await appendOne('p', 'r', text);
        const read = await store.readEntries(runKey('p', 'r'), {
          afterSeq: 1,
          limit: 10,
          maxBytes: 8,
        });
        expect(read.map((entry) => entry.text)).toEqual(['aaaa', 'bbbb']);
      });

      it('counts maxBytes in UTF-8 bytes, not characters', async () => {
        // Each entry is 2 characters but 4 bytes: 8 bytes hold two of them, not four.
        for (let i = 0; i < 4; i += 1) await appendOne('p', 'r', '例\n');
        const read = await store.readEntries(runKey('p', 'r'), {
          afterSeq: 1,
          limit: 10,
          maxBytes: 8,
        });
        expect(read.map((entry) => entry.seq)).toEqual([2, 3]);
      });
    });

    describe('lookups by position and producer id', () => {
      it('finds the seq of the n-th newest entry, among given kinds, or nothing when too few', async () => {
        const key = topicKey('nth');
        await store.appendEvents(key, [
          event('a', 1),
          event('b', 2),
          event('a', 3),
          event('b', 4),
          event('a', 5),
        ]);
        expect(await store.nthLatestSeq(key, 1)).toBe(5);
        expect(await store.nthLatestSeq(key, 5)).toBe(1);
        expect(await store.nthLatestSeq(key, 6)).toBeUndefined();
        expect(await store.nthLatestSeq(key, 2, ['b'])).toBe(2);
        expect(await store.nthLatestSeq(key, 3, ['a'])).toBe(1);
        expect(await store.nthLatestSeq(key, 3, ['b'])).toBeUndefined();
        expect(await store.nthLatestSeq(topicKey('never-written'), 1)).toBeUndefined();
      });

      it('finds the seq an entry was stored under by its producer id', async () => {
        const key = topicKey('ids');
        await store.appendEvents(key, [event('a', 1, { id: 'x' }), event('a', 2, { id: 'y' })]);
        expect(await store.seqOfProducerId(key, 'y')).toBe(2);
        expect(await store.seqOfProducerId(key, 'z')).toBeUndefined();
        expect(await store.seqOfProducerId(topicKey('other'), 'y')).toBeUndefined();
      });

      it('finds runs by run id across pipelines, or by their server id, newest first', async () => {
        const first = (await store.putRun('p1', 'shared', { status: 'running' })).run;
        await new Promise((resolve) => setTimeout(resolve, 5));
        const second = (await store.putRun('p2', 'shared', { status: 'running' })).run;
        expect((await store.findRuns('shared')).map((run) => run.pipeline)).toEqual(['p2', 'p1']);
        expect((await store.findRuns(first.id)).map((run) => run.pipeline)).toEqual(['p1']);
        expect(second.id).not.toBe(first.id);
        expect(await store.findRuns('nobody')).toEqual([]);
      });
    });

    describe('readLog', () => {
      const run = runKey('freight', 'task-1');

      it('finds the chunk that holds a byte of the log, multi-byte text included', async () => {
        await store.appendLog('freight', 'task-1', [
          { text: 'ab' },
          { text: '例\n' },
          { text: 'z' },
        ]);
        // Bytes: a b | 例 (3 bytes) \n | z  → chunks at 0 (2 B), 2 (4 B), 6 (1 B).
        const seqOf = new Map(
          (await store.readEntries(run, { afterSeq: 0, limit: 10, kinds: ['log'] })).map((e) => [
            e.offset,
            e.seq,
          ]),
        );
        const at = (byte: number) => store.logChunkAt(run, byte);
        expect(await at(0)).toEqual({ offset: 0, size: 2, seq: seqOf.get(0) });
        expect(await at(1)).toEqual({ offset: 0, size: 2, seq: seqOf.get(0) });
        expect(await at(3)).toEqual({ offset: 2, size: 4, seq: seqOf.get(2) });
        expect(await at(5)).toEqual({ offset: 2, size: 4, seq: seqOf.get(2) });
        expect(await at(6)).toEqual({ offset: 6, size: 1, seq: seqOf.get(6) });
        expect(new Set(seqOf.values()).size).toBe(3);
        expect(await at(7)).toBeUndefined();
        expect(await store.logChunkAt(runKey('freight', 'none'), 0)).toBeUndefined();
      });

      it("gives each chunk its entry's step, and none to a chunk filed under no step", async () => {
        await store.appendLog('freight', 'task-1', [
          { text: 'a\n', step: 'build' },
          { text: 'b\n' },
          { text: 'c\n', step: 'test ✓' },
        ]);
        const steps = (chunks: { step?: string }[]) => chunks.map((chunk) => chunk.step ?? null);
        expect(steps(await store.readLog(run, 0, 100))).toEqual(['build', null, 'test ✓']);
        expect(steps(await store.readLog(run, -1, 2))).toEqual(['test ✓']);
      });

      async function helloWorld(): Promise<void> {
        // Freight's example: "hello world" written one character per append.
        for (const character of 'hello world') await appendOne('freight', 'task-1', character);
      }
      const text = (chunks: { text: string }[]) => chunks.map((chunk) => chunk.text).join('');

      it('returns the whole chunks whose offset lies in [offset, offset + limit)', async () => {
        await helloWorld();
        expect(await readLogChunks(store, run, 1, 1)).toEqual([{ offset: 1, size: 1, text: 'e' }]);
        expect(text(await readLogChunks(store, run, 0, 5))).toBe('hello');
        expect(text(await readLogChunks(store, run, 6, 100))).toBe('world');
        expect(text(await readLogChunks(store, run, 0, 11))).toBe('hello world');
        expect(await readLogChunks(store, run, 11, 10)).toEqual([]);
      });

      it('reads the last byte with offset -1 and limit 1', async () => {
        await helloWorld();
        expect(await readLogChunks(store, run, -1, 1)).toEqual([
          { offset: 10, size: 1, text: 'd' },
        ]);
      });

      it('reads the last limit bytes with offset -1', async () => {
        await helloWorld();
        expect(text(await readLogChunks(store, run, -1, 5))).toBe('world');
        expect(text(await readLogChunks(store, run, -1, 11))).toBe('hello world');
        expect(text(await readLogChunks(store, run, -1, 1000))).toBe('hello world');
      });

      it('includes, with offset -1, a whole chunk that straddles the start of the last limit bytes', async () => {
        await appendOne('p', 'r', 'ab');
        await appendOne('p', 'r', '例'); // bytes 2–4
        await appendOne('p', 'r', 'cd'); // bytes 5–6
        expect(await readLogChunks(store, runKey('p', 'r'), -1, 2)).toEqual([
          { offset: 5, size: 2, text: 'cd' },
        ]);
        expect(await readLogChunks(store, runKey('p', 'r'), -1, 3)).toEqual([
          { offset: 2, size: 3, text: '例' },
          { offset: 5, size: 2, text: 'cd' },
        ]);
      });

      it('returns no chunks for a run that has no log', async () => {
        await store.putRun('p', 'quiet', { status: 'running' });
        expect(await readLogChunks(store, runKey('p', 'quiet'), 0, 100)).toEqual([]);
        expect(await readLogChunks(store, runKey('p', 'quiet'), -1, 100)).toEqual([]);
      });
    });

    describe('runs', () => {
      it('creates a run with putRun and reports it with getRun', async () => {
        const { run } = await store.putRun(
          'warehouse.ingest',
          'scheduled__2026-08-10T00:00:00+00:00',
          {
            status: 'running',
            meta: { owner: 'data' },
          },
        );
        expect(run).toEqual({
          id: expect.stringMatching(
            /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
          ),
          pipeline: 'warehouse.ingest',
          runId: 'scheduled__2026-08-10T00:00:00+00:00',
          status: 'running',
          cancelRequested: false,
          createdAt: expect.any(String),
          startedAt: expect.any(String),
          endedAt: null,
          lastSeq: 1,
          logBytes: 0,
          meta: { owner: 'data' },
        });
        expect(
          await store.getRun('warehouse.ingest', 'scheduled__2026-08-10T00:00:00+00:00'),
        ).toEqual(run);
      });

      it('returns undefined from getRun for an unknown run', async () => {
        expect(await store.getRun('p', 'nope')).toBeUndefined();
      });

      it('writes a status entry to the run stream and the run, without its meta, to the runs feed on creation', async () => {
        const result = await store.putRun('p', 'r', {
          status: 'queued',
          meta: { big: 'x'.repeat(1000) },
        });
        const [status] = await all(runKey('p', 'r'));
        expect(status).toMatchObject({ seq: 1, kind: 'status', data: { status: 'queued' } });
        const feed = await all(FEED);
        expect(feed).toHaveLength(1);
        const { meta: _meta, ...summary } = result.run;
        expect(feed[0]).toMatchObject({ kind: 'status' });
        expect(feed[0]!.data).toEqual(summary);
        expect(result.written).toEqual(
          expect.arrayContaining([
            { key: runKey('p', 'r'), seq: 1 },
            { key: FEED, seq: feed[0]!.seq },
          ]),
        );
      });

      it('writes one status entry per status change, and none when the status stays the same', async () => {
        await store.putRun('p', 'r', { status: 'queued' });
        await store.putRun('p', 'r', { status: 'running' });
        const same = await store.putRun('p', 'r', { status: 'running', meta: { a: 1 } });
        await store.putRun('p', 'r', { status: 'success' });
        const statuses = (await all(runKey('p', 'r'), ['status'])).map((entry) => entry.data);
        expect(statuses).toEqual([
          { status: 'queued' },
          { status: 'running' },
          { status: 'success' },
        ]);
        expect(same.written).toEqual([]);
        expect(same.run.meta).toEqual({ a: 1 });
        const feed = (await all(FEED)).map((entry) => (entry.data as { status: string }).status);
        expect(feed).toEqual(['queued', 'running', 'success']);
      });

      it('sets endedAt when a run reaches a terminal status', async () => {
        await store.putRun('p', 'r', { status: 'running' });
        const { run } = await store.putRun('p', 'r', { status: 'failed' });
        expect(run.status).toBe('failed');
        expect(run.endedAt).not.toBeNull();
        expect(run.startedAt).not.toBeNull();
      });

      it('refuses to move a terminal run back to a non-terminal status with TW_STATUS_CONFLICT, writing nothing', async () => {
        let index = 0;
        for (const terminal of TERMINAL) {
          for (const next of NON_TERMINAL) {
            index += 1;
            const runId = `r${index}`;
            await store.putRun('p', runId, { status: 'running' });
            await store.putRun('p', runId, { status: terminal });
            const runBefore = await store.bounds(runKey('p', runId));
            const feedBefore = await store.bounds(FEED);
            await expect(store.putRun('p', runId, { status: next })).rejects.toMatchObject({
              code: 'TW_STATUS_CONFLICT',
            });
            expect(await store.bounds(runKey('p', runId))).toEqual(runBefore);
            expect(await store.bounds(FEED)).toEqual(feedBefore);
            expect((await store.getRun('p', runId))?.status).toBe(terminal);
          }
        }
      });

      it('creates a run as running when a log is appended to a new run', async () => {
        const result = await appendOne('p', 'new', 'hi\n');
        expect((await store.getRun('p', 'new'))?.status).toBe('running');
        const entries = await all(runKey('p', 'new'));
        expect(entries.map((entry) => entry.kind)).toEqual(['status', 'log']);
        expect(entries[0]?.data).toMatchObject({ status: 'running' });
        expect(result).toMatchObject({ firstSeq: 2, seq: 2, offset: 0, size: 3 });
        expect((await all(FEED)).map((entry) => entry.data)).toEqual([
          expect.objectContaining({ pipeline: 'p', runId: 'new', status: 'running' }),
        ]);
      });

      it('creates a run as running when events are appended to a new run', async () => {
        const result = await store.appendEvents(runKey('p', 'new'), [event('progress', 1)]);
        expect((await store.getRun('p', 'new'))?.status).toBe('running');
        expect((await all(runKey('p', 'new'))).map((entry) => entry.kind)).toEqual([
          'status',
          'progress',
        ]);
        expect(result.seqs).toEqual([2]);
      });

      it('does not change the status of an existing run when appending to it', async () => {
        await store.putRun('p', 'r', { status: 'queued' });
        await appendOne('p', 'r', 'x');
        await store.appendEvents(runKey('p', 'r'), [event('k', 1)]);
        expect((await store.getRun('p', 'r'))?.status).toBe('queued');
      });

      it('accepts late appends to an ended run without re-opening it', async () => {
        await store.putRun('p', 'r', { status: 'success' });
        await appendOne('p', 'r', 'late flush\n');
        await store.appendEvents(runKey('p', 'r'), [event('k', 1)]);
        const run = await store.getRun('p', 'r');
        expect(run?.status).toBe('success');
        expect(run?.logBytes).toBe(11);
      });

      it('reports the run stream lastSeq and logBytes in the run', async () => {
        await appendOne('p', 'r', 'abc');
        await store.appendEvents(runKey('p', 'r'), [event('k', 1)]);
        expect(await store.getRun('p', 'r')).toMatchObject({ lastSeq: 3, logBytes: 3 });
      });

      it('names the most recently created run with latestRun', async () => {
        await store.putRun('p', 'r1', { status: 'running' });
        await store.putRun('p', 'r2', { status: 'running' });
        await store.putRun('p', 'r3', { status: 'queued' });
        await store.putRun('other', 'o1', { status: 'running' });
        // Updating an older run does not make it the latest.
        await store.putRun('p', 'r1', { status: 'success' });
        expect((await store.latestRun('p'))?.runId).toBe('r3');
        expect((await store.latestRun('other'))?.runId).toBe('o1');
        expect(await store.latestRun('none')).toBeUndefined();
      });

      it('lists the runs of a pipeline newest first, filtered by status and limited', async () => {
        await store.putRun('p', 'r1', { status: 'success' });
        await store.putRun('p', 'r2', { status: 'failed' });
        await store.putRun('p', 'r3', { status: 'success' });
        await store.putRun('p', 'r4', { status: 'running' });
        await store.putRun('other', 'o1', { status: 'success' });
        const ids = (runs: { runId: string }[]) => runs.map((run) => run.runId);
        expect(ids(await runsOf(store, 'p', { limit: 100 }))).toEqual(['r4', 'r3', 'r2', 'r1']);
        expect(ids(await runsOf(store, 'p', { limit: 2 }))).toEqual(['r4', 'r3']);
        expect(ids(await runsOf(store, 'p', { status: 'success', limit: 100 }))).toEqual([
          'r3',
          'r1',
        ]);
        expect(ids(await runsOf(store, 'p', { status: 'success', limit: 1 }))).toEqual(['r3']);
        expect(await runsOf(store, 'p', { status: 'cancelled', limit: 100 })).toEqual([]);
        expect(await runsOf(store, 'none', { limit: 100 })).toEqual([]);
      });

      it('lists every pipeline with its run count and its latest run', async () => {
        await store.putRun('warehouse.ingest', 'a', { status: 'success' });
        await store.putRun('warehouse.ingest', 'b', { status: 'running' });
        await store.appendLog('ml.train', 'x', [{ text: 'epoch 1\n' }]);
        const pipelines = (await allPipelines(store)).sort((a, b) => a.fqn.localeCompare(b.fqn));
        expect(pipelines).toEqual([
          {
            fqn: 'ml.train',
            id: pipelineId('ml.train'),
            runs: 1,
            lastRun: await store.getRun('ml.train', 'x'),
          },
          {
            fqn: 'warehouse.ingest',
            id: pipelineId('warehouse.ingest'),
            runs: 2,
            lastRun: await store.getRun('warehouse.ingest', 'b'),
          },
        ]);
      });

      it('lists no pipelines in an empty store, and none for topic appends', async () => {
        expect(await allPipelines(store)).toEqual([]);
        await store.appendEvents(topicKey('iceberg'), [event('k', 1)]);
        expect(await allPipelines(store)).toEqual([]);
      });
    });

    describe('requestCancel', () => {
      it('sets cancelRequested and writes a status entry without changing the status', async () => {
        await store.putRun('p', 'r', { status: 'running' });
        const before = await store.bounds(runKey('p', 'r'));
        const { run, written } = await store.requestCancel('p', 'r');
        expect(run).toMatchObject({ status: 'running', cancelRequested: true });
        expect(await store.getRun('p', 'r')).toMatchObject({ cancelRequested: true });
        const entries = await all(runKey('p', 'r'));
        expect(entries).toHaveLength(before.lastSeq + 1);
        expect(entries.at(-1)).toMatchObject({
          kind: 'status',
          data: { status: 'running', cancelRequested: true },
        });
        expect(written).toContainEqual({ key: runKey('p', 'r'), seq: before.lastSeq + 1 });
        expect((await all(FEED)).at(-1)?.data).toMatchObject({ runId: 'r', cancelRequested: true });
      });

      it('refuses an unknown run with TW_RUN_NOT_FOUND and creates nothing', async () => {
        await expect(store.requestCancel('p', 'ghost')).rejects.toMatchObject({
          code: 'TW_RUN_NOT_FOUND',
        });
        expect(await store.getRun('p', 'ghost')).toBeUndefined();
        expect(await store.bounds(runKey('p', 'ghost'))).toEqual({
          firstSeq: 1,
          lastSeq: 0,
          logBytes: 0,
          logLines: 0,
          epoch: AN_EPOCH,
        });
        expect(await store.bounds(FEED)).toEqual({
          firstSeq: 1,
          lastSeq: 0,
          logBytes: 0,
          logLines: 0,
          epoch: AN_EPOCH,
        });
      });

      it('keeps cancelRequested when the run later changes status', async () => {
        await store.putRun('p', 'r', { status: 'running' });
        await store.requestCancel('p', 'r');
        const { run } = await store.putRun('p', 'r', { status: 'cancelled' });
        expect(run).toMatchObject({ status: 'cancelled', cancelRequested: true });
      });
    });

    describe('retention', () => {
      /** Appends `count` events whose data are their expected seqs, from `from`. */
      const fill = async (key: StreamKey, count: number, from = 1) => {
        const events = Array.from({ length: count }, (_, i) => event('k', from + i));
        return (await store.appendEvents(key, events)).seqs;
      };
      /** Waits until the clock has moved past an entry's time, so the next write is younger. */
      const clockPast = async (time: string) => {
        const at = Date.parse(time);
        while (Date.now() <= at) await new Promise((resolve) => setTimeout(resolve, 1));
      };
      /** `count` old entries, then (once the clock moved on) `fresh` newer ones; the cut-off time. */
      const fillOldThenNew = async (key: StreamKey, old: number, fresh: number) => {
        await fill(key, old);
        await clockPast((await all(key)).at(-1)!.time);
        await fill(key, fresh, old + 1);
        return Date.parse((await all(key))[old]!.time);
      };

      it('trims a topic by count to its newest maxEntries: firstSeq moves forward, lastSeq stays', async () => {
        const key = topicKey('prices');
        await fill(key, 10);
        expect(await store.trimTopic('prices', { maxEntries: 4 })).toEqual({
          removed: 6,
          firstSeq: 7,
        });
        expect(await store.bounds(key)).toEqual({
          firstSeq: 7,
          lastSeq: 10,
          logBytes: 0,
          logLines: 0,
          epoch: AN_EPOCH,
        });
        expect(await seqsOf(key)).toEqual([7, 8, 9, 10]);
        expect(await dataOf(key)).toEqual([7, 8, 9, 10]);
      });

      it('trims a topic by age: removes the entries written before olderThanMs and keeps the rest', async () => {
        const key = topicKey('prices');
        const cutoff = await fillOldThenNew(key, 3, 2);
        const oldest = Date.parse((await all(key))[0]!.time);
        // An entry written exactly at the cut-off, or after it, is kept.
        expect(await store.trimTopic('prices', { maxEntries: 0, olderThanMs: oldest })).toEqual({
          removed: 0,
          firstSeq: 1,
        });
        expect(await store.trimTopic('prices', { maxEntries: 0, olderThanMs: cutoff })).toEqual({
          removed: 3,
          firstSeq: 4,
        });
        expect(await store.bounds(key)).toEqual({
          firstSeq: 4,
          lastSeq: 5,
          logBytes: 0,
          logLines: 0,
          epoch: AN_EPOCH,
        });
        expect(await dataOf(key)).toEqual([4, 5]);
      });

      it('removes every entry when all are older than olderThanMs, leaving firstSeq = lastSeq + 1', async () => {
        const key = topicKey('prices');
        await fill(key, 5);
        const future = Date.now() + 60_000;
        expect(await store.trimTopic('prices', { maxEntries: 0, olderThanMs: future })).toEqual({
          removed: 5,
          firstSeq: 6,
        });
        expect(await store.bounds(key)).toEqual({
          firstSeq: 6,
          lastSeq: 5,
          logBytes: 0,
          logLines: 0,
          epoch: AN_EPOCH,
        });
        expect(await all(key)).toEqual([]);
      });

      it('applies count and age together, the stricter of the two deciding', async () => {
        const byCount = topicKey('by-count');
        const byAge = topicKey('by-age');
        await fill(byCount, 6);
        await fill(byAge, 6);
        await clockPast((await all(byAge)).at(-1)!.time);
        await fill(byCount, 4, 7);
        await fill(byAge, 4, 7);
        // Each topic's cut-off is the time of its first new entry: age alone keeps 7…10.
        const countCutoff = Date.parse((await all(byCount))[6]!.time);
        const ageCutoff = Date.parse((await all(byAge))[6]!.time);
        // A count of 2 keeps fewer than age does.
        expect(
          await store.trimTopic('by-count', { maxEntries: 2, olderThanMs: countCutoff }),
        ).toEqual({
          removed: 8,
          firstSeq: 9,
        });
        // A count of 8 alone would keep 3…10; age keeps fewer.
        expect(await store.trimTopic('by-age', { maxEntries: 8, olderThanMs: ageCutoff })).toEqual({
          removed: 6,
          firstSeq: 7,
        });
        expect(await dataOf(byCount)).toEqual([9, 10]);
        expect(await dataOf(byAge)).toEqual([7, 8, 9, 10]);
        expect((await store.bounds(byCount)).lastSeq).toBe(10);
        expect((await store.bounds(byAge)).lastSeq).toBe(10);
      });

      it('removes nothing with maxEntries 0 and no age, or with maxEntries at or above the count', async () => {
        const key = topicKey('prices');
        await fill(key, 5);
        const kept = { removed: 0, firstSeq: 1 };
        expect(await store.trimTopic('prices', { maxEntries: 0 })).toEqual(kept);
        expect(await store.trimTopic('prices', { maxEntries: 5 })).toEqual(kept);
        expect(await store.trimTopic('prices', { maxEntries: 1000 })).toEqual(kept);
        expect(await seqsOf(key)).toEqual([1, 2, 3, 4, 5]);
      });

      it('removes nothing on a second trim by the same policy, nor on a looser one after it', async () => {
        const key = topicKey('prices');
        await fill(key, 10);
        expect((await store.trimTopic('prices', { maxEntries: 3 })).removed).toBe(7);
        expect(await store.trimTopic('prices', { maxEntries: 3 })).toEqual({
          removed: 0,
          firstSeq: 8,
        });
        // What was removed does not come back, and firstSeq never goes back.
        expect(await store.trimTopic('prices', { maxEntries: 100 })).toEqual({
          removed: 0,
          firstSeq: 8,
        });
        expect(await store.trimTopic('prices', { maxEntries: 0, olderThanMs: 0 })).toEqual({
          removed: 0,
          firstSeq: 8,
        });
        expect(await store.bounds(key)).toEqual({
          firstSeq: 8,
          lastSeq: 10,
          logBytes: 0,
          logLines: 0,
          epoch: AN_EPOCH,
        });
        expect(await seqsOf(key)).toEqual([8, 9, 10]);
      });

      it('continues the seq after a trim: the next append takes lastSeq + 1, even after trimming everything', async () => {
        const partly = topicKey('partly');
        const wholly = topicKey('wholly');
        await fill(partly, 6);
        await fill(wholly, 6);
        await store.trimTopic('partly', { maxEntries: 2 });
        await store.trimTopic('wholly', { maxEntries: 0, olderThanMs: Date.now() + 60_000 });

        expect(await fill(partly, 2, 7)).toEqual([7, 8]);
        expect(await fill(wholly, 2, 7)).toEqual([7, 8]);
        expect(await store.bounds(partly)).toEqual({
          firstSeq: 5,
          lastSeq: 8,
          logBytes: 0,
          logLines: 0,
          epoch: AN_EPOCH,
        });
        expect(await store.bounds(wholly)).toEqual({
          firstSeq: 7,
          lastSeq: 8,
          logBytes: 0,
          logLines: 0,
          epoch: AN_EPOCH,
        });
        expect(await dataOf(partly)).toEqual([5, 6, 7, 8]);
        expect(await dataOf(wholly)).toEqual([7, 8]);
        // A later trim counts from the new end.
        expect(await store.trimTopic('partly', { maxEntries: 1 })).toEqual({
          removed: 3,
          firstSeq: 8,
        });
      });

      it('reads from firstSeq when the cursor points into trimmed entries', async () => {
        const key = topicKey('prices');
        await fill(key, 10);
        await store.trimTopic('prices', { maxEntries: 4 });
        const read = async (afterSeq: number, limit = 100) =>
          (await store.readEntries(key, { afterSeq, limit })).map((entry) => entry.seq);
        expect(await read(0)).toEqual([7, 8, 9, 10]);
        expect(await read(2)).toEqual([7, 8, 9, 10]);
        expect(await read(6)).toEqual([7, 8, 9, 10]);
        expect(await read(2, 2)).toEqual([7, 8]);
        expect(await read(8)).toEqual([9, 10]);
        expect(await read(10)).toEqual([]);
      });

      it('lists every topic ever written, the runs feed `_runs` included, and no runs', async () => {
        expect(await allTopics(store)).toEqual([]);
        await fill(topicKey('prices'), 1);
        await fill(topicKey('price'), 1);
        await fill(topicKey('iceberg.events'), 2);
        expect([...(await allTopics(store))].sort()).toEqual(['iceberg.events', 'price', 'prices']);

        await store.putRun('warehouse.ingest', 'r1', { status: 'running' });
        await appendOne('etl.daily', 'r2', 'a log line\n');
        await store.appendEvents(runKey('etl.daily', 'r2'), [event('progress', 1)]);
        const topics = [...(await allTopics(store))].sort();
        expect(topics).toEqual(['_runs', 'iceberg.events', 'price', 'prices']);
        expect(topics).toContain(RUNS_FEED_TOPIC);

        // A topic trimmed to nothing was still written: it is still listed.
        await store.trimTopic('price', { maxEntries: 0, olderThanMs: Date.now() + 60_000 });
        expect([...(await allTopics(store))].sort()).toEqual(topics);
      });

      it('trims nothing and creates nothing for a topic never written', async () => {
        await fill(topicKey('prices'), 3);
        expect(await store.trimTopic('ghost', { maxEntries: 1 })).toEqual({
          removed: 0,
          firstSeq: 1,
        });
        expect(
          await store.trimTopic('ghost', { maxEntries: 1, olderThanMs: Date.now() + 60_000 }),
        ).toEqual({ removed: 0, firstSeq: 1 });
        expect(await allTopics(store)).toEqual(['prices']);
        expect(await store.bounds(topicKey('ghost'))).toEqual({
          firstSeq: 1,
          lastSeq: 0,
          logBytes: 0,
          logLines: 0,
          epoch: AN_EPOCH,
        });
        expect(await seqsOf(topicKey('prices'))).toEqual([1, 2, 3]);
        // It can still be written later, from seq 1.
        expect(await fill(topicKey('ghost'), 1)).toEqual([1]);
      });

      it('trims only the named topic: other topics and a run of the same name are untouched', async () => {
        await store.putRun('prices', 'r', { status: 'running' });
        await appendOne('prices', 'r', 'one\n');
        await fill(runKey('prices', 'r'), 3, 3);
        await fill(topicKey('prices'), 5);
        await fill(topicKey('trades'), 5);
        const runBefore = await all(runKey('prices', 'r'));
        const feedBefore = await all(FEED);

        expect(await store.trimTopic('prices', { maxEntries: 1 })).toEqual({
          removed: 4,
          firstSeq: 5,
        });
        expect(await seqsOf(topicKey('prices'))).toEqual([5]);
        expect(await seqsOf(topicKey('trades'))).toEqual([1, 2, 3, 4, 5]);
        expect(await all(runKey('prices', 'r'))).toEqual(runBefore);
        expect(await all(FEED)).toEqual(feedBefore);
        expect(await store.bounds(runKey('prices', 'r'))).toMatchObject({ firstSeq: 1 });
      });

      it('trims the runs feed like any topic, keeping the runs and their own streams', async () => {
        for (const runId of ['r1', 'r2', 'r3']) {
          await store.putRun('p', runId, { status: 'running' });
          await store.putRun('p', runId, { status: 'success' });
        }
        expect((await store.bounds(FEED)).lastSeq).toBe(6);
        expect(await store.trimTopic(RUNS_FEED_TOPIC, { maxEntries: 2 })).toEqual({
          removed: 4,
          firstSeq: 5,
        });
        expect(await seqsOf(FEED)).toEqual([5, 6]);
        expect((await runsOf(store, 'p', { limit: 10 })).map((run) => run.status)).toEqual([
          'success',
          'success',
          'success',
        ]);
        expect(await seqsOf(runKey('p', 'r1'))).toEqual([1, 2]);
        // The feed goes on numbering where it was.
        await store.putRun('p', 'r4', { status: 'running' });
        expect(await seqsOf(FEED)).toEqual([5, 6, 7]);
      });

      it('trims tens of thousands of entries in one call, leaving exactly the newest maxEntries', async () => {
        const key = topicKey('busy');
        for (let batch = 0; batch < 25; batch += 1) await fill(key, 1000, batch * 1000 + 1);
        expect(await store.trimTopic('busy', { maxEntries: 1500 })).toEqual({
          removed: 23_500,
          firstSeq: 23_501,
        });
        expect(await store.bounds(key)).toEqual({
          firstSeq: 23_501,
          lastSeq: 25_000,
          logBytes: 0,
          logLines: 0,
          epoch: AN_EPOCH,
        });
        const first = await store.readEntries(key, { afterSeq: 0, limit: 2 });
        expect(first.map((entry) => entry.data)).toEqual([23_501, 23_502]);
        expect(await store.readEntries(key, { afterSeq: 24_998, limit: 10 })).toHaveLength(2);
      });

      it('keeps a trim across a reopen: firstSeq stays forward and numbering continues', async (context) => {
        const reopen = subject.reopen;
        if (!reopen) {
          context.skip();
          return;
        }
        await fill(topicKey('prices'), 8);
        await store.trimTopic('prices', { maxEntries: 3 });
        await store.close();

        store = await reopen();
        expect(await store.bounds(topicKey('prices'))).toEqual({
          firstSeq: 6,
          lastSeq: 8,
          logBytes: 0,
          logLines: 0,
          epoch: AN_EPOCH,
        });
        expect(await seqsOf(topicKey('prices'))).toEqual([6, 7, 8]);
        expect(await allTopics(store)).toEqual(['prices']);
        expect(await store.trimTopic('prices', { maxEntries: 3 })).toEqual({
          removed: 0,
          firstSeq: 6,
        });
        expect(await fill(topicKey('prices'), 1, 9)).toEqual([9]);
      });
    });

    describe('reads by kind', () => {
      /** A run of mixed entries: log pieces, events of a few kinds, status entries. */
      async function mixedStream(runId: string, script: readonly string[]): Promise<Entry[]> {
        for (const kind of script) {
          if (kind === 'log') await appendOne('p', runId, `line of ${runId}\n`);
          else if (kind === 'status') await store.putRun('p', runId, { status: 'queued' });
          else await store.appendEvents(runKey('p', runId), [event(kind, { k: kind })]);
        }
        return all(runKey('p', runId));
      }

      it('reads exactly the entries of the kinds asked for, from any cursor, as a full scan would', async () => {
        let runs = 0;
        await fc.assert(
          fc.asyncProperty(
            fc.array(fc.constantFrom('log', 'progress', 'metric', 'step'), {
              minLength: 1,
              maxLength: 40,
            }),
            fc.subarray(['log', 'progress', 'metric', 'status', 'nomatch'], { minLength: 1 }),
            fc.nat({ max: 45 }),
            fc.integer({ min: 1, max: 12 }),
            async (script, kinds, after, limit) => {
              runs += 1;
              const runId = `mixed-${runs}`;
              const everything = await mixedStream(runId, script);
              const expected = everything
                .filter((entry) => entry.seq > after && kinds.includes(entry.kind))
                .slice(0, limit);
              const got = await store.readEntries(runKey('p', runId), {
                afterSeq: after,
                limit,
                kinds,
              });
              expect(got).toEqual(expected);
            },
          ),
          { seed: 31, numRuns: 60 },
        );
      });

      it('finds the n-th newest entry among kinds as a full scan would', async () => {
        const everything = await mixedStream('mixed', [
          'log',
          'progress',
          'log',
          'metric',
          'log',
          'log',
          'progress',
          'step',
          'log',
          'metric',
        ]);
        const key = runKey('p', 'mixed');
        for (const kinds of [
          ['log'],
          ['progress'],
          ['log', 'metric'],
          ['status'],
          ['nomatch'],
          ['log', 'log'],
        ]) {
          const matching = everything.filter((entry) => kinds.includes(entry.kind)).reverse();
          for (let n = 1; n <= matching.length + 1; n += 1) {
            expect(await store.nthLatestSeq(key, n, kinds), `${kinds} n=${n}`).toBe(
              matching[n - 1]?.seq,
            );
          }
        }
      });

      it('finds the first log entry past a cursor among many events, log text having been cut in pieces', async () => {
        const key = runKey('p', 'r');
        await store.appendLog('p', 'r', [{ text: 'a'.repeat(10) }, { text: 'b\n' }]);
        await store.appendEvents(
          key,
          Array.from({ length: 300 }, (_, i) => event('tick', i)),
        );
        await store.appendLog('p', 'r', [{ text: '例\n' }]);
        await store.appendEvents(key, [event('tick', 'last')]);
        const logs = await all(key, ['log']);
        expect(logs.map((entry) => entry.text)).toEqual(['a'.repeat(10), 'b\n', '例\n']);
        const lastLog = logs[2]!;
        expect(
          await store.readEntries(key, { afterSeq: logs[1]!.seq, limit: 5, kinds: ['log'] }),
        ).toEqual([lastLog]);
        expect(
          await store.readEntries(key, { afterSeq: lastLog.seq, limit: 5, kinds: ['log'] }),
        ).toEqual([]);
      });
    });

    describe('listings', () => {
      it('pages pipelines in code-point order, each once, with a next cursor until the last page', async () => {
        const names = ['b', 'a', 'é', 'a.b', 'Z', '例', 'c'];
        for (const name of names) await store.putRun(name, 'r', { status: 'running' });
        const page1 = await store.listPipelines({ limit: 3 });
        expect(page1.items.map((p) => p.fqn)).toEqual(['Z', 'a', 'a.b']);
        expect(page1.next).toBeDefined();
        const every = await allPipelines(store);
        expect(every.map((p) => p.fqn)).toEqual([...names].sort());
        const last = await store.listPipelines({ after: every[every.length - 2]!.fqn, limit: 3 });
        expect(last).toEqual({ items: [every[every.length - 1]], next: undefined });
      });

      it('finds a pipeline by its id, which is derived from its FQN and never changes', async () => {
        await store.putRun('warehouse.ingest', 'r', { status: 'running' });
        const [summary] = await allPipelines(store);
        expect(summary!.id).toBe(pipelineId('warehouse.ingest'));
        expect(await store.pipelineById(summary!.id)).toBe('warehouse.ingest');
        expect(await store.pipelineById(summary!.id.toUpperCase())).toBe('warehouse.ingest');
        expect(await store.pipelineById(pipelineId('nobody'))).toBeUndefined();
      });

      it('pages the runs of a pipeline newest first, with and without a status', async () => {
        for (let i = 1; i <= 7; i += 1) {
          await store.putRun('p', `r${i}`, { status: i % 2 === 0 ? 'failed' : 'success' });
        }
        const pages = async (status?: RunStatus) => {
          const seen: string[][] = [];
          let after: string | undefined;
          do {
            const page = await store.listRuns('p', { limit: 2, after, status });
            seen.push(page.items.map((run) => run.runId));
            after = page.next;
          } while (after !== undefined);
          return seen;
        };
        expect(await pages()).toEqual([['r7', 'r6'], ['r5', 'r4'], ['r3', 'r2'], ['r1']]);
        expect(await pages('failed')).toEqual([['r6', 'r4'], ['r2']]);
        await expect(
          store.listRuns('p', { limit: 2, after: 'not-a-cursor' }),
        ).rejects.toMatchObject({
          code: 'TW_BAD_CURSOR',
        });
      });

      it('keeps a listing page within a few megabytes of meta, however many runs it may hold', async () => {
        const meta = { blob: 'x'.repeat(60_000) };
        for (let i = 0; i < 120; i += 1)
          await store.putRun('p', `r${i}`, { status: 'running', meta });
        const first = await store.listRuns('p', { limit: 1000 });
        expect(first.items.length).toBeLessThan(120);
        expect(first.next).toBeDefined();
        const all = await everyPage((page) => store.listRuns('p', page));
        expect(all).toHaveLength(120);
        expect(new Set(all.map((run) => run.runId)).size).toBe(120);
      });

      it('filters pipelines by a glob over the FQN and by the status of their newest run', async () => {
        await store.putRun('etl.daily', 'r1', { status: 'failed' });
        await store.putRun('etl.daily', 'r2', { status: 'success' });
        await store.putRun('etl.hourly', 'r1', { status: 'failed' });
        await store.putRun('ml.train', 'r1', { status: 'running' });
        await store.putRun('ETL.upper', 'r1', { status: 'success' });
        await store.putRun('a%b_c', 'r1', { status: 'success' });
        const fqns = async (filter: { name?: string; status?: RunStatus }) =>
          (await everyPage((page) => store.listPipelines({ ...page, ...filter }), 1)).map(
            (pipeline) => pipeline.fqn,
          );
        expect(await fqns({ name: 'etl.*' })).toEqual(['etl.daily', 'etl.hourly']);
        expect(await fqns({ name: '*.daily' })).toEqual(['etl.daily']);
        expect(await fqns({ name: '*a*' })).toEqual(['a%b_c', 'etl.daily', 'ml.train']);
        expect(await fqns({ name: '*ETL*' })).toEqual(['ETL.upper']);
        // LIKE's and GLOB's other specials stand for themselves.
        expect(await fqns({ name: '*%*' })).toEqual(['a%b_c']);
        expect(await fqns({ name: '*_*' })).toEqual(['a%b_c']);
        expect(await fqns({ name: 'etl.?aily' })).toEqual([]);
        // The newest run's status, not any run's: etl.daily failed once, then succeeded.
        expect(await fqns({ status: 'failed' })).toEqual(['etl.hourly']);
        expect(await fqns({ name: 'etl.*', status: 'success' })).toEqual(['etl.daily']);
        expect(await fqns({ name: 'nothing*' })).toEqual([]);
      });

      it('lists the runs created between two times, newest first, a page at a time', async () => {
        const base = Date.UTC(2026, 10, 1);
        const hour = 3_600_000;
        const clock = vi.spyOn(Date, 'now');
        try {
          for (let i = 0; i < 10; i += 1) {
            clock.mockReturnValue(base + i * hour);
            await store.putRun('p', `r${i}`, { status: i % 3 === 0 ? 'failed' : 'success' });
          }
          clock.mockReturnValue(base + 3 * hour); // a run created with the same time as r3
          await store.putRun('p', 'r3b', { status: 'success' });
          await store.putRun('other', 'x', { status: 'success' });
        } finally {
          clock.mockRestore();
        }
        const ids = async (filter: { since?: number; until?: number; status?: RunStatus }) => {
          const pages: string[][] = [];
          let after: string | undefined;
          do {
            const page = await store.listRuns('p', { limit: 2, after, ...filter });
            pages.push(page.items.map((run) => run.runId));
            after = page.next;
          } while (after !== undefined);
          return pages;
        };
        // since inclusive, until exclusive; runs of one time newest (last created) first.
        expect(await ids({ since: base + 2 * hour, until: base + 6 * hour })).toEqual([
          ['r5', 'r4'],
          ['r3b', 'r3'],
          ['r2'],
        ]);
        expect(await ids({ since: base + 8 * hour })).toEqual([['r9', 'r8']]);
        expect(await ids({ until: base + hour })).toEqual([['r0']]);
        expect(await ids({ since: base, status: 'failed' })).toEqual([
          ['r9', 'r6'],
          ['r3', 'r0'],
        ]);
        expect(await ids({ since: base + 20 * hour })).toEqual([[]]);
        // A cursor of an unbounded listing is not one of a bounded listing, and the other way.
        const unbounded = await store.listRuns('p', { limit: 2 });
        await expect(
          store.listRuns('p', { limit: 2, after: unbounded.next, since: base }),
        ).rejects.toMatchObject({ code: 'TW_BAD_CURSOR' });
        const bounded = await store.listRuns('p', { limit: 2, since: base });
        await expect(store.listRuns('p', { limit: 2, after: bounded.next })).rejects.toMatchObject({
          code: 'TW_BAD_CURSOR',
        });
      });

      it('pages topics by name', async () => {
        for (const topic of ['t3', 't1', 't2'])
          await store.appendEvents(topicKey(topic), [event('k', 1)]);
        const page = await store.listTopics({ limit: 2 });
        expect(page).toEqual({ items: ['t1', 't2'], next: 't2' });
        expect(await store.listTopics({ after: 't2', limit: 2 })).toEqual({
          items: ['t3'],
          next: undefined,
        });
      });
    });

    describe('durability', () => {
      it('keeps runs, entries, counters and producer ids across a reopen', async (context) => {
        const reopen = subject.reopen;
        if (!reopen) {
          context.skip();
          return;
        }
        await store.putRun('p', 'r', { status: 'running', meta: { k: 'v' } });
        await appendOne('p', 'r', '例 line\n', 'L1');
        await store.appendEvents(runKey('p', 'r'), [event('progress', { pct: 1 }, { id: 'e1' })]);
        await store.appendEvents(topicKey('t'), [event('k', 1), event('k', 2)]);
        const run = await store.getRun('p', 'r');
        const entries = await all(runKey('p', 'r'));
        const feed = await all(FEED);
        const epochBefore = (await store.bounds(topicKey('t'))).epoch;
        await store.close();

        store = await reopen();
        expect(await store.getRun('p', 'r')).toEqual(run);
        expect(await all(runKey('p', 'r'))).toEqual(entries);
        expect(await all(FEED)).toEqual(feed);
        // The same database, so the same epoch: cursors handed out before stay good.
        expect(await store.bounds(topicKey('t'))).toEqual({
          firstSeq: 1,
          lastSeq: 2,
          logBytes: 0,
          logLines: 0,
          epoch: epochBefore,
        });
        expect(await readLogChunks(store, runKey('p', 'r'), -1, 100)).toEqual([
          { offset: 0, size: 9, text: '例 line\n' },
        ]);
        // Numbering, offsets and idempotency continue where they stopped.
        expect((await store.appendEvents(topicKey('t'), [event('k', 3)])).seqs).toEqual([3]);
        expect(await appendOne('p', 'r', '例 line\n', 'L1')).toMatchObject({
          duplicate: true,
          seq: 2,
        });
        expect(
          await store.appendEvents(runKey('p', 'r'), [event('progress', { pct: 1 }, { id: 'e1' })]),
        ).toMatchObject({ seqs: [3], duplicates: 1 });
        expect(await appendOne('p', 'r', 'next')).toMatchObject({ seq: 4, offset: 9 });
      });
    });
  });
}

/** Several stores open on one database at once, as replicas hold them. */
export interface ReplicasUnderTest {
  /** Opens one more store on the same, initially empty, data. */
  open: () => Promise<Store>;
  /** Closes every store `open` gave, and removes the data. */
  cleanup: () => Promise<void>;
}

/**
 * The contract of a store that several processes share (PostgreSQL; SQLite is one process's):
 * what replicas racing each other on one database could break.
 */
export function runReplicaStoreContract(
  name: string,
  makeReplicas: () => Promise<ReplicasUnderTest>,
): void {
  describe(`${name} store contract, several replicas on one database`, () => {
    let subject: ReplicasUnderTest;

    beforeEach(async () => {
      subject = await makeReplicas();
    });

    afterEach(async () => {
      await subject.cleanup();
    });

    /** Two stores on one database: two replicas. */
    const twoReplicas = async () => ({ a: await subject.open(), b: await subject.open() });

    const ev = (data: unknown, extra: Partial<NewEvent> = {}): NewEvent => ({
      kind: 'k',
      data,
      ...extra,
    });

    // A store runs its own writes to one stream one after the other, so the replicas' count is
    // how many transactions race for the stream's row at once.
    it.each([
      { replicas: 2, each: 20 },
      { replicas: 8, each: 5 },
    ])(
      'number racing appends to one stream gaplessly, each batch whole and contiguous ($replicas × $each batches)',
      async ({ replicas, each }) => {
        const stores = await Promise.all(Array.from({ length: replicas }, () => subject.open()));
        const [a, b] = stores as [Store, Store];
        const key = topicKey('race');
        const batches = Array.from({ length: replicas * each }, (_, batch) =>
          Array.from({ length: 1 + (batch % 7) }, (_, i) => ev({ batch, i })),
        );
        // Every batch at once, the replicas taking turns.
        const results = await Promise.all(
          batches.map((events, batch) => stores[batch % replicas]!.appendEvents(key, events)),
        );
        const total = batches.reduce((sum, events) => sum + events.length, 0);
        const all = await a.readEntries(key, { afterSeq: 0, limit: 10_000 });
        expect(all.map((entry) => entry.seq)).toEqual(
          Array.from({ length: total }, (_, i) => i + 1),
        );
        results.forEach((result, batch) => {
          const first = result.seqs[0]!;
          expect(result.seqs).toEqual(batches[batch]!.map((_, i) => first + i));
          expect(result.seqs.map((seq) => all[seq - 1]!.data)).toEqual(
            batches[batch]!.map((event) => event.data),
          );
        });
        expect(await b.bounds(key)).toEqual({
          firstSeq: 1,
          lastSeq: total,
          logBytes: 0,
          logLines: 0,
          epoch: (await a.bounds(key)).epoch,
        });
      },
    );

    it('hand a lease to one of them at a time, and to another once its holder releases it', async () => {
      const { a, b } = await twoReplicas();
      if (!canLease(a) || !canLease(b)) throw new Error('a shared store must hand out leases');
      const held = await a.tryLease('source:iceberg');
      expect(held).toBeDefined();
      expect(await b.tryLease('source:iceberg')).toBeUndefined();
      expect(await a.tryLease('source:iceberg')).toBeUndefined();
      // Another name is another lease.
      const retention = await b.tryLease('retention');
      expect(retention).toBeDefined();
      await held!.release();
      const taken = await b.tryLease('source:iceberg');
      expect(taken).toBeDefined();
      await taken!.release();
      await retention!.release();
    });

    it("share the database's epoch, and a replica opened after renewEpoch reads the new one", async () => {
      const { a, b } = await twoReplicas();
      const key = topicKey('t');
      await a.appendEvents(key, [ev(1)]);
      expect((await b.bounds(key)).epoch).toBe((await a.bounds(key)).epoch);
      const renewed = await a.renewEpoch();
      const c = await subject.open();
      expect((await c.bounds(key)).epoch).toBe(renewed);
      expect((await c.bounds(key)).lastSeq).toBe(1);
    });

    it('count every first run of a new pipeline when they race, whichever replica creates the pipeline', async () => {
      const { a, b } = await twoReplicas();
      for (const pipeline of ['new.one', 'new.two', 'new.three']) {
        const results = await Promise.allSettled(
          Array.from({ length: 12 }, (_, i) =>
            (i % 2 === 0 ? a : b).appendLog(pipeline, `run-${i}`, [{ text: `first ${i}\n` }]),
          ),
        );
        expect(results.filter((result) => result.status === 'rejected')).toEqual([]);
      }
      const pipelines = await allPipelines(b);
      expect(pipelines.map((p) => [p.fqn, p.runs]).sort()).toEqual([
        ['new.one', 12],
        ['new.three', 12],
        ['new.two', 12],
      ]);
    });

    it('create a run once when both append to it first, and keep its log offsets contiguous', async () => {
      const { a, b } = await twoReplicas();
      const texts = Array.from({ length: 40 }, (_, i) => `line ${i} 例\n`);
      const results = await Promise.all(
        texts.map((text, i) => (i % 2 === 0 ? a : b).appendLog('p', 'r', [{ text }])),
      );
      const entries = await a.readEntries(runKey('p', 'r'), { afterSeq: 0, limit: 1000 });
      // One status entry (the run's creation), then the 40 pieces, in some order.
      expect(entries.map((entry) => entry.kind)).toEqual(['status', ...texts.map(() => 'log')]);
      let offset = 0;
      for (const entry of entries.slice(1)) {
        expect(entry.offset).toBe(offset);
        offset += Buffer.byteLength(entry.text!, 'utf8');
      }
      for (const result of results) {
        expect(entries[result.seq - 1]).toMatchObject({ offset: result.offset });
      }
      expect((await b.getRun('p', 'r'))?.logBytes).toBe(offset);
      const feed = await b.readEntries(topicKey(RUNS_FEED_TOPIC), { afterSeq: 0, limit: 100 });
      expect(feed).toHaveLength(1);
      expect((await a.listPipelines({ limit: 10 })).items).toMatchObject([{ fqn: 'p', runs: 1 }]);
    });

    it('store a producer id raced from both once, and acknowledge both with its seq', async () => {
      const { a, b } = await twoReplicas();
      const key = topicKey('ids');
      const ids = Array.from({ length: 20 }, (_, i) => `id-${i}`);
      const pairs = await Promise.all(
        ids.map((id) =>
          Promise.all([
            a.appendEvents(key, [ev({ id }, { id })]),
            b.appendEvents(key, [ev({ id }, { id })]),
          ]),
        ),
      );
      for (const [fromA, fromB] of pairs) {
        expect(fromA.seqs).toEqual(fromB.seqs);
        expect(fromA.duplicates + fromB.duplicates).toBe(1);
      }
      const stored = await a.readEntries(key, { afterSeq: 0, limit: 1000 });
      expect(stored).toHaveLength(20);
      expect(new Set(stored.map((entry) => entry.id))).toEqual(new Set(ids));

      // The same for a log append with a producer id.
      const logs = await Promise.all([
        a.appendLog('p', 'r', [{ text: 'once\n', id: 'L' }]),
        b.appendLog('p', 'r', [{ text: 'once\n', id: 'L' }]),
      ]);
      expect(logs.map((log) => log.duplicate).sort()).toEqual([false, true]);
      expect(logs[0]).toMatchObject({ seq: logs[1].seq, offset: logs[1].offset });
      const logEntries = await b.readEntries(runKey('p', 'r'), {
        afterSeq: 0,
        limit: 10,
        kinds: ['log'],
      });
      expect(logEntries.map((entry) => entry.text)).toEqual(['once\n']);
    });

    it('never show a reader seq N+1 before N while both write', async () => {
      const { a, b } = await twoReplicas();
      const key = topicKey('order');
      // A third replica reads.
      const reader = await subject.open();
      let writing = true;
      let cursor = 0;
      let reads = 0;
      const holes: string[] = [];
      const read = async () => {
        const page = await reader.readEntries(key, { afterSeq: cursor, limit: 1000 });
        page.forEach((entry, i) => {
          if (entry.seq !== cursor + i + 1) holes.push(`after ${cursor}: got ${entry.seq}`);
        });
        cursor = page.at(-1)?.seq ?? cursor;
        reads += 1;
      };
      const watching = (async () => {
        for (let turn = 0; writing && turn < 100_000; turn += 1) await read();
      })();
      await Promise.all(
        Array.from({ length: 60 }, (_, i) =>
          (i % 2 === 0 ? a : b).appendEvents(
            key,
            Array.from({ length: 5 }, (_, j) => ev({ i, j })),
          ),
        ),
      );
      writing = false;
      await watching;
      await read();
      expect(holes).toEqual([]);
      expect(cursor).toBe(300);
      expect(reads).toBeGreaterThan(2);
    });

    it('trim a topic once when both trim it at the same time', async () => {
      const { a, b } = await twoReplicas();
      const key = topicKey('busy');
      for (let batch = 0; batch < 25; batch += 1) {
        await a.appendEvents(
          key,
          Array.from({ length: 1000 }, (_, i) => ev(batch * 1000 + i + 1)),
        );
      }
      const [fromA, fromB] = await Promise.all([
        a.trimTopic('busy', { maxEntries: 1000 }),
        b.trimTopic('busy', { maxEntries: 1000 }),
      ]);
      expect(fromA.removed + fromB.removed).toBe(24_000);
      expect([fromA.firstSeq, fromB.firstSeq]).toEqual([24_001, 24_001]);
      expect(await b.bounds(key)).toEqual({
        firstSeq: 24_001,
        lastSeq: 25_000,
        logBytes: 0,
        logLines: 0,
        epoch: AN_EPOCH,
      });
      expect((await a.readEntries(key, { afterSeq: 0, limit: 1 }))[0]?.data).toBe(24_001);
    });
  });
}
