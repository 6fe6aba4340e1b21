import type { PoolClient } from 'pg';
import type { RunStatus } from '../model/run.js';
import type { StreamKey } from '../model/stream-key.js';
import type { RunToSeal, SealRow, SealedRun, SegmentRecord } from './seal-catalog.js';
import type { SealedDocument } from './segment-format.js';
import { globToLike } from './search-sql.js';
import type { PostgresAccess } from './postgres-search.js';
import type { SearchDocumentsRequest, StorageBytes } from './store.js';

/**
 * The PostgreSQL store's catalog of sealed segments (seal-catalog.ts; migration 7 of
 * postgres-schema.ts): the same rows as the SQLite store's. A record is written under its
 * stream row's lock, so it is ordered with the run's appends and its deletion.
 */
const TERMINAL_SQL = `('success', 'failed', 'partialSuccess', 'stopped', 'cancelled')`;
const SEGMENT_COLUMNS = `stream_id, position, last_doc_id, name, first_seq, last_seq, log_offset,
  log_end, log_lines_end, bytes, raw_bytes, sealed_at, hot_dropped`;
/** Rows removed per statement when hot rows are dropped. */
const DROP_ROWS = 10_000;

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
  hot_dropped: boolean;
}

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
    hotDropped: row.hot_dropped,
  };
}

function keyValues(key: StreamKey): [string, string, string] {
  return key.type === 'run' ? ['run', key.pipeline, key.runId] : ['topic', '', key.topic];
}

export class PostgresSealCatalog {
  constructor(private readonly db: PostgresAccess) {}

  async runsToSeal(limit: number, endedBefore: number): Promise<RunToSeal[]> {
    const rows = await this.db.rows<{
      stream_id: number;
      pipeline: string;
      run_id: string;
      position: number;
      after_seq: number;
      last_seq: number;
    }>({
      text: `SELECT s.id AS stream_id, r.pipeline, r.run_id, r.position,
          greatest(s.sealed_seq, s.first_seq - 1) AS after_seq, s.last_seq
        FROM streams s JOIN runs r ON r.stream_id = s.id
        WHERE s.type = 'run' AND s.sealed_seq < s.last_seq AND s.search_seq >= s.last_seq
          AND r.status IN ${TERMINAL_SQL} AND r.ended_at < $1
        ORDER BY s.id LIMIT $2`,
      values: [endedBefore, limit],
    });
    return rows.map((row) => ({
      streamId: row.stream_id,
      key: { type: 'run', pipeline: row.pipeline, runId: row.run_id },
      position: row.position,
      afterSeq: row.after_seq,
      lastSeq: row.last_seq,
    }));
  }

  rowsToSeal(streamId: number, afterSeq: number, limit: number): Promise<SealRow[]> {
    return this.db.rows<SealRow>({
      text: `SELECT seq, time, kind, step, correlation_id, producer_id, log_offset, log_line,
          body, extra FROM entries WHERE stream_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
      values: [streamId, afterSeq, limit],
    });
  }

  async documentsToSeal(fromId: number, toId: number): Promise<SealedDocument[]> {
    const rows = await this.db.rows<{
      id: number;
      kind: 'log' | 'event';
      seq: number | null;
      line: number | null;
      offset: number | null;
      line_offset: number | null;
      line_column: number | null;
      bytes: number;
    }>({
      text: `SELECT id, kind, seq, line, "offset", line_offset, line_column,
          octet_length(text)::bigint AS bytes
        FROM search_docs WHERE id >= $1 AND id < $2 ORDER BY id`,
      values: [fromId, toId],
    });
    return rows.map((row) => ({
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
    return this.db.withClient(async (client) => {
      await client.query('BEGIN');
      try {
        const recorded = await this.recordIn(client, record);
        await client.query(recorded ? 'COMMIT' : 'ROLLBACK');
        return recorded;
      } catch (error) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw error;
      }
    });
  }

  private async recordIn(client: PoolClient, r: Omit<SegmentRecord, 'hotDropped'>) {
    const { rows } = await client.query<{
      first_seq: number;
      sealed_seq: number;
      last_seq: number;
    }>({
      text: 'SELECT first_seq, sealed_seq, last_seq FROM streams WHERE id = $1 FOR UPDATE',
      values: [r.streamId],
    });
    const stream = rows[0];
    // The entries must be the next to seal of a run that still exists.
    if (!stream) return false;
    const run = await client.query({
      text: 'SELECT 1 FROM runs WHERE position = $1 AND stream_id = $2',
      values: [r.position, r.streamId],
    });
    if (run.rows.length === 0) return false;
    if (r.firstSeq !== Math.max(stream.sealed_seq, stream.first_seq - 1) + 1) return false;
    if (r.lastSeq > stream.last_seq) return false;
    await client.query({
      text: `INSERT INTO segments (stream_id, position, name, first_seq, last_seq, log_offset,
          log_end, log_lines_end, last_doc_id, bytes, raw_bytes, sealed_at)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
      values: [
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
      ],
    });
    await client.query({
      text: 'UPDATE streams SET sealed_seq = $1 WHERE id = $2',
      values: [r.lastSeq, r.streamId],
    });
    await client.query({
      text: 'INSERT INTO sealed_runs (position, stream_id) VALUES ($1, $2) ON CONFLICT DO NOTHING',
      values: [r.position, r.streamId],
    });
    return true;
  }

