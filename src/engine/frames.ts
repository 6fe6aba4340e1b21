import type { Entry } from '../model/entry.js';
import type { RunStatus } from '../model/run.js';

/** Why a stream ended (docs/API.md, "Streaming"). */
export type EndReason =
  | 'runFinished'
  | 'runDeleted'
  | 'idleTimeout'
  | 'maxDuration'
  | 'maxBytes'
  | 'shutdown'
  | 'tokenExpired';

export interface EndInfo {
  reason: EndReason;
  status?: RunStatus | undefined;
  lastSeq: number;
}

/** The only two ways a viewer can miss entries; both are said out loud. */
export type GapInfo = { reason: 'retention'; fromSeq: number; toSeq: number } | { reason: 'reset' };

/**
 * What an SSE dialect turns engine output into. The engine calls it; a dialect implements it
 * and owns nothing else: no reader, buffer, timer or limit. Each method returns the bytes to
 * send, or null for nothing. `entry` is called with the same Entry object for every viewer of a
 * stream, so a dialect may memoize its frame per entry (WeakMap) and share one Buffer.
 */
export interface FrameEncoder {
  /**
   * Sent once when the stream opens: a retry hint, a `connected` event… `epoch` is the store
   * epoch (docs/STORAGE.md), for a dialect whose cursors carry it.
   */
  open(epoch: string): Buffer | null;
  /**
   * `replay` is true when the viewer is catching up (from the replay buffer or the store) rather
   * than receiving the live fan-out; dialects that tell the two apart (OpenMetadata) use it.
   */
  entry(entry: Entry, replay: boolean): Buffer | null;
  /**
   * Optional: the frames of several consecutive entries as one buffer. The Tailer hands the
   * same array to every live viewer, so a dialect can build it once and every socket gets one
   * write per batch instead of one per entry.
   */
  entries?(entries: readonly Entry[], replay: boolean): Buffer | null;
  /** Stands for filtered-out entries up to and including `seq`, so a reconnect skips them. */
  cursor(seq: number): Buffer | null;
  gap(gap: GapInfo): Buffer | null;
  end(end: EndInfo): Buffer | null;
  error(code: string, message: string): Buffer | null;
  heartbeat(): Buffer | null;
}
