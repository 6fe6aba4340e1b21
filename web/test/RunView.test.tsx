import { act, fireEvent, render, screen, waitFor } from '@testing-library/react';
import { describe, expect, test } from 'vitest';
import { RunView } from '../src/RunView.js';
import { fakeTail } from './fake-tail.js';
import type { FakeTail } from './fake-tail.js';

/** jsdom lays nothing out: give the log element a scroll geometry the test controls. */
function geometry(element: HTMLElement, scrollHeight: number) {
  let scrollTop = 0;
  const box = { scrollHeight };
  Object.defineProperty(element, 'scrollHeight', {
    configurable: true,
    get: () => box.scrollHeight,
  });
  Object.defineProperty(element, 'scrollTop', {
    configurable: true,
    get: () => scrollTop,
    set: (value: number) => {
      scrollTop = Math.max(0, Math.min(value, box.scrollHeight - element.clientHeight));
    },
  });
  return box;
}

function lines(fake: FakeTail, from: number, to: number) {
  let text = '';
  for (let n = from; n <= to; n += 1) text += `line ${n}\n`;
  fake.entry({ kind: 'log', text });
}

describe('RunView', () => {
  test('reads the run stream with tail() and shows status and connection', async () => {
    const fake = fakeTail();
    render(<RunView pipeline="ingest.daily" runId="latest" tail={fake.tail} />);
    expect(fake.calls[0]?.target).toEqual({ pipeline: 'ingest.daily', runId: 'latest' });
    expect(screen.getByTestId('connection-status').textContent).toContain('CONNECTING');
    act(() => fake.entry({ kind: 'status', data: { status: 'running' } }));
    await waitFor(() => expect(screen.getByTestId('run-status').textContent).toBe('running'));
    expect(screen.getByTestId('connection-status').textContent).toContain('CONNECTED');
    act(() =>
      fake.push({ type: 'end', end: { reason: 'finished', status: 'success', lastSeq: 1 } }),
    );
    await waitFor(() => expect(screen.getByTestId('run-status').textContent).toBe('success'));
    expect(screen.getByTestId('connection-status').textContent).toContain('DISCONNECTED');
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
    expect(red.style.color).toBe('rgb(187, 0, 0)');
    const green = screen.getByText('bold green');
    expect(green.style.color).toBe('rgb(0, 187, 0)');
    expect(green.style.fontWeight).toBe('bold');
    expect(screen.getByText('plain').style.color).toBe('');
    expect(screen.getByTestId('log').textContent).not.toContain('\u001b');
  });

  test('follow mode keeps the newest line in view as lines arrive', async () => {
    const fake = fakeTail();
    render(<RunView pipeline="p" runId="r" tail={fake.tail} />);
    const log = screen.getByTestId('log');
    const box = geometry(log, 4000);
    expect(screen.getByTestId('follow-state').textContent).toBe('Following');
    act(() => lines(fake, 1, 200));
    await waitFor(() => expect(log.scrollTop).toBe(4000 - 400));
    box.scrollHeight = 8000;
    act(() => lines(fake, 201, 400));
    await waitFor(() => expect(log.scrollTop).toBe(8000 - 400));
    expect(screen.queryByRole('button', { name: 'Jump to latest' })).toBeNull();
  });

  test('scrolling up pauses follow; the button jumps back and resumes it', async () => {
    const fake = fakeTail();
    render(<RunView pipeline="p" runId="r" tail={fake.tail} />);
    const log = screen.getByTestId('log');
    const box = geometry(log, 4000);
    act(() => lines(fake, 1, 200));
    await waitFor(() => expect(log.scrollTop).toBe(3600));

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
});
