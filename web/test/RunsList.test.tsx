import { act, render, screen, waitFor, within } from '@testing-library/react';
import { describe, expect, test } from 'vitest';
import type { Run } from '../../src/model/run.js';
import { FEED_HISTORY, RunsList } from '../src/RunsList.js';
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

describe('RunsList', () => {
  test('drops a run the feed says was deleted, and a pipeline left with no run', async () => {
    const fake = fakeTail();
    render(<RunsList tail={fake.tail} />);
    act(() => {
      fake.entry({ kind: 'status', data: run({ runId: 'r1' }) });
      fake.entry({ kind: 'status', data: run({ runId: 'r2' }) });
      fake.entry({ kind: 'status', data: run({ pipeline: 'ml.train', runId: 'only' }) });
    });
    const table = await screen.findByRole('table', { name: 'Runs of ingest.daily' });
    expect(within(table).getByRole('link', { name: 'r1' })).toBeTruthy();
    act(() => {
      fake.entry({ kind: 'status', data: { ...run({ runId: 'r1' }), deleted: true } });
      fake.entry({
        kind: 'status',
        data: { ...run({ pipeline: 'ml.train', runId: 'only' }), deleted: true },
      });
    });
    await waitFor(() => expect(within(table).queryByRole('link', { name: 'r1' })).toBeNull());
    expect(within(table).getByRole('link', { name: 'r2' })).toBeTruthy();
    expect(screen.queryByRole('table', { name: 'Runs of ml.train' })).toBeNull();
  });

  test('follows the runs feed and groups runs by pipeline', async () => {
    const fake = fakeTail();
    render(<RunsList tail={fake.tail} />);
    expect(fake.calls[0]?.target).toBe('runs');
    expect(fake.calls[0]?.tail).toBe(FEED_HISTORY);
    expect(screen.getByText('No runs yet.')).toBeTruthy();

    act(() => {
      fake.entry({ kind: 'status', data: run({ runId: 'r1' }) });
      fake.entry({
        kind: 'status',
        data: run({
          pipeline: 'export.hourly',
          runId: 'x1',
          createdAt: '2026-01-01T09:00:00.000Z',
        }),
      });
    });
    const table = await screen.findByRole('table', { name: 'Runs of ingest.daily' });
    expect(screen.getByRole('table', { name: 'Runs of export.hourly' })).toBeTruthy();
    const headers = within(table)
      .getAllByRole('columnheader')
      .map((th) => th.textContent);
    expect(headers).toEqual(['Run', 'Status', 'Started', 'Duration', 'Log size']);
    const link = within(table).getByRole('link', { name: 'r1' });
    expect(link.getAttribute('href')).toBe('/ui/pipelines/ingest.daily/runs/r1');
    expect(within(table).getByText('running')).toBeTruthy();
  });

  test('updates a run in place when its status changes, with duration and log size', async () => {
    const fake = fakeTail();
    render(<RunsList tail={fake.tail} />);
    act(() => fake.entry({ kind: 'status', data: run({ runId: 'r1' }) }));
    await screen.findByRole('link', { name: 'r1' });
    act(() =>
      fake.entry({
        kind: 'status',
        data: run({
          runId: 'r1',
          status: 'success',
          endedAt: '2026-01-01T10:01:05.000Z',
          logBytes: 3 * 1024,
        }),
      }),
    );
    await waitFor(() => expect(screen.getByText('success')).toBeTruthy());
    const rows = within(screen.getByRole('table')).getAllByRole('row').slice(1);
    expect(rows).toHaveLength(1);
    const cells = rows[0]!.querySelectorAll('td');
    expect(cells[2]?.textContent).toBe('1m 5s');
    expect(cells[3]?.textContent).toBe('3.0 KiB');
  });

  test('keeps the log size of running runs growing between status changes', async () => {
    const fake = fakeTail();
    const asked: string[] = [];
    let logBytes = 2048;
    const listRunning = (pipeline: string) => {
      asked.push(pipeline);
      // A listing may be older than the feed: it still says `running` for r2, which finished.
      return Promise.resolve([
        run({ runId: 'r1', logBytes, lastSeq: 9 }),
        run({ runId: 'r2', logBytes: 10 }),
        run({ runId: 'unseen', logBytes: 99 }),
      ]);
    };
    render(<RunsList tail={fake.tail} listRunning={listRunning} refreshMs={20} />);
    // Nothing is running yet: nothing is listed.
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(asked).toEqual([]);
    act(() => {
      fake.entry({ kind: 'status', data: run({ runId: 'r1' }) });
      fake.entry({ kind: 'status', data: run({ runId: 'r2', status: 'success', logBytes: 500 }) });
      fake.entry({
        kind: 'status',
        data: run({ pipeline: 'done.pipe', runId: 'd1', status: 'failed' }),
      });
    });
    const table = await screen.findByRole('table', { name: 'Runs of ingest.daily' });
    const cellsOf = (runId: string) =>
      within(table).getByRole('link', { name: runId }).closest('tr')!.querySelectorAll('td');
    await waitFor(() => expect(cellsOf('r1')[3]?.textContent).toBe('2.0 KiB'));
    logBytes = 4096;
    await waitFor(() => expect(cellsOf('r1')[3]?.textContent).toBe('4.0 KiB'));
    // Only pipelines with running runs are listed; the feed's status and sizes stand.
    expect(new Set(asked)).toEqual(new Set(['ingest.daily']));
    expect(cellsOf('r2')[0]?.textContent).toBe('success');
    expect(cellsOf('r2')[3]?.textContent).toBe('500 B');
    expect(within(table).queryByRole('link', { name: 'unseen' })).toBeNull();
  });
});
