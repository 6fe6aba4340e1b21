import type { Entry, NewEvent, NewLog } from '../model/entry.js';
import { QUOTED_TEXT } from '../model/entry.js';
import { LOG_KIND } from '../model/names.js';
import type { PipelineSummary, Run } from '../model/run.js';
import type { StreamKey } from '../model/stream-key.js';
import { runKey, streamId as streamName } from '../model/stream-key.js';
import { entryFromRow } from './entry-row.js';
import type { EntryRow } from './entry-row.js';
import type { Lease, LeaseStore } from './lease.js';
import { canLease } from './lease.js';
import { lineStart } from './rules.js';
import type { SealCatalog } from './seal-catalog.js';
import { SealedSearch } from './sealed-search.js';
import { Sealer } from './sealer.js';
import type { SealerOptions } from './sealer.js';
import type { BlockInfo, DecodedBlock } from './segment-format.js';
import type { Sealed } from './sealed-blocks.js';
import { lastBlockAtMost } from './sealed-blocks.js';
import { SegmentReader } from './segment-reader.js';
import type { SegmentStore } from './segment-store.js';
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
} from './store.js';
import { payloadBytes } from './store.js';

/**
 * A store whose finished runs are sealed into compressed segments (docs/STORAGE.md, "Sealed
 * segments"), in front of a hot store that keeps the rest. Every read answers as the hot store
 * alone would have before sealing, seq for seq and byte for byte: a stream's entries are those
 * before its first segment (the hot store's), then its segments' in order, then the hot store's
 * after the last. Writes all go to the hot store.
 *
 * A stream's segment records are cached for `cacheMs`; another replica that seals a stream
 * drops its hot rows only `graceMs` later (longer), so a stale cache still reads them.
 */
export interface SealedStoreOptions extends SealerOptions {
  cacheMs: number;
}

/** Blocks decoded ahead of a catch-up's page (about a megabyte of log each). */
const READ_AHEAD = 2;

export const DEFAULT_SEALED_STORE_OPTIONS: SealedStoreOptions = {
  ...Sealer.defaults,
  cacheMs: 1000,
};

type HotStore = Store & SealCatalog;

export class SealedStore implements Store {
  readonly reader: SegmentReader;
  readonly sealer: Sealer;
  private readonly search: SealedSearch;
  private readonly cache = new Map<string, { at: number; sealed: Promise<Sealed | undefined> }>();
  /** Present when the hot store hands out leases (PostgreSQL: one sealer per fleet). */
  readonly tryLease?: (name: string) => Promise<Lease | undefined>;

  constructor(
    readonly hot: HotStore,
    readonly segments: SegmentStore,
    private readonly options: SealedStoreOptions = DEFAULT_SEALED_STORE_OPTIONS,
  ) {
    this.reader = new SegmentReader(segments);
    this.sealer = new Sealer(hot, segments, options, (key: StreamKey) => this.invalidate(key));
    this.search = new SealedSearch(hot, this.reader, (key) => this.sealedOf(key));
    if (canLease(hot)) {
      const leases: LeaseStore = hot;
      this.tryLease = (name) => leases.tryLease(name);
    }
  }

  // ---- what is sealed ----------------------------------------------------------------------

  private invalidate(key: StreamKey): void {
    this.cache.delete(streamName(key));
  }

  private sealedOf(key: StreamKey): Promise<Sealed | undefined> {
    const name = streamName(key);
    const now = Date.now();
    const cached = this.cache.get(name);
    if (cached && now - cached.at < this.options.cacheMs) return cached.sealed;
    const sealed = this.load(key);
    this.cache.set(name, { at: now, sealed });
    sealed.catch(() => this.cache.delete(name));
    if (this.cache.size > 10_000) this.cache.delete(this.cache.keys().next().value!);
    return sealed;
  }

