import { act, fireEvent, render, screen, waitFor, within } from '@testing-library/react';
import Anser from 'anser';
import { afterEach, describe, expect, test, vi } from 'vitest';
import { RunView } from '../src/run/RunView.js';
import { fakeTail } from './fake-tail.js';
import { geometry, lines, renderedLines } from './log-helpers.js';

/** A run view whose log holds 200 lines (4000 px in a 400 px box), followed to its end. */
async function followingTwoHundredLines() {
  const fake = fakeTail();
  render(<RunView pipeline="p" runId="r" tail={fake.tail} />);
  const log = screen.getByTestId('log');
  const box = geometry(log, 4000);
  expect(screen.getByTestId('follow-state').textContent).toBe('Following');
  act(() => lines(fake, 1, 200));
  await waitFor(() => expect(log.scrollTop).toBe(4000 - 400));
  return { fake, log, box };
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe('RunView', () => {
  test('reads the run with tail(): connecting, live once the server accepts, ended with the reason', async () => {
    const fake = fakeTail();
    render(<RunView pipeline="ingest.daily" runId="latest" tail={fake.tail} />);
    expect(fake.calls[0]?.target).toEqual({ pipeline: 'ingest.daily', runId: 'latest' });
    const state = () => screen.getByTestId('connection-state').textContent;
    expect(state()).toBe('Connecting…');
    act(() => fake.push({ type: 'open' }));
    await waitFor(() => expect(state()).toBe('Live'));
    expect(screen.getByTestId('run-status').textContent).toBe('unknown');
    act(() => fake.entry({ kind: 'status', data: { status: 'running' } }));
    await waitFor(() => expect(screen.getByTestId('run-status').textContent).toBe('running'));
    act(() =>
      fake.push({ type: 'end', end: { reason: 'runFinished', status: 'success', lastSeq: 1 } }),
    );
    await waitFor(() => expect(screen.getByTestId('run-status').textContent).toBe('success'));
    expect(state()).toBe('Ended: the run finished');
    // The run's own end: nothing to resume.
    expect(screen.queryByRole('button', { name: 'Resume' })).toBeNull();
  });

  test('says so when the run does not exist (ended as finished, without a status)', async () => {
    const fake = fakeTail();
    render(<RunView pipeline="p" runId="typo" tail={fake.tail} />);
    act(() => {
      fake.push({ type: 'open' });
      fake.push({ type: 'end', end: { reason: 'runFinished', lastSeq: 0 } });
    });
    await waitFor(() =>
      expect(screen.getByTestId('connection-state').textContent).toBe(
        'Ended: no such run (nothing was ever written to it)',
      ),
    );
    expect(screen.getByTestId('run-status').textContent).toBe('unknown');
  });

  test('says it is reconnecting, with the attempt and the reason, then live again', async () => {
    const fake = fakeTail();
    render(<RunView pipeline="p" runId="r" tail={fake.tail} />);
    act(() => fake.push({ type: 'open' }));
    act(() =>
      fake.push({ type: 'reconnecting', attempt: 2, delayMs: 1500, reason: 'the stream was cut' }),
    );
    await waitFor(() =>
      expect(screen.getByTestId('connection-state').textContent).toBe(
        'Reconnecting in 1.5 s (attempt 2): the stream was cut',
      ),
    );
    act(() => fake.push({ type: 'open' }));
    await waitFor(() => expect(screen.getByTestId('connection-state').textContent).toBe('Live'));
  });

  test('after an idle timeout it offers to resume, and resumes after the last entry seen', async () => {
    const fake = fakeTail();
    render(<RunView pipeline="p" runId="r" tail={fake.tail} />);
    act(() => {
      fake.push({ type: 'open' });
      lines(fake, 1, 3); // seq 1
      lines(fake, 4, 5); // seq 2
      fake.push({ type: 'end', end: { reason: 'idleTimeout', lastSeq: 2 } });
    });
    await waitFor(() =>
      expect(screen.getByTestId('connection-state').textContent).toBe(
        'Ended: nothing new for a while (idle timeout)',
      ),
    );
    fireEvent.click(screen.getByRole('button', { name: 'Resume' }));
    await waitFor(() => expect(fake.calls).toHaveLength(2));
    expect(fake.calls[1]).toMatchObject({ target: { pipeline: 'p', runId: 'r' }, after: '2' });
    act(() => {
      fake.push({ type: 'open' });
      lines(fake, 6, 6);
    });
    await screen.findByText('line 6');
    // Nothing shown twice: the resumed stream continued the log.
    expect(renderedLines(screen.getByTestId('log'))).toEqual([
      'line 1',
      'line 2',
      'line 3',
      'line 4',
      'line 5',
      'line 6',
    ]);
  });

  test('says Disconnected with the reason when tail() gives up, and offers to resume', async () => {
    const fake = fakeTail();
    render(<RunView pipeline="p" runId="r" tail={fake.tail} />);
    act(() => fake.fail(new Error('Gave up following the stream after 5 failed attempts')));
    await waitFor(() =>
      expect(screen.getByTestId('connection-state').textContent).toBe(
        'Disconnected: Gave up following the stream after 5 failed attempts',
      ),
    );
    expect(screen.getByRole('button', { name: 'Resume' })).toBeTruthy();
  });

  test('on gap reset it clears the log, events and progress and shows the stream from its start', async () => {
    const fake = fakeTail();
    render(<RunView pipeline="p" runId="r" tail={fake.tail} />);
    act(() => {
      fake.push({ type: 'open' });
      fake.entry({ kind: 'status', data: { status: 'running' } });
      lines(fake, 1, 3);
      fake.entry({ kind: 'progress', data: { pct: 80 } });
    });
    await screen.findByText('line 3');
    expect(screen.getByRole('progressbar', { name: 'Run progress' })).toBeTruthy();

    // The store was replaced: the server says so and sends the stream again from its start.
    act(() => {
      fake.push({ type: 'gap', gap: { reason: 'reset' } });
      fake.entry({ kind: 'log', text: 'fresh 1\nfresh 2\n' });
    });
    await screen.findByText('fresh 2');
    expect(renderedLines(screen.getByTestId('log'))).toEqual(['fresh 1', 'fresh 2']);
    expect(screen.queryByRole('progressbar')).toBeNull();
    expect(screen.getByTestId('run-status').textContent).toBe('unknown');
    expect(screen.getByTestId('events-count').textContent).toBe('0 events');
    expect(screen.getByRole('note').textContent).toMatch(/reloaded/);
  });

  test('says out loud which entries retention deleted', async () => {
    const fake = fakeTail();
    render(<RunView pipeline="p" runId="r" tail={fake.tail} />);
    act(() => fake.push({ type: 'gap', gap: { reason: 'retention', fromSeq: 1, toSeq: 40 } }));
    expect((await screen.findByRole('note')).textContent).toBe(
      'Entries 1–40 were deleted by retention before they could be shown.',
    );
  });

  test('the progress bar follows progress events (data.pct), ignores unusable ones, and goes once the run has finished', async () => {
    const fake = fakeTail();
    render(<RunView pipeline="p" runId="r" tail={fake.tail} />);
    act(() => lines(fake, 1, 1));
    await screen.findByText('line 1');
    expect(screen.queryByRole('progressbar')).toBeNull();
    act(() => fake.entry({ kind: 'progress', step: 'train', data: { pct: 10 } }));
    const bar = await screen.findByRole('progressbar', { name: 'Run progress' });
    expect(bar.getAttribute('aria-valuenow')).toBe('10');
    expect(bar.getAttribute('aria-valuetext')).toBe('10% (train)');
    act(() => fake.entry({ kind: 'progress', data: { pct: 55.4 } }));
    await waitFor(() => expect(bar.getAttribute('aria-valuenow')).toBe('55'));
    act(() => {
      fake.entry({ kind: 'progress', data: { pct: 'lots' } });
      fake.entry({ kind: 'progress', data: { done: 3 } });
    });
    await waitFor(() => expect(screen.getByTestId('events-count').textContent).toBe('4 events'));
    expect(bar.getAttribute('aria-valuenow')).toBe('55');
    // Once the run has finished, its last progress is history: the bar goes.
    act(() => fake.entry({ kind: 'status', data: { status: 'success' } }));
    await waitFor(() => expect(screen.queryByRole('progressbar')).toBeNull());
  });

  test('elapsed time runs from the first entry to the terminal status', async () => {
    const fake = fakeTail();
    render(<RunView pipeline="p" runId="r" tail={fake.tail} />);
    expect(screen.getByTestId('elapsed').textContent).toBe('—');
    act(() => {
      fake.entry({ kind: 'status', data: { status: 'running' }, time: '2026-01-01T00:00:00.000Z' });
      fake.entry({ kind: 'log', text: 'working\n', time: '2026-01-01T00:01:10.000Z' });
      fake.entry({ kind: 'status', data: { status: 'failed' }, time: '2026-01-01T00:02:05.000Z' });
    });
    await waitFor(() => expect(screen.getByTestId('run-status').textContent).toBe('failed'));
    expect(screen.getByTestId('elapsed').textContent).toBe('2m 5s');
  });

  test('links to the whole log as a download', () => {
    const fake = fakeTail();
    render(<RunView pipeline="etl daily" runId="r/1" tail={fake.tail} />);
    const link = screen.getByRole('link', { name: 'Download log' });
    expect(link.getAttribute('href')).toBe('/api/v1/pipelines/etl%20daily/runs/r%2F1/log.txt');
    expect(link.hasAttribute('download')).toBe(true);
  });

  test('shows lines with line numbers, joining text split across chunks', async () => {
    const fake = fakeTail();
    render(<RunView pipeline="p" runId="r" tail={fake.tail} />);
    act(() => {
      fake.entry({ kind: 'log', text: 'first line\nsecond ' });
      fake.entry({ kind: 'log', text: 'half\nthird\n' });
    });
    await screen.findByText('third');
    const rows = [...screen.getByTestId('log').querySelectorAll('.log-line')];
    expect(rows.map((row) => row.querySelector('.line-number')?.textContent)).toEqual([
      '1',
      '2',
      '3',
    ]);
    expect(rows.map((row) => row.querySelector('.line-text')?.textContent)).toEqual([
      'first line',
      'second half',
      'third',
    ]);
  });

  test('virtualizes: a long log renders only the rows in view', async () => {
    const fake = fakeTail();
    render(<RunView pipeline="p" runId="r" tail={fake.tail} />);
    act(() => lines(fake, 1, 5000));
    await waitFor(() =>
      expect(screen.getByTestId('log').querySelectorAll('.log-line').length).toBeGreaterThan(0),
    );
    expect(screen.getByTestId('log').querySelectorAll('.log-line').length).toBeLessThan(200);
  });

  test('renders ANSI colours as styled spans, without escape codes', async () => {
    const fake = fakeTail();
    render(<RunView pipeline="p" runId="r" tail={fake.tail} />);
    act(() =>
      fake.entry({
        kind: 'log',
        text: '\u001b[31mred\u001b[0m plain \u001b[1;32mbold green\u001b[0m\n',
      }),
    );
    const red = await screen.findByText('red');
    expect(red.style.color).toBe('rgb(241, 76, 76)');
    const green = screen.getByText('bold green');
    expect(green.style.color).toBe('rgb(35, 209, 139)');
    expect(green.style.fontWeight).toBe('bold');
    expect(screen.getByText('plain').style.color).toBe('');
    expect(screen.getByTestId('log').textContent).not.toContain('\u001b');
  });

  test('follow mode keeps the newest line in view as lines arrive', async () => {
    const { fake, log, box } = await followingTwoHundredLines();
    box.scrollHeight = 8000;
    act(() => lines(fake, 201, 400));
    await waitFor(() => expect(log.scrollTop).toBe(8000 - 400));
    expect(screen.queryByRole('button', { name: 'Jump to latest' })).toBeNull();
  });

  test('a scroll event that comes after the log grew, before it was followed, keeps following', async () => {
    const { fake, log, box } = await followingTwoHundredLines();
    // The content grew (text pours in) and the browser reports a scroll at the old position:
    // not at the bottom any more, but the user did not move up.
    box.scrollHeight = 6000;
    fireEvent.scroll(log);
    expect(screen.getByTestId('follow-state').textContent).toBe('Following');
    act(() => lines(fake, 201, 300));
    await waitFor(() => expect(log.scrollTop).toBe(6000 - 400));
  });

  test('past its limit it lets the oldest lines go: numbers stay the log’s, a note links the whole log, a paused view keeps its place', async () => {
    const fake = fakeTail();
    // Lines "line N" of 7–9 characters: 2,000 characters hold about 220 of them.
    render(<RunView pipeline="p" runId="r" tail={fake.tail} maxLogChars={2000} />);
    const log = screen.getByTestId('log');
    const box = geometry(log, 200 * 20);
    act(() => lines(fake, 1, 200));
    await waitFor(() => expect(log.scrollTop).toBe(200 * 20 - 400));
    expect(screen.queryByRole('note')).toBeNull();
    // The reader scrolls up to line 151 (at the top of the view) and stays there.
    log.scrollTop = 150 * 20;
    fireEvent.scroll(log);
    await waitFor(() => expect(screen.getByTestId('follow-state').textContent).toBe('Paused'));

    act(() => lines(fake, 201, 300));
    const note = await screen.findByRole('note');
    expect(note.textContent).toMatch(
      /keeps about the last 2\.0 KiB of the log: its first \d+ lines are in the whole log/,
    );
    expect(within(note).getByRole('link', { name: 'whole log' }).getAttribute('href')).toBe(
      '/api/v1/pipelines/p/runs/r/log.txt',
    );
    const dropped = Number(/first (\d+) lines/.exec(note.textContent ?? '')![1]);
    expect(dropped).toBeGreaterThan(50);
    expect(dropped).toBeLessThan(150);
    await waitFor(() =>
      expect((log.firstElementChild as HTMLElement).style.height).toBe(`${(300 - dropped) * 20}px`),
    );
    box.scrollHeight = (300 - dropped) * 20;
    // The view moved up by the lines let go: line 151 is still at the top of it.
    expect(log.scrollTop).toBe((150 - dropped) * 20);
    fireEvent.scroll(log); // as a browser would after the move
    expect(screen.getByTestId('follow-state').textContent).toBe('Paused');
    const row = await waitFor(() => {
      const found = log.querySelector(`.log-line[data-index="${150 - dropped}"]`);
      expect(found).not.toBeNull();
      return found as HTMLElement;
    });
    expect(row.querySelector('.line-text')?.textContent).toBe('line 151');
    // Numbered as the log's own line.
    expect(row.querySelector('.line-number')?.textContent?.trim()).toBe('151');
    expect(row.style.transform).toBe(`translateY(${log.scrollTop}px)`);
  });

  test('scrolling up pauses follow; the button jumps back and resumes it', async () => {
    const { fake, log, box } = await followingTwoHundredLines();

    log.scrollTop = 1000;
    fireEvent.scroll(log);
    await waitFor(() => expect(screen.getByTestId('follow-state').textContent).toBe('Paused'));

    // New lines no longer move the view.
    box.scrollHeight = 8000;
    act(() => lines(fake, 201, 400));
    const inner = log.firstElementChild as HTMLElement;
    await waitFor(() => expect(inner.style.height).toBe(`${400 * 20}px`));
    expect(log.scrollTop).toBe(1000);

    fireEvent.click(screen.getByRole('button', { name: 'Jump to latest' }));
    await waitFor(() => expect(log.scrollTop).toBe(7600));
    expect(screen.getByTestId('follow-state').textContent).toBe('Following');

    // Scrolling back to the bottom by hand also resumes follow.
    log.scrollTop = 500;
    fireEvent.scroll(log);
    await waitFor(() => expect(screen.getByTestId('follow-state').textContent).toBe('Paused'));
    log.scrollTop = 7600;
    fireEvent.scroll(log);
    await waitFor(() => expect(screen.getByTestId('follow-state').textContent).toBe('Following'));
  });

  test('a scroll draws only the rows that came into view: rows still in view are not drawn again', async () => {
    const { log } = await followingTwoHundredLines();
    log.scrollTop = 1000;
    fireEvent.scroll(log);
    await waitFor(() => expect(screen.getByTestId('follow-state').textContent).toBe('Paused'));
    const drawn = () => renderedLines(log).map((text) => Number(text.slice('line '.length)));
    await waitFor(() => expect(drawn()[0]).toBe(1000 / 20 - 20 + 1));
    // Each line's text is parsed for its colours when its row is drawn.
    const parsed = vi.spyOn(Anser, 'ansiToJson');
    const before = new Set(drawn());

    log.scrollTop = 1000 + 10 * 20;
    fireEvent.scroll(log);
    await waitFor(() => expect(drawn()[0]).toBe(1200 / 20 - 20 + 1));
    const cameIntoView = drawn().filter((line) => !before.has(line));
    expect(cameIntoView).toHaveLength(10);
    expect(parsed.mock.calls.map(([text]) => text).sort()).toEqual(
      cameIntoView.map((line) => `line ${line}`).sort(),
    );
  });
});
