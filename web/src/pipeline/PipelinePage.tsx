import { useCallback, useMemo } from 'react';
import { TailwaterClient } from '../../../src/client/index.js';
import type { RunsPage, RunsPageOptions } from '../../../src/client/index.js';
import { RUN_STATUSES } from '../../../src/client/index.js';
import type { Run } from '../../../src/model/run.js';
import { NotAllowed } from '../auth.js';
import { ConnectionStateBadge } from '../connection.js';
import { formatBytes, formatDuration, runDurationMs, runHref } from '../format.js';
import { useAddressFilters, useNow } from '../hooks.js';
import { feedRun, newerRun } from '../live-runs.js';
import { usePagedListing } from '../paged-listing.js';
import { RelativeTime, useClock } from '../RelativeTime.js';
import { defaultTail, useTail } from '../stream.js';
import type { TailEvent, TailFn } from '../stream.js';
import { CHART_RUNS, durationData } from './chart-data.js';
import { DurationChart } from './DurationChart.js';
import {
  filtersOf,
  isStatus,
  matchesFilters,
  NO_FILTERS,
  searchOf,
  timeBounds,
} from './filters.js';
import type { RunFilters } from './filters.js';

/** A page of a pipeline's runs, as `GET /api/v1/pipelines/{fqn}/runs` gives it. */
export type ListRunsPage = (pipeline: string, options: RunsPageOptions) => Promise<RunsPage>;

export const defaultListRunsPage: ListRunsPage = (pipeline, options) =>
  new TailwaterClient({ server: window.location.origin }).runsPage(pipeline, options);

/** Runs per page of the table; the first page is also what the chart draws. */
export const RUNS_PAGE_SIZE = CHART_RUNS;

/** Status changes of the pipeline's runs replayed on opening, to catch any since the listing. */
const FEED_REPLAY = 100;

/**
 * A pipeline's runs, newest first, a page at a time, filtered by status and by day; a chart of
 * the durations of the newest 50 (of the filters); and, from the runs feed, runs as they
 * start and finish, with the running ones' elapsed time moving.
 */
