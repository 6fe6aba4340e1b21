/**
 * Durable ingest: log lines per second straight into the store and through the HTTP batch API,
 * against a bare better-sqlite3 insert loop measured in the same run.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { splitLogText } from '../src/model/log-chunks.js';
import { runKey } from '../src/model/stream-key.js';
import { SqliteStore } from '../src/store/sqlite.js';
import { fmt, perSecond, writeSection } from './report.js';
import type { Row } from './report.js';

const LINES_PER_APPEND = 1000;
const SECONDS = Number(process.env['BENCH_SECONDS'] ?? 2);
const LINE = (n: number) =>
  `2026-11-29T08:00:00.000Z INFO [load] table_${n % 97}: wrote batch ${n}\n`;

function text(start: number): string {
  let out = '';
  for (let i = 0; i < LINES_PER_APPEND; i += 1) out += LINE(start + i);
  return out;
}

/** Runs `step` repeatedly for about SECONDS; returns lines per second. */
async function measure(step: (i: number) => Promise<number> | number): Promise<number> {
  const started = performance.now();
  let lines = 0;
  let i = 0;
  while (performance.now() - started < SECONDS * 1000 && i < 1_000_000) {
    lines += await step(i);
    i += 1;
  }
  return perSecond(lines, performance.now() - started);
}

async function bareSqlite(dir: string): Promise<number> {
  const db = new Database(join(dir, 'bare.db'));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.exec(
    'CREATE TABLE lines (stream INTEGER, seq INTEGER, body TEXT, PRIMARY KEY (stream, seq)) WITHOUT ROWID',
  );
  const insert = db.prepare('INSERT INTO lines VALUES (1, ?, ?)');
  let seq = 0;
  const append = db.transaction((chunks: string[]) => {
    for (const chunk of chunks) insert.run(++seq, chunk);
  });
  const rate = await measure((i) => {
    append(splitLogText(text(i * LINES_PER_APPEND), 64 * 1024));
    return LINES_PER_APPEND;
  });
  db.close();
  return rate;
}

async function storeAppend(dir: string, synchronous: 'normal' | 'full'): Promise<number> {
  const store = new SqliteStore(join(dir, `store-${synchronous}.db`), { synchronous });
  const rate = await measure(async (i) => {
    const chunks = splitLogText(text(i * LINES_PER_APPEND), 64 * 1024).map((t) => ({ text: t }));
    await store.appendLog('bench.pipeline', 'r1', chunks);
    return LINES_PER_APPEND;
  });
  await store.close();
  return rate;
}

/** One entry per line: the cost per entry rather than per byte. */
async function storeEvents(dir: string): Promise<number> {
  const store = new SqliteStore(join(dir, 'events.db'));
  const key = runKey('bench.pipeline', 'events');
  const rate = await measure(async (i) => {
    const events = Array.from({ length: LINES_PER_APPEND }, (_, j) => ({
      kind: 'progress',
      data: { n: i * LINES_PER_APPEND + j, pct: j % 100 },
    }));
    await store.appendEvents(key, events);
    return LINES_PER_APPEND;
  });
  await store.close();
  return rate;
}

async function httpAppend(dir: string, writers: number): Promise<number> {
  const bin = fileURLToPath(new URL('../bin/tailwater', import.meta.url));
  const child = spawn(
    process.execPath,
    [bin, 'serve', '--port', '0', '--data', join(dir, `http-${writers}`), '--log-level', 'warn'],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const match = /listening on (\S+)/.exec(out);
      if (match) resolve(match[1]!);
    });
    child.once('exit', () => reject(new Error(`server exited: ${out}`)));
  });
  const started = performance.now();
  let lines = 0;
  await Promise.all(
    Array.from({ length: writers }, async (_, w) => {
      for (let i = 0; performance.now() - started < SECONDS * 1000 && i < 100_000; i += 1) {
        const res = await fetch(`${url}/api/v1/pipelines/bench.http/runs/w${w}/logs`, {
          method: 'POST',
          headers: { 'content-type': 'text/plain' },
          body: text(i * LINES_PER_APPEND),
        });
        if (res.status !== 200) throw new Error(`append failed: ${res.status} ${await res.text()}`);
        await res.arrayBuffer();
        lines += LINES_PER_APPEND;
      }
    }),
  );
  const rate = perSecond(lines, performance.now() - started);
  child.kill('SIGTERM');
  await new Promise((resolve) => child.once('exit', resolve));
  return rate;
}

export async function benchIngest(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'tailwater-bench-ingest-'));
  try {
    const bare = await bareSqlite(dir);
    const normal = await storeAppend(dir, 'normal');
    const full = await storeAppend(dir, 'full');
    const events = await storeEvents(dir);
    const http1 = await httpAppend(dir, 1);
    const http4 = await httpAppend(dir, 4);
    const ratio = (n: number) => `${((n / bare) * 100).toFixed(0)} %`;
    const rows: Row[] = [
      {
        name: 'baseline: bare better-sqlite3 inserts of the same 64 KiB chunks',
        value: `${fmt(bare)} lines/s`,
        ratio: '100 %',
      },
      {
        name: 'SqliteStore.appendLog, synchronous=NORMAL (default)',
        value: `${fmt(normal)} lines/s`,
        ratio: ratio(normal),
        note: `${LINES_PER_APPEND} lines (~70 B) per append`,
      },
      {
        name: 'SqliteStore.appendLog, synchronous=FULL',
        value: `${fmt(full)} lines/s`,
        ratio: ratio(full),
        note: 'an fsync per commit',
      },
      {
        name: 'SqliteStore.appendEvents, one entry per line',
        value: `${fmt(events)} entries/s`,
        ratio: ratio(events),
        note: 'batches of 1000 events',
      },
      {
        name: 'HTTP POST …/logs, 1 writer',
        value: `${fmt(http1)} lines/s`,
        ratio: ratio(http1),
        note: 'real `tailwater serve` process, text/plain bodies of 1000 lines',
      },
      {
        name: 'HTTP POST …/logs, 4 writers',
        value: `${fmt(http4)} lines/s`,
        ratio: ratio(http4),
        note: 'four concurrent runs',
      },
    ];
    for (const row of rows) console.log(`${row.name}: ${row.value} (${row.ratio})`);
    writeSection(
      'ingest',
      'Durable ingest',
      `Log lines per second, acknowledged only once committed (WAL). Each measurement runs for ${SECONDS} s. The baseline is the floor of what SQLite itself costs for the same chunks; the goal for the store is ≥ 300k lines/s in one process.`,
      rows,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
