import type Database from 'better-sqlite3';
import type { EntryRow } from './entry-row.js';
import { entryFromRow } from './entry-row.js';
import type { IndexState } from './search-documents.js';
import type { DocumentRow, StateRow, StreamToIndex } from './search-rows.js';
import { documentFromRow, stateFromRow, stateValues } from './search-rows.js';
import { DOCUMENTS_PER_RUN, documentId, documentsOf } from './search-documents.js';
import { fts5Query, globToSqliteGlob } from './search-sql.js';
import type {
  IndexLimits,
  IndexResult,
  SearchDocument,
  SearchDocumentsRequest,
  SearchIndexStatus,
} from './store.js';

/**
 * The SQLite store's search index (docs/SEARCH.md): documents in `search_docs`, their trigrams
 * in the FTS5 table `search_fts` (external content: the text is kept once, in search_docs).
 * `streams.search_seq` says how far each run is indexed; the partial index `streams_to_index`
 * holds exactly the runs with more to index, so finding them costs nothing when none has.
 */
export const SEARCH_SCHEMA = `
CREATE INDEX IF NOT EXISTS streams_to_index ON streams (id)
  WHERE key < 'topic' AND search_seq < last_seq;
CREATE INDEX IF NOT EXISTS runs_by_stream ON runs (stream_id);
CREATE INDEX IF NOT EXISTS runs_by_created ON runs (created_at);
CREATE TABLE IF NOT EXISTS search_runs (
  stream_id      INTEGER PRIMARY KEY,
  next_line      INTEGER NOT NULL,
  pending_offset INTEGER NOT NULL,
  line_offset    INTEGER NOT NULL,
  line_column    INTEGER NOT NULL,
  pending_text   TEXT    NOT NULL,
  documents      INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS search_docs (
  id     INTEGER PRIMARY KEY,
  kind   TEXT    NOT NULL,
  seq    INTEGER,
  line        INTEGER,
  offset      INTEGER,
  line_offset INTEGER,
  line_column INTEGER,
  text        TEXT    NOT NULL
);
CREATE VIRTUAL TABLE IF NOT EXISTS search_fts USING fts5(
  text, content = 'search_docs', content_rowid = 'id', tokenize = 'trigram'
);
`;

/** Adds `streams.search_seq` to a database made before search existed: all of it is then indexed. */
export function addSearchColumn(db: Database.Database): void {
  const columns = db.prepare<[], { name: string }>(`PRAGMA table_info(streams)`).all();
  if (!columns.some((column) => column.name === 'search_seq')) {
    db.exec('ALTER TABLE streams ADD COLUMN search_seq INTEGER NOT NULL DEFAULT 0');
  }
}

const TO_INDEX = `FROM streams INDEXED BY streams_to_index WHERE key < 'topic' AND search_seq < last_seq`;
/** Runs to index, a few at a time, in stream id order from a cursor (round robin). */
const STREAMS_TO_INDEX = `SELECT s.id, s.last_seq, s.search_seq, r.rowid AS position
  FROM streams s INDEXED BY streams_to_index JOIN runs r ON r.stream_id = s.id
  WHERE s.key < 'topic' AND s.search_seq < s.last_seq AND s.id > ? ORDER BY s.id LIMIT 16`;

type Steps<T> = Generator<void, T, void>;

