/**
 * Search (docs/SEARCH.md) on the SQLite store: what the background indexer costs ingest and the
 * event loop, how fast it indexes, how fast search answers over a sizeable index, and how much
 * room the index takes. Everything runs in this process, on stores in a temp dir.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { DEFAULT_INDEX_LIMITS, SearchIndexer } from '../src/engine/search-indexer.js';
import { search } from '../src/engine/search.js';
import type { SearchRequest } from '../src/engine/search.js';
import { splitLogText } from '../src/model/log-chunks.js';
import { planSearch } from '../src/model/search-query.js';
import { runKey } from '../src/model/stream-key.js';
import { SqliteStore } from '../src/store/sqlite.js';
import type { IndexLimits, IndexResult } from '../src/store/store.js';
import { machineCpuMs } from './procs.js';
import { fmt, median, perSecond, writeSection } from './report.js';
import type { Row } from './report.js';

/** bench/ingest.ts's main log case: 1000 lines of ~65 B per append, in 64 KiB chunks. */
export const LINES_PER_APPEND = 1000;
const SECONDS = Number(process.env['BENCH_SECONDS'] ?? 2);
const ROUNDS = 3;
const INDEX_INTERVAL_SECONDS = 0.5;
const GOAL_LINES_PER_SECOND = 300_000;
const BLOCK_GOAL_MS = 50;
const LINE = (n: number) =>
  `2026-11-29T08:00:00.000Z INFO [load] table_${n % 97}: wrote batch ${n}\n`;

/** The search corpus: RUNS runs of LINES_PER_RUN lines, PIPELINES pipelines taking turns. */
const RUNS = Number(process.env['BENCH_SEARCH_RUNS'] ?? 200);
export const LINES_PER_RUN = 10_000;
export const PIPELINES = 20;
/** One line in each of 10 runs of `runs`, spread over the corpus and its pipelines. */
export function rareRuns(runs: number): Set<number> {
  const step = Math.floor(runs / 10);
  return new Set(Array.from({ length: 10 }, (_, k) => k * step + (k % step)));
}
const RARE_RUNS = rareRuns(RUNS);
export const RARE_LINE =
  '2026-11-29T08:00:00.000Z ERROR [load] table_7: checksum mismatch in block 0x5f3a\n';
export const RARE_TEXT = 'checksum mismatch';
export const SEARCH_LIMIT = 50;
const SAMPLES = 200;
const SAMPLE_BUDGET_MS = 12_000;

export const pipelineOf = (run: number) =>
  `bench.search.p${String(run % PIPELINES).padStart(2, '0')}`;
export const runIdOf = (run: number) => `run-${String(run).padStart(4, '0')}`;

export function text(start: number): string {
  let out = '';
  for (let i = 0; i < LINES_PER_APPEND; i += 1) out += LINE(start + i);
  return out;
}

/** Append `a` of corpus run `run`: its lines, the rare one at line 500 of append 5 of a rare run. */
export function corpusAppend(run: number, a: number, rare: ReadonlySet<number>): string {
  const body = text(run * LINES_PER_RUN + a * LINES_PER_APPEND);
  if (a !== 5 || !rare.has(run)) return body;
  const lines = body.split('\n');
  lines[500] = RARE_LINE.slice(0, -1);
  return lines.join('\n');
}

export function chunksOf(body: string): { text: string }[] {
  return splitLogText(body, 64 * 1024).map((t) => ({ text: t }));
}

export const turn = () => new Promise<void>((resolve) => setImmediate(resolve));
export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Nearest-rank percentile. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[
    Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))
  ]!;
}

export const ms = (n: number) => (n >= 100 ? `${fmt(n)} ms` : `${n.toFixed(n >= 10 ? 1 : 2)} ms`);
export const mb = (bytes: number) => `${(bytes / 1e6).toFixed(1)} MB`;
export const pct = (n: number) => `${(n * 100).toFixed(0)} %`;
export const range = (values: readonly number[]) =>
  `${fmt(Math.min(...values))}–${fmt(Math.max(...values))}`;

/** The main thread's time on a CPU and waiting in the run queue for one, in ms (Linux). */
function schedMs(): { run: number; wait: number } {
  try {
    const [run, wait] = readFileSync('/proc/thread-self/schedstat', 'utf8').trim().split(' ');
    return { run: Number(run) / 1e6, wait: Number(wait) / 1e6 };
  } catch {
    return { run: NaN, wait: 0 };
  }
}

interface Blocks {
  /** Longest gap between ticks, less the 1 ms of the interval. */
  max: number;
  /** Of that gap, the time the main thread waited for a CPU (the machine busy elsewhere). */
  maxWait: number;
  /** Longest gap with the thread's own run-queue waits taken out: the loop held by work. */
  maxOnCpu: number;
  p99: number;
  over: number;
  overOnCpu: number;
  ticks: number;
  /** The main thread's run-queue wait over the whole probe, ms. */
  wait: number;
}

