import type { NewEvent, NewLog } from '../model/entry.js';
import { TailwaterError } from '../model/errors.js';
import type { Run, RunStatus, RunSummary } from '../model/run.js';
import { isTerminal } from '../model/run.js';
import type { RunUpdate, StreamBounds } from './store.js';
import { PAGE_META_BYTES } from './store.js';

/**
 * What every Store backend must decide the same way, whatever its SQL (docs/STORAGE.md): the
 * run lifecycle, producer-id de-duplication and how entries are numbered and placed in the log.
 * A backend reads its rows, asks these rules, and writes what they say; it holds no rule of its
 * own, so SQLite and PostgreSQL cannot drift apart.
 */

// ---- runs ---------------------------------------------------------------------------------

/** A run row's state as the rules see it (times in epoch milliseconds). */
export interface RunState {
  status: RunStatus;
  cancelRequested: boolean;
  startedAt: number | null;
  endedAt: number | null;
  /** `meta` as stored: its JSON text. */
  meta: string;
}

export interface RunTransition {
  next: RunState;
  /** Whether the row changes at all. */
  changed: boolean;
  /**
   * The `status` entry to write on the run's stream (and, with the run, on the runs feed): a
   * status change or a cancel request is news for viewers; `meta` alone is not.
   */
  statusEntry: string | undefined;
}

/**
 * What `update` (or a cancel request) makes of a run. A run starts `running` unless told
 * otherwise; `startedAt` is set once it leaves `queued`, `endedAt` once it reaches a terminal
 * status and never again; a terminal run never becomes non-terminal (TW_STATUS_CONFLICT).
 */
export function runTransition(
  runId: string,
  existing: RunState | undefined,
  update: RunUpdate,
  now: number,
  cancel: boolean,
): RunTransition {
  const status = update.status ?? existing?.status ?? 'running';
  if (existing && isTerminal(existing.status) && !isTerminal(status)) {
    throw new TailwaterError(
      'TW_STATUS_CONFLICT',
      `Run ${runId} already ended with status ${existing.status}; it cannot become ${status}.`,
    );
  }
  const meta = update.meta === undefined ? (existing?.meta ?? '{}') : JSON.stringify(update.meta);
  const startedAt = existing?.startedAt ?? (status === 'queued' ? null : now);
  const endedAt = !isTerminal(status)
    ? null
    : existing && isTerminal(existing.status)
      ? existing.endedAt
      : now;
  const next: RunState = {
    status,
    cancelRequested: (existing?.cancelRequested ?? false) || cancel,
    startedAt,
    endedAt,
    meta,
  };
  const changed =
    !existing ||
    existing.status !== status ||
    existing.meta !== meta ||
    existing.startedAt !== startedAt ||
    existing.endedAt !== endedAt ||
    existing.cancelRequested !== next.cancelRequested;
  const news = !existing || existing.status !== status || (cancel && !existing.cancelRequested);
  const statusEntry = !changed || !news ? undefined : statusEntryBody(status, cancel);
  return { next, changed, statusEntry };
}

function statusEntryBody(status: RunStatus, cancel: boolean): string {
  return JSON.stringify(cancel ? { status, cancelRequested: true } : { status });
}

/**
 * Whether a cancel request changes anything: an unknown run is TW_RUN_NOT_FOUND, an ended one
 * TW_STATUS_CONFLICT, and one whose cancel was already requested is left as it is.
 */
export function cancelNeeded(
  pipeline: string,
  runId: string,
  existing: RunState | undefined,
): boolean {
  if (!existing) throw runNotFound(pipeline, runId);
  if (isTerminal(existing.status)) {
    throw new TailwaterError(
      'TW_STATUS_CONFLICT',
      `Run ${runId} already ended with status ${existing.status}; there is nothing to cancel.`,
    );
  }
  return !existing.cancelRequested;
}

/** The runs feed's copy of a run: the run without its `meta`, which can be large. */
export function runsFeedBody(run: Run): string {
  const { meta: _meta, ...summary } = run;
  return JSON.stringify(summary satisfies RunSummary);
}

