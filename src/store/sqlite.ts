import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import type { Entry, NewEvent, NewLog } from '../model/entry.js';
import { RAW_DATA } from '../model/entry.js';
import { TailwaterError } from '../model/errors.js';
import { LOG_KIND } from '../model/names.js';
import type { PipelineSummary, Run, RunStatus } from '../model/run.js';
import { isTerminal } from '../model/run.js';
import type { StreamKey } from '../model/stream-key.js';
import { runKey, streamId, topicKey } from '../model/stream-key.js';
import { SCHEMA } from './sqlite-schema.js';
import type {
  AppendEventsResult,
  AppendLogResult,
  LogChunk,
  PutRunResult,
  ReadEntriesOptions,
  RunUpdate,
  Store,
  StreamBounds,
  TrimPolicy,
  TrimResult,
  Written,
} from './store.js';
import { RUNS_FEED_TOPIC } from './store.js';

export interface SqliteStoreOptions {
  /** `normal` (default): durable against a process crash. `full`: also against power loss. */
  synchronous?: 'normal' | 'full';
}

interface StreamRow {
  id: number;
  last_seq: number;
  first_seq: number;
  log_bytes: number;
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
}

interface EntryRow {
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

/** A row about to be inserted, before its seq is known. */
interface PendingEntry {
  kind: string;
  step?: string | undefined;
  correlationId?: string | undefined;
  id?: string | undefined;
  /** Log text, or the JSON of `data`. */
  body: string;
  isLog: boolean;
  extra?: Record<string, unknown> | undefined;
}

const TRIM_ROWS_PER_TRANSACTION = 10_000;

const RUN_COLUMNS = `r.id, r.pipeline, r.run_id, r.stream_id, r.status, r.cancel_requested, r.created_at,
  r.started_at, r.ended_at, r.meta, s.last_seq, s.log_bytes`;

/**
 * The embedded store: one SQLite file in WAL mode. better-sqlite3 is synchronous, so every
 * append is a single transaction run to completion on the event loop: seq assignment cannot
 * interleave, and the promise resolves only after COMMIT returned.
 */
export class SqliteStore implements Store {
  private readonly db: Database.Database;
  private readonly streamIds = new Map<string, number>();
  private readonly stmt;

