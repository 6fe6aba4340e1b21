import type { Entry } from '../model/entry.js';
import { RAW_DATA } from '../model/entry.js';
import type { StoredEntry } from './rules.js';

/**
 * An entry as both backends' `entries` tables hold it (their columns are named alike), and how
 * it becomes an Entry for readers and a StoredEntry for the rules.
 */
export interface EntryRow {
  seq: number;
  time: number;
  kind: string;
  step: string | null;
  correlation_id: string | null;
  producer_id: string | null;
  log_offset: number | null;
  body: string;
  extra: string | null;
}

/** An entry row as the rules see it. */
export function storedFromRow(row: EntryRow): StoredEntry {
  return {
    seq: row.seq,
    kind: row.kind,
    step: row.step ?? undefined,
    correlationId: row.correlation_id ?? undefined,
    id: row.producer_id ?? undefined,
    body: row.body,
    isLog: row.log_offset !== null,
    logOffset: row.log_offset ?? undefined,
    extra: row.extra ?? undefined,
  };
}

export function entryFromRow(row: EntryRow): Entry {
  const entry: Entry = { seq: row.seq, time: new Date(row.time).toISOString(), kind: row.kind };
  if (row.log_offset !== null) {
    entry.offset = row.log_offset;
    entry.text = row.body;
  } else {
    entry.data = JSON.parse(row.body);
    // Not enumerable: the entry stays a plain value for comparisons and copies.
    Object.defineProperty(entry, RAW_DATA, { value: row.body });
  }
  if (row.step !== null) entry.step = row.step;
  if (row.correlation_id !== null) entry.correlationId = row.correlation_id;
  if (row.producer_id !== null) entry.id = row.producer_id;
  if (row.extra !== null) entry.extra = JSON.parse(row.extra) as Record<string, unknown>;
  return entry;
}
