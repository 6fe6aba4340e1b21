import type { PoolClient, QueryConfig, QueryResultRow } from 'pg';
import type { EntryRow } from './entry-row.js';
import { entryFromRow } from './entry-row.js';
import type { IndexState } from './search-documents.js';
import type { DocumentRow, StateRow, StreamToIndex } from './search-rows.js';
import { documentFromRow, stateFromRow, stateValues } from './search-rows.js';
import { DOCUMENTS_PER_RUN, documentId, documentsOf } from './search-documents.js';
import { globToLike, ilikeCondition } from './search-sql.js';
import type {
  IndexLimits,
  IndexResult,
  SearchDocument,
  SearchDocumentsRequest,
  SearchIndexStatus,
} from './store.js';

/**
 * The PostgreSQL store's search index (docs/SEARCH.md): the same documents as the SQLite
 * store's (search-documents.ts), in `search_docs`, with a pg_trgm GIN index on their text that
 * answers ILIKE. `streams.search_seq` and the partial index `streams_to_index` say which runs
 * have more to index (migration 3, postgres-schema.ts).
 *
 * Each run is indexed in a transaction of its own, which locks its stream's row only for the
 * last statement: appends to it wait for that one UPDATE at most.
 */
const TO_INDEX = `FROM streams WHERE type = 'run' AND search_seq < last_seq`;

/** What the store lends its search: its queries and its connections, errors translated. */
export interface PostgresAccess {
  rows<R extends QueryResultRow>(config: QueryConfig): Promise<R[]>;
  withClient<T>(body: (client: PoolClient) => Promise<T>): Promise<T>;
}

/** Rows per INSERT of documents. */
const INSERT_ROWS = 200;

export class PostgresSearch {
  /** The stream id the last indexing pass stopped after: the next one starts there. */
  private cursor = 0;

  constructor(private readonly db: PostgresAccess) {}

  async index(limits: IndexLimits): Promise<IndexResult> {
    let streams = await this.streamsToIndex(this.cursor);
    if (streams.length === 0 && this.cursor !== 0) {
      this.cursor = 0;
      streams = await this.streamsToIndex(0);
    }
    let entries = 0;
    let documents = 0;
    let bytes = 0;
    for (const stream of streams) {
      if (entries >= limits.maxEntries || bytes >= limits.maxBytes) break;
      const done = await this.indexStream(
        stream,
        limits.maxEntries - entries,
        limits.maxBytes - bytes,
      );
      entries += done.entries;
      documents += done.documents;
      bytes += done.bytes;
      this.cursor = stream.id;
    }
    const more = (await this.db.rows({ text: `SELECT 1 ${TO_INDEX} LIMIT 1` })).length > 0;
    return { entries, documents, more };
  }

  /** Removes a deleted run's documents, a few thousand per statement. */
  async removeRun(position: number): Promise<void> {
    for (;;) {
      const removed = await this.db.rows({
        text: `DELETE FROM search_docs WHERE id IN (SELECT id FROM search_docs
          WHERE id >= $1 AND id < $2 LIMIT 5000) RETURNING 1`,
        values: [documentId(position, 0), documentId(position + 1, 0)],
      });
      if (removed.length < 5000) return;
    }
  }

  private streamsToIndex(after: number): Promise<StreamToIndex[]> {
    return this.db.rows<StreamToIndex>({
      text: `SELECT s.id, s.last_seq, s.search_seq, r.position
        FROM streams s JOIN runs r ON r.stream_id = s.id
        WHERE s.type = 'run' AND s.search_seq < s.last_seq AND s.id > $1 ORDER BY s.id LIMIT 16`,
      values: [after],
    });
  }