  constructor(path: string, options: SqliteStoreOptions = {}) {
    if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
    this.db = new Database(path);
    this.db.pragma('journal_mode = WAL');
    // Under WAL, NORMAL writes each commit to the WAL file (the OS holds it) before returning,
    // which survives kill -9 of this process; FULL adds an fsync for power loss. See docs/STORAGE.md.
    this.db.pragma(`synchronous = ${options.synchronous === 'full' ? 'FULL' : 'NORMAL'}`);
    this.db.pragma('busy_timeout = 5000');
    this.db.pragma('foreign_keys = ON');
    this.db.exec(SCHEMA);
    const db = this.db;
    this.stmt = {
      streamByKey: db.prepare<[string], StreamRow>(
        'SELECT id, last_seq, first_seq, log_bytes FROM streams WHERE key = ?',
      ),
      streamById: db.prepare<[number], StreamRow>(
        'SELECT id, last_seq, first_seq, log_bytes FROM streams WHERE id = ?',
      ),
      insertStream: db.prepare<[string]>('INSERT INTO streams (key) VALUES (?)'),
      updateStream: db.prepare<[number, number, number]>(
        'UPDATE streams SET last_seq = ?, log_bytes = ? WHERE id = ?',
      ),
      insertEntry: db.prepare(
        `INSERT INTO entries (stream_id, seq, time, kind, step, correlation_id, producer_id,
           log_offset, body, extra) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      ),
      seqOfProducerId: db.prepare<[number, string], { seq: number; log_offset: number | null }>(
        'SELECT seq, log_offset FROM entries WHERE stream_id = ? AND producer_id = ?',
      ),
      readEntries: db.prepare<[number, number, number], EntryRow>(
        `SELECT seq, time, kind, step, correlation_id, producer_id, log_offset, body, extra
           FROM entries WHERE stream_id = ? AND seq > ? ORDER BY seq LIMIT ?`,
      ),
      logRange: db.prepare<
        [number, number, number],
        { log_offset: number; body: string; time: number }
      >(
        `SELECT log_offset, body, time FROM entries
          WHERE stream_id = ? AND log_offset >= ? AND log_offset < ? ORDER BY log_offset`,
      ),
      logChunkStartBefore: db.prepare<[number, number], { start: number | null }>(
        `SELECT max(log_offset) AS start FROM entries
          WHERE stream_id = ? AND log_offset IS NOT NULL AND log_offset <= ?`,
      ),
      getRun: db.prepare<[string, string], RunRow>(
        `SELECT ${RUN_COLUMNS} FROM runs r JOIN streams s ON s.id = r.stream_id
          WHERE r.pipeline = ? AND r.run_id = ?`,
      ),
      latestRun: db.prepare<[string], RunRow>(
        `SELECT ${RUN_COLUMNS} FROM runs r JOIN streams s ON s.id = r.stream_id
          WHERE r.pipeline = ? ORDER BY r.created_at DESC, r.rowid DESC LIMIT 1`,
      ),
      listRuns: db.prepare<[string, number], RunRow>(
        `SELECT ${RUN_COLUMNS} FROM runs r JOIN streams s ON s.id = r.stream_id
          WHERE r.pipeline = ? ORDER BY r.created_at DESC, r.rowid DESC LIMIT ?`,
      ),
      listRunsByStatus: db.prepare<[string, string, number], RunRow>(
        `SELECT ${RUN_COLUMNS} FROM runs r JOIN streams s ON s.id = r.stream_id
          WHERE r.pipeline = ? AND r.status = ? ORDER BY r.created_at DESC, r.rowid DESC LIMIT ?`,
      ),
      pipelines: db.prepare<[], { pipeline: string; runs: number }>(
        'SELECT pipeline, count(*) AS runs FROM runs GROUP BY pipeline ORDER BY pipeline',
      ),
      insertRun: db.prepare(
        `INSERT INTO runs (id, pipeline, run_id, stream_id, status, created_at, started_at,
           ended_at, meta) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      ),
      runsByRunIdOrId: db.prepare<[string, string], RunRow>(
        `SELECT ${RUN_COLUMNS} FROM runs r JOIN streams s ON s.id = r.stream_id
          WHERE r.run_id = ? OR r.id = ? ORDER BY r.created_at DESC, r.rowid DESC LIMIT 10`,
      ),
      // Topic keys are 'topic' NUL name: all sort between 'topic' NUL and 'topic' U+0001.
      topicKeys: db.prepare<[string, string], { key: string }>(
        'SELECT key FROM streams WHERE key > ? AND key < ? ORDER BY key',
      ),
      firstSeqAtOrAfter: db.prepare<[number, number], { seq: number }>(
        'SELECT seq FROM entries WHERE stream_id = ? AND time >= ? ORDER BY seq LIMIT 1',
      ),
      deleteBefore: db.prepare<[number, number, number]>(
        'DELETE FROM entries WHERE stream_id = ? AND seq >= ? AND seq < ?',
      ),
      setFirstSeq: db.prepare<[number, number]>(
        'UPDATE streams SET first_seq = max(first_seq, ?) WHERE id = ?',
      ),
      updateRun: db.prepare(
        `UPDATE runs SET status = ?, started_at = ?, ended_at = ?, meta = ?, cancel_requested = ?
          WHERE pipeline = ? AND run_id = ?`,
      ),
    };
  }

  // ---- runs ------------------------------------------------------------------------------

  async putRun(pipeline: string, runId: string, update: RunUpdate): Promise<PutRunResult> {
    return this.write(() => {
      const written: Written[] = [];
      const run = this.upsertRunRow(pipeline, runId, update, Date.now(), written, false);
      return { run, written };
    });
  }