/**
 * A drift probe: a 1 ms interval timer, and the longest gap between its ticks, which is the
 * longest time the event loop was held (less the 1 ms it waits by design). Each tick also reads
 * the thread's run-queue wait, so that a gap made by the machine's other work, not this
 * process's, shows as such.
 */
class LoopProbe {
  private readonly gaps: { gap: number; wait: number }[] = [];
  private last = performance.now();
  private readonly firstWait = schedMs().wait;
  private lastWait = this.firstWait;
  private readonly timer = setInterval(() => this.tick(), 1);

  private tick(): void {
    const now = performance.now();
    const { wait } = schedMs();
    this.gaps.push({ gap: now - this.last - 1, wait: wait - this.lastWait });
    this.last = now;
    this.lastWait = wait;
  }

  stop(): Blocks {
    clearInterval(this.timer);
    this.tick();
    const longest = this.gaps.reduce((a, b) => (b.gap > a.gap ? b : a));
    const onCpu = this.gaps.map((g) => g.gap - g.wait);
    return {
      max: longest.gap,
      maxWait: longest.wait,
      maxOnCpu: Math.max(...onCpu),
      p99: percentile(
        this.gaps.map((g) => g.gap),
        99,
      ),
      over: this.gaps.filter((g) => g.gap > BLOCK_GOAL_MS).length,
      overOnCpu: onCpu.filter((gap) => gap > BLOCK_GOAL_MS).length,
      ticks: this.gaps.length,
      wait: this.lastWait - this.firstWait,
    };
  }
}

/** Times each indexing pass of a store (wall time, including its turns of the event loop). */
function timePasses(store: SqliteStore): number[] {
  const passes: number[] = [];
  const original = store.indexForSearch.bind(store);
  store.indexForSearch = async (limits: IndexLimits): Promise<IndexResult> => {
    const started = performance.now();
    try {
      return await original(limits);
    } finally {
      passes.push(performance.now() - started);
    }
  };
  return passes;
}

/** What of a store file is indexed so far, read through a connection of its own. */
function indexedSoFar(path: string): { lines: number; bytes: number; logBytes: number } {
  const db = new Database(path, { readonly: true });
  try {
    const indexed = db
      .prepare<[], { lines: number; bytes: number }>(
        'SELECT coalesce(sum(next_line - 1), 0) AS lines, coalesce(sum(pending_offset), 0) AS bytes FROM search_runs',
      )
      .get()!;
    const log = db
      .prepare<[], { bytes: number }>(
        "SELECT coalesce(sum(log_bytes), 0) AS bytes FROM streams WHERE key < 'topic'",
      )
      .get()!;
    return { lines: indexed.lines, bytes: indexed.bytes, logBytes: log.bytes };
  } finally {
    db.close();
  }
}

function fileBytes(path: string): number {
  let total = 0;
  for (const file of [path, `${path}-wal`]) if (existsSync(file)) total += statSync(file).size;
  return total;
}

interface IngestResult {
  rate: number;
  lines: number;
  busy: number;
  block: Blocks;
  /** With the indexer only. */
  indexed?: {
    linesDuring: number;
    pendingEntries: number;
    pendingLines: number;
    pendingBytes: number;
    lagSeconds: number;
    catchUpMs: number;
    catchUpBlock: Blocks;
    passesDuring: number[];
    passesCatchUp: number[];
  };
}

/**
 * bench/ingest.ts's SqliteStore.appendLog loop on a fresh store, with a turn of the event loop
 * after each append (as a server gets between requests; without it nothing else, the indexer
 * included, could run until the loop ends). With `indexer`, a SearchIndexer runs alongside and
 * is then left to catch up.
 */
