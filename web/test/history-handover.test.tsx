import { cleanup, render, screen, waitFor } from '@testing-library/react';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { TailwaterClient } from '../../src/client/http-client.js';
import { tail } from '../../src/client/tail.js';
import { createTestApp } from '../../test/helpers/app.js';
import type { TestApp } from '../../test/helpers/app.js';
import { RunView } from '../src/run/RunView.js';
import { rangedLogHistory } from '../src/run/log-history.js';
import type { LogHistoryFn } from '../src/run/log-history.js';
import type { TailFn, TailOptions } from '../src/stream.js';
import { renderedLines } from './log-helpers.js';

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
    const ranged = rangedLogHistory(url, 37);
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