/**
 * A deleted run leaves one entry on its stream, after every entry it had: a `status` entry with
 * `deleted: true` (its tombstone). Viewers that reach it are told the rest is gone and the stream
 * is over (engine/subscription.ts); the stream row stays, so a seq never goes back for the key.
 */
export function tombstoneBody(run: Run): string {
  return JSON.stringify({ status: run.status, deleted: true });
}

/** The runs feed's news of a deletion: the run as it was, and `deleted: true`. */
export function deletedFeedBody(run: Run): string {
  const { meta: _meta, ...summary } = run;
  return JSON.stringify({ ...(summary satisfies RunSummary), deleted: true });
}

export function runNotFound(pipeline: string, runId: string): TailwaterError {
  return new TailwaterError('TW_RUN_NOT_FOUND', `No run ${runId} of pipeline ${pipeline}.`);
}

// ---- entries ------------------------------------------------------------------------------

/** An entry about to be stored, before its seq is known. */
export interface PendingEntry {
  kind: string;
  step?: string | undefined;
  correlationId?: string | undefined;
  id?: string | undefined;
  /** Log text, or the JSON of `data`. */
  body: string;
  isLog: boolean;
  /** `extra` as its JSON text. */
  extra?: string | undefined;
}

/** A stored entry as the rules see it. */
export interface StoredEntry extends PendingEntry {
  seq: number;
  /** Its byte offset in the log, for log text. */
  logOffset?: number | undefined;
}

export function pendingEvent(event: NewEvent): PendingEntry {
  return {
    kind: event.kind,
    step: event.step,
    correlationId: event.correlationId,
    id: event.id,
    body: event.dataJson ?? JSON.stringify(event.data ?? null),
    isLog: false,
    extra: event.extra === undefined ? undefined : JSON.stringify(event.extra),
  };
}

export function pendingLog(chunk: NewLog, kind: string): PendingEntry {
  return { kind, step: chunk.step, id: chunk.id, body: chunk.text, isLog: true };
}

/** Whether a retried entry is the one stored under its producer id. */
export function samePending(a: PendingEntry, b: PendingEntry): boolean {
  return (
    a.isLog === b.isLog &&
    a.kind === b.kind &&
    a.step === b.step &&
    a.correlationId === b.correlationId &&
    a.body === b.body &&
    a.extra === b.extra
  );
}

/**
 * Seqs and log offsets, handed out in order from a stream's last seq and log length: seqs are
 * gapless, and each log entry starts where the log ended. A backend calls it inside the
 * transaction that holds the stream's row (or lock), so no other writer numbers meanwhile.
 */
/**
 * The time of entries appended at `now` to a stream whose newest entry has `lastTime`: never
 * earlier, so time never goes back within a stream when a clock does (a replica whose clock is
 * behind, a clock stepped back).
 */
export function entryTime(now: number, lastTime: number): number {
  return Math.max(now, lastTime);
}

/**
 * Numbers a stream's new entries: each its seq, and each log chunk where it begins in the log,
 * in bytes (`logOffset`) and in line feeds before it (`logLine`: the chunk's first byte is on
 * line `logLine + 1`), which is how a line is found by its number (docs/API.md, `?lines=`).
 */
export class Numbering {
  constructor(
    public lastSeq: number,
    public logBytes: number,
    public logLines: number,
  ) {}

  next(entry: PendingEntry): { seq: number; logOffset: number | null; logLine: number | null } {
    this.lastSeq += 1;
    if (!entry.isLog) return { seq: this.lastSeq, logOffset: null, logLine: null };
    const logOffset = this.logBytes;
    const logLine = this.logLines;
    this.logBytes += Buffer.byteLength(entry.body, 'utf8');
    this.logLines += lineFeeds(entry.body);
    return { seq: this.lastSeq, logOffset, logLine };
  }
}