  private async load(key: StreamKey): Promise<Sealed | undefined> {
    if (key.type !== 'run') return undefined;
    const records = await this.hot.segmentsOf(key);
    if (records.length === 0) return undefined;
    const blocks: Sealed['blocks'] = [];
    for (const record of records) {
      const footer = await this.reader.footer(key, record.name);
      footer.blocks.forEach((info, index) => blocks.push({ name: record.name, index, info }));
    }
    return {
      records,
      blocks,
      firstSeq: records[0]!.firstSeq,
      lastSeq: records.at(-1)!.lastSeq,
      logOffset: records[0]!.logOffset,
      logEnd: records.at(-1)!.logEnd,
      logLinesEnd: records.at(-1)!.logLinesEnd,
    };
  }

  private block(
    key: StreamKey,
    sealed: Sealed,
    at: number,
    forFrames = false,
  ): Promise<DecodedBlock> {
    const { name, index } = sealed.blocks[at]!;
    return this.reader.block(key, name, index, forFrames);
  }

  /**
   * The blocks a page of entries reads are decoded on a worker with their texts quoted for the
   * viewer's frames, and the next READ_AHEAD blocks are asked for too: while the event loop
   * writes one block's frames, the worker decodes the next (block-decoder.ts).
   */
  private framesBlock(key: StreamKey, sealed: Sealed, at: number): Promise<DecodedBlock> {
    const block = this.block(key, sealed, at, true);
    for (let next = at + 1; next <= at + READ_AHEAD && next < sealed.blocks.length; next += 1) {
      // Its failure, if any, is the next page's to answer.
      this.block(key, sealed, next, true).catch(() => undefined);
    }
    return block;
  }

  // ---- entries -----------------------------------------------------------------------------

  async readEntries(key: StreamKey, options: ReadEntriesOptions): Promise<Entry[]> {
    const sealed = await this.sealedOf(key);
    if (!sealed || options.afterSeq >= sealed.lastSeq) return this.hot.readEntries(key, options);
    const out: Entry[] = [];
    const maxBytes = options.maxBytes ?? Number.POSITIVE_INFINITY;
    let bytes = 0;
    const full = () => out.length >= options.limit || bytes >= maxBytes;
    // The hot entries before the first segment (a deleted run's tombstone, at most).
    if (options.afterSeq < sealed.firstSeq - 1) {
      for (const entry of await this.hot.readEntries(key, options)) {
        if (entry.seq >= sealed.firstSeq) break;
        out.push(entry);
        bytes += payloadBytes(entry);
        if (full()) return out;
      }
    }
    const wants = entryFilter(options);
    const from = Math.max(options.afterSeq + 1, sealed.firstSeq);
    for (
      let at = lastBlockAtMost(sealed, from, (b) => b.firstSeq);
      at < sealed.blocks.length;
      at += 1
    ) {
      const info = sealed.blocks[at]!.info;
      if (info.lastSeq < from || !wants.block(info)) continue;
      const block = await this.framesBlock(key, sealed, at);
      for (let i = Math.max(from - info.firstSeq, 0); i < block.count; i += 1) {
        const row = block.row(i)!;
        if (!wants.row(row)) continue;
        const entry = entryFromRow(row);
        const quoted = block.quotedText(i);
        // Not enumerable, as RAW_DATA: the entry stays a plain value for comparisons and copies.
        if (quoted) Object.defineProperty(entry, QUOTED_TEXT, { value: quoted });
        out.push(entry);
        bytes += Buffer.byteLength(row.body, 'utf8');
        if (full()) return out;
      }
    }
    const rest = await this.hot.readEntries(key, {
      ...options,
      afterSeq: sealed.lastSeq,
      limit: options.limit - out.length,
      maxBytes: options.maxBytes === undefined ? undefined : maxBytes - bytes,
    });
    return out.concat(rest);
  }

