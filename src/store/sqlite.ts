import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import type { Entry, NewEvent, NewLog } from '../model/entry.js';
import { LOG_KIND } from '../model/names.js';
import { pipelineId } from '../model/pipeline-id.js';
import { SLICE_MS, TimeSlice } from '../model/time-slice.js';
import type { PipelineSummary, Run, RunStatus } from '../model/run.js';
import type { StreamKey } from '../model/stream-key.js';
import { runKey, streamId, topicKey } from '../model/stream-key.js';
import { WalCheckpointer } from './sqlite-checkpointer.js';
import type { Lease, LeaseStore } from './lease.js';
import { LocalLeases } from './lease.js';
import { SCHEMA, addLogLines } from './sqlite-schema.js';
import { globToSqliteGlob } from './search-sql.js';
import { SEARCH_SCHEMA, SqliteSearch, addSearchColumn } from './sqlite-search.js';
import { SEAL_SCHEMA, SqliteSealCatalog, addSealColumn } from './sqlite-seal-catalog.js';
import type { RunToSeal, SealCatalog, SealRow, SealedRun, SegmentRecord } from './seal-catalog.js';
import type { SealedDocument } from './segment-format.js';
import type {
  AppendEventsResult,
  AppendLogResult,
  IndexLimits,
  IndexResult,
  ListPipelinesRequest,
  ListRunsRequest,
  LogChunk,
  LogChunkPosition,
  Page,
  PageRequest,
  PipelineStats,
  PutRunResult,
  ReadEntriesOptions,
  RunUpdate,
  SearchDocument,
  SearchDocumentsRequest,
  SearchIndexStatus,
  Store,
  StorageBytes,
  StreamBounds,
  TrimPolicy,
  TrimResult,
  Written,
} from './store.js';
import { RUNS_FEED_TOPIC } from './store.js';
import type { PendingEntry, RunState } from './rules.js';
import type { EntryRow } from './entry-row.js';
import { entryFromRow, storedFromRow } from './entry-row.js';
import {
  batchSeqs,
  cancelNeeded,
  takePage,
  checkLogRetry,
  entryTime,
  Numbering,
  boundsOf,
  lineStart,
  deletedFeedBody,
  pendingLog,
  planEventBatch,
  runNotFound,
  runsFeedBody,
  tombstoneBody,
  runTransition,
  parsePosition,
  pipelineNameFilter,
  timeCursor,
  timePageStart,
} from './rules.js';

export interface SqliteStoreOptions {
  /** `normal` (default): durable against a process crash. `full`: also against power loss. */
  synchronous?: 'normal' | 'full';
}

interface StreamRow {
  id: number;
  last_seq: number;
  first_seq: number;
  log_bytes: number;
  log_lines: number;
}

interface RunRow {
  id: string;
  pipeline: string;
  run_id: string;
  stream_id: number;
  status: RunStatus;
  cancel_requested: number;
  created_at: number;
  started_at: number | null;
  ended_at: number | null;
  meta: string;
  last_seq: number;
  log_bytes: number;
  position: number;
}

/** The body of a write transaction: it yields between rows, where the write may pause. */
type WriteBody<T> = () => Generator<void, T, void>;

const TRIM_ROWS_PER_TRANSACTION = 10_000;

const RUN_COLUMNS = `r.id, r.pipeline, r.run_id, r.stream_id, r.status, r.cancel_requested, r.created_at,
  r.started_at, r.ended_at, r.meta, s.last_seq, s.log_bytes, r.rowid AS position`;
const ENTRY_COLUMNS = `seq, time, kind, step, correlation_id, producer_id, log_offset, body, extra`;

/**
 * Every query that reads, by name. Each is an index search bounded by what it returns (the
 * plans are checked in sqlite.test.ts): SQLite would otherwise prefer walking the primary key
 * for `ORDER BY seq`, which on a long stream is a scan, hence the INDEXED BY.
 */