/** How many line feeds `text` holds. */
export function lineFeeds(text: string): number {
  let count = 0;
  for (let at = text.indexOf('\n'); at !== -1; at = text.indexOf('\n', at + 1)) count += 1;
  return count;
}

/** A stream's counters as both stores' `streams` rows name them. */
export interface StreamCounters {
  first_seq: number;
  last_seq: number;
  log_bytes: number;
  log_lines: number;
}

/** A stream's bounds from its row, or those of a stream never written. */
export function boundsOf(row: StreamCounters | undefined, epoch: string): StreamBounds {
  if (!row) return { firstSeq: 1, lastSeq: 0, logBytes: 0, logLines: 0, epoch };
  return {
    firstSeq: row.first_seq,
    lastSeq: row.last_seq,
    logBytes: row.log_bytes,
    logLines: row.log_lines,
    epoch,
  };
}

/** What a store keeps of the log chunk that holds a line feed, to find where a line begins. */
export interface LineChunk {
  logOffset: number;
  /** Line feeds in the log before the chunk. */
  logLine: number;
  body: string;
}

/**
 * Where line `line` (1-based) of a log of `logBytes` bytes and `logLines` line feeds begins, in
 * bytes, or undefined when the log has no such line (a log that ends with a line feed has no
 * line after it). `chunkBefore(n)` is the last chunk with fewer than `n` line feeds before it:
 * the one that holds the n-th. Both stores find lines so (store contract: "log lines").
 */
export async function lineStart(
  line: number,
  logBytes: number,
  logLines: number,
  chunkBefore: (feeds: number) => Promise<LineChunk | undefined>,
): Promise<number | undefined> {
  const feeds = line - 1;
  if (!Number.isSafeInteger(feeds) || feeds < 0 || feeds > logLines) return undefined;
  if (feeds === 0) return logBytes > 0 ? 0 : undefined;
  const chunk = await chunkBefore(feeds);
  if (!chunk) return undefined;
  let at = -1;
  for (let n = chunk.logLine; n < feeds; n += 1) {
    at = chunk.body.indexOf('\n', at + 1);
    if (at === -1) return undefined;
  }
  if (at === -1) return undefined;
  const start = chunk.logOffset + Buffer.byteLength(chunk.body.slice(0, at + 1), 'utf8');
  return start < logBytes ? start : undefined;
}

/** How a batch of events splits into new entries and retries of stored (or earlier) ones. */
export interface BatchPlan {
  /** The events to store, in order, and the batch index of each. */
  fresh: PendingEntry[];
  freshIndex: number[];
  /** Per event: the stored seq of a retry, or `-1 - i` for a repeat of the batch's event i. */
  known: Array<number | undefined>;
  size: number;
  duplicates: number;
}

/**
 * Sorts a batch out by producer id: an id already stored (looked up with `stored`) or earlier in
 * the batch is a retry if the event is the same, and a conflict (TW_ID_CONFLICT, nothing stored)
 * if it is not.
 */
export function planEventBatch(
  events: readonly NewEvent[],
  stored: (id: string) => StoredEntry | undefined,
): BatchPlan {
  const plan: BatchPlan = {
    fresh: [],
    freshIndex: [],
    known: new Array<number | undefined>(events.length),
    size: events.length,
    duplicates: 0,
  };
  const idsInBatch = new Map<string, number>();
  events.forEach((event, index) => {
    const pending = pendingEvent(event);
    if (event.id !== undefined) {
      const original = stored(event.id);
      const earlier = idsInBatch.get(event.id);
      if (original || earlier !== undefined) {
        const twin = original ?? plan.fresh[plan.freshIndex.indexOf(earlier!)]!;
        if (!samePending(twin, pending)) throw idConflict(index, event.id, original?.seq);
        plan.duplicates += 1;
        plan.known[index] = original ? original.seq : -1 - earlier!;
        return;
      }
      idsInBatch.set(event.id, index);
    }
    plan.freshIndex.push(index);
    plan.fresh.push(pending);
  });
  return plan;
}

