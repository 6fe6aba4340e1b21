/**
 * Search and ingest once history is sealed (docs/STORAGE.md, "Sealed segments"): bench/search.ts's
 * corpus at 10,000,000 lines, searched hot (today's store: the baseline) and again once every run
 * is sealed into segments; and appends to a live run with the server's seal loop sealing that
 * corpus meanwhile, against the same appends with it stopped. All in one process, in a temp dir.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SealLoop } from '../src/engine/seal-loop.js';
import { search } from '../src/engine/search.js';
import type { SearchRequest } from '../src/engine/search.js';
import { planSearch } from '../src/model/search-query.js';
import { SealedStore } from '../src/store/sealed-store.js';
import { DEFAULT_SEALED_STORE_OPTIONS } from '../src/store/sealed-store.js';
import { LocalSegmentStore } from '../src/store/segment-store.js';
import { SqliteStore } from '../src/store/sqlite.js';
import type { Store } from '../src/store/store.js';
import { machineCpuMs } from './procs.js';
import { fmt, median, perSecond, writeSection } from './report.js';
import type { Row } from './report.js';
import {
  LINES_PER_APPEND,
  LINES_PER_RUN,
  PIPELINES,
  RARE_TEXT,
  SEARCH_LIMIT,
  chunksOf,
  corpusAppend,
  mb,
  ms,
  pct,
  pipelineOf,
  range,
  rareRuns,
  runIdOf,
  text,
  timeIt,
  turn,
} from './search.js';
import type { Timed } from './search.js';

const RUNS = Number(process.env['BENCH_SEALED_RUNS'] ?? 1000);
const RARE_RUNS = rareRuns(RUNS);
const SECONDS = Number(process.env['BENCH_SECONDS'] ?? 2);
const ROUNDS = 3;
const RARE_GOAL_MS = 50;
/** The common literal's p50 over 2,000,000 hot lines in docs/BENCHMARKS.md ("Search"). */
const COMMON_TODAY_MS = 12.8;
const INGEST_GOAL = 0.95;

interface Query {
  name: string;
  note: string;
  request: SearchRequest;
}

const QUERIES: Query[] = [
  {
    name: `rare literal \`${RARE_TEXT}\``,
    note: 'one line in each of 10 runs: every run looked at, fewer hits than the limit',
    request: { plan: planSearch(RARE_TEXT, false), limit: SEARCH_LIMIT },
  },
  {
    name: 'common literal `INFO`',
    note: 'in every line but 10',
    request: { plan: planSearch('INFO', false), limit: SEARCH_LIMIT },
  },
  {
    name: 'regex `checksum \\w+ in block 0x[0-9a-f]+` (rare literals)',
    note: 'the rare line again, through the regex planner',
    request: { plan: planSearch('checksum \\w+ in block 0x[0-9a-f]+', true), limit: SEARCH_LIMIT },
  },
  {
    name: `\`INFO\` in pipeline \`${pipelineOf(7)}\``,
    note: `one pipeline of ${PIPELINES}, taking turns by run`,
    request: { plan: planSearch('INFO', false), pipeline: pipelineOf(7), limit: SEARCH_LIMIT },
  },
];

interface Searched {
  timed: Timed;
  first: number;
  hits: number;
}

async function searchAll(store: Store): Promise<Searched[]> {
  const out: Searched[] = [];
  for (const query of QUERIES) {
    const started = performance.now();
    const page = await search(store, query.request);
    const first = performance.now() - started;
    if (page.index.pendingEntries !== 0) throw new Error('the index is not caught up');
    const timed = await timeIt(() => search(store, query.request));
    out.push({ timed, first, hits: page.hits.length });
    console.log(
      `  ${query.name}: first ${ms(first)}, p50 ${ms(timed.p50)}, p99 ${ms(timed.p99)} (${page.hits.length} hits)`,
    );
  }
  if (out[0]!.hits !== RARE_RUNS.size) throw new Error(`the rare literal gave ${out[0]!.hits}`);
  return out;
}

/** Appends to one live run for SECONDS, a turn of the event loop after each; lines/s. */
async function ingest(store: Store, runId: string): Promise<{ rate: number; busy: number }> {
  const before = machineCpuMs();
  const started = performance.now();
  let lines = 0;
  for (let i = 0; performance.now() - started < SECONDS * 1000 && i < 1_000_000; i += 1) {
    await store.appendLog('bench.sealed.live', runId, chunksOf(text(lines)));
    lines += LINES_PER_APPEND;
    await turn();
  }
  const rate = perSecond(lines, performance.now() - started);
  const after = machineCpuMs();
  return { rate, busy: (after.busy - before.busy) / Math.max(1, after.total - before.total) };
}