  async requestCancel(pipeline: string, runId: string): Promise<PutRunResult> {
    return this.write(() => {
      const row = this.stmt.getRun.get(pipeline, runId);
      if (!row) throw runNotFound(pipeline, runId);
      if (isTerminal(row.status)) {
        throw new TailwaterError(
          'TW_STATUS_CONFLICT',
          `Run ${runId} already ended with status ${row.status}; there is nothing to cancel.`,
        );
      }
      const written: Written[] = [];
      const run = this.upsertRunRow(pipeline, runId, {}, Date.now(), written, true);
      return { run, written };
    });
  }

  async getRun(pipeline: string, runId: string): Promise<Run | undefined> {
    const row = this.stmt.getRun.get(pipeline, runId);
    return row && this.runFromRow(row);
  }

  async findRuns(runIdOrId: string): Promise<Run[]> {
    return this.stmt.runsByRunIdOrId.all(runIdOrId, runIdOrId).map((row) => this.runFromRow(row));
  }

  async latestRun(pipeline: string): Promise<Run | undefined> {
    const row = this.stmt.latestRun.get(pipeline);
    return row && this.runFromRow(row);
  }

  async listPipelines(): Promise<PipelineSummary[]> {
    return this.stmt.pipelines.all().map(({ pipeline, runs }) => {
      const last = this.stmt.latestRun.get(pipeline);
      return { fqn: pipeline, runs, lastRun: last ? this.runFromRow(last) : null };
    });
  }

  async listRuns(pipeline: string, options: { status?: RunStatus; limit: number }): Promise<Run[]> {
    const rows = options.status
      ? this.stmt.listRunsByStatus.all(pipeline, options.status, options.limit)
      : this.stmt.listRuns.all(pipeline, options.limit);
    return rows.map((row) => this.runFromRow(row));
  }

  /**
   * Creates or updates the run row inside the caller's transaction. On a status change (or a
   * cancel request) it writes a `status` entry to the run stream and one to the runs feed.
   */
  private upsertRunRow(
    pipeline: string,
    runId: string,
    update: RunUpdate,
    now: number,
    written: Written[],
    cancel: boolean,
  ): Run {
    const existing = this.stmt.getRun.get(pipeline, runId);
    const status = update.status ?? existing?.status ?? 'running';
    if (existing && isTerminal(existing.status) && !isTerminal(status)) {
      throw new TailwaterError(
        'TW_STATUS_CONFLICT',
        `Run ${runId} already ended with status ${existing.status}; it cannot become ${status}.`,
      );
    }
    const meta = JSON.stringify(update.meta ?? (existing ? JSON.parse(existing.meta) : {}));
    const startedAt = existing?.started_at ?? (status === 'queued' ? null : now);
    const endedAt = !isTerminal(status)
      ? null
      : existing && isTerminal(existing.status)
        ? existing.ended_at
        : now;
    let changed = cancel;
    if (!existing) {
      const sid = this.streamRow(runKey(pipeline, runId)).id;
      this.stmt.insertRun.run(
        randomUUID(),
        pipeline,
        runId,
        sid,
        status,
        now,
        startedAt,
        endedAt,
        meta,
      );
      changed = true;
    } else {
      this.stmt.updateRun.run(
        status,
        startedAt,
        endedAt,
        meta,
        cancel ? 1 : existing.cancel_requested,
        pipeline,
        runId,
      );
      changed ||= existing.status !== status;
    }
    if (!changed) return this.runFromRow(this.stmt.getRun.get(pipeline, runId)!);
    const key = runKey(pipeline, runId);
    const statusData = JSON.stringify(cancel ? { status, cancelRequested: true } : { status });
    const [seq] = this.insert(key, [{ kind: 'status', body: statusData, isLog: false }], now);
    written.push({ key, seq: seq! });
    // Read after the status entry so the feed's copy of the run shows its new lastSeq.
    const run = this.runFromRow(this.stmt.getRun.get(pipeline, runId)!);
    const feed = topicKey(RUNS_FEED_TOPIC);
    const [feedSeq] = this.insert(
      feed,
      [{ kind: 'status', body: JSON.stringify(run), isLog: false }],
      now,
    );
    written.push({ key: feed, seq: feedSeq! });
    return run;
  }

