/**
 * The PostgreSQL schema, as versioned migrations. They are applied in order at
 * start, each in the one transaction that records it in `schema_migrations`, under an advisory
 * lock so that replicas starting together apply each exactly once. A migration, once released,
 * is never edited: a change is a new migration with the next version.
 *
 * Every name and id column is `COLLATE "C"`: listings are in code-point order (UTF-8 byte order)
 * whatever the database's locale, and equality is byte for byte, as in the SQLite store.
 * Bodies (`body`, `meta`, `extra`) are `text`, not `jsonb`: a producer's JSON comes back exactly
 * as it was sent (key order, spacing, digits beyond 2^53).
 */
export interface Migration {
  version: number;
  name: string;
  sql: string;
}

/** Eight random lowercase hex digits, as the SQLite store makes them (core functions only). */
export const NEW_EPOCH_SQL = `substr(md5(random()::text || clock_timestamp()::text), 1, 8)`;

/** Line feeds in the text column `body`. */
const FEEDS = `length(body) - length(replace(body, E'\\n', ''))`;

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'streams, runs, pipelines, entries',
    sql: `
-- One row per run or topic, never deleted, so a seq never goes back for a key even if its run
-- is deleted and created again. A run's key is (run, pipeline, run id); a topic's
-- (topic, '', name). Every append locks its stream's row (SELECT … FOR UPDATE) until it
-- commits: that lock is what numbers a stream's entries one writer at a time.
CREATE TABLE streams (
  id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  type      text COLLATE "C" NOT NULL CHECK (type IN ('run', 'topic')),
  pipeline  text COLLATE "C" NOT NULL,
  name      text COLLATE "C" NOT NULL,
  last_seq  bigint NOT NULL DEFAULT 0,
  first_seq bigint NOT NULL DEFAULT 1,
  log_bytes bigint NOT NULL DEFAULT 0,
  -- The time of the newest entry (epoch ms): an entry is never older than the one before it,
  -- whichever replica's clock stamped it.
  last_time bigint NOT NULL DEFAULT 0,
  UNIQUE (type, pipeline, name)
);

CREATE TABLE runs (
  -- Creation order, for pages of runs newest first.
  position         bigint GENERATED ALWAYS AS IDENTITY,
  id               text COLLATE "C" NOT NULL UNIQUE,
  pipeline         text COLLATE "C" NOT NULL,
  run_id           text COLLATE "C" NOT NULL,
  stream_id        bigint NOT NULL REFERENCES streams (id),
  status           text NOT NULL,
  cancel_requested boolean NOT NULL DEFAULT false,
  created_at       bigint NOT NULL,
  started_at       bigint,
  ended_at         bigint,
  meta             text NOT NULL DEFAULT '{}',
  PRIMARY KEY (pipeline, run_id)
);
CREATE INDEX runs_by_pipeline ON runs (pipeline, position);
CREATE INDEX runs_by_status ON runs (pipeline, status, position);
CREATE INDEX runs_by_run_id ON runs (run_id);

CREATE TABLE entries (
  stream_id      bigint NOT NULL,
  seq            bigint NOT NULL,
  time           bigint NOT NULL,
  kind           text COLLATE "C" NOT NULL,
  step           text COLLATE "C",
  correlation_id text COLLATE "C",
  producer_id    text COLLATE "C",
  log_offset     bigint,
  body           text NOT NULL,
  extra          text,
  PRIMARY KEY (stream_id, seq)
);
CREATE UNIQUE INDEX entries_producer_id
  ON entries (stream_id, producer_id) WHERE producer_id IS NOT NULL;
CREATE INDEX entries_log_offset
  ON entries (stream_id, log_offset) WHERE log_offset IS NOT NULL;
-- Reads filtered by kind go straight to the entries of that kind. Log text is read by offset
-- (above), so only the other entries are in this index: appending log text costs no more.
CREATE INDEX entries_kind
  ON entries (stream_id, kind, seq) WHERE log_offset IS NULL;

-- One row per pipeline, kept with its runs in the same transaction.
CREATE TABLE pipelines (
  fqn      text COLLATE "C" PRIMARY KEY,
  id       text COLLATE "C" NOT NULL UNIQUE,
  runs     bigint NOT NULL DEFAULT 0,
  last_run text COLLATE "C"
);
`,
  },
  {
    version: 2,
    name: 'store epoch',
    sql: `
-- The store's epoch (docs/STORAGE.md): made with the database, renewed after a restore, and
-- carried by every native cursor so that one from another database is not trusted.
CREATE TABLE store_meta (
  key   text COLLATE "C" PRIMARY KEY,
  value text NOT NULL
);
INSERT INTO store_meta (key, value) VALUES ('epoch', ${NEW_EPOCH_SQL});
`,
  },
  {
    version: 3,
    name: 'search index',
    sql: `
-- The search index (docs/SEARCH.md, postgres-search.ts): documents of whole log lines and of
-- events, their trigrams in a GIN index; how far each run is indexed, and the runs with more
-- to index. pg_trgm is a trusted extension: the database's owner may create it.
CREATE EXTENSION IF NOT EXISTS pg_trgm;
ALTER TABLE streams ADD COLUMN search_seq bigint NOT NULL DEFAULT 0;
CREATE INDEX streams_to_index ON streams (id) WHERE type = 'run' AND search_seq < last_seq;
CREATE UNIQUE INDEX runs_by_position ON runs (position);
CREATE INDEX runs_by_stream ON runs (stream_id);
CREATE INDEX runs_by_created ON runs (created_at);
CREATE TABLE search_runs (
  stream_id      bigint PRIMARY KEY,
  next_line      bigint NOT NULL,
  pending_offset bigint NOT NULL,
  line_offset    bigint NOT NULL,
  line_column    bigint NOT NULL,
  pending_text   text   NOT NULL,
  documents      bigint NOT NULL
);
CREATE TABLE search_docs (
  id       bigint PRIMARY KEY,
  kind     text   NOT NULL,
  seq      bigint,
  line     bigint,
  "offset" bigint,
  line_offset bigint,
  line_column bigint,
  text     text   NOT NULL
);
CREATE INDEX search_docs_trigrams ON search_docs USING gin (text gin_trgm_ops);
`,
  },
  {
    version: 4,
    name: 'entries without log',
    sql: `
-- Every entry but log text, in stream order: a viewer that read the log as text (log.txt) gets
-- the rest of a long run without the log's pages being read again.
CREATE INDEX entries_without_log ON entries (stream_id, seq) WHERE log_offset IS NULL;
`,
  },
  {
    version: 5,
    name: 'runs by pipeline and creation time',
    sql: `
-- A pipeline's runs created between two dates (listRuns with since/until), newest first.
CREATE INDEX runs_by_pipeline_created ON runs (pipeline, created_at, position);
`,
  },
  {
    version: 6,
    name: 'log lines',
    sql: `
-- Lines found by number (docs/API.md, ?lines=): line feeds in each stream's log, and before
-- each log chunk, filled from the text already stored (each log read once), then the index
-- that finds the chunk holding the n-th line feed.
ALTER TABLE streams ADD COLUMN log_lines bigint NOT NULL DEFAULT 0;
ALTER TABLE entries ADD COLUMN log_line bigint;
UPDATE entries e SET log_line = b.feeds FROM (
  SELECT stream_id, seq, coalesce(sum(${FEEDS}) OVER (PARTITION BY stream_id
    ORDER BY log_offset ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS feeds
  FROM entries WHERE log_offset IS NOT NULL) b
WHERE e.stream_id = b.stream_id AND e.seq = b.seq;
UPDATE streams s SET log_lines = coalesce((SELECT sum(${FEEDS}) FROM entries e
  WHERE e.stream_id = s.id AND e.log_offset IS NOT NULL), 0);
CREATE INDEX entries_log_line ON entries (stream_id, log_line, seq) WHERE log_offset IS NOT NULL;
`,
  },
  {
    version: 7,
    name: 'sealed segments',
    sql: `
-- Sealed history (docs/STORAGE.md, "Sealed segments"; postgres-seal-catalog.ts): how far each
-- stream is sealed, a row per segment (its file is in shared object storage), and the runs
-- that have any, by position, for search.
ALTER TABLE streams ADD COLUMN sealed_seq bigint NOT NULL DEFAULT 0;
CREATE INDEX streams_to_seal ON streams (id) WHERE type = 'run' AND sealed_seq < last_seq;
CREATE TABLE segments (
  stream_id     bigint NOT NULL,
  position      bigint NOT NULL,
  first_seq     bigint NOT NULL,
  last_seq      bigint NOT NULL,
  name          text COLLATE "C" NOT NULL UNIQUE,
  log_offset    bigint NOT NULL,
  log_end       bigint NOT NULL,
  log_lines_end bigint NOT NULL,
  last_doc_id   bigint,
  bytes         bigint NOT NULL,
  raw_bytes     bigint NOT NULL,
  sealed_at     bigint NOT NULL,
  hot_dropped   boolean NOT NULL DEFAULT false,
  PRIMARY KEY (stream_id, first_seq)
);
CREATE INDEX segments_to_drop ON segments (sealed_at) WHERE NOT hot_dropped;
CREATE TABLE sealed_runs (
  position  bigint PRIMARY KEY,
  stream_id bigint NOT NULL
);
`,
  },
];

/** The newest schema version this code knows. */
export const SCHEMA_VERSION = MIGRATIONS[MIGRATIONS.length - 1]!.version;

/**
 * Where applied migrations are recorded. Created (if missing) under the migration lock, before
 * anything else is read.
 */
export const MIGRATIONS_TABLE = `
CREATE TABLE IF NOT EXISTS schema_migrations (
  version    integer PRIMARY KEY,
  name       text NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now()
)`;

/**
 * Advisory lock keys (two-int form: this namespace, then the lock). Any other user of advisory
 * locks on the same database picks another namespace.
 */
export const LOCK_NAMESPACE = 0x7457; // "tW"
export const LOCKS = {
  /** Held (for one transaction) while migrations are checked and applied. */
  migrate: 1,
  /** Held (for one trim) per topic, `hashtext(topic)` being the second key: see trimTopic. */
  trimNamespace: 0x7458,
} as const;

/** Leases (postgres-lease.ts): `hashtext(name)` is the second key. */
export const LOCK_NAMESPACE_LEASES = 0x7459;
