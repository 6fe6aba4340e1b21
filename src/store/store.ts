import type { Entry, NewEvent, NewLog } from '../model/entry.js';
import { RAW_DATA } from '../model/entry.js';
import type { PipelineSummary, Run, RunStatus } from '../model/run.js';
import type { StreamKey } from '../model/stream-key.js';
import type { LiteralQuery } from '../model/search-query.js';

/** The built-in topic that receives one `status` entry per run status change (the runs feed). */
export const RUNS_FEED_TOPIC = '_runs';

/** What a page of runs may carry in `meta` before it stops early. */
export const PAGE_META_BYTES = 4 * 1024 * 1024;

export interface RunUpdate {
  status?: RunStatus | undefined;
  meta?: Record<string, unknown> | undefined;
}

/** Stream positions a write created, so the caller can ring the bus for each. */
export interface Written {
  key: StreamKey;
  seq: number;
}

export interface PutRunResult {
  run: Run;
  written: Written[];
}

export interface AppendLogResult {
  /** The seq of the last entry the text was stored in (the cursor after which it is visible). */
  seq: number;
  firstSeq: number;
  /** Byte offset of the text in the run's log, and its size in UTF-8 bytes. */
  offset: number;
  size: number;
  /** True when the producer id was seen before: nothing was stored, the original is returned. */
  duplicate: boolean;
  written: Written[];
}

export interface AppendEventsResult {
  /** The seq acknowledged for each event, in order; a duplicate gets its original seq. */
  seqs: number[];
  duplicates: number;
  written: Written[];
}

/** One page of a listing, and the cursor of the next page when there is more. */
export interface Page<T> {
  items: T[];
  /** Opaque; absent on the last page. */
  next?: string | undefined;
}

export interface PageRequest {
  /** The `next` of the previous page; absent for the first page. */
  after?: string | undefined;
  limit: number;
}

export interface ListRunsRequest extends PageRequest {
  status?: RunStatus | undefined;
  /**
   * Only runs created at or after this time (epoch ms), and before `until`. With either bound the
   * page is ordered by creation time (newest first), walked by an index on it, and its cursor is
   * of another form than an unbounded listing's.
   */
  since?: number | undefined;
  until?: number | undefined;
}

export interface ListPipelinesRequest extends PageRequest {
  /** Only pipelines whose FQN this glob matches (`*` any run of characters), case-sensitive. */
  name?: string | undefined;
  /** Only pipelines whose newest run has this status. */
  status?: RunStatus | undefined;
}

export interface ReadEntriesOptions {
  /** Entries with seq > afterSeq; 0 reads from the start. */
  afterSeq: number;
  limit: number;
  /** Stop after this many bytes of entry payload (at least one entry is always returned). */
  maxBytes?: number | undefined;
  /**
   * Only these kinds (absent: every kind). The store reads only entries of these kinds, by
   * index, so a kind that matches nothing costs nothing however long the stream is.
   */
  kinds?: readonly string[] | undefined;
  /**
   * Only entries that are not log text (ignored when `kinds` is given), by an index of their
   * own: a viewer that already has a run's log as text reads its events without the log.
   */
  withoutLog?: boolean | undefined;
}

export interface LogChunk {
  offset: number;
  size: number;
  text: string;
  /** When the chunk was appended (ISO-8601). */
  time: string;
  /** The step its entry was filed under, if any. */
  step?: string;
}

/** Where a log chunk is: in the log (its bytes) and in its stream (the seq of its entry). */
export interface LogChunkPosition {
  offset: number;
  size: number;
  seq: number;
}

export interface TrimPolicy {
  /** Keep at most this many newest entries; 0 means no limit by count. */
  maxEntries: number;
  /** Remove entries written before this time (epoch ms); absent means no limit by age. */
  olderThanMs?: number | undefined;
}

export interface TrimResult {
  removed: number;
  /** The oldest seq still stored after trimming. */
  firstSeq: number;
}

export interface StreamBounds {
  /** The oldest seq still stored (retention may have removed older ones); lastSeq + 1 if empty. */
  firstSeq: number;
  /** The newest seq ever assigned for this key; 0 if never written. Never goes back. */
  lastSeq: number;
  /** Bytes of log text ever written to this stream. */
  logBytes: number;
  /** Line feeds in that text (a log that does not end with one has a line more). */
  logLines: number;
  /**
   * The store's epoch: made when the database is created, made anew by `renewEpoch()` after a
   * restore. A cursor handed out under another epoch may number other entries (docs/STORAGE.md).
   */
  epoch: string;
}

/** What one pipeline's history holds (`tailwater stats`, /metrics). */
export interface PipelineStats {
  pipeline: string;
  runs: number;
  /** Bytes of log text its runs hold. */
  logBytes: number;
}

