import type Database from 'better-sqlite3';
import type { RunStatus } from '../model/run.js';
import type { StreamKey } from '../model/stream-key.js';
import { streamId } from '../model/stream-key.js';
import type { RunToSeal, SealRow, SealedRun, SegmentRecord } from './seal-catalog.js';
import type { SealedDocument } from './segment-format.js';
import { DOCUMENTS_PER_RUN, documentId } from './search-documents.js';
import { globToSqliteGlob } from './search-sql.js';
import type { SearchDocumentsRequest, StorageBytes } from './store.js';

/**
 * The SQLite store's catalog of sealed segments (seal-catalog.ts). `streams.sealed_seq` is how
 * far a stream is sealed; `segments` holds one row per segment, `sealed_runs` the runs that have
 * any, by run position, so a search walks them newest first by index.
 */
export const SEAL_SCHEMA = `
CREATE TABLE IF NOT EXISTS segments (
  stream_id     INTEGER NOT NULL,
  position      INTEGER NOT NULL,
  first_seq     INTEGER NOT NULL,
  last_seq      INTEGER NOT NULL,
  name          TEXT    NOT NULL UNIQUE,
  log_offset    INTEGER NOT NULL,
  log_end       INTEGER NOT NULL,
  log_lines_end INTEGER NOT NULL,
  last_doc_id   INTEGER,
  bytes         INTEGER NOT NULL,
  raw_bytes     INTEGER NOT NULL,
  sealed_at     INTEGER NOT NULL,
  hot_dropped   INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (stream_id, first_seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS segments_to_drop ON segments (sealed_at) WHERE hot_dropped = 0;
CREATE TABLE IF NOT EXISTS sealed_runs (
  position  INTEGER PRIMARY KEY,
  stream_id INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS streams_to_seal ON streams (id)
  WHERE key < 'topic' AND sealed_seq < last_seq;
`;

/** Adds `streams.sealed_seq` to a database made before sealing. */
export function addSealColumn(db: Database.Database): void {
  const columns = db.prepare<[], { name: string }>('PRAGMA table_info(streams)').all();
  if (!columns.some((column) => column.name === 'sealed_seq')) {
    db.exec('ALTER TABLE streams ADD COLUMN sealed_seq INTEGER NOT NULL DEFAULT 0');
  }
}

const TERMINAL_SQL = `('success', 'failed', 'partialSuccess', 'stopped', 'cancelled')`;

interface SegmentRow {
  stream_id: number;
  position: number;
  last_doc_id: number | null;
  name: string;
  first_seq: number;
  last_seq: number;
  log_offset: number;
  log_end: number;
  log_lines_end: number;
  bytes: number;
  raw_bytes: number;
  sealed_at: number;
  hot_dropped: number;
}

const SEGMENT_COLUMNS = `stream_id, position, last_doc_id, name, first_seq, last_seq, log_offset, log_end, log_lines_end,
  bytes, raw_bytes, sealed_at, hot_dropped`;

function recordFromRow(row: SegmentRow): SegmentRecord {
  return {
    streamId: row.stream_id,
    position: row.position,
    lastDocumentId: row.last_doc_id ?? undefined,
    name: row.name,
    firstSeq: row.first_seq,
    lastSeq: row.last_seq,
    logOffset: row.log_offset,
    logEnd: row.log_end,
    logLinesEnd: row.log_lines_end,
    bytes: row.bytes,
    rawBytes: row.raw_bytes,
    sealedAt: row.sealed_at,
    hotDropped: row.hot_dropped === 1,
  };
}

/** A write of one step (it never pauses). */
// eslint-disable-next-line require-yield -- one step, nothing to pause between
function* oneStep<T>(fn: () => T): Generator<void, T> {
  return fn();
}

/** Runs a write transaction's body in the store's queue (SqliteStore.write). */
export type SqliteWrite = <T>(body: () => Generator<void, T, void>) => Promise<T>;

export class SqliteSealCatalog {
  private readonly r;
  private readonly w;

