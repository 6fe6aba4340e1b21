import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Entry } from '../../src/model/entry.js';
import type { RunStatus } from '../../src/model/run.js';
import { planSearch } from '../../src/model/search-query.js';
import { runKey, topicKey } from '../../src/model/stream-key.js';
import type { SearchHit, SearchPage, SearchRequest } from '../../src/engine/search.js';
import { formatSearchCursor, search } from '../../src/engine/search.js';
import type { Store } from '../../src/store/store.js';
import { sleep } from '../helpers/wait.js';
import type { StoreUnderTest } from './store.contract.js';

/** What every indexing pass may do at most in these tests. */
const LIMITS = { maxEntries: 1000, maxBytes: 1 << 20 };

/** Indexes everything stored, one bounded pass after another, until nothing is left. */
async function indexAll(store: Store): Promise<void> {
  for (let pass = 0; pass < 10_000; pass += 1) {
    const result = await store.indexForSearch(LIMITS);
    if (!result.more) return;
  }
  throw new Error('indexForSearch still had more after 10,000 passes');
}

/** Every entry of a run, in seq order. */
async function entriesOf(store: Store, pipeline: string, runId: string, kinds?: string[]) {
  const entries: Entry[] = [];
  for (;;) {
    const page = await store.readEntries(runKey(pipeline, runId), {
      afterSeq: entries.at(-1)?.seq ?? 0,
      limit: 1000,
      kinds,
    });
    if (page.length === 0) return entries;
    entries.push(...page);
  }
}

/** The run's log as stored: the bytes of its log entries, in order. */
async function logBytesOf(store: Store, pipeline: string, runId: string): Promise<Buffer> {
  const logs = await entriesOf(store, pipeline, runId, ['log']);
  return Buffer.from(logs.map((entry) => entry.text ?? '').join(''), 'utf8');
}

/** The log entry that holds byte `offset` of the run's log. */
async function seqHolding(store: Store, pipeline: string, runId: string, offset: number) {
  const logs = await entriesOf(store, pipeline, runId, ['log']);
  const holder = logs.find(
    (entry) =>
      entry.offset !== undefined &&
      entry.offset <= offset &&
      offset < entry.offset + Buffer.byteLength(entry.text ?? '', 'utf8'),
  );
  return holder?.seq;
}

/** Where a phrase is in a log text: its 1-based line, the line's byte offset and its text. */
function placeOf(text: string, phrase: string): { line: number; offset: number; lineText: string } {
  // Case aside, as a search matches (the fixtures' lower case is as long as their text).
  const lower = text.toLowerCase();
  expect(lower.length).toBe(text.length);
  const at = lower.indexOf(phrase.toLowerCase());
  // The fixture's own check: the phrase is in the text exactly once.
  expect(at).toBeGreaterThanOrEqual(0);
  expect(lower.indexOf(phrase.toLowerCase(), at + 1)).toBe(-1);
  const lineStart = text.lastIndexOf('\n', at) + 1;
  const newline = text.indexOf('\n', at);
  return {
    line: text.slice(0, at).split('\n').length,
    offset: Buffer.byteLength(text.slice(0, lineStart), 'utf8'),
    lineText: text.slice(lineStart, newline === -1 ? text.length : newline),
  };
}

/** Cuts `text` into pieces of `size` UTF-16 units (the fixtures keep surrogate pairs whole). */
function piecesOf(text: string, size: number): string[] {
  const pieces: string[] = [];
  for (let i = 0; i < text.length; i += size) pieces.push(text.slice(i, i + size));
  return pieces;
}

/** Cuts `text` at the given UTF-16 positions. */
function cutAt(text: string, positions: number[]): string[] {
  const cuts = [0, ...positions, text.length];
  return cuts.slice(1).map((end, i) => text.slice(cuts[i], end));
}

const hitKey = (hit: SearchHit) =>
  `${hit.pipeline}/${hit.runId}/${hit.kind}/${hit.seq}/${hit.line}/${hit.matches.join(';')}`;

