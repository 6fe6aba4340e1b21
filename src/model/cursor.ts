import { TailwaterError } from './errors.js';

const DIGITS = /^\d{1,15}$/;
/** A seq, then optionally `-` and a store epoch: eight lowercase hex digits (docs/STORAGE.md). */
const STREAM_CURSOR = /^(\d{1,15})(?:-([0-9a-f]{8}))?$/;

/**
 * A place in a stream: the seq, and the store epoch it was handed out under when the cursor
 * says (a bare seq, as older servers and hand-written `?after=` send, says none).
 */
export interface StreamCursor {
  seq: number;
  epoch?: string | undefined;
}

/** Whether a value is a seq cursor as this server writes them. */
export function isCursor(value: string): boolean {
  return DIGITS.test(value.trim());
}

/** Whether a value is a stream cursor: a seq, or `<seq>-<epoch>` as native frames carry it. */
export function isStreamCursor(value: string): boolean {
  return STREAM_CURSOR.test(value.trim());
}

/** Parses a seq cursor: a non-negative integer, never clamped or guessed. */
export function parseCursor(value: string, what = 'cursor'): number {
  const trimmed = value.trim();
  if (!DIGITS.test(trimmed)) {
    throw new TailwaterError(
      'TW_BAD_CURSOR',
      `The ${what} must be a non-negative integer (was "${value}").`,
    );
  }
  return Number(trimmed);
}

/** Parses `<seq>` or `<seq>-<epoch>` (the native `id:`); anything else is TW_BAD_CURSOR. */
export function parseStreamCursor(value: string, what = 'cursor'): StreamCursor {
  const match = STREAM_CURSOR.exec(value.trim());
  if (!match) {
    throw new TailwaterError(
      'TW_BAD_CURSOR',
      `The ${what} must be a seq, or a seq and a store epoch as <seq>-<epoch> (was "${value}").`,
    );
  }
  return match[2] === undefined
    ? { seq: Number(match[1]) }
    : { seq: Number(match[1]), epoch: match[2] };
}

/**
 * The native `id:` of seq under a store epoch. The epoch rides along so that a cursor handed
 * out before the database was replaced or restored is answered with `gap reset`, not trusted
 * (docs/API.md, "Streaming").
 */
export function formatStreamCursor(seq: number, epoch: string): string {
  return `${seq}-${epoch}`;
}
