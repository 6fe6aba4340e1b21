import { useCallback, useState } from 'react';
import type { Run } from '../../src/model/run.js';
import { formatBytes, formatDuration, runHref } from './format.js';
import { NotAllowed } from './auth.js';
import { ConnectionStateBadge } from './connection.js';
import { useNow } from './hooks.js';
import {
  defaultListRunning,
  REFRESH_MS,
  useRunningRefresh,
  withGrowth,
} from './running-refresh.js';
import type { ListRunning } from './running-refresh.js';
import { defaultTail, useTail } from './stream.js';
import type { TailEvent, TailFn } from './stream.js';

function duration(run: Run, now: number): string {
  if (!run.startedAt) return '—';
  const end = run.endedAt ? Date.parse(run.endedAt) : now;
  return formatDuration(end - Date.parse(run.startedAt));
}

/** Status changes of the runs feed read on open: the runs list shows the recent runs. */
export const FEED_HISTORY = 2000;

const runKey = (run: Run) => `${run.pipeline}\u0000${run.runId}`;

/**
 * Pipelines and their runs, from the runs feed (its last FEED_HISTORY status changes, then
 * live), with the log size and duration of running runs kept moving.
 */
export function RunsList({
  tail = defaultTail,
  listRunning = defaultListRunning,
  refreshMs = REFRESH_MS,
}: {
  tail?: TailFn;
  listRunning?: ListRunning;
  refreshMs?: number;
}) {
  const [runs, setRuns] = useState<ReadonlyMap<string, Run>>(new Map());
  const onEvent = useCallback((event: TailEvent) => {
    if (event.type === 'gap' && event.gap.reason === 'reset') setRuns(new Map());
    if (event.type !== 'entry' || event.entry.kind !== 'status') return;
    const run = event.entry.data as Run & { deleted?: boolean };
    if (!run || typeof run.pipeline !== 'string' || typeof run.runId !== 'string') return;
    setRuns((previous) => {
      const next = new Map(previous);
      // A deleted run is news on the feed too (docs/SEARCH.md, "History"): it leaves the list.
      if (run.deleted === true) next.delete(runKey(run));
      else next.set(runKey(run), run);
      return next;
    });
  }, []);
  const { state, resume } = useTail(tail, 'runs', { target: 'runs', tail: FEED_HISTORY }, onEvent);

  const onListed = useCallback((listed: Run[]) => {
    setRuns((previous) => {
      let next: Map<string, Run> | null = null;
      for (const fresh of listed) {
        const known = previous.get(runKey(fresh));
        if (!known) continue; // the feed has not shown it: it will, with its status
        const grown = withGrowth(known, fresh);
        if (grown !== known) (next ??= new Map(previous)).set(runKey(fresh), grown);
      }
      return next ?? previous;
    });
  }, []);
  const runningPipelines = [
    ...new Set([...runs.values()].filter((r) => r.status === 'running').map((r) => r.pipeline)),
  ].sort();
  useRunningRefresh(runningPipelines, listRunning, onListed, refreshMs);
  // Durations of running runs move; finished ones do not.
  const now = useNow(runningPipelines.length > 0);

  const byPipeline = new Map<string, Run[]>();
  for (const run of runs.values()) {
    const list = byPipeline.get(run.pipeline) ?? [];
    list.push(run);
    byPipeline.set(run.pipeline, list);
  }
  const pipelines = [...byPipeline.keys()].sort();

  return (
    <section className="runs-list">
      <h1>Pipelines and runs</h1>
      <ConnectionStateBadge state={state} onResume={resume} />
      {state.phase === 'forbidden' ? (
        <NotAllowed what="the runs feed" detail={state.error} />
      ) : null}
      {pipelines.length === 0 && state.phase !== 'forbidden' ? (
        <p className="empty">No runs yet.</p>
      ) : null}
      {pipelines.map((pipeline) => {
        const list = (byPipeline.get(pipeline) ?? []).sort((a, b) =>
          b.createdAt.localeCompare(a.createdAt),
        );
        return (
          <table key={pipeline} aria-label={`Runs of ${pipeline}`}>
            <caption>{pipeline}</caption>
            <thead>
              <tr>
                <th scope="col">Run</th>
                <th scope="col">Status</th>
                <th scope="col">Started</th>
                <th scope="col">Duration</th>
                <th scope="col">Log size</th>
              </tr>
            </thead>
            <tbody>
              {list.map((run) => (
                <tr key={run.runId}>
                  <th scope="row">
                    <a href={runHref(run.pipeline, run.runId)}>{run.runId}</a>
                  </th>
                  <td>
                    <span className={`run-status run-status-${run.status}`}>{run.status}</span>
                  </td>
                  <td>{run.startedAt ? new Date(run.startedAt).toLocaleString() : '—'}</td>
                  <td>{duration(run, now)}</td>
                  <td>{formatBytes(run.logBytes)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        );
      })}
    </section>
  );
}
