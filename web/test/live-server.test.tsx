import { cleanup, fireEvent, render, screen, waitFor, within } from '@testing-library/react';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { TailwaterClient } from '../../src/client/http-client.js';
import { tail } from '../../src/client/tail.js';
import { createTestApp } from '../../test/helpers/app.js';
import type { TestApp } from '../../test/helpers/app.js';
import { PipelinePage } from '../src/pipeline/PipelinePage.js';
import { RunsList } from '../src/RunsList.js';
import { RunView } from '../src/run/RunView.js';
import { TopicView } from '../src/TopicView.js';
import type { TailFn } from '../src/stream.js';

// The views against a real server in this process, through the SDK's real tail().

let t: TestApp;
let client: TailwaterClient;
let liveTail: TailFn;

beforeEach(async () => {
  t = await createTestApp({ finishGraceSeconds: 0.2 });
  const url = await t.listen();
  client = new TailwaterClient({ server: url });
  liveTail = (options) => tail({ ...options, server: url });
});

afterEach(async () => {
  cleanup(); // aborts the views' streams before the server goes
  await t.close();
});

describe('the dashboard against a live server', () => {
  test('the run view shows history, then live lines, then the final status with its end and duration instead of the stream state', async () => {
    await client.appendLog('ingest.daily', 'r1', 'history line\n');
    await client.setStatus('ingest.daily', 'r1', 'running');
    render(<RunView pipeline="ingest.daily" runId="latest" tail={liveTail} />);
    expect(await screen.findByText('history line')).toBeTruthy();
    await waitFor(() => expect(screen.getByTestId('connection-state').textContent).toBe('Live'));
    await client.appendLog('ingest.daily', 'r1', '\u001b[32mlive line\u001b[0m\n');
    const live = await screen.findByText('live line');
    expect(live.style.color).toBe('rgb(35, 209, 139)');
    await client.setStatus('ingest.daily', 'r1', 'success');
    await waitFor(() => expect(screen.getByTestId('run-status').textContent).toBe('success'));
    // Finished: the header says when it ended and how long it took; the stream's state
    // ("Live", then "Ended: the run finished") is no longer news.
    await waitFor(() =>
      expect(screen.getByTestId('run-ended').textContent).toMatch(/^Ended .+ · took \d+s$/),
    );
    await waitFor(() => expect(screen.queryByTestId('connection-state')).toBeNull(), {
      timeout: 4000,
    });
  });

  test('the runs list lists the pipelines and follows the runs feed', async () => {
    await client.setStatus('ingest.daily', 'r1', 'running');
    const listRunning = (pipeline: string) => client.listRuns(pipeline, { status: 'running' });
    render(
      <RunsList
        tail={liveTail}
        listRunning={listRunning}
        listPipelines={(options) => client.pipelinesPage(options)}
        refreshMs={50}
      />,
    );
    const table = await screen.findByRole('table', { name: 'Pipelines' });
    expect(within(table).getByRole('link', { name: 'r1' })).toBeTruthy();
    await client.setStatus('export.hourly', 'x1', 'running');
    expect(await within(table).findByRole('link', { name: 'export.hourly' })).toBeTruthy();
    // The log grows without a status change: the size follows.
    await client.appendLog('ingest.daily', 'r1', 'x'.repeat(3000));
    const cells = within(table)
      .getByRole('link', { name: 'r1' })
      .closest('tr')!
      .querySelectorAll('td');
    await waitFor(() => expect(cells[5]?.textContent).toBe('2.9 KiB'));
    // The name filter is the server's.
    fireEvent.change(screen.getByRole('searchbox', { name: 'Pipeline' }), {
      target: { value: 'export' },
    });
    await waitFor(() => expect(within(table).queryByRole('link', { name: 'r1' })).toBeNull());
    expect(within(table).getByRole('link', { name: 'export.hourly' })).toBeTruthy();
  });

  test('the pipeline page lists its runs from the server and follows the running one', async () => {
    for (const id of ['a1', 'a2']) await client.setStatus('etl.page', id, 'success');
    await client.setStatus('etl.page', 'a3', 'running');
    render(
      <PipelinePage
        pipeline="etl.page"
        tail={liveTail}
        listRunsPage={(pipeline, options) => client.runsPage(pipeline, options)}
      />,
    );
    const table = await screen.findByRole('table', { name: 'Runs of etl.page' });
    expect(
      within(table)
        .getAllByRole('rowheader')
        .map((cell) => cell.textContent),
    ).toEqual(['a3', 'a2', 'a1']);
    await waitFor(() => expect(screen.getByTestId('duration-chart').dataset['bars']).toBe('3'));
    await client.setStatus('etl.page', 'a3', 'failed');
    const row = within(table).getByRole('link', { name: 'a3' }).closest('tr')!;
    await waitFor(() => expect(within(row).getByText('failed')).toBeTruthy());
  });

  test('the Iceberg view shows the topic, newest first', async () => {
    const event = (n: number) => ({
      kind: 'iceberg-mutation',
      data: {
        eventId: `e${n}`,
        eventTimestamp: new Date(Date.UTC(2026, 0, 1, 0, 0, n)).toISOString(),
        tableIdentifier: `prod.db.t${n}`,
        eventType: 'COMMIT',
        payload: { operation: 'append', snapshotId: n, summary: { 'added-records': `${n}0` } },
      },
    });
    await client.appendEvents({ topic: 'iceberg' }, [event(1)]);
    render(<TopicView topic="iceberg" tail={liveTail} />);
    expect(await screen.findByText('prod.db.t1')).toBeTruthy();
    await client.appendEvents({ topic: 'iceberg' }, [event(2)]);
    expect(await screen.findByText('prod.db.t2')).toBeTruthy();
    const rows = within(screen.getByRole('table')).getAllByRole('row').slice(1);
    expect(rows.map((row) => row.querySelectorAll('td')[1]?.textContent)).toEqual([
      'prod.db.t2',
      'prod.db.t1',
    ]);
    expect(screen.getByTestId('connection-status').textContent).toContain('CONNECTED');
  });
});
