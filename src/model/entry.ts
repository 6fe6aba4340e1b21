/**
 * The exact JSON text of an entry's `data` as stored, on entries read from the store. JSON.parse
 * loses integers beyond 2^53 (an Iceberg snapshotId, say); an encoder that must send a
 * producer's JSON as received uses this text instead. Symbol-keyed: never serialized itself.
 */
export const RAW_DATA: unique symbol = Symbol('tailwater.rawData');

/**
 * A log entry's `text` as a JSON string literal in UTF-8 (model/json-text.ts's quoteText of it),
 * on entries read from sealed history, where a worker thread made it: an encoder copies these
 * bytes into a frame instead of escaping the text again. Symbol-keyed: never serialized itself.
 */
export const QUOTED_TEXT: unique symbol = Symbol('tailwater.quotedText');

/**
 * One entry of a stream. `seq` is gapless per stream from 1 and is the cursor.
 * A `log` entry carries `text` and its byte `offset` in the run's log; any other kind carries
 * `data`. Optional fields are absent rather than null, so the JSON stays small.
 */
export interface Entry {
  seq: number;
  time: string;
  kind: string;
  offset?: number;
  text?: string;
  data?: unknown;
  step?: string;
  correlationId?: string;
  /** The producer's id, which makes appends idempotent. */
  id?: string;
  /** Fields a seed system's producer sent that Tailwater has no column for (ZenML's index…). */
  extra?: Record<string, unknown>;
  [RAW_DATA]?: string;
  [QUOTED_TEXT]?: Uint8Array;
}

/** An event as a producer sends it, before the store numbers it. */
export interface NewEvent {
  kind: string;
  data: unknown;
  step?: string;
  correlationId?: string;
  id?: string;
  extra?: Record<string, unknown> | undefined;
  /** `data` as JSON text, when the producer's exact text must be kept (already validated). */
  dataJson?: string | undefined;
}

/** Log text as a producer sends it. */
export interface NewLog {
  text: string;
  step?: string;
  id?: string;
}
