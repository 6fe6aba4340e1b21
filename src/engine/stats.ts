import type { EndReason } from './frames.js';

/**
 * Monotonic counts the engine keeps for /metrics and tests. Plain numbers: the engine does not
 * depend on a metrics library; the HTTP layer reads these when scraped.
 */
export class EngineStats {
  /** Store reads by the shared reader of each stream. */
  sharedReads = 0;
  /** Store reads by viewers catching up (joining late, or fallen behind). */
  catchUpReads = 0;
  /** Live viewers sent back to paging because their unsent bytes passed the cap. */
  slowViewerDemotions = 0;
  /** Streams ended, by reason; `error` for streams ended by a failure. */
  readonly ends = new Map<EndReason | 'error', number>();
  /** Told of each batch the shared reader of a stream fans out to its live viewers. */
  onLiveDelivery: ((timing: LiveDeliveryTiming) => void) | undefined;

  countEnd(reason: EndReason | 'error'): void {
    this.ends.set(reason, (this.ends.get(reason) ?? 0) + 1);
  }
}

/** What the viewers hold right now. */
export interface ViewerSnapshot {
  connections: number;
  activeStreams: number;
  pagingViewers: number;
  pendingBytes: number;
  maxPendingBytes: number;
}

/**
 * Where a batch of new entries spent its time between the store and the live viewers' sockets,
 * in milliseconds (docs/BENCHMARKS.md, "Latency"). Measured for the oldest entry of the batch,
 * the one that waited longest.
 */
export interface LiveDeliveryTiming {
  /**
   * From the entry's stored time (taken as the append numbered it, before its commit) to the
   * shared read that found it: the commit, the bus, and the one turn the reader waits so that
   * appends landing together are read and written together.
   */
  queuedMs: number;
  /** The store read that brought the batch. */
  readMs: number;
  /** Encoding the batch and writing it to every live viewer's socket. */
  writeMs: number;
}
