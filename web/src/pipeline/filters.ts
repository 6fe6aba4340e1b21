import { RUN_STATUSES } from '../../../src/client/index.js';
import type { RunStatus } from '../../../src/model/run.js';
import type { Run } from '../../../src/model/run.js';

/** The pipeline page's filters: a status, and days (`YYYY-MM-DD`, local) from and to, inclusive. */
export interface RunFilters {
  status: RunStatus | '';
  from: string;
  to: string;
}

export const NO_FILTERS: RunFilters = { status: '', from: '', to: '' };

export function isStatus(value: string): value is RunStatus {
  return (RUN_STATUSES as readonly string[]).includes(value);
}

/** Local midnight of a `YYYY-MM-DD` day, `days` later, as epoch ms; null when not a day. */
function dayStart(day: string, days = 0): number | null {
  const match = /^(\d{4})-(\d{2})-(\d{2})$/.exec(day);
  if (!match) return null;
  return new Date(Number(match[1]), Number(match[2]) - 1, Number(match[3]) + days).getTime();
}

/** The API's `since`/`until` (ISO times) for the days chosen: `to` takes in its whole day. */
export function timeBounds(filters: RunFilters): { since?: string; until?: string } {
  const since = dayStart(filters.from);
  const until = dayStart(filters.to, 1);
  return {
    ...(since === null ? {} : { since: new Date(since).toISOString() }),
    ...(until === null ? {} : { until: new Date(until).toISOString() }),
  };
}

/** Whether a run the feed tells of belongs in the listing these filters ask for. */
export function matchesFilters(run: Run, filters: RunFilters): boolean {
  if (filters.status !== '' && run.status !== filters.status) return false;
  const { since, until } = timeBounds(filters);
  const created = Date.parse(run.createdAt);
  if (since !== undefined && created < Date.parse(since)) return false;
  if (until !== undefined && created >= Date.parse(until)) return false;
  return true;
}

/** The filters an address holds (`?status=failed&from=2026-11-01&to=2026-11-30`). */
export function filtersOf(search: string): RunFilters {
  const query = new URLSearchParams(search);
  const status = query.get('status') ?? '';
  const day = (name: string) => {
    const value = query.get(name) ?? '';
    return /^\d{4}-\d{2}-\d{2}$/.test(value) ? value : '';
  };
  return { status: isStatus(status) ? status : '', from: day('from'), to: day('to') };
}

/** The address's query for the filters: only those set, so no filter is no query at all. */
export function searchOf(filters: RunFilters): string {
  const query = new URLSearchParams();
  if (filters.status !== '') query.set('status', filters.status);
  if (filters.from !== '') query.set('from', filters.from);
  if (filters.to !== '') query.set('to', filters.to);
  const text = query.toString();
  return text === '' ? '' : `?${text}`;
}
