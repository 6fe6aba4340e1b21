import type { Run, RunStatus } from '../../../src/model/run.js';
import { runDurationMs } from '../format.js';

/** How many of the newest runs the durations chart shows. */
export const CHART_RUNS = 50;

/** One bar series per status seen, so each status has its colour and its legend entry. */
export interface DurationSeries {
  status: RunStatus;
  /** Seconds, per run (oldest first); null where the run has another status or no duration. */
  values: (number | null)[];
}

export interface DurationData {
  /** The runs charted, oldest first (left to right). */
  runs: Run[];
  series: DurationSeries[];
}

/** The order statuses are listed in; the ones not seen are left out. */
const STATUS_ORDER: readonly RunStatus[] = [
  'success',
  'failed',
  'running',
  'partialSuccess',
  'cancelled',
  'stopped',
  'queued',
];

/**
 * The newest CHART_RUNS runs (given newest first, as the API lists them) as bar series of their
 * durations in seconds, a running run's up to `now`. A run that never started has no bar.
 */
export function durationData(newestFirst: readonly Run[], now: number): DurationData {
  const runs = newestFirst.slice(0, CHART_RUNS).reverse();
  const series = STATUS_ORDER.filter((status) => runs.some((run) => run.status === status)).map(
    (status) => ({
      status,
      values: runs.map((run) => {
        const ms = run.status === status ? runDurationMs(run, now) : null;
        return ms === null ? null : ms / 1000;
      }),
    }),
  );
  return { runs, series };
}
