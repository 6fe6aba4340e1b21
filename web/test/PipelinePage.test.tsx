import { act, fireEvent, render, screen, waitFor, within } from '@testing-library/react';
import { describe, expect, test } from 'vitest';
import type { RunsPageOptions } from '../../src/client/index.js';
import type { Run, RunStatus } from '../../src/model/run.js';
import { PipelinePage } from '../src/pipeline/PipelinePage.js';
import { fakeTail } from './fake-tail.js';

const FQN = 'etl.nightly';
const HOUR = 3_600_000;

function run(n: number, overrides: Partial<Run> = {}): Run {
  const created = Date.UTC(2026, 10, 1) + n * HOUR;
  return {
    id: `id-${n}`,
    pipeline: FQN,
    runId: `r${n}`,
    status: 'success',
    cancelRequested: false,
    createdAt: new Date(created).toISOString(),
    startedAt: new Date(created).toISOString(),
    endedAt: new Date(created + n * 1000).toISOString(),
    lastSeq: 1,
    logBytes: 100,
    meta: {},
    ...overrides,
  };
}

/** A server's listing of `runs` (any order given): newest first, filtered, paged by cursor. */
function fakeListing(runs: Run[]) {
  const calls: RunsPageOptions[] = [];
  const listRunsPage = (pipeline: string, options: RunsPageOptions) => {
    calls.push(options);
    expect(pipeline).toBe(FQN);
    const matching = [...runs]
      .sort((a, b) => b.createdAt.localeCompare(a.createdAt))
      .filter((r) => !options.status || r.status === options.status)
      .filter((r) => !options.since || Date.parse(r.createdAt) >= Date.parse(options.since))
      .filter((r) => !options.until || Date.parse(r.createdAt) < Date.parse(options.until));
    const start = options.after === undefined ? 0 : Number(options.after.slice(1));
    const limit = options.limit ?? 50;
    const page = matching.slice(start, start + limit);
    const more = start + limit < matching.length;
    return Promise.resolve({ runs: page, ...(more ? { next: `c${start + limit}` } : {}) });
  };
  return { calls, listRunsPage };
}

const runIdsShown = () =>
  within(screen.getByRole('table', { name: `Runs of ${FQN}` }))
    .getAllByRole('rowheader')
    .map((cell) => cell.textContent);
const range = (from: number, to: number) =>
  Array.from({ length: Math.abs(to - from) + 1 }, (_, i) => (from > to ? from - i : from + i));

