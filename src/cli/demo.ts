import type { Ingest } from '../engine/ingest.js';
import type { NewEvent } from '../model/entry.js';
import { runKey, topicKey } from '../model/stream-key.js';

export const DEMO_PIPELINE = 'demo.nightly_etl';

const STEPS = ['extract', 'transform', 'load'] as const;
const TABLES = ['orders', 'customers', 'payments', 'shipments', 'inventory', 'returns'];
/** Every this many seconds the load step commits a table, and says so on the Iceberg topic. */
const COMMIT_EVERY_SECONDS = 5;
const PAUSE_SECONDS = 5;
const GREEN = '\u001b[32m';
const YELLOW = '\u001b[33m';
const RESET = '\u001b[0m';

export interface Demo {
  stop(): void;
}

/** Where the demo's table commits go: the Iceberg view's topic and kind. */
export interface DemoIceberg {
  topic: string;
  kind: string;
}

export interface DemoOptions {
  iceberg?: DemoIceberg;
  /** How long each run lasts (default 60 s). */
  runSeconds?: number;
}

/** A table commit in the seed's Iceberg event shape; the snapshot id is past 2^53, as real ones are. */
function icebergCommit(kind: string, table: string, rows: number, n: number): NewEvent {
  const snapshotId = `${7_340_000_000_000_000_000n + BigInt(n)}`;
  const eventId = `demo-${Date.now()}-${n}`;
  const dataJson =
    `{"eventId":"${eventId}","eventTimestamp":"${new Date().toISOString()}",` +
    `"tableIdentifier":"demo_db.${table}","eventType":"TABLE_MUTATION","payload":` +
    `{"operation":"append","snapshotId":${snapshotId},"summary":{"added-records":"${rows}"}}}`;
  return { kind, id: eventId, data: JSON.parse(dataJson), dataJson };
}

/**
 * A sample pipeline so that a newcomer sees something move at once: runs (of a minute, by
 * default) that write a few log lines and a progress event every second, say when each step
 * starts and finishes, commit a table to the Iceberg topic every few seconds, then succeed,
 * one after another.
 */
export function startDemo(
  ingest: Ingest,
  log: (message: string) => void = () => {},
  options: DemoOptions = {},
): Demo {
  const iceberg = options.iceberg ?? { topic: 'iceberg', kind: 'iceberg-mutation' };
  const runSeconds = options.runSeconds ?? 60;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let runNumber = 0;

  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, ms);
    });

  const runOnce = async (): Promise<void> => {
    runNumber += 1;
    const runId = `demo-${new Date().toISOString().replace(/[:.]/g, '-')}`;
    await ingest.putRun(DEMO_PIPELINE, runId, { status: 'running', meta: { demo: true } });
    log(`demo: run ${runId} started`);
    const run = runKey(DEMO_PIPELINE, runId);
    let rows = 0;
    let commits = 0;
    let committed = 0;
    let previousStep: string | undefined;
    for (let second = 1; second <= runSeconds && !stopped; second += 1) {
      const step =
        STEPS[Math.min(STEPS.length - 1, Math.floor(((second - 1) * STEPS.length) / runSeconds))]!;
      if (step !== previousStep) {
        const changes: NewEvent[] = [{ kind: 'step', step, data: { state: 'started' } }];
        if (previousStep) {
          changes.unshift({ kind: 'step', step: previousStep, data: { state: 'finished' } });
        }
        await ingest.appendEvents(run, changes);
        previousStep = step;
      }
      const lines: string[] = [];
      for (let i = 0; i < 3; i += 1) {
        const table = TABLES[(second * 3 + i) % TABLES.length]!;
        const batch = 500 + ((second * 7919 + i * 104729) % 4500);
        rows += batch;
        const colour = i === 2 && second % 10 === 0 ? YELLOW : GREEN;
        lines.push(
          `${new Date().toISOString()} ${colour}INFO${RESET} [${step}] ${table}: ${batch} rows (${rows} total)\n`,
        );
      }
      await ingest.appendLog(DEMO_PIPELINE, runId, { text: lines.join(''), step });
      await ingest.appendEvents(run, [
        { kind: 'progress', step, data: { pct: Math.round((second * 100) / runSeconds), rows } },
      ]);
      if (second % COMMIT_EVERY_SECONDS === 0) {
        commits += 1;
        const table = TABLES[commits % TABLES.length]!;
        const added = rows - committed;
        committed = rows;
        const commit = icebergCommit(iceberg.kind, table, added, runNumber * 100 + commits);
        await ingest.appendEvents(topicKey(iceberg.topic), [commit]);
        await ingest.appendEvents(run, [{ kind: 'metric', step, data: { table, added } }]);
      }
      await sleep(1000);
    }
    if (stopped) return;
    await ingest.appendEvents(run, [
      { kind: 'step', step: previousStep ?? 'load', data: { state: 'finished' } },
    ]);
    await ingest.appendLog(DEMO_PIPELINE, runId, {
      text: `${new Date().toISOString()} INFO run ${runNumber} finished: ${rows} rows\n`,
    });
    await ingest.putRun(DEMO_PIPELINE, runId, { status: 'success' });
  };

  const loop = async (): Promise<void> => {
    while (!stopped) {
      try {
        await runOnce();
      } catch (error) {
        if (!stopped) log(`demo: ${(error as Error).message}`);
      }
      if (!stopped) await sleep(PAUSE_SECONDS * 1000);
    }
  };
  void loop();

  return {
    stop: () => {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