  private ensureRun(pipeline: string, runId: string, now: number, written: Written[]): void {
    if (!this.stmt.getRun.get(pipeline, runId)) {
      this.upsertRunRow(pipeline, runId, { status: 'running' }, now, written, false);
    }
  }

  // ---- appends ---------------------------------------------------------------------------

  async appendLog(
    pipeline: string,
    runId: string,
    chunks: readonly NewLog[],
  ): Promise<AppendLogResult> {
    return this.write((): AppendLogResult => {
      const key = runKey(pipeline, runId);
      const now = Date.now();
      const written: Written[] = [];
      const first = chunks[0];
      const stream = this.streamRow(key);
      if (first?.id !== undefined) {
        const original = this.stmt.seqOfProducerId.get(stream.id, first.id);
        if (original) return this.originalLogAppend(stream.id, original, chunks.length, written);
      }
      this.ensureRun(pipeline, runId, now, written);
      const offset = this.streamRow(key).log_bytes;
      const seqs = this.insert(
        key,
        chunks.map((chunk) => ({
          kind: LOG_KIND,
          step: chunk.step,
          id: chunk.id,
          body: chunk.text,
          isLog: true,
        })),
        now,
      );
      const size = chunks.reduce((sum, chunk) => sum + Buffer.byteLength(chunk.text, 'utf8'), 0);
      const last = seqs[seqs.length - 1]!;
      written.push({ key, seq: last });
      return { seq: last, firstSeq: seqs[0]!, offset, size, duplicate: false, written };
    });
  }

  /** The acknowledgement of an append whose first chunk's producer id was already stored. */
  private originalLogAppend(
    sid: number,
    original: { seq: number; log_offset: number | null },
    count: number,
    written: Written[],
  ): AppendLogResult {
    const rows = this.stmt.readEntries.all(sid, original.seq - 1, count);
    const size = rows.reduce((sum, row) => sum + Buffer.byteLength(row.body, 'utf8'), 0);
    return {
      seq: rows[rows.length - 1]?.seq ?? original.seq,
      firstSeq: original.seq,
      offset: original.log_offset ?? 0,
      size,
      duplicate: true,
      written,
    };
  }

  async appendEvents(key: StreamKey, events: readonly NewEvent[]): Promise<AppendEventsResult> {
    return this.write((): AppendEventsResult => {
      const now = Date.now();
      const written: Written[] = [];
      if (key.type === 'run') this.ensureRun(key.pipeline, key.runId, now, written);
      const sid = this.streamRow(key).id;
      const seqs: number[] = new Array<number>(events.length);
      const fresh: PendingEntry[] = [];
      const freshIndex: number[] = [];
      const idsInBatch = new Map<string, number>();
      let duplicates = 0;
      events.forEach((event, index) => {
        if (event.id !== undefined) {
          const stored = this.stmt.seqOfProducerId.get(sid, event.id);
          const earlier = idsInBatch.get(event.id);
          if (stored || earlier !== undefined) {
            duplicates += 1;
            seqs[index] = stored ? stored.seq : -1 - earlier!;
            return;
          }
          idsInBatch.set(event.id, index);
        }
        freshIndex.push(index);
        fresh.push({
          kind: event.kind,
          step: event.step,
          correlationId: event.correlationId,
          id: event.id,
          body: event.dataJson ?? JSON.stringify(event.data ?? null),
          isLog: false,
          extra: event.extra,
        });
      });
      const assigned = fresh.length > 0 ? this.insert(key, fresh, now) : [];
      freshIndex.forEach((index, i) => (seqs[index] = assigned[i]!));
      // A repeat within the batch points at its earlier twin, now numbered.
      seqs.forEach((seq, index) => {
        if (seq < 0) seqs[index] = seqs[-1 - seq]!;
      });
      if (assigned.length > 0) written.push({ key, seq: assigned[assigned.length - 1]! });
      return { seqs, duplicates, written };
    });
  }

