import { act, fireEvent, render, screen, waitFor, within } from '@testing-library/react';
import { describe, expect, test } from 'vitest';
import { EVENTS_KEPT, RunView } from '../src/run/RunView.js';
import { fakeTail } from './fake-tail.js';

const table = () => screen.getByRole('table', { name: 'Run events' });
/** Kind and step of each row shown, top to bottom. */
const rows = () =>
  within(table())
    .getAllByRole('row')
    .slice(1)
    .map((row) => {
      const cells = within(row).getAllByRole('cell');
      return `${cells[1]?.textContent}/${cells[2]?.textContent}`;
    });
const count = () => screen.getByTestId('events-count').textContent;

describe('the events panel', () => {
  test('lists the run’s events newest first, and no log text', async () => {
    const fake = fakeTail();
    render(<RunView pipeline="p" runId="r" tail={fake.tail} />);
    act(() => {
      fake.entry({ kind: 'status', data: { status: 'running' } });
      fake.entry({ kind: 'log', text: 'just text\n' });
      fake.entry({ kind: 'metric', step: 'train', data: { loss: 0.25 } });
    });
    await waitFor(() => expect(count()).toBe('2 events'));
    expect(rows()).toEqual(['metric/train', 'status/—']);
    expect(within(table()).getByText('loss: 0.25')).toBeTruthy();
    expect(within(table()).queryByText(/just text/)).toBeNull();
  });

  test('says each event’s data in words: a status as its state, progress as a percentage, a flat object as pairs, the rest as JSON; the whole JSON on hover', async () => {
    const fake = fakeTail();
    render(<RunView pipeline="p" runId="r" tail={fake.tail} />);
    act(() => {
      fake.entry({ kind: 'status', data: { status: 'running' } });
      fake.entry({ kind: 'step', step: 'load', data: { state: 'failed', message: 'disk full' } });
      fake.entry({ kind: 'progress', step: 'load', data: { pct: 42.4 } });
      fake.entry({ kind: 'commit', data: { table: 'db.t', snapshot: 7, rows: [1, 2] } });
    });
    await waitFor(() => expect(count()).toBe('4 events'));
    const data = within(table())
      .getAllByRole('row')
      .slice(1)
      .map((row) => within(row).getAllByRole('cell')[3]!);
    expect(data.map((cell) => cell.textContent)).toEqual([
      '{"table":"db.t","snapshot":7,"rows":[1,2]}',
      '42 %',
      'failed: disk full',
      'running',
    ]);
    expect(data[3]!.getAttribute('title')).toBe('{"status":"running"}');
  });

  test('filters by kind, by step, and by both', async () => {
    const fake = fakeTail();
    render(<RunView pipeline="p" runId="r" tail={fake.tail} />);
    act(() => {
      fake.entry({ kind: 'progress', step: 'extract', data: { pct: 10 } });
      fake.entry({ kind: 'metric', step: 'extract', data: { rows: 5 } });
      fake.entry({ kind: 'progress', step: 'load', data: { pct: 90 } });
      fake.entry({ kind: 'metric', step: 'load', data: { rows: 7 } });
    });
    await waitFor(() => expect(count()).toBe('4 events'));
    const kind = screen.getByRole('combobox', { name: 'Kind' });
    const step = screen.getByRole('combobox', { name: 'Step' });
    // The choices are the kinds and steps seen.
    expect(
      within(kind)
        .getAllByRole('option')
        .map((o) => o.textContent),
    ).toEqual(['All kinds', 'metric', 'progress']);
    expect(
      within(step)
        .getAllByRole('option')
        .map((o) => o.textContent),
    ).toEqual(['All steps', 'extract', 'load']);

    fireEvent.change(kind, { target: { value: 'metric' } });
    expect(rows()).toEqual(['metric/load', 'metric/extract']);
    expect(count()).toBe('2 of 4 events');
    fireEvent.change(step, { target: { value: 'extract' } });
    expect(rows()).toEqual(['metric/extract']);
    fireEvent.change(kind, { target: { value: '' } });
    expect(rows()).toEqual(['metric/extract', 'progress/extract']);

    // A live event that passes the filters shows up; one that does not, does not.
    act(() => {
      fake.entry({ kind: 'metric', step: 'load', data: { rows: 9 } });
      fake.entry({ kind: 'warning', step: 'extract', data: { message: 'slow' } });
    });
    await waitFor(() => expect(count()).toBe('3 of 6 events'));
    expect(rows()).toEqual(['warning/extract', 'metric/extract', 'progress/extract']);

    fireEvent.change(kind, { target: { value: 'progress' } });
    fireEvent.change(step, { target: { value: 'load' } });
    expect(rows()).toEqual(['progress/load']);
  });

  test(`keeps the newest ${EVENTS_KEPT} events and says so`, async () => {
    const fake = fakeTail();
    render(<RunView pipeline="p" runId="r" tail={fake.tail} />);
    act(() => {
      for (let n = 1; n <= EVENTS_KEPT + 5; n += 1) fake.entry({ kind: 'tick', data: { n } });
    });
    await waitFor(() => expect(count()).toBe(`${EVENTS_KEPT} events (the latest ${EVENTS_KEPT})`));
    const data = within(table())
      .getAllByRole('row')
      .slice(1)
      .map((row) => within(row).getAllByRole('cell')[3]?.textContent);
    expect(data[0]).toBe(`n: ${EVENTS_KEPT + 5}`);
    expect(data.at(-1)).toBe('n: 6');
  });
});
