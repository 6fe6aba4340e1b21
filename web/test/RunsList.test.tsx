import { act, fireEvent, render, screen, waitFor, within } from '@testing-library/react';
import { describe, expect, test } from 'vitest';
import type { PipelinesPageOptions } from '../../src/client/index.js';
import type { PipelineSummary, Run } from '../../src/model/run.js';
import { nameMatches } from '../src/pipeline-name.js';
import { FEED_REPLAY, RunsList } from '../src/RunsList.js';
import { fakeTail } from './fake-tail.js';

function run(overrides: Partial<Run>): Run {
  return {
    id: `id-${overrides.runId ?? 'r1'}`,
    pipeline: 'ingest.daily',
    runId: 'r1',
    status: 'running',
    cancelRequested: false,
    createdAt: '2026-01-01T10:00:00.000Z',
    startedAt: '2026-01-01T10:00:00.000Z',
    endedAt: null,
    lastSeq: 0,
    logBytes: 0,
    meta: {},
    ...overrides,
  };
}

const summary = (lastRun: Run, runs = 1): PipelineSummary => ({
  fqn: lastRun.pipeline,
  id: `pid-${lastRun.pipeline}`,
  runs,
  lastRun,
});

/** The server's pipelines listing: by FQN, filtered by name and newest run's status, paged. */
function fakeListing(pipelines: PipelineSummary[]) {
  const calls: PipelinesPageOptions[] = [];
  const listPipelines = (options: PipelinesPageOptions) => {
    calls.push(options);
    const matching = [...pipelines]
      .sort((a, b) => (a.fqn < b.fqn ? -1 : 1))
      .filter((p) => options.name === undefined || nameMatches(options.name, p.fqn))
      .filter((p) => !options.status || p.lastRun?.status === options.status)
      .filter((p) => options.after === undefined || p.fqn > options.after);
    const page = matching.slice(0, options.limit ?? 100);
    const more = matching.length > page.length;
    return Promise.resolve({
      pipelines: page,
      ...(more ? { next: page[page.length - 1]!.fqn } : {}),
    });
  };
  return { calls, listPipelines };
}

const table = () => screen.getByRole('table', { name: 'Pipelines' });
const fqnsShown = () =>
  within(table())
    .getAllByRole('rowheader')
    .map((cell) => cell.textContent);
const rowOf = (fqn: string) =>
  within(table()).getByRole('link', { name: fqn }).closest('tr')!.querySelectorAll('td');