  private indexStream(stream: StreamToIndex, maxEntries: number, maxBytes: number) {
    return this.db.withClient(async (client) => {
      await client.query('BEGIN');
      try {
        const state = await this.stateOf(client, stream);
        const { rows } = await client.query<EntryRow>({
          text: `SELECT seq, time, kind, step, correlation_id, producer_id, log_offset, body, extra
            FROM entries WHERE stream_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
          values: [stream.id, state.indexedSeq, maxEntries],
        });
        let taken = 0;
        let bytes = 0;
        while (taken < rows.length && bytes < maxBytes) bytes += rows[taken++]!.body.length;
        const batch = rows.slice(0, taken);
        const made = documentsOf(stream.position, state, batch.map(entryFromRow));
        for (let i = 0; i < made.documents.length; i += INSERT_ROWS) {
          const slice = made.documents.slice(i, i + INSERT_ROWS);
          await client.query({
            text: `INSERT INTO search_docs (id, kind, seq, line, "offset", line_offset, line_column, text)
              SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::bigint[],
                $5::bigint[], $6::bigint[], $7::bigint[], $8::text[])`,
            values: [
              slice.map((d) => d.id),
              slice.map((d) => d.kind),
              slice.map((d) => d.seq),
              slice.map((d) => d.line),
              slice.map((d) => d.offset),
              slice.map((d) => d.lineOffset),
              slice.map((d) => d.column),
              slice.map((d) => d.text),
            ],
          });
        }
        await client.query({
          text: `INSERT INTO search_runs (stream_id, next_line, pending_offset, line_offset,
              line_column, pending_text, documents) VALUES ($1, $2, $3, $4, $5, $6, $7)
            ON CONFLICT (stream_id) DO UPDATE SET next_line = excluded.next_line,
              pending_offset = excluded.pending_offset, line_offset = excluded.line_offset,
              line_column = excluded.line_column, pending_text = excluded.pending_text,
              documents = excluded.documents`,
          values: [stream.id, ...stateValues(made.state)],
        });
        // Last, so the stream's row is locked only from here to COMMIT.
        const indexedSeq = batch.at(-1)?.seq ?? stream.last_seq;
        await client.query({
          text: 'UPDATE streams SET search_seq = $1 WHERE id = $2',
          values: [indexedSeq, stream.id],
        });
        await client.query('COMMIT');
        return { entries: batch.length, documents: made.documents.length, bytes };
      } catch (error) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw error;
      }
    });
  }

  private async stateOf(client: PoolClient, stream: StreamToIndex): Promise<IndexState> {
    const { rows } = await client.query<StateRow>({
      text: 'SELECT next_line, pending_offset, line_offset, line_column, pending_text, documents FROM search_runs WHERE stream_id = $1',
      values: [stream.id],
    });
    return stateFromRow(stream, rows[0]);
  }

  async status(): Promise<SearchIndexStatus> {
    const [counts] = await this.db.rows<{ runs: number; entries: number | null }>({
      text: `SELECT count(*)::bigint AS runs, sum(last_seq - search_seq)::bigint AS entries ${TO_INDEX}`,
    });
    if (!counts || counts.runs === 0) {
      return { pendingRuns: 0, pendingEntries: 0, oldestPendingAt: null };
    }
    const [oldest] = await this.db.rows<{ time: number | null }>({
      text: `SELECT min(e.time) AS time FROM streams s
        JOIN entries e ON e.stream_id = s.id AND e.seq = s.search_seq + 1
        WHERE s.type = 'run' AND s.search_seq < s.last_seq`,
    });
    return {
      pendingRuns: counts.runs,
      pendingEntries: counts.entries ?? 0,
      oldestPendingAt: oldest?.time ?? null,
    };
  }

  async documents(request: SearchDocumentsRequest): Promise<SearchDocument[]> {
    const text = ilikeCondition('d.text', request.query, 1);
    const params: unknown[] = [...text.params];
    const param = (value: unknown) => {
      params.push(value);
      return `$${params.length}`;
    };
    const where = [text.sql, `d.id < ${param(request.beforeId ?? Number.MAX_SAFE_INTEGER)}`];
    if (request.since !== undefined)
      where.push(`d.id >= ${param(await this.firstIdSince(request.since))}`);
    if (request.until !== undefined)
      where.push(`d.id < ${param(await this.firstIdSince(request.until))}`);
    if (request.kind !== undefined) where.push(`d.kind = ${param(request.kind)}`);
    if (request.pipeline !== undefined) {
      where.push(`r.pipeline LIKE ${param(globToLike(request.pipeline))}`);
    }
    if (request.statuses !== undefined && request.statuses.length > 0) {
      where.push(`r.status = ANY(${param([...request.statuses])}::text[])`);
    }
    const rows = await this.db.rows<DocumentRow>({
      text: `SELECT d.id, d.kind, d.seq, d.line, d."offset" AS offset, d.line_offset, d.line_column, d.text,
          r.pipeline, r.run_id, r.status, r.created_at
        FROM search_docs d JOIN runs r ON r.position = d.id / ${DOCUMENTS_PER_RUN}
        WHERE ${where.join(' AND ')} ORDER BY d.id DESC LIMIT ${param(request.limit)}`,
      values: params,
    });
    return rows.map(documentFromRow);
  }

  /** The first document id of the runs created at or after `time`. */
  private async firstIdSince(time: number): Promise<number> {
    const [row] = await this.db.rows<{ position: number }>({
      text: 'SELECT position FROM runs WHERE created_at >= $1 ORDER BY created_at LIMIT 1',
      values: [time],
    });
    return row === undefined ? Number.MAX_SAFE_INTEGER : documentId(row.position, 0);
  }
}
