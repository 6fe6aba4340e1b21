import { act, fireEvent, render, screen, waitFor, within } from '@testing-library/react';
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import { RunView } from '../src/run/RunView.js';
import { formatClock } from '../src/run/line-time.js';
import { TIMESTAMPS_KEY, WRAP_KEY } from '../src/run/view-settings.js';
import { fakeTail } from './fake-tail.js';
import type { FakeTail } from './fake-tail.js';
import { geometry, renderedLines } from './log-helpers.js';

// The log viewer of the run view (docs/DASHBOARD.md, "The log"): sections, line links, times,
// wrapping, errors and warnings.

beforeEach(() => {
  window.localStorage.clear();
  window.history.replaceState(null, '', '/ui/pipelines/p/runs/r');
});

afterEach(() => {
  vi.restoreAllMocks();
});

/** A build with a group of 3 lines between others: lines 1–7. */
const GROUPED = 'start\n::group::Install\nnpm ci\nadded 3\ndone\n::endgroup::\nafter\n';

function open(props: Partial<Parameters<typeof RunView>[0]> = {}) {
  const fake = fakeTail();
  render(<RunView pipeline="p" runId="r" tail={fake.tail} {...props} />);
  act(() => fake.push({ type: 'open' }));
  return { fake, log: screen.getByTestId('log') };
}

function status(fake: FakeTail, value: string) {
  act(() => fake.entry({ kind: 'status', data: { status: value } }));
}

const row = (log: HTMLElement, line: number) =>
  log.querySelector<HTMLElement>(`.log-line[data-line="${line}"]`);
const toggle = (name: string) =>
  screen.getByRole('button', { name: new RegExp(`^(Fold|Unfold) ?(step ?)?${name} ?\\d`) });

