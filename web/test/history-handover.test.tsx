import { cleanup, fireEvent, render, screen, waitFor } from '@testing-library/react';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { TailwaterClient } from '../../src/client/http-client.js';
import { tail } from '../../src/client/tail.js';
import { createTestApp } from '../../test/helpers/app.js';
import type { TestApp } from '../../test/helpers/app.js';
import { RunView } from '../src/run/RunView.js';
import { rangedLogHistory } from '../src/run/log-history.js';
import type { LogHistoryFn } from '../src/run/log-history.js';
import type { TailFn, TailOptions } from '../src/stream.js';
import { geometry, renderedLines } from './log-helpers.js';

// The run view against a real server in this process: the log's history read as text from
// log.txt by range, then the stream from where that text ended (docs/API.md).

const FQN = 'ingest.daily';
let t: TestApp;
let client: TailwaterClient;
let url: string;

beforeEach(async () => {
  t = await createTestApp({ finishGraceSeconds: 0.2 });
  url = await t.listen();
  client = new TailwaterClient({ server: url });
});

afterEach(async () => {
  cleanup();
  await t.close();
});

const line = (n: number) => `line ${n} é😀`;
const text = (from: number, to: number) =>
  Array.from({ length: to - from + 1 }, (_, i) => `${line(from + i)}\n`).join('');

describe('the run view reads history as text, then streams what follows', () => {
  test('no line is lost or shown twice at the seam, with lines appended while the history is read', async () => {
    await client.setStatus(FQN, 'r1', 'running');
    await client.appendEvents({ pipeline: FQN, runId: 'r1' }, [
      { kind: 'progress', data: { pct: 10 } },
    ]);
    // Lines 1–20 in entries of 5 lines.
    for (let n = 1; n <= 20; n += 5) await client.appendLog(FQN, 'r1', text(n, n + 4));
    // Pages of 37 bytes: they end inside lines and inside characters. After the first page,
    // lines 21–25 are written, then more pages are read (which now reach further).
    const ranged = rangedLogHistory(url, { pageBytes: 37 });
    let pages = 0;
    const history: LogHistoryFn = (target, onText, signal) =>
      ranged(
        target,
        (piece, marked) => {
          onText(piece, marked);
          pages += 1;
          if (pages === 1) void client.appendLog(FQN, 'r1', text(21, 25));
        },
        signal,
      );
    const calls: TailOptions[] = [];
    const liveTail: TailFn = (options) => {
      calls.push(options);
      return tail({ ...options, server: url });
    };
    render(<RunView pipeline={FQN} runId="r1" tail={liveTail} history={history} />);
    await waitFor(() => expect(screen.getByTestId('connection-state').textContent).toBe('Live'));
    expect(pages).toBeGreaterThanOrEqual(10);
    // The stream was opened once, after the text, from where the text ended.
    expect(calls).toHaveLength(1);
    expect(calls[0]?.logAfter).toMatch(/^\d+-[0-9a-f]{8}$/);
    // Live lines after the stream opened.
    await client.appendLog(FQN, 'r1', text(26, 30));
    const log = screen.getByTestId('log');
    const expected = Array.from({ length: 30 }, (_, i) => line(i + 1));
    await waitFor(() => expect(renderedLines(log)).toEqual(expected));
    // The events came through the stream from the start: the progress before the history too.
    expect(screen.getByRole('progressbar')).toBeTruthy();
  });

  test('without a usable history (an answer that is not a range) it streams the whole log', async () => {
    await client.appendLog(FQN, 'r1', text(1, 3));
    const broken: LogHistoryFn = async (_target, onText) => {
      onText(`${line(1)}\n${line(2)}\n`, false); // a partial read, then the server fails
      return null;
    };
    const liveTail: TailFn = (options) => tail({ ...options, server: url });
    render(<RunView pipeline={FQN} runId="r1" tail={liveTail} history={broken} />);
    const log = screen.getByTestId('log');
    await waitFor(() => expect(renderedLines(log)).toEqual([line(1), line(2), line(3)]));
  });
});

