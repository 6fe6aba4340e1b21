import type { Ingest } from '../engine/ingest.js';

export const DEMO_PIPELINE = 'demo.nightly_etl';

const STEPS = ['extract', 'transform', 'load'] as const;
const TABLES = ['orders', 'customers', 'payments', 'shipments', 'inventory', 'returns'];
const RUN_SECONDS = 60;
const PAUSE_SECONDS = 5;
const GREEN = '\u001b[32m';
const YELLOW = '\u001b[33m';
const RESET = '\u001b[0m';

export interface Demo {
  stop(): void;
}

/**
 * A sample pipeline so that a newcomer sees something move at once: runs of a minute that
 * write a few log lines and a progress event every second, then succeed, one after another.
 */
export function startDemo(ingest: Ingest, log: (message: string) => void = () => {}): Demo {
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
    let rows = 0;
    for (let second = 1; second <= RUN_SECONDS && !stopped; second += 1) {
      const step =
        STEPS[Math.min(STEPS.length - 1, Math.floor(((second - 1) * STEPS.length) / RUN_SECONDS))]!;
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
      await ingest.appendEvents({ type: 'run', pipeline: DEMO_PIPELINE, runId }, [
        { kind: 'progress', step, data: { pct: Math.round((second * 100) / RUN_SECONDS), rows } },
      ]);
      await sleep(1000);
    }
    if (stopped) return;
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