describe('sections', () => {
  test('a ::group:: is a header with its title and line count (no "0 ms" for lines of one instant); a click on its title folds it to that one row, on its facts back', async () => {
    const { fake, log } = open();
    status(fake, 'running');
    act(() => fake.entry({ kind: 'log', text: GROUPED }));
    await screen.findByText('after');
    const header = row(log, 2)!;
    expect(header.classList.contains('section-header')).toBe(true);
    expect(header.textContent).toContain('Install');
    // Three lines between the markers, all written at once: no duration to speak of ("0 ms").
    expect(within(header).getByTestId('section-facts').textContent).toBe('3 lines');
    // A running run's sections are open.
    expect(toggle('Install').getAttribute('aria-expanded')).toBe('true');

    // A click on the title's text, not only the arrow, folds it: the whole header is the toggle.
    fireEvent.click(within(header).getByText('Install'));
    await waitFor(() => expect(renderedLines(log)).toEqual(['start', 'after']));
    expect(toggle('Install').getAttribute('aria-expanded')).toBe('false');
    // Lines keep their numbers: "after" is still line 7, the header still line 2.
    expect(row(log, 7)?.textContent).toContain('after');
    expect(row(log, 2)).not.toBeNull();
    expect(row(log, 3)).toBeNull();

    fireEvent.click(within(row(log, 2)!).getByTestId('section-facts'));
    await waitFor(() =>
      expect(renderedLines(log)).toEqual([
        'start',
        'npm ci',
        'added 3',
        'done',
        '::endgroup::',
        'after',
      ]),
    );
  });

  test('lines of a step are a section with a header row of their own, and its duration from the entries’ times', async () => {
    const { fake, log } = open();
    status(fake, 'running');
    act(() => {
      fake.entry({ kind: 'log', text: 'cloning\n', step: 'checkout' }); // seq 2: 00:00:02
      fake.entry({ kind: 'log', text: 'cloned\n', step: 'checkout' }); // 00:00:03
      fake.entry({ kind: 'log', text: 'make\n', step: 'build' });
    });
    await screen.findByText('make');
    const headers = [...log.querySelectorAll('.section-header')].map((h) => h.textContent);
    expect(headers).toHaveLength(2);
    expect(headers[0]).toMatch(/step checkout.*2 lines · 1\.0 s/);
    expect(headers[1]).toMatch(/step build.*1 line/);
    fireEvent.click(toggle('checkout'));
    await waitFor(() => expect(renderedLines(log)).toEqual(['make']));
    // Numbers stay the log's: "make" is line 3.
    expect(row(log, 3)?.textContent).toContain('make');
  });

  test('a finished run’s sections start folded, except one that failed (an error line, or its step’s failed event)', async () => {
    const { fake, log } = open();
    status(fake, 'running');
    act(() => {
      fake.entry({ kind: 'log', text: '::group::Lint\nok\n::endgroup::\n' });
      fake.entry({ kind: 'log', text: '::group::Test\nERROR: 1 failed\n::endgroup::\n' });
      fake.entry({ kind: 'log', text: 'deploying\n', step: 'deploy' });
      fake.entry({ kind: 'step', step: 'deploy', data: { state: 'failed' } });
      fake.entry({ kind: 'log', text: 'cleaned\n', step: 'cleanup' });
    });
    await screen.findByText('cleaned');
    status(fake, 'failed');
    await waitFor(() => expect(toggle('Lint').getAttribute('aria-expanded')).toBe('false'));
    expect(toggle('Test').getAttribute('aria-expanded')).toBe('true');
    expect(toggle('deploy').getAttribute('aria-expanded')).toBe('true');
    expect(toggle('cleanup').getAttribute('aria-expanded')).toBe('false');
    expect(renderedLines(log)).toEqual(['ERROR: 1 failed', '::endgroup::', 'deploying']);
    expect(row(log, 4)?.classList.contains('section-failed')).toBe(true);
  });

  test('folding and unfolding while following keeps the newest line in view, and follow goes on', async () => {
    const { fake, log } = open();
    // 150 lines, a group of 5, its end, one more: 157 rows, 3140 px in a 400 px box.
    const box = geometry(log, 157 * 20);
    status(fake, 'running');
    let text = '';
    for (let n = 1; n <= 150; n += 1) text += `pre ${n}\n`;
    text += '::group::Big\n';
    for (let n = 1; n <= 5; n += 1) text += `big ${n}\n`;
    act(() => fake.entry({ kind: 'log', text: `${text}::endgroup::\nafter 1\n` }));
    await waitFor(() => expect(log.scrollTop).toBe(157 * 20 - 400));
    fireEvent.scroll(log); // as a browser would after the move: the rows at the bottom are drawn
    await waitFor(() => expect(renderedLines(log).at(-1)).toBe('after 1'));
    expect(screen.getByTestId('follow-state').textContent).toBe('Following');

    box.scrollHeight = 152 * 20;
    fireEvent.click(toggle('Big'));
    await waitFor(() => expect(renderedLines(log)).not.toContain('big 3'));
    expect(log.scrollTop).toBe(152 * 20 - 400);
    expect(screen.getByTestId('follow-state').textContent).toBe('Following');
    fireEvent.scroll(log);
    await waitFor(() => expect(renderedLines(log).at(-1)).toBe('after 1'));

    box.scrollHeight = 158 * 20;
    fireEvent.click(toggle('Big'));
    act(() => fake.entry({ kind: 'log', text: 'after 2\n' }));
    await waitFor(() => expect(log.scrollTop).toBe(158 * 20 - 400));
    expect(screen.getByTestId('follow-state').textContent).toBe('Following');
    fireEvent.scroll(log);
    await waitFor(() => expect(renderedLines(log).at(-1)).toBe('after 2'));
    expect(renderedLines(log)).toContain('big 3');
  });

  test('a search match inside a folded section opens it', async () => {
    const { fake, log } = open();
    status(fake, 'running');
    act(() => fake.entry({ kind: 'log', text: GROUPED }));
    status(fake, 'success');
    await waitFor(() => expect(toggle('Install').getAttribute('aria-expanded')).toBe('false'));
    expect(renderedLines(log)).not.toContain('added 3');
    fireEvent.change(screen.getByRole('searchbox', { name: 'Search the log' }), {
      target: { value: 'added' },
    });
    await waitFor(() => expect(toggle('Install').getAttribute('aria-expanded')).toBe('true'));
    expect(renderedLines(log)).toContain('added 3');
    expect(row(log, 4)?.querySelector('mark.match-active')?.textContent).toBe('added');
  });
});