export const READ_SQL = {
  streamByKey: 'SELECT id, last_seq, first_seq, log_bytes, log_lines FROM streams WHERE key = ?',
  streamById: 'SELECT id, last_seq, first_seq, log_bytes, log_lines FROM streams WHERE id = ?',
  entryByProducerId: `SELECT ${ENTRY_COLUMNS} FROM entries WHERE stream_id = ? AND producer_id = ?`,
  readEntries: `SELECT ${ENTRY_COLUMNS} FROM entries WHERE stream_id = ? AND seq > ? ORDER BY seq LIMIT ?`,
  /** Entries of one kind other than log text, after a cursor. */
  kindAfter: `SELECT ${ENTRY_COLUMNS} FROM entries INDEXED BY entries_kind
    WHERE stream_id = ? AND kind = ? AND log_offset IS NULL AND seq > ? ORDER BY seq`,
  /** Entries other than log text, after a cursor. */
  withoutLogAfter: `SELECT ${ENTRY_COLUMNS} FROM entries INDEXED BY entries_without_log
    WHERE stream_id = ? AND log_offset IS NULL AND seq > ? ORDER BY seq LIMIT ?`,
  /** Log entries from a byte offset on. */
  logFrom: `SELECT ${ENTRY_COLUMNS} FROM entries INDEXED BY entries_log_offset
    WHERE stream_id = ? AND log_offset >= ? ORDER BY log_offset`,
  kindNewestFirst: `SELECT seq FROM entries INDEXED BY entries_kind
    WHERE stream_id = ? AND kind = ? AND log_offset IS NULL ORDER BY seq DESC`,
  logNewestFirst: `SELECT seq FROM entries INDEXED BY entries_log_offset
    WHERE stream_id = ? AND log_offset IS NOT NULL ORDER BY log_offset DESC`,
  firstLogAtOrAfter: `SELECT seq, log_offset FROM entries INDEXED BY entries_log_offset
    WHERE stream_id = ? AND log_offset >= ? ORDER BY log_offset LIMIT 1`,
  logRange: `SELECT seq, log_offset, body, time, step FROM entries INDEXED BY entries_log_offset
    WHERE stream_id = ? AND log_offset >= ? AND log_offset < ? ORDER BY log_offset`,
  /** The last log chunk with fewer than ? line feeds before it: the one that holds that one. */
  lineChunk: `SELECT log_offset, log_line, body FROM entries INDEXED BY entries_log_line
    WHERE stream_id = ? AND log_offset IS NOT NULL AND log_line < ?
    ORDER BY log_line DESC, seq DESC LIMIT 1`,
  logChunkStartBefore: `SELECT max(log_offset) AS start FROM entries
    WHERE stream_id = ? AND log_offset IS NOT NULL AND log_offset <= ?`,
  nthLatest: 'SELECT seq FROM entries WHERE stream_id = ? ORDER BY seq DESC LIMIT 1 OFFSET ?',
  timeAtOrAfter:
    'SELECT seq, time FROM entries WHERE stream_id = ? AND seq >= ? ORDER BY seq LIMIT 1',
  getRun: `SELECT ${RUN_COLUMNS} FROM runs r JOIN streams s ON s.id = r.stream_id
    WHERE r.pipeline = ? AND r.run_id = ?`,
  latestRun: `SELECT ${RUN_COLUMNS} FROM pipelines p JOIN runs r ON r.id = p.last_run
    JOIN streams s ON s.id = r.stream_id WHERE p.fqn = ?`,
  listRuns: `SELECT ${RUN_COLUMNS} FROM runs r INDEXED BY runs_by_pipeline
    JOIN streams s ON s.id = r.stream_id
    WHERE r.pipeline = ? AND r.rowid < ? ORDER BY r.rowid DESC LIMIT ?`,
  listRunsByStatus: `SELECT ${RUN_COLUMNS} FROM runs r INDEXED BY runs_by_status
    JOIN streams s ON s.id = r.stream_id
    WHERE r.pipeline = ? AND r.status = ? AND r.rowid < ? ORDER BY r.rowid DESC LIMIT ?`,
  /** Runs created in [since, until), newest first, below a (created_at, rowid) cursor. */
  listRunsByTime: `SELECT ${RUN_COLUMNS} FROM runs r INDEXED BY runs_by_pipeline_created
    JOIN streams s ON s.id = r.stream_id
    WHERE r.pipeline = ? AND r.created_at >= ? AND (r.created_at, r.rowid) < (?, ?)
      AND (? IS NULL OR r.status = ?)
    ORDER BY r.created_at DESC, r.rowid DESC LIMIT ?`,
  pipelines: `SELECT p.fqn, p.id AS pid, p.runs, ${RUN_COLUMNS} FROM pipelines p
    LEFT JOIN runs r ON r.id = p.last_run LEFT JOIN streams s ON s.id = r.stream_id
    WHERE p.fqn > ? AND (? IS NULL OR p.fqn GLOB ?) AND (? IS NULL OR r.status = ?)
    ORDER BY p.fqn LIMIT ?`,
  pipelineById: 'SELECT fqn FROM pipelines WHERE id = ?',
  pipelineStats: `SELECT p.fqn AS pipeline, p.runs, (SELECT coalesce(sum(s.log_bytes), 0)
      FROM runs r INDEXED BY runs_by_pipeline JOIN streams s ON s.id = r.stream_id
      WHERE r.pipeline = p.fqn) AS logBytes
    FROM pipelines p WHERE p.fqn > ? ORDER BY p.fqn LIMIT ?`,
  runsByRunIdOrId: `SELECT ${RUN_COLUMNS} FROM runs r JOIN streams s ON s.id = r.stream_id
    WHERE r.run_id = ? OR r.id = ? ORDER BY r.rowid DESC LIMIT 10`,
  // Topic keys are 'topic' NUL name: all sort between 'topic' NUL and 'topic' U+0001.
  topicKeys: 'SELECT key FROM streams WHERE key > ? AND key < ? ORDER BY key LIMIT ?',
} as const;

/** The statements that read, prepared on each connection. */
function readStatements(db: Database.Database) {
  const q = READ_SQL;
  return {
    streamByKey: db.prepare<[string], StreamRow>(q.streamByKey),
    streamById: db.prepare<[number], StreamRow>(q.streamById),
    entryByProducerId: db.prepare<[number, string], EntryRow>(q.entryByProducerId),
    readEntries: db.prepare<[number, number, number], EntryRow>(q.readEntries),
    withoutLogAfter: db.prepare<[number, number, number], EntryRow>(q.withoutLogAfter),
    firstLogAtOrAfter: db.prepare<[number, number], { seq: number; log_offset: number }>(
      q.firstLogAtOrAfter,
    ),
    logRange: db.prepare<
      [number, number, number],
      { seq: number; log_offset: number; body: string; time: number; step: string | null }
    >(q.logRange),
    lineChunk: db.prepare<[number, number], { log_offset: number; log_line: number; body: string }>(
      q.lineChunk,
    ),
    logChunkStartBefore: db.prepare<[number, number], { start: number | null }>(
      q.logChunkStartBefore,
    ),
    nthLatest: db.prepare<[number, number], { seq: number }>(q.nthLatest),
    timeAtOrAfter: db.prepare<[number, number], { seq: number; time: number }>(q.timeAtOrAfter),
    timeOfSeq: db.prepare<[number, number], { time: number }>(
      'SELECT time FROM entries WHERE stream_id = ? AND seq = ?',
    ),
    getRun: db.prepare<[string, string], RunRow>(q.getRun),
    latestRun: db.prepare<[string], RunRow>(q.latestRun),
    listRuns: db.prepare<[string, number, number], RunRow>(q.listRuns),
    listRunsByStatus: db.prepare<[string, string, number, number], RunRow>(q.listRunsByStatus),
    listRunsByTime: db.prepare<
      [string, number, number, number, string | null, string | null, number],
      RunRow
    >(q.listRunsByTime),
    pipelines: db.prepare<
      [string, string | null, string | null, string | null, string | null, number],
      Partial<RunRow> & { fqn: string; pid: string; runs: number }
    >(q.pipelines),
    pipelineById: db.prepare<[string], { fqn: string }>(q.pipelineById),
    pipelineStats: db.prepare<[string, number], PipelineStats>(q.pipelineStats),
    runsByRunIdOrId: db.prepare<[string, string], RunRow>(q.runsByRunIdOrId),
    topicKeys: db.prepare<[string, string, number], { key: string }>(q.topicKeys),
  };
}

type ReadStatements = ReturnType<typeof readStatements>;