/** Where the history's bytes are (`tailwater stats`, /metrics; docs/STORAGE.md). */
export interface StorageBytes {
  /** Bytes of log text in the hot store (not yet sealed). */
  hotLogBytes: number;
  /** Bytes of entries sealed, as the hot store held them, and of the segment files. */
  sealedRawBytes: number;
  sealedBytes: number;
  segments: number;
}

/** What the search index holds of a run: its log in documents of whole lines, and its events. */
export type SearchKind = 'log' | 'event';

/** A document of the search index that may match a search (search-documents.ts). */
export interface SearchDocument {
  /** Orders the index: newest runs first is descending id. */
  id: number;
  pipeline: string;
  runId: string;
  runStatus: RunStatus;
  /** When the run was created (epoch ms). */
  runCreatedAt: number;
  kind: SearchKind;
  /** The event's seq; null for log text. */
  seq: number | null;
  /** A log document's first line number (1-based) and its byte offset in the log. */
  line: number | null;
  offset: number | null;
  /** For a log document that starts inside its first line: where that line began. */
  lineOffset: number | null;
  column: number | null;
  text: string;
}

export interface SearchDocumentsRequest {
  /** What every candidate contains (case-insensitive); the caller matches exactly afterwards. */
  query: LiteralQuery;
  /** Only documents whose id is below this (a page's cursor); absent: from the newest. */
  beforeId?: number | undefined;
  kind?: SearchKind | undefined;
  /** A glob over pipeline FQNs (`*` any run of characters). */
  pipeline?: string | undefined;
  statuses?: readonly RunStatus[] | undefined;
  /** Runs created at or after `since` and before `until` (epoch ms). */
  since?: number | undefined;
  until?: number | undefined;
  limit: number;
}

/** How far the search index is behind what is stored. */
export interface SearchIndexStatus {
  /** Runs with entries not yet indexed, and how many entries. */
  pendingRuns: number;
  pendingEntries: number;
  /** When the oldest entry not yet indexed was stored (epoch ms); null when none is waiting. */
  oldestPendingAt: number | null;
}

export interface IndexLimits {
  /** Entries, and bytes of their text, to index at most in this call (one transaction). */
  maxEntries: number;
  maxBytes: number;
}

export interface IndexResult {
  entries: number;
  documents: number;
  /** Whether entries are left to index. */
  more: boolean;
}

/**
 * The single source of truth. Guarantees every implementation holds (see store.contract.ts):
 * - `seq` is assigned inside the append transaction, gapless per stream from 1, and never goes
 *   back for a key, even if the run is deleted and created again.
 * - An append resolves only once it is durable against a crash of the process; a batch is
 *   all-or-nothing.
 * - A producer `id` seen before on the same stream is acknowledged with its original seq and
 *   not stored again, when what it names is the same (kind, step, correlation id, data, or the
 *   same log text); when it is not, the append is refused with TW_ID_CONFLICT.
 * - A status change writes one `status` entry to the run and one to the runs feed (the run as
 *   a RunSummary: no `meta`); a put that changes nothing writes nothing.
 * - Writes are atomic and isolated: a reader never sees part of a batch, even while a large one
 *   is being written (the SQLite store writes it in slices, between which other work runs).
 * - Log entries carry the byte offset of their text in the run's log; offsets are contiguous.
 */
export interface Store {
  /** Creates or updates a run; a terminal run cannot go back (TW_STATUS_CONFLICT). */
  putRun(pipeline: string, runId: string, update: RunUpdate): Promise<PutRunResult>;
  getRun(pipeline: string, runId: string): Promise<Run | undefined>;
  /**
   * Runs whose run id, or server-given UUID, is `runIdOrId`, across every pipeline, newest
   * first (for dialects whose clients name a run without its pipeline).
   */
  findRuns(runIdOrId: string): Promise<Run[]>;
  /** The most recently created run of a pipeline. */
  latestRun(pipeline: string): Promise<Run | undefined>;
  /**
   * Pipelines by FQN, in code-point order, a page at a time. A page stops early once the runs
   * it holds carry a few megabytes of `meta`, so an answer stays small whatever is stored.
   * Malformed cursors are TW_BAD_CURSOR.
   */
  listPipelines(page: ListPipelinesRequest): Promise<Page<PipelineSummary>>;
  /** Hot and sealed bytes of the whole history (a few indexed sums). */
  storageBytes(): Promise<StorageBytes>;
  /** Runs and log bytes per pipeline, by FQN, a page at a time (one indexed query per page). */
  pipelineStats(page: PageRequest): Promise<Page<PipelineStats>>;
  /** The FQN of the pipeline whose id (`PipelineSummary.id`) this is. */
  pipelineById(id: string): Promise<string | undefined>;
  /** Runs of a pipeline, newest first, a page at a time (same byte budget as listPipelines). */
  listRuns(pipeline: string, page: ListRunsRequest): Promise<Page<Run>>;
  /**
   * Sets cancelRequested and writes a status entry; unknown → TW_RUN_NOT_FOUND. A run whose
   * cancel was already requested is returned as it is, and nothing is written.
   */
  requestCancel(pipeline: string, runId: string): Promise<PutRunResult>;

