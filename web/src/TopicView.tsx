import { useCallback, useState } from 'react';
import type { Entry } from '../../src/model/entry.js';
import { NotAllowed } from './auth.js';
import { ConnectionStateBadge, SeedConnectionBadge } from './connection.js';
import { EventsPanel } from './run/EventsPanel.js';
import { defaultTail, useTail } from './stream.js';
import type { TailEvent, TailFn } from './stream.js';

/** The seed's Iceberg mutation event, as producers send it. */
export interface IcebergEvent {
  eventId?: string;
  eventTimestamp?: string;
  tableIdentifier?: string;
  eventType?: string;
  payload?: {
    operation?: string;
    snapshotId?: number;
    summary?: Record<string, string>;
  };
}

export const MAX_EVENTS_TO_DISPLAY = 50;

function formatTimestamp(value: string | undefined, fallback: string): string {
  const date = new Date(value ?? fallback);
  return Number.isNaN(date.getTime()) ? (value ?? fallback) : date.toISOString();
}

/** The seed's IcebergMonitor table: Timestamp | Table | Operation | Records Added. */
function IcebergTable({ entries, max }: { entries: readonly Entry[]; max: number }) {
  return (
    // Focusable, so a keyboard can scroll it too.
    <div className="table-scroll" tabIndex={0} role="region" aria-label="Table commits">
      <table>
        <caption className="visually-hidden">Newest first, at most {max} events</caption>
        <thead>
          <tr>
            <th scope="col">Timestamp</th>
            <th scope="col">Table</th>
            <th scope="col">Operation</th>
            <th scope="col">Records Added</th>
          </tr>
        </thead>
        <tbody>
          {entries.length === 0 ? (
            <tr>
              <td colSpan={4} className="empty">
                Waiting for events...
              </td>
            </tr>
          ) : (
            entries.map((entry) => {
              const event = (entry.data ?? {}) as IcebergEvent;
              return (
                <tr key={entry.seq}>
                  <td>{formatTimestamp(event.eventTimestamp, entry.time)}</td>
                  <td>{event.tableIdentifier ?? '—'}</td>
                  <td>{event.payload?.operation ?? entry.kind}</td>
                  <td>{event.payload?.summary?.['added-records'] || 'N/A'}</td>
                </tr>
              );
            })
          )}
        </tbody>
      </table>
    </div>
  );
}

/**
 * A topic's feed, newest first, capped at 50: the last 50 entries from history, then live.
 * `iceberg` is the seed's IcebergMonitor (its table and its "Connection Status" line); any other
 * topic is a table of its events with kind and step filters, and the connection state in words.
 */
export function TopicView({
  topic,
  tail = defaultTail,
  max = MAX_EVENTS_TO_DISPLAY,
}: {
  topic: string;
  tail?: TailFn;
  max?: number;
}) {
  const [entries, setEntries] = useState<Entry[]>([]);
  const onEvent = useCallback(
    (event: TailEvent) => {
      if (event.type === 'gap' && event.gap.reason === 'reset') setEntries([]);
      if (event.type !== 'entry') return;
      setEntries((previous) => [event.entry, ...previous].slice(0, max));
    },
    [max],
  );
  const { state, resume } = useTail(
    tail,
    `topic:${topic}`,
    { target: { topic }, tail: max },
    onEvent,
  );

  return (
    <section className="topic-view">
      <h1>{topic === 'iceberg' ? 'Apache Iceberg Real-time Mutations' : `Topic ${topic}`}</h1>
      {state.phase === 'forbidden' ? (
        <NotAllowed what={`topic ${topic}`} detail={state.error} />
      ) : topic === 'iceberg' ? (
        <>
          <SeedConnectionBadge state={state} />
          <IcebergTable entries={entries} max={max} />
        </>
      ) : (
        <>
          <ConnectionStateBadge state={state} onResume={resume} />
          <EventsPanel events={entries} kept={max} label={`Events of topic ${topic}`} />
        </>
      )}
    </section>
  );
}