  constructor(
    db: Database.Database,
    private readonly reader: Database.Database,
    private readonly write: SqliteWrite,
    /** Removes a stream's entries in [from, to) and a run's documents to an id, in slices. */
    private readonly removeRows: (streamId: number, from: number, to: number) => Promise<void>,
    private readonly removeDocuments: (position: number, beforeId: number) => Promise<void>,
    /** Truncates the file by the pages the removals freed. */
    private readonly giveBackSpace: () => Promise<void>,
  ) {
    this.r = {
      runsToSeal: reader.prepare<
        [number, number],
        {
          stream_id: number;
          pipeline: string;
          run_id: string;
          position: number;
          after_seq: number;
          last_seq: number;
        }
      >(
        `SELECT s.id AS stream_id, r.pipeline, r.run_id, r.rowid AS position,
            max(s.sealed_seq, s.first_seq - 1) AS after_seq, s.last_seq
           FROM streams s INDEXED BY streams_to_seal JOIN runs r ON r.stream_id = s.id
          WHERE s.key < 'topic' AND s.sealed_seq < s.last_seq AND s.search_seq >= s.last_seq
            AND r.status IN ${TERMINAL_SQL} AND r.ended_at < ?
          ORDER BY s.id LIMIT ?`,
      ),
      rows: reader.prepare<[number, number, number], SealRow>(
        `SELECT seq, time, kind, step, correlation_id, producer_id, log_offset, log_line, body, extra
           FROM entries WHERE stream_id = ? AND seq > ? ORDER BY seq LIMIT ?`,
      ),
      documents: reader.prepare<
        [number, number],
        {
          id: number;
          kind: 'log' | 'event';
          seq: number | null;
          line: number | null;
          offset: number | null;
          line_offset: number | null;
          line_column: number | null;
          bytes: number;
        }
      >(
        `SELECT id, kind, seq, line, offset, line_offset, line_column,
            length(CAST(text AS BLOB)) AS bytes
           FROM search_docs WHERE id >= ? AND id < ? ORDER BY id`,
      ),
      segmentsOf: reader.prepare<[string], SegmentRow>(
        `SELECT ${SEGMENT_COLUMNS} FROM segments
          WHERE stream_id = (SELECT id FROM streams WHERE key = ?) ORDER BY first_seq`,
      ),
      toDrop: reader.prepare<[number, number], SegmentRow>(
        `SELECT ${SEGMENT_COLUMNS} FROM segments INDEXED BY segments_to_drop
          WHERE hot_dropped = 0 AND sealed_at < ? ORDER BY sealed_at LIMIT ?`,
      ),
      knows: reader.prepare<[string], { one: number }>(
        'SELECT 1 AS one FROM segments WHERE name = ?',
      ),
      sealedBytes: reader.prepare<[], { bytes: number; raw: number; count: number; log: number }>(
        `SELECT coalesce(sum(bytes), 0) AS bytes, coalesce(sum(raw_bytes), 0) AS raw,
            count(*) AS count, coalesce(sum(log_end - log_offset), 0) AS log FROM segments`,
      ),
      logBytes: reader.prepare<[], { bytes: number }>(
        `SELECT coalesce(sum(log_bytes), 0) AS bytes FROM streams WHERE key < 'topic'`,
      ),
      firstRunSince: reader.prepare<[number], { position: number }>(
        `SELECT rowid AS position FROM runs INDEXED BY runs_by_created
          WHERE created_at >= ? ORDER BY created_at LIMIT 1`,
      ),
    };
    this.w = {
      stream: db.prepare<[number], { first_seq: number; sealed_seq: number; last_seq: number }>(
        'SELECT first_seq, sealed_seq, last_seq FROM streams WHERE id = ?',
      ),
      runAt: db.prepare<[number, number], { one: number }>(
        'SELECT 1 AS one FROM runs WHERE rowid = ? AND stream_id = ?',
      ),
      insert: db.prepare(
        `INSERT INTO segments (stream_id, position, name, first_seq, last_seq, log_offset,
           log_end, log_lines_end, last_doc_id, bytes, raw_bytes, sealed_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      ),
      sealedTo: db.prepare<[number, number]>('UPDATE streams SET sealed_seq = ? WHERE id = ?'),
      noteRun: db.prepare<[number, number]>(
        'INSERT OR IGNORE INTO sealed_runs (position, stream_id) VALUES (?, ?)',
      ),
      dropped: db.prepare<[string]>('UPDATE segments SET hot_dropped = 1 WHERE name = ?'),
      forgetStream: db.prepare<[number]>('DELETE FROM segments WHERE stream_id = ?'),
      forgetRun: db.prepare<[number]>('DELETE FROM sealed_runs WHERE position = ?'),
    };
  }

  async runsToSeal(limit: number, endedBefore: number): Promise<RunToSeal[]> {
    return this.r.runsToSeal.all(endedBefore, limit).map((row) => ({
      streamId: row.stream_id,
      key: { type: 'run', pipeline: row.pipeline, runId: row.run_id },
      position: row.position,
      afterSeq: row.after_seq,
      lastSeq: row.last_seq,
    }));
  }

  async rowsToSeal(streamId: number, afterSeq: number, limit: number): Promise<SealRow[]> {
    return this.r.rows.all(streamId, afterSeq, limit);
  }

  async documentsToSeal(fromId: number, toId: number): Promise<SealedDocument[]> {
    return this.r.documents.all(fromId, toId).map((row) => ({
      id: row.id,
      kind: row.kind,
      seq: row.seq,
      line: row.line,
      offset: row.offset,
      lineOffset: row.line_offset,
      column: row.line_column,
      bytes: row.kind === 'log' ? row.bytes : 0,
    }));
  }

  recordSegment(record: Omit<SegmentRecord, 'hotDropped'>): Promise<boolean> {
    const position = record.position;
    return this.write(() =>
      oneStep(() => {
        const stream = this.w.stream.get(record.streamId);
        // The entries must be the next to seal of a run that still exists.
        if (!stream || !this.w.runAt.get(position, record.streamId)) return false;
        if (record.firstSeq !== Math.max(stream.sealed_seq, stream.first_seq - 1) + 1) return false;
        if (record.lastSeq > stream.last_seq) return false;
        const r = record;
        this.w.insert.run(
          r.streamId,
          r.position,
          r.name,
          r.firstSeq,
          r.lastSeq,
          r.logOffset,
          r.logEnd,
          r.logLinesEnd,
          r.lastDocumentId ?? null,
          r.bytes,
          r.rawBytes,
          r.sealedAt,
        );
        this.w.sealedTo.run(r.lastSeq, r.streamId);
        this.w.noteRun.run(position, r.streamId);
        return true;
      }),
    );
  }

  async segmentsOf(key: StreamKey): Promise<SegmentRecord[]> {
    return this.r.segmentsOf.all(streamId(key)).map(recordFromRow);
  }

  async segmentsToDrop(sealedBefore: number, limit: number): Promise<SegmentRecord[]> {
    return this.r.toDrop.all(sealedBefore, limit).map(recordFromRow);
  }

  async dropHotRows(record: SegmentRecord): Promise<void> {
    await this.removeRows(record.streamId, record.firstSeq, record.lastSeq + 1);
    if (record.lastDocumentId !== undefined) {
      await this.removeDocuments(record.position, record.lastDocumentId + 1);
    }
    await this.write(() => oneStep(() => this.w.dropped.run(record.name)));
    // Rows alone free pages too: a segment sealed before search indexed it has no documents.
    await this.giveBackSpace();
  }

  /** Inside the run's deletion: its segments are no longer its stream's (their files go after). */
  forgetRun(streamIdOfRun: number, position: number): void {
    this.w.forgetStream.run(streamIdOfRun);
    this.w.forgetRun.run(position);
    this.w.sealedTo.run(0, streamIdOfRun);
  }

  async sealedRunsForSearch(
    request: SearchDocumentsRequest,
    beforePosition: number,
    limit: number,
  ): Promise<SealedRun[]> {
    const where = ['sr.position < ?'];
    const params: unknown[] = [beforePosition];
    if (request.since !== undefined) {
      where.push('sr.position >= ?');
      params.push(this.firstPositionSince(request.since));
    }
    if (request.until !== undefined) {
      where.push('sr.position < ?');
      params.push(this.firstPositionSince(request.until));
    }
    if (request.pipeline !== undefined) {
      where.push('r.pipeline GLOB ?');
      params.push(globToSqliteGlob(request.pipeline));
    }
    if (request.statuses !== undefined && request.statuses.length > 0) {
      where.push(`r.status IN (${request.statuses.map(() => '?').join(', ')})`);
      params.push(...request.statuses);
    }
    params.push(limit);
    const rows = this.reader
      .prepare<
        unknown[],
        {
          stream_id: number;
          position: number;
          pipeline: string;
          run_id: string;
          status: RunStatus;
          created_at: number;
        }
      >(
        `SELECT sr.stream_id, sr.position, r.pipeline, r.run_id, r.status, r.created_at
           FROM sealed_runs sr JOIN runs r ON r.rowid = sr.position
          WHERE ${where.join(' AND ')} ORDER BY sr.position DESC LIMIT ?`,
      )
      .all(...params);
    return rows.map((row) => ({
      streamId: row.stream_id,
      position: row.position,
      pipeline: row.pipeline,
      runId: row.run_id,
      status: row.status,
      createdAt: row.created_at,
    }));
  }

  private firstPositionSince(time: number): number {
    return this.r.firstRunSince.get(time)?.position ?? Number.MAX_SAFE_INTEGER;
  }

  async storageBytes(): Promise<StorageBytes> {
    const sealed = this.r.sealedBytes.get()!;
    return {
      hotLogBytes: Math.max(0, this.r.logBytes.get()!.bytes - sealed.log),
      sealedRawBytes: sealed.raw,
      sealedBytes: sealed.bytes,
      segments: sealed.count,
    };
  }

  async knowsSegment(name: string): Promise<boolean> {
    return this.r.knows.get(name) !== undefined;
  }
}

/** The id range of a run's documents. */
export function runDocumentIds(position: number): [number, number] {
  return [documentId(position, 0), documentId(position, DOCUMENTS_PER_RUN)];
}