describe('line links', () => {
  async function tenLines() {
    const opened = open();
    act(() =>
      opened.fake.entry({
        kind: 'log',
        text: Array.from({ length: 10 }, (_, i) => `l${i + 1}\n`).join(''),
      }),
    );
    await screen.findByText('l10');
    return opened;
  }
  const highlighted = (log: HTMLElement) =>
    [...log.querySelectorAll('.line-target')].map((r) => Number(r.getAttribute('data-line')));

  test('every line number is a link to #L<n>; a click selects it, a shift-click the range, in the address', async () => {
    const { log } = await tenLines();
    const number = (line: number) => screen.getByRole('link', { name: `Line ${line}` });
    expect(number(7).getAttribute('href')).toBe('#L7');
    fireEvent.click(number(3));
    expect(window.location.hash).toBe('#L3');
    expect(highlighted(log)).toEqual([3]);
    expect(screen.getByTestId('follow-state').textContent).toBe('Paused');
    fireEvent.click(number(6), { shiftKey: true });
    expect(window.location.hash).toBe('#L3-L6');
    expect(highlighted(log)).toEqual([3, 4, 5, 6]);
    expect(row(log, 4)?.classList.contains('line-in-range')).toBe(true);
    // Shift-click above the anchor: the range goes the other way.
    fireEvent.click(number(1), { shiftKey: true });
    expect(window.location.hash).toBe('#L1-L3');
    expect(window.location.pathname).toBe('/ui/pipelines/p/runs/r');
  });

  test('an address with a range (a reload of #L4-L8) highlights the range once its lines arrive', async () => {
    const { fake, log } = open({ targetLine: 4, targetLastLine: 8 });
    act(() => fake.entry({ kind: 'log', text: 'a\nb\nc\n' }));
    await screen.findByText('c');
    expect(highlighted(log)).toEqual([]);
    act(() => fake.entry({ kind: 'log', text: 'd\ne\nf\ng\nh\ni\n' }));
    await screen.findByText('i');
    expect(highlighted(log)).toEqual([4, 5, 6, 7, 8]);
  });

  test('Copy link puts the line’s address on the clipboard, or the range’s when the line is in it', async () => {
    const writeText = vi.fn((_text: string) => Promise.resolve());
    Object.defineProperty(navigator, 'clipboard', { configurable: true, value: { writeText } });
    await tenLines();
    fireEvent.click(screen.getByRole('button', { name: 'Copy link to line 9' }));
    expect(writeText).toHaveBeenLastCalledWith('http://localhost:3000/ui/pipelines/p/runs/r#L9');
    await waitFor(() => expect(screen.getByText('Copied the link to line 9.')).toBeTruthy());
    fireEvent.click(screen.getByRole('link', { name: 'Line 2' }));
    fireEvent.click(screen.getByRole('link', { name: 'Line 5' }), { shiftKey: true });
    fireEvent.click(screen.getByRole('button', { name: 'Copy link to line 4' }));
    expect(writeText).toHaveBeenLastCalledWith('http://localhost:3000/ui/pipelines/p/runs/r#L2-L5');
    await waitFor(() => expect(screen.getByText('Copied the link to lines 2–5.')).toBeTruthy());
  });
});

describe('times and wrapping', () => {
  test('times show each line’s entry time as wall clock or since the run began, remembered by the browser', async () => {
    const { fake, log } = open();
    status(fake, 'running'); // seq 1: 00:00:01, the run's start
    act(() => {
      fake.entry({ kind: 'log', text: 'first\n' }); // 00:00:02
      fake.entry({ kind: 'log', text: 'second\n' }); // 00:00:03
    });
    await screen.findByText('second');
    expect(log.querySelector('[data-testid="line-time"]')).toBeNull();
    const select = screen.getByRole('combobox', { name: 'Timestamps' });
    fireEvent.change(select, { target: { value: 'clock' } });
    const times = () =>
      [...log.querySelectorAll('[data-testid="line-time"]')].map((t) => t.textContent?.trim());
    expect(times()).toEqual([
      formatClock(Date.UTC(2026, 0, 1, 0, 0, 2)),
      formatClock(Date.UTC(2026, 0, 1, 0, 0, 3)),
    ]);
    fireEvent.change(select, { target: { value: 'elapsed' } });
    expect(times()).toEqual(['+0:01.000', '+0:02.000']);
    expect(window.localStorage.getItem(TIMESTAMPS_KEY)).toBe('elapsed');
  });

  test('a view opened later starts with the times and wrapping this browser chose', async () => {
    window.localStorage.setItem(TIMESTAMPS_KEY, 'clock');
    window.localStorage.setItem(WRAP_KEY, 'on');
    const { fake, log } = open();
    act(() => fake.entry({ kind: 'log', text: 'hello\n' }));
    await screen.findByText('hello');
    expect((screen.getByRole('combobox', { name: 'Timestamps' }) as HTMLSelectElement).value).toBe(
      'clock',
    );
    expect(log.querySelector('[data-testid="line-time"]')?.textContent?.trim()).toBe(
      formatClock(Date.UTC(2026, 0, 1, 0, 0, 1)),
    );
    expect(log.classList.contains('log-wrap')).toBe(true);
  });

  test('Wrap lines soft-wraps long lines (rows are measured, not of one height) and is remembered', async () => {
    const { fake, log } = open();
    act(() => fake.entry({ kind: 'log', text: `${'x'.repeat(500)}\n` }));
    await waitFor(() => expect(row(log, 1)).not.toBeNull());
    expect(log.classList.contains('log-wrap')).toBe(false);
    expect(row(log, 1)!.style.height).toBe('20px');
    fireEvent.click(screen.getByRole('checkbox', { name: 'Wrap lines' }));
    expect(log.classList.contains('log-wrap')).toBe(true);
    expect(row(log, 1)!.style.height).toBe('');
    expect(window.localStorage.getItem(WRAP_KEY)).toBe('on');
  });
});

