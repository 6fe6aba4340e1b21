import type { RunStatus } from '../model/run.js';
import type { StreamKey } from '../model/stream-key.js';
import type { EntryRow } from './entry-row.js';
import type { SealedDocument } from './segment-format.js';
import type { SearchDocumentsRequest } from './store.js';

/**
 * What a store keeps of sealed history (docs/STORAGE.md, "Sealed segments"): which entries of
 * which stream are in which segment. The segments themselves are in a SegmentStore; the record
 * of one is the commit point of sealing it. Before the record, the hot rows are the truth;
 * after it, the segment is, and the hot rows are dropped a while later (a slice at a time).
 * Both stores implement it (seal-catalog.contract.ts).
 */
export interface SegmentRecord {
  streamId: number;
  /** The run's position (its documents' ids are position × 2^26 + n). */
  position: number;
  name: string;
  firstSeq: number;
  lastSeq: number;
  /** The log bytes it holds: [logOffset, logEnd), and the line feeds before its end. */
  logOffset: number;
  logEnd: number;
  logLinesEnd: number;
  /** The highest id of the search documents it holds (undefined: none). */
  lastDocumentId: number | undefined;
  /** Its file's size, and the entry bodies it holds as the hot store held them. */
  bytes: number;
  rawBytes: number;
  /** When it was recorded (epoch ms); hot rows are dropped a grace period after. */
  sealedAt: number;
  /** Whether its hot rows are gone. */
  hotDropped: boolean;
}

/** A finished run with entries to seal, all indexed for search. */
export interface RunToSeal {
  streamId: number;
  key: StreamKey & { type: 'run' };
  position: number;
  /** Entries after this seq are to seal (those before are sealed, or were removed). */
  afterSeq: number;
  lastSeq: number;
}

/** A hot row as sealing reads it: with the line feeds of the log before it. */
export interface SealRow extends EntryRow {
  log_line: number | null;
}

/** A sealed run, for searching its segments. */
export interface SealedRun {
  streamId: number;
  position: number;
  pipeline: string;
  runId: string;
  status: RunStatus;
  createdAt: number;
}

export interface SealCatalog {
  /** Finished runs ended before `endedBefore`, fully indexed, with entries not yet sealed. */
  runsToSeal(limit: number, endedBefore: number): Promise<RunToSeal[]>;
  /** Hot rows after `afterSeq`, in seq order, at most `limit`. */
  rowsToSeal(streamId: number, afterSeq: number, limit: number): Promise<SealRow[]>;
  /** A run's search documents (without their text) with id in [fromId, toId). */
  documentsToSeal(fromId: number, toId: number): Promise<SealedDocument[]>;
  /**
   * Records a segment: the commit point of sealing it. Refused (false) when the stream moved on
   * meanwhile: its run deleted, or another sealer recorded the same entries.
   */
  recordSegment(record: Omit<SegmentRecord, 'hotDropped'>): Promise<boolean>;
  /** A stream's segments in seq order (empty when none). */
  segmentsOf(key: StreamKey): Promise<SegmentRecord[]>;
  /** Segments recorded before `sealedBefore` whose hot rows are still there. */
  segmentsToDrop(sealedBefore: number, limit: number): Promise<SegmentRecord[]>;
  /**
   * Removes a recorded segment's hot rows and the run's search documents up to its last one,
   * a slice at a time, then marks it dropped.
   */
  dropHotRows(record: SegmentRecord): Promise<void>;
  /**
   * Sealed runs a search may look in, newest first, below run position `beforePosition`,
   * matching the request's pipeline, status and time.
   */
  sealedRunsForSearch(
    request: SearchDocumentsRequest,
    beforePosition: number,
    limit: number,
  ): Promise<SealedRun[]>;
  /** Whether a segment of this name is recorded (a sweep removes files no record names). */
  knowsSegment(name: string): Promise<boolean>;
}

export function isSealCatalog(store: object): store is SealCatalog {
  return typeof (store as Partial<SealCatalog>).recordSegment === 'function';
}
