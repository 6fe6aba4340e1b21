import type { Entry } from '../model/entry.js';
import { RAW_DATA } from '../model/entry.js';
import { isRunStatus, isTerminal } from '../model/run.js';

/**
 * How a run's entries become the documents of the search index (docs/SEARCH.md), the same for
 * every store: only SQL differs between them.
 *
 * A run's log is cut into documents of whole lines, whatever the chunks it was appended in, so
 * a line split across two appends is one line to the index. The text after the last newline
 * waits (in the run's index state) for the rest of its line, or for the run to end. Each
 * document knows the number of its first line and its byte offset in the log, so a match in it
 * is placed exactly. An event is a document of its own: its data as stored.
 *
 * A document's id orders the whole index: `run position × 2^26 + the run's document number`,
 * where the run position is its creation order. Newest runs first is then the index's own
 * descending order, and a search can walk it a page at a time and stop early.
 */
export interface IndexState {
  /** Entries up to this seq are indexed. */
  indexedSeq: number;
  /** The line number (1-based) of the first line of `pendingText`. */
  nextLine: number;
  /** Byte offset in the log of `pendingText`. */
  pendingOffset: number;
  /**
   * Where line `nextLine` began: its byte offset, and how much of it (UTF-16 units) is already
   * indexed, when a piece of a very long line, or the unfinished last line of an ended run, was.
   */
  lineOffset: number;
  column: number;
  /** Log text after the last newline indexed: the start of a line still being written. */
  pendingText: string;
  /** Documents made for this run so far. */
  documents: number;
}

export const EMPTY_INDEX_STATE: IndexState = {
  indexedSeq: 0,
  nextLine: 1,
  pendingOffset: 0,
  lineOffset: 0,
  column: 0,
  pendingText: '',
  documents: 0,
};

export interface NewDocument {
  id: number;
  kind: 'log' | 'event';
  /** The entry an event document is (null for log text, which may span entries). */
  seq: number | null;
  /** For log documents: the number of its first line and its byte offset in the log. */
  line: number | null;
  offset: number | null;
  /** For a log document that starts inside its first line: where that line began. */
  lineOffset: number | null;
  column: number | null;
  text: string;
}

/** Documents a run may have: 2^26 (and run positions up to 2^27 keep ids below 2^53). */
export const DOCUMENTS_PER_RUN = 2 ** 26;
export const MAX_RUN_POSITION = 2 ** 27 - 1;

/** A document is cut at the first newline past this many characters. */
const DOCUMENT_CHARS = 32 * 1024;
/** A line longer than this is indexed in pieces (a match across a cut may be missed). */
const MAX_PENDING_CHARS = 256 * 1024;

export function documentId(runPosition: number, documentNumber: number): number {
  return runPosition * DOCUMENTS_PER_RUN + documentNumber;
}

/**
 * The documents `entries` (the next of the run's stream, in seq order) add, and the state after
 * them. `entries` must follow `state.indexedSeq` without a gap.
 */
export function documentsOf(
  runPosition: number,
  state: IndexState,
  entries: readonly Entry[],
): { documents: NewDocument[]; state: IndexState } {
  const documents: NewDocument[] = [];
  let { nextLine, pendingOffset, lineOffset, column, pendingText, documents: made } = state;
  const add = (document: Omit<NewDocument, 'id'>) => {
    // A run past its documents is no longer indexed rather than given ids of another run, and
    // one whose ids would pass 2^53 (past 134 million runs) is not indexed at all.
    if (made >= DOCUMENTS_PER_RUN || runPosition > MAX_RUN_POSITION) return;
    documents.push({ id: documentId(runPosition, made), ...document });
    made += 1;
  };
  /** Where the next log document ends (exclusive), or 0 while its last line is unfinished. */
  const nextCut = (flushAll: boolean): number => {
    const limit = Math.min(pendingText.length, MAX_PENDING_CHARS);
    let cut = pendingText.length > DOCUMENT_CHARS ? pendingText.indexOf('\n', DOCUMENT_CHARS) : -1;
    if (cut === -1 || cut >= limit) cut = pendingText.lastIndexOf('\n', limit - 1);
    if (cut !== -1) return cut + 1;
    if (!flushAll && pendingText.length <= MAX_PENDING_CHARS) return 0;
    // Never between the halves of a surrogate pair.
    const end = limit;
    return end < pendingText.length && isHighSurrogate(pendingText.charCodeAt(end - 1))
      ? end - 1
      : end;
  };
  const emitLines = (flushAll: boolean) => {
    for (let end = nextCut(flushAll); end > 0; end = nextCut(flushAll)) {
      const text = pendingText.slice(0, end);
      const inside = column > 0;
      add({
        kind: 'log',
        seq: null,
        line: nextLine,
        offset: pendingOffset,
        lineOffset: inside ? lineOffset : null,
        column: inside ? column : null,
        text,
      });
      const lastNewline = text.lastIndexOf('\n');
      if (lastNewline === -1) {
        column += text.length;
      } else {
        nextLine += newlines(text);
        lineOffset = pendingOffset + Buffer.byteLength(text.slice(0, lastNewline + 1), 'utf8');
        column = text.length - lastNewline - 1;
      }
      pendingOffset += Buffer.byteLength(text, 'utf8');
      pendingText = pendingText.slice(end);
    }
  };
  for (const entry of entries) {
    if (entry.kind === 'log') {
      // The entry knows where its text is in the log: after a deleted run of the same id, its
      // new run's log does not start at 0.
      if (pendingText === '' && entry.offset !== undefined) {
        if (column === 0) lineOffset = entry.offset;
        pendingOffset = entry.offset;
      }
      pendingText += entry.text ?? '';
      if (pendingText.length > DOCUMENT_CHARS) emitLines(false);
    } else if (entry.kind === 'status') {
      // The end of a run ends its last line, newline or not.
      const status = (entry.data as { status?: unknown } | undefined)?.status;
      if (isRunStatus(status) && isTerminal(status)) emitLines(true);
    } else {
      // The lines before an event come before it in the index's order too.
      emitLines(false);
      add({
        kind: 'event',
        seq: entry.seq,
        line: null,
        offset: null,
        lineOffset: null,
        column: null,
        text: entry[RAW_DATA] ?? JSON.stringify(entry.data ?? null),
      });
    }
  }
  emitLines(false);
  return {
    documents,
    state: {
      indexedSeq: entries.at(-1)?.seq ?? state.indexedSeq,
      nextLine,
      pendingOffset,
      lineOffset,
      column,
      pendingText,
      documents: made,
    },
  };
}

function newlines(text: string): number {
  let count = 0;
  for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) count += 1;
  return count;
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}
