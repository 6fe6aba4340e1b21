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
// Bidirectional embeddings, overrides and isolates: they make a name read as another one
// (CVE-2021-42574, "Trojan Source").
const BIDI_RE = /[\u202a-\u202e\u2066-\u2069]/;
const MAX_NAME_BYTES = 256;

/**
 * The prefix of the ids the server makes up for entries a producer gave no id (the Iceberg
 * dialect sends one as the SSE id): a producer id may not start with it, so the two can never
 * name different entries.
 */
export const SERVER_ID_PREFIX = 'seq:';

/**
 * Free text that names or labels something: 1–256 bytes of well-formed UTF-8 without control
 * or bidirectional-override characters. `normalize` gives its NFC form, so that a name typed
 * on one keyboard (é as one code point) and another (e + U+0301) is the same name.
 */
function checkFreeText(what: string, value: string, normalize: boolean): string {
  if (!value.isWellFormed()) {
    throw new TailwaterError(
      'TW_BAD_UTF8',
      `${what} is not valid Unicode text (a lone surrogate); it was not stored.`,
    );
  }
  const text = normalize ? value.normalize('NFC') : value;
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes < 1 || bytes > MAX_NAME_BYTES) {
    throw new TailwaterError('TW_BAD_NAME', `${what} must be 1–256 bytes of UTF-8 (was ${bytes}).`);
  }
  if (CONTROL_RE.test(text)) {
    throw new TailwaterError(
      'TW_BAD_NAME',
      `${what} must not contain control characters (line breaks included).`,
    );
  }
  if (BIDI_RE.test(text)) {
    throw new TailwaterError(
      'TW_BAD_NAME',
      `${what} must not contain bidirectional override characters (U+202A–U+202E, U+2066–U+2069).`,
    );
  }
  return text;
}

/** A pipeline's fully qualified name, in NFC. */
export function validateFqn(value: string): string {
  return checkFreeText('Pipeline FQN', value, true);
}

/** A run id: free text such as `scheduled__2026-08-10T00:00:00+00:00`, in NFC. */
export function validateRunId(value: string): string {
  return checkFreeText('Run id', value, true);
}

/** A step name or correlation id (`what` names the field in errors), in NFC. */
export function validateLabel(what: string, value: string): string {
  return checkFreeText(what, value, true);
}

/**
 * A producer's id for an entry. Compared byte for byte (it is the producer's token, so it is
 * not normalized); the server's own prefix is refused.
 */
export function validateProducerId(what: string, value: string): string {
  const id = checkFreeText(what, value, false);
  if (id.startsWith(SERVER_ID_PREFIX)) {
    throw new TailwaterError(
      'TW_BAD_NAME',
      `${what} must not start with "${SERVER_ID_PREFIX}": such ids are the server's own.`,
    );
  }
  return id;
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

/** The kind of an event: a producer's kind other than `log`, which only log text may have. */
export function validateEventKind(value: string): string {
  if (value === LOG_KIND) {
    throw new TailwaterError(
      'TW_RESERVED_KIND',
      'Kind "log" is log text: send it to the run\'s logs endpoint, which keeps its byte offsets.',
    );
  }
  return validateProducerKind(value);
}