describe('PipelinePage', () => {
  test('lists the runs newest first, 50 a page, and moves between pages by cursor', async () => {
    const fake = fakeTail();
    const listing = fakeListing(range(1, 120).map((n) => run(n)));
    render(<PipelinePage pipeline={FQN} tail={fake.tail} listRunsPage={listing.listRunsPage} />);
    await screen.findByRole('table', { name: `Runs of ${FQN}` });
    expect(runIdsShown()).toEqual(range(120, 71).map((n) => `r${n}`));
    const link = screen.getByRole('link', { name: 'r120' });
    expect(link.getAttribute('href')).toBe('/ui/pipelines/etl.nightly/runs/r120');
    const older = screen.getByRole('button', { name: 'Older runs' });
    const newer = screen.getByRole('button', { name: 'Newer runs' });
    expect((newer as HTMLButtonElement).disabled).toBe(true);

    fireEvent.click(older);
    await waitFor(() => expect(runIdsShown()[0]).toBe('r70'));
    expect(runIdsShown()).toEqual(range(70, 21).map((n) => `r${n}`));
    expect(listing.calls.at(-1)).toMatchObject({ after: 'c50', limit: 50 });
    fireEvent.click(older);
    await waitFor(() => expect(runIdsShown()).toEqual(range(20, 1).map((n) => `r${n}`)));
    expect((older as HTMLButtonElement).disabled).toBe(true);
    expect(screen.getByText('Page 3')).toBeTruthy();

    fireEvent.click(newer);
    await waitFor(() => expect(runIdsShown()[0]).toBe('r70'));
    expect(listing.calls.at(-1)).toMatchObject({ after: 'c50' });
  });

  test('filters by status and by day, asking the API for them, and starts again at page 1', async () => {
    const fake = fakeTail();
    const runs = range(1, 100).map((n) => run(n, { status: n % 10 === 0 ? 'failed' : 'success' }));
    const listing = fakeListing(runs);
    render(<PipelinePage pipeline={FQN} tail={fake.tail} listRunsPage={listing.listRunsPage} />);
    await screen.findByRole('link', { name: 'r100' });
    fireEvent.click(screen.getByRole('button', { name: 'Older runs' }));
    await screen.findByText('Page 2');

    fireEvent.change(screen.getByRole('combobox', { name: 'Status' }), {
      target: { value: 'failed' },
    });
    await waitFor(() => expect(runIdsShown()).toEqual(range(10, 1).map((n) => `r${n * 10}`)));
    expect(screen.getByText('Page 1')).toBeTruthy();
    expect(listing.calls.at(-1)).toEqual({ limit: 50, after: undefined, status: 'failed' });

    // Runs r1… are an hour apart from 2026-11-01T01:00Z; the days are the viewer's own.
    const day = (n: number) => {
      const d = new Date(Date.parse(run(n).createdAt));
      return `${d.getFullYear()}-${String(d.getMonth() + 1).padStart(2, '0')}-${String(d.getDate()).padStart(2, '0')}`;
    };
    fireEvent.change(screen.getByLabelText('From'), { target: { value: day(30) } });
    fireEvent.change(screen.getByLabelText('To'), { target: { value: day(60) } });
    const last = () => listing.calls.at(-1)!;
    await waitFor(() => expect(last().until).toBeDefined());
    const [y, m, d] = day(30).split('-').map(Number) as [number, number, number];
    expect(last().since).toBe(new Date(y, m - 1, d).toISOString());
    const [y2, m2, d2] = day(60).split('-').map(Number) as [number, number, number];
    expect(last().until).toBe(new Date(y2, m2 - 1, d2 + 1).toISOString());
    const shown = runIdsShown().map((id) => Number(id!.slice(1)));
    expect(shown.length).toBeGreaterThan(0);
    for (const n of shown) {
      expect(n % 10).toBe(0);
      expect(Date.parse(run(n).createdAt)).toBeGreaterThanOrEqual(Date.parse(last().since!));
      expect(Date.parse(run(n).createdAt)).toBeLessThan(Date.parse(last().until!));
    }

    fireEvent.click(screen.getByRole('button', { name: 'Clear filters' }));
    await waitFor(() => expect(runIdsShown()[0]).toBe('r100'));
  });

  test('charts the durations of the newest 50 runs, a bar each, coloured by status', async () => {
    const fake = fakeTail();
    const statusOf = (n: number): RunStatus =>
      n % 7 === 0 ? 'failed' : n % 11 === 0 ? 'cancelled' : 'success';
    const listing = fakeListing(range(1, 60).map((n) => run(n, { status: statusOf(n) })));
    render(<PipelinePage pipeline={FQN} tail={fake.tail} listRunsPage={listing.listRunsPage} />);
    const chart = await screen.findByTestId('duration-chart');
    expect(chart.getAttribute('role')).toBe('img');
    await waitFor(() => expect(chart.dataset['bars']).toBe('50'));
    // Left to right, oldest first: r11 … r60, each bar in its run's status.
    expect(chart.dataset['barStatuses']!.split(' ')).toEqual(range(11, 60).map(statusOf));
    expect(chart.querySelector('canvas')).not.toBeNull();
    const legend = screen.getByRole('list', { name: 'Colours' });
    expect(
      within(legend)
        .getAllByRole('listitem')
        .map((li) => li.textContent),
    ).toEqual(['success', 'failed', 'cancelled']);
  });

  test('keeps the running run live: its elapsed time moves, then its status changes from the feed', async () => {
    const fake = fakeTail();
    const started = new Date(Date.now() - 5000).toISOString();
    const running = run(9, {
      status: 'running',
      createdAt: started,
      startedAt: started,
      endedAt: null,
    });
    const listing = fakeListing([...range(1, 8).map((n) => run(n)), running]);
    render(<PipelinePage pipeline={FQN} tail={fake.tail} listRunsPage={listing.listRunsPage} />);
    expect(fake.calls[0]).toMatchObject({ target: 'runs', pipelines: [FQN] });
    const elapsed = await screen.findByTestId('elapsed');
    const first = elapsed.textContent;
    expect(first).toMatch(/^\d+s$/);
    await waitFor(() => expect(elapsed.textContent).not.toBe(first));

    const ended = new Date(Date.parse(started) + 65_000).toISOString();
    act(() => {
      fake.entry({ kind: 'status', data: { ...running, status: 'success', endedAt: ended } });
      // Another pipeline's run is not this page's.
      fake.entry({ kind: 'status', data: { ...run(10), pipeline: 'other' } });
    });
    const row = () => screen.getByRole('link', { name: 'r9' }).closest('tr')!;
    await waitFor(() => expect(within(row()).getByText('success')).toBeTruthy());
    expect(row().querySelectorAll('td')[2]!.textContent).toBe('1m 5s');
    expect(screen.queryByTestId('elapsed')).toBeNull();
    expect(screen.queryByRole('link', { name: 'r10' })).toBeNull();

    // A new run of this pipeline goes on top, running.
    const next = new Date().toISOString();
    act(() =>
      fake.entry({
        kind: 'status',
        data: run(11, { status: 'running', createdAt: next, startedAt: next, endedAt: null }),
      }),
    );
    await waitFor(() => expect(runIdsShown()[0]).toBe('r11'));
    expect(await screen.findByTestId('elapsed')).toBeTruthy();
  });
});
