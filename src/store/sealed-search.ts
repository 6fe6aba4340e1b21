import type { StreamKey } from '../model/stream-key.js';
import { runKey } from '../model/stream-key.js';
import type { SealCatalog, SealedRun } from './seal-catalog.js';
import type { Sealed } from './sealed-blocks.js';
import { lastBlockAtMost } from './sealed-blocks.js';
import { DOCUMENTS_PER_RUN } from './search-documents.js';
import type { DecodedBlock, SealedDocument } from './segment-format.js';
import type { SegmentReader } from './segment-reader.js';
import type { SearchDocument, SearchDocumentsRequest } from './store.js';
import { holdsLiterals, mayMatch } from './trigram-filter.js';

const blockLogs = new WeakMap<DecodedBlock, Buffer>();

/** A block's log text, end to end, made once per decoded block. */
function logBytesOf(block: DecodedBlock): Buffer {
  let bytes = blockLogs.get(block);
  if (!bytes) {
    const texts = block.rows.flatMap((row) => (row.log_offset === null ? [] : [row.body]));
    bytes = Buffer.from(texts.join(''), 'utf8');
    blockLogs.set(block, bytes);
  }
  return bytes;
}

/** Sealed runs asked of the catalog at a time. */
const RUNS_PER_QUERY = 32;

/**
 * Search over sealed runs (docs/SEARCH.md): the same documents, with the same ids, as the hot
 * index held before the run was sealed. Each block's filter says whether it may hold the
 * query's literals; only the blocks that pass are decompressed, and their documents are
 * matched as the full-text index would (every literal, ignoring case). Documents come newest
 * first (descending id), runs by position and, within a run, blocks by their highest id.
 */
export class SealedSearch {
  constructor(
    private readonly catalog: SealCatalog,
    private readonly reader: SegmentReader,
    private readonly sealedOf: (key: StreamKey) => Promise<Sealed | undefined>,
  ) {}

  async documents(request: SearchDocumentsRequest): Promise<SearchDocument[]> {
    const out: SearchDocument[] = [];
    const beforeId = request.beforeId ?? Number.MAX_SAFE_INTEGER;
    // The run that holds document beforeId - 1 is looked in too.
    let beforePosition = Math.floor((beforeId - 1) / DOCUMENTS_PER_RUN) + 1;
    for (;;) {
      const runs = await this.catalog.sealedRunsForSearch(request, beforePosition, RUNS_PER_QUERY);
      for (const run of runs) {
        beforePosition = run.position;
        out.push(...(await this.runDocuments(run, request, beforeId, request.limit - out.length)));
        if (out.length >= request.limit) return out;
      }
      if (runs.length < RUNS_PER_QUERY) return out;
    }
  }

  private async runDocuments(
    run: SealedRun,
    request: SearchDocumentsRequest,
    beforeId: number,
    want: number,
  ): Promise<SearchDocument[]> {
    const key = runKey(run.pipeline, run.runId);
    const sealed = await this.sealedOf(key);
    if (!sealed) return [];
    const candidates: Array<{ at: number; docs: SealedDocument[]; maxId: number }> = [];
    const filters = new Map<string, Uint8Array[]>();
    for (const record of sealed.records) {
      filters.set(record.name, await this.reader.blockFilters(key, record.name));
    }
    sealed.blocks.forEach(({ name, index, info }, at) => {
      const docs = info.docs.filter(
        (doc) => doc.id < beforeId && (request.kind === undefined || doc.kind === request.kind),
      );
      if (docs.length === 0 || !mayMatch(filters.get(name)![index]!, request.query)) return;
      candidates.push({ at, docs, maxId: docs.at(-1)!.id });
    });
    candidates.sort((a, b) => b.maxId - a.maxId);
    const found: SearchDocument[] = [];
    const out: SearchDocument[] = [];
    for (let i = 0; i < candidates.length && out.length < want; i += 1) {
      const candidate = candidates[i]!;
      for (const doc of candidate.docs) {
        const text = await this.textOf(key, sealed, candidate.at, doc);
        if (!holdsLiterals(text.toLowerCase(), request.query)) continue;
        found.push({
          id: doc.id,
          pipeline: run.pipeline,
          runId: run.runId,
          runStatus: run.status,
          runCreatedAt: run.createdAt,
          kind: doc.kind,
          seq: doc.seq,
          line: doc.line,
          offset: doc.offset,
          lineOffset: doc.lineOffset,
          column: doc.column,
          text,
        });
      }
      // What no block still to read can come before: every id above the next block's highest.
      const next = candidates[i + 1]?.maxId ?? Number.NEGATIVE_INFINITY;
      found.sort((a, b) => b.id - a.id);
      while (found.length > 0 && found[0]!.id > next && out.length < want) out.push(found.shift()!);
    }
    return out;
  }

  /** A document's text: an event's data as stored, or its bytes of the log. */
  private async textOf(
    key: StreamKey,
    sealed: Sealed,
    at: number,
    doc: SealedDocument,
  ): Promise<string> {
    if (doc.kind === 'event') {
      const block = await this.reader.block(key, sealed.blocks[at]!.name, sealed.blocks[at]!.index);
      return block.rows[doc.seq! - block.info.firstSeq]?.body ?? '';
    }
    const start = doc.offset!;
    const end = start + doc.bytes;
    const parts: Buffer[] = [];
    const first = lastBlockAtMost(sealed, start, (info) => info.logOffset, true);
    const from = sealed.blocks[first]!.info.logOffset;
    for (let b = first; b < sealed.blocks.length; b += 1) {
      const { name, index, info } = sealed.blocks[b]!;
      if (info.logOffset >= end) break;
      if (info.logEntries > 0) parts.push(logBytesOf(await this.reader.block(key, name, index)));
    }
    return Buffer.concat(parts).toString('utf8', start - from, end - from);
  }
}
