import { useState } from 'react';
import type { Entry } from '../../../src/model/entry.js';
import { summarizeEvent } from './event-summary.js';

const ALL = '';

function timeOf(iso: string): string {
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : date.toISOString().slice(11, 23);
}

/**
 * Events (a run's entries other than log text, or a topic's), newest first, with filters on kind
 * and step.
 * `kept` says how many the view holds: the oldest go first when it is full.
 */
export function EventsPanel({
  events,
  kept,
  label = 'Run events',
}: {
  events: readonly Entry[];
  kept: number;
  /** The table's accessible name. */
  label?: string;
}) {
  const [kind, setKind] = useState(ALL);
  const [step, setStep] = useState(ALL);
  const kinds = [...new Set(events.map((event) => event.kind))].sort();
  const steps = [...new Set(events.flatMap((event) => (event.step ? [event.step] : [])))].sort();
  const shown = events.filter(
    (event) => (kind === ALL || event.kind === kind) && (step === ALL || event.step === step),
  );
  return (
    <section className="events" aria-labelledby="events-heading">
      <h2 id="events-heading">Events</h2>
      <div className="events-filters">
        <label>
          Kind{' '}
          <select value={kind} onChange={(event) => setKind(event.target.value)}>
            <option value={ALL}>All kinds</option>
            {kinds.map((name) => (
              <option key={name} value={name}>
                {name}
              </option>
            ))}
          </select>
        </label>
        <label>
          Step{' '}
          <select value={step} onChange={(event) => setStep(event.target.value)}>
            <option value={ALL}>All steps</option>
            {steps.map((name) => (
              <option key={name} value={name}>
                {name}
              </option>
            ))}
          </select>
        </label>
        <span data-testid="events-count">
          {shown.length === events.length
            ? `${events.length} events`
            : `${shown.length} of ${events.length} events`}
          {events.length >= kept ? ` (the latest ${kept})` : ''}
        </span>
      </div>
      <div
        className="table-scroll events-scroll"
        tabIndex={0}
        role="region"
        aria-label={`${label}, scrollable`}
      >
        <table aria-label={label}>
          <thead>
            <tr>
              <th scope="col">Time</th>
              <th scope="col">Kind</th>
              <th scope="col">Step</th>
              <th scope="col">Data</th>
            </tr>
          </thead>
          <tbody>
            {shown.length === 0 ? (
              <tr>
                <td colSpan={4} className="empty">
                  {events.length === 0 ? 'No events yet.' : 'No events match the filters.'}
                </td>
              </tr>
            ) : (
              shown.map((event) => (
                <tr key={event.seq}>
                  <td>
                    <time dateTime={event.time}>{timeOf(event.time)}</time>
                  </td>
                  <td>{event.kind}</td>
                  <td>{event.step ?? '—'}</td>
                  <td
                    className="event-data"
                    title={event.data === undefined ? undefined : JSON.stringify(event.data)}
                  >
                    {summarizeEvent(event)}
                  </td>
                </tr>
              ))
            )}
          </tbody>
        </table>
      </div>
    </section>
  );
}
