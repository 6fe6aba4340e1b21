/**
 * Storage (docs/STORAGE.md, "Sealed segments"): what history costs on disk per byte of log,
 * search structures included, hot and then sealed, beside `zstd -3` and `gzip -6` of the same
 * text in the same run. The logs are real programs' output, made at bench time on this machine
 * with no network: `npm ci --offline --loglevel silly` of this project, `tsc --traceResolution`
 * of it, the project's own unit tests, and a PostgreSQL server logging every statement under
 * pgbench load.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { splitLogText } from '../src/model/log-chunks.js';
import { SealedStore, DEFAULT_SEALED_STORE_OPTIONS } from '../src/store/sealed-store.js';
import { LocalSegmentStore } from '../src/store/segment-store.js';
import { SqliteStore } from '../src/store/sqlite.js';
import { PrivatePostgres } from '../test/helpers/private-postgres.js';
import { fmt, writeSection } from './report.js';
import type { Row } from './report.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
/** Bytes of each log kept at most (a long PostgreSQL log is cut here). */
const MAX_LOG_BYTES = 48 * 1024 * 1024;
/** Lines per append, as a runner batches a busy program's output. */
const APPEND_BYTES = 64 * 1024;

interface Corpus {
  name: string;
  text: string;
}

function run(command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = {}): string {
  const result = spawnSync(command, args, {
    cwd,
    env: { ...process.env, ...env },
    encoding: 'utf8',
    maxBuffer: 512 * 1024 * 1024,
    timeout: 300_000,
  });
  return `${result.stdout ?? ''}${result.stderr ?? ''}`;
}

