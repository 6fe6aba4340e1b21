import { act, fireEvent, render, screen, waitFor } from '@testing-library/react';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import type { PipelinesPageOptions, RunsPageOptions } from '../../src/client/index.js';
import type { Run } from '../../src/model/run.js';
import { App, parseRoute } from '../src/App.js';
import { fakeServer } from './fake-server.js';
import type { FakeServer } from './fake-server.js';
import { fakeTail } from './fake-tail.js';

// A server without authentication: the app asks (GET /api/v1/session) and shows its views.
let server: FakeServer;
beforeEach(() => {
  server = fakeServer({ authentication: false });
});
afterEach(() => server.restore());

describe('dashboard routes', () => {
  test('parses the paths docs/DASHBOARD.md lists', () => {
    expect(parseRoute('/ui/')).toEqual({ view: 'runs' });
    expect(parseRoute('/ui')).toEqual({ view: 'runs' });
    expect(parseRoute('/ui/pipelines/ingest.daily/runs/latest')).toEqual({
      view: 'run',
      pipeline: 'ingest.daily',
      runId: 'latest',
    });
    expect(parseRoute('/ui/pipelines/a%2Fb/runs/r%201/')).toEqual({
      view: 'run',
      pipeline: 'a/b',
      runId: 'r 1',
    });
    expect(parseRoute('/ui/pipelines/etl%2Fdaily%20job')).toEqual({
      view: 'pipeline',
      pipeline: 'etl/daily job',
    });
    expect(parseRoute('/ui/pipelines/etl.daily/')).toEqual({
      view: 'pipeline',
      pipeline: 'etl.daily',
    });
    expect(parseRoute('/ui/topics/iceberg')).toEqual({ view: 'topic', topic: 'iceberg' });
    expect(parseRoute('/ui/nothing/here')).toEqual({ view: 'notFound', path: '/ui/nothing/here' });
    expect(parseRoute('/ui/topics/%E0%A4%A')).toMatchObject({ view: 'notFound' });
  });

  test('renders the view of each route', async () => {
    const fake = fakeTail();
    const { unmount } = render(<App pathname="/ui/topics/iceberg" tail={fake.tail} />);
    expect((await screen.findByRole('heading', { level: 1 })).textContent).toBe(
      'Apache Iceberg Real-time Mutations',
    );
    unmount();
    render(<App pathname="/ui/pipelines/p/runs/r1" tail={fake.tail} />);
    expect((await screen.findByRole('heading', { level: 1 })).textContent).toBe('p / r1');
    expect(fake.calls.map((call) => call.target)).toEqual([
      { topic: 'iceberg' },
      { pipeline: 'p', runId: 'r1' },
    ]);
  });

  test('runs/latest follows the run that is newest when the page opens, by its id', async () => {
    const fake = fakeTail();
    const asked: string[] = [];
    let answer: string | null = null;
    const resolveRun = (pipeline: string, runId: string) => {
      asked.push(`${pipeline}/${runId}`);
      return Promise.resolve(answer);
    };
    render(<App pathname="/ui/pipelines/p/runs/latest" tail={fake.tail} resolveRun={resolveRun} />);
    // No run yet: it says so, opens no stream, and asks again.
    expect((await screen.findByText(/no runs yet; waiting/)).getAttribute('role')).toBe('status');
    expect(fake.calls).toEqual([]);
    answer = 'r9';
    // It asks every 2 s; the timeout only ends a test whose page never asks again.
    await waitFor(
      () => expect(screen.getByRole('heading', { level: 1 }).textContent).toBe('p / r9 (latest)'),
      { timeout: 15_000 },
    );
    expect(asked.length).toBeGreaterThanOrEqual(2);
    expect(new Set(asked)).toEqual(new Set(['p/latest']));
    // The stream is the concrete run's: a reconnect stays on it when a newer run starts.
    expect(fake.calls.map((call) => call.target)).toEqual([{ pipeline: 'p', runId: 'r9' }]);
  });

  test('links change the view without a reload, and Back returns to the last one', async () => {
    window.history.replaceState(null, '', '/ui/');
    const fake = fakeTail();
    const run: Run = {
      id: 'u1',
      pipeline: 'etl.daily',
      runId: 'r7',
      status: 'running',
      cancelRequested: false,
      createdAt: '2026-01-01T00:00:00.000Z',
      startedAt: '2026-01-01T00:00:00.000Z',
      endedAt: null,
      lastSeq: 1,
      logBytes: 0,
      meta: {},
    };
    const listPipelines = () =>
      Promise.resolve({ pipelines: [{ fqn: 'etl.daily', id: 'p1', runs: 1, lastRun: run }] });
    render(<App pathname="/ui/" tail={fake.tail} listPipelines={listPipelines} />);
    await screen.findByRole('heading', { name: 'Pipelines and runs' });
    expect(document.title).toBe('Runs · Tailwater');
    const link = await screen.findByRole('link', { name: 'r7' });

    // A plain click routes inside the app: the address changes, the run view opens.
    expect(fireEvent.click(link)).toBe(false); // the browser's navigation was prevented
    expect(window.location.pathname).toBe('/ui/pipelines/etl.daily/runs/r7');
    expect(screen.getByRole('heading', { level: 1 }).textContent).toBe('etl.daily / r7');
    expect(document.title).toBe('etl.daily / r7 · Tailwater');
    expect(fake.calls.at(-1)?.target).toEqual({ pipeline: 'etl.daily', runId: 'r7' });
    // Leaving the runs list closed its stream.
    expect(fake.calls[0]?.signal?.aborted).toBe(true);

    // A click meant for a new tab, and the download link, are left to the browser.
    expect(fireEvent.click(screen.getByRole('link', { name: 'Runs' }), { ctrlKey: true })).toBe(
      true,
    );
    expect(fireEvent.click(screen.getByRole('link', { name: 'Download log' }))).toBe(true);
    expect(window.location.pathname).toBe('/ui/pipelines/etl.daily/runs/r7');

    act(() => window.history.back());
    await waitFor(() =>
      expect(screen.getByRole('heading', { level: 1 }).textContent).toBe('Pipelines and runs'),
    );
    expect(window.location.pathname).toBe('/ui/');
  });

  test('the runs list and the pipeline page keep their filters in the address', async () => {
    window.history.replaceState(null, '', '/ui/?name=etl');
    const fake = fakeTail();
    const asked: PipelinesPageOptions[] = [];
    const listPipelines = (options: PipelinesPageOptions) => {
      asked.push(options);
      return Promise.resolve({ pipelines: [] });
    };
    const { unmount } = render(
      <App pathname="/ui/?name=etl" tail={fake.tail} listPipelines={listPipelines} />,
    );
    const name = await screen.findByRole('searchbox', { name: 'Pipeline' });
    expect((name as HTMLInputElement).value).toBe('etl');
    await waitFor(() => expect(asked[0]).toMatchObject({ name: 'etl' }));
    fireEvent.change(screen.getByRole('combobox', { name: 'Last run' }), {
      target: { value: 'failed' },
    });
    expect(window.location.pathname + window.location.search).toBe('/ui/?name=etl&status=failed');
    unmount();

    window.history.replaceState(null, '', '/ui/pipelines/etl.daily?status=failed&from=2026-11-01');
    const runsAsked: RunsPageOptions[] = [];
    const listRunsPage = (_pipeline: string, options: RunsPageOptions) => {
      runsAsked.push(options);
      return Promise.resolve({ runs: [] });
    };
    render(
      <App
        pathname="/ui/pipelines/etl.daily?status=failed&from=2026-11-01"
        tail={fake.tail}
        listRunsPage={listRunsPage}
      />,
    );
    const status = (await screen.findByRole('combobox', { name: 'Status' })) as HTMLSelectElement;
    expect(status.value).toBe('failed');
    expect((screen.getByLabelText('From') as HTMLInputElement).value).toBe('2026-11-01');
    await waitFor(() => expect(runsAsked[0]).toMatchObject({ status: 'failed' }));
    expect(runsAsked[0]?.since).toBe(new Date(2026, 10, 1).toISOString());
    fireEvent.click(screen.getByRole('button', { name: 'Clear filters' }));
    expect(window.location.pathname + window.location.search).toBe('/ui/pipelines/etl.daily');
    expect(document.title).toBe('Pipeline etl.daily · Tailwater');
  });
});