describe('the run’s facts while its history is read', () => {
  test('status and elapsed time come from the run’s summary before the stream opens; the stream’s own then win', async () => {
    await client.setStatus(FQN, 'r1', 'running');
    await client.appendLog(FQN, 'r1', text(1, 3));
    await client.setStatus(FQN, 'r1', 'success');
    // A history that is slow to come: the stream waits for it.
    let release = () => {};
    const slow: LogHistoryFn = async (target, onText, signal) => {
      await new Promise<void>((resolve) => {
        release = resolve;
      });
      return rangedLogHistory(url)(target, onText, signal);
    };
    const calls: TailOptions[] = [];
    const liveTail: TailFn = (options) => {
      calls.push(options);
      return tail({ ...options, server: url });
    };
    const loadRun = (pipeline: string, runId: string) => client.getRun(pipeline, runId);
    render(<RunView pipeline={FQN} runId="r1" tail={liveTail} history={slow} loadRun={loadRun} />);
    await waitFor(() => expect(screen.getByTestId('run-status').textContent).toBe('success'));
    const run = await client.getRun(FQN, 'r1');
    const ranFor = Date.parse(run.endedAt!) - Date.parse(run.startedAt!);
    // A finished run's elapsed time is fixed: from its start to its end, in whole seconds.
    expect(screen.getByTestId('elapsed').textContent).toBe(`${Math.floor(ranFor / 1000)}s`);
    expect(calls).toHaveLength(0);

    release();
    const log = screen.getByTestId('log');
    await waitFor(() => expect(renderedLines(log)).toEqual([line(1), line(2), line(3)]));
    await waitFor(() => expect(calls).toHaveLength(1));
    expect(screen.getByTestId('run-status').textContent).toBe('success');
  });

  test('without a summary (its read failed) the view waits for the stream’s facts', async () => {
    await client.setStatus(FQN, 'r1', 'running');
    const liveTail: TailFn = (options) => tail({ ...options, server: url });
    const failing = () => Promise.reject(new Error('unreachable'));
    render(
      <RunView
        pipeline={FQN}
        runId="r1"
        tail={liveTail}
        history={rangedLogHistory(url)}
        loadRun={failing}
      />,
    );
    await waitFor(() => expect(screen.getByTestId('run-status').textContent).toBe('running'));
  });
});

describe('a linked line far into a long log', () => {
  /** A run of `count` lines `n: padding`, about 40 bytes each, in entries of 100 lines. */
  async function longRun(count: number) {
    await client.setStatus(FQN, 'r1', 'running');
    await client.appendEvents({ pipeline: FQN, runId: 'r1' }, [
      { kind: 'progress', data: { pct: 10 } },
    ]);
    for (let from = 1; from <= count; from += 100) {
      let text = '';
      for (let n = from; n < from + 100 && n <= count; n += 1) text += `${n}: ${'x'.repeat(34)}\n`;
      await client.appendLog(FQN, 'r1', text);
    }
  }
  const row = (log: HTMLElement, line: number) =>
    log.querySelector<HTMLElement>(`.log-line[data-line="${line}"]`);

  test('is read from near its line: numbered as the log’s, highlighted, events from the start, then the whole log on asking', async () => {
    await longRun(1000);
    // Reading from the start costs more than 4 KiB here: the link reads from 50 lines before.
    const history = rangedLogHistory(url, { jumpBytes: 4096, linesBefore: 50 });
    const liveTail: TailFn = (options) => tail({ ...options, server: url });
    render(
      <RunView pipeline={FQN} runId="r1" tail={liveTail} history={history} targetLine={800} />,
    );
    const log = screen.getByTestId('log');
    await waitFor(() => expect(row(log, 800)?.classList.contains('line-target')).toBe(true));
    expect(row(log, 800)!.querySelector('.line-text')!.textContent).toBe(`800: ${'x'.repeat(34)}`);
    expect(screen.getByRole('note').textContent).toContain('it was read from line 750');
    // Nothing before line 750 was read; the events came from the start all the same.
    await waitFor(() => expect(screen.getByTestId('connection-state').textContent).toBe('Live'));
    expect(row(log, 749)).toBeNull();
    expect(screen.getByRole('progressbar')).toBeTruthy();
    // Lines written now come after the last one read, numbered on.
    await client.appendLog(FQN, 'r1', 'line 1001\n');
    fireEvent.click(screen.getByRole('button', { name: 'Read the whole log' }));
    await waitFor(() => expect(screen.queryByText(/it was read from line/)).toBeNull());
    await waitFor(() => expect(row(log, 800)?.classList.contains('line-target')).toBe(true));
    // The whole log now: the first line is there to scroll to, the last came through the stream.
    fireEvent.click(screen.getByRole('button', { name: 'Jump to latest' }));
    await waitFor(() =>
      expect(row(log, 1001)?.querySelector('.line-text')?.textContent).toBe('line 1001'),
    );
    // Scrolled to the top, as a reader would.
    geometry(log, 1001 * 20);
    log.scrollTop = 1001 * 20;
    fireEvent.scroll(log);
    log.scrollTop = 0;
    fireEvent.scroll(log);
    await waitFor(() =>
      expect(row(log, 1)?.querySelector('.line-text')?.textContent).toBe(`1: ${'x'.repeat(34)}`),
    );
  });

  test('a log shorter than the jump is read from its start', async () => {
    await longRun(300);
    const history = rangedLogHistory(url, { jumpBytes: 1024 * 1024, linesBefore: 50 });
    const liveTail: TailFn = (options) => tail({ ...options, server: url });
    render(
      <RunView pipeline={FQN} runId="r1" tail={liveTail} history={history} targetLine={250} />,
    );
    const log = screen.getByTestId('log');
    await waitFor(() => expect(row(log, 250)?.classList.contains('line-target')).toBe(true));
    expect(screen.queryByText(/it was read from line/)).toBeNull();
  });
});