async function ingest(dir: string, name: string, indexer: boolean): Promise<IngestResult> {
  const path = join(dir, `${name}.db`);
  const store = new SqliteStore(path);
  const passes = timePasses(store);
  const searchIndexer = new SearchIndexer(store, { intervalSeconds: INDEX_INTERVAL_SECONDS });
  try {
    // One append first, so the run exists and the statements are warm in both cases.
    await store.appendLog('bench.pipeline', 'r1', chunksOf(text(0)));
    await sleep(20);
    if (indexer) searchIndexer.start();
    const machineBefore = machineCpuMs();
    const probe = new LoopProbe();
    const started = performance.now();
    let lines = 0;
    for (let i = 1; performance.now() - started < SECONDS * 1000 && i < 1_000_000; i += 1) {
      await store.appendLog('bench.pipeline', 'r1', chunksOf(text(i * LINES_PER_APPEND)));
      lines += LINES_PER_APPEND;
      await turn();
    }
    const elapsed = performance.now() - started;
    const machineAfter = machineCpuMs();
    const busy =
      (machineAfter.busy - machineBefore.busy) /
      Math.max(1, machineAfter.total - machineBefore.total);
    if (!indexer) {
      const block = probe.stop();
      return { rate: perSecond(lines, elapsed), lines, busy, block };
    }
    const status = await store.searchIndexStatus();
    const statusAt = Date.now();
    await searchIndexer.stop();
    const block = probe.stop();
    const passesDuring = passes.splice(0);
    const sofar = indexedSoFar(path);
    const totalLines = lines + LINES_PER_APPEND;
    const catchUpProbe = new LoopProbe();
    const catchUpStarted = performance.now();
    await searchIndexer.catchUp();
    const catchUpMs = performance.now() - catchUpStarted;
    const catchUpBlock = catchUpProbe.stop();
    const after = indexedSoFar(path);
    if (after.lines !== totalLines) {
      throw new Error(`indexed ${after.lines} lines of ${totalLines} after catchUp()`);
    }
    return {
      rate: perSecond(lines, elapsed),
      lines,
      busy,
      block,
      indexed: {
        linesDuring: sofar.lines,
        pendingEntries: status.pendingEntries,
        pendingLines: totalLines - sofar.lines,
        pendingBytes: sofar.logBytes - sofar.bytes,
        lagSeconds:
          status.oldestPendingAt === null ? 0 : (statusAt - status.oldestPendingAt) / 1000,
        catchUpMs,
        catchUpBlock,
        passesDuring,
        passesCatchUp: passes.splice(0),
      },
    };
  } finally {
    await searchIndexer.stop();
    await store.close();
    rmSync(path, { force: true });
    rmSync(`${path}-wal`, { force: true });
    rmSync(`${path}-shm`, { force: true });
  }
}

export interface Timed {
  p50: number;
  p99: number;
  samples: number;
}

export async function timeIt(fn: () => Promise<unknown>): Promise<Timed> {
  for (let i = 0; i < 3; i += 1) await fn();
  const times: number[] = [];
  const started = performance.now();
  while (times.length < SAMPLES && performance.now() - started < SAMPLE_BUDGET_MS) {
    const t = performance.now();
    await fn();
    times.push(performance.now() - t);
  }
  return { p50: percentile(times, 50), p99: percentile(times, 99), samples: times.length };
}

/** Bytes per table of the search index and of the rest, from SQLite's dbstat. */
function tableBytes(path: string): { docs: number; fts: number; state: number; rest: number } {
  const db = new Database(path, { readonly: true });
  try {
    const rows = db
      .prepare<[], { name: string; bytes: number }>(
        'SELECT name, sum(pgsize) AS bytes FROM dbstat GROUP BY name',
      )
      .all();
    const out = { docs: 0, fts: 0, state: 0, rest: 0 };
    for (const { name, bytes } of rows) {
      if (name === 'search_docs') out.docs += bytes;
      else if (name.startsWith('search_fts')) out.fts += bytes;
      else if (name === 'search_runs') out.state += bytes;
      else out.rest += bytes;
    }
    return out;
  } finally {
    db.close();
  }
}

function combine(list: readonly Blocks[]): Blocks {
  const longest = list.reduce((a, b) => (b.max > a.max ? b : a));
  const sum = (f: (b: Blocks) => number) => list.reduce((n, b) => n + f(b), 0);
  return {
    max: longest.max,
    maxWait: longest.maxWait,
    maxOnCpu: Math.max(...list.map((b) => b.maxOnCpu)),
    p99: Math.max(...list.map((b) => b.p99)),
    over: sum((b) => b.over),
    overOnCpu: sum((b) => b.overOnCpu),
    ticks: sum((b) => b.ticks),
    wait: sum((b) => b.wait),
  };
}

function blockValue(b: Blocks): string {
  return `${ms(b.max)} (${ms(b.maxOnCpu)} on CPU)`;
}

function blockNote(b: Blocks): string {
  return `longest gap ${ms(b.max)}, of which the main thread waited ${ms(b.maxWait)} for a CPU; the longest with those waits taken out ${ms(b.maxOnCpu)}; p99 ${ms(b.p99)}; ${b.over} gaps over ${BLOCK_GOAL_MS} ms (${b.overOnCpu} with the waits taken out) of ${fmt(b.ticks)} ticks; ${ms(b.wait)} waiting for a CPU in all`;
}