  async nthLatestSeq(
    key: StreamKey,
    n: number,
    kinds?: readonly string[],
  ): Promise<number | undefined> {
    const sealed = await this.sealedOf(key);
    if (!sealed || n < 1) return this.hot.nthLatestSeq(key, n, kinds);
    // The n-th newest is after the last segment if the hot store has n of them there.
    const hot = await this.hot.nthLatestSeq(key, n, kinds);
    if (hot !== undefined && hot > sealed.lastSeq) return hot;
    const wants = entryFilter({ kinds });
    const after = await this.hot.readEntries(key, { afterSeq: sealed.lastSeq, limit: n, kinds });
    let left = n - after.length;
    for (let at = sealed.blocks.length - 1; at >= 0; at -= 1) {
      const info = sealed.blocks[at]!.info;
      const count = wants.count(info);
      if (count < left) {
        left -= count;
        continue;
      }
      const rows = (await this.block(key, sealed, at)).rows().filter((row) => wants.row(row));
      return rows[rows.length - left]!.seq;
    }
    const before = (await this.hot.readEntries(key, { afterSeq: 0, limit: 1000, kinds })).filter(
      (entry) => entry.seq < sealed.firstSeq,
    );
    return before.length >= left ? before[before.length - left]!.seq : undefined;
  }

  async seqOfProducerId(key: StreamKey, id: string): Promise<number | undefined> {
    const hot = await this.hot.seqOfProducerId(key, id);
    if (hot !== undefined) return hot;
    const sealed = await this.sealedOf(key);
    if (!sealed) return undefined;
    for (let at = 0; at < sealed.blocks.length; at += 1) {
      if (sealed.blocks[at]!.info.ids === 0) continue;
      const row = (await this.block(key, sealed, at)).rows().find((r) => r.producer_id === id);
      if (row) return row.seq;
    }
    return undefined;
  }

  bounds(key: StreamKey): Promise<StreamBounds> {
    return this.hot.bounds(key);
  }

  // ---- log text ----------------------------------------------------------------------------

  /** Sealed log chunks whose offset is in [start, end), in order. */
  private async sealedChunks(
    key: StreamKey,
    sealed: Sealed,
    start: number,
    end: number,
  ): Promise<LogChunk[]> {
    const chunks: LogChunk[] = [];
    const first = lastBlockAtMost(sealed, start, (b) => b.logOffset);
    for (let at = first; at < sealed.blocks.length; at += 1) {
      const info = sealed.blocks[at]!.info;
      if (info.logOffset >= end) break;
      if (info.logEntries === 0 || info.logOffset + info.logBytes <= start) continue;
      for (const row of (await this.block(key, sealed, at)).rows()) {
        if (row.log_offset === null || row.log_offset < start) continue;
        if (row.log_offset >= end) return chunks;
        chunks.push(chunkOf(row));
      }
    }
    return chunks;
  }

  /** The sealed log row that holds byte `byte`, if it is sealed. */
  private async sealedRowAt(key: StreamKey, sealed: Sealed, byte: number) {
    if (byte < sealed.logOffset || byte >= sealed.logEnd) return undefined;
    const at = lastBlockAtMost(sealed, byte, (b) => b.logOffset, true);
    const block = await this.block(key, sealed, at);
    let found: EntryRow | undefined;
    for (let i = 0; i < block.count; i += 1) {
      const row = block.row(i)!;
      if (row.log_offset === null) continue;
      if (row.log_offset > byte) break;
      found = row;
    }
    return found;
  }

