import { randomUUID } from 'node:crypto';
import pg from 'pg';
import type { PoolClient, QueryConfig, QueryResultRow } from 'pg';
import type { Entry, NewEvent, NewLog } from '../model/entry.js';
import { TailwaterError } from '../model/errors.js';
import { LOG_KIND } from '../model/names.js';
import { pipelineId } from '../model/pipeline-id.js';
import type { PipelineSummary, Run, RunStatus } from '../model/run.js';
import type { StreamKey } from '../model/stream-key.js';
import { describeStream, runKey, streamId, topicKey } from '../model/stream-key.js';
import type { Lease, LeaseStore } from './lease.js';
import { tryPostgresLease } from './postgres-lease.js';
import { PostgresSearch } from './postgres-search.js';
import { PostgresSealCatalog } from './postgres-seal-catalog.js';
import type { RunToSeal, SealCatalog, SealRow, SealedRun, SegmentRecord } from './seal-catalog.js';
import type { SealedDocument } from './segment-format.js';
import type { Migration } from './postgres-schema.js';
import {
  LOCK_NAMESPACE,
  LOCKS,
  MIGRATIONS,
  MIGRATIONS_TABLE,
  NEW_EPOCH_SQL,
} from './postgres-schema.js';
import type { PendingEntry, RunState, StoredEntry } from './rules.js';
import type { EntryRow } from './entry-row.js';
import { entryFromRow, storedFromRow } from './entry-row.js';
import {
  batchSeqs,
  cancelNeeded,
  checkLogRetry,
  entryTime,
  Numbering,
  boundsOf,
  lineStart,
  pendingEvent,
  pendingLog,
  planEventBatch,
  runNotFound,
  runsFeedBody,
  tombstoneBody,
  deletedFeedBody,
  runTransition,
  takePage,
  parsePosition,
  pipelineNameFilter,
  timeCursor,
  timePageStart,
} from './rules.js';
import { globToLike } from './search-sql.js';
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
import { PAGE_META_BYTES, RUNS_FEED_TOPIC } from './store.js';

export interface PostgresStoreOptions {
  /** Connections in the pool (default 10). */
  poolSize?: number;
  /** How long to wait for a connection, at start and for each operation (ms; default 10 s). */
  connectTimeoutMs?: number;
  /** Told of errors on idle connections (the server restarted, say); the pool drops them. */
  onError?: (error: Error) => void;
  /** The migrations to apply (tests only; default: this version's). */
  migrations?: readonly Migration[];
}

/** Rows per INSERT of a batch, and the text they carry at most (UTF-16 units). */
const INSERT_ROWS = 1000;
const INSERT_TEXT = 4 * 1024 * 1024;
const TRIM_ROWS_PER_TRANSACTION = 10_000;
/**
 * A page of runs is cut by rules.takePage, which weighs `meta` in UTF-16 units; SQL weighs it
 * in UTF-8 bytes, at most 3 per unit. So the rows whose predecessors weigh under 3× the budget
 * in bytes are all the rows takePage can look at (it decides; SQL only bounds what is fetched).
 */
const PAGE_BYTES_BOUND = 3 * PAGE_META_BYTES;

/**
 * int8 (BIGINT) columns as numbers: seqs, offsets, times and counters stay far below 2^53.
 * Given to each pool, so the `pg` module's global parsers are left as they are.
 */
const TYPES = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === pg.types.builtins.INT8 && format !== 'binary'
      ? (value: string) => Number(value)
      : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
};

interface StreamRow {
  id: number;
  last_seq: number;
  first_seq: number;
  log_bytes: number;
  log_lines: number;
  last_time: number;
}

/** A stream row locked by the transaction, with the counters it has moved so far. */
interface LockedStream {
  id: number;
  lastSeq: number;
  logBytes: number;
  logLines: number;
  lastTime: number;
  dirty: boolean;
}

interface RunRow {
  id: string;
  pipeline: string;
  run_id: string;
  stream_id: number;
  status: RunStatus;
  cancel_requested: boolean;
  created_at: number;
  started_at: number | null;
  ended_at: number | null;
  meta: string;
  position: number;
  last_seq: number;
  log_bytes: number;
}

const RUN_ONLY = `id, pipeline, run_id, stream_id, status, cancel_requested, created_at, started_at,
  ended_at, meta, position`;
const RUN_COLUMNS = `r.id, r.pipeline, r.run_id, r.stream_id, r.status, r.cancel_requested,
  r.created_at, r.started_at, r.ended_at, r.meta, r.position, s.last_seq, s.log_bytes`;
const ENTRY_COLUMNS = `seq, time, kind, step, correlation_id, producer_id, log_offset, body, extra`;
/** The id of the stream whose key is ($1, $2, $3) (see keyParams). */
const STREAM_ID = '(SELECT id FROM streams WHERE type = $1 AND pipeline = $2 AND name = $3)';

/**
 * The statements with a fixed text, by name: each is prepared once per connection. Every one
 * is an index search bounded by what it returns.
 */
