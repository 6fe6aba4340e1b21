import { act, render, screen, waitFor, within } from '@testing-library/react';
import { describe, expect, test } from 'vitest';
import type { Run } from '../../src/model/run.js';
import { RunsList } from '../src/RunsList.js';
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
  test('follows the runs feed and groups runs by pipeline', async () => {
    const fake = fakeTail();
    render(<RunsList tail={fake.tail} />);
    expect(fake.calls[0]?.target).toBe('runs');
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
});
