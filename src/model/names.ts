import { TailwaterError } from './errors.js';

/** Kinds a producer may not use: the server writes them, or they are SSE control frames. */
export const RESERVED_KINDS: ReadonlySet<string> = new Set([
  'end',
  'gap',
  'error',
  'cursor',
  'status',
  'system',
  'connected',
]);

/** The kind of log text entries. */
export const LOG_KIND = 'log';

const TOPIC_RE = /^[A-Za-z0-9_.-]{1,128}$/;
const KIND_RE = /^[A-Za-z0-9_.:-]{1,64}$/;
// C0 controls, DEL and C1 controls: they would corrupt logs, headers and SSE frames.
// eslint-disable-next-line no-control-regex
const CONTROL_RE = /[\u0000-\u001f\u007f-\u009f]/;
const MAX_NAME_BYTES = 256;

function checkFreeName(what: string, value: string): string {
  const bytes = Buffer.byteLength(value, 'utf8');
  if (bytes < 1 || bytes > MAX_NAME_BYTES) {
    throw new TailwaterError('TW_BAD_NAME', `${what} must be 1–256 bytes of UTF-8 (was ${bytes}).`);
  }
  if (CONTROL_RE.test(value)) {
    throw new TailwaterError('TW_BAD_NAME', `${what} must not contain control characters.`);
  }
  if (!value.isWellFormed()) {
    throw new TailwaterError('TW_BAD_NAME', `${what} must be valid UTF-8.`);
  }
  return value;
}

/** A pipeline's fully qualified name: 1–256 bytes of UTF-8 without control characters. */
export function validateFqn(value: string): string {
  return checkFreeName('Pipeline FQN', value);
}

/** A run id: free text such as `scheduled__2026-08-10T00:00:00+00:00`, same rules as a FQN. */
export function validateRunId(value: string): string {
  return checkFreeName('Run id', value);
}

export function validateTopic(value: string): string {
  if (!TOPIC_RE.test(value)) {
    throw new TailwaterError('TW_BAD_NAME', `Topic must match [A-Za-z0-9_.-]{1,128}.`);
  }
  return value;
}

/** A producer's kind: well formed and not reserved. */
export function validateProducerKind(value: string): string {
  if (!KIND_RE.test(value)) {
    throw new TailwaterError('TW_BAD_NAME', `Kind must match [A-Za-z0-9_.:-]{1,64}.`);
  }
  if (RESERVED_KINDS.has(value)) {
    throw new TailwaterError('TW_RESERVED_KIND', `Kind "${value}" is reserved for the server.`);
  }
  return value;
}
