import type Database from 'better-sqlite3';

/**
 * The SQLite schema, created if missing (every statement is idempotent); `MIGRATIONS` then fill
 * what a database made by an older version lacks. `streams` keeps each key's counters forever, so a seq never goes back for
 * a key even if its run is deleted; `entries` is clustered by (stream, seq) for cursor reads.
 */
export const SCHEMA = `
CREATE TABLE IF NOT EXISTS streams (
  id        INTEGER PRIMARY KEY,
  key       TEXT    NOT NULL UNIQUE,
  last_seq  INTEGER NOT NULL DEFAULT 0,
  first_seq INTEGER NOT NULL DEFAULT 1,
  log_bytes INTEGER NOT NULL DEFAULT 0,
  -- Line feeds in the log (entries.log_line): lines are found by number (addLogLines).
  log_lines INTEGER NOT NULL DEFAULT 0,
  -- How far the search index has reached (sqlite-search.ts).
  search_seq INTEGER NOT NULL DEFAULT 0
);

-- The store's epoch (docs/STORAGE.md): made with the database, renewed after a restore.
CREATE TABLE IF NOT EXISTS store_meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
INSERT OR IGNORE INTO store_meta (key, value) VALUES ('epoch', lower(hex(randomblob(4))));

CREATE TABLE IF NOT EXISTS runs (
  id               TEXT    NOT NULL UNIQUE,
  pipeline         TEXT    NOT NULL,
  run_id           TEXT    NOT NULL,
  stream_id        INTEGER NOT NULL REFERENCES streams (id),
  status           TEXT    NOT NULL,
  cancel_requested INTEGER NOT NULL DEFAULT 0,
  created_at       INTEGER NOT NULL,
  started_at       INTEGER,
  ended_at         INTEGER,
  meta             TEXT    NOT NULL DEFAULT '{}',
  PRIMARY KEY (pipeline, run_id)
);
-- Runs of a pipeline in creation (rowid) order, all or by status: pages are index walks.
DROP INDEX IF EXISTS runs_newest;
CREATE INDEX IF NOT EXISTS runs_by_pipeline ON runs (pipeline);
CREATE INDEX IF NOT EXISTS runs_by_status ON runs (pipeline, status);
CREATE INDEX IF NOT EXISTS runs_by_run_id ON runs (run_id);
-- Runs of a pipeline by creation time, for listings bounded by date (since/until).
CREATE INDEX IF NOT EXISTS runs_by_pipeline_created ON runs (pipeline, created_at);

CREATE TABLE IF NOT EXISTS entries (
  stream_id      INTEGER NOT NULL,
  seq            INTEGER NOT NULL,
  time           INTEGER NOT NULL,
  kind           TEXT    NOT NULL,
  step           TEXT,
  correlation_id TEXT,
  producer_id    TEXT,
  log_offset     INTEGER,
  log_line       INTEGER,
  body           TEXT    NOT NULL,
  extra          TEXT,
  PRIMARY KEY (stream_id, seq)
) WITHOUT ROWID;
CREATE UNIQUE INDEX IF NOT EXISTS entries_producer_id
  ON entries (stream_id, producer_id) WHERE producer_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS entries_log_offset
  ON entries (stream_id, log_offset) WHERE log_offset IS NOT NULL;
-- Reads filtered by kind go straight to the entries of that kind. Log text is read by offset
-- (above), so only the other entries are in this index: appending log text costs no more.
CREATE INDEX IF NOT EXISTS entries_kind
  ON entries (stream_id, kind, seq) WHERE log_offset IS NULL;
-- Every entry but log text, in stream order: a viewer that read the log as text (log.txt) gets
-- the rest of a long run without the log's pages being read again.
CREATE INDEX IF NOT EXISTS entries_without_log
  ON entries (stream_id, seq) WHERE log_offset IS NULL;

-- One row per pipeline, kept with its runs in the same transaction, so a listing is one
-- indexed query per page and an id lookup is one probe.
CREATE TABLE IF NOT EXISTS pipelines (
  fqn      TEXT    PRIMARY KEY,
  id       TEXT    NOT NULL UNIQUE,
  runs     INTEGER NOT NULL DEFAULT 0,
  last_run TEXT
);
`;

/** Line feeds in a text column, in SQL (SQLite's and PostgreSQL's alike but for the line feed). */
const FEEDS = `length(body) - length(replace(body, char(10), ''))`;

/**
 * Lines found by number (docs/API.md, `?lines=`): `streams.log_lines` and `entries.log_line`,
 * counts of line feeds, and the index that finds the chunk holding the n-th. A database made
 * before them gets the columns, filled from the text it holds (each log read once: a minute or
 * so a few GB), then the index.
 */
export function addLogLines(db: Database.Database): void {
  const columns = db.prepare<[], { name: string }>('PRAGMA table_info(entries)').all();
  if (!columns.some((column) => column.name === 'log_line')) {
    db.transaction(() => {
      db.exec(`
ALTER TABLE streams ADD COLUMN log_lines INTEGER NOT NULL DEFAULT 0;
ALTER TABLE entries ADD COLUMN log_line INTEGER;
UPDATE entries SET log_line = before.feeds FROM (
  SELECT stream_id AS sid, seq AS s, coalesce(sum(${FEEDS}) OVER (PARTITION BY stream_id
    ORDER BY log_offset ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS feeds
  FROM entries WHERE log_offset IS NOT NULL) AS before
WHERE entries.stream_id = before.sid AND entries.seq = before.s;
UPDATE streams SET log_lines = coalesce((SELECT sum(${FEEDS}) FROM entries
  WHERE entries.stream_id = streams.id AND log_offset IS NOT NULL), 0);`);
    })();
  }
  db.exec(`CREATE INDEX IF NOT EXISTS entries_log_line
  ON entries (stream_id, log_line) WHERE log_offset IS NOT NULL;`);
}