/** The statements that write, prepared on the writing connection only. */
function writeStatements(db: Database.Database) {
  return {
    begin: db.prepare('BEGIN IMMEDIATE'),
    commit: db.prepare('COMMIT'),
    rollback: db.prepare('ROLLBACK'),
    insertStream: db.prepare<[string]>('INSERT INTO streams (key) VALUES (?)'),
    updateStream: db.prepare<[number, number, number, number]>(
      'UPDATE streams SET last_seq = ?, log_bytes = ?, log_lines = ? WHERE id = ?',
    ),
    insertEntry: db.prepare(
      `INSERT INTO entries (stream_id, seq, time, kind, step, correlation_id, producer_id,
         log_offset, log_line, body, extra) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    insertRun: db.prepare(
      `INSERT INTO runs (id, pipeline, run_id, stream_id, status, created_at, started_at,
         ended_at, meta) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    updateRun: db.prepare(
      `UPDATE runs SET status = ?, started_at = ?, ended_at = ?, meta = ?, cancel_requested = ?
        WHERE pipeline = ? AND run_id = ?`,
    ),
    notePipelineRun: db.prepare<[string, string, string]>(
      `INSERT INTO pipelines (fqn, id, runs, last_run) VALUES (?, ?, 1, ?)
        ON CONFLICT (fqn) DO UPDATE SET runs = runs + 1, last_run = excluded.last_run`,
    ),
    deleteBefore: db.prepare<[number, number, number]>(
      'DELETE FROM entries WHERE stream_id = ? AND seq >= ? AND seq < ?',
    ),
    setFirstSeq: db.prepare<[number, number]>(
      'UPDATE streams SET first_seq = max(first_seq, ?) WHERE id = ?',
    ),
    deleteRun: db.prepare<[string, string]>('DELETE FROM runs WHERE pipeline = ? AND run_id = ?'),
    forgetPipelineRun: db.prepare<[string, string]>(
      `UPDATE pipelines SET runs = runs - 1, last_run = (SELECT id FROM runs INDEXED BY
         runs_by_pipeline WHERE pipeline = ? ORDER BY rowid DESC LIMIT 1) WHERE fqn = ?`,
    ),
    dropEmptyPipeline: db.prepare<[string]>('DELETE FROM pipelines WHERE fqn = ? AND runs <= 0'),
    /** A stream whose run was deleted starts over after its tombstone when the run is made again. */
    clearStream: db.prepare<[number, number]>(
      'DELETE FROM entries WHERE stream_id = ? AND seq <= ?',
    ),
  };
}

/** Full-text index pages a removal may merge per 4 KiB of the text it removed, and per step. */
const COMPACT_PAGES_PER_TEXT_PAGE = 4;
const COMPACT_STEP_PAGES = 64;

/**
 * The embedded store: one SQLite file in WAL mode, written through one connection and read
 * through another. better-sqlite3 is synchronous, so writes are queued and each runs as one
 * transaction; a large one (a full batch is 64 MB) pauses between rows every few milliseconds
 * with its transaction open, so the event loop is never held for long. The reading connection
 * sees only what is committed, so no reader ever sees part of a write, and an append resolves
 * only after its COMMIT returned.
 */

export class SqliteStore implements Store, LeaseStore, SealCatalog {
  private readonly db: Database.Database;
  private readonly reader: Database.Database;
  private readonly streamIds = new Map<string, number>();
  /** Reads inside a write transaction, on the writing connection. */
  private readonly w: ReadStatements;
  private readonly write_: ReturnType<typeof writeStatements>;
  /** Reads outside any write: committed data only. */
  private readonly r: ReadStatements;
  /** The writes waiting their turn; never rejects. */
  private queue: Promise<void> = Promise.resolve();
  /** An in-memory database has no second connection, so its writes never pause. */
  private readonly sliced: boolean;
  private readonly checkpointer: WalCheckpointer | undefined;
  private checkpointTimer: NodeJS.Timeout | undefined;
  private restartQueued = false;
  private epoch: string;
  private readonly leases = new LocalLeases();
  /** Per stream id, the time of its newest entry (see lastTime). */
  private readonly lastTimes = new Map<number, number>();
  /** Bytes the write in progress has inserted, for the checkpointer. */
  private writtenBytes = 0;
  private readonly search: SqliteSearch;
  private readonly sealing: SqliteSealCatalog;

  constructor(path: string, options: SqliteStoreOptions = {}) {
    if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
    this.db = new Database(path);
    // Pages freed by deleting runs go back to the file system (giveBackSpace). It must come
    // before anything else writes, and takes effect on a new database only (an older one
    // reuses its free pages instead).
    this.db.pragma('auto_vacuum = INCREMENTAL');
    this.db.pragma('journal_mode = WAL');
    // Under WAL, NORMAL writes each commit to the WAL file (the OS holds it) before returning,
    // which survives kill -9 of this process; FULL adds an fsync for power loss. See docs/STORAGE.md.
    this.db.pragma(`synchronous = ${options.synchronous === 'full' ? 'FULL' : 'NORMAL'}`);
    this.db.pragma('busy_timeout = 5000');
    this.db.pragma('foreign_keys = ON');
    this.db.exec(SCHEMA);
    migrate(this.db);
    addLogLines(this.db);
    addSearchColumn(this.db);
    this.db.exec(SEARCH_SCHEMA);
    addSealColumn(this.db);
    this.db.exec(SEAL_SCHEMA);
    this.epoch = readEpoch(this.db);
    this.sliced = path !== ':memory:';
    this.reader = this.sliced ? new Database(path, { readonly: true }) : this.db;
    if (this.sliced) {
      this.reader.pragma('busy_timeout = 5000');
      // Checkpoints run on a thread of their own, not inside a COMMIT (sqlite-checkpointer.ts).
      this.db.pragma('wal_autocheckpoint = 0');
      // A WAL that starts over is cut back to this size, not kept at its largest.
      this.db.pragma('journal_size_limit = 67108864');
      this.checkpointer = new WalCheckpointer(path, () => {
        if (this.db.open) this.db.pragma('wal_autocheckpoint = 1000');
      });
      // A quiet spell still gets its last commits checkpointed; a WAL that grew too long is made
      // to start over.
      this.checkpointTimer = setInterval(() => {
        if (this.checkpointer?.mustRestart) this.restartWal();
        else if (this.checkpointer?.pending) void this.checkpointer.run();
      }, 1000);
      this.checkpointTimer.unref();
    }
    this.w = readStatements(this.db);
    this.write_ = writeStatements(this.db);
    this.r = this.sliced ? readStatements(this.reader) : this.w;
    this.search = new SqliteSearch(this.db, this.reader);
    this.sealing = new SqliteSealCatalog(
      this.db,
      this.reader,
      (body) => this.write(body),
      (sid, from, to) => this.removeRows(sid, from, to),
      (position, beforeId) => this.removeDocuments(position, beforeId),
      () => this.giveBackSpace(),
    );
  }

  // ---- sealed history (seal-catalog.ts) ---------------------------------------------------

  runsToSeal(limit: number, endedBefore: number): Promise<RunToSeal[]> {
    return this.sealing.runsToSeal(limit, endedBefore);
  }

  rowsToSeal(sid: number, afterSeq: number, limit: number): Promise<SealRow[]> {
    return this.sealing.rowsToSeal(sid, afterSeq, limit);
  }

  documentsToSeal(fromId: number, toId: number): Promise<SealedDocument[]> {
    return this.sealing.documentsToSeal(fromId, toId);
  }

  recordSegment(record: Omit<SegmentRecord, 'hotDropped'>): Promise<boolean> {
    return this.sealing.recordSegment(record);
  }

  segmentsOf(key: StreamKey): Promise<SegmentRecord[]> {
    return this.sealing.segmentsOf(key);
  }

  segmentsToDrop(sealedBefore: number, limit: number): Promise<SegmentRecord[]> {
    return this.sealing.segmentsToDrop(sealedBefore, limit);
  }

  dropHotRows(record: SegmentRecord): Promise<void> {
    return this.sealing.dropHotRows(record);
  }

  sealedRunsForSearch(
    request: SearchDocumentsRequest,
    beforePosition: number,
    limit: number,
  ): Promise<SealedRun[]> {
    return this.sealing.sealedRunsForSearch(request, beforePosition, limit);
  }

  storageBytes(): Promise<StorageBytes> {
    return this.sealing.storageBytes();
  }

  knowsSegment(name: string): Promise<boolean> {
    return this.sealing.knowsSegment(name);
  }

  // ---- runs ------------------------------------------------------------------------------

  putRun(pipeline: string, runId: string, update: RunUpdate): Promise<PutRunResult> {
    return this.write(() => this.putRunSteps(pipeline, runId, update));
  }

  private *putRunSteps(pipeline: string, runId: string, update: RunUpdate) {
    const written: Written[] = [];
    const run = yield* this.upsertRunRow(pipeline, runId, update, Date.now(), written, false);
    return { run, written };
  }

  requestCancel(pipeline: string, runId: string): Promise<PutRunResult> {
    return this.write(() => this.requestCancelSteps(pipeline, runId));
  }

  private *requestCancelSteps(pipeline: string, runId: string): Generator<void, PutRunResult> {
    const row = this.w.getRun.get(pipeline, runId);
    const written: Written[] = [];
    // Asked before: nothing more to say, nothing written.
    if (!cancelNeeded(pipeline, runId, row && runState(row))) {
      return { run: runFromRow(row!), written };
    }
    const run = yield* this.upsertRunRow(pipeline, runId, {}, Date.now(), written, true);
    return { run, written };
  }

  async getRun(pipeline: string, runId: string): Promise<Run | undefined> {
    const row = this.r.getRun.get(pipeline, runId);
    return row && runFromRow(row);
  }

  async findRuns(runIdOrId: string): Promise<Run[]> {
    return this.r.runsByRunIdOrId.all(runIdOrId, runIdOrId).map(runFromRow);
  }

  async latestRun(pipeline: string): Promise<Run | undefined> {
    const row = this.r.latestRun.get(pipeline);
    return row && runFromRow(row);
  }

  async listPipelines(page: ListPipelinesRequest): Promise<Page<PipelineSummary>> {
    const name = pipelineNameFilter(page.name);
    const glob = name === undefined ? null : globToSqliteGlob(name);
    const status = page.status ?? null;
    const rows = this.r.pipelines.iterate(
      page.after ?? '',
      glob,
      glob,
      status,
      status,
      page.limit + 1,
    );
    const { items, more } = takePage(rows, page.limit, (row) => row.meta?.length ?? 0);
    return {
      items: items.map((row) => ({
        fqn: row.fqn,
        id: row.pid,
        runs: row.runs,
        lastRun: row.id === null || row.id === undefined ? null : runFromRow(row as RunRow),
      })),
      next: more ? items[items.length - 1]!.fqn : undefined,
    };
  }

  async pipelineStats(page: PageRequest): Promise<Page<PipelineStats>> {
    const items = this.r.pipelineStats.all(page.after ?? '', page.limit + 1);
    const more = items.length > page.limit;
    if (more) items.pop();
    return { items, next: more ? items[items.length - 1]!.pipeline : undefined };
  }

  async pipelineById(id: string): Promise<string | undefined> {
    return this.r.pipelineById.get(id.toLowerCase())?.fqn;
  }

  async listRuns(pipeline: string, page: ListRunsRequest): Promise<Page<Run>> {
    if (page.since !== undefined || page.until !== undefined)
      return this.runsByTime(pipeline, page);
    const before = page.after === undefined ? Number.MAX_SAFE_INTEGER : parsePosition(page.after);
    const rows = page.status
      ? this.r.listRunsByStatus.iterate(pipeline, page.status, before, page.limit + 1)
      : this.r.listRuns.iterate(pipeline, before, page.limit + 1);
    const { items, more } = takePage(rows, page.limit, (row) => row.meta.length);
    const last = items[items.length - 1];
    return { items: items.map(runFromRow), next: more && last ? String(last.position) : undefined };
  }

  private runsByTime(pipeline: string, page: ListRunsRequest): Page<Run> {
    const start = timePageStart(page.after, page.until);
    const status = page.status ?? null;
    const rows = this.r.listRunsByTime.iterate(
      pipeline,
      page.since ?? Number.MIN_SAFE_INTEGER,
      start.createdAt,
      start.position,
      status,
      status,
      page.limit + 1,
    );
    const { items, more } = takePage(rows, page.limit, (row) => row.meta.length);
    const last = items[items.length - 1];
    const next =
      more && last
        ? timeCursor({ createdAt: last.created_at, position: last.position })
        : undefined;
    return { items: items.map(runFromRow), next };
  }

  /**
   * Creates or updates the run row inside the caller's transaction. On a status change (or a
   * cancel request) it writes a `status` entry to the run stream and one to the runs feed.
   */
  private *upsertRunRow(
    pipeline: string,
    runId: string,
    update: RunUpdate,
    now: number,
    written: Written[],
    cancel: boolean,
  ): Generator<void, Run, void> {
    const existing = this.w.getRun.get(pipeline, runId);
    const { next, changed, statusEntry } = runTransition(
      runId,
      existing && runState(existing),
      update,
      now,
      cancel,
    );
    if (!changed) return runFromRow(existing!);
    const { status, startedAt, endedAt, meta } = next;
    if (!existing) {
      const stream = this.streamRow(runKey(pipeline, runId));
      const sid = stream.id;
      if (stream.last_seq > 0) {
        // A run of this id was deleted: its tombstone (and whatever was not removed yet) goes.
        this.write_.clearStream.run(sid, stream.last_seq);
        this.write_.setFirstSeq.run(stream.last_seq + 1, sid);
      }
      const id = randomUUID();
      this.write_.insertRun.run(id, pipeline, runId, sid, status, now, startedAt, endedAt, meta);
      this.write_.notePipelineRun.run(pipeline, pipelineId(pipeline), id);
    } else {
      const cancelRequested = next.cancelRequested ? 1 : 0;
      this.write_.updateRun.run(status, startedAt, endedAt, meta, cancelRequested, pipeline, runId);
    }
    if (statusEntry === undefined) return runFromRow(this.w.getRun.get(pipeline, runId)!);
    const key = runKey(pipeline, runId);
    const [seq] = yield* this.insert(
      key,
      [{ kind: 'status', body: statusEntry, isLog: false }],
      now,
    );
    written.push({ key, seq: seq! });
    // Read after the status entry so the feed's copy of the run shows its new lastSeq.
    const run = runFromRow(this.w.getRun.get(pipeline, runId)!);
    const feed = topicKey(RUNS_FEED_TOPIC);
    const feedBody = runsFeedBody(run);
    const [feedSeq] = yield* this.insert(
      feed,
      [{ kind: 'status', body: feedBody, isLog: false }],
      now,
    );
    written.push({ key: feed, seq: feedSeq! });
    return run;
  }

  private *ensureRun(pipeline: string, runId: string, now: number, written: Written[]) {
    if (!this.w.getRun.get(pipeline, runId)) {
      yield* this.upsertRunRow(pipeline, runId, { status: 'running' }, now, written, false);
    }
  }

  async deleteRun(pipeline: string, runId: string): Promise<PutRunResult> {
    const deleted = await this.write(() => this.deleteRunSteps(pipeline, runId));
    // The run is gone for every reader now; its rows go a slice at a time, between other work.
    await this.removeRows(deleted.sid, deleted.firstSeq, deleted.tombstone);
    await this.removeDocuments(deleted.position);
    await this.giveBackSpace();
    return { run: deleted.run, written: deleted.written };
  }

  /** Truncates the file by the pages deletes freed, a few megabytes per turn of the queue. */
  private async giveBackSpace(): Promise<void> {
    if (this.db.pragma('auto_vacuum', { simple: true }) !== 2) return;
    while ((this.db.pragma('freelist_count', { simple: true }) as number) > 0) {
      await this.write(() => oneStep(() => this.db.pragma('incremental_vacuum(2048)')));
      await new Promise((resolve) => setImmediate(resolve));
    }
  }

  private *deleteRunSteps(pipeline: string, runId: string) {
    const row = this.w.getRun.get(pipeline, runId);
    if (!row) throw runNotFound(pipeline, runId);
    const run = runFromRow(row);
    const now = Date.now();
    const key = runKey(pipeline, runId);
    const firstSeq = this.streamRow(key).first_seq;
    const [tombstone] = yield* this.insert(
      key,
      [{ kind: 'status', body: tombstoneBody(run), isLog: false }],
      now,
    );
    this.write_.setFirstSeq.run(tombstone!, row.stream_id);
    this.search.forget(row.stream_id, tombstone!);
    this.sealing.forgetRun(row.stream_id, row.position);
    this.write_.deleteRun.run(pipeline, runId);
    this.write_.forgetPipelineRun.run(pipeline, pipeline);
    this.write_.dropEmptyPipeline.run(pipeline);
    const feed = topicKey(RUNS_FEED_TOPIC);
    const [feedSeq] = yield* this.insert(
      feed,
      [{ kind: 'status', body: deletedFeedBody(run), isLog: false }],
      now,
    );
    const written: Written[] = [
      { key, seq: tombstone! },
      { key: feed, seq: feedSeq! },
    ];
    return {
      run,
      written,
      sid: row.stream_id,
      firstSeq,
      tombstone: tombstone!,
      position: row.position,
    };
  }

  /** Removes a stream's entries in [from, to), in small transactions (as trimTopic does). */
  private async removeRows(sid: number, from: number, to: number): Promise<void> {
    for (let at = from; at < to; at += TRIM_ROWS_PER_TRANSACTION) {
      if (at > from) await new Promise((resolve) => setImmediate(resolve));
      const end = Math.min(to, at + TRIM_ROWS_PER_TRANSACTION);
      await this.write(() => oneStep(() => this.write_.deleteBefore.run(sid, at, end)));
    }
  }

  private async removeDocuments(position: number, beforeId?: number): Promise<void> {
    let removed = 0;
    for (;;) {
      const chars = await this.write(() => this.search.removeRun(position, beforeId));
      if (chars === 0) break;
      removed += chars;
      await new Promise((resolve) => setImmediate(resolve));
    }
    // Then the space their trigrams held, a step at a time between other writes. A merge
    // rewrites the segments it touches, deleted or not, so each removal pays for merging a
    // few times its own text, not the whole index: a long history of small removals (sealing,
    // retention) compacts the index in proportion, and one large removal compacts it all.
    let budget = Math.ceil((COMPACT_PAGES_PER_TEXT_PAGE * removed) / 4096 / COMPACT_STEP_PAGES);
    while (budget > 0 && (await this.write(() => this.search.compact(COMPACT_STEP_PAGES)))) {
      budget -= 1;
      await new Promise((resolve) => setImmediate(resolve));
    }
  }

  // ---- appends ---------------------------------------------------------------------------

  appendLog(pipeline: string, runId: string, chunks: readonly NewLog[]): Promise<AppendLogResult> {
    return this.write(() => this.appendLogSteps(pipeline, runId, chunks));
  }

  private *appendLogSteps(
    pipeline: string,
    runId: string,
    chunks: readonly NewLog[],
  ): Generator<void, AppendLogResult> {
    const key = runKey(pipeline, runId);
    const now = Date.now();
    const written: Written[] = [];
    const first = chunks[0];
    const stream = this.streamRow(key);
    if (first?.id !== undefined) {
      const original = this.w.entryByProducerId.get(stream.id, first.id);
      if (original) return this.originalLogAppend(stream.id, original, chunks, written);
    }
    yield* this.ensureRun(pipeline, runId, now, written);
    const offset = this.streamRow(key).log_bytes;
    const seqs = yield* this.insert(
      key,
      chunks.map((chunk) => pendingLog(chunk, LOG_KIND)),
      now,
    );
    const size = chunks.reduce((sum, chunk) => sum + Buffer.byteLength(chunk.text, 'utf8'), 0);
    const last = seqs[seqs.length - 1]!;
    written.push({ key, seq: last });
    return { seq: last, firstSeq: seqs[0]!, offset, size, duplicate: false, written };
  }

  /**
   * The acknowledgement of an append whose producer id was already stored: the original's, if
   * it stored the same text, in the same pieces, with the same step. Anything else under the
   * same id is a conflict, not a retry.
   */
  /**
   * The acknowledgement of an append whose producer id was already stored: the original's, if
   * the rules find it a retry of the same append.
   */
  private originalLogAppend(
    sid: number,
    original: EntryRow,
    chunks: readonly NewLog[],
    written: Written[],
  ): AppendLogResult {
    const rows = this.w.readEntries.all(sid, original.seq - 1, chunks.length).map(storedFromRow);
    checkLogRetry(rows, chunks);
    const size = rows.reduce((sum, row) => sum + Buffer.byteLength(row.body, 'utf8'), 0);
    return {
      seq: rows[rows.length - 1]!.seq,
      firstSeq: original.seq,
      offset: original.log_offset!,
      size,
      duplicate: true,
      written,
    };
  }

  appendEvents(key: StreamKey, events: readonly NewEvent[]): Promise<AppendEventsResult> {
    return this.write(() => this.appendEventsSteps(key, events));
  }

  private *appendEventsSteps(
    key: StreamKey,
    events: readonly NewEvent[],
  ): Generator<void, AppendEventsResult> {
    const now = Date.now();
    const written: Written[] = [];
    if (key.type === 'run') yield* this.ensureRun(key.pipeline, key.runId, now, written);
    const sid = this.streamRow(key).id;
    const plan = planEventBatch(events, (id) => {
      const row = this.w.entryByProducerId.get(sid, id);
      return row && storedFromRow(row);
    });
    const assigned = plan.fresh.length > 0 ? yield* this.insert(key, plan.fresh, now) : [];
    if (assigned.length > 0) written.push({ key, seq: assigned[assigned.length - 1]! });
    return { seqs: batchSeqs(plan, assigned), duplicates: plan.duplicates, written };
  }

  /** Numbers and inserts entries on one stream, inside the caller's transaction. */
  private *insert(
    key: StreamKey,
    pending: readonly PendingEntry[],
    now: number,
  ): Generator<void, number[], void> {
    const stream = this.streamRow(key);
    const numbering = new Numbering(stream.last_seq, stream.log_bytes, stream.log_lines);
    const time = entryTime(now, this.lastTime(stream));
    this.lastTimes.set(stream.id, time);
    const seqs: number[] = [];
    for (const entry of pending) {
      const { seq, logOffset, logLine } = numbering.next(entry);
      this.write_.insertEntry.run(
        stream.id,
        seq,
        time,
        entry.kind,
        entry.step ?? null,
        entry.correlationId ?? null,
        entry.id ?? null,
        logOffset,
        logLine,
        entry.body,
        entry.extra ?? null,
      );
      this.writtenBytes += entry.body.length;
      seqs.push(seq);
      yield;
    }
    this.write_.updateStream.run(
      numbering.lastSeq,
      numbering.logBytes,
      numbering.logLines,
      stream.id,
    );
    return seqs;
  }

  // ---- reads -----------------------------------------------------------------------------

  async readEntries(key: StreamKey, options: ReadEntriesOptions): Promise<Entry[]> {
    const sid = this.knownStreamId(key);
    if (sid === undefined) return [];
    const rows = options.kinds
      ? mergeAscending(this.kindSources(sid, options.kinds, options.afterSeq))
      : options.withoutLog
        ? this.r.withoutLogAfter.iterate(sid, options.afterSeq, options.limit)
        : this.r.readEntries.iterate(sid, options.afterSeq, options.limit);
    const maxBytes = options.maxBytes ?? Number.POSITIVE_INFINITY;
    const out: Entry[] = [];
    let bytes = 0;
    // Rows are stepped through, not fetched whole: a page of 1000 log entries of 64 KiB is
    // 64 MB, and a byte-limited read (a viewer catching up) wants the first megabyte of it.
    for (const row of rows) {
      out.push(entryFromRow(row));
      bytes += Buffer.byteLength(row.body, 'utf8');
      // Leaving the loop early resets the statements, so the connection is free again.
      if (out.length >= options.limit || bytes >= maxBytes) break;
    }
    return out;
  }

  /**
   * One ordered source of rows per kind asked for, each read by index: other kinds through the
   * kind index, log text through the offset index from the first log entry past the cursor.
   */
  private kindSources(sid: number, kinds: readonly string[], after: number) {
    const sources: Array<IterableIterator<EntryRow>> = [];
    for (const kind of new Set(kinds)) {
      sources.push(
        this.reader
          .prepare<[number, string, number], EntryRow>(READ_SQL.kindAfter)
          .iterate(sid, kind, after),
      );
      if (kind === LOG_KIND) {
        const from = this.firstLogOffsetAfter(sid, after);
        if (from !== undefined) {
          sources.push(
            this.reader.prepare<[number, number], EntryRow>(READ_SQL.logFrom).iterate(sid, from),
          );
        }
      }
    }
    return sources;
  }

  /**
   * The offset of the first log entry whose seq is past `after`. Log entries are in seq order
   * and offset order alike, so a binary search over offsets finds it in ~50 index probes,
   * however many entries (of any kind) come before it.
   */
  private firstLogOffsetAfter(sid: number, after: number): number | undefined {
    let lo = 0;
    let hi = (this.r.streamById.get(sid)?.log_bytes ?? 0) + 1;
    let found: number | undefined;
    while (lo < hi) {
      const mid = Math.floor((lo + hi) / 2);
      const row = this.r.firstLogAtOrAfter.get(sid, mid);
      if (!row) {
        hi = mid;
      } else if (row.seq > after) {
        found = row.log_offset;
        hi = Math.min(mid, row.log_offset);
      } else {
        lo = row.log_offset + 1;
      }
    }
    return found;
  }

  async nthLatestSeq(
    key: StreamKey,
    n: number,
    kinds?: readonly string[],
  ): Promise<number | undefined> {
    const sid = this.knownStreamId(key);
    if (sid === undefined || n < 1) return undefined;
    if (!kinds || kinds.length === 0) return this.r.nthLatest.get(sid, n - 1)?.seq;
    // The newest entries of each kind, merged newest first: n + (kinds) rows at most.
    const sources: Array<IterableIterator<{ seq: number }>> = [];
    for (const kind of new Set(kinds)) {
      sources.push(
        this.reader
          .prepare<[number, string], { seq: number }>(READ_SQL.kindNewestFirst)
          .iterate(sid, kind),
      );
      if (kind === LOG_KIND) {
        sources.push(
          this.reader.prepare<[number], { seq: number }>(READ_SQL.logNewestFirst).iterate(sid),
        );
      }
    }
    let count = 0;
    for (const row of mergeDescending(sources)) {
      count += 1;
      if (count === n) return row.seq;
    }
    return undefined;
  }

  async seqOfProducerId(key: StreamKey, id: string): Promise<number | undefined> {
    const sid = this.knownStreamId(key);
    return sid === undefined ? undefined : this.r.entryByProducerId.get(sid, id)?.seq;
  }

  async bounds(key: StreamKey): Promise<StreamBounds> {
    const sid = this.knownStreamId(key);
    return boundsOf(sid === undefined ? undefined : this.r.streamById.get(sid), this.epoch);
  }

  async logLineStart(key: StreamKey, line: number): Promise<number | undefined> {
    const sid = this.knownStreamId(key);
    const row = sid === undefined ? undefined : this.r.streamById.get(sid);
    if (!row) return undefined;
    return lineStart(line, row.log_bytes, row.log_lines, async (feeds) => {
      const found = this.r.lineChunk.get(row.id, feeds);
      return found && { logOffset: found.log_offset, logLine: found.log_line, body: found.body };
    });
  }

  async readLog(key: StreamKey, offset: number, limit: number): Promise<LogChunk[]> {
    const sid = this.knownStreamId(key);
    if (sid === undefined) return [];
    let start = offset;
    let end = offset + limit;
    if (offset === -1) {
      const total = this.r.streamById.get(sid)?.log_bytes ?? 0;
      // The chunks that end at or after byte (total - limit): they start no earlier than the
      // chunk holding byte (total - limit).
      const from = Math.max(total - limit, 0);
      start = this.r.logChunkStartBefore.get(sid, from)?.start ?? 0;
      end = Number.MAX_SAFE_INTEGER;
    }
    return this.r.logRange.all(sid, start, end).map((row) => ({
      offset: row.log_offset,
      size: Buffer.byteLength(row.body, 'utf8'),
      text: row.body,
      time: new Date(row.time).toISOString(),
      ...(row.step === null ? {} : { step: row.step }),
    }));
  }

  async logChunkAt(key: StreamKey, byte: number): Promise<LogChunkPosition | undefined> {
    const sid = this.knownStreamId(key);
    if (sid === undefined) return undefined;
    const start = this.r.logChunkStartBefore.get(sid, byte)?.start;
    if (start === null || start === undefined) return undefined;
    const [row] = this.r.logRange.all(sid, start, start + 1);
    if (!row) return undefined;
    const size = Buffer.byteLength(row.body, 'utf8');
    return start + size > byte ? { offset: start, size, seq: row.seq } : undefined;
  }

  async listTopics(page: PageRequest): Promise<Page<string>> {
    const prefix = streamId(topicKey(''));
    const rows = this.r.topicKeys.all(prefix + (page.after ?? ''), 'topic\u0001', page.limit + 1);
    const items = rows.slice(0, page.limit).map(({ key }) => key.slice(prefix.length));
    return { items, next: rows.length > page.limit ? items[items.length - 1] : undefined };
  }

  async trimTopic(topic: string, policy: TrimPolicy): Promise<TrimResult> {
    const sid = this.knownStreamId(topicKey(topic));
    const row = sid === undefined ? undefined : this.r.streamById.get(sid);
    if (sid === undefined || !row) return { removed: 0, firstSeq: 1 };
    let cut = row.first_seq;
    if (policy.maxEntries > 0) cut = Math.max(cut, row.last_seq - policy.maxEntries + 1);
    if (policy.olderThanMs !== undefined) {
      cut = Math.max(cut, this.firstSeqAtOrAfter(sid, row, policy.olderThanMs));
    }
    let removed = 0;
    // Small transactions with a turn of the event loop between them, so appends, fan-out and
    // heartbeats carry on while a large topic is trimmed.
    for (let from = row.first_seq; from < cut; from += TRIM_ROWS_PER_TRANSACTION) {
      if (from > row.first_seq) await new Promise((resolve) => setImmediate(resolve));
      const to = Math.min(cut, from + TRIM_ROWS_PER_TRANSACTION);
      removed += await this.write(() =>
        oneStep(() => {
          const changes = this.write_.deleteBefore.run(sid, from, to).changes;
          this.write_.setFirstSeq.run(to, sid);
          return changes;
        }),
      );
    }
    return { removed, firstSeq: cut };
  }

  /**
   * The first seq written at or after `time`, or lastSeq + 1: a binary search over seqs (times
   * do not go back within a stream), ~20 probes however many entries are older.
   */
  private firstSeqAtOrAfter(sid: number, stream: StreamRow, time: number): number {
    let lo = stream.first_seq;
    let hi = stream.last_seq + 1;
    while (lo < hi) {
      const mid = Math.floor((lo + hi) / 2);
      const entry = this.r.timeAtOrAfter.get(sid, mid);
      if (!entry || entry.time >= time) hi = entry ? Math.min(mid, entry.seq) : mid;
      else lo = entry.seq + 1;
    }
    return lo;
  }

  // ---- search ----------------------------------------------------------------------------

  indexForSearch(limits: IndexLimits): Promise<IndexResult> {
    return this.write(() => this.search.index(limits));
  }

  async searchIndexStatus(): Promise<SearchIndexStatus> {
    return this.search.status();
  }

  async searchDocuments(request: SearchDocumentsRequest): Promise<SearchDocument[]> {
    return this.search.documents(request);
  }

  /** One process opens a SQLite store, so its leases are this process's. */
  tryLease(name: string): Promise<Lease | undefined> {
    return this.leases.tryLease(name);
  }

  async renewEpoch(): Promise<string> {
    return this.write(() =>
      oneStep(() => {
        this.db.prepare(RENEW_EPOCH).run();
        this.epoch = readEpoch(this.db);
        return this.epoch;
      }),
    );
  }

  async close(): Promise<void> {
    clearInterval(this.checkpointTimer);
    await this.queue;
    await this.checkpointer?.close();
    if (this.reader !== this.db && this.reader.open) this.reader.close();
    if (this.db.open) this.db.close();
  }

  // ---- helpers ---------------------------------------------------------------------------

  /**
   * Runs a write transaction after the writes before it. The body yields between rows; once it
   * has run for SLICE_MS the event loop gets a turn while the transaction stays open:
   * other writes wait in the queue, readers see only what was committed. A rolled-back
   * transaction may have created stream rows whose ids were cached; SQLite will hand those ids
   * out again, so the cache is dropped on failure.
   */
  private write<T>(body: WriteBody<T>): Promise<T> {
    const run = async (): Promise<T> => {
      if (!this.db.open) throw new Error('The store is closed.');
      this.write_.begin.run();
      try {
        const steps = body();
        const slice = new TimeSlice(SLICE_MS);
        for (;;) {
          const step = steps.next();
          if (step.done) {
            this.write_.commit.run();
            this.checkpointer?.committed(this.writtenBytes);
            if (this.checkpointer?.mustRestart) this.restartWal();
            this.writtenBytes = 0;
            return step.value;
          }
          if (this.sliced && slice.due) await slice.next();
        }
      } catch (error) {
        if (this.db.inTransaction) this.write_.rollback.run();
        this.writtenBytes = 0;
        this.streamIds.clear();
        this.lastTimes.clear();
        throw error;
      }
    };
    const result = this.queue.then(run);
    this.queue = result.then(
      () => undefined,
      () => undefined,
    );
    return result;
  }

  /**
   * A checkpoint as a turn of the write queue: the writes after it wait until the worker has
   * copied the WAL back, so the next write starts the WAL over (sqlite-checkpointer.ts).
   */
  private restartWal(): void {
    if (this.restartQueued || !this.checkpointer) return;
    this.restartQueued = true;
    const checkpointer = this.checkpointer;
    this.queue = this.queue
      .then(() => checkpointer.run())
      .then(() => checkpointer.restarted())
      .finally(() => {
        this.restartQueued = false;
      });
  }

  /** The stream's row, created on first write. The id is cached; the counters are read fresh. */
  private streamRow(key: StreamKey): StreamRow {
    const name = streamId(key);
    const cached = this.streamIds.get(name);
    if (cached !== undefined) return this.w.streamById.get(cached)!;
    let row = this.w.streamByKey.get(name);
    if (!row) {
      this.write_.insertStream.run(name);
      row = this.w.streamByKey.get(name)!;
    }
    this.streamIds.set(name, row.id);
    return row;
  }

  /**
   * The time of the stream's newest entry (0 if none is left), read once per stream and then
   * kept: this connection is the database's one writer.
   */
  private lastTime(stream: StreamRow): number {
    let time = this.lastTimes.get(stream.id);
    if (time === undefined) {
      time = this.w.timeOfSeq.get(stream.id, stream.last_seq)?.time ?? 0;
      this.lastTimes.set(stream.id, time);
    }
    return time;
  }

  /** The stream's id if it was ever written (and committed), without creating it. */
  private knownStreamId(key: StreamKey): number | undefined {
    const name = streamId(key);
    const cached = this.streamIds.get(name);
    if (cached !== undefined) return cached;
    const row = this.r.streamByKey.get(name);
    if (row) this.streamIds.set(name, row.id);
    return row?.id;
  }
}

/** A write of one step (it never pauses). */
// eslint-disable-next-line require-yield -- one step, nothing to pause between
function* oneStep<T>(fn: () => T): Generator<void, T> {
  return fn();
}

const RENEW_EPOCH = `UPDATE store_meta SET value = lower(hex(randomblob(4))) WHERE key = 'epoch'`;

function readEpoch(db: Database.Database): string {
  return db
    .prepare<[], { value: string }>(`SELECT value FROM store_meta WHERE key = 'epoch'`)
    .get()!.value;
}

/** What a database made by an older version lacks: the pipelines table's rows. */
function migrate(db: Database.Database): void {
  const missing = db
    .prepare<[], { pipeline: string; runs: number }>(
      `SELECT pipeline, count(*) AS runs FROM runs
        WHERE pipeline NOT IN (SELECT fqn FROM pipelines) GROUP BY pipeline`,
    )
    .all();
  if (missing.length === 0) return;
  const last = db.prepare<[string], { id: string }>(
    'SELECT id FROM runs WHERE pipeline = ? ORDER BY rowid DESC LIMIT 1',
  );
  const insert = db.prepare('INSERT INTO pipelines (fqn, id, runs, last_run) VALUES (?, ?, ?, ?)');
  db.transaction(() => {
    for (const { pipeline, runs } of missing) {
      insert.run(pipeline, pipelineId(pipeline), runs, last.get(pipeline)!.id);
    }
  })();
}

/** Rows of several ascending sources, in seq order (each source is itself in seq order). */
function* mergeAscending<T extends { seq: number }>(sources: Array<IterableIterator<T>>) {
  yield* merge(sources, (a, b) => a.seq < b.seq);
}

function* mergeDescending<T extends { seq: number }>(sources: Array<IterableIterator<T>>) {
  yield* merge(sources, (a, b) => a.seq > b.seq);
}

/**
 * A k-way merge that pulls one row at a time, so it reads no more than it yields (plus one row
 * per source). Sources are closed when the caller stops early, freeing their statements.
 */
function* merge<T>(sources: Array<IterableIterator<T>>, before: (a: T, b: T) => boolean) {
  const heads = sources.map((source) => source.next());
  try {
    for (;;) {
      let pick = -1;
      for (let i = 0; i < heads.length; i += 1) {
        const head = heads[i]!;
        if (head.done) continue;
        if (pick < 0 || before(head.value, (heads[pick] as IteratorYieldResult<T>).value)) pick = i;
      }
      if (pick < 0) return;
      yield (heads[pick] as IteratorYieldResult<T>).value;
      heads[pick] = sources[pick]!.next();
    }
  } finally {
    for (const source of sources) source.return?.();
  }
}

/** A run row as the rules see it. */
function runState(row: RunRow): RunState {
  return {
    status: row.status,
    cancelRequested: row.cancel_requested === 1,
    startedAt: row.started_at,
    endedAt: row.ended_at,
    meta: row.meta,
  };
}

function runFromRow(row: RunRow): Run {
  return {
    id: row.id,
    pipeline: row.pipeline,
    runId: row.run_id,
    status: row.status,
    cancelRequested: row.cancel_requested === 1,
    createdAt: new Date(row.created_at).toISOString(),
    startedAt: row.started_at === null ? null : new Date(row.started_at).toISOString(),
    endedAt: row.ended_at === null ? null : new Date(row.ended_at).toISOString(),
    lastSeq: row.last_seq,
    logBytes: row.log_bytes,
    meta: JSON.parse(row.meta) as Record<string, unknown>,
  };
}