describe('RunsList', () => {
  test('lists the pipelines, each linking to its page, with its newest run', async () => {
    const fake = fakeTail();
    const listing = fakeListing([
      summary(run({ runId: 'r7', status: 'failed', endedAt: '2026-01-01T10:01:05.000Z' }), 7),
      summary(run({ pipeline: 'a/b', runId: 'x1', logBytes: 3 * 1024 })),
    ]);
    render(<RunsList tail={fake.tail} listPipelines={listing.listPipelines} />);
    await screen.findByRole('table', { name: 'Pipelines' });
    expect(fqnsShown()).toEqual(['a/b', 'ingest.daily']);
    const headers = within(table())
      .getAllByRole('columnheader')
      .map((th) => th.textContent);
    expect(headers).toEqual([
      'Pipeline',
      'Runs',
      'Last run',
      'Status',
      'Started',
      'Duration',
      'Log size',
    ]);
    const pipelineLink = within(table()).getByRole('link', { name: 'a/b' });
    expect(pipelineLink.getAttribute('href')).toBe('/ui/pipelines/a%2Fb');
    const runLink = within(table()).getByRole('link', { name: 'r7' });
    expect(runLink.getAttribute('href')).toBe('/ui/pipelines/ingest.daily/runs/r7');
    const cells = rowOf('ingest.daily');
    expect([cells[0], cells[2], cells[4]].map((cell) => cell?.textContent)).toEqual([
      '7',
      'failed',
      '1m 5s',
    ]);
    expect(rowOf('a/b')[5]?.textContent).toBe('3.0 KiB');
    expect(fake.calls[0]).toMatchObject({ target: 'runs', tail: FEED_REPLAY });
  });

  test('filters by name (text or glob) and by the status of the newest run, on the server', async () => {
    const fake = fakeTail();
    const listing = fakeListing([
      summary(run({ pipeline: 'etl.daily', status: 'failed' })),
      summary(run({ pipeline: 'etl.hourly', status: 'success' })),
      summary(run({ pipeline: 'ml.daily_train', status: 'success' })),
    ]);
    render(<RunsList tail={fake.tail} listPipelines={listing.listPipelines} />);
    await screen.findByRole('table', { name: 'Pipelines' });
    const name = screen.getByRole('searchbox', { name: 'Pipeline' });
    fireEvent.change(name, { target: { value: 'daily' } });
    await waitFor(() => expect(fqnsShown()).toEqual(['etl.daily', 'ml.daily_train']));
    expect(listing.calls.at(-1)).toMatchObject({ name: 'daily' });
    fireEvent.change(name, { target: { value: 'etl.*' } });
    await waitFor(() => expect(fqnsShown()).toEqual(['etl.daily', 'etl.hourly']));
    fireEvent.change(screen.getByRole('combobox', { name: 'Last run' }), {
      target: { value: 'success' },
    });
    await waitFor(() => expect(fqnsShown()).toEqual(['etl.hourly']));
    expect(listing.calls.at(-1)).toEqual({
      limit: 50,
      after: undefined,
      name: 'etl.*',
      status: 'success',
    });
    fireEvent.change(name, { target: { value: 'nothing' } });
    expect(await screen.findByText('No pipeline matches.')).toBeTruthy();
  });

  test('pages through thousands of pipelines 50 at a time', async () => {
    const fake = fakeTail();
    const names = Array.from({ length: 2000 }, (_, i) => `p${String(i).padStart(4, '0')}`);
    const listing = fakeListing(names.map((fqn) => summary(run({ pipeline: fqn }))));
    render(<RunsList tail={fake.tail} listPipelines={listing.listPipelines} />);
    await screen.findByRole('table', { name: 'Pipelines' });
    expect(fqnsShown()).toEqual(names.slice(0, 50));
    const next = screen.getByRole('button', { name: 'Next page' });
    fireEvent.click(next);
    await waitFor(() => expect(fqnsShown()).toEqual(names.slice(50, 100)));
    expect(listing.calls.at(-1)).toMatchObject({ after: 'p0049', limit: 50 });
    fireEvent.click(next);
    await waitFor(() => expect(fqnsShown()).toEqual(names.slice(100, 150)));
    fireEvent.click(screen.getByRole('button', { name: 'Previous page' }));
    await waitFor(() => expect(fqnsShown()).toEqual(names.slice(50, 100)));
    expect(screen.getByText('Page 2')).toBeTruthy();
  });

  test('shows when runs started as "… ago", the exact time on hover, moving as time passes', async () => {
    const fake = fakeTail();
    const started = new Date(Date.now() - 42_000).toISOString();
    const listing = fakeListing([
      summary(run({ startedAt: started, createdAt: started, endedAt: started, status: 'success' })),
    ]);
    render(<RunsList tail={fake.tail} listPipelines={listing.listPipelines} clockMs={100} />);
    await screen.findByRole('table', { name: 'Pipelines' });
    const time = rowOf('ingest.daily')[3]!.querySelector('time')!;
    expect(time.getAttribute('dateTime')).toBe(started);
    expect(time.getAttribute('title')).toBe(new Date(started).toLocaleString());
    // What it says is the age at some moment since it was rendered, however slow the machine.
    const shown = () => Number(/^(\d+) s ago$/.exec(time.textContent ?? '')?.[1]);
    const age = () => Math.floor((Date.now() - Date.parse(started)) / 1000);
    const first = shown();
    expect(first).toBeGreaterThanOrEqual(42);
    expect(first).toBeLessThanOrEqual(age());
    await waitFor(() => expect(shown()).toBeGreaterThan(first));
    expect(shown()).toBeLessThanOrEqual(age());
  });

  test('keeps each row live from the runs feed: a status change, a newer run, a new pipeline', async () => {
    const fake = fakeTail();
    const listing = fakeListing([summary(run({ runId: 'r1' }), 1)]);
    render(<RunsList tail={fake.tail} listPipelines={listing.listPipelines} />);
    await screen.findByRole('table', { name: 'Pipelines' });
    act(() => {
      // Replayed news older than the listing changes nothing.
      fake.entry({ kind: 'status', data: run({ runId: 'r0', createdAt: '2025-12-31T00:00:00Z' }) });
      fake.entry({
        kind: 'status',
        data: run({ runId: 'r1', status: 'success', endedAt: '2026-01-01T10:00:30.000Z' }),
      });
    });
    await waitFor(() => expect(rowOf('ingest.daily')[2]?.textContent).toBe('success'));
    expect(rowOf('ingest.daily')[0]?.textContent).toBe('1');
    act(() =>
      fake.entry({
        kind: 'status',
        data: run({ runId: 'r2', createdAt: '2026-01-02T10:00:00.000Z' }),
      }),
    );
    await waitFor(() => expect(rowOf('ingest.daily')[1]?.textContent).toBe('r2'));
    expect(rowOf('ingest.daily')[0]?.textContent).toBe('2');
    expect(rowOf('ingest.daily')[2]?.textContent).toBe('running');
    act(() => fake.entry({ kind: 'status', data: run({ pipeline: 'aa.new', runId: 'n1' }) }));
    await waitFor(() => expect(fqnsShown()).toEqual(['aa.new', 'ingest.daily']));
  });

  test('keeps the log size of running runs growing between status changes', async () => {
    const fake = fakeTail();
    const asked: string[] = [];
    let logBytes = 2048;
    const listRunning = (pipeline: string) => {
      asked.push(pipeline);
      return Promise.resolve([run({ runId: 'r1', logBytes, lastSeq: 9 })]);
    };
    const listing = fakeListing([
      summary(run({ runId: 'r1' })),
      summary(run({ pipeline: 'done.pipe', runId: 'd1', status: 'failed', logBytes: 500 })),
    ]);
    render(
      <RunsList
        tail={fake.tail}
        listPipelines={listing.listPipelines}
        listRunning={listRunning}
        refreshMs={20}
      />,
    );
    await screen.findByRole('table', { name: 'Pipelines' });
    await waitFor(() => expect(rowOf('ingest.daily')[5]?.textContent).toBe('2.0 KiB'));
    logBytes = 4096;
    await waitFor(() => expect(rowOf('ingest.daily')[5]?.textContent).toBe('4.0 KiB'));
    // Only pipelines whose newest run is running are listed.
    expect(new Set(asked)).toEqual(new Set(['ingest.daily']));
    expect(rowOf('done.pipe')[5]?.textContent).toBe('500 B');
  });

  test('matches names as the server does: text it holds, or a glob', () => {
    expect(nameMatches('daily', 'etl.daily.x')).toBe(true);
    expect(nameMatches('Daily', 'etl.daily')).toBe(false);
    expect(nameMatches('etl.*', 'etl.daily')).toBe(true);
    expect(nameMatches('etl.*', 'x.etl.daily')).toBe(false);
    expect(nameMatches('*.daily', 'etl.daily')).toBe(true);
    expect(nameMatches('a*b*c', 'abc')).toBe(true);
    expect(nameMatches('a*b*c', 'acb')).toBe(false);
    expect(nameMatches('ab*ba', 'aba')).toBe(false);
    expect(nameMatches('*', 'anything')).toBe(true);
  });
});