export async function benchSearchSealed(): Promise<void> {
  const benchStarted = performance.now();
  const dir = mkdtempSync(join(tmpdir(), 'tailwater-bench-sealed-'));
  try {
    // ---- the corpus, hot: appended, indexed, finished --------------------------------------
    const path = join(dir, 'tailwater.db');
    const hot = new SqliteStore(path);
    const built = performance.now();
    for (let run = 0; run < RUNS; run += 1) {
      await hot.putRun(pipelineOf(run), runIdOf(run), { status: 'running' });
      for (let a = 0; a < LINES_PER_RUN / LINES_PER_APPEND; a += 1) {
        await hot.appendLog(
          pipelineOf(run),
          runIdOf(run),
          chunksOf(corpusAppend(run, a, RARE_RUNS)),
        );
      }
      await hot.putRun(pipelineOf(run), runIdOf(run), { status: 'success' });
    }
    const appendMs = performance.now() - built;
    while ((await hot.indexForSearch({ maxEntries: 20_000, maxBytes: 4 << 20 })).more);
    const corpusLines = RUNS * LINES_PER_RUN;
    const logBytes = (await hot.storageBytes()).hotLogBytes;
    console.log(
      `corpus: ${fmt(corpusLines)} lines (${mb(logBytes)}) appended in ${ms(appendMs)}, indexed by ${ms(performance.now() - built - appendMs)}`,
    );

    // ---- baseline: today's store, every run hot ---------------------------------------------
    console.log('hot:');
    const hotSearched = await searchAll(hot);

    // ---- ingest while the seal loop seals the corpus, against ingest without it ------------
    const segments = new LocalSegmentStore(join(dir, 'segments'));
    const store = new SealedStore(hot, segments, {
      ...DEFAULT_SEALED_STORE_OPTIONS,
      settleMs: 0,
      graceMs: 0,
    });
    const loop = new SealLoop(store.sealer, { intervalSeconds: 1 });
    const without: { rate: number; busy: number }[] = [];
    const during: { rate: number; busy: number }[] = [];
    for (let round = 0; round < ROUNDS; round += 1) {
      for (const sealing of round % 2 === 0 ? [false, true] : [true, false]) {
        if (sealing) loop.start();
        const result = await ingest(store, `r${round}-${sealing ? 'on' : 'off'}`);
        if (sealing) await loop.stop();
        (sealing ? during : without).push(result);
        console.log(
          `round ${round + 1}, seal loop ${sealing ? 'on' : 'off'}: ${fmt(result.rate)} lines/s`,
        );
      }
    }
    const sealedDuring = store.sealer.totals.rawBytes;
    if (sealedDuring === 0) throw new Error('the seal loop sealed nothing while ingest ran');

    // ---- the rest of the corpus sealed, then searched ----------------------------------------
    // The live runs go, so the sealed corpus searched is the hot one of the baseline.
    for (let round = 0; round < ROUNDS; round += 1) {
      for (const on of ['on', 'off']) await store.deleteRun('bench.sealed.live', `r${round}-${on}`);
    }
    const sealStarted = performance.now();
    await store.sealer.catchUp();
    const sealMs = performance.now() - sealStarted;
    while ((await store.indexForSearch({ maxEntries: 20_000, maxBytes: 4 << 20 })).more);
    const bytes = await store.storageBytes();
    const totals = store.sealer.totals;
    console.log(
      `sealed: ${bytes.segments} segments, ${mb(bytes.sealedBytes)} (${(bytes.sealedBytes / logBytes).toFixed(3)} × the corpus's log); the rest sealed in ${ms(sealMs)}`,
    );
    await store.close();
    // Reopened, so the first search of each reads footers and filters from the files.
    const reopened = new SealedStore(
      new SqliteStore(path),
      new LocalSegmentStore(join(dir, 'segments')),
    );
    console.log('sealed:');
    const sealedSearched = await searchAll(reopened);
    await reopened.close();

    // ---- the section ------------------------------------------------------------------------
    const offRate = median(without.map((r) => r.rate));
    const onRate = median(during.map((r) => r.rate));
    const rare = sealedSearched[0]!;
    const common = sealedSearched[1]!;
    const rows: Row[] = [
      {
        name: `**Search over ${fmt(corpusLines)} lines in ${fmt(RUNS)} runs**`,
        value: '',
        ratio: '',
        note: '',
      },
    ];
    QUERIES.forEach((query, i) => {
      const before = hotSearched[i]!;
      const after = sealedSearched[i]!;
      rows.push(
        {
          name: `hot (baseline): search() ${query.name}, limit ${SEARCH_LIMIT}`,
          value: `p50 ${ms(before.timed.p50)}, p99 ${ms(before.timed.p99)}`,
          ratio: '1.0 ×',
          note: `${query.note}; ${before.hits} hits; ${before.timed.samples} searches; the first ${ms(before.first)}`,
        },
        {
          name: `sealed: search() ${query.name}, limit ${SEARCH_LIMIT}`,
          value: `p50 ${ms(after.timed.p50)}, p99 ${ms(after.timed.p99)}`,
          ratio: `${(after.timed.p50 / before.timed.p50).toFixed(1)} × (p50)`,
          note: `${after.hits} hits; ${after.timed.samples} searches; the first after reopening (footers and filters read from the files) ${ms(after.first)}`,
        },
      );
    });
    rows.push(
      {
        name: 'goals: sealed rare literal p50 ≤ 50 ms; common ≤ 2 × today (12.8 ms in "Search")',
        value: `${ms(rare.timed.p50)}; ${ms(common.timed.p50)}`,
        ratio: '',
        note: `${rare.timed.p50 <= RARE_GOAL_MS ? 'met' : 'not met'}; ${common.timed.p50 <= 2 * COMMON_TODAY_MS ? 'met' : 'not met'}`,
      },
      { name: '**Ingest while the seal loop runs**', value: '', ratio: '', note: '' },
      {
        name: 'baseline: SealedStore.appendLog to a live run, seal loop stopped',
        value: `${fmt(offRate)} lines/s`,
        ratio: '100 %',
        note: `median of ${ROUNDS} rounds (${range(without.map((r) => r.rate))}); ${LINES_PER_APPEND} lines per append, a turn of the event loop after each; machine ${pct(median(without.map((r) => r.busy)))} busy`,
      },
      {
        name: 'the same, with the seal loop (as `tailwater serve` runs it) sealing the corpus',
        value: `${fmt(onRate)} lines/s`,
        ratio: pct(onRate / offRate),
        note: `rounds ${range(during.map((r) => r.rate))}; within a round ${during.map((r, i) => pct(r.rate / without[i]!.rate)).join(', ')}; it sealed ${mb(sealedDuring)} meanwhile; machine ${pct(median(during.map((r) => r.busy)))} busy; goal ≥ ${pct(INGEST_GOAL)}: ${onRate / offRate >= INGEST_GOAL ? 'met' : 'not met'}`,
      },
      { name: '**Size**', value: '', ratio: '', note: '' },
      {
        name: 'baseline: the corpus’s log text',
        value: mb(logBytes),
        ratio: '1.00 ×',
        note: `${fmt(corpusLines)} lines`,
      },
      {
        name: 'its segments (blocks, search filters, footers)',
        value: mb(totals.bytes),
        ratio: `${(totals.bytes / totals.rawBytes).toFixed(3)} ×`,
        note: `${fmt(totals.segments)} segments of entries as stored (${mb(totals.rawBytes)}); sealing the part left after ingest took ${ms(sealMs)}`,
      },
    );
    const minutes = (performance.now() - benchStarted) / 60_000;
    writeSection(
      'search-sealed',
      'Search and ingest with sealed history',
      `bench/search-sealed.ts, on the SQLite store with local segments, in one process. The corpus is bench/search.ts's ("Search") at ${fmt(RUNS)} runs: ${fmt(LINES_PER_RUN)} lines of ~64 B each, ${PIPELINES} pipelines taking turns, the rare line in 10 runs; each run finished, the index caught up. Each query is timed as in "Search" (200 times or 12 s, after 3 warm-ups), first with every run hot (today's store: the baseline), then once every run is sealed (default segments: 16 MiB, 1 MiB blocks, zstd 9, trigram filters) and the store reopened; the "first" time is the one search before the warm-ups. Between the two, ${ROUNDS} rounds of ${SECONDS} s of appends to a live run with the server's seal loop (SealLoop: while it has a backlog, half the time of an idle server and a twentieth of a busy one) sealing the corpus, alternating with the same appends with it stopped; the live runs these rounds wrote are deleted before the rest is sealed, so both searches run over the same corpus. This part took ${minutes.toFixed(1)} min. Run it alone with \`npm run bench -- search-sealed\` (\`BENCH_SEALED_RUNS\` for a smaller corpus).`,
      rows,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