  /** Numbers and inserts entries on one stream, inside the caller's transaction. */
  private insert(key: StreamKey, pending: readonly PendingEntry[], now: number): number[] {
    const stream = this.streamRow(key);
    let seq = stream.last_seq;
    let logBytes = stream.log_bytes;
    const seqs: number[] = [];
    for (const entry of pending) {
      seq += 1;
      let offset: number | null = null;
      if (entry.isLog) {
        offset = logBytes;
        logBytes += Buffer.byteLength(entry.body, 'utf8');
      }
      this.stmt.insertEntry.run(
        stream.id,
        seq,
        now,
        entry.kind,
        entry.step ?? null,
        entry.correlationId ?? null,
        entry.id ?? null,
        offset,
        entry.body,
        entry.extra === undefined ? null : JSON.stringify(entry.extra),
      );
      seqs.push(seq);
    }
    this.stmt.updateStream.run(seq, logBytes, stream.id);
    return seqs;
  }

  // ---- reads -----------------------------------------------------------------------------

  async readEntries(key: StreamKey, options: ReadEntriesOptions): Promise<Entry[]> {
    const sid = this.knownStreamId(key);
    if (sid === undefined) return [];
    const kinds = options.kinds && new Set(options.kinds);
    const maxBytes = options.maxBytes ?? Number.POSITIVE_INFINITY;
    const out: Entry[] = [];
    let after = options.afterSeq;
    let bytes = 0;
    // Filtered reads scan in pages so a rare kind in a long stream still fills `limit`. Rows are
    // stepped through, not fetched whole: a page of 1000 log entries of 64 KiB is 64 MB, and a
    // byte-limited read (a viewer catching up) wants the first megabyte of it.
    for (;;) {
      let rows = 0;
      for (const row of this.stmt.readEntries.iterate(sid, after, options.limit)) {
        rows += 1;
        after = row.seq;
        if (kinds && !kinds.has(row.kind)) continue;
        out.push(entryFromRow(row));
        bytes += Buffer.byteLength(row.body, 'utf8');
        // Leaving the loop early resets the statement, so the connection is free again.
        if (out.length >= options.limit || bytes >= maxBytes) return out;
      }
      if (rows < options.limit || !kinds) return out;
    }
  }

  async nthLatestSeq(
    key: StreamKey,
    n: number,
    kinds?: readonly string[],
  ): Promise<number | undefined> {
    const sid = this.knownStreamId(key);
    if (sid === undefined || n < 1) return undefined;
    const kindFilter =
      kinds && kinds.length > 0 ? `AND kind IN (${kinds.map(() => '?').join(',')})` : '';
    // Walks the primary key backwards from the newest entry: cheap for the small n it is used for.
    const row = this.db
      .prepare<unknown[], { seq: number }>(
        `SELECT seq FROM entries WHERE stream_id = ? ${kindFilter} ORDER BY seq DESC LIMIT 1 OFFSET ?`,
      )
      .get(sid, ...(kinds ?? []), n - 1);
    return row?.seq;
  }

  async seqOfProducerId(key: StreamKey, id: string): Promise<number | undefined> {
    const sid = this.knownStreamId(key);
    return sid === undefined ? undefined : this.stmt.seqOfProducerId.get(sid, id)?.seq;
  }

  async bounds(key: StreamKey): Promise<StreamBounds> {
    const sid = this.knownStreamId(key);
    const row = sid === undefined ? undefined : this.stmt.streamById.get(sid);
    if (!row) return { firstSeq: 1, lastSeq: 0, logBytes: 0 };
    return { firstSeq: row.first_seq, lastSeq: row.last_seq, logBytes: row.log_bytes };
  }