  async readLog(key: StreamKey, offset: number, limit: number): Promise<LogChunk[]> {
    const sealed = await this.sealedOf(key);
    if (!sealed) return this.hot.readLog(key, offset, limit);
    let start = offset;
    let end = offset + limit;
    if (offset === -1) {
      const total = (await this.hot.bounds(key)).logBytes;
      const from = Math.max(total - limit, 0);
      if (from >= sealed.logEnd) return this.hot.readLog(key, -1, limit);
      start = (await this.sealedRowAt(key, sealed, from))?.log_offset ?? from;
      end = Number.MAX_SAFE_INTEGER;
    }
    const before =
      start < sealed.logOffset
        ? await this.hot.readLog(key, start, Math.min(end, sealed.logOffset) - start)
        : [];
    const middle =
      end > sealed.logOffset && start < sealed.logEnd
        ? await this.sealedChunks(
            key,
            sealed,
            Math.max(start, sealed.logOffset),
            Math.min(end, sealed.logEnd),
          )
        : [];
    const hotFrom = Math.max(start, sealed.logEnd);
    const after = end > hotFrom ? await this.hot.readLog(key, hotFrom, end - hotFrom) : [];
    return [...before, ...middle, ...after];
  }

  async logChunkAt(key: StreamKey, byte: number): Promise<LogChunkPosition | undefined> {
    const sealed = await this.sealedOf(key);
    if (!sealed || byte < sealed.logOffset || byte >= sealed.logEnd) {
      return this.hot.logChunkAt(key, byte);
    }
    const row = await this.sealedRowAt(key, sealed, byte);
    if (!row) return undefined;
    const size = Buffer.byteLength(row.body, 'utf8');
    return row.log_offset! + size > byte
      ? { offset: row.log_offset!, size, seq: row.seq }
      : undefined;
  }

  async logLineStart(key: StreamKey, line: number): Promise<number | undefined> {
    const sealed = await this.sealedOf(key);
    // Line n begins after the (n-1)-th line feed: past the sealed ones, the hot store knows.
    if (!sealed || line - 1 > sealed.logLinesEnd) return this.hot.logLineStart(key, line);
    const bounds = await this.hot.bounds(key);
    return lineStart(line, bounds.logBytes, bounds.logLines, async (feeds) => {
      const first = sealed.blocks[0]!.info;
      if (feeds <= first.logLine) return undefined;
      const at = lastBlockAtMost(sealed, feeds - 1, (b) => b.logLine, true);
      const block = await this.block(key, sealed, at);
      let found: { logOffset: number; logLine: number; body: string } | undefined;
      block.rows().forEach((row, i) => {
        if (row.log_offset !== null && block.lines[i]! < feeds) {
          found = { logOffset: row.log_offset, logLine: block.lines[i]!, body: row.body };
        }
      });
      return found;
    });
  }

  // ---- search ------------------------------------------------------------------------------

  async searchDocuments(request: SearchDocumentsRequest): Promise<SearchDocument[]> {
    const [hot, sealed] = await Promise.all([
      this.hotDocuments(request),
      this.search.documents(request),
    ]);
    return [...hot, ...sealed].sort((a, b) => b.id - a.id).slice(0, request.limit);
  }

  /**
   * The hot index's documents but those a segment holds: until its hot rows are dropped, a
   * sealed run's documents are in both, and the segment's answer is the one given.
   */
  private async hotDocuments(request: SearchDocumentsRequest): Promise<SearchDocument[]> {
    const out: SearchDocument[] = [];
    let beforeId = request.beforeId;
    for (;;) {
      const page = await this.hot.searchDocuments({ ...request, beforeId });
      for (const document of page) {
        beforeId = document.id;
        const sealed = await this.sealedOf(runKey(document.pipeline, document.runId));
        const lastSealed = Math.max(
          -1,
          ...(sealed?.records ?? []).map((r) => r.lastDocumentId ?? -1),
        );
        if (document.id > lastSealed) {
          out.push(document);
          if (out.length >= request.limit) return out;
        }
      }
      if (page.length < request.limit) return out;
    }
  }

  // ---- runs and the rest: the hot store's ---------------------------------------------------

  async deleteRun(pipeline: string, runId: string): Promise<PutRunResult> {
    const key = { type: 'run', pipeline, runId } as const;
    const records = await this.hot.segmentsOf(key);
    const result = await this.hot.deleteRun(pipeline, runId);
    this.invalidate(key);
    // The records went with the run; the files after (a crash here leaves files no record
    // names, which the sealer's sweep removes).
    for (const record of records) {
      this.reader.forget(record.name);
      await this.segments.remove(record.name);
    }
    return result;
  }

