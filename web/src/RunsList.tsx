import { useCallback } from 'react';
import { RUN_STATUSES, TailwaterClient } from '../../src/client/index.js';
import type { PipelinesPage, PipelinesPageOptions } from '../../src/client/index.js';
import type { PipelineSummary, Run, RunStatus } from '../../src/model/run.js';
import { NotAllowed } from './auth.js';
import { ConnectionStateBadge } from './connection.js';
import { formatBytes, formatDuration, pipelineHref, runDurationMs, runHref } from './format.js';
import { useAddressFilters, useNow } from './hooks.js';
import { feedRun, newerRun } from './live-runs.js';
import { usePagedListing } from './paged-listing.js';
import { nameMatches } from './pipeline-name.js';
import { RELATIVE_TICK_MS, RelativeTime, useClock } from './RelativeTime.js';
import {
  defaultListRunning,
  REFRESH_MS,
  useRunningRefresh,
  withGrowth,
} from './running-refresh.js';
import type { ListRunning } from './running-refresh.js';
import { defaultTail, useTail } from './stream.js';
import type { TailEvent, TailFn } from './stream.js';

/** A page of pipelines, as `GET /api/v1/pipelines` gives it. */
export type ListPipelines = (options: PipelinesPageOptions) => Promise<PipelinesPage>;

export const defaultListPipelines: ListPipelines = (options) =>
  new TailwaterClient({ server: window.location.origin }).pipelinesPage(options);

export const PIPELINES_PAGE_SIZE = 50;

/** Status changes of the runs feed replayed on opening, to catch any since the listing. */
export const FEED_REPLAY = 200;

interface Filters {
  name: string;
  status: RunStatus | '';
}

function isStatus(value: string): value is RunStatus {
  return (RUN_STATUSES as readonly string[]).includes(value);
}

function filtersOf(search: string): Filters {
  const query = new URLSearchParams(search);
  const status = query.get('status') ?? '';
  return { name: query.get('name') ?? '', status: isStatus(status) ? status : '' };
}

function searchOf(filters: Filters): string {
  const query = new URLSearchParams();
  if (filters.name !== '') query.set('name', filters.name);
  if (filters.status !== '') query.set('status', filters.status);
  const text = query.toString();
  return text === '' ? '' : `?${text}`;
}

/**
 * A pipeline's row brought up to date by a run the feed tells of: the same run as its last one
 * (or a newer run, which becomes the last one) changes it; an older run does not.
 */
function withRun(pipeline: PipelineSummary, fresh: Run): PipelineSummary {
  const last = pipeline.lastRun;
  if (last && last.runId === fresh.runId) {
    const next = newerRun(last, fresh);
    return next === last ? pipeline : { ...pipeline, lastRun: next };
  }
  if (last && fresh.createdAt < last.createdAt) return pipeline;
  return { ...pipeline, runs: pipeline.runs + 1, lastRun: { ...fresh, meta: {} } };
}

/**
 * Every pipeline, a page at a time by FQN from the server (`GET /api/v1/pipelines`), filtered by
 * name (text or a glob) and by the status of its newest run; each row its newest run, kept live
 * by the runs feed, with the log size and duration of running runs moving.
 */