function writeStatements(db: Database.Database) {
  return {
    streamsToIndex: db.prepare<[number], StreamToIndex>(STREAMS_TO_INDEX),
    anyToIndex: db.prepare(`SELECT 1 ${TO_INDEX} LIMIT 1`),
    entriesAfter: db.prepare<[number, number, number], EntryRow>(
      `SELECT seq, time, kind, step, correlation_id, producer_id, log_offset, body, extra
         FROM entries WHERE stream_id = ? AND seq > ? ORDER BY seq LIMIT ?`,
    ),
    insertDocument: db.prepare(
      `INSERT INTO search_docs (id, kind, seq, line, offset, line_offset, line_column, text)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    insertTrigrams: db.prepare('INSERT INTO search_fts (rowid, text) VALUES (?, ?)'),
    state: db.prepare<[number], StateRow>(
      'SELECT next_line, pending_offset, line_offset, line_column, pending_text, documents FROM search_runs WHERE stream_id = ?',
    ),
    saveState: db.prepare(
      `INSERT INTO search_runs (stream_id, next_line, pending_offset, line_offset, line_column,
           pending_text, documents) VALUES (?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (stream_id) DO UPDATE SET next_line = excluded.next_line,
         pending_offset = excluded.pending_offset, line_offset = excluded.line_offset,
         line_column = excluded.line_column, pending_text = excluded.pending_text,
         documents = excluded.documents`,
    ),
    indexedTo: db.prepare<[number, number]>('UPDATE streams SET search_seq = ? WHERE id = ?'),
    dropState: db.prepare<[number]>('DELETE FROM search_runs WHERE stream_id = ?'),
    documentsOfRun: db.prepare<[number, number], { id: number; text: string }>(
      'SELECT id, text FROM search_docs WHERE id >= ? AND id < ? ORDER BY id LIMIT 500',
    ),
    forgetTrigrams: db.prepare<[number, string]>(
      `INSERT INTO search_fts (search_fts, rowid, text) VALUES ('delete', ?, ?)`,
    ),
    deleteDocument: db.prepare<[number]>('DELETE FROM search_docs WHERE id = ?'),
    merge: db.prepare<[number]>(`INSERT INTO search_fts (search_fts, rank) VALUES ('merge', ?)`),
    totalChanges: db.prepare<[], { n: number }>('SELECT total_changes() AS n'),
  };
}

function readStatements(db: Database.Database) {
  return {
    pending: db.prepare<[], { runs: number; entries: number | null }>(
      `SELECT count(*) AS runs, sum(last_seq - search_seq) AS entries ${TO_INDEX}`,
    ),
    oldestPending: db.prepare<[], { time: number | null }>(
      `SELECT min(e.time) AS time FROM streams s INDEXED BY streams_to_index
         JOIN entries e ON e.stream_id = s.id AND e.seq = s.search_seq + 1
        WHERE s.key < 'topic' AND s.search_seq < s.last_seq`,
    ),
    firstRunSince: db.prepare<[number], { position: number }>(
      `SELECT rowid AS position FROM runs INDEXED BY runs_by_created
        WHERE created_at >= ? ORDER BY created_at LIMIT 1`,
    ),
  };
}

export class SqliteSearch {
  /** The stream id the last indexing pass stopped after: the next one starts there. */
  private cursor = 0;
  private readonly queries = new Map<string, Database.Statement<unknown[], DocumentRow>>();
  private readonly w: ReturnType<typeof writeStatements>;
  private readonly r: ReturnType<typeof readStatements>;

  /**
   * Indexing runs on the writing connection, in its write transactions; searches on the
   * reading one, so they see committed documents only. The schema must exist.
   */
  constructor(
    db: Database.Database,
    private readonly reader: Database.Database,
  ) {
    this.w = writeStatements(db);
    this.r = readStatements(reader);
  }

  /** One indexing pass, as a write transaction's body. */
  *index(limits: IndexLimits): Steps<IndexResult> {
    let entries = 0;
    let documents = 0;
    let bytes = 0;
    let streams = this.w.streamsToIndex.all(this.cursor);
    if (streams.length === 0 && this.cursor !== 0) {
      this.cursor = 0;
      streams = this.w.streamsToIndex.all(0);
    }
    for (const stream of streams) {
      if (entries >= limits.maxEntries || bytes >= limits.maxBytes) break;
      const done = yield* this.indexStream(
        stream,
        limits.maxEntries - entries,
        limits.maxBytes - bytes,
      );
      entries += done.entries;
      documents += done.documents;
      bytes += done.bytes;
      this.cursor = stream.id;
    }
    const more = this.w.anyToIndex.get() !== undefined;
    return { entries, documents, more };
  }

  private *indexStream(stream: StreamToIndex, maxEntries: number, maxBytes: number) {
    const state = this.stateOf(stream);
    const rows: EntryRow[] = [];
    let bytes = 0;
    for (const row of this.w.entriesAfter.iterate(stream.id, stream.search_seq, maxEntries)) {
      rows.push(row);
      bytes += row.body.length;
      if (bytes >= maxBytes) break;
    }
    const indexedSeq = rows.at(-1)?.seq ?? stream.last_seq;
    const made = documentsOf(stream.position, state, rows.map(entryFromRow));
    for (const document of made.documents) {
      const { id, kind, seq, line, offset, lineOffset, column, text } = document;
      this.w.insertDocument.run(id, kind, seq, line, offset, lineOffset, column, text);
      this.w.insertTrigrams.run(id, text);
      yield;
    }
    this.w.saveState.run(stream.id, ...stateValues(made.state));
    this.w.indexedTo.run(indexedSeq, stream.id);
    return { entries: rows.length, documents: made.documents.length, bytes };
  }

  /** A deleted run's stream: nothing of it to index up to `seq` (its tombstone), no state kept. */
  forget(streamId: number, seq: number): void {
    this.w.dropState.run(streamId);
    this.w.indexedTo.run(seq, streamId);
  }

  /**
   * Removes some of a deleted run's documents (or of a sealed one's, those below `beforeId`)
   * and their trigrams, as a write transaction's
   * body; whether any were left to remove. (An external-content FTS5 table is told each
   * document's text to forget its trigrams.)
   */
  *removeRun(position: number, beforeId?: number): Steps<number> {
    const end = Math.min(documentId(position + 1, 0), beforeId ?? Number.MAX_SAFE_INTEGER);
    const rows = this.w.documentsOfRun.all(documentId(position, 0), end);
    let chars = 0;
    for (const { id, text } of rows) {
      this.w.forgetTrigrams.run(id, text);
      this.w.deleteDocument.run(id);
      chars += text.length;
      yield;
    }
    return chars;
  }

  /**
   * One step of merging the full-text index's segments, all levels (a negative 'merge'), as a
   * write transaction's body; whether it did any work. Deleting an external-content document
   * only adds a delete marker: its trigrams' space comes back when the segments holding them
   * are merged, which this does a few hundred kilobytes at a time. The caller bounds how many
   * steps a removal pays for, so the work stays proportional to what was removed.
   */
  // eslint-disable-next-line require-yield -- one bounded statement, nothing to pause between
  *compact(pages = 64): Steps<boolean> {
    const before = this.w.totalChanges.get()!.n;
    this.w.merge.run(-pages);
    return this.w.totalChanges.get()!.n - before >= 2;
  }

  private stateOf(stream: StreamToIndex): IndexState {
    return stateFromRow(stream, this.w.state.get(stream.id));
  }

  status(): SearchIndexStatus {
    const counts = this.r.pending.get()!;
    return {
      pendingRuns: counts.runs,
      pendingEntries: counts.entries ?? 0,
      oldestPendingAt: counts.runs === 0 ? null : (this.r.oldestPending.get()!.time ?? null),
    };
  }

  documents(request: SearchDocumentsRequest): SearchDocument[] {
    const where = ['f.search_fts MATCH ?', 'f.rowid < ?', 'f.rowid >= ?'];
    const params: unknown[] = [
      fts5Query(request.query),
      request.beforeId ?? Number.MAX_SAFE_INTEGER,
      this.firstIdSince(request.since),
    ];
    if (request.until !== undefined) {
      where.push('f.rowid < ?');
      params.push(this.firstIdSince(request.until));
    }
    if (request.kind !== undefined) {
      where.push('d.kind = ?');
      params.push(request.kind);
    }
    if (request.pipeline !== undefined) {
      where.push('r.pipeline GLOB ?');
      params.push(globToSqliteGlob(request.pipeline));
    }
    if (request.statuses !== undefined && request.statuses.length > 0) {
      where.push(`r.status IN (${request.statuses.map(() => '?').join(', ')})`);
      params.push(...request.statuses);
    }
    params.push(request.limit);
    const sql = `SELECT d.id, d.kind, d.seq, d.line, d.offset, d.line_offset, d.line_column, d.text,
        r.pipeline, r.run_id, r.status, r.created_at
      FROM search_fts f JOIN search_docs d ON d.id = f.rowid
      JOIN runs r ON r.rowid = f.rowid / ${DOCUMENTS_PER_RUN}
      WHERE ${where.join(' AND ')} ORDER BY f.rowid DESC LIMIT ?`;
    let statement = this.queries.get(sql);
    if (!statement) {
      statement = this.reader.prepare<unknown[], DocumentRow>(sql);
      this.queries.set(sql, statement);
    }
    return statement.all(...params).map(documentFromRow);
  }

  /** The first document id of the runs created at or after `time` (0 when no time is given). */
  private firstIdSince(time: number | undefined): number {
    if (time === undefined) return 0;
    const row = this.r.firstRunSince.get(time);
    return row === undefined ? Number.MAX_SAFE_INTEGER : documentId(row.position, 0);
  }
}