export function runSearchContract(name: string, makeStore: () => Promise<StoreUnderTest>): void {
  describe(`${name} search (store index + engine)`, () => {
    let subject: StoreUnderTest;
    let store: Store;

    beforeEach(async () => {
      subject = await makeStore();
      store = subject.store;
    });

    afterEach(async () => {
      await subject.cleanup();
    });

    type Options = Omit<SearchRequest, 'plan' | 'limit'> & { regex?: boolean; limit?: number };
    const find = (q: string, options: Options = {}): Promise<SearchPage> => {
      const { regex = false, limit = 500, ...rest } = options;
      return search(store, { plan: planSearch(q, regex), limit, ...rest });
    };
    /** Every page of a search, followed to its end. */
    const everyHit = async (q: string, options: Options = {}): Promise<SearchHit[][]> => {
      const pages: SearchHit[][] = [];
      let cursor: string | undefined;
      do {
        const page = await find(q, { ...options, cursor });
        pages.push(page.hits);
        cursor = page.next;
        if (pages.length > 1000) throw new Error('more than 1000 pages');
      } while (cursor !== undefined);
      return pages;
    };
    const runsOf = (hits: SearchHit[]) => hits.map((hit) => `${hit.pipeline}/${hit.runId}`);
    const appendAll = async (pipeline: string, runId: string, pieces: string[]) => {
      for (const text of pieces) await store.appendLog(pipeline, runId, [{ text }]);
    };
    /** The one hit of `phrase` in a run, checked against the log as stored. */
    const expectOneHit = async (pipeline: string, runId: string, text: string, phrase: string) => {
      const place = placeOf(text, phrase);
      const hits = (await find(phrase)).hits.filter((hit) => hit.runId === runId);
      expect(hits).toHaveLength(1);
      const hit = hits[0]!;
      expect(hit).toMatchObject({
        pipeline,
        runId,
        kind: 'log',
        line: place.line,
        offset: place.offset,
      });
      const log = await logBytesOf(store, pipeline, runId);
      expect(log.toString('utf8')).toBe(text);
      // The offset is the first byte of the line: just after a newline, or the log's start.
      expect(hit.offset === 0 || log[hit.offset! - 1] === 0x0a).toBe(true);
      expect(log.subarray(hit.offset!).toString('utf8').startsWith(place.lineText)).toBe(true);
      expect(hit.seq).toBe(await seqHolding(store, pipeline, runId, hit.offset!));
      return hit;
    };
    const matched = (hit: SearchHit) => hit.matches.map(([a, b]) => hit.text.slice(a, b));

    describe('where a hit is', () => {
      it('gives the exact line number, byte offset and seq of a phrase after multibyte text', async () => {
        const pieces = [
          'héllo wörld 日本\n',
          'second 😀 line, 日本語 ünïcödé\n',
          // The third line starts in this entry and goes on in the next.
          'tail of nothing\nthird: café 日本 😀 and ',
          'é 😀 the Quick Brown Fox jumps\n',
          'fifth line\n',
        ];
        const text = pieces.join('');
        await appendAll('etl.load', 'r1', pieces);
        await indexAll(store);

        const hit = await expectOneHit('etl.load', 'r1', text, 'quick brown fox');
        expect(hit.line).toBe(4);
        expect(hit.offset).toBe(
          Buffer.byteLength(pieces.slice(0, 2).join('') + 'tail of nothing\n'),
        );
        const entries = await entriesOf(store, 'etl.load', 'r1', ['log']);
        // The line starts in the third log entry, though the phrase is in the fourth.
        expect(hit.seq).toBe(entries[2]!.seq);
        expect(hit.seq).not.toBe(entries[3]!.seq);
        expect(hit.text).toBe('third: café 日本 😀 and é 😀 the Quick Brown Fox jumps');
        expect(hit.truncated).toBe(false);
        expect(hit.textStart).toBe(0);
        expect(matched(hit)).toEqual(['Quick Brown Fox']);
      });

      it('finds a phrase on the first line at offset 0, and one on the last line', async () => {
        const text = 'alpha 😀 marker one\nmiddle\n日本 ending marker two\n';
        await appendAll('etl.load', 'r1', [text]);
        await indexAll(store);
        const first = await expectOneHit('etl.load', 'r1', text, 'marker one');
        expect(first).toMatchObject({ line: 1, offset: 0 });
        const last = await expectOneHit('etl.load', 'r1', text, 'marker two');
        expect(last).toMatchObject({
          line: 3,
          offset: Buffer.byteLength('alpha 😀 marker one\nmiddle\n'),
        });
      });
    });

    describe('however the log was appended', () => {
      /** Forty lines, the phrase on line 23 (after multibyte text). */
      const lines = Array.from({ length: 40 }, (_, i) =>
        i === 22
          ? `line ${i + 1} é日本😀 the zebra crossing is here\n`
          : `line ${i + 1}: ok ü 😀\n`,
      );
      const text = lines.join('');

      it('finds a phrase once when each line is its own append', async () => {
        await appendAll('etl.load', 'r1', lines);
        await indexAll(store);
        expect((await expectOneHit('etl.load', 'r1', text, 'zebra crossing')).line).toBe(23);
      });

      it('finds a phrase once when lines are split mid-word across appends', async () => {
        // Every 7 UTF-16 units, moved back one where that would split a surrogate pair.
        const positions: number[] = [];
        for (let i = 7; i < text.length; i += 7) {
          const code = text.charCodeAt(i);
          positions.push(code >= 0xdc00 && code <= 0xdfff ? i - 1 : i);
        }
        await appendAll('etl.load', 'r1', cutAt(text, positions));
        expect((await entriesOf(store, 'etl.load', 'r1', ['log'])).length).toBe(
          positions.length + 1,
        );
        await indexAll(store);
        expect((await expectOneHit('etl.load', 'r1', text, 'zebra crossing')).line).toBe(23);
      });

      it('finds a phrase once when the phrase itself is split across two appends', async () => {
        const middle = text.indexOf('zebra crossing') + 'zebra cro'.length;
        await appendAll('etl.load', 'r1', cutAt(text, [middle]));
        await indexAll(store);
        const hit = await expectOneHit('etl.load', 'r1', text, 'zebra crossing');
        expect(hit.line).toBe(23);
        expect(matched(hit)).toEqual(['zebra crossing']);
      });

      it('finds a phrase once when the phrase is appended in several indexing passes', async () => {
        // The index catches up between appends: the line's start waits for its end.
        const middle = text.indexOf('zebra crossing') + 'zebra'.length;
        const [head, tail] = cutAt(text, [middle]);
        await appendAll('etl.load', 'r1', [head!]);
        await indexAll(store);
        expect((await find('zebra crossing')).hits).toEqual([]);
        await appendAll('etl.load', 'r1', [tail!]);
        await indexAll(store);
        expect((await expectOneHit('etl.load', 'r1', text, 'zebra crossing')).line).toBe(23);
      });

      it('finds a phrase once in a log appended as 64 KiB chunks, lines crossing chunk boundaries', async () => {
        const CHUNK = 64 * 1024;
        const rows: string[] = [];
        let length = 0;
        for (let i = 0; length < CHUNK - 400; i += 1) {
          const row = `row ${i} é日 ${'abcdefghij'.repeat(i % 37)}\n`;
          rows.push(row);
          length += row.length;
        }
        // The phrase straddles the first chunk boundary.
        const filler = 'x'.repeat(CHUNK - length - 'pad '.length - 'zebra cr'.length);
        rows.push(`pad ${filler}zebra crossing at the boundary\n`);
        for (let i = 0; rows.join('').length < 4 * CHUNK + 1000; i += 1) {
          rows.push(`later ${i} ü日本 ${'klmnopqrst'.repeat((i * 7) % 53)}\n`);
        }
        const big = rows.join('');
        expect(big.indexOf('zebra crossing')).toBeLessThan(CHUNK);
        expect(big.indexOf('zebra crossing') + 'zebra crossing'.length).toBeGreaterThan(CHUNK);
        const chunks = piecesOf(big, CHUNK);
        expect(chunks.length).toBeGreaterThanOrEqual(5);
        // Every chunk boundary falls inside a line.
        for (const chunk of chunks.slice(0, -1)) expect(chunk.endsWith('\n')).toBe(false);
        await appendAll('etl.load', 'r1', chunks);
        await indexAll(store);
        const hit = await expectOneHit('etl.load', 'r1', big, 'zebra crossing');
        expect(hit.line).toBe(rows.findIndex((row) => row.includes('zebra crossing')) + 1);
        // A line past several chunks and documents is numbered right too.
        const lastLine = rows.length;
        const lastRow = rows.at(-1)!.slice(0, -1);
        const lastHits = (await find(lastRow)).hits;
        expect(lastHits.map((h) => h.line)).toEqual([lastLine]);
        expect(lastHits[0]!.offset).toBe(Buffer.byteLength(rows.slice(0, -1).join('')));
      });
    });

    describe('the last line', () => {
      it('finds a last line without a newline once the run ends, and not before', async () => {
        const text = 'first line\nsecond line\nthe unfinished last line';
        await appendAll('etl.load', 'r1', cutAt(text, [text.indexOf('unfinished') + 3]));
        await indexAll(store);
        // Indexing did run: the lines before it are found.
        expect((await find('second line')).hits.map((hit) => hit.line)).toEqual([2]);
        expect((await find('unfinished last')).hits).toEqual([]);

        await store.putRun('etl.load', 'r1', { status: 'success' });
        // Not yet indexed, still not found.
        expect((await find('unfinished last')).hits).toEqual([]);
        await indexAll(store);
        const hit = await expectOneHit('etl.load', 'r1', text, 'unfinished last');
        expect(hit).toMatchObject({
          line: 3,
          offset: Buffer.byteLength('first line\nsecond line\n'),
          text: 'the unfinished last line',
          runStatus: 'success',
        });
      });
    });

    describe('matching', () => {
      it('is case-insensitive both ways', async () => {
        await appendAll('etl.load', 'r1', [
          'Connection REFUSED by Upstream host\n',
          'a lowercase timeout here\n',
        ]);
        await indexAll(store);
        const upper = (await find('refused by upstream')).hits;
        expect(upper.map((hit) => hit.line)).toEqual([1]);
        expect(matched(upper[0]!)).toEqual(['REFUSED by Upstream']);
        const lower = (await find('TIMEOUT HERE')).hits;
        expect(lower.map((hit) => hit.line)).toEqual([2]);
        expect(matched(lower[0]!)).toEqual(['timeout here']);
        expect((await find('ReFuSeD', { regex: true })).hits.map((hit) => hit.line)).toEqual([1]);
      });

      it('is case-insensitive beyond ASCII (É/é, Ü/ü)', async () => {
        await appendAll('etl.load', 'r1', ['ÉCOLE fermée\n', 'über alles\n']);
        await indexAll(store);
        expect((await find('école')).hits.map((hit) => hit.line)).toEqual([1]);
        expect((await find('ÜBER')).hits.map((hit) => hit.line)).toEqual([2]);
      });

      it('treats a plain query as a literal, not a pattern', async () => {
        await appendAll('etl.load', 'r1', ['cost is 3.5*x (approx)\n', 'cost is 3a5xx approx\n']);
        await indexAll(store);
        expect((await find('3.5*x (')).hits.map((hit) => hit.line)).toEqual([1]);
        expect((await find('100%')).hits).toEqual([]);
      });

      it('matches regular expressions: out\\w+error and (timeout|refused) after', async () => {
        await appendAll('etl.load', 'r1', [
          'java.lang.OutOfMemoryError: heap\n',
          'connect timeout after 30s\n',
          'nothing here\n',
          'connection refused after 3 tries\n',
          'retry after 5s\n',
          'out error with a space\n',
        ]);
        await indexAll(store);
        const oom = (await find('out\\w+error', { regex: true })).hits;
        expect(oom.map((hit) => hit.line)).toEqual([1]);
        expect(matched(oom[0]!)).toEqual(['OutOfMemoryError']);
        const after = (await find('(timeout|refused) after', { regex: true })).hits;
        expect(after.map((hit) => hit.line)).toEqual([4, 2]);
        expect(after.flatMap(matched)).toEqual(['refused after', 'timeout after']);
      });

      it('anchors ^ and $ at the start and end of each line, not of the log', async () => {
        await appendAll('etl.load', 'r1', [
          'first line\n',
          'ERROR: disk full\n',
          'INFO ERROR: not at the start\n',
          'the end is here\n',
          'here it is not the end\n',
        ]);
        await indexAll(store);
        expect((await find('^error:', { regex: true })).hits.map((hit) => hit.line)).toEqual([2]);
        expect((await find('is here$', { regex: true })).hits.map((hit) => hit.line)).toEqual([4]);
      });

      it('refuses .*, \\d+, backreferences and lookarounds with TW_BAD_QUERY', () => {
        for (const q of ['.*', '\\d+', '(a)\\1', '(abc)\\1', '(?=abc)abc', '(?<=abc)def', 'ab']) {
          expect(() => planSearch(q, true), q).toThrow(
            expect.objectContaining({ code: 'TW_BAD_QUERY' }),
          );
        }
        expect(() => planSearch('ab', false)).toThrow(
          expect.objectContaining({ code: 'TW_BAD_QUERY' }),
        );
      });
    });

    describe('filters', () => {
      it('keeps only pipelines that match a glob', async () => {
        await appendAll('etl.load', 'r1', ['shared phrase\n']);
        await appendAll('etl.extract', 'r2', ['shared phrase\n']);
        await appendAll('ml.train', 'r3', ['shared phrase\n']);
        await appendAll('xetl.load', 'r4', ['shared phrase\n']);
        await indexAll(store);
        expect(runsOf((await find('shared phrase')).hits)).toEqual([
          'xetl.load/r4',
          'ml.train/r3',
          'etl.extract/r2',
          'etl.load/r1',
        ]);
        expect(runsOf((await find('shared phrase', { pipeline: 'etl.*' })).hits)).toEqual([
          'etl.extract/r2',
          'etl.load/r1',
        ]);
        expect(runsOf((await find('shared phrase', { pipeline: 'ml.train' })).hits)).toEqual([
          'ml.train/r3',
        ]);
        expect(runsOf((await find('shared phrase', { pipeline: '*.load' })).hits)).toEqual([
          'xetl.load/r4',
          'etl.load/r1',
        ]);
        expect((await find('shared phrase', { pipeline: 'ml' })).hits).toEqual([]);
      });

      it('keeps only runs of the given statuses', async () => {
        const statuses: [string, RunStatus][] = [
          ['r1', 'success'],
          ['r2', 'failed'],
          ['r3', 'running'],
        ];
        for (const [runId, status] of statuses) {
          await appendAll('etl.load', runId, ['status phrase\n']);
          if (status !== 'running') await store.putRun('etl.load', runId, { status });
        }
        await indexAll(store);
        const of = async (wanted: RunStatus[]) =>
          (await find('status phrase', { statuses: wanted })).hits.map(
            (hit) => `${hit.runId}:${hit.runStatus}`,
          );
        expect(await of(['failed'])).toEqual(['r2:failed']);
        expect(await of(['success', 'running'])).toEqual(['r3:running', 'r1:success']);
        expect(await of(['cancelled'])).toEqual([]);
      });

      it('keeps only runs created at or after since and before until', async () => {
        await appendAll('etl.load', 'old', ['time phrase\n']);
        await sleep(20);
        const t1 = Date.now();
        await sleep(20);
        await appendAll('etl.load', 'mid', ['time phrase\n']);
        await sleep(20);
        const t2 = Date.now();
        await sleep(20);
        await appendAll('etl.load', 'new', ['time phrase\n']);
        // Written to later: it is when a run was created that counts.
        await appendAll('etl.load', 'old', ['time phrase again\n']);
        await indexAll(store);
        const ids = async (options: Options) => [
          ...new Set((await find('time phrase', options)).hits.map((hit) => hit.runId)),
        ];
        expect(await ids({})).toEqual(['new', 'mid', 'old']);
        expect(await ids({ since: t1 })).toEqual(['new', 'mid']);
        expect(await ids({ until: t1 })).toEqual(['old']);
        expect(await ids({ since: t1, until: t2 })).toEqual(['mid']);
        expect(await ids({ since: t2 })).toEqual(['new']);
        expect(await ids({ since: Date.now() + 60_000 })).toEqual([]);
        // At or after `since`, before `until`: a run's own creation time is in, and out.
        const mid = Date.parse((await store.getRun('etl.load', 'mid'))!.createdAt);
        expect(await ids({ since: mid, until: t2 })).toEqual(['mid']);
        expect(await ids({ since: t1, until: mid })).toEqual([]);
        // Each hit says when its run was created.
        const hits = (await find('time phrase', { since: t1, until: t2 })).hits;
        expect(hits.map((hit) => hit.runCreatedAt)).toEqual([
          (await store.getRun('etl.load', 'mid'))!.createdAt,
        ]);
      });

      it("searches log text or event data by kind; an event hit has no line and the event's seq", async () => {
        await appendAll('etl.load', 'r1', ['kind phrase in the log\n']);
        const { seqs } = await store.appendEvents(runKey('etl.load', 'r1'), [
          { kind: 'metric', data: { note: 'kind phrase in an event', value: 3 } },
        ]);
        await indexAll(store);
        const logs = (await find('kind phrase', { kind: 'log' })).hits;
        expect(logs).toHaveLength(1);
        expect(logs[0]).toMatchObject({
          kind: 'log',
          line: 1,
          offset: 0,
          text: 'kind phrase in the log',
        });
        const events = (await find('kind phrase', { kind: 'event' })).hits;
        expect(events).toHaveLength(1);
        expect(events[0]).toMatchObject({ kind: 'event', line: null, offset: null, seq: seqs[0] });
        expect(events[0]!.text).toContain('kind phrase in an event');
        expect(matched(events[0]!)).toEqual(['kind phrase']);
        const both = (await find('kind phrase')).hits;
        expect(both.map((hit) => hit.kind).sort()).toEqual(['event', 'log']);
        // Event data is searched as stored, keys included.
        expect((await find('"note"', { kind: 'event' })).hits).toHaveLength(1);
        expect((await find('"note"', { kind: 'log' })).hits).toEqual([]);
      });

      it('leaves out pipelines the caller may not read', async () => {
        await appendAll('etl.load', 'r1', ['private phrase\n']);
        await appendAll('secret.payroll', 'r2', ['private phrase\n']);
        await appendAll('etl.extract', 'r3', ['private phrase\n']);
        await indexAll(store);
        const mayRead = (pipeline: string) => !pipeline.startsWith('secret.');
        expect(runsOf((await find('private phrase', { mayRead })).hits)).toEqual([
          'etl.extract/r3',
          'etl.load/r1',
        ]);
        expect((await find('private phrase', { mayRead: () => false })).hits).toEqual([]);
        // Followed page by page, what may not be read stays out as well.
        const paged = (await everyHit('private phrase', { mayRead, limit: 1 })).flat();
        expect(runsOf(paged)).toEqual(['etl.extract/r3', 'etl.load/r1']);
      });
    });

    describe('order and pages', () => {
      it('answers newest runs first (by creation), later lines first within a run', async () => {
        for (const runId of ['a', 'b', 'c'])
          await store.putRun('etl.load', runId, { status: 'running' });
        const log = Array.from({ length: 10 }, (_, i) =>
          [1, 4, 8].includes(i) ? `line ${i + 1} order phrase\n` : `line ${i + 1}\n`,
        ).join('');
        // Written in another order than created.
        for (const runId of ['c', 'a', 'b']) await appendAll('etl.load', runId, [log]);
        await indexAll(store);
        const hits = (await find('order phrase')).hits;
        expect(hits.map((hit) => `${hit.runId}:${hit.line}`)).toEqual([
          'c:9',
          'c:5',
          'c:2',
          'b:9',
          'b:5',
          'b:2',
          'a:9',
          'a:5',
          'a:2',
        ]);
      });

      it('pages with cursors: every hit exactly once, in the order of one big page', async () => {
        for (let run = 0; run < 5; run += 1) {
          const pipeline = run % 2 === 0 ? 'etl.load' : 'ml.train';
          // Lines long enough that each run's log is several index documents.
          const lines = Array.from({ length: 60 }, (_, i) =>
            i % 9 === 3
              ? `${i} page phrase ${'p'.repeat(1500)} page phrase\n`
              : `${i} ${'q'.repeat(1500)}\n`,
          );
          await appendAll(pipeline, `r${run}`, piecesOf(lines.join(''), 10_000));
          await store.appendEvents(runKey(pipeline, `r${run}`), [
            { kind: 'k', data: { msg: 'page phrase event' } },
          ]);
          await appendAll(pipeline, `r${run}`, ['tail page phrase\n']);
        }
        await indexAll(store);
        const big = await find('page phrase', { limit: 500 });
        expect(big.next).toBeUndefined();
        expect(big.hits.length).toBeGreaterThanOrEqual(30);
        const keys = big.hits.map(hitKey);
        expect(new Set(keys).size).toBe(keys.length);
        for (const limit of [7, 1, 3]) {
          const pages = await everyHit('page phrase', { limit });
          for (const page of pages) expect(page.length).toBeLessThanOrEqual(limit);
          expect(pages.flat().map(hitKey), `limit ${limit}`).toEqual(keys);
        }
        // Filters hold across pages too.
        const etl = big.hits.filter((hit) => hit.pipeline === 'etl.load').map(hitKey);
        expect(
          (await everyHit('page phrase', { limit: 7, pipeline: 'etl.*' })).flat().map(hitKey),
        ).toEqual(etl);
      });

      it('refuses a bad cursor with TW_BAD_CURSOR', async () => {
        await appendAll('etl.load', 'r1', ['cursor phrase\n']);
        await indexAll(store);
        for (const cursor of ['not-a-cursor', Buffer.from('abc:1').toString('base64url'), '']) {
          await expect(find('cursor phrase', { cursor }), cursor).rejects.toMatchObject({
            code: 'TW_BAD_CURSOR',
          });
        }
        // A cursor past every document is a well-formed last page.
        const past = await find('cursor phrase', { cursor: formatSearchCursor(0, 0) });
        expect(past.hits).toEqual([]);
        expect(past.next).toBeUndefined();
      });
    });

    describe('the index', () => {
      it('finds what was written only once it is indexed, and says how much is waiting', async () => {
        await appendAll('etl.load', 'r1', ['already indexed\n']);
        await indexAll(store);
        expect(await store.searchIndexStatus()).toEqual({
          pendingRuns: 0,
          pendingEntries: 0,
          oldestPendingAt: null,
        });

        await appendAll('etl.load', 'r1', ['fresh phrase\n']);
        const waiting = await store.searchIndexStatus();
        expect(waiting.pendingRuns).toBe(1);
        expect(waiting.pendingEntries).toBeGreaterThan(0);
        expect(waiting.oldestPendingAt).not.toBeNull();
        expect(waiting.oldestPendingAt!).toBeLessThanOrEqual(Date.now());
        const before = await find('fresh phrase');
        expect(before.hits).toEqual([]);
        expect(before.index.pendingEntries).toBe(waiting.pendingEntries);

        await indexAll(store);
        expect(await store.searchIndexStatus()).toEqual({
          pendingRuns: 0,
          pendingEntries: 0,
          oldestPendingAt: null,
        });
        const after = await find('fresh phrase');
        expect(after.hits.map((hit) => hit.line)).toEqual([2]);
        expect(after.index).toEqual({ pendingEntries: 0, lagSeconds: 0 });
      });

      it('indexes a large backlog in bounded passes', async () => {
        for (let i = 0; i < 30; i += 1) {
          await appendAll(`etl.p${i % 3}`, `r${i}`, [`backlog phrase ${i}\n`, 'more\n']);
        }
        let passes = 0;
        for (;;) {
          const result = await store.indexForSearch({ maxEntries: 7, maxBytes: 1 << 20 });
          passes += 1;
          expect(result.entries).toBeLessThanOrEqual(7);
          if (!result.more) break;
          expect(passes).toBeLessThan(1000);
        }
        // 30 runs of 3 entries (the status that created each, and two appends).
        expect(passes).toBeGreaterThanOrEqual(Math.ceil(90 / 7));
        expect((await find('backlog phrase')).hits).toHaveLength(30);
      });
    });

    describe('long lines', () => {
      const long = 'x'.repeat(299_950) + ' the needle phrase ' + 'y'.repeat(31);
      const text = `before\n${long}\nafter\n`;

      it('finds a phrase near the end of a 300,000-character line, cut to 1000 characters', async () => {
        expect(long.length).toBe(300_000);
        await appendAll('etl.load', 'r1', piecesOf(text, 64 * 1024));
        await indexAll(store);
        const hits = (await find('NEEDLE PHRASE')).hits;
        expect(hits).toHaveLength(1);
        const hit = hits[0]!;
        expect(hit.text.length).toBeLessThanOrEqual(1000);
        expect(hit.truncated).toBe(true);
        expect(hit.matches).toHaveLength(1);
        expect(matched(hit).map((m) => m.toLowerCase())).toEqual(['needle phrase']);
        expect(hit.text).toContain('the needle phrase');
      });

      it("places a hit far into a line over 256 KiB at the line's own number, offset and position", async () => {
        await appendAll('etl.load', 'r1', piecesOf(text, 64 * 1024));
        await indexAll(store);
        const [hit] = (await find('needle phrase')).hits;
        // Soft: each of these is reported on its own.
        expect.soft(hit!.line).toBe(2);
        expect.soft(hit!.offset).toBe(Buffer.byteLength('before\n'));
        // The entry that holds the line's first byte.
        expect.soft(hit!.seq).toBe(await seqHolding(store, 'etl.load', 'r1', 7));
        // textStart is where the hit's text is in the whole line.
        expect.soft(long.slice(hit!.textStart, hit!.textStart + hit!.text.length)).toBe(hit!.text);
        // The line after it keeps its number.
        expect.soft((await find('after', { kind: 'log' })).hits.map((h) => h.line)).toEqual([3]);
      });
    });

    describe('what is searched', () => {
      it('indexes and finds nothing written to topics', async () => {
        await store.appendEvents(topicKey('t'), [
          { kind: 'k', data: { msg: 'topic only phrase' } },
          { kind: 'k', data: { msg: 'topic only phrase again' } },
        ]);
        expect((await store.searchIndexStatus()).pendingEntries).toBe(0);
        await appendAll('etl.load', 'r1', ['a run phrase\n']);
        await indexAll(store);
        expect((await find('topic only phrase')).hits).toEqual([]);
        expect((await find('run phrase')).hits.map((hit) => hit.runId)).toEqual(['r1']);
        await store.appendEvents(topicKey('t'), [
          { kind: 'k', data: { msg: 'topic only phrase' } },
        ]);
        expect(await store.searchIndexStatus()).toMatchObject({
          pendingRuns: 0,
          pendingEntries: 0,
        });
        expect((await store.indexForSearch(LIMITS)).more).toBe(false);
        expect((await find('topic only phrase')).hits).toEqual([]);
      });
    });
  });
}
