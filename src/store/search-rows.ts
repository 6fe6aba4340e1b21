import type { RunStatus } from '../model/run.js';
import type { IndexState } from './search-documents.js';
import { EMPTY_INDEX_STATE } from './search-documents.js';
import type { SearchDocument } from './store.js';

/**
 * The search index's rows as both stores' tables hold them (their columns are named alike), and
 * how they become the index state and the documents the engine reads.
 */

/** A run with entries not yet indexed. */
export interface StreamToIndex {
  id: number;
  last_seq: number;
  search_seq: number;
  /** The run's creation order: the high part of its documents' ids. */
  position: number;
}

export interface StateRow {
  next_line: number;
  pending_offset: number;
  line_offset: number;
  line_column: number;
  pending_text: string;
  documents: number;
}

export interface DocumentRow {
  id: number;
  kind: 'log' | 'event';
  seq: number | null;
  line: number | null;
  offset: number | null;
  line_offset: number | null;
  line_column: number | null;
  text: string;
  pipeline: string;
  run_id: string;
  status: RunStatus;
  created_at: number;
}

/** The index state of a run: what its row says, or a fresh start. */
export function stateFromRow(stream: StreamToIndex, row: StateRow | undefined): IndexState {
  if (!row) return { ...EMPTY_INDEX_STATE, indexedSeq: stream.search_seq };
  return {
    indexedSeq: stream.search_seq,
    nextLine: row.next_line,
    pendingOffset: row.pending_offset,
    lineOffset: row.line_offset,
    column: row.line_column,
    pendingText: row.pending_text,
    documents: row.documents,
  };
}

/** The state's columns in the order both stores' upserts take them, after the stream id. */
export function stateValues(state: IndexState): [number, number, number, number, string, number] {
  return [
    state.nextLine,
    state.pendingOffset,
    state.lineOffset,
    state.column,
    state.pendingText,
    state.documents,
  ];
}

export function documentFromRow(row: DocumentRow): SearchDocument {
  return {
    id: row.id,
    pipeline: row.pipeline,
    runId: row.run_id,
    runStatus: row.status,
    runCreatedAt: row.created_at,
    kind: row.kind,
    seq: row.seq,
    line: row.line,
    offset: row.offset,
    lineOffset: row.line_offset,
    column: row.line_column,
    text: row.text,
  };
}
