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