export function PipelinePage({
  pipeline,
  tail = defaultTail,
  listRunsPage = defaultListRunsPage,
  search = '',
  onSearch,
}: {
  pipeline: string;
  tail?: TailFn;
  listRunsPage?: ListRunsPage;
  /** The address's query the page opens with: its filters, so a filtered page can be linked. */
  search?: string;
  /** Told the query for the filters as they change, to keep the address in step. */
  onSearch?: (search: string) => void;
}) {
  const [filters, setFilters] = useAddressFilters(search, onSearch, filtersOf, searchOf);
  const key = `${filters.status}\u0000${filters.from}\u0000${filters.to}`;
  const listing = usePagedListing<Run>(key, async (after) => {
    const page = await listRunsPage(pipeline, {
      limit: RUNS_PAGE_SIZE,
      after,
      ...(filters.status === '' ? {} : { status: filters.status }),
      ...timeBounds(filters),
    });
    return { items: page.runs, next: page.next };
  });
  const { update } = listing;
  const firstPage = listing.page === 1;

  const onEvent = useCallback(
    (event: TailEvent) => {
      if (event.type !== 'entry' || event.entry.kind !== 'status') return;
      const fresh = feedRun(event.entry.data);
      if (!fresh || fresh.pipeline !== pipeline) return;
      update((runs) => {
        const at = runs.findIndex((run) => run.runId === fresh.runId);
        if (fresh.deleted === true) return at < 0 ? runs : runs.filter((_r, i) => i !== at);
        if (at >= 0) {
          const known = runs[at]!;
          const next = newerRun(known, fresh);
          if (next === known) return runs;
          // A status filter the run no longer matches: it leaves this page.
          if (!matchesFilters(next, filters)) return runs.filter((_r, i) => i !== at);
          return runs.map((run, i) => (i === at ? next : run));
        }
        // A new run goes on top of the newest page, if the filters take it.
        const newest = runs[0];
        const isNewer = !newest || fresh.createdAt >= newest.createdAt;
        if (!firstPage || !isNewer || !matchesFilters(fresh, filters)) return runs;
        return [{ ...fresh, meta: {} }, ...runs].slice(0, RUNS_PAGE_SIZE);
      });
    },
    [pipeline, update, filters, firstPage],
  );
  const feed = useTail(
    tail,
    `pipeline-feed:${pipeline}`,
    {
      target: 'runs',
      tail: FEED_REPLAY,
      pipelines: [pipeline],
    },
    onEvent,
  );

  const runs = listing.items;
  const running = runs?.some((run) => run.status === 'running') ?? false;
  const now = useNow(running);
  const clock = useClock();
  // `now` moves only while a run is running, and so then only does the chart.
  const chart = useMemo(
    () => (runs && firstPage ? durationData(runs, now) : null),
    [runs, firstPage, now],
  );

  const setFilter = (change: Partial<RunFilters>) => setFilters((f) => ({ ...f, ...change }));

  return (
    <section className="pipeline-page">
      <h1>{pipeline}</h1>
      <ConnectionStateBadge state={feed.state} onResume={feed.resume} />
      <form className="run-filters" aria-label="Filter runs" onSubmit={(e) => e.preventDefault()}>
        <label>
          Status{' '}
          <select
            value={filters.status}
            onChange={(e) => setFilter({ status: isStatus(e.target.value) ? e.target.value : '' })}
          >
            <option value="">any</option>
            {RUN_STATUSES.map((status) => (
              <option key={status} value={status}>
                {status}
              </option>
            ))}
          </select>
        </label>
        <label>
          From{' '}
          <input
            type="date"
            value={filters.from}
            onChange={(e) => setFilter({ from: e.target.value })}
          />
        </label>
        <label>
          To{' '}
          <input
            type="date"
            value={filters.to}
            onChange={(e) => setFilter({ to: e.target.value })}
          />
        </label>
        {key !== '\u0000\u0000' ? (
          <button type="button" onClick={() => setFilters(() => NO_FILTERS)}>
            Clear filters
          </button>
        ) : null}
      </form>
      {listing.forbidden !== null ? (
        <NotAllowed what={`pipeline ${pipeline}`} detail={listing.forbidden} />
      ) : null}
      {listing.error !== null ? (
        <p className="search-error" role="alert">
          Could not list the runs: {listing.error}
        </p>
      ) : null}
      {runs === null && listing.error === null && listing.forbidden === null ? (
        <p role="status">Loading runs…</p>
      ) : null}
      {chart && chart.runs.length > 0 ? (
        <DurationChart
          data={chart}
          label={`Durations of the newest ${chart.runs.length} runs, oldest on the left, coloured by status`}
        />
      ) : null}
      {runs && runs.length === 0 ? <p className="empty">No runs match.</p> : null}
      {runs && runs.length > 0 ? (
        <div className="wide-table">
          <table aria-label={`Runs of ${pipeline}`}>
            <thead>
              <tr>
                <th scope="col">Run</th>
                <th scope="col">Status</th>
                <th scope="col">Created</th>
                <th scope="col">Duration</th>
                <th scope="col">Log size</th>
              </tr>
            </thead>
            <tbody>
              {runs.map((run) => {
                const ms = runDurationMs(run, now);
                return (
                  <tr key={run.runId}>
                    <th scope="row">
                      <a href={runHref(run.pipeline, run.runId)}>{run.runId}</a>
                    </th>
                    <td>
                      <span className={`run-status run-status-${run.status}`}>{run.status}</span>
                    </td>
                    <td>
                      <RelativeTime iso={run.createdAt} now={Math.max(clock, now)} />
                    </td>
                    <td data-testid={run.status === 'running' ? 'elapsed' : undefined}>
                      {ms === null ? '—' : formatDuration(ms)}
                    </td>
                    <td>{formatBytes(run.logBytes)}</td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      ) : null}
      <nav className="pager" aria-label="Pages of runs">
        <button type="button" onClick={listing.previous} disabled={listing.page === 1}>
          Newer runs
        </button>
        <span>Page {listing.page}</span>
        <button type="button" onClick={listing.next} disabled={!listing.hasNext}>
          Older runs
        </button>
      </nav>
    </section>
  );
}
