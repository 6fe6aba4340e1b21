import { act, render, screen, waitFor, within } from '@testing-library/react';
import { describe, expect, test } from 'vitest';
import { TopicView } from '../src/TopicView.js';
import { fakeTail } from './fake-tail.js';

// The seed's IcebergMonitor tests, with the stream faked at the SDK's tail() boundary.

function icebergEvent(n: number, table = `prod.db.table${n}`, added = String(n * 100)) {
  return {
    eventId: `evt-${n}`,
    eventTimestamp: new Date(Date.UTC(2026, 0, 1, 12, 0, n)).toISOString(),
    tableIdentifier: table,
    eventType: 'COMMIT',
    payload: { operation: 'append', snapshotId: 1000 + n, summary: { 'added-records': added } },
  };
}

const status = () => screen.getByTestId('connection-status').textContent ?? '';

describe('TopicView (Iceberg)', () => {
  test('shows CONNECTING, then CONNECTED once the stream delivers', async () => {
    const fake = fakeTail();
    render(<TopicView topic="iceberg" tail={fake.tail} />);
    expect(status()).toContain('CONNECTING');
    expect(screen.getByText('Waiting for events...')).toBeTruthy();
    expect(fake.calls).toHaveLength(1);
    expect(fake.calls[0]?.target).toEqual({ topic: 'iceberg' });
    // History first: the last 50 entries, then live.
    expect(fake.calls[0]?.tail).toBe(50);

    act(() => fake.entry({ kind: 'iceberg-mutation', data: icebergEvent(1) }));
    await waitFor(() => expect(status()).toContain('CONNECTED'));
  });

  test('shows events as they arrive, newest first', async () => {
    const fake = fakeTail();
    render(<TopicView topic="iceberg" tail={fake.tail} />);
    act(() =>
      fake.entry({ kind: 'iceberg-mutation', data: icebergEvent(1, 'prod.db.table1', '1000') }),
    );
    expect(await screen.findByText('prod.db.table1')).toBeTruthy();
    expect(screen.getByText('1000')).toBeTruthy();

    act(() =>
      fake.entry({ kind: 'iceberg-mutation', data: icebergEvent(2, 'prod.db.table2', '500') }),
    );
    expect(await screen.findByText('prod.db.table2')).toBeTruthy();
    expect(screen.getByText('500')).toBeTruthy();
    expect(screen.queryByText('Waiting for events...')).toBeNull();

    const rows = within(screen.getByRole('table')).getAllByRole('row').slice(1);
    expect(rows.map((row) => row.querySelectorAll('td')[1]?.textContent)).toEqual([
      'prod.db.table2',
      'prod.db.table1',
    ]);
    const headers = screen.getAllByRole('columnheader').map((th) => th.textContent);
    expect(headers).toEqual(['Timestamp', 'Table', 'Operation', 'Records Added']);
    expect(rows[0]?.querySelectorAll('td')[0]?.textContent).toBe('2026-01-01T12:00:02.000Z');
    expect(rows[0]?.querySelectorAll('td')[2]?.textContent).toBe('append');
  });

  test('keeps at most 50 events, dropping the oldest', async () => {
    const fake = fakeTail();
    render(<TopicView topic="iceberg" tail={fake.tail} />);
    act(() => {
      for (let n = 1; n <= 55; n += 1)
        fake.entry({ kind: 'iceberg-mutation', data: icebergEvent(n) });
    });
    expect(await screen.findByText('prod.db.table55')).toBeTruthy();
    const rows = within(screen.getByRole('table')).getAllByRole('row').slice(1);
    expect(rows).toHaveLength(50);
    expect(rows[0]?.querySelectorAll('td')[1]?.textContent).toBe('prod.db.table55');
    expect(rows[49]?.querySelectorAll('td')[1]?.textContent).toBe('prod.db.table6');
    expect(screen.queryByText('prod.db.table5')).toBeNull();
  });

  test('shows DISCONNECTED when the stream fails', async () => {
    const fake = fakeTail();
    render(<TopicView topic="iceberg" tail={fake.tail} />);
    act(() => fake.fail(new Error('Connection failed')));
    await waitFor(() => expect(status()).toContain('DISCONNECTED'));
    expect(status()).toContain('Connection failed');
  });

  test('shows CONNECTING again while tail() reconnects', async () => {
    const fake = fakeTail();
    render(<TopicView topic="iceberg" tail={fake.tail} />);
    act(() => fake.entry({ kind: 'iceberg-mutation', data: icebergEvent(1) }));
    await waitFor(() => expect(status()).toContain('CONNECTED'));
    act(() =>
      fake.push({ type: 'reconnecting', attempt: 1, delayMs: 250, reason: 'the stream was cut' }),
    );
    await waitFor(() => expect(status()).toContain('CONNECTING'));
  });

  test('any other topic is a table of its events, with filters, under its own name', async () => {
    const fake = fakeTail();
    render(<TopicView topic="orders" tail={fake.tail} />);
    expect(screen.getByRole('heading', { level: 1 }).textContent).toBe('Topic orders');
    expect(fake.calls[0]).toMatchObject({ target: { topic: 'orders' }, tail: 50 });
    act(() => {
      fake.push({ type: 'open' });
      fake.entry({ kind: 'order-placed', step: 'eu', data: { id: 1 } });
      fake.entry({ kind: 'order-shipped', step: 'us', data: { id: 1 } });
    });
    const table = await screen.findByRole('table', { name: 'Events of topic orders' });
    await waitFor(() => expect(within(table).getAllByRole('row')).toHaveLength(3));
    expect(within(table).getAllByRole('row')[1]?.textContent).toContain('order-shipped');
    expect(screen.getByRole('combobox', { name: 'Kind' })).toBeTruthy();
    expect(screen.getByTestId('connection-state').textContent).toBe('Live');
  });
});
