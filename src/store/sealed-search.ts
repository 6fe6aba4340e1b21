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
      const texts = await this.textsOf(key, sealed, candidate.at, candidate.docs);
      // A block that passed its filter without the literals (a false positive) costs one scan.
      if (texts.lower === undefined || holdsLiterals(texts.lower, request.query)) {
        candidate.docs.forEach((doc, d) => {
          const text = texts.text(d);
          if (!holdsLiterals(texts.lowerOf(d, text), request.query)) return;
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
        });
      }
      // What no block still to read can come before: every id above the next block's highest.
      const next = candidates[i + 1]?.maxId ?? Number.NEGATIVE_INFINITY;
      found.sort((a, b) => b.id - a.id);
      while (found.length > 0 && found[0]!.id > next && out.length < want) out.push(found.shift()!);
    }
    return out;
  }

  /**
   * The texts of a block's documents. Log documents are cut from one buffer of the log bytes
   * they span (the block's, and the next ones' where the last runs on), made once per block
   * rather than per document; for ASCII text, a document's text and its lower case are slices
   * of the whole one's.
   */
  private async textsOf(
    key: StreamKey,
    sealed: Sealed,
    at: number,
    docs: readonly SealedDocument[],
  ): Promise<DocumentTexts> {
    const block = await this.reader.block(key, sealed.blocks[at]!.name, sealed.blocks[at]!.index);
    const logs = docs.filter((doc) => doc.kind === 'log');
    if (logs.length === 0) return eventTexts(block, docs);
    const start = Math.min(...logs.map((doc) => doc.offset!));
    const end = Math.max(...logs.map((doc) => doc.offset! + doc.bytes));
    const first = lastBlockAtMost(sealed, start, (info) => info.logOffset, true);
    const from = sealed.blocks[first]!.info.logOffset;
    const parts: Buffer[] = [];
    for (let b = first; b < sealed.blocks.length; b += 1) {
      const { name, index, info } = sealed.blocks[b]!;
      if (info.logOffset >= end) break;
      if (info.logEntries > 0) parts.push((await this.reader.block(key, name, index)).logBytes());
    }
    const bytes = (parts.length === 1 ? parts[0]! : Buffer.concat(parts)).subarray(
      start - from,
      end - from,
    );
    const whole = bytes.toString('utf8');
    const ascii = whole.length === bytes.length;
    const lower = whole.toLowerCase();
    const text = (d: number): string => {
      const doc = docs[d]!;
      if (doc.kind === 'event') return block.row(doc.seq! - block.info.firstSeq)?.body ?? '';
      const a = doc.offset! - start;
      return ascii ? whole.slice(a, a + doc.bytes) : bytes.toString('utf8', a, a + doc.bytes);
    };
    const lowerOf = (d: number, text: string): string => {
      const doc = docs[d]!;
      if (!ascii || doc.kind === 'event') return text.toLowerCase();
      const a = doc.offset! - start;
      return lower.slice(a, a + doc.bytes);
    };
    // Events are not in the log text, and outside ASCII lower case can depend on what
    // follows (a final sigma): only then does one check of the whole rule every document out.
    return { lower: ascii && logs.length === docs.length ? lower : undefined, text, lowerOf };
  }
}

/** A block's documents' texts (see SealedSearch.textsOf). */
interface DocumentTexts {
  /** All its documents' text in lower case, when that is one piece of log. */
  lower: string | undefined;
  text(d: number): string;
  lowerOf(d: number, text: string): string;
}

function eventTexts(block: DecodedBlock, docs: readonly SealedDocument[]): DocumentTexts {
  const text = (d: number) => block.row(docs[d]!.seq! - block.info.firstSeq)?.body ?? '';
  return { lower: undefined, text, lowerOf: (_d, t) => t.toLowerCase() };
}
