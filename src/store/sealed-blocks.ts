import type { BlockInfo } from './segment-format.js';
import type { SegmentRecord } from './seal-catalog.js';

/** A stream's segments and their blocks, in seq order (what the sealed store reads by). */
export interface Sealed {
  records: SegmentRecord[];
  /** Per block: its segment's name and index in it, and its footer entry. */
  blocks: Array<{ name: string; index: number; info: BlockInfo }>;
  firstSeq: number;
  lastSeq: number;
  logOffset: number;
  logEnd: number;
  logLinesEnd: number;
}

/**
 * The index of the last block whose `first(info)` (non-decreasing over blocks) is at most
 * `value` (0 if none); with `withLog`, the last such block that holds log text.
 */
export function lastBlockAtMost(
  sealed: Sealed,
  value: number,
  first: (info: BlockInfo) => number,
  withLog = false,
): number {
  let lo = 0;
  let hi = sealed.blocks.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (first(sealed.blocks[mid]!.info) <= value) lo = mid;
    else hi = mid - 1;
  }
  while (withLog && lo > 0 && sealed.blocks[lo]!.info.logEntries === 0) lo -= 1;
  return lo;
}