  /**
   * Deletes a run (docs/SEARCH.md, "History"): its row, its entries, its search documents, and
   * its count in its pipeline (a pipeline left with no run is no longer listed). Its stream gets
   * a tombstone entry (rules.tombstoneBody) and the runs feed a `deleted` entry, in the same
   * transaction as the row's removal; the entries themselves go after, a slice at a time. A run
   * it does not know is TW_RUN_NOT_FOUND.
   */
  deleteRun(pipeline: string, runId: string): Promise<PutRunResult>;

  /**
   * Appends log text, already cut into chunks that end on character boundaries. Creates the run
   * as `running` if it does not exist.
   */
  appendLog(pipeline: string, runId: string, chunks: readonly NewLog[]): Promise<AppendLogResult>;
  /** Appends events to a run (created as `running` if new) or a topic, all-or-nothing. */
  appendEvents(key: StreamKey, events: readonly NewEvent[]): Promise<AppendEventsResult>;

  readEntries(key: StreamKey, options: ReadEntriesOptions): Promise<Entry[]>;
  /**
   * The seq of the n-th newest entry (of `kinds`, if given), for "the last n entries"; undefined
   * when the stream holds fewer than n such entries.
   */
  nthLatestSeq(key: StreamKey, n: number, kinds?: readonly string[]): Promise<number | undefined>;
  /** The seq of the entry a producer stored under `id` on this stream, if any. */
  seqOfProducerId(key: StreamKey, id: string): Promise<number | undefined>;
  bounds(key: StreamKey): Promise<StreamBounds>;
  /**
   * Whole log chunks whose offset is in [offset, offset + limit), in order. `offset = -1` reads
   * the tail: the chunks that end within the last `limit` bytes (Freight's semantics).
   */
  readLog(key: StreamKey, offset: number, limit: number): Promise<LogChunk[]>;
  /** The log chunk that holds byte `byte` of the log, if there is one. */
  logChunkAt(key: StreamKey, byte: number): Promise<LogChunkPosition | undefined>;
  /**
   * Where line `line` (1-based) of the log begins, in bytes (the byte after its line feed before
   * it), found by index however long the log; undefined when the log has no such line.
   */
  logLineStart(key: StreamKey, line: number): Promise<number | undefined>;

  /** Topics ever written, the server's own (`_runs`) included, by name, a page at a time. */
  listTopics(page: PageRequest): Promise<Page<string>>;
  /**
   * Retention: removes a topic's oldest entries by the policy. Entries are only ever removed
   * from the start, so what remains stays gapless and `firstSeq` moves forward; `lastSeq` never
   * changes. A viewer whose cursor points into removed entries is told with `gap retention`.
   */
  trimTopic(topic: string, policy: TrimPolicy): Promise<TrimResult>;

  /**
   * Search (docs/SEARCH.md). `indexForSearch` adds to the index what was stored since it last
   * ran, a bounded amount per call, whole transactions at a time; one server of a fleet runs it.
   * `searchDocuments` answers the documents that contain the query's literals, newest first
   * (descending id), at most `limit`; only entries indexed are found.
   */
  indexForSearch(limits: IndexLimits): Promise<IndexResult>;
  searchIndexStatus(): Promise<SearchIndexStatus>;
  searchDocuments(request: SearchDocumentsRequest): Promise<SearchDocument[]>;

  /**
   * Gives the database a new epoch, so every cursor handed out before is answered with `gap
   * reset` (after a restore from a backup, whose seqs a later append may reuse). Servers on
   * the database read the epoch when they open it. Answers the new epoch.
   */
  renewEpoch(): Promise<string>;
  close(): Promise<void>;
}

/**
 * What an entry weighs against a read's byte budget (`ReadEntriesOptions.maxBytes`): its log
 * text or its data as stored, in UTF-8 bytes. A caller that must tell whether a page was cut by
 * the budget counts with this, as the store does.
 */
export function payloadBytes(entry: Entry): number {
  return Buffer.byteLength(entry.text ?? entry[RAW_DATA] ?? '', 'utf8');
}