  async readLog(key: StreamKey, offset: number, limit: number): Promise<LogChunk[]> {
    const sid = this.knownStreamId(key);
    if (sid === undefined) return [];
    let start = offset;
    let end = offset + limit;
    if (offset === -1) {
      const total = this.stmt.streamById.get(sid)?.log_bytes ?? 0;
      // The chunks that end at or after byte (total - limit): they start no earlier than the
      // chunk holding byte (total - limit).
      const from = Math.max(total - limit, 0);
      start = this.stmt.logChunkStartBefore.get(sid, from)?.start ?? 0;
      end = Number.MAX_SAFE_INTEGER;
    }
    return this.stmt.logRange.all(sid, start, end).map((row) => ({
      offset: row.log_offset,
      size: Buffer.byteLength(row.body, 'utf8'),
      text: row.body,
      time: new Date(row.time).toISOString(),
    }));
  }

  async listTopics(): Promise<string[]> {
    const prefix = streamId(topicKey(''));
    return this.stmt.topicKeys
      .all(prefix, 'topic\u0001')
      .map(({ key }) => key.slice(prefix.length));
  }

  async trimTopic(topic: string, policy: TrimPolicy): Promise<TrimResult> {
    const sid = this.knownStreamId(topicKey(topic));
    const row = sid === undefined ? undefined : this.stmt.streamById.get(sid);
    if (sid === undefined || !row) return { removed: 0, firstSeq: 1 };
    let cut = row.first_seq;
    if (policy.maxEntries > 0) cut = Math.max(cut, row.last_seq - policy.maxEntries + 1);
    if (policy.olderThanMs !== undefined) {
      const keep = this.stmt.firstSeqAtOrAfter.get(sid, policy.olderThanMs);
      cut = Math.max(cut, keep ? keep.seq : row.last_seq + 1);
    }
    let removed = 0;
    // Small transactions with a turn of the event loop between them, so appends, fan-out and
    // heartbeats carry on while a large topic is trimmed.
    for (let from = row.first_seq; from < cut; from += TRIM_ROWS_PER_TRANSACTION) {
      const to = Math.min(cut, from + TRIM_ROWS_PER_TRANSACTION);
      removed += this.write(() => {
        const changes = this.stmt.deleteBefore.run(sid, from, to).changes;
        this.stmt.setFirstSeq.run(to, sid);
        return changes;
      });
      if (to < cut) await new Promise((resolve) => setImmediate(resolve));
    }
    return { removed, firstSeq: cut };
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close();
  }

  // ---- helpers ---------------------------------------------------------------------------

  /**
   * Runs a write transaction. A rolled-back transaction may have created stream rows whose ids
   * were cached; SQLite will hand those ids out again, so the cache is dropped on failure.
   */
  private write<T>(fn: () => T): T {
    try {
      return this.db.transaction(fn)();
    } catch (error) {
      this.streamIds.clear();
      throw error;
    }
  }

  /** The stream's row, created on first write. The id is cached; the counters are read fresh. */
  private streamRow(key: StreamKey): StreamRow {
    const name = streamId(key);
    const cached = this.streamIds.get(name);
    if (cached !== undefined) return this.stmt.streamById.get(cached)!;
    let row = this.stmt.streamByKey.get(name);
    if (!row) {
      this.stmt.insertStream.run(name);
      row = this.stmt.streamByKey.get(name)!;
    }
    this.streamIds.set(name, row.id);
    return row;
  }

  /** The stream's id if it was ever written, without creating it. */
  private knownStreamId(key: StreamKey): number | undefined {
    const name = streamId(key);
    const cached = this.streamIds.get(name);
    if (cached !== undefined) return cached;
    const row = this.stmt.streamByKey.get(name);
    if (row) this.streamIds.set(name, row.id);
    return row?.id;
  }

  private runFromRow(row: RunRow): Run {
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
}

function runNotFound(pipeline: string, runId: string): TailwaterError {
  return new TailwaterError('TW_RUN_NOT_FOUND', `No run ${runId} of pipeline ${pipeline}.`);
}

function entryFromRow(row: EntryRow): Entry {
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