  async segmentsOf(key: StreamKey): Promise<SegmentRecord[]> {
    const rows = await this.db.rows<SegmentRow>({
      text: `SELECT ${SEGMENT_COLUMNS} FROM segments WHERE stream_id = (SELECT id FROM streams
          WHERE type = $1 AND pipeline = $2 AND name = $3) ORDER BY first_seq`,
      values: keyValues(key),
    });
    return rows.map(recordFromRow);
  }

  async segmentsToDrop(sealedBefore: number, limit: number): Promise<SegmentRecord[]> {
    const rows = await this.db.rows<SegmentRow>({
      text: `SELECT ${SEGMENT_COLUMNS} FROM segments WHERE NOT hot_dropped AND sealed_at < $1
        ORDER BY sealed_at LIMIT $2`,
      values: [sealedBefore, limit],
    });
    return rows.map(recordFromRow);
  }

  async dropHotRows(record: SegmentRecord): Promise<void> {
    for (let from = record.firstSeq; from <= record.lastSeq; from += DROP_ROWS) {
      // first_seq stays: the entries are still the stream's, in the segment.
      await this.db.rows({
        text: 'DELETE FROM entries WHERE stream_id = $1 AND seq >= $2 AND seq < $3',
        values: [record.streamId, from, Math.min(record.lastSeq + 1, from + DROP_ROWS)],
      });
    }
    if (record.lastDocumentId !== undefined) {
      const first = record.position * 2 ** 26;
      for (;;) {
        const removed = await this.db.rows({
          text: `DELETE FROM search_docs WHERE id IN (SELECT id FROM search_docs
            WHERE id >= $1 AND id <= $2 LIMIT 5000) RETURNING 1`,
          values: [first, record.lastDocumentId],
        });
        if (removed.length < 5000) break;
      }
    }
    await this.db.rows({
      text: 'UPDATE segments SET hot_dropped = true WHERE name = $1',
      values: [record.name],
    });
  }

  /** In the run's deletion transaction: its segments are no longer its stream's. */
  async forgetRun(
    tx: { rows(config: { text: string; values: unknown[] }): Promise<unknown> },
    streamId: number,
    position: number,
  ): Promise<void> {
    const client = tx;
    await client.rows({ text: 'DELETE FROM segments WHERE stream_id = $1', values: [streamId] });
    await client.rows({ text: 'DELETE FROM sealed_runs WHERE position = $1', values: [position] });
    await client.rows({
      text: 'UPDATE streams SET sealed_seq = 0 WHERE id = $1',
      values: [streamId],
    });
  }

  async sealedRunsForSearch(
    request: SearchDocumentsRequest,
    beforePosition: number,
    limit: number,
  ): Promise<SealedRun[]> {
    const where = ['sr.position < $1'];
    const values: unknown[] = [beforePosition];
    const param = (value: unknown) => {
      values.push(value);
      return `$${values.length}`;
    };
    // Runs by the position of the first created at or after the time, as the hot index does.
    const firstSince = (time: number) =>
      `coalesce((SELECT position FROM runs WHERE created_at >= ${param(time)}
        ORDER BY created_at LIMIT 1), ${Number.MAX_SAFE_INTEGER})`;
    if (request.since !== undefined) where.push(`sr.position >= ${firstSince(request.since)}`);
    if (request.until !== undefined) where.push(`sr.position < ${firstSince(request.until)}`);
    if (request.pipeline !== undefined) {
      where.push(`r.pipeline LIKE ${param(globToLike(request.pipeline))}`);
    }
    if (request.statuses !== undefined && request.statuses.length > 0) {
      where.push(`r.status = ANY(${param(request.statuses)}::text[])`);
    }
    const rows = await this.db.rows<{
      stream_id: number;
      position: number;
      pipeline: string;
      run_id: string;
      status: RunStatus;
      created_at: number;
    }>({
      text: `SELECT sr.stream_id, sr.position, r.pipeline, r.run_id, r.status, r.created_at
        FROM sealed_runs sr JOIN runs r ON r.position = sr.position
        WHERE ${where.join(' AND ')} ORDER BY sr.position DESC LIMIT ${param(limit)}`,
      values,
    });
    return rows.map((row) => ({
      streamId: row.stream_id,
      position: row.position,
      pipeline: row.pipeline,
      runId: row.run_id,
      status: row.status,
      createdAt: row.created_at,
    }));
  }

  async storageBytes(): Promise<StorageBytes> {
    const [row] = await this.db.rows<{
      log: number;
      sealed_log: number;
      bytes: number;
      raw: number;
      count: number;
    }>({
      text: `SELECT (SELECT coalesce(sum(log_bytes), 0) FROM streams WHERE type = 'run')::bigint AS log,
          coalesce(sum(log_end - log_offset), 0)::bigint AS sealed_log,
          coalesce(sum(bytes), 0)::bigint AS bytes, coalesce(sum(raw_bytes), 0)::bigint AS raw,
          count(*)::bigint AS count FROM segments`,
      values: [],
    });
    return {
      hotLogBytes: Math.max(0, row!.log - row!.sealed_log),
      sealedRawBytes: row!.raw,
      sealedBytes: row!.bytes,
      segments: row!.count,
    };
  }

  async knowsSegment(name: string): Promise<boolean> {
    const rows = await this.db.rows({
      text: 'SELECT 1 FROM segments WHERE name = $1',
      values: [name],
    });
    return rows.length > 0;
  }
}
