import { useCallback, useEffect, useState } from 'react';
import type { Run } from '../../src/model/run.js';
import { formatBytes, formatDuration, runHref } from './format.js';
import { ConnectionStateBadge } from './connection.js';
import { defaultTail, useTail } from './stream.js';
import type { TailEvent, TailFn } from './stream.js';

function duration(run: Run, now: number): string {
  if (!run.startedAt) return '—';
  const end = run.endedAt ? Date.parse(run.endedAt) : now;
  return formatDuration(end - Date.parse(run.startedAt));
}

/** Pipelines and their runs, from the runs feed (history, then live). */
export function RunsList({ tail = defaultTail }: { tail?: TailFn }) {
  const [runs, setRuns] = useState<ReadonlyMap<string, Run>>(new Map());
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(timer);
  }, []);
  const onEvent = useCallback((event: TailEvent) => {
    if (event.type === 'gap' && event.gap.reason === 'reset') setRuns(new Map());
    if (event.type !== 'entry' || event.entry.kind !== 'status') return;
    const run = event.entry.data as Run;
    if (!run || typeof run.pipeline !== 'string' || typeof run.runId !== 'string') return;
    setRuns((previous) => new Map(previous).set(`${run.pipeline}\u0000${run.runId}`, run));
  }, []);
  const { state, resume } = useTail(tail, 'runs', { target: 'runs' }, onEvent);

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
      {pipelines.length === 0 ? <p className="empty">No runs yet.</p> : null}
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
