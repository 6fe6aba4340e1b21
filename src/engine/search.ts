import { TailwaterError } from '../model/errors.js';
import type { RunStatus } from '../model/run.js';
import type { PlannedSearch } from '../model/search-query.js';
import { runKey } from '../model/stream-key.js';
import type { SearchHit, SearchPage } from '../model/search-result.js';
export type { SearchHit, SearchPage } from '../model/search-result.js';
import type { SearchDocument, SearchKind, Store } from '../store/store.js';
import { lineHits } from './search-hits.js';

/**
 * A search across every run (docs/SEARCH.md): the store's index finds the documents that hold
 * the query's literals, newest runs first; the matcher finds the lines; a page stops at `limit`
 * hits or when its time is up, with a cursor to go on from.
 */
export interface SearchRequest {
  plan: PlannedSearch;
  kind?: SearchKind | undefined;
  pipeline?: string | undefined;
  statuses?: readonly RunStatus[] | undefined;
  since?: number | undefined;
  until?: number | undefined;
  limit: number;
  cursor?: string | undefined;
  /** Whether the caller may read a pipeline (its token's scopes); absent: every one. */
  mayRead?: ((pipeline: string) => boolean) | undefined;
}

/** Documents asked of the store at a time. */
const DOCUMENTS_PER_QUERY = 50;
/** How long one page may search before it answers with what it found and a cursor. */
const PAGE_BUDGET_MS = 2000;

export async function search(store: Store, request: SearchRequest): Promise<SearchPage> {
  const started = performance.now();
  const after = request.cursor === undefined ? undefined : parseSearchCursor(request.cursor);
  let beforeId = after === undefined ? undefined : after.id + 1;
  const hits: SearchHit[] = [];
  let next: string | undefined;
  scan: for (;;) {
    const documents = await store.searchDocuments({
      query: request.plan.index,
      beforeId,
      kind: request.kind,
      pipeline: request.pipeline,
      statuses: request.statuses,
      since: request.since,
      until: request.until,
      limit: DOCUMENTS_PER_QUERY,
    });
    for (const document of documents) {
      beforeId = document.id;
      if (request.mayRead && !request.mayRead(document.pipeline)) continue;
      const below = after?.id === document.id ? after.position : Number.POSITIVE_INFINITY;
      for (const found of hitsOf(request.plan, document)) {
        const position = found.hit.line ?? 1;
        if (position >= below) continue;
        hits.push(await found.complete(store));
        if (hits.length >= request.limit) {
          next = formatSearchCursor(document.id, position);
          break scan;
        }
      }
    }
    if (documents.length < DOCUMENTS_PER_QUERY) break;
    if (performance.now() - started >= PAGE_BUDGET_MS) {
      // Time is up: what was found, and where to go on (the next document down).
      next = formatSearchCursor(beforeId!, 0);
      break;
    }
  }
  return { hits, next, index: await indexLag(store) };
}

/** A hit found, whose seq is looked up only if the page takes it. */
interface FoundHit {
  hit: Omit<SearchHit, 'seq'>;
  complete(store: Store): Promise<SearchHit>;
}

/** A document's hits, later lines first (the order of the whole answer is newest first). */
function hitsOf(plan: PlannedSearch, document: SearchDocument): FoundHit[] {
  const run = {
    pipeline: document.pipeline,
    runId: document.runId,
    runStatus: document.runStatus,
    runCreatedAt: new Date(document.runCreatedAt).toISOString(),
    kind: document.kind,
  };
  if (document.kind === 'event') {
    const [line] = lineHits(plan.pattern, document.text.replaceAll('\n', ' '), 1, 0);
    if (!line) return [];
    const { text, textStart, truncated, matches } = line;
    const rest = { line: null, offset: null, text, textStart, truncated, matches };
    const hit = { ...run, ...rest };
    return [{ hit, complete: async () => ({ ...run, seq: document.seq!, ...rest }) }];
  }
  const key = runKey(document.pipeline, document.runId);
  const continued =
    document.lineOffset === null || document.column === null
      ? undefined
      : { offset: document.lineOffset, column: document.column };
  const lines = lineHits(plan.pattern, document.text, document.line!, document.offset!, continued);
  return lines.reverse().map((line) => {
    const hit = { ...run, ...line };
    return {
      hit,
      // The entry the line starts in: one indexed lookup, for the hits a page keeps.
      complete: async (store: Store) => ({
        ...run,
        seq: (await store.logChunkAt(key, line.offset))?.seq ?? 0,
        ...line,
      }),
    };
  });
}

async function indexLag(store: Store): Promise<SearchPage['index']> {
  const status = await store.searchIndexStatus();
  const lagMs =
    status.oldestPendingAt === null ? 0 : Math.max(0, Date.now() - status.oldestPendingAt);
  return { pendingEntries: status.pendingEntries, lagSeconds: Math.round(lagMs) / 1000 };
}

/**
 * A page's cursor: the document it stopped in and the line position below which the next page
 * goes on there (0: that document is done). Opaque to clients.
 */
export function formatSearchCursor(id: number, position: number): string {
  return Buffer.from(`${id}:${position}`).toString('base64url');
}

export function parseSearchCursor(cursor: string): { id: number; position: number } {
  const match = /^(\d{1,16}):(\d{1,16})$/.exec(Buffer.from(cursor, 'base64url').toString('latin1'));
  const id = match ? Number(match[1]) : NaN;
  const position = match ? Number(match[2]) : NaN;
  if (!Number.isSafeInteger(id) || !Number.isSafeInteger(position)) {
    throw new TailwaterError('TW_BAD_CURSOR', 'cursor: not a cursor this server gave out.');
  }
  return { id, position };
}