export async function benchSearch(): Promise<void> {
  const idleBefore = machineCpuMs();
  await sleep(1000);
  const idleAfter = machineCpuMs();
  const busyBefore =
    (idleAfter.busy - idleBefore.busy) / Math.max(1, idleAfter.total - idleBefore.total);
  const benchStarted = performance.now();
  const dir = mkdtempSync(join(tmpdir(), 'tailwater-bench-search-'));
  try {
    // ---- 1 and 2: ingest with and without the indexer, alternating --------------------------
    const without: IngestResult[] = [];
    const withIndexer: IngestResult[] = [];
    for (let round = 0; round < ROUNDS; round += 1) {
      const order = round % 2 === 0 ? [false, true] : [true, false];
      for (const indexer of order) {
        const result = await ingest(dir, `ingest-${round}-${indexer ? 'on' : 'off'}`, indexer);
        (indexer ? withIndexer : without).push(result);
        const extra = result.indexed
          ? `; indexed during ${fmt(result.indexed.linesDuring)} lines; pending ${fmt(result.indexed.pendingLines)} lines, caught up in ${ms(result.indexed.catchUpMs)}`
          : '';
        console.log(
          `round ${round + 1}, indexer ${indexer ? 'on' : 'off'}: ${fmt(result.rate)} lines/s, longest block ${ms(result.block.max)} (${ms(result.block.maxOnCpu)} on CPU)${extra}`,
        );
      }
    }
    const offRate = median(without.map((r) => r.rate));
    const onRate = median(withIndexer.map((r) => r.rate));
    const paired = withIndexer.map((r, i) => r.rate / without[i]!.rate);
    const idx = withIndexer.map((r) => r.indexed!);
    const catchUpLines = idx.map((r) => r.pendingLines);
    const catchUpRates = idx.map((r) => perSecond(r.pendingLines, r.catchUpMs));
    const catchUpMBs = idx.map((r) => perSecond(r.pendingBytes, r.catchUpMs) / 1e6);
    const duringRates = withIndexer.map((r) => perSecond(r.indexed!.linesDuring, SECONDS * 1000));
    const catchUpPasses = idx.flatMap((r) => r.passesCatchUp);
    const duringPasses = idx.flatMap((r) => r.passesDuring);
    const lineBytes = text(LINES_PER_APPEND).length / LINES_PER_APPEND;
    const blocksOff = combine(without.map((r) => r.block));
    const blocksOn = combine(withIndexer.map((r) => r.block));
    const blocksCatchUp = combine(idx.map((r) => r.catchUpBlock));

    // ---- 3: the search corpus -------------------------------------------------------------
    const path = join(dir, 'search.db');
    let store = new SqliteStore(path);
    const appendStarted = performance.now();
    for (let run = 0; run < RUNS; run += 1) {
      for (let a = 0; a < LINES_PER_RUN / LINES_PER_APPEND; a += 1) {
        await store.appendLog(
          pipelineOf(run),
          runIdOf(run),
          chunksOf(corpusAppend(run, a, RARE_RUNS)),
        );
      }
    }
    const appendMs = performance.now() - appendStarted;
    await store.close();
    const corpusLines = RUNS * LINES_PER_RUN;
    const logOnly = fileBytes(path);
    const logTables = tableBytes(path);

    // Indexed as a server does it (start(): a turn of the event loop between passes), until
    // searchIndexStatus() says nothing is waiting.
    store = new SqliteStore(path);
    const buildPasses = timePasses(store);
    const inPasses = () => buildPasses.reduce((sum, pass) => sum + pass, 0);
    const builder = new SearchIndexer(store, { intervalSeconds: INDEX_INTERVAL_SECONDS });
    const buildProbe = new LoopProbe();
    const buildStarted = performance.now();
    builder.start();
    while ((await store.searchIndexStatus()).pendingEntries > 0) await sleep(10);
    const buildMs = performance.now() - buildStarted;
    const buildInPasses = inPasses();
    await builder.stop();
    const buildBlock = buildProbe.stop();
    await store.close();
    const indexedFile = fileBytes(path);
    const tables = tableBytes(path);
    const corpus = indexedSoFar(path);
    if (corpus.lines !== corpusLines) {
      throw new Error(`the corpus indexed ${corpus.lines} lines of ${corpusLines}`);
    }
    const logBytes = corpus.logBytes;
    console.log(
      `corpus: ${fmt(corpusLines)} lines (${mb(logBytes)}) appended in ${ms(appendMs)}, indexed in ${ms(buildMs)}; longest block ${ms(buildBlock.max)} (${ms(buildBlock.maxOnCpu)} on CPU)`,
    );

    store = new SqliteStore(path);
    const newest = runKey(pipelineOf(RUNS - 1), runIdOf(RUNS - 1));
    const tailBytes = Math.ceil(lineBytes * SEARCH_LIMIT);
    let tailLines = 0;
    const baseline = await timeIt(async () => {
      const chunks = await store.readLog(newest, -1, tailBytes);
      tailLines = chunks
        .map((c) => c.text)
        .join('')
        .split('\n')
        .slice(-SEARCH_LIMIT - 1, -1).length;
    });
    if (tailLines !== SEARCH_LIMIT) throw new Error(`readLog gave ${tailLines} lines`);

    const filteredPipeline = pipelineOf(7);
    const queries: { name: string; note: string; request: Omit<SearchRequest, 'limit'> }[] = [
      {
        name: `rare literal \`${RARE_TEXT}\``,
        note: 'one line in each of 10 runs: every candidate read, fewer hits than the limit',
        request: { plan: planSearch(RARE_TEXT, false) },
      },
      {
        name: 'common literal `INFO`',
        note: 'in every line but 10',
        request: { plan: planSearch('INFO', false) },
      },
      {
        name: 'regex `table_\\d7: wrote` (literals "table_" and "7: wrote")',
        note: 'every document a candidate; 8 lines in 97 match',
        request: { plan: planSearch('table_\\d7: wrote', true) },
      },
      {
        name: 'regex `checksum \\w+ in block 0x[0-9a-f]+` (rare literals)',
        note: 'the rare line again, through the regex planner',
        request: { plan: planSearch('checksum \\w+ in block 0x[0-9a-f]+', true) },
      },
      {
        name: `\`INFO\` in pipeline \`${filteredPipeline}\``,
        note: `one pipeline of ${PIPELINES}, taking turns by run: its newest run is ${RUNS - 1 - (Math.floor((RUNS - 1 - 7) / PIPELINES) * PIPELINES + 7)} runs below the newest`,
        request: { plan: planSearch('INFO', false), pipeline: filteredPipeline },
      },
    ];
    const searched: {
      name: string;
      note: string;
      timed: Timed;
      index: Timed;
      hits: number;
      next: boolean;
      chunkLookups: number;
    }[] = [];
    // Counts the hits' chunk lookups (search() places each hit in its log chunk).
    let chunkLookups = 0;
    const logChunkAt = store.logChunkAt.bind(store);
    store.logChunkAt = (key, byte) => {
      chunkLookups += 1;
      return logChunkAt(key, byte);
    };
    for (const query of queries) {
      const request: SearchRequest = { ...query.request, limit: SEARCH_LIMIT };
      chunkLookups = 0;
      const page = await search(store, request);
      const lookups = chunkLookups;
      if (page.index.pendingEntries !== 0) throw new Error('the index is not caught up');
      const timed = await timeIt(() => search(store, request));
      // The index's part alone: the store's first page of candidate documents.
      const index = await timeIt(() =>
        store.searchDocuments({
          query: request.plan.index,
          pipeline: request.pipeline,
          limit: SEARCH_LIMIT,
        }),
      );
      searched.push({
        ...query,
        timed,
        index,
        hits: page.hits.length,
        next: page.next !== undefined,
        chunkLookups: lookups,
      });
      console.log(
        `search ${query.name}: p50 ${ms(timed.p50)}, p99 ${ms(timed.p99)} (${page.hits.length} hits)`,
      );
    }
    const rare = searched[0]!;
    if (rare.hits !== RARE_RUNS.size) throw new Error(`the rare literal gave ${rare.hits} hits`);
    const common = searched[1]!;

    // What the index saves: the rare literal found by reading every run's whole log.
    const scans: number[] = [];
    for (let i = 0; i < 3; i += 1) {
      const t = performance.now();
      let found = 0;
      for (let run = RUNS - 1; run >= 0; run -= 1) {
        const chunks = await store.readLog(runKey(pipelineOf(run), runIdOf(run)), 0, 2 ** 40);
        for (const chunk of chunks) if (chunk.text.toLowerCase().includes(RARE_TEXT)) found += 1;
      }
      scans.push(performance.now() - t);
      if (found !== RARE_RUNS.size) throw new Error(`the scan found ${found}`);
    }
    const scan = median(scans);
    await store.close();

    // ---- the section ------------------------------------------------------------------------
    const onMet = onRate >= GOAL_LINES_PER_SECOND;
    const blockMet = Math.max(blocksOn.max, buildBlock.max) <= BLOCK_GOAL_MS;
    const blockMetOnCpu = Math.max(blocksOn.maxOnCpu, buildBlock.maxOnCpu) <= BLOCK_GOAL_MS;
    const buildRate = perSecond(corpusLines, buildMs);
    const buildMBs = perSecond(logBytes, buildMs) / 1e6;
    const medianDuring = median(duringRates);
    const indexBytes = indexedFile - logOnly;
    const rows: Row[] = [
      { name: '**1. Ingest with the indexer running**', value: '', ratio: '', note: '' },
      {
        name: 'baseline: SqliteStore.appendLog, no indexer',
        value: `${fmt(offRate)} lines/s`,
        ratio: '100 %',
        note: `median of ${ROUNDS} rounds (${range(without.map((r) => r.rate))}); ${LINES_PER_APPEND} lines (~${lineBytes.toFixed(0)} B) per append, a turn of the event loop after each; machine ${pct(median(without.map((r) => r.busy)))} busy`,
      },
      {
        name: `SqliteStore.appendLog with a SearchIndexer running (intervalSeconds ${INDEX_INTERVAL_SECONDS}, default limits)`,
        value: `${fmt(onRate)} lines/s`,
        ratio: pct(onRate / offRate),
        note: `rounds ${range(withIndexer.map((r) => r.rate))}; with ÷ without within a round ${paired.map(pct).join(', ')}; meanwhile the indexer indexed ${fmt(medianDuring)} lines/s (${pct(medianDuring / onRate)} of what was appended), in passes of ${ms(median(duringPasses))} (median; max ${ms(Math.max(...duringPasses))}); machine ${pct(median(withIndexer.map((r) => r.busy)))} busy; goal ≥ ${fmt(GOAL_LINES_PER_SECOND)} lines/s: ${onMet ? 'met' : 'not met'}`,
      },
      {
        name: 'index lag when ingest stops (store.searchIndexStatus())',
        value: `${fmt(median(idx.map((r) => r.pendingLines)))} lines`,
        ratio: pct(
          median(idx.map((r, i) => r.pendingLines / (withIndexer[i]!.lines + LINES_PER_APPEND))),
        ),
        note: `of the lines appended (median); pending entries ${idx.map((r) => fmt(r.pendingEntries)).join(', ')}; oldest pending appended ${idx.map((r) => `${r.lagSeconds.toFixed(1)} s`).join(', ')} before (over ${SECONDS} s of ingest)`,
      },
      {
        name: 'catch-up: SearchIndexer.catchUp() once ingest has stopped',
        value: `${fmt(median(catchUpRates))} lines/s (${median(catchUpMBs).toFixed(1)} MB/s)`,
        ratio: pct(median(catchUpRates) / offRate),
        note: `${idx.map((r, i) => `${fmt(catchUpLines[i]!)} lines in ${ms(r.catchUpMs)}`).join(', ')}; passes of ${ms(median(catchUpPasses))} (median; p99 ${ms(percentile(catchUpPasses, 99))}, max ${ms(Math.max(...catchUpPasses))})`,
      },
      { name: '**2. Event loop**', value: '', ratio: '', note: '' },
      {
        name: 'baseline: longest block, ingest without the indexer',
        value: blockValue(blocksOff),
        ratio: '1.0 ×',
        note: `over the ${ROUNDS} rounds: ${blockNote(blocksOff)}`,
      },
      {
        name: 'longest block, ingest with the indexer',
        value: blockValue(blocksOn),
        ratio: `${(blocksOn.max / blocksOff.max).toFixed(1)} ×`,
        note: blockNote(blocksOn),
      },
      {
        name: 'longest block, SearchIndexer.catchUp() once ingest has stopped',
        value: blockValue(blocksCatchUp),
        ratio: `${(blocksCatchUp.max / blocksOff.max).toFixed(1)} ×`,
        note: `${blockNote(blocksCatchUp)}; catchUp() runs one pass after another with a turn of the event loop between them`,
      },
      {
        name: `longest block, a started SearchIndexer (as the server runs it) indexing the ${fmt(corpusLines)}-line corpus of 3.`,
        value: blockValue(buildBlock),
        ratio: `${(buildBlock.max / blocksOff.max).toFixed(1)} ×`,
        note: `${blockNote(buildBlock)}; goal ≤ ${BLOCK_GOAL_MS} ms with the server's indexer (this row and ingest with the indexer): ${blockMet ? 'met' : 'not met'}${blockMetOnCpu === blockMet ? '' : `, ${blockMetOnCpu ? 'met' : 'not met'} with the waits for a CPU taken out`}`,
      },
      {
        name: `**3. Search over ${fmt(corpusLines)} lines in ${RUNS} runs**`,
        value: '',
        ratio: '',
        note: '',
      },
      {
        name: 'building it: appends, then a started SearchIndexer until nothing is pending',
        value: `${fmt(buildRate)} lines/s (${buildMBs.toFixed(1)} MB/s)`,
        ratio: '',
        note: `${mb(logBytes)} of log appended in ${ms(appendMs)}, indexed in ${ms(buildMs)}; ${fmt(buildPasses.length)} passes of ${ms(median(buildPasses))} (median; p99 ${ms(percentile(buildPasses, 99))}), ${ms(buildMs - buildInPasses)} of the time between passes (the indexer's \`setTimeout(0)\`)`,
      },
      {
        name: `baseline: the last ${SEARCH_LIMIT} lines of the newest run (store.readLog, as log.txt?tail)`,
        value: `p50 ${ms(baseline.p50)}, p99 ${ms(baseline.p99)}`,
        ratio: '1.0 ×',
        note: `${baseline.samples} reads; the chunk holding them is read whole (~63 KB)`,
      },
      ...searched.map((s): Row => ({
        name: `search() ${s.name}, limit ${SEARCH_LIMIT}`,
        value: `p50 ${ms(s.timed.p50)}, p99 ${ms(s.timed.p99)}`,
        ratio: `${(s.timed.p50 / baseline.p50).toFixed(1)} × (p50)`,
        note: `${s.note}; ${s.hits} hits${s.next ? ' and a cursor' : ''}; ${s.timed.samples} searches; of which the store's first page of ${SEARCH_LIMIT} candidate documents (searchDocuments) p50 ${ms(s.index.p50)}; ${s.chunkLookups} logChunkAt lookups per search`,
      })),
      {
        name: 'common ÷ rare literal',
        value: `${(common.timed.p50 / rare.timed.p50).toFixed(1)} × (p50), ${(common.timed.p99 / rare.timed.p99).toFixed(1)} × (p99)`,
        ratio: '',
        note: '',
      },
      {
        name: `reference: no index, every run's log read (store.readLog) and scanned for \`${RARE_TEXT}\``,
        value: ms(scan),
        ratio: `${(scan / baseline.p50).toFixed(0)} ×`,
        note: `median of 3; ${(scan / rare.timed.p50).toFixed(0)} × the indexed search`,
      },
      { name: '**4. Size**', value: '', ratio: '', note: '' },
      {
        name: 'baseline: the log text (sum of the runs’ log bytes)',
        value: mb(logBytes),
        ratio: '1.00 ×',
        note: `${fmt(corpusLines)} lines`,
      },
      {
        name: '.db file without the index (appended, never indexed)',
        value: mb(logOnly),
        ratio: `${(logOnly / logBytes).toFixed(2)} ×`,
        note: `entries and the rest ${mb(logTables.rest)}`,
      },
      {
        name: '.db file with the index',
        value: mb(indexedFile),
        ratio: `${(indexedFile / logBytes).toFixed(2)} ×`,
        note: `the index adds ${mb(indexBytes)} (${(indexBytes / logBytes).toFixed(2)} × the log; the file grows ${(indexedFile / logOnly).toFixed(2)} ×)`,
      },
      {
        name: 'of which search_docs (the documents’ text)',
        value: mb(tables.docs),
        ratio: `${(tables.docs / logBytes).toFixed(2)} ×`,
        note: 'dbstat; the log text a second time, in documents of ~32 KiB',
      },
      {
        name: 'of which the FTS5 trigram index (search_fts_*)',
        value: mb(tables.fts),
        ratio: `${(tables.fts / logBytes).toFixed(2)} ×`,
        note: `dbstat; search_runs ${mb(tables.state)}`,
      },
    ];
    for (const row of rows) if (row.value) console.log(`${row.name}: ${row.value} (${row.ratio})`);
    const minutes = (performance.now() - benchStarted) / 60_000;
    const keepsUp = medianDuring >= onRate;
    const meaning = [
      `With the indexer running, a single writer that appends as fast as the store takes it got ${fmt(onRate)} lines/s, ${pct(onRate / offRate)} of the same loop without it: the goal of ≥ ${fmt(GOAL_LINES_PER_SECOND)} lines/s is ${onMet ? 'met' : 'not met'}. The indexer shares the one write queue, so each pass (~${ms(median(duringPasses))}) is time the appends wait; that, not CPU on the other core, is the cost.`,
      keepsUp
        ? `It kept up with that rate (${fmt(medianDuring)} lines/s indexed meanwhile).`
        : `It did not keep up with that rate: it indexed ${fmt(medianDuring)} lines/s meanwhile, so the lag grew by ${fmt(onRate - medianDuring)} lines/s and ${SECONDS} s of saturated ingest left ${fmt(median(idx.map((r) => r.pendingLines)))} lines to catch up on, which it did at ${fmt(median(catchUpRates))} lines/s (${median(catchUpMBs).toFixed(1)} MB/s) once the appends stopped. Indexing alone is ${pct(median(catchUpRates) / offRate)} of the ingest rate without it, so a writer sustained above ~${fmt(median(catchUpRates))} lines/s outruns the index however the queue is shared; below that the lag (reported with every answer) stays bounded.`,
      `The longest event-loop block was ${ms(blocksOn.max)} during ingest with the indexer (${ms(blocksOff.max)} without it) and ${ms(buildBlock.max)} while the server's indexer worked through the corpus alone (${buildBlock.over} gaps over ${BLOCK_GOAL_MS} ms); with the main thread's waits for a CPU taken out (the machine's other work), ${ms(blocksOn.maxOnCpu)} and ${ms(buildBlock.maxOnCpu)} (${buildBlock.overOnCpu} over ${BLOCK_GOAL_MS} ms): ${blockMet ? `within the ${BLOCK_GOAL_MS} ms budget` : blockMetOnCpu ? `over the ${BLOCK_GOAL_MS} ms budget as measured, within it once the waits for a CPU are taken out` : `over the ${BLOCK_GOAL_MS} ms budget even with the waits for a CPU taken out`}. \`catchUp()\`, which runs passes back to back with a turn of the event loop between them, held it ${ms(blocksCatchUp.max)} at most.`,
      `Over ${fmt(corpusLines)} lines a rare literal answers in ${ms(rare.timed.p50)} (p50), ${(scan / rare.timed.p50).toFixed(0)} × faster than reading every log, and a common one in ${ms(common.timed.p50)}, ${(common.timed.p50 / rare.timed.p50).toFixed(1)} × the rare one. The index's own part is small (its first page of candidates: ${ms(rare.index.p50)} for the rare literal, ${ms(common.index.p50)} for the common one); the rest is search()'s: matching each candidate document of ~32 KiB (a literal with the engine's own RegExp, a regular expression with RE2 in JavaScript, which is the slower), and one logChunkAt lookup per hit kept (${common.chunkLookups} for \`INFO\` against ${rare.chunkLookups} for the rare literal).`,
      `The index costs ${(indexBytes / logBytes).toFixed(2)} × the log's bytes on disk (the file grows ${(indexedFile / logOnly).toFixed(2)} ×): the text is stored again in search_docs (${(tables.docs / logBytes).toFixed(2)} ×) and the trigram postings add ${(tables.fts / logBytes).toFixed(2)} ×.`,
    ].join(' ');
    writeSection(
      'search',
      'Search',
      [
        `What search (docs/SEARCH.md) costs and gives on the SQLite store, all in one process on stores in a temp dir. In the second before the first measurement, with nothing of the benchmark running, the machine was ${pct(busyBefore)} busy (other work on it is in every figure). This part took ${minutes.toFixed(1)} min. Run it alone with \`npm run bench -- search\` (the other sections are kept).`,
        `1. Ingest: bench/ingest.ts's SqliteStore.appendLog case (${LINES_PER_APPEND} lines of ~${lineBytes.toFixed(0)} B per append, in 64 KiB chunks, one run, closed loop for ${SECONDS} s, a fresh store each time), with a turn of the event loop (\`setImmediate\`) after each append as a server gets between requests: ingest.ts's loop never yields, so a timer such as the indexer's would not run until it ends. Once with a SearchIndexer started (intervalSeconds ${INDEX_INTERVAL_SECONDS}, DEFAULT_INDEX_LIMITS: ${fmt(DEFAULT_INDEX_LIMITS.maxEntries)} entries or ${DEFAULT_INDEX_LIMITS.maxBytes / 1024} KiB per pass, and at most half the time while behind) and once without, in ${ROUNDS} rounds that alternate the order. The lag is \`searchIndexStatus()\` when the appends stop, in lines from the index's own state (search_runs); the indexer is then stopped and \`catchUp()\` timed. A pass's time is its wall time, turns of the event loop in it included.`,
        `2. Event loop: the longest gap between ticks of a 1 ms \`setInterval\` (less 1 ms) while each of those ran, and while the corpus of 3 was indexed. Each tick also reads the main thread's run-queue wait (/proc/thread-self/schedstat), so a gap can be split into time the thread had a CPU (the event loop held by work) and time it waited for one while the machine's other work ran; "on CPU" is the longest gap with those waits taken out.`,
        `3. Search: ${RUNS} runs of ${fmt(LINES_PER_RUN)} lines (the same lines; ${PIPELINES} pipelines taking turns), appended, then indexed by a started SearchIndexer (a turn of the event loop between passes, as in the server) until \`searchIndexStatus()\` shows nothing pending, searched through \`search(store, request)\` with \`planSearch\` (limit ${SEARCH_LIMIT}, newest runs first), each query ${SAMPLES} times (or ${SAMPLE_BUDGET_MS / 1000} s) after 3 warm-ups, on a store reopened after indexing. Baseline: reading the last ${SEARCH_LIMIT} lines of a run with \`store.readLog\`.`,
        `4. Size: the .db file (after close, so the WAL is folded in) before and after indexing, split by table with SQLite's dbstat, against the log's bytes.`,
        meaning,
      ].join('\n\n'),
      rows,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