describe('errors and warnings', () => {
  /** 40 lines: errors at 5 and 30, a warning at 20, an error inside a group at 35. */
  async function withErrors() {
    const opened = open();
    status(opened.fake, 'running');
    const lines = Array.from({ length: 40 }, (_, i) => {
      const n = i + 1;
      if (n === 5) return 'ERROR: first';
      if (n === 20) return 'WARN: slow';
      if (n === 30) return '\u001b[31mred failure\u001b[0m';
      if (n === 33) return '::group::Later';
      if (n === 35) return 'Traceback (most recent call last):';
      if (n === 37) return '::endgroup::';
      return `ok ${n}`;
    });
    act(() => opened.fake.entry({ kind: 'log', text: `${lines.join('\n')}\n` }));
    await waitFor(() => expect(screen.getByTestId('error-count').textContent).toBe('3 errors'));
    return opened;
  }

  test('the gutter marks each error and warning where it is in the log (by line fraction)', async () => {
    await withErrors();
    const marks = [...screen.getByTestId('log-gutter').querySelectorAll('.gutter-mark')];
    expect(marks.map((m) => m.getAttribute('aria-label'))).toEqual([
      'Error at line 5',
      'Warning at line 20',
      'Error at line 30',
      'Error at line 35',
    ]);
    expect(marks.map((m) => (m as HTMLElement).style.top)).toEqual([
      '10%',
      '47.5%',
      '72.5%',
      '85%',
    ]);
    expect(marks[1]!.classList.contains('gutter-warning')).toBe(true);
  });

  test('next error and previous error go from error to error, round the end, and open a folded section', async () => {
    const { fake, log } = await withErrors();
    status(fake, 'success');
    // Line 35's section has an error: open. Fold it by hand, then go to it.
    fireEvent.click(toggle('Later'));
    await waitFor(() => expect(toggle('Later').getAttribute('aria-expanded')).toBe('false'));
    const focused = () => Number(log.querySelector('.line-focus')?.getAttribute('data-line'));
    const next = screen.getByRole('button', { name: 'Next error' });
    fireEvent.click(next);
    await waitFor(() => expect(focused()).toBe(5));
    expect(screen.getByTestId('follow-state').textContent).toBe('Paused');
    fireEvent.click(next);
    await waitFor(() => expect(focused()).toBe(30));
    fireEvent.click(next);
    await waitFor(() => expect(focused()).toBe(35));
    expect(toggle('Later').getAttribute('aria-expanded')).toBe('true');
    fireEvent.click(next);
    await waitFor(() => expect(focused()).toBe(5));
    fireEvent.click(screen.getByRole('button', { name: 'Previous error' }));
    await waitFor(() => expect(focused()).toBe(35));
    expect(row(log, 35)?.classList.contains('line-error')).toBe(true);
    expect(row(log, 20)?.classList.contains('line-warning')).toBe(true);
  });

  test('a click on a gutter mark goes to its line', async () => {
    const { log } = await withErrors();
    fireEvent.click(screen.getByRole('button', { name: 'Warning at line 20' }));
    await waitFor(() =>
      expect(log.querySelector('.line-focus')?.getAttribute('data-line')).toBe('20'),
    );
  });
});