/** Every event's seq, once the fresh ones are numbered (`assigned`, in the order of `fresh`). */
export function batchSeqs(plan: BatchPlan, assigned: readonly number[]): number[] {
  const seqs = Array.from({ length: plan.size }, (_, index) => plan.known[index] ?? 0);
  plan.freshIndex.forEach((index, i) => (seqs[index] = assigned[i]!));
  // A repeat within the batch points at its earlier twin, now numbered.
  seqs.forEach((seq, index) => {
    if (seq < 0) seqs[index] = seqs[-1 - seq]!;
  });
  return seqs;
}

function idConflict(index: number, id: string, seq: number | undefined): TailwaterError {
  const where = seq === undefined ? 'earlier in this batch' : `(seq ${seq})`;
  return new TailwaterError(
    'TW_ID_CONFLICT',
    `events[${index}]: the id "${id}" was already used ${where} for a different event; a retry must send the same event.`,
  );
}

/**
 * A log append whose producer id is stored already (on its first entry, `rows[0]`, followed by
 * the rest of that append): a retry if it stored the same text in the same pieces with the same
 * step, and a conflict otherwise.
 */
export function checkLogRetry(rows: readonly StoredEntry[], chunks: readonly NewLog[]): void {
  const same =
    rows.length === chunks.length &&
    rows.every(
      (row, index) =>
        row.isLog && row.body === chunks[index]!.text && row.step === chunks[index]!.step,
    );
  if (!same) {
    throw new TailwaterError(
      'TW_ID_CONFLICT',
      `The id "${chunks[0]!.id}" was already used (seq ${rows[0]?.seq}) for something else; an append with a producer id must be retried with the same text.`,
    );
  }
}

// ---- pages --------------------------------------------------------------------------------

/** A runs page cursor is a run's position in creation order. */
export function parsePosition(cursor: string): number {
  if (!/^\d{1,15}$/.test(cursor)) {
    throw new TailwaterError(
      'TW_BAD_CURSOR',
      `The page cursor "${cursor}" is not one this server gave.`,
    );
  }
  return Number(cursor);
}

/** Where a page of runs ordered by creation time stopped: that run's time and position. */
export interface TimePosition {
  createdAt: number;
  position: number;
}

/** The cursor of a page of runs bounded by time (`since`/`until`): `t<createdAt>.<position>`. */
export function timeCursor(at: TimePosition): string {
  return `t${at.createdAt}.${at.position}`;
}

export function parseTimePosition(cursor: string): TimePosition {
  const match = /^t(\d{1,15})\.(\d{1,15})$/.exec(cursor);
  if (!match) {
    throw new TailwaterError(
      'TW_BAD_CURSOR',
      `The page cursor "${cursor}" is not one this server gave.`,
    );
  }
  return { createdAt: Number(match[1]), position: Number(match[2]) };
}

/**
 * The first key a page of runs bounded by time reads below: the cursor's, or (for the first
 * page) just under `until`, since every position is above 0.
 */
export function timePageStart(after: string | undefined, until: number | undefined): TimePosition {
  if (after !== undefined) return parseTimePosition(after);
  return { createdAt: until ?? Number.MAX_SAFE_INTEGER, position: 0 };
}

/** A pipeline glob or name filter as the stores' listings take it; undefined when it is none. */
export function pipelineNameFilter(name: string | undefined): string | undefined {
  return name === undefined || name === '' || name === '*' ? undefined : name;
}

/**
 * Up to `limit` rows, stepping through them (never fetching more than it keeps), stopping early
 * once they weigh PAGE_META_BYTES; `more` says whether a row was left.
 */
export function takePage<T>(
  rows: IterableIterator<T>,
  limit: number,
  weight: (row: T) => number,
): { items: T[]; more: boolean } {
  const items: T[] = [];
  let bytes = 0;
  for (const row of rows) {
    if (items.length === limit || (items.length > 0 && bytes >= PAGE_META_BYTES)) {
      rows.return?.();
      return { items, more: true };
    }
    bytes += weight(row);
    items.push(row);
  }
  return { items, more: false };
}