  /** Hot and sealed bytes (`tailwater stats`, /metrics). */
  storageBytes(): Promise<StorageBytes> {
    return this.hot.storageBytes();
  }

  putRun(pipeline: string, runId: string, update: RunUpdate): Promise<PutRunResult> {
    return this.hot.putRun(pipeline, runId, update);
  }
  getRun(pipeline: string, runId: string): Promise<Run | undefined> {
    return this.hot.getRun(pipeline, runId);
  }
  findRuns(runIdOrId: string): Promise<Run[]> {
    return this.hot.findRuns(runIdOrId);
  }
  latestRun(pipeline: string): Promise<Run | undefined> {
    return this.hot.latestRun(pipeline);
  }
  listPipelines(page: ListPipelinesRequest): Promise<Page<PipelineSummary>> {
    return this.hot.listPipelines(page);
  }
  pipelineStats(page: PageRequest): Promise<Page<PipelineStats>> {
    return this.hot.pipelineStats(page);
  }
  pipelineById(id: string): Promise<string | undefined> {
    return this.hot.pipelineById(id);
  }
  listRuns(pipeline: string, page: ListRunsRequest): Promise<Page<Run>> {
    return this.hot.listRuns(pipeline, page);
  }
  requestCancel(pipeline: string, runId: string): Promise<PutRunResult> {
    return this.hot.requestCancel(pipeline, runId);
  }
  appendLog(pipeline: string, runId: string, chunks: readonly NewLog[]): Promise<AppendLogResult> {
    return this.hot.appendLog(pipeline, runId, chunks);
  }
  appendEvents(key: StreamKey, events: readonly NewEvent[]): Promise<AppendEventsResult> {
    return this.hot.appendEvents(key, events);
  }
  listTopics(page: PageRequest): Promise<Page<string>> {
    return this.hot.listTopics(page);
  }
  trimTopic(topic: string, policy: TrimPolicy): Promise<TrimResult> {
    return this.hot.trimTopic(topic, policy);
  }
  indexForSearch(limits: IndexLimits): Promise<IndexResult> {
    return this.hot.indexForSearch(limits);
  }
  searchIndexStatus(): Promise<SearchIndexStatus> {
    return this.hot.searchIndexStatus();
  }
  renewEpoch(): Promise<string> {
    return this.hot.renewEpoch();
  }

  async close(): Promise<void> {
    await this.sealer.close();
    await this.reader.close();
    await this.hot.close();
    await this.segments.close();
  }
}

function chunkOf(row: EntryRow): LogChunk {
  return {
    offset: row.log_offset!,
    size: Buffer.byteLength(row.body, 'utf8'),
    text: row.body,
    time: new Date(row.time).toISOString(),
    ...(row.step === null ? {} : { step: row.step }),
  };
}

/** Which entries a read wants, by row and by block (to skip a block that holds none). */
function entryFilter(options: Pick<ReadEntriesOptions, 'kinds' | 'withoutLog'>) {
  const kinds = options.kinds ? new Set(options.kinds) : undefined;
  const withoutLog = !kinds && options.withoutLog === true;
  const count = (info: BlockInfo): number => {
    if (kinds) {
      let n = kinds.has(LOG_KIND) ? info.logEntries : 0;
      for (const kind of kinds) n += info.kinds[kind] ?? 0;
      return n;
    }
    const all = info.lastSeq - info.firstSeq + 1;
    return withoutLog ? all - info.logEntries : all;
  };
  return {
    row: (row: EntryRow): boolean => {
      if (kinds) return row.log_offset !== null ? kinds.has(LOG_KIND) : kinds.has(row.kind);
      return !withoutLog || row.log_offset === null;
    },
    block: (info: BlockInfo): boolean => count(info) > 0,
    count,
  };
}
