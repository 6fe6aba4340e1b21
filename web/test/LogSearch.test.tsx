import { act, fireEvent, render, screen, waitFor } from '@testing-library/react';
import { describe, expect, test } from 'vitest';
import { RunView } from '../src/run/RunView.js';
import { fakeTail } from './fake-tail.js';
import { geometry, lines, renderedLines } from './log-helpers.js';

const searchBox = () => screen.getByRole('searchbox', { name: 'Search the log' });
const count = () => screen.getByTestId('search-count').textContent;
const marks = (log: HTMLElement) => [...log.querySelectorAll('mark')].map((m) => m.textContent);
const activeMark = (log: HTMLElement) => log.querySelector('mark.match-active');

describe('search in the loaded log', () => {
  test('counts the matches, ignoring case, and highlights them', async () => {
    const fake = fakeTail();
    render(<RunView pipeline="p" runId="r" tail={fake.tail} />);
    act(() =>
      fake.entry({ kind: 'log', text: 'Loading orders\nno match here\nloading LOADING\n' }),
    );
    await screen.findByText('no match here');
    fireEvent.change(searchBox(), { target: { value: 'loading' } });
    await waitFor(() => expect(count()).toBe('1 of 3'));
    const log = screen.getByTestId('log');
    expect(marks(log)).toEqual(['Loading', 'loading', 'LOADING']);
    expect(activeMark(log)?.textContent).toBe('Loading');
    // The text around the marks is still all there.
    expect(renderedLines(log)).toEqual(['Loading orders', 'no match here', 'loading LOADING']);
  });

  test('Enter, Shift+Enter and the buttons move between matches, wrapping around', async () => {
    const fake = fakeTail();
    render(<RunView pipeline="p" runId="r" tail={fake.tail} />);
    act(() => fake.entry({ kind: 'log', text: 'a1 x\nb2\na3 x\nx\n' }));
    await screen.findByText('b2');
    fireEvent.change(searchBox(), { target: { value: 'x' } });
    await waitFor(() => expect(count()).toBe('1 of 3'));
    fireEvent.keyDown(searchBox(), { key: 'Enter' });
    await waitFor(() => expect(count()).toBe('2 of 3'));
    const log = screen.getByTestId('log');
    expect(activeMark(log)?.closest('.log-line')?.getAttribute('data-index')).toBe('2');
    fireEvent.click(screen.getByRole('button', { name: 'Next match' }));
    await waitFor(() => expect(count()).toBe('3 of 3'));
    fireEvent.click(screen.getByRole('button', { name: 'Next match' }));
    await waitFor(() => expect(count()).toBe('1 of 3'));
    fireEvent.keyDown(searchBox(), { key: 'Enter', shiftKey: true });
    await waitFor(() => expect(count()).toBe('3 of 3'));
    fireEvent.click(screen.getByRole('button', { name: 'Previous match' }));
    await waitFor(() => expect(count()).toBe('2 of 3'));
  });

  test('finds text in coloured lines and highlights it across the colour spans', async () => {
    const fake = fakeTail();
    render(<RunView pipeline="p" runId="r" tail={fake.tail} />);
    act(() => fake.entry({ kind: 'log', text: '\u001b[31mERR\u001b[0mOR: disk full\n' }));
    await screen.findByText('ERR');
    fireEvent.change(searchBox(), { target: { value: 'error' } });
    await waitFor(() => expect(count()).toBe('1 of 1'));
    const log = screen.getByTestId('log');
    // One match split over the red span and the plain one, both marked, no escape codes.
    expect(marks(log)).toEqual(['ERR', 'OR']);
    expect((log.querySelector('mark')?.parentElement as HTMLElement).style.color).toBe(
      'rgb(241, 76, 76)',
    );
    expect(renderedLines(log)).toEqual(['ERROR: disk full']);
  });

  test('counts matches in lines that arrive while searching', async () => {
    const fake = fakeTail();
    render(<RunView pipeline="p" runId="r" tail={fake.tail} />);
    act(() => fake.entry({ kind: 'log', text: 'step one failed\n' }));
    await screen.findByText('step one failed');
    fireEvent.change(searchBox(), { target: { value: 'failed' } });
    await waitFor(() => expect(count()).toBe('1 of 1'));
    act(() => fake.entry({ kind: 'log', text: 'step two failed\n' }));
    await waitFor(() => expect(count()).toBe('1 of 2'));
  });

  test('says when nothing matches, and Escape clears the search', async () => {
    const fake = fakeTail();
    render(<RunView pipeline="p" runId="r" tail={fake.tail} />);
    act(() => lines(fake, 1, 3));
    await screen.findByText('line 3');
    fireEvent.change(searchBox(), { target: { value: 'zebra' } });
    await waitFor(() => expect(count()).toBe('No matches'));
    expect(screen.getByRole('button', { name: 'Next match' })).toHaveProperty('disabled', true);
    fireEvent.keyDown(searchBox(), { key: 'Escape' });
    await waitFor(() => expect(searchBox()).toHaveProperty('value', ''));
    expect(count()).toBe('');
    expect(marks(screen.getByTestId('log'))).toEqual([]);
  });

  test('showing a match scrolls to it and pauses follow; Jump to latest resumes it', async () => {
    const fake = fakeTail();
    render(<RunView pipeline="p" runId="r" tail={fake.tail} />);
    const log = screen.getByTestId('log');
    const box = geometry(log, 1000 * 20);
    act(() => lines(fake, 1, 1000));
    await waitFor(() => expect(log.scrollTop).toBe(1000 * 20 - 400));
    expect(screen.getByTestId('follow-state').textContent).toBe('Following');

    fireEvent.change(searchBox(), { target: { value: 'line 150' } });
    await waitFor(() => expect(count()).toBe('1 of 1'));
    expect(screen.getByTestId('follow-state').textContent).toBe('Paused');
    // Line 150 (index 149) is brought to the middle of the view, and rendered marked.
    await waitFor(() => expect(activeMark(log)?.textContent).toBe('line 150'));
    expect(Math.abs(log.scrollTop - (149 * 20 - 200 + 10))).toBeLessThanOrEqual(20);

    // New lines do not pull the view away from the match.
    box.scrollHeight = 1100 * 20;
    act(() => lines(fake, 1001, 1100));
    await waitFor(() =>
      expect((log.firstElementChild as HTMLElement).style.height).toBe(`${1100 * 20}px`),
    );
    expect(activeMark(log)?.textContent).toBe('line 150');

    fireEvent.click(screen.getByRole('button', { name: 'Jump to latest' }));
    await waitFor(() => expect(log.scrollTop).toBe(1100 * 20 - 400));
    expect(screen.getByTestId('follow-state').textContent).toBe('Following');
  });

  test('/ on the page puts the cursor in the search box, but not while typing elsewhere', async () => {
    const fake = fakeTail();
    render(<RunView pipeline="p" runId="r" tail={fake.tail} />);
    act(() => fake.entry({ kind: 'progress', step: 'load', data: { pct: 5 } }));
    screen.getByTestId('log').focus();
    expect(fireEvent.keyDown(screen.getByTestId('log'), { key: '/' })).toBe(false);
    expect(document.activeElement).toBe(searchBox());
    // In another field, / is just a character.
    const kind = await screen.findByRole('combobox', { name: 'Kind' });
    kind.focus();
    expect(fireEvent.keyDown(kind, { key: '/' })).toBe(true);
    expect(document.activeElement).toBe(kind);
  });
});