export function RunsList({
  tail = defaultTail,
  listRunning = defaultListRunning,
  listPipelines = defaultListPipelines,
  refreshMs = REFRESH_MS,
  clockMs = RELATIVE_TICK_MS,
  search = '',
  onSearch,
}: {
  tail?: TailFn;
  listRunning?: ListRunning;
  listPipelines?: ListPipelines;
  refreshMs?: number;
  /** How often "3 min ago" is worked out again. */
  clockMs?: number;
  /** The address's query the list opens with (`?name=etl.*&status=failed`). */
  search?: string;
  /** Told the query for the filters as they change, to keep the address in step. */
  onSearch?: (search: string) => void;
}) {
  const [filters, setFilters] = useAddressFilters(search, onSearch, filtersOf, searchOf);
  const key = `${filters.name}\u0000${filters.status}`;
  const listing = usePagedListing<PipelineSummary>(key, async (after) => {
    const page = await listPipelines({
      limit: PIPELINES_PAGE_SIZE,
      after,
      ...(filters.name === '' ? {} : { name: filters.name }),
      ...(filters.status === '' ? {} : { status: filters.status }),
    });
    return { items: page.pipelines, next: page.next };
  });
  const { update, reload, hasNext, page } = listing;

  const onEvent = useCallback(
    (event: TailEvent) => {
      if (event.type === 'gap' && event.gap.reason === 'reset') reload();
      if (event.type !== 'entry' || event.entry.kind !== 'status') return;
      const fresh = feedRun(event.entry.data);
      if (!fresh) return;
      const keeps = (p: PipelineSummary) =>
        filters.status === '' || p.lastRun?.status === filters.status;
      update((pipelines) => {
        const at = pipelines.findIndex((p) => p.fqn === fresh.pipeline);
        if (at >= 0) {
          const known = pipelines[at]!;
          if (fresh.deleted === true) {
            // Its newest run is gone: which one is newest now is the server's to say.
            if (known.lastRun?.runId === fresh.runId) reload();
            return pipelines;
          }
          const next = withRun(known, fresh);
          if (next === known) return pipelines;
          return keeps(next)
            ? pipelines.map((p, i) => (i === at ? next : p))
            : pipelines.filter((_p, i) => i !== at);
        }
        if (fresh.deleted === true || !nameMatches(filters.name, fresh.pipeline)) return pipelines;
        // A pipeline new to this page: in it if it sorts within the page (by code point).
        const first = pipelines[0]?.fqn;
        const last = pipelines[pipelines.length - 1]?.fqn;
        const afterFirst = page === 1 || (first !== undefined && fresh.pipeline > first);
        const beforeLast = !hasNext || (last !== undefined && fresh.pipeline < last);
        const added: PipelineSummary = {
          fqn: fresh.pipeline,
          id: '',
          runs: 1,
          lastRun: { ...fresh, meta: {} },
        };
        if (!afterFirst || !beforeLast || !keeps(added)) return pipelines;
        return [...pipelines, added].sort((a, b) => (a.fqn < b.fqn ? -1 : a.fqn > b.fqn ? 1 : 0));
      });
    },
    [filters, update, reload, hasNext, page],
  );
  const feed = useTail(tail, 'runs', { target: 'runs', tail: FEED_REPLAY }, onEvent);

  const onListed = useCallback(
    (listed: Run[]) =>
      update((pipelines) => {
        let changed = false;
        const next = pipelines.map((p) => {
          const fresh = listed.find((run) => run.runId === p.lastRun?.runId);
          if (!p.lastRun || !fresh || fresh.pipeline !== p.fqn) return p;
          const grown = withGrowth(p.lastRun, fresh);
          if (grown === p.lastRun) return p;
          changed = true;
          return { ...p, lastRun: grown };
        });
        return changed ? next : pipelines;
      }),
    [update],
  );
  const pipelines = listing.items ?? [];
  const runningPipelines = pipelines
    .filter((p) => p.lastRun?.status === 'running')
    .map((p) => p.fqn);
  useRunningRefresh(runningPipelines, listRunning, onListed, refreshMs);
  // Durations of running runs move; finished ones do not.
  const now = useNow(runningPipelines.length > 0);
  const clock = useClock(clockMs);

  return (
    <section className="runs-list">
      <h1>Pipelines and runs</h1>
      <ConnectionStateBadge state={feed.state} onResume={feed.resume} />
      <form
        className="run-filters"
        aria-label="Filter pipelines"
        onSubmit={(event) => event.preventDefault()}
      >
        <label>
          Pipeline{' '}
          <input
            type="search"
            value={filters.name}
            placeholder="text or glob: etl.*"
            onChange={(event) => setFilters((f) => ({ ...f, name: event.target.value }))}
          />
        </label>
        <label>
          Last run{' '}
          <select
            value={filters.status}
            onChange={(event) => {
              const value = event.target.value;
              setFilters((f) => ({ ...f, status: isStatus(value) ? value : '' }));
            }}
          >
            <option value="">any status</option>
            {RUN_STATUSES.map((status) => (
              <option key={status} value={status}>
                {status}
              </option>
            ))}
          </select>
        </label>
      </form>
      {feed.state.phase === 'forbidden' ? (
        <NotAllowed what="the runs feed" detail={feed.state.error} />
      ) : null}
      {listing.forbidden !== null ? (
        <NotAllowed what="the pipelines" detail={listing.forbidden} />
      ) : null}
      {listing.error !== null ? (
        <p className="search-error" role="alert">
          Could not list the pipelines: {listing.error}
        </p>
      ) : null}
      {listing.items !== null && pipelines.length === 0 ? (
        <p className="empty">{key === '\u0000' ? 'No runs yet.' : 'No pipeline matches.'}</p>
      ) : null}
      {pipelines.length > 0 ? (
        <div className="wide-table">
          <table aria-label="Pipelines">
            <thead>
              <tr>
                <th scope="col">Pipeline</th>
                <th scope="col">Runs</th>
                <th scope="col">Last run</th>
                <th scope="col">Status</th>
                <th scope="col">Started</th>
                <th scope="col">Duration</th>
                <th scope="col">Log size</th>
              </tr>
            </thead>
            <tbody>
              {pipelines.map((p) => {
                const run = p.lastRun;
                const ms = run ? runDurationMs(run, now) : null;
                return (
                  <tr key={p.fqn}>
                    <th scope="row">
                      <a href={pipelineHref(p.fqn)}>{p.fqn}</a>
                    </th>
                    <td>{p.runs}</td>
                    <td>
                      {run ? <a href={runHref(run.pipeline, run.runId)}>{run.runId}</a> : '—'}
                    </td>
                    <td>
                      {run ? (
                        <span className={`run-status run-status-${run.status}`}>{run.status}</span>
                      ) : (
                        '—'
                      )}
                    </td>
                    <td>
                      <RelativeTime iso={run?.startedAt ?? null} now={Math.max(clock, now)} />
                    </td>
                    <td>{ms === null ? '—' : formatDuration(ms)}</td>
                    <td>{run ? formatBytes(run.logBytes) : '—'}</td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      ) : null}
      <nav className="pager" aria-label="Pages of pipelines">
        <button type="button" onClick={listing.previous} disabled={page === 1}>
          Previous page
        </button>
        <span>Page {page}</span>
        <button type="button" onClick={listing.next} disabled={!hasNext}>
          Next page
        </button>
      </nav>
    </section>
  );
}