/** `npm ci --offline --loglevel silly` of this project in a copy (the npm cache only: no network). */
function npmCiLog(): Corpus {
  const dir = mkdtempSync(join(tmpdir(), 'tailwater-bench-npm-'));
  try {
    cpSync(join(ROOT, 'package.json'), join(dir, 'package.json'));
    cpSync(join(ROOT, 'package-lock.json'), join(dir, 'package-lock.json'));
    const text = run(
      'npm',
      ['ci', '--offline', '--loglevel', 'silly', '--ignore-scripts', '--no-audit', '--no-fund'],
      dir,
    );
    return { name: 'npm ci --loglevel silly', text };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The TypeScript compiler tracing how it resolves every module of this project. */
function tscTrace(): Corpus {
  const text = run(
    'npx',
    ['tsc', '-p', 'tsconfig.build.json', '--noEmit', '--traceResolution'],
    ROOT,
  );
  return { name: 'tsc --traceResolution', text };
}

/** The project's own unit tests, verbose, as CI prints them. */
function testLog(): Corpus {
  const files = [
    'store-rules',
    'model',
    'search-query',
    'search-documents',
    'sse-format',
    'log-redaction',
  ].map((name) => `test/unit/${name}.test.ts`);
  const text = run(
    'npx',
    ['vitest', 'run', '--project', 'unit', '--reporter=verbose', ...files],
    ROOT,
    {
      FORCE_COLOR: '0',
    },
  );
  return { name: 'project unit tests', text };
}

/** A PostgreSQL server's log with every statement logged, under 8 s of pgbench. */
async function postgresLog(): Promise<Corpus> {
  const server = await PrivatePostgres.start([
    ...['-c', 'log_min_duration_statement=0', '-c', 'log_connections=on'],
    ...['-c', 'log_disconnections=on', '-c', 'log_line_prefix=%m [%p] %q%u@%d '],
  ]);
  try {
    const bin = server.binDir;
    const url = server.url;
    const pgbench = (args: string[]) =>
      new Promise<void>((resolve) => {
        const child = spawn(join(bin, 'pgbench'), [...args, `${url}/postgres`], {
          stdio: 'ignore',
        });
        child.on('exit', () => resolve());
      });
    await pgbench(['-i', '-s', '2', '-q']);
    await pgbench(['-c', '4', '-j', '2', '-T', '8', '-P', '2']);
    const text = server.fullLog();
    return { name: 'PostgreSQL log under pgbench', text };
  } finally {
    await server.dispose();
  }
}

function sizeOf(path: string): number {
  if (!existsSync(path)) return 0;
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.size;
  return readdirSync(path).reduce((sum, name) => sum + sizeOf(join(path, name)), 0);
}

function compressed(command: string, args: string[], text: string): number {
  return execFileSync(command, args, { input: text, maxBuffer: 512 * 1024 * 1024 }).length;
}

interface RunFigures {
  raw: number;
  zstd3: number;
  gzip6: number;
  /** Its segment files' bytes, filters included, and the filters' share. */
  segments: number;
  filters: number;
}

interface Measured {
  runs: RunFigures[];
  /** The whole data directory (database, WAL, segments) before and after sealing. */
  hot: number;
  sealed: number;
  database: number;
}

const PIPELINE = 'bench.storage';

/**
 * Writes each log as a finished run of one data directory, as a server holds them, indexes
 * them, measures; seals, measures again. A run's own cost is its segments; the database's few
 * hundred kilobytes that stay (catalog, run rows, empty tables) are shared by every run.
 */
async function measure(corpora: Corpus[]): Promise<Measured> {
  const dir = mkdtempSync(join(tmpdir(), 'tailwater-bench-storage-'));
  const database = join(dir, 'tailwater.db');
  const files = [database, `${database}-wal`, `${database}-shm`];
  const runId = (i: number) => `run-${i}`;
  try {
    const open = () =>
      new SealedStore(new SqliteStore(database), new LocalSegmentStore(join(dir, 'segments')), {
        ...DEFAULT_SEALED_STORE_OPTIONS,
        settleMs: 0,
        graceMs: 0,
      });
    let store = open();
    for (const [i, corpus] of corpora.entries()) {
      const chunks = splitLogText(corpus.text, APPEND_BYTES);
      for (let c = 0; c < chunks.length; c += 4) {
        const batch = chunks.slice(c, c + 4).map((text) => ({ text }));
        await store.appendLog(PIPELINE, runId(i), batch);
      }
      await store.putRun(PIPELINE, runId(i), { status: 'success' });
    }
    while ((await store.indexForSearch({ maxEntries: 5000, maxBytes: 4 << 20 })).more);
    await store.close();
    const hot = files.reduce((sum, file) => sum + sizeOf(file), 0);
    store = open();
    await store.sealer.catchUp(() => Date.now() + 1000);
    const runs: RunFigures[] = [];
    for (const [i, corpus] of corpora.entries()) {
      const key = { type: 'run' as const, pipeline: PIPELINE, runId: runId(i) };
      let segments = 0;
      let filters = 0;
      for (const record of await store.hot.segmentsOf(key)) {
        segments += record.bytes;
        const footer = await store.reader.footer(key, record.name);
        for (const block of footer.blocks) filters += block.filterBits / 8;
      }
      runs.push({
        raw: Buffer.byteLength(corpus.text),
        zstd3: compressed('zstd', ['-3', '-c', '-q'], corpus.text),
        gzip6: compressed('gzip', ['-6', '-c'], corpus.text),
        segments,
        filters,
      });
    }
    await store.close();
    const db = files.reduce((sum, file) => sum + sizeOf(file), 0);
    return { runs, hot, sealed: db + sizeOf(join(dir, 'segments')), database: db };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const x = (n: number) => `${n.toFixed(3)} ×`;
const sum = (runs: RunFigures[], key: keyof RunFigures) => runs.reduce((t, r) => t + r[key], 0);

export async function benchStorage(): Promise<void> {
  const corpora = [npmCiLog(), tscTrace(), testLog(), await postgresLog()].map((c) => ({
    ...c,
    text: Buffer.from(c.text).subarray(0, MAX_LOG_BYTES).toString('utf8'),
  }));
  const m = await measure(corpora);
  const rows: Row[] = m.runs.map((r, i) => {
    const corpus = corpora[i]!;
    const lines = corpus.text.split('\n').length;
    console.log(
      `${corpus.name}: ${fmt(r.raw / 1024 / 1024)} MiB, segments ${x(r.segments / r.raw)}`,
    );
    return {
      name: `${corpus.name} (${fmt(r.raw / 1024 / 1024)} MiB, ${fmt(lines)} lines): its segments`,
      value: x(r.segments / r.raw),
      ratio: `${(r.segments / r.zstd3).toFixed(2)} × zstd -3`,
      note: `filters ${((100 * r.filters) / r.segments).toFixed(1)} % of them; zstd -3 ${x(r.zstd3 / r.raw)}, gzip -6 ${x(r.gzip6 / r.raw)}`,
    };
  });
  const raw = sum(m.runs, 'raw');
  const zstd3 = sum(m.runs, 'zstd3');
  console.log(
    `all: ${fmt(raw / 1024 / 1024)} MiB, sealed ${x(m.sealed / raw)}, hot ${x(m.hot / raw)}`,
  );
  rows.push(
    {
      name: `all (${fmt(raw / 1024 / 1024)} MiB): data directory after sealing, per raw byte`,
      value: x(m.sealed / raw),
      ratio: `${(m.sealed / zstd3).toFixed(2)} × zstd -3`,
      note: `goal ≤ 0.10 ×, stretch 0.07 ×; zstd -3 ${x(zstd3 / raw)}, gzip -6 ${x(sum(m.runs, 'gzip6') / raw)}; database left ${fmt(m.database / 1024)} KiB`,
    },
    {
      name: 'all: data directory before sealing (hot), per raw byte',
      value: x(m.hot / raw),
      ratio: `${(m.hot / m.sealed).toFixed(1)} × sealed`,
      note: 'entries, full-text index and its documents, in SQLite',
    },
    {
      name: 'all: of the sealed bytes, search filters',
      value: `${((100 * sum(m.runs, 'filters')) / m.sealed).toFixed(1)} %`,
      note: `segments ${x(sum(m.runs, 'segments') / raw)} (filters included)`,
    },
  );
  writeSection(
    'storage',
    'Storage: disk per byte of log, hot and sealed',
    "bench/storage.ts. Real logs made at bench time (no network): `npm ci --offline --loglevel silly` of this project, `tsc --traceResolution` of it, its unit tests, a PostgreSQL server logging every statement under 8 s of pgbench. Each is written as a finished run of one data directory in appends of 4 × 64 KiB, indexed for search, and the directory measured (database, WAL); then sealed (1 MiB blocks, zstd 9, trigram filters) and measured again: database plus segment files, every search structure included. Each run's own figure is its segments; the database that stays is shared. Beside them, `zstd -3` and `gzip -6` of the same text.",
    rows,
  );
}