const SQL = {
  lockStream: `SELECT id, last_seq, first_seq, log_bytes, log_lines, last_time FROM streams
    WHERE type = $1 AND pipeline = $2 AND name = $3 FOR UPDATE`,
  createStream: `INSERT INTO streams (type, pipeline, name) VALUES ($1, $2, $3)
    ON CONFLICT (type, pipeline, name) DO NOTHING
    RETURNING id, last_seq, first_seq, log_bytes, log_lines, last_time`,
  updateStream: `UPDATE streams SET last_seq = $2, log_bytes = $3, log_lines = $4, last_time = $5
    WHERE id = $1`,
  insertEntries: `INSERT INTO entries (stream_id, time, seq, kind, step, correlation_id,
      producer_id, log_offset, log_line, body, extra)
    SELECT $1::bigint, $2::bigint, u.* FROM unnest($3::bigint[], $4::text[], $5::text[],
      $6::text[], $7::text[], $8::bigint[], $9::bigint[], $10::text[], $11::text[]) AS u`,
  entriesByProducerIds: `SELECT ${ENTRY_COLUMNS} FROM entries
    WHERE stream_id = $1 AND producer_id = ANY ($2::text[])`,
  entriesFrom: `SELECT ${ENTRY_COLUMNS} FROM entries
    WHERE stream_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
  runRow: `SELECT ${RUN_ONLY} FROM runs WHERE pipeline = $1 AND run_id = $2`,
  insertRun: `INSERT INTO runs (id, pipeline, run_id, stream_id, status, created_at, started_at,
      ended_at, meta) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
    RETURNING ${RUN_ONLY}`,
  updateRun: `UPDATE runs SET status = $3, started_at = $4, ended_at = $5, meta = $6,
      cancel_requested = $7
    WHERE pipeline = $1 AND run_id = $2 RETURNING ${RUN_ONLY}`,
  // Two statements, not one upsert: `ON CONFLICT (fqn)` arbitrates on fqn alone, so a replica
  // racing another's first run of a new pipeline could fail on the unique `id` instead. With no
  // conflict target, DO NOTHING covers both; the UPDATE (a statement of its own, so it sees the
  // row the other transaction committed) then counts the run.
  createPipeline: `INSERT INTO pipelines (fqn, id, runs) VALUES ($1, $2, 0) ON CONFLICT DO NOTHING`,
  notePipelineRun: `UPDATE pipelines SET runs = runs + 1, last_run = $2 WHERE fqn = $1`,

  getRun: `SELECT ${RUN_COLUMNS} FROM runs r JOIN streams s ON s.id = r.stream_id
    WHERE r.pipeline = $1 AND r.run_id = $2`,
  findRuns: `SELECT ${RUN_COLUMNS} FROM runs r JOIN streams s ON s.id = r.stream_id
    WHERE r.run_id = $1 OR r.id = $1 ORDER BY r.position DESC LIMIT 10`,
  latestRun: `SELECT ${RUN_COLUMNS} FROM pipelines p JOIN runs r ON r.id = p.last_run
    JOIN streams s ON s.id = r.stream_id WHERE p.fqn = $1`,
  listRuns: pageOfRuns('r.pipeline = $1 AND r.position < $2', '$3', '$4'),
  listRunsByStatus: pageOfRuns('r.pipeline = $1 AND r.status = $5 AND r.position < $2', '$3', '$4'),
  /** Runs created in [$5, …), below the (created_at, position) cursor ($6, $2), of status $7 if given. */
  listRunsByTime: pageOfRuns(
    `r.pipeline = $1 AND r.created_at >= $5 AND (r.created_at, r.position) < ($6, $2)
      AND ($7::text IS NULL OR r.status = $7)`,
    '$3',
    '$4',
    ['created_at', 'position'],
  ),
  pipelines: `SELECT * FROM (
      SELECT page.*, coalesce(sum(octet_length(page.meta)) OVER (ORDER BY page.fqn
        ROWS BETWEEN UNBOUNDED PRECEDING AND 2 PRECEDING), 0) AS weight_before
      FROM (
        SELECT p.fqn, p.id AS pid, p.runs, ${RUN_COLUMNS} FROM pipelines p
        LEFT JOIN runs r ON r.id = p.last_run LEFT JOIN streams s ON s.id = r.stream_id
        WHERE p.fqn > $1 AND ($4::text IS NULL OR p.fqn LIKE $4)
          AND ($5::text IS NULL OR r.status = $5)
        ORDER BY p.fqn LIMIT $2
      ) page
    ) weighed WHERE weight_before < $3 ORDER BY fqn`,
  pipelineById: 'SELECT fqn FROM pipelines WHERE id = $1',

  bounds: `SELECT id, first_seq, last_seq, log_bytes, log_lines FROM streams
    WHERE type = $1 AND pipeline = $2 AND name = $3`,
  /** The last log chunk with fewer than $2 line feeds before it: the one that holds that one. */
  lineChunk: `SELECT log_offset, log_line, body FROM entries
    WHERE stream_id = $1 AND log_offset IS NOT NULL AND log_line < $2
    ORDER BY log_line DESC, seq DESC LIMIT 1`,
  seqOfProducerId: `SELECT seq FROM entries WHERE stream_id = ${STREAM_ID} AND producer_id = $4`,
  nthLatest: `SELECT seq FROM entries WHERE stream_id = ${STREAM_ID}
    ORDER BY seq DESC OFFSET $4 LIMIT 1`,
  logRange: `SELECT seq, log_offset, body, time, step FROM entries
    WHERE stream_id = ${STREAM_ID} AND log_offset >= $4 AND log_offset < $5 ORDER BY log_offset`,
  /** The chunks that end within the last $4 bytes: from the one holding byte (total - $4) on. */
  logTail: `WITH s AS (SELECT id, log_bytes FROM streams
      WHERE type = $1 AND pipeline = $2 AND name = $3)
    SELECT seq, log_offset, body, time, step FROM entries
    WHERE stream_id = (SELECT id FROM s) AND log_offset >= coalesce((
      SELECT log_offset FROM entries WHERE stream_id = (SELECT id FROM s)
        AND log_offset <= greatest((SELECT log_bytes FROM s) - $4, 0)
      ORDER BY log_offset DESC LIMIT 1), 0)
    ORDER BY log_offset`,
  logChunkAt: `SELECT seq, log_offset, octet_length(body) AS size FROM entries
    WHERE stream_id = ${STREAM_ID} AND log_offset <= $4 ORDER BY log_offset DESC LIMIT 1`,
  topics: `SELECT name FROM streams WHERE type = 'topic' AND pipeline = '' AND name > $1
    ORDER BY name LIMIT $2`,

  trimStream: `SELECT id, first_seq, last_seq FROM streams
    WHERE type = 'topic' AND pipeline = '' AND name = $1`,
  /** The first entry at or after seq $2 written at or after time $3 (times never go back). */
  firstYoung: `SELECT seq FROM entries WHERE stream_id = $1 AND seq >= $2 AND time >= $3
    ORDER BY seq LIMIT 1`,
  clearStream: `WITH removed AS (DELETE FROM entries WHERE stream_id = $1 AND seq <= $2)
    UPDATE streams SET first_seq = greatest(first_seq, $2 + 1) WHERE id = $1`,
  firstSeq: 'SELECT first_seq FROM streams WHERE id = $1',
  /** Everything of a deleted run before its tombstone $2 is gone, and not to be indexed. */
  buryStream: `WITH forgotten AS (DELETE FROM search_runs WHERE stream_id = $1)
    UPDATE streams SET first_seq = $2, search_seq = $2 WHERE id = $1`,
  deleteRun: 'DELETE FROM runs WHERE pipeline = $1 AND run_id = $2',
  forgetPipelineRun: `UPDATE pipelines SET runs = runs - 1, last_run = (SELECT id FROM runs
      WHERE pipeline = $1 ORDER BY position DESC LIMIT 1) WHERE fqn = $1`,
  dropEmptyPipeline: 'DELETE FROM pipelines WHERE fqn = $1 AND runs <= 0',
  pipelineStats: `SELECT p.fqn AS pipeline, p.runs, (SELECT coalesce(sum(s.log_bytes), 0)
      FROM runs r JOIN streams s ON s.id = r.stream_id WHERE r.pipeline = p.fqn)::bigint
      AS "logBytes"
    FROM pipelines p WHERE p.fqn > $1 ORDER BY p.fqn LIMIT $2`,
  trimSlice: `WITH removed AS (
      DELETE FROM entries WHERE stream_id = $1 AND seq >= $2 AND seq < $3 RETURNING 1
    )
    UPDATE streams SET first_seq = greatest(first_seq, $3) WHERE id = $1
    RETURNING (SELECT count(*) FROM removed)::bigint AS removed`,
} as const;

/**
 * A page of runs newest first, at most `limit` + 1 rows, and no more than rules.takePage can
 * look at (PAGE_BYTES_BOUND).
 */
function pageOfRuns(
  where: string,
  limit: string,
  bound: string,
  /** The columns a page is ordered by, each descending. */
  order: readonly string[] = ['position'],
): string {
  const by = (table: string) => order.map((column) => `${table}${column} DESC`).join(', ');
  return `SELECT * FROM (
      SELECT page.*, coalesce(sum(octet_length(page.meta)) OVER (ORDER BY ${by('page.')}
        ROWS BETWEEN UNBOUNDED PRECEDING AND 2 PRECEDING), 0) AS weight_before
      FROM (
        SELECT ${RUN_COLUMNS} FROM runs r JOIN streams s ON s.id = r.stream_id
        WHERE ${where} ORDER BY ${by('r.')} LIMIT ${limit}
      ) page
    ) weighed WHERE weight_before < ${bound} ORDER BY ${by('')}`;
}

function named(name: keyof typeof SQL, values: unknown[]): QueryConfig {
  return { name: `tw_${name}`, text: SQL[name], values };
}

/**
 * The store of a fleet: every replica appends to and reads from one PostgreSQL database.
 *
 * An append is one transaction. It locks its stream's row (`SELECT … FOR UPDATE`, the row
 * created first with `INSERT … ON CONFLICT DO NOTHING`), numbers its entries from the row's
 * counters by the rules (rules.ts), inserts them, writes the counters back and commits; the
 * lock is held until the commit. So the appends of one stream, from any number of processes,
 * commit one after the other in seq order: no hole, no duplicate, and since a reader sees only
 * committed rows, never seq N+1 without N. Producer ids are looked up under the same lock (and
 * a unique index backs them up), so a retry racing its original on another replica is
 * acknowledged with the original's seq. A status change also locks the runs feed's row, always
 * after its run's, so two transactions never wait for each other in a circle.
 *
 * Open one with `PostgresStore.open(url)`: it connects and applies the migrations.
 */
export class PostgresStore implements Store, LeaseStore, SealCatalog {
  private closed = false;
  /** Per stream (streamId), the end of this process's last write to it. */
  private readonly writing = new Map<string, Promise<void>>();
  private readonly search = new PostgresSearch({
    rows: (config) => this.rows(config),
    withClient: (body) => this.withClient(body),
  });
  private readonly sealing = new PostgresSealCatalog({
    rows: (config) => this.rows(config),
    withClient: (body) => this.withClient(body),
  });

  private constructor(
    private readonly pool: pg.Pool,
    private readonly where: string,
    private epoch: string,
    private readonly url: string,
    private readonly connectTimeoutMs: number,
  ) {}

  /**
   * Connects to `url` (`postgres://user@host:port/db`) and brings its schema up to date. An
   * unreachable server, a bad URL, or a database at a schema version newer than this code
   * knows is an error here, at start.
   */
  static async open(url: string, options: PostgresStoreOptions = {}): Promise<PostgresStore> {
    const where = describeUrl(url);
    const pool = new pg.Pool({
      connectionString: url,
      max: options.poolSize ?? 10,
      connectionTimeoutMillis: options.connectTimeoutMs ?? 10_000,
      application_name: 'tailwater',
      types: TYPES,
      keepAlive: true,
      // A replica that stops mid-transaction (hung, or cut off) must not hold a stream's lock
      // for ever: the server ends a transaction left idle this long. Between the statements of
      // one append it is idle for microseconds.
      idle_in_transaction_session_timeout: 30_000,
    });
    const onError = options.onError ?? (() => {});
    // An idle connection that breaks (the server restarts) is dropped by the pool; without a
    // listener its error would end the process.
    pool.on('error', (error) => onError(error));
    try {
      let client: PoolClient;
      try {
        client = await pool.connect();
      } catch (error) {
        throw new Error(`Cannot connect to PostgreSQL at ${where}: ${messageOf(error)}`, {
          cause: error,
        });
      }
      const epoch = await holding(client, async () => {
        await applyMigrations(client, where, options.migrations ?? MIGRATIONS);
        return readEpoch(client);
      });
      return new PostgresStore(pool, where, epoch, url, options.connectTimeoutMs ?? 10_000);
    } catch (error) {
      await pool.end().catch(() => undefined);
      throw error;
    }
  }

  // ---- runs ------------------------------------------------------------------------------

  async putRun(pipeline: string, runId: string, update: RunUpdate): Promise<PutRunResult> {
    refuseNul('Pipeline FQN', pipeline);
    refuseNul('Run id', runId);
    return this.transaction(runKey(pipeline, runId), async (tx) => {
      const written: Written[] = [];
      const run = await this.upsertRun(tx, pipeline, runId, update, written, false);
      return { run, written };
    });
  }

  async requestCancel(pipeline: string, runId: string): Promise<PutRunResult> {
    refuseNul('Pipeline FQN', pipeline);
    refuseNul('Run id', runId);
    return this.transaction(runKey(pipeline, runId), async (tx) => {
      const written: Written[] = [];
      const stream = await tx.stream(runKey(pipeline, runId), false);
      const existing = stream && (await tx.runRow(pipeline, runId));
      // Asked before: nothing more to say, nothing written.
      if (!cancelNeeded(pipeline, runId, existing && runState(existing))) {
        return { run: runFromRow(existing!, stream!), written };
      }
      const run = await this.upsertRun(tx, pipeline, runId, {}, written, true);
      return { run, written };
    });
  }

  async getRun(pipeline: string, runId: string): Promise<Run | undefined> {
    if (hasNul(pipeline, runId)) return undefined;
    const [row] = await this.rows<RunRow>(named('getRun', [pipeline, runId]));
    return row && runFromRow(row);
  }

  async findRuns(runIdOrId: string): Promise<Run[]> {
    if (hasNul(runIdOrId)) return [];
    return (await this.rows<RunRow>(named('findRuns', [runIdOrId]))).map((row) => runFromRow(row));
  }

  async latestRun(pipeline: string): Promise<Run | undefined> {
    if (hasNul(pipeline)) return undefined;
    const [row] = await this.rows<RunRow>(named('latestRun', [pipeline]));
    return row && runFromRow(row);
  }

  async listPipelines(page: ListPipelinesRequest): Promise<Page<PipelineSummary>> {
    type Row = Partial<RunRow> & { fqn: string; pid: string; runs: number };
    const name = pipelineNameFilter(page.name);
    // No FQN holds a NUL (PostgreSQL's text cannot): a glob with one matches nothing.
    if (name !== undefined && hasNul(name)) return { items: [] };
    const like = name === undefined ? null : globToLike(name);
    const rows = await this.rows<Row>(
      named('pipelines', [
        beforeNul(page.after ?? ''),
        page.limit + 1,
        PAGE_BYTES_BOUND,
        like,
        page.status ?? null,
      ]),
    );
    const { items, more } = takePage(rows.values(), page.limit, (row) => row.meta?.length ?? 0);
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
    const items = await this.rows<PipelineStats>(
      named('pipelineStats', [beforeNul(page.after ?? ''), page.limit + 1]),
    );
    const more = items.length > page.limit;
    if (more) items.pop();
    return { items, next: more ? items[items.length - 1]!.pipeline : undefined };
  }

  async pipelineById(id: string): Promise<string | undefined> {
    if (hasNul(id)) return undefined;
    const [row] = await this.rows<{ fqn: string }>(named('pipelineById', [id.toLowerCase()]));
    return row?.fqn;
  }

  async listRuns(pipeline: string, page: ListRunsRequest): Promise<Page<Run>> {
    if (page.since !== undefined || page.until !== undefined)
      return this.runsByTime(pipeline, page);
    const before = page.after === undefined ? Number.MAX_SAFE_INTEGER : parsePosition(page.after);
    if (hasNul(pipeline)) return { items: [] };
    const values: unknown[] = [pipeline, before, page.limit + 1, PAGE_BYTES_BOUND];
    const rows = await this.rows<RunRow>(
      page.status ? named('listRunsByStatus', [...values, page.status]) : named('listRuns', values),
    );
    const { items, more } = takePage(rows.values(), page.limit, (row) => row.meta.length);
    const last = items[items.length - 1];
    return {
      items: items.map((row) => runFromRow(row)),
      next: more && last ? String(last.position) : undefined,
    };
  }

  /**
   * Creates or updates the run row inside the transaction, its stream's row locked first. On a
   * status change (or a cancel request) it writes a `status` entry to the run stream and the
   * run, as it now is, to the runs feed.
   */
  private async runsByTime(pipeline: string, page: ListRunsRequest): Promise<Page<Run>> {
    const start = timePageStart(page.after, page.until);
    if (hasNul(pipeline)) return { items: [] };
    const rows = await this.rows<RunRow>(
      named('listRunsByTime', [
        pipeline,
        start.position,
        page.limit + 1,
        PAGE_BYTES_BOUND,
        page.since ?? Number.MIN_SAFE_INTEGER,
        start.createdAt,
        page.status ?? null,
      ]),
    );
    const { items, more } = takePage(rows.values(), page.limit, (row) => row.meta.length);
    const last = items[items.length - 1];
    const next =
      more && last
        ? timeCursor({ createdAt: Number(last.created_at), position: Number(last.position) })
        : undefined;
    return { items: items.map((row) => runFromRow(row)), next };
  }

  private async upsertRun(
    tx: Transaction,
    pipeline: string,
    runId: string,
    update: RunUpdate,
    written: Written[],
    cancel: boolean,
  ): Promise<Run> {
    const key = runKey(pipeline, runId);
    const stream = (await tx.stream(key, true))!;
    const existing = await tx.runRow(pipeline, runId);
    const now = tx.now;
    const { next, changed, statusEntry } = runTransition(
      runId,
      existing && runState(existing),
      update,
      now,
      cancel,
    );
    if (!changed) return runFromRow(existing!, stream);
    const { status, startedAt, endedAt, meta } = next;
    let row: RunRow | undefined;
    if (!existing) {
      if (stream.lastSeq > 0) {
        // A run of this id was deleted: its tombstone (and whatever was not removed yet) goes.
        await tx.rows(named('clearStream', [stream.id, stream.lastSeq]));
      }
      const id = randomUUID();
      [row] = await tx.rows<RunRow>(
        named('insertRun', [id, pipeline, runId, stream.id, status, now, startedAt, endedAt, meta]),
      );
      await tx.rows(named('createPipeline', [pipeline, pipelineId(pipeline)]));
      await tx.rows(named('notePipelineRun', [pipeline, id]));
    } else {
      [row] = await tx.rows<RunRow>(
        named('updateRun', [
          pipeline,
          runId,
          status,
          startedAt,
          endedAt,
          meta,
          next.cancelRequested,
        ]),
      );
    }
    if (statusEntry === undefined) return runFromRow(row!, stream);
    const [seq] = await tx.insert(stream, [{ kind: 'status', body: statusEntry, isLog: false }]);
    written.push({ key, seq: seq! });
    // Made after the status entry, so the feed's copy of the run shows its new lastSeq.
    const run = runFromRow(row!, stream);
    const feedKey = topicKey(RUNS_FEED_TOPIC);
    const feed = (await tx.stream(feedKey, true))!;
    const [feedSeq] = await tx.insert(feed, [
      { kind: 'status', body: runsFeedBody(run), isLog: false },
    ]);
    written.push({ key: feedKey, seq: feedSeq! });
    return run;
  }

  async deleteRun(pipeline: string, runId: string): Promise<PutRunResult> {
    if (hasNul(pipeline, runId)) throw runNotFound(pipeline, runId);
    const key = runKey(pipeline, runId);
    const deleted = await this.transaction(key, async (tx) => {
      const stream = await tx.stream(key, false);
      const row = stream && (await tx.runRow(pipeline, runId));
      if (!stream || !row) throw runNotFound(pipeline, runId);
      const run = runFromRow(row, stream);
      const [{ first_seq: firstSeq }] = (await tx.rows<{ first_seq: number }>(
        named('firstSeq', [stream.id]),
      )) as [{ first_seq: number }];
      const [tombstone] = await tx.insert(stream, [
        { kind: 'status', body: tombstoneBody(run), isLog: false },
      ]);
      await tx.rows(named('buryStream', [stream.id, tombstone!]));
      await this.sealing.forgetRun(tx, stream.id, row.position);
      await tx.rows(named('deleteRun', [pipeline, runId]));
      await tx.rows(named('forgetPipelineRun', [pipeline]));
      await tx.rows(named('dropEmptyPipeline', [pipeline]));
      const feedKey = topicKey(RUNS_FEED_TOPIC);
      const feed = (await tx.stream(feedKey, true))!;
      const [feedSeq] = await tx.insert(feed, [
        { kind: 'status', body: deletedFeedBody(run), isLog: false },
      ]);
      const written: Written[] = [
        { key, seq: tombstone! },
        { key: feedKey, seq: feedSeq! },
      ];
      return {
        run,
        written,
        sid: stream.id,
        firstSeq,
        tombstone: tombstone!,
        position: row.position,
      };
    });
    // The run is gone for every reader now; its rows go a slice at a time.
    for (let from = deleted.firstSeq; from < deleted.tombstone; from += TRIM_ROWS_PER_TRANSACTION) {
      const to = Math.min(deleted.tombstone, from + TRIM_ROWS_PER_TRANSACTION);
      await this.rows(named('trimSlice', [deleted.sid, from, to]));
    }
    await this.search.removeRun(deleted.position);
    return { run: deleted.run, written: deleted.written };
  }

  private async ensureRun(tx: Transaction, pipeline: string, runId: string, written: Written[]) {
    if (!(await tx.runRow(pipeline, runId))) {
      await this.upsertRun(tx, pipeline, runId, { status: 'running' }, written, false);
    }
  }

  // ---- appends ---------------------------------------------------------------------------

  async appendLog(
    pipeline: string,
    runId: string,
    chunks: readonly NewLog[],
  ): Promise<AppendLogResult> {
    refuseNul('Pipeline FQN', pipeline);
    refuseNul('Run id', runId);
    chunks.forEach((chunk, index) => {
      refuseNul(index === 0 ? 'The log text' : `The log text (piece ${index + 1})`, chunk.text);
      refuseNul('step', chunk.step);
      refuseNul('id', chunk.id);
    });
    const key = runKey(pipeline, runId);
    return this.transaction(key, async (tx) => {
      const written: Written[] = [];
      const stream = (await tx.stream(key, true))!;
      const first = chunks[0];
      if (first?.id !== undefined) {
        const [original] = await tx.entriesByProducerIds(stream.id, [first.id]);
        if (original) return this.originalLogAppend(tx, stream.id, original, chunks, written);
      }
      await this.ensureRun(tx, pipeline, runId, written);
      const offset = stream.logBytes;
      const seqs = await tx.insert(
        stream,
        chunks.map((chunk) => pendingLog(chunk, LOG_KIND)),
      );
      const size = chunks.reduce((sum, chunk) => sum + Buffer.byteLength(chunk.text, 'utf8'), 0);
      const last = seqs[seqs.length - 1]!;
      written.push({ key, seq: last });
      return { seq: last, firstSeq: seqs[0]!, offset, size, duplicate: false, written };
    });
  }

  /**
   * The acknowledgement of an append whose producer id was already stored: the original's, if
   * the rules find it a retry of the same append.
   */
  private async originalLogAppend(
    tx: Transaction,
    sid: number,
    original: EntryRow,
    chunks: readonly NewLog[],
    written: Written[],
  ): Promise<AppendLogResult> {
    const rows = (
      await tx.rows<EntryRow>(named('entriesFrom', [sid, original.seq - 1, chunks.length]))
    ).map(storedFromRow);
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

  async appendEvents(key: StreamKey, events: readonly NewEvent[]): Promise<AppendEventsResult> {
    refuseNulInKey(key);
    const pending = events.map((event, index) => {
      const entry = pendingEvent(event);
      const at = `events[${index}]`;
      refuseNul(`${at}.kind`, entry.kind);
      refuseNul(`${at}.step`, entry.step);
      refuseNul(`${at}.correlationId`, entry.correlationId);
      refuseNul(`${at}.id`, entry.id);
      refuseNul(`${at}.data`, entry.body);
      refuseNul(`${at}.extra`, entry.extra);
      return entry;
    });
    return this.transaction(key, async (tx) => {
      const written: Written[] = [];
      if (key.type === 'run') await this.ensureRun(tx, key.pipeline, key.runId, written);
      const stream = (await tx.stream(key, true))!;
      const ids = [
        ...new Set(pending.flatMap((entry) => (entry.id === undefined ? [] : entry.id))),
      ];
      const stored = new Map<string, StoredEntry>();
      if (ids.length > 0) {
        for (const row of await tx.entriesByProducerIds(stream.id, ids)) {
          stored.set(row.producer_id!, storedFromRow(row));
        }
      }
      const plan = planEventBatch(events, (id) => stored.get(id));
      const assigned = plan.fresh.length > 0 ? await tx.insert(stream, plan.fresh) : [];
      if (assigned.length > 0) written.push({ key, seq: assigned[assigned.length - 1]! });
      return { seqs: batchSeqs(plan, assigned), duplicates: plan.duplicates, written };
    });
  }

  // ---- reads -----------------------------------------------------------------------------

  async readEntries(key: StreamKey, options: ReadEntriesOptions): Promise<Entry[]> {
    if (hasNulInKey(key) || options.limit < 1) return [];
    const maxBytes = options.maxBytes ?? Number.MAX_SAFE_INTEGER;
    const values: unknown[] = [...keyParams(key), options.afterSeq, options.limit, maxBytes];
    let source: string;
    let ctes = '';
    if (!options.kinds) {
      // Without log text: the condition of the entries_without_log index, which the planner
      // then reads in seq order.
      const withoutLog = options.withoutLog ? 'AND log_offset IS NULL' : '';
      source = `SELECT ${ENTRY_COLUMNS} FROM entries WHERE stream_id = ${STREAM_ID} AND seq > $4
        ${withoutLog} ORDER BY seq LIMIT $5`;
    } else {
      // One ordered branch per kind, each read by index: other kinds through the kind index,
      // log text through the offset index from the first log entry past the cursor.
      const branches: string[] = [];
      for (const kind of new Set(options.kinds)) {
        values.push(kind);
        branches.push(`(SELECT ${ENTRY_COLUMNS} FROM entries WHERE stream_id = ${STREAM_ID}
          AND kind = $${values.length} AND log_offset IS NULL AND seq > $4 ORDER BY seq LIMIT $5)`);
        if (kind === LOG_KIND) {
          ctes = firstLogOffsetAfter('$4');
          branches.push(`(SELECT ${ENTRY_COLUMNS} FROM entries WHERE stream_id = ${STREAM_ID}
            AND log_offset >= (SELECT found FROM search WHERE lo >= hi)
            ORDER BY log_offset LIMIT $5)`);
        }
      }
      if (branches.length === 0) return [];
      source = `SELECT * FROM (${branches.join(' UNION ALL ')}) kinds ORDER BY seq LIMIT $5`;
    }
    // At most `limit` entries, and no more once those before weigh maxBytes (the first always).
    const text = `${ctes} SELECT * FROM (
        SELECT page.*, row_number() OVER w AS n,
          sum(octet_length(page.body)) OVER w - octet_length(page.body) AS weight_before
        FROM (${source}) page WINDOW w AS (ORDER BY page.seq ROWS UNBOUNDED PRECEDING)
      ) weighed WHERE n = 1 OR weight_before < $6 ORDER BY seq`;
    const rows = await this.rows<EntryRow>({ text, values });
    return rows.map(entryFromRow);
  }

  async nthLatestSeq(
    key: StreamKey,
    n: number,
    kinds?: readonly string[],
  ): Promise<number | undefined> {
    if (hasNulInKey(key) || n < 1) return undefined;
    if (!kinds || kinds.length === 0) {
      const [row] = await this.rows<{ seq: number }>(
        named('nthLatest', [...keyParams(key), n - 1]),
      );
      return row?.seq;
    }
    // The newest n entries of each kind, merged newest first.
    const values: unknown[] = [...keyParams(key), n];
    const branches: string[] = [];
    for (const kind of new Set(kinds)) {
      values.push(kind);
      branches.push(`(SELECT seq FROM entries WHERE stream_id = ${STREAM_ID}
        AND kind = $${values.length} AND log_offset IS NULL ORDER BY seq DESC LIMIT $4)`);
      if (kind === LOG_KIND) {
        branches.push(`(SELECT seq FROM entries WHERE stream_id = ${STREAM_ID}
          AND log_offset IS NOT NULL ORDER BY log_offset DESC LIMIT $4)`);
      }
    }
    const text = `SELECT seq FROM (${branches.join(' UNION ALL ')}) kinds
      ORDER BY seq DESC OFFSET $4::bigint - 1 LIMIT 1`;
    const [row] = await this.rows<{ seq: number }>({ text, values });
    return row?.seq;
  }

  async seqOfProducerId(key: StreamKey, id: string): Promise<number | undefined> {
    if (hasNulInKey(key) || hasNul(id)) return undefined;
    const [row] = await this.rows<{ seq: number }>(
      named('seqOfProducerId', [...keyParams(key), id]),
    );
    return row?.seq;
  }

  async bounds(key: StreamKey): Promise<StreamBounds> {
    const [row] = hasNulInKey(key)
      ? []
      : await this.rows<StreamRow>(named('bounds', keyParams(key)));
    return boundsOf(row, this.epoch);
  }

  async logLineStart(key: StreamKey, line: number): Promise<number | undefined> {
    if (hasNulInKey(key)) return undefined;
    const [row] = await this.rows<StreamRow>(named('bounds', keyParams(key)));
    if (!row) return undefined;
    return lineStart(line, row.log_bytes, row.log_lines, async (feeds) => {
      type Row = { log_offset: number; log_line: number; body: string };
      const [found] = await this.rows<Row>(named('lineChunk', [row.id, feeds]));
      return found && { logOffset: found.log_offset, logLine: found.log_line, body: found.body };
    });
  }

  async readLog(key: StreamKey, offset: number, limit: number): Promise<LogChunk[]> {
    if (hasNulInKey(key)) return [];
    type Row = {
      seq: number;
      log_offset: number;
      body: string;
      time: number;
      step: string | null;
    };
    const rows = await this.rows<Row>(
      offset === -1
        ? named('logTail', [...keyParams(key), limit])
        : named('logRange', [...keyParams(key), offset, offset + limit]),
    );
    return rows.map((row) => ({
      offset: row.log_offset,
      size: Buffer.byteLength(row.body, 'utf8'),
      text: row.body,
      time: new Date(row.time).toISOString(),
      ...(row.step === null ? {} : { step: row.step }),
    }));
  }

  async logChunkAt(key: StreamKey, byte: number): Promise<LogChunkPosition | undefined> {
    if (hasNulInKey(key)) return undefined;
    const [row] = await this.rows<{ seq: number; log_offset: number; size: number }>(
      named('logChunkAt', [...keyParams(key), byte]),
    );
    if (!row) return undefined;
    return row.log_offset + row.size > byte
      ? { offset: row.log_offset, size: row.size, seq: row.seq }
      : undefined;
  }

  async listTopics(page: PageRequest): Promise<Page<string>> {
    const rows = await this.rows<{ name: string }>(
      named('topics', [beforeNul(page.after ?? ''), page.limit + 1]),
    );
    const items = rows.slice(0, page.limit).map(({ name }) => name);
    return { items, next: rows.length > page.limit ? items[items.length - 1] : undefined };
  }

  /**
   * Trims one topic, holding an advisory lock on it meanwhile, so that replicas running
   * retention at once trim each topic one at a time (the second finds nothing left to do).
   * The entries go in small transactions, so appends to the topic wait for none of it long.
   */
  async trimTopic(topic: string, policy: TrimPolicy): Promise<TrimResult> {
    if (hasNul(topic)) return { removed: 0, firstSeq: 1 };
    return this.withClient(async (client) => {
      await client.query('SELECT pg_advisory_lock($1, hashtext($2))', [LOCKS.trimNamespace, topic]);
      try {
        const query = <R extends QueryResultRow>(config: QueryConfig) =>
          client.query<R>(config).then((result) => result.rows);
        const [row] = await query<StreamRow>(named('trimStream', [topic]));
        if (!row) return { removed: 0, firstSeq: 1 };
        let cut = row.first_seq;
        if (policy.maxEntries > 0) cut = Math.max(cut, row.last_seq - policy.maxEntries + 1);
        if (policy.olderThanMs !== undefined) {
          // Read from the cut on: what it passes over is removed anyway.
          const [young] = await query<{ seq: number }>(
            named('firstYoung', [row.id, cut, policy.olderThanMs]),
          );
          cut = Math.max(cut, young?.seq ?? row.last_seq + 1);
        }
        let removed = 0;
        for (let from = row.first_seq; from < cut; from += TRIM_ROWS_PER_TRANSACTION) {
          const to = Math.min(cut, from + TRIM_ROWS_PER_TRANSACTION);
          const [slice] = await query<{ removed: number }>(named('trimSlice', [row.id, from, to]));
          removed += slice?.removed ?? 0;
        }
        return { removed, firstSeq: cut };
      } finally {
        await client.query('SELECT pg_advisory_unlock($1, hashtext($2))', [
          LOCKS.trimNamespace,
          topic,
        ]);
      }
    });
  }

  // ---- search ----------------------------------------------------------------------------

  indexForSearch(limits: IndexLimits): Promise<IndexResult> {
    return this.search.index(limits);
  }

  searchIndexStatus(): Promise<SearchIndexStatus> {
    return this.search.status();
  }

  searchDocuments(request: SearchDocumentsRequest): Promise<SearchDocument[]> {
    return this.search.documents(request);
  }

  /** One holder among every server on this database (postgres-lease.ts). */
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
    if (hasNulInKey(key)) return Promise.resolve([]);
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

  async tryLease(name: string): Promise<Lease | undefined> {
    this.checkOpen();
    try {
      return await tryPostgresLease(this.url, name, this.connectTimeoutMs);
    } catch (error) {
      throw this.translate(error);
    }
  }

  async renewEpoch(): Promise<string> {
    this.epoch = await this.withClient(async (client) => {
      await client.query(`UPDATE store_meta SET value = ${NEW_EPOCH_SQL} WHERE key = 'epoch'`);
      return readEpoch(client);
    });
    return this.epoch;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // Writes already asked for finish (committed or rolled back) before the pool ends.
    await Promise.all(this.writing.values());
    await this.pool.end();
  }

  // ---- helpers ---------------------------------------------------------------------------

  private async rows<R extends QueryResultRow>(config: QueryConfig): Promise<R[]> {
    this.checkOpen();
    try {
      return (await this.pool.query<R>(config)).rows;
    } catch (error) {
      throw this.translate(error);
    }
  }

  /** A connection of the pool for `body`; one that failed mid-way is closed, not reused. */
  private async withClient<T>(body: (client: PoolClient) => Promise<T>): Promise<T> {
    this.checkOpen();
    let client: PoolClient;
    try {
      client = await this.pool.connect();
    } catch (error) {
      throw this.translate(error);
    }
    try {
      return await holding(client, body);
    } catch (error) {
      throw this.translate(error);
    }
  }

  /**
   * Runs `body` in one transaction, committed whole or (on any error) rolled back whole, after
   * this process's earlier writes to the same stream: they would wait for its row's lock
   * anyway, and waiting here keeps them from holding every connection of the pool meanwhile
   * (reads go on). It also commits one process's writes to a stream in the order they were
   * asked for. Other processes' writes are kept in turn by the row's lock.
   */
  private transaction<T>(key: StreamKey, body: (tx: Transaction) => Promise<T>): Promise<T> {
    const name = streamId(key);
    const run = () => this.transactionNow(body);
    const result = (this.writing.get(name) ?? Promise.resolve()).then(run, run);
    const done = result.then(
      () => undefined,
      () => undefined,
    );
    this.writing.set(name, done);
    void done.then(() => {
      if (this.writing.get(name) === done) this.writing.delete(name);
    });
    return result;
  }

  private transactionNow<T>(body: (tx: Transaction) => Promise<T>): Promise<T> {
    return this.withClient(async (client) => {
      await client.query('BEGIN');
      try {
        const tx = new Transaction(client);
        const result = await body(tx);
        await tx.flush();
        await client.query('COMMIT');
        return result;
      } catch (error) {
        // A rollback that fails leaves the connection broken: withClient closes it.
        await client.query('ROLLBACK').catch(() => undefined);
        throw error;
      }
    });
  }

  private checkOpen(): void {
    if (this.closed) throw new Error('The store is closed.');
  }

  /**
   * The error a caller should see: PostgreSQL out of reach is TW_STORE_UNAVAILABLE (503, retry
   * later; nothing was acknowledged), text it cannot hold TW_BAD_REQUEST; others as they are.
   */
  private translate(error: unknown): unknown {
    if (error instanceof TailwaterError) return error;
    if (isConnectionError(error)) {
      return new TailwaterError(
        'TW_STORE_UNAVAILABLE',
        `The store (PostgreSQL at ${this.where}) cannot be reached: ${messageOf(error)}. Nothing was stored by this request; retry it.`,
        { 'Retry-After': '1' },
      );
    }
    if (sqlState(error) === '22021') {
      return new TailwaterError(
        'TW_BAD_REQUEST',
        `The store cannot keep this text: ${messageOf(error)}.`,
      );
    }
    return error;
  }
}

/**
 * What one transaction has locked and moved: each stream's row is locked on first use and its
 * counters kept here, written back once, before COMMIT.
 */
class Transaction {
  private readonly streams = new Map<string, LockedStream>();
  private clock: number | undefined;

  constructor(private readonly client: PoolClient) {}

  /** The time of this transaction's writes, read once its first lock is held. */
  get now(): number {
    this.clock ??= Date.now();
    return this.clock;
  }

  async rows<R extends QueryResultRow>(config: QueryConfig): Promise<R[]> {
    return (await this.client.query<R>(config)).rows;
  }

  /**
   * The stream's row, locked until COMMIT; created first when `create` (else undefined when
   * the stream was never written). A row another transaction is creating is waited for.
   */
  async stream(key: StreamKey, create: boolean): Promise<LockedStream | undefined> {
    const name = streamId(key);
    const known = this.streams.get(name);
    if (known) return known;
    const params = keyParams(key);
    let [row] = await this.rows<StreamRow>(named('lockStream', params));
    // Created here (and so locked), or, if another transaction created it meanwhile, locked
    // once that one committed. Two turns suffice: a stream row is never deleted.
    for (let turn = 0; !row && create && turn < 2; turn += 1) {
      [row] = await this.rows<StreamRow>(named('createStream', params));
      if (!row) [row] = await this.rows<StreamRow>(named('lockStream', params));
    }
    if (!row) {
      if (create) throw new Error(`The row of ${describeStream(key)} could not be locked.`);
      return undefined;
    }
    const locked: LockedStream = {
      id: row.id,
      lastSeq: row.last_seq,
      logBytes: row.log_bytes,
      logLines: row.log_lines,
      lastTime: row.last_time,
      dirty: false,
    };
    this.streams.set(name, locked);
    this.clock ??= Date.now();
    return locked;
  }

  runRow(pipeline: string, runId: string): Promise<RunRow | undefined> {
    return this.rows<RunRow>(named('runRow', [pipeline, runId])).then(([row]) => row);
  }

  entriesByProducerIds(sid: number, ids: readonly string[]): Promise<EntryRow[]> {
    return this.rows<EntryRow>(named('entriesByProducerIds', [sid, ids]));
  }

  /**
   * Numbers entries on a locked stream by the rules and inserts them, a few thousand rows per
   * statement. Their time is the transaction's, or the stream's newest if that is later (a
   * replica whose clock is behind): time never goes back within a stream.
   */
  async insert(stream: LockedStream, pending: readonly PendingEntry[]): Promise<number[]> {
    const time = entryTime(this.now, stream.lastTime);
    const numbering = new Numbering(stream.lastSeq, stream.logBytes, stream.logLines);
    const seqs: number[] = [];
    let columns = emptyColumns();
    let text = 0;
    for (const entry of pending) {
      const { seq, logOffset, logLine } = numbering.next(entry);
      columns.seq.push(seq);
      columns.kind.push(entry.kind);
      columns.step.push(entry.step ?? null);
      columns.correlationId.push(entry.correlationId ?? null);
      columns.id.push(entry.id ?? null);
      columns.logOffset.push(logOffset);
      columns.logLine.push(logLine);
      columns.body.push(entry.body);
      columns.extra.push(entry.extra ?? null);
      seqs.push(seq);
      text += entry.body.length;
      if (columns.seq.length >= INSERT_ROWS || text >= INSERT_TEXT) {
        await this.insertRows(stream.id, time, columns);
        columns = emptyColumns();
        text = 0;
      }
    }
    if (columns.seq.length > 0) await this.insertRows(stream.id, time, columns);
    stream.lastSeq = numbering.lastSeq;
    stream.logBytes = numbering.logBytes;
    stream.logLines = numbering.logLines;
    stream.lastTime = time;
    stream.dirty = true;
    return seqs;
  }

  private async insertRows(sid: number, time: number, c: Columns): Promise<void> {
    await this.rows(
      named('insertEntries', [
        sid,
        time,
        c.seq,
        c.kind,
        c.step,
        c.correlationId,
        c.id,
        c.logOffset,
        c.logLine,
        c.body,
        c.extra,
      ]),
    );
  }

  /** Writes back the counters of every stream this transaction numbered entries on. */
  async flush(): Promise<void> {
    for (const stream of this.streams.values()) {
      if (!stream.dirty) continue;
      await this.rows(
        named('updateStream', [
          stream.id,
          stream.lastSeq,
          stream.logBytes,
          stream.logLines,
          stream.lastTime,
        ]),
      );
    }
  }
}

interface Columns {
  seq: number[];
  kind: string[];
  step: (string | null)[];
  correlationId: (string | null)[];
  id: (string | null)[];
  logOffset: (number | null)[];
  logLine: (number | null)[];
  body: string[];
  extra: (string | null)[];
}

function emptyColumns(): Columns {
  return {
    seq: [],
    kind: [],
    step: [],
    correlationId: [],
    id: [],
    logOffset: [],
    logLine: [],
    body: [],
    extra: [],
  };
}

/**
 * Checks migrations and applies those the database lacks, in one transaction under the
 * migration lock: replicas starting together apply each once, the others wait and find it
 * done. A database at a newer version than this code knows is refused, untouched.
 */
/**
 * Runs `body` with a checked-out connection, then gives it back to the pool, closed if it broke.
 * The pool listens for errors only on idle connections: one that breaks while checked out (the
 * server restarts between two statements) would emit an error nobody hears, which ends the
 * process. Heard here, it marks the connection broken.
 */
async function holding<T>(
  client: PoolClient,
  body: (client: PoolClient) => Promise<T>,
): Promise<T> {
  let broken: Error | undefined;
  const onError = (error: Error) => {
    broken = error;
  };
  client.on('error', onError);
  try {
    return await body(client);
  } catch (error) {
    if (isConnectionError(error)) broken ??= error as Error;
    throw error;
  } finally {
    client.off('error', onError);
    client.release(broken);
  }
}

async function readEpoch(client: PoolClient): Promise<string> {
  const { rows } = await client.query<{ value: string }>(
    `SELECT value FROM store_meta WHERE key = 'epoch'`,
  );
  return rows[0]!.value;
}

export async function applyMigrations(
  client: PoolClient | pg.Client,
  where: string,
  migrations: readonly Migration[] = MIGRATIONS,
): Promise<number[]> {
  const known = migrations[migrations.length - 1]?.version ?? 0;
  await client.query('BEGIN');
  try {
    await client.query('SELECT pg_advisory_xact_lock($1, $2)', [LOCK_NAMESPACE, LOCKS.migrate]);
    await client.query(MIGRATIONS_TABLE);
    const { rows } = await client.query<{ version: number | null }>(
      'SELECT max(version) AS version FROM schema_migrations',
    );
    const current = rows[0]?.version ?? 0;
    if (current > known) {
      throw new Error(
        `The PostgreSQL database at ${where} has schema version ${current}, newer than this Tailwater knows (${known}): it was migrated by a newer release. Run that release (or newer), or point --store at another database.`,
      );
    }
    const applied: number[] = [];
    for (const migration of migrations) {
      if (migration.version <= current) continue;
      await client.query(migration.sql);
      await client.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [
        migration.version,
        migration.name,
      ]);
      applied.push(migration.version);
    }
    await client.query('COMMIT');
    return applied;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}

/**
 * The offset of the first log entry whose seq is past `after`, as CTEs `s` and `search`. Log
 * entries are in seq order and offset order alike, so a binary search over offsets finds it in
 * ~50 index probes (one recursive query), however many entries of other kinds come before it.
 * `search`'s last row (lo >= hi) holds it in `found` (null: there is none).
 */
function firstLogOffsetAfter(after: string): string {
  return `WITH RECURSIVE s AS (
      SELECT id, log_bytes FROM streams WHERE type = $1 AND pipeline = $2 AND name = $3
    ), search (lo, hi, found) AS (
      SELECT 0::bigint, log_bytes + 1, NULL::bigint FROM s
      UNION ALL
      SELECT
        CASE WHEN r.seq <= ${after} THEN r.log_offset + 1 ELSE b.lo END,
        CASE WHEN r.seq IS NULL THEN (b.lo + b.hi) / 2
             WHEN r.seq > ${after} THEN least((b.lo + b.hi) / 2, r.log_offset)
             ELSE b.hi END,
        CASE WHEN r.seq > ${after} THEN r.log_offset ELSE b.found END
      FROM search b LEFT JOIN LATERAL (
        SELECT seq, log_offset FROM entries
        WHERE stream_id = (SELECT id FROM s) AND log_offset >= (b.lo + b.hi) / 2
        ORDER BY log_offset LIMIT 1
      ) r ON true
      WHERE b.lo < b.hi
    )`;
}

/** A stream key as the three columns of its row. */
function keyParams(key: StreamKey): [string, string, string] {
  return key.type === 'run' ? ['run', key.pipeline, key.runId] : ['topic', '', key.topic];
}

/**
 * PostgreSQL `text` cannot hold U+0000. Names never contain it (names.ts refuses control
 * characters) and JSON escapes it, so only text given to the store directly can: it is
 * refused as a bad request, before anything is written.
 */
function refuseNul(what: string, value: unknown): void {
  if (typeof value === 'string' && value.includes('\u0000')) {
    throw new TailwaterError(
      'TW_BAD_REQUEST',
      `${what} contains the NUL character (U+0000), which the PostgreSQL store cannot keep; nothing was stored.`,
    );
  }
}

function refuseNulInKey(key: StreamKey): void {
  if (key.type === 'run') {
    refuseNul('Pipeline FQN', key.pipeline);
    refuseNul('Run id', key.runId);
  } else {
    refuseNul('Topic', key.topic);
  }
}

/** A name with NUL names nothing stored (see refuseNul). */
function hasNul(...values: string[]): boolean {
  return values.some((value) => value.includes('\u0000'));
}

function hasNulInKey(key: StreamKey): boolean {
  return key.type === 'run' ? hasNul(key.pipeline, key.runId) : hasNul(key.topic);
}

/**
 * A page cursor cut at its first NUL: no stored name holds one, so the names after `a` NUL …
 * are exactly those after `a`.
 */
function beforeNul(cursor: string): string {
  const at = cursor.indexOf('\u0000');
  return at < 0 ? cursor : cursor.slice(0, at);
}

/** Errors that mean the server is out of reach (or going away), not that the request is bad. */
function isConnectionError(error: unknown): boolean {
  const state = sqlState(error);
  if (state !== undefined) {
    // 08: connection exception; 57P01–57P03: shutting down, crashed, starting; 53300: too many
    // connections.
    return state.startsWith('08') || /^57P0[123]$/.test(state) || state === '53300';
  }
  const code = (error as { code?: unknown } | null)?.code;
  if (
    typeof code === 'string' &&
    /^E(CONNREFUSED|CONNRESET|PIPE|TIMEDOUT|HOSTUNREACH|NOTFOUND|AI_AGAIN)$/.test(code)
  ) {
    return true;
  }
  const message = messageOf(error);
  return /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Connection ended/i.test(
    message,
  );
}

/** The SQLSTATE of a PostgreSQL error (five characters), if it is one. */
function sqlState(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

function messageOf(error: unknown): string {
  if (error instanceof AggregateError && error.errors.length > 0) {
    return error.errors.map(messageOf).join('; ');
  }
  return error instanceof Error ? error.message || String(error) : String(error);
}

/** The URL without its password, for messages; a URL that is not PostgreSQL's is refused. */
function describeUrl(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new Error(
      `Not a PostgreSQL URL: "${url}" (expected postgres://user@host:port/database).`,
    );
  }
  if (parsed.protocol !== 'postgres:' && parsed.protocol !== 'postgresql:') {
    throw new Error(
      `Not a PostgreSQL URL: "${parsed.protocol}//…" (expected postgres://user@host:port/database).`,
    );
  }
  if (parsed.password) parsed.password = '***';
  return parsed.toString();
}

/** A run row as the rules see it. */
function runState(row: RunRow): RunState {
  return {
    status: row.status,
    cancelRequested: row.cancel_requested,
    startedAt: row.started_at,
    endedAt: row.ended_at,
    meta: row.meta,
  };
}

/** A run row, with its stream's counters (as a transaction has moved them, when it has). */
function runFromRow(row: RunRow, stream?: LockedStream): Run {
  return {
    id: row.id,
    pipeline: row.pipeline,
    runId: row.run_id,
    status: row.status,
    cancelRequested: row.cancel_requested,
    createdAt: new Date(row.created_at).toISOString(),
    startedAt: row.started_at === null ? null : new Date(row.started_at).toISOString(),
    endedAt: row.ended_at === null ? null : new Date(row.ended_at).toISOString(),
    lastSeq: stream ? stream.lastSeq : row.last_seq,
    logBytes: stream ? stream.logBytes : row.log_bytes,
    meta: JSON.parse(row.meta) as Record<string, unknown>,
  };
}
