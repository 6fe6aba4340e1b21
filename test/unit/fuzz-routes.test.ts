import { isUtf8 } from 'node:buffer';
import { existsSync, readFileSync } from 'node:fs';
import type { IncomingHttpHeaders } from 'node:http';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import Database from 'better-sqlite3';
import { createParser } from 'eventsource-parser';
import fc from 'fast-check';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, describe, expect, test } from 'vitest';
import { entryJson } from '../../src/http/exact-json.js';
import type { Entry } from '../../src/model/entry.js';
import { RAW_DATA } from '../../src/model/entry.js';
import { ERROR_STATUS } from '../../src/model/errors.js';
import { RESERVED_KINDS } from '../../src/model/names.js';
import { isTerminal, RUN_STATUSES } from '../../src/model/run.js';
import type { RunStatus } from '../../src/model/run.js';
import type { PartialSettings } from '../../src/model/settings.js';
import type { StreamKey } from '../../src/model/stream-key.js';
import { runKey, streamId, topicKey } from '../../src/model/stream-key.js';
import { RUNS_FEED_TOPIC } from '../../src/store/store.js';
import { createTestApp } from '../helpers/app.js';
import type { TestApp } from '../helpers/app.js';
import { openSse } from '../helpers/sse.js';
import type { SseEvent, SseReader } from '../helpers/sse.js';

// Property-based fuzzing of every route family: the native API, its reads and streams, and the
// OpenMetadata, ZenML, Freight and Iceberg dialects, with random and hostile input (broken
// UTF-8, lone surrogates, 1e400, duplicate keys, deep nesting, `__proto__`, wrong types and
// content types, mis-encoded paths, foreign Origin and Host). Whatever comes in:
// - the answer is a 2xx, or a 4xx whose body is the error body of the route's dialect with the
//   status of its code (Tailwater's `{"error": {"code": "TW_…", "message"}}`, ZenML's with
//   `detail`, OpenMetadata's with `code` and `message`, Freight's `{"error", "error_name",
//   "code"}`: docs/API.md) — never a 5xx, an exception out of inject, or a hang;
// - every stream stays gapless (seq 1..lastSeq), lastSeq never goes back, the seeded entries stay
//   byte for byte what they were, and a refused request or a read stores nothing at all;
// - the event loop is never held for long (by this process's work: how long a busy machine
//   keeps it from running is printed, not judged).
//
// `npm test` runs a fixed seed and a bounded number of runs; `npm run fuzz` runs long, with a new
// seed each time unless TAILWATER_FUZZ_SEED is set. Every run prints its seed; replay a failure
// with TAILWATER_FUZZ_SEED=<seed> (and TAILWATER_FUZZ_PATH=<path> from fast-check's report, with
// `-t '<test name>'`).

const RUNS = positiveInt('TAILWATER_FUZZ_RUNS', 150);
const SEED = seedFromEnv(process.env['TAILWATER_FUZZ_SEED']);
const REPLAY_PATH = process.env['TAILWATER_FUZZ_PATH'] || undefined;
/** Streams need a real socket each: fewer of them. */
const STREAM_RUNS = Math.max(20, Math.round(RUNS / 2));
const ANSWER_TIMEOUT_MS = 10_000;
/**
 * A coarse regression guard on the event loop, in CPU spent between two of its turns; the real
 * budget is 50 ms (the delay, printed beside it).
 */
const LOOP_HOLD_BOUND_MS = 500;
const LOOP_DELAY_BUDGET_MS = 50;
const TEST_TIMEOUT_MS = Math.max(60_000, RUNS * 300);
/** Every so many requests, every stream is read back whole and compared with what was seen. */
const AUDIT_EVERY = 50;

function positiveInt(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a positive integer`);
  return value;
}

function seedFromEnv(raw: string | undefined): number {
  if (raw === undefined || raw === '') return 20261201;
  if (raw === 'random') return (Date.now() ^ Math.floor(Math.random() * 0x7fffffff)) | 0;
  const value = Number(raw);
  if (!Number.isInteger(value))
    throw new Error('TAILWATER_FUZZ_SEED must be an integer or "random"');
  return value;
}

console.log(
  `[fuzz] seed ${SEED}, ${RUNS} runs per property (${STREAM_RUNS} for streams); replay with ` +
    `TAILWATER_FUZZ_SEED=${SEED} TAILWATER_FUZZ_RUNS=${RUNS}`,
);

/** Small limits keep bodies small and runs fast; retention is off so every topic stays whole. */
const SETTINGS: PartialSettings = {
  maxEventBytes: 1024,
  maxBatchEntries: 20,
  maxAppendBytes: 4096,
  topicMaxEntries: 0,
  maxStreamSeconds: 30,
};

function fuzzOptions<T>(numRuns = RUNS): fc.Parameters<T> {
  return { seed: SEED, numRuns, ...(REPLAY_PATH ? { path: REPLAY_PATH, endOnFailure: true } : {}) };
}

// ---- requests ----------------------------------------------------------------------------

type Dialect = 'native' | 'zenml' | 'freight' | 'openmetadata' | 'iceberg';
type Method = 'GET' | 'HEAD' | 'POST' | 'PUT' | 'DELETE' | 'PATCH' | 'OPTIONS';

/** What a 2xx answer to a write must agree with, when the body was sent uncorrupted. */
type Sent =
  | { type: 'events'; items: ItemSpec[]; exact: boolean }
  | { type: 'zenml'; items: ItemSpec[]; exact: boolean }
  | { type: 'putRun'; status?: unknown; metaText?: string | undefined; exact: boolean };

interface Req {
  method: Method;
  url: string;
  headers: Record<string, string>;
  payload?: Buffer | undefined;
  dialect: Dialect;
  sent?: Sent | undefined;
  /** The stream a read names, when the test knows it for sure. */
  key?: StreamKey | undefined;
}

function describeReq(req: Req): string {
  let body = '';
  if (req.payload !== undefined) {
    const shown = isUtf8(req.payload)
      ? JSON.stringify(req.payload.toString('utf8').slice(0, 300))
      : `hex ${req.payload.subarray(0, 150).toString('hex')}`;
    body = ` body(${req.payload.length} B)=${shown}`;
  }
  const url = req.url.length > 400 ? `${req.url.slice(0, 400)}…(${req.url.length} chars)` : req.url;
  return `${req.method} ${JSON.stringify(url)} ${JSON.stringify(req.headers)}${body}`;
}

/** A request as fast-check prints it in a counterexample. */
function request(req: Req): Req {
  return Object.assign(req, { [fc.toStringMethod]: () => describeReq(req) });
}

async function withTimeout<T>(what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`no answer within ${ANSWER_TIMEOUT_MS} ms: ${what}`)),
      ANSWER_TIMEOUT_MS,
    );
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

// ---- text --------------------------------------------------------------------------------

const HOSTILE_TEXT = [
  '',
  ' ',
  'latest',
  '__proto__',
  'constructor',
  'toString',
  'seq:1',
  'seq:',
  '\u202e',
  'abc\u202edef',
  'a\u2066b',
  'e\u0301',
  'Ame\u0301lie',
  'Amélie',
  '\ufeff',
  '\ufeffBOM',
  '\u0000',
  'a\u0000b',
  '\u0001',
  '\n',
  '\r\n',
  'line 1\nline 2\n',
  '\t',
  '\u007f',
  '\u0085',
  '\u009f',
  '\u2028',
  '\u200b',
  '\ud800',
  '\udfff',
  'a\ud800b',
  '\udc00\ud800',
  '😀',
  '👩‍👩‍👧',
  '..',
  '.',
  '/',
  'a/b',
  '%',
  '%2F',
  '?',
  '#',
  '&',
  '=',
  ',',
  '"',
  "'",
  '\\',
  '<script>alert(1)</script>',
  "' OR 1=1 --",
  '1e400',
  '12345678901234567890',
  '-1',
  'null',
  'x'.repeat(256),
  'x'.repeat(257),
  'é'.repeat(128),
  'é'.repeat(129),
  'e\u0301'.repeat(100),
  '😀'.repeat(64),
  '😀'.repeat(65),
];

const surrogate = fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => String.fromCharCode(c));

const text: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...HOSTILE_TEXT) },
  { weight: 3, arbitrary: fc.string({ unit: 'binary', maxLength: 24 }) },
  { weight: 3, arbitrary: fc.string({ unit: 'grapheme', maxLength: 24 }) },
  {
    weight: 1,
    arbitrary: fc
      .string({ unit: 'grapheme-composite', maxLength: 8 })
      .map((s) => s.normalize('NFD')),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.string({ maxLength: 6 }), surrogate, fc.string({ maxLength: 6 }))
      .map(([a, s, b]) => a + s + b),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(
        fc.constantFrom('x', 'é', '😀', 'line\n', '\u202e', 'e\u0301'),
        fc.integer({ min: 100, max: 3000 }),
      )
      .map(([c, n]) => c.repeat(n)),
  },
);

/** Mostly well-formed names, often the ones already stored, sometimes anything. */
const plainName = fc.stringMatching(/^[a-z][a-z0-9._-]{0,11}$/);
const anyName = fc.oneof({ weight: 2, arbitrary: plainName }, { weight: 3, arbitrary: text });

const validKind = fc
  .oneof(
    fc.constantFrom('progress', 'metric', 'iceberg-mutation', 'a:b', 'x.y-z_1', 'K'),
    fc.stringMatching(/^[A-Za-z0-9_.:-]{1,64}$/),
  )
  .filter((kind) => kind !== 'log' && !RESERVED_KINDS.has(kind));

const anyKind = fc.oneof(
  { weight: 5, arbitrary: validKind },
  {
    weight: 2,
    arbitrary: fc.constantFrom(...RESERVED_KINDS, 'log', 'k'.repeat(65), 'bad kind', '', 'é'),
  },
  { weight: 1, arbitrary: text },
);

const producerId = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom('p-1', 'p-2', 'log-1', 'dup', 'snap-1', 'seq:1') },
  { weight: 1, arbitrary: anyName },
);

// ---- JSON as text (JSON.stringify cannot write 1e400, duplicate keys or broken escapes) -------

const jsonNumber: fc.Arbitrary<string> = fc.oneof(
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((d) => JSON.stringify(d)),
  fc.integer().map(String),
  fc.constantFrom(
    '1e400',
    '-1e400',
    '1E+400',
    '1e-400',
    '12345678901234567890',
    '-9007199254740993',
    '9007199254740993',
    '0.1000000000000000055511151231257827',
    '123456789012345678901234567890.5e3',
    '1.50',
    '-0',
    '0e0',
  ),
  fc.bigInt({ min: -(10n ** 30n), max: 10n ** 30n }).map(String),
);

const jsonString: fc.Arbitrary<string> = fc.oneof(
  { weight: 8, arbitrary: text.map((s) => JSON.stringify(s)) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      '"\\ud800"',
      '"\\udfff\\ud800"',
      '"\\ud83d\\ude00"',
      '"\\u0000"',
      '"\\u202e"',
      '"\\/"',
      '"e\\u0301"',
    ),
  },
);

const jsonKey: fc.Arbitrary<string> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      '"a"',
      '"b"',
      '"__proto__"',
      '"constructor"',
      '"pct"',
      '"snapshotId"',
      '"\\u005f_proto__"',
      '""',
    ),
  },
  { weight: 1, arbitrary: jsonString },
);

/** Whitespace inside a JSON value, which raw data keeps as sent. */
const space = fc.oneof(
  { weight: 8, arbitrary: fc.constant('') },
  { weight: 1, arbitrary: fc.constantFrom(' ', '\n', '\r\n', '\t', ' \n\t ') },
);

const { value: jsonValue } = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', maxDepth: 4 },
    jsonNumber,
    jsonString,
    fc.constantFrom('true', 'false', 'null'),
    fc
      .tuple(fc.array(tie('value') as fc.Arbitrary<string>, { maxLength: 4 }), space)
      .map(([items, ws]) => `[${ws}${items.join(`${ws},${ws}`)}${ws}]`),
    fc
      .tuple(
        fc.array(fc.tuple(jsonKey, tie('value') as fc.Arbitrary<string>), { maxLength: 4 }),
        space,
      )
      .map(
        ([entries, ws]) =>
          `{${ws}${entries.map(([k, v]) => `${k}${ws}:${ws}${v}`).join(`${ws},${ws}`)}${ws}}`,
      ),
  ),
}));

/** Nesting up to 200 levels (the server takes 64). */
const deepJson = fc
  .tuple(fc.integer({ min: 1, max: 200 }), fc.constantFrom('[', '{"a":'))
  .map(([n, open]) => open.repeat(n) + '1' + (open === '[' ? ']' : '}').repeat(n));

/** Valid JSON text, hostile in content. */
const json: fc.Arbitrary<string> = fc.oneof(
  { weight: 10, arbitrary: jsonValue },
  { weight: 1, arbitrary: deepJson },
  { weight: 1, arbitrary: fc.constant(`"${'z'.repeat(2000)}"`) },
);

/** The right type most of the time, any JSON value sometimes. */
function field(valid: fc.Arbitrary<string>): fc.Arbitrary<string> {
  return fc.oneof({ weight: 12, arbitrary: valid }, { weight: 1, arbitrary: json });
}

function optional<T>(arb: fc.Arbitrary<T>, freq = 3): fc.Arbitrary<T | undefined> {
  return fc.option(arb, { nil: undefined, freq });
}

function object(entries: ReadonlyArray<readonly [string, string | undefined]>): string {
  return `{${entries
    .filter((entry): entry is readonly [string, string] => entry[1] !== undefined)
    .map(([k, v]) => `${k}:${v}`)
    .join(',')}}`;
}

/** One item of a batch, and the raw text of its data, so that a 200 can be checked against it. */
interface ItemSpec {
  text: string;
  dataText?: string | undefined;
}

/** Keys beside an event's own fields, none of which is one of them. */
const extraKey = fc.constantFrom('"__proto__"', '"constructor"', '"extra"', '"tags"', '""');

const nativeItem: fc.Arbitrary<ItemSpec> = fc
  .record({
    kind: optional(field(anyKind.map((k) => JSON.stringify(k))), 10),
    dataKey: fc.constantFrom('"data"', '"data"', '"data"', '"\\u0064ata"'),
    data: optional(json, 5),
    step: optional(field(anyName.map((s) => JSON.stringify(s)))),
    correlationId: optional(field(anyName.map((s) => JSON.stringify(s)))),
    id: optional(field(producerId.map((s) => JSON.stringify(s)))),
    extras: fc.array(fc.tuple(extraKey, json), { maxLength: 2 }),
  })
  .map((item) => ({
    text: object([
      ['"kind"', item.kind],
      [item.dataKey, item.data],
      ['"step"', item.step],
      ['"correlationId"', item.correlationId],
      ['"id"', item.id],
      ...item.extras,
    ]),
    dataText: item.data,
  }));

function tryParse(jsonText: string): string | undefined {
  try {
    const value: unknown = JSON.parse(jsonText);
    return typeof value === 'string' ? value : undefined;
  } catch {
    return undefined;
  }
}

const junkItem: fc.Arbitrary<ItemSpec> = json.map((jsonText) => ({ text: jsonText }));

/** A body built of items: `{"events": [...]}` mostly, and the shapes around it. */
function batchBody(item: fc.Arbitrary<ItemSpec>): fc.Arbitrary<{
  text: string;
  items: ItemSpec[];
  exact: boolean;
}> {
  // Mostly a few items (a batch is refused whole for one bad item), up to past maxBatchEntries.
  const entry = fc.oneof({ weight: 12, arbitrary: item }, { weight: 1, arbitrary: junkItem });
  const items = fc.oneof(
    { weight: 4, arbitrary: fc.array(entry, { maxLength: 3 }) },
    { weight: 1, arbitrary: fc.array(entry, { maxLength: 24 }) },
  );
  const list = (specs: ItemSpec[]) => `[${specs.map((s) => s.text).join(',')}]`;
  return fc.oneof(
    {
      weight: 12,
      arbitrary: items.map((specs) => ({
        text: `{"events":${list(specs)}}`,
        items: specs,
        exact: true,
      })),
    },
    {
      weight: 1,
      arbitrary: fc.tuple(items, jsonKey, json).map(([specs, key, value]) => ({
        text: `{${key}:${value},"events":${list(specs)}}`,
        items: specs,
        exact: false,
      })),
    },
    {
      weight: 1,
      arbitrary: fc.tuple(items, items).map(([a, b]) => ({
        text: `{"events":${list(a)},"events":${list(b)}}`,
        items: a,
        exact: false,
      })),
    },
    {
      weight: 1,
      arbitrary: items.map((specs) => ({
        text: `{"\\u0065vents":${list(specs)}}`,
        items: specs,
        exact: true,
      })),
    },
    {
      weight: 1,
      arbitrary: json.map((t) => ({ text: `{"events":${t}}`, items: [], exact: false })),
    },
    { weight: 1, arbitrary: json.map((t) => ({ text: t, items: [], exact: false })) },
  );
}

// ---- bytes -------------------------------------------------------------------------------

const BAD_UTF8: readonly number[][] = [
  [0xff],
  [0xc3],
  [0x80],
  [0xc0, 0xaf],
  [0xed, 0xa0, 0x80],
  [0xe2, 0x82],
  [0xf8, 0x88, 0x80, 0x80, 0x80],
  [0xf4, 0x90, 0x80, 0x80],
];

type Corruption =
  | { type: 'none' }
  | { type: 'truncate'; at: number }
  | { type: 'bom' }
  | { type: 'bad'; at: number; bytes: number[] }
  | { type: 'trailing'; text: string }
  | { type: 'padded' }
  | { type: 'bytes'; bytes: Uint8Array };

const corruption: fc.Arbitrary<Corruption> = fc.oneof(
  { weight: 16, arbitrary: fc.constant({ type: 'none' as const }) },
  { weight: 1, arbitrary: fc.nat().map((at) => ({ type: 'truncate' as const, at })) },
  { weight: 1, arbitrary: fc.constant({ type: 'bom' as const }) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.nat(), fc.constantFrom(...BAD_UTF8))
      .map(([at, bytes]) => ({ type: 'bad' as const, at, bytes })),
  },
  {
    weight: 1,
    arbitrary: fc
      .constantFrom('x', '}', ']', ',', '{}', '\u0000', 'null')
      .map((t) => ({ type: 'trailing' as const, text: t })),
  },
  { weight: 1, arbitrary: fc.constant({ type: 'padded' as const }) },
  {
    weight: 1,
    arbitrary: fc.uint8Array({ maxLength: 64 }).map((bytes) => ({ type: 'bytes' as const, bytes })),
  },
);

function corrupt(body: string, how: Corruption): Buffer {
  const bytes = Buffer.from(body, 'utf8');
  switch (how.type) {
    case 'none':
      return bytes;
    case 'truncate':
      return bytes.subarray(0, how.at % (bytes.length + 1));
    case 'bom':
      return Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), bytes]);
    case 'bad': {
      const at = how.at % (bytes.length + 1);
      return Buffer.concat([bytes.subarray(0, at), Buffer.from(how.bytes), bytes.subarray(at)]);
    }
    case 'trailing':
      return Buffer.concat([bytes, Buffer.from(how.text, 'utf8')]);
    case 'padded':
      return Buffer.from(` \n\t${body}\r\n `, 'utf8');
    case 'bytes':
      return Buffer.from(how.bytes);
  }
}

/** Whether a corruption leaves the body what it says (whitespace around JSON is fine). */
function intact(how: Corruption): boolean {
  return how.type === 'none' || how.type === 'padded';
}

// ---- headers -----------------------------------------------------------------------------

const CONTENT_TYPES = [
  'application/json',
  'application/json; charset=utf-8',
  'application/json;charset=UTF-8',
  'application/json; charset="utf-8"',
  'application/json; charset=latin1',
  'APPLICATION/JSON',
  'text/plain',
  'text/plain; charset=utf-8',
  'text/plain; charset=utf-16le',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  'text/html',
  'application/octet-stream',
  'application/vnd.api+json',
  '',
  '*/*',
  'application/jsonx',
];

/** The content type that suits the body, usually; another, or none, sometimes. */
function contentType(natural: string): fc.Arbitrary<string | undefined> {
  return fc.oneof(
    { weight: 10, arbitrary: fc.constant(natural) },
    { weight: 2, arbitrary: fc.constantFrom(...CONTENT_TYPES) },
    { weight: 1, arbitrary: fc.constant(undefined) },
  );
}

const bodyHeaders: fc.Arbitrary<Record<string, string>> = fc.oneof(
  { weight: 12, arbitrary: fc.constant({}) },
  {
    weight: 1,
    arbitrary: fc
      .constantFrom('gzip', 'br', 'deflate', 'identity', 'IDENTITY', 'x-unknown', 'gzip, identity')
      .map((encoding) => ({ 'content-encoding': encoding })),
  },
  {
    weight: 1,
    arbitrary: fc
      .constantFrom(
        '99999999999999999999',
        '18446744073709551616',
        '1e400',
        '-1',
        'abc',
        '0',
        '  12  ',
        '4097',
      )
      .map((length) => ({ 'content-length': length })),
  },
);

function headersOf(
  type: string | undefined,
  extra: Record<string, string>,
): Record<string, string> {
  return { ...(type === undefined ? {} : { 'content-type': type }), ...extra };
}

/** A string as an HTTP header value can carry it: its UTF-8 bytes as Latin-1, no line breaks. */
function headerValue(value: string): string {
  return Buffer.from(value, 'utf8')
    .toString('latin1')
    .replace(/[^\t\x20-\x7e\x80-\xff]/g, '');
}

// ---- names in paths ----------------------------------------------------------------------

/** Percent-encoding of any JS string: a lone surrogate goes as its (invalid) 3-byte form. */
function pctEncode(value: string): string {
  let out = '';
  for (const ch of value) {
    if (/^[A-Za-z0-9\-_.~]$/.test(ch)) {
      out += ch;
      continue;
    }
    const cp = ch.codePointAt(0)!;
    const bytes =
      cp < 0x80
        ? [cp]
        : cp < 0x800
          ? [0xc0 | (cp >> 6), 0x80 | (cp & 63)]
          : cp < 0x10000
            ? [0xe0 | (cp >> 12), 0x80 | ((cp >> 6) & 63), 0x80 | (cp & 63)]
            : [
                0xf0 | (cp >> 18),
                0x80 | ((cp >> 12) & 63),
                0x80 | ((cp >> 6) & 63),
                0x80 | (cp & 63),
              ];
    out += bytes.map((b) => `%${b.toString(16).toUpperCase().padStart(2, '0')}`).join('');
  }
  return out;
}

const MISENCODED = [
  '%ZZ',
  '%C3',
  '%C3%28',
  '%E2%82',
  '%C0%AF',
  '%ED%A0%80',
  '%F8%88%80%80%80',
  '%',
  '%2',
  '%u0041',
  '%%',
  '%00',
  '%0A',
  '%2F',
  '%2e%2e',
  '%E2%80%AE',
  'e%CC%81',
  '%EF%BB%BF',
  '%41'.repeat(300),
  'y'.repeat(300),
];

/** A path segment: a known name, any name percent-encoded, a mis-encoding, raw ASCII. */
function segment(known: readonly string[], raw = true): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 6, arbitrary: fc.constantFrom(...known).map(pctEncode) },
    { weight: 3, arbitrary: anyName.map(pctEncode) },
    { weight: 1, arbitrary: fc.constantFrom(...MISENCODED) },
    {
      weight: 1,
      arbitrary: fc
        .tuple(anyName.map(pctEncode), fc.constantFrom('%ZZ', '%C3', '%', '%ED%A0%80'))
        .map(([a, b]) => a + b),
    },
    {
      weight: raw ? 1 : 0,
      arbitrary: fc.string({ unit: 'binary-ascii', minLength: 1, maxLength: 8 }).map((s) =>
        // eslint-disable-next-line no-control-regex
        s.replace(/[\u0000-\u001f\u007f]/g, ''),
      ),
    },
  );
}

/** The name a percent-encoded segment stands for, in NFC as the server keeps it. */
function decodedName(seg: string): string | undefined {
  // A raw `?`, `#` or `/` ends the segment where the server reads it: no one name to expect.
  if (/[?#/]/.test(seg)) return undefined;
  try {
    return decodeURIComponent(seg).normalize('NFC');
  } catch {
    return undefined;
  }
}

// ---- query strings -----------------------------------------------------------------------

const INTISH = [
  '',
  '0',
  '1',
  '2',
  '3',
  '5',
  '-1',
  '-2',
  '-0',
  '100',
  '1000',
  '1001',
  '10000',
  '10001',
  '1048576',
  '1048577',
  '16777217',
  '9007199254740991',
  '9007199254740992',
  '999999999999999',
  '1000000000000000',
  '12345678901234567890123',
  '1e3',
  '1e400',
  '0x10',
  '1.5',
  ' 3 ',
  '+1',
  'abc',
  'NaN',
  'Infinity',
  '٣',
  '１',
  '%ZZ',
  '%00',
  'seq:1',
];

const intish = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...INTISH) },
  { weight: 2, arbitrary: fc.integer({ min: -10, max: 2000 }).map(String) },
  { weight: 1, arbitrary: fc.string({ maxLength: 6 }) },
);

const kindList = fc
  .array(fc.oneof(anyKind, fc.constantFrom('log', 'status', 'progress')), { maxLength: 40 })
  .map((kinds) => kinds.join(','));

/** A query value as it goes in a URL: encoded, or sometimes raw (mis-encoded on purpose). */
function queryValue(value: string, raw: boolean): string {
  if (!raw) return pctEncode(value);
  // `%ZZ` and the like go as they are; what no request line may carry is encoded.
  return value.replace(/[&#\s]/g, '').replace(/[^\x21-\x7e]/gu, (c) => pctEncode(c));
}

function queryString(
  params: Record<string, fc.Arbitrary<string>>,
): fc.Arbitrary<{ query: string }> {
  const names = Object.keys(params);
  const pair = fc.oneof(
    {
      weight: 10,
      arbitrary: fc
        .constantFrom(...names)
        .chain((name) => fc.tuple(fc.constant(name), params[name]!, fc.boolean())),
    },
    {
      weight: 1,
      arbitrary: fc.tuple(
        fc.constantFrom('__proto__', 'constructor', 'limit[]', 'x', ''),
        intish,
        fc.boolean(),
      ),
    },
  );
  return fc.array(pair, { maxLength: 4 }).map((pairs) => {
    const query = pairs.map(([n, v, raw]) => `${n}=${queryValue(v, raw)}`).join('&');
    return { query: query ? `?${query}` : '' };
  });
}

// ---- the server under test, and what it has stored -----------------------------------------

interface StreamState {
  key: StreamKey;
  lastSeq: number;
  /** Every entry seen, in seq order, as a signature of all its fields. */
  entries: string[];
}

function signature(entry: Entry): string {
  return `${entry.time} ${content(entry)}`;
}

function keyOfId(id: string): StreamKey {
  const [type, a, b] = id.split('\u0000');
  return type === 'run' ? runKey(a!, b!) : topicKey(a!);
}

const CONTROL_OR_BIDI = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/; // eslint-disable-line no-control-regex

function nameProblem(what: string, name: string): string | undefined {
  if (!name.isWellFormed()) return `${what} ${JSON.stringify(name)} is not well-formed`;
  if (name.normalize('NFC') !== name) return `${what} ${JSON.stringify(name)} is not in NFC`;
  const bytes = Buffer.byteLength(name, 'utf8');
  if (bytes < 1 || bytes > 256) return `${what} ${JSON.stringify(name)} is ${bytes} bytes`;
  if (CONTROL_OR_BIDI.test(name))
    return `${what} ${JSON.stringify(name)} has a control or bidi character`;
  return undefined;
}

function keyProblem(key: StreamKey): string | undefined {
  if (key.type === 'topic') {
    return /^[A-Za-z0-9_.-]{1,128}$/.test(key.topic)
      ? undefined
      : `topic ${JSON.stringify(key.topic)} breaks the topic rule`;
  }
  return nameProblem('pipeline', key.pipeline) ?? nameProblem('run id', key.runId);
}

async function readAll(t: TestApp, key: StreamKey, afterSeq = 0): Promise<Entry[]> {
  const out: Entry[] = [];
  let after = afterSeq;
  for (;;) {
    const page = await t.store.readEntries(key, { afterSeq: after, limit: 10_000 });
    out.push(...page);
    if (page.length < 10_000) return out;
    after = page[page.length - 1]!.seq;
  }
}

interface RunRow {
  pipeline: string;
  runId: string;
  status: RunStatus;
  cancelRequested: number;
  endedAt: number | null;
  meta: string;
}

/**
 * A server on a fresh SQLite file with a few runs and topics already written, and a watch on
 * its store: after each request it finds every stream whose lastSeq moved (one query on its own
 * read-only connection), reads what was added through the store, and checks that nothing was
 * lost, renumbered or rewritten.
 */
class Fuzzed {
  readonly names = {
    runUuid: '',
    otherRunUuid: '',
    pipelineUuid: '',
  };
  private raw!: Database.Database;
  private readonly streams = new Map<string, StreamState>();
  private seeded: Array<{ key: StreamKey; entries: string[] }> = [];
  private requests = 0;
  /** What the last request added, per stream id. */
  delta = new Map<string, Entry[]>();
  /** The route that answered the last request, if one did (undefined: not found). */
  route: string | undefined;
  /**
   * Whether no Fastify hook saw the last request: the router answered it itself (a path that is
   * not percent-encoded UTF-8, a name over maxParamLength), or Node's HTTP parser did (headers
   * too large). Such a refusal reads nothing.
   */
  byRouter = false;
  /** How many answers of each status and code, to show what a run exercised. */
  readonly tally = new Map<string, number>();
  private readonly runs = new Map<string, RunRow>();
  private listStreams!: Database.Statement<[], { id: string; lastSeq: number; firstSeq: number }>;
  private listRuns!: Database.Statement<[], RunRow>;

  private constructor(readonly t: TestApp) {}

  static async create(overrides: PartialSettings = {}): Promise<Fuzzed> {
    const fuzzed = new Fuzzed(await createTestApp({ ...SETTINGS, ...overrides }));
    fuzzed.t.app.addHook('onSend', async (request) => {
      fuzzed.route = request.routeOptions.url;
      fuzzed.byRouter = false;
    });
    await fuzzed.seed();
    fuzzed.raw = new Database(join(fuzzed.t.dir, 'tailwater.db'), {
      readonly: true,
      fileMustExist: true,
    });
    fuzzed.listStreams = fuzzed.raw.prepare(
      'SELECT key AS id, last_seq AS lastSeq, first_seq AS firstSeq FROM streams',
    );
    fuzzed.listRuns = fuzzed.raw.prepare(
      `SELECT pipeline, run_id AS runId, status, cancel_requested AS cancelRequested,
         ended_at AS endedAt, meta FROM runs`,
    );
    const problems: string[] = [];
    await fuzzed.observe('seeding', problems);
    expect(problems).toEqual([]);
    fuzzed.seeded = [...fuzzed.streams.values()].map((s) => ({
      key: s.key,
      entries: [...s.entries],
    }));
    return fuzzed;
  }

  private async seed(): Promise<void> {
    const send = async (method: Method, url: string, body: unknown, type = 'application/json') => {
      const res = await this.t.app.inject({
        method,
        url,
        headers: { 'content-type': type },
        payload: typeof body === 'string' ? body : JSON.stringify(body),
      });
      if (res.statusCode !== 200) throw new Error(`seeding ${url}: ${res.statusCode} ${res.body}`);
      return res.json() as Record<string, unknown>;
    };
    const run = '/api/v1/pipelines/fuzz.seeded/runs';
    const r1 = await send('PUT', `${run}/r1`, { status: 'running', meta: { who: 'seed' } });
    this.names.runUuid = r1['id'] as string;
    await send('POST', `${run}/r1/logs`, 'hello\n', 'text/plain');
    await send('POST', `${run}/r1/logs`, { text: 'wörld ✓\n', step: 'load', id: 'log-1' });
    await send(
      'POST',
      `${run}/r1/events`,
      '{"events":[{"kind":"progress","data":{"pct":10},"id":"p-1"},' +
        '{"kind":"metric","data":{"snapshotId":12345678901234567890,"x":1e400,"x":2},' +
        '"id":"p-2","step":"train","correlationId":"c-1"}]}',
    );
    await send('PUT', `${run}/r2`, { status: 'running' });
    await send('POST', `${run}/r2/logs`, 'r2 line\n'.repeat(20), 'text/plain');
    await send('PUT', `${run}/r2`, { status: 'success' });
    const other = await send('PUT', '/api/v1/pipelines/fuzz.other/runs/r1', { status: 'queued' });
    this.names.otherRunUuid = other['id'] as string;
    await send('POST', '/compat/zenml/api/v1/runs/zr1/events', {
      events: [
        { pipeline_run_id: 'zr1', kind: 'step', step_name: 's1', index: 0, payload: { a: 1 } },
      ],
    });
    await send('POST', '/api/v1/topics/builds/events', {
      events: [{ kind: 'build', data: { n: 1 } }],
    });
    await send(
      'POST',
      '/api/v1/topics/iceberg/events',
      '{"events":[{"kind":"iceberg-mutation","id":"snap-1","data":{"snapshotId":1234567890123456789}},' +
        '{"kind":"iceberg-mutation","data":{"table":"t"}}]}',
    );
    const pipelines = await this.t.app.inject({ method: 'GET', url: '/api/v1/pipelines' });
    const list = (pipelines.json() as { pipelines: Array<{ fqn: string; id: string }> }).pipelines;
    this.names.pipelineUuid = list.find((p) => p.fqn === 'fuzz.seeded')!.id;
  }

  /** Sends one request through inject, within the answer timeout; never lets an exception by. */
  async inject(req: Req): Promise<LightMyRequestResponse> {
    this.route = undefined;
    this.byRouter = true;
    try {
      return await withTimeout(
        describeReq(req),
        this.t.app.inject({
          method: req.method,
          url: req.url,
          headers: req.headers,
          ...(req.payload === undefined ? {} : { payload: req.payload }),
        }),
      );
    } catch (error) {
      throw new Error(`inject failed for ${describeReq(req)}: ${String(error)}`, { cause: error });
    }
  }

  /**
   * After a request: every stream's lastSeq only moved forward, what was added is gapless and
   * readable, the seeded entries are untouched; `mayWrite: false` means nothing at all changed.
   */
  async check(what: string, options: { mayWrite: boolean }): Promise<void> {
    const problems: string[] = [];
    const runsBefore = options.mayWrite ? undefined : JSON.stringify([...this.runs.entries()]);
    const changed = await this.observe(what, problems);
    if (!options.mayWrite) {
      if (changed.length > 0) {
        problems.push(`it stored something: ${changed.map((id) => JSON.stringify(id)).join(', ')}`);
      }
      if (JSON.stringify([...this.runs.entries()]) !== runsBefore)
        problems.push('it changed a run');
    }
    for (const seeded of this.seeded) {
      const now = await this.t.store.readEntries(seeded.key, {
        afterSeq: 0,
        limit: seeded.entries.length,
      });
      if (JSON.stringify(now.map(signature)) !== JSON.stringify(seeded.entries)) {
        problems.push(`the seeded entries of ${streamId(seeded.key)} changed`);
      }
    }
    this.requests += 1;
    if (this.requests % AUDIT_EVERY === 0) await this.audit(problems);
    if (problems.length > 0) throw new Error(`${what}:\n  ${problems.join('\n  ')}`);
  }

  /** Every stream read back whole: it must be exactly what was seen, entry for entry. */
  async audit(problems: string[] = []): Promise<string[]> {
    for (const [id, state] of this.streams) {
      // The store reads synchronously: a turn of the event loop between streams keeps this
      // audit from being measured as the server's delay.
      await new Promise((resolve) => setImmediate(resolve));
      const bounds = await this.t.store.bounds(state.key);
      if (bounds.lastSeq !== state.lastSeq) {
        problems.push(
          `${JSON.stringify(id)}: bounds say lastSeq ${bounds.lastSeq}, was ${state.lastSeq}`,
        );
      }
      const all = (await readAll(this.t, state.key)).map(signature);
      if (JSON.stringify(all) !== JSON.stringify(state.entries)) {
        problems.push(`${JSON.stringify(id)}: its entries are no longer what they were`);
      }
    }
    return problems;
  }

  /** Reads what moved since the last look; answers the ids of the streams that moved. */
  private async observe(what: string, problems: string[]): Promise<string[]> {
    this.delta = new Map();
    const rows = this.listStreams.all();
    const seen = new Set<string>();
    const changed: string[] = [];
    for (const row of rows) {
      seen.add(row.id);
      const state = this.streams.get(row.id);
      if (state && row.lastSeq === state.lastSeq) continue;
      const key = keyOfId(row.id);
      if (!state) {
        const problem = keyProblem(key);
        if (problem) problems.push(`a stream was created whose ${problem}`);
      }
      if (state && row.lastSeq < state.lastSeq) {
        problems.push(
          `${JSON.stringify(row.id)}: lastSeq went back from ${state.lastSeq} to ${row.lastSeq}`,
        );
        continue;
      }
      if (row.firstSeq !== 1)
        problems.push(`${JSON.stringify(row.id)}: firstSeq is ${row.firstSeq}`);
      changed.push(row.id);
      const from = state?.lastSeq ?? 0;
      const bounds = await this.t.store.bounds(key);
      if (bounds.lastSeq !== row.lastSeq) {
        problems.push(
          `${JSON.stringify(row.id)}: bounds() says ${bounds.lastSeq}, the table ${row.lastSeq}`,
        );
      }
      const added = await readAll(this.t, key, from);
      const seqs = added.map((e) => e.seq);
      const expected = Array.from({ length: row.lastSeq - from }, (_, i) => from + i + 1);
      if (JSON.stringify(seqs) !== JSON.stringify(expected)) {
        problems.push(
          `${JSON.stringify(row.id)}: after ${what} it holds seqs ${JSON.stringify(seqs)} past ${from}, not ${from + 1}..${row.lastSeq}`,
        );
      }
      this.delta.set(row.id, added);
      const next = state ?? { key, lastSeq: 0, entries: [] };
      next.entries.push(...added.map(signature));
      next.lastSeq = row.lastSeq;
      this.streams.set(row.id, next);
    }
    for (const id of this.streams.keys()) {
      if (!seen.has(id)) problems.push(`${JSON.stringify(id)} is gone`);
    }
    this.observeRuns(problems);
    return changed;
  }

  /** A run that ended stays ended, at the same time; a cancel request is never taken back. */
  private observeRuns(problems: string[]): void {
    for (const row of this.listRuns.all()) {
      const id = streamId(runKey(row.pipeline, row.runId));
      const before = this.runs.get(id);
      if (before && isTerminal(before.status)) {
        if (!isTerminal(row.status)) {
          problems.push(
            `run ${JSON.stringify(id)} went from ${before.status} back to ${row.status}`,
          );
        }
        if (row.endedAt !== before.endedAt)
          problems.push(`run ${JSON.stringify(id)}: endedAt changed`);
      }
      if (before && before.cancelRequested === 1 && row.cancelRequested !== 1) {
        problems.push(`run ${JSON.stringify(id)}: its cancel request was dropped`);
      }
      this.runs.set(id, row);
    }
  }

  count(status: number, code: string | undefined): void {
    const name = code ? `${status} ${code}` : String(status);
    this.tally.set(name, (this.tally.get(name) ?? 0) + 1);
  }

  /** The tally, most frequent first: `200×80 400 TW_BAD_JSON×20 …`. */
  describeTally(): string {
    return [...this.tally.entries()]
      .sort((a, b) => b[1] - a[1])
      .map(([name, n]) => `${name}×${n}`)
      .join(', ');
  }

  async close(): Promise<void> {
    this.raw?.close();
    this.t.hub.shutdown();
    this.t.app.server.closeAllConnections();
    await this.t.close();
  }
}

// ---- what every answer must be -------------------------------------------------------------

interface Answer {
  status: number;
  type: string;
  body: string;
}

/** Freight's `error_name` of a Tailwater code: its own name for "not found", else the code's. */
function freightErrorName(code: string): string {
  return ['TW_RUN_NOT_FOUND', 'TW_PIPELINE_NOT_FOUND', 'TW_NOT_FOUND'].includes(code)
    ? 'invalid_resource'
    : code.replace(/^TW_/, '').toLowerCase();
}

/**
 * The error body of a 4xx, in the shape of the dialect of the route that answered (`route`,
 * undefined when none did, which is Tailwater's own shape); answers its code. Where `error` is
 * an object the code is `error.code`; Freight's `error` is the message, and its code `code`.
 */
function checkError(req: Req, answer: Answer, route: string | undefined): string | undefined {
  const what = `${describeReq(req)} → ${answer.status} ${answer.body.slice(0, 300)}`;
  expect(answer.type, what).toMatch(/^application\/json/);
  const body = JSON.parse(answer.body) as Record<string, unknown>;
  const checkCode = (code: unknown, message: unknown): string => {
    expect(code, what).toMatch(/^TW_[A-Z0-9_]+$/);
    expect(ERROR_STATUS[code as keyof typeof ERROR_STATUS], what).toBe(answer.status);
    expect(typeof message === 'string' && message.length > 0, what).toBe(true);
    return code as string;
  };
  if (route?.startsWith('/compat/freight/')) {
    expect(Object.keys(body), what).toEqual(['error', 'error_name', 'code']);
    const code = checkCode(body['code'], body['error']);
    expect(body['error_name'], what).toBe(freightErrorName(code));
    return code;
  }
  const error = body['error'] as { code?: unknown; message?: unknown } | undefined;
  expect(typeof error === 'object' && error !== null, what).toBe(true);
  expect(Object.keys(error!).sort(), what).toEqual(['code', 'message']);
  const code = checkCode(error!.code, error!.message);
  if (route?.startsWith('/compat/zenml/')) {
    expect(Object.keys(body).sort(), what).toEqual(['detail', 'error']);
    expect(body['detail'], what).toBe(error!.message);
  } else if (route?.startsWith('/compat/openmetadata/')) {
    expect(Object.keys(body), what).toEqual(['code', 'message', 'error']);
    expect(body['code'], what).toBe(answer.status);
    expect(body['message'], what).toBe(error!.message);
  } else {
    expect(Object.keys(body), what).toEqual(['error']);
  }
  return code;
}

/** Never a 5xx; a 4xx carries the error body. Answers the error code of a 4xx. */
function checkAnswer(req: Req, answer: Answer, route: string | undefined): string | undefined {
  const what = `${describeReq(req)} → ${answer.status} ${answer.body.slice(0, 300)}`;
  expect(answer.status, what).toBeGreaterThanOrEqual(200);
  expect(answer.status, what).toBeLessThan(500);
  if (req.method === 'HEAD') {
    // No body to judge: the status, and the type the GET would have.
    expect(answer.body, what).toBe('');
    if (answer.status >= 400) expect(answer.type, what).toMatch(/^application\/json/);
    return undefined;
  }
  if (answer.status >= 400) return checkError(req, answer, route);
  if (/^application\/json/.test(answer.type) && answer.body.length > 0) {
    expect(() => JSON.parse(answer.body) as unknown, what).not.toThrow();
  }
  return undefined;
}

function answerOf(res: LightMyRequestResponse): Answer & { headers: IncomingHttpHeaders } {
  return {
    status: res.statusCode,
    type: String(res.headers['content-type'] ?? ''),
    body: res.body,
    headers: res.headers as IncomingHttpHeaders,
  };
}

/**
 * A turn of the event loop. inject() and the store's reads can run on promise callbacks alone,
 * which never let timers run: without a turn between requests the loop-delay monitor would not
 * sample at all, and a request that held the loop would go unmeasured.
 */
function turn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** Sends a request, checks its answer and what it left in the store. */
async function exchange(
  f: Fuzzed,
  req: Req,
): Promise<{ res: LightMyRequestResponse; code: string | undefined }> {
  await turn();
  const res = await f.inject(req);
  await turn();
  const code = checkAnswer(req, answerOf(res), f.route);
  f.count(res.statusCode, code);
  const refused = res.statusCode >= 400;
  const read = req.method === 'GET' || req.method === 'HEAD';
  await f.check(describeReq(req), { mayWrite: !refused && !read });
  await turn();
  return { res, code };
}

// ---- 2xx answers to writes, against what was sent -------------------------------------------

/** The streams a write added to, the runs feed aside (a status change goes there too). */
function written(f: Fuzzed): Array<[string, Entry[]]> {
  return [...f.delta.entries()].filter(([id]) => id !== streamId(topicKey(RUNS_FEED_TOPIC)));
}

function checkLogAnswer(f: Fuzzed, req: Req, res: LightMyRequestResponse): void {
  const what = describeReq(req);
  const answer = res.json() as Record<string, unknown>;
  expect(Object.keys(answer).sort(), what).toEqual([
    'duplicate',
    'firstSeq',
    'offset',
    'seq',
    'size',
  ]);
  const streams = written(f);
  expect(streams.length, what).toBeLessThanOrEqual(1);
  const logs = (streams[0]?.[1] ?? []).filter((e) => e.kind === 'log');
  if (answer['duplicate'] === true) {
    expect(logs, what).toEqual([]);
    return;
  }
  expect(logs.length, what).toBeGreaterThan(0);
  expect(answer['firstSeq'], what).toBe(logs[0]!.seq);
  expect(answer['seq'], what).toBe(logs[logs.length - 1]!.seq);
  expect(answer['offset'], what).toBe(logs[0]!.offset);
  const stored = logs.map((e) => e.text).join('');
  expect(answer['size'], what).toBe(Buffer.byteLength(stored, 'utf8'));
  // Log text is stored as sent, byte for byte, in pieces of at most maxEventBytes: the body of a
  // text/plain append, the `text` of a JSON one (as JSON.parse reads it, duplicate keys and all).
  const body = req.payload!.toString('utf8');
  const plain = /^text\/plain/i.test(req.headers['content-type'] ?? '');
  expect(stored, what).toBe(plain ? body : (JSON.parse(body) as { text: string }).text);
  for (const e of logs) expect(Buffer.byteLength(e.text!, 'utf8'), what).toBeLessThanOrEqual(1024);
}

function checkEventsAnswer(f: Fuzzed, req: Req, res: LightMyRequestResponse): void {
  const what = describeReq(req);
  const answer = res.json() as { first: number; last: number; duplicates: number; seqs: number[] };
  expect(Object.keys(answer).sort(), what).toEqual(['duplicates', 'first', 'last', 'seqs']);
  const events = (JSON.parse(req.payload!.toString('utf8')) as { events: unknown[] }).events;
  expect(answer.seqs.length, what).toBe(events.length);
  expect(answer.first, what).toBe(Math.min(...answer.seqs));
  expect(answer.last, what).toBe(Math.max(...answer.seqs));
  const streams = written(f);
  expect(streams.length, what).toBeLessThanOrEqual(1);
  const added = (streams[0]?.[1] ?? []).filter((e) => e.kind !== 'status');
  expect(added.length, what).toBe(events.length - answer.duplicates);
  const bySeq = new Map(added.map((e) => [e.seq, e]));
  const sent = req.sent;
  answer.seqs.forEach((seq, index) => {
    const entry = bySeq.get(seq);
    if (!entry) return; // a duplicate: its original is older
    const event = events[index] as { kind: string };
    expect(entry.kind, what).toBe(event.kind);
    if (sent?.type === 'events' && sent.exact) {
      // Event data is stored as the producer wrote it, digit for digit.
      expect(entry[RAW_DATA], what).toBe(sent.items[index]!.dataText ?? 'null');
    }
  });
}

function checkZenmlAnswer(f: Fuzzed, req: Req, res: LightMyRequestResponse): void {
  const what = describeReq(req);
  const answer = res.json() as { count: number; last_id: string | null };
  expect(Object.keys(answer).sort(), what).toEqual(['count', 'last_id']);
  const events = (JSON.parse(req.payload!.toString('utf8')) as { events: unknown[] }).events;
  expect(answer.count, what).toBe(events.length);
  const streams = written(f);
  expect(streams.length, what).toBeLessThanOrEqual(1);
  const added = (streams[0]?.[1] ?? []).filter((e) => e.kind !== 'status');
  expect(added.length, what).toBe(events.length);
  if (events.length === 0) {
    expect(answer.last_id, what).toBeNull();
    return;
  }
  expect(answer.last_id, what).toBe(String(added[added.length - 1]!.seq));
  const sent = req.sent;
  if (sent?.type === 'zenml' && sent.exact) {
    added.forEach((entry, index) => {
      expect(entry[RAW_DATA], what).toBe(sent.items[index]!.dataText ?? '{}');
    });
  }
}

// ---- request generators ---------------------------------------------------------------------

const FQNS = ['fuzz.seeded', 'fuzz.other', 'fuzz.fresh', 'zenml'];
const RUN_IDS = ['r1', 'r2', 'latest', 'f1', 'zr1'];
const TOPICS = ['builds', 'iceberg', 'fresh-topic', '_runs'];

/** A run in a path: mostly one that exists or is about to, sometimes any name at all. */
const runPath = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.constantFrom(
      'fuzz.seeded/runs/r1',
      'fuzz.seeded/runs/r2',
      'fuzz.seeded/runs/latest',
      'fuzz.other/runs/r1',
      'fuzz.fresh/runs/f1',
      'fuzz.fresh/runs/f2',
    ),
  },
  {
    weight: 2,
    arbitrary: fc.tuple(segment(FQNS), segment(RUN_IDS)).map(([p, r]) => `${p}/runs/${r}`),
  },
);

const topicSegment = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(...TOPICS) },
  { weight: 2, arbitrary: segment(TOPICS) },
  { weight: 1, arbitrary: fc.stringMatching(/^[A-Za-z0-9_.-]{1,130}$/) },
);

const logRequest: fc.Arbitrary<Req> = fc.oneof(
  // text/plain
  fc
    .record({
      path: runPath,
      text: fc.oneof(
        text,
        fc.array(text, { minLength: 1, maxLength: 8 }).map((lines) => `${lines.join('\n')}\n`),
      ),
      how: corruption,
      type: contentType('text/plain'),
      extra: bodyHeaders,
    })
    .map(({ path, text: body, how, type, extra }) =>
      request({
        method: 'POST',
        url: `/api/v1/pipelines/${path}/logs`,
        headers: headersOf(type, extra),
        payload: corrupt(body, how),
        dialect: 'native',
      }),
    ),
  // {"text", "step"?, "id"?}
  fc
    .record({
      path: runPath,
      text: field(text.map((s) => JSON.stringify(s))),
      step: optional(field(anyName.map((s) => JSON.stringify(s)))),
      id: optional(field(producerId.map((s) => JSON.stringify(s)))),
      extras: fc.array(fc.tuple(extraKey, json), { maxLength: 2 }),
      how: corruption,
      type: contentType('application/json'),
      extra: bodyHeaders,
    })
    .map(({ path, text: textJson, step, id, extras, how, type, extra }) =>
      request({
        method: 'POST',
        url: `/api/v1/pipelines/${path}/logs`,
        headers: headersOf(type, extra),
        payload: corrupt(
          object([['"text"', textJson], ['"step"', step], ['"id"', id], ...extras]),
          how,
        ),
        dialect: 'native',
      }),
    ),
);

const eventsRequest: fc.Arbitrary<Req> = fc
  .record({
    target: fc.oneof(
      runPath.map((p) => `/api/v1/pipelines/${p}/events`),
      topicSegment.map((t) => `/api/v1/topics/${t}/events`),
    ),
    body: batchBody(nativeItem),
    how: corruption,
    type: contentType('application/json'),
    extra: bodyHeaders,
  })
  .map(({ target, body, how, type, extra }) =>
    request({
      method: 'POST',
      url: target,
      headers: headersOf(type, extra),
      payload: corrupt(body.text, how),
      dialect: 'native',
      sent: { type: 'events', items: body.items, exact: body.exact && intact(how) },
    }),
  );

// ZenML's StreamEvent, with the run id of the path most of the time.
function zenmlItem(runId: string): fc.Arbitrary<ItemSpec> {
  return fc
    .record({
      runId: fc.oneof(
        { weight: 8, arbitrary: fc.constant(JSON.stringify(runId)) },
        { weight: 1, arbitrary: field(anyName.map((s) => JSON.stringify(s))) },
      ),
      kind: optional(field(anyKind.map((k) => JSON.stringify(k))), 4),
      step: optional(field(anyName.map((s) => JSON.stringify(s)))),
      stepRun: optional(field(text.map((s) => JSON.stringify(s)))),
      correlationId: optional(field(anyName.map((s) => JSON.stringify(s)))),
      index: optional(
        fc.oneof(
          { weight: 6, arbitrary: fc.integer().map(String) },
          { weight: 1, arbitrary: json },
        ),
      ),
      payload: optional(
        fc.oneof(
          { weight: 6, arbitrary: jsonValue.map((v) => `{"v":${v}}`) },
          { weight: 1, arbitrary: json },
        ),
        5,
      ),
    })
    .map((item) => ({
      text: object([
        ['"pipeline_run_id"', item.runId],
        ['"kind"', item.kind],
        ['"step_name"', item.step],
        ['"step_run_id"', item.stepRun],
        ['"correlation_id"', item.correlationId],
        ['"index"', item.index],
        ['"payload"', item.payload],
      ]),
      dataText: item.payload,
    }));
}

const zenmlRunIds = (f: Fuzzed) => [
  'zr1',
  'zr2',
  'r1',
  'r2',
  f.names.runUuid,
  f.names.otherRunUuid,
];

function zenmlPostRequest(f: Fuzzed): fc.Arbitrary<Req> {
  return zenmlBatch(segment(zenmlRunIds(f)));
}

/** A ZenML batch to the run `runSeg` names (percent-encoded), its events mostly naming it too. */
function zenmlBatch(runSegment: fc.Arbitrary<string>): fc.Arbitrary<Req> {
  return fc
    .record({
      runSeg: runSegment,
      how: corruption,
      type: contentType('application/json'),
      extra: bodyHeaders,
    })
    .chain(({ runSeg, how, type, extra }) =>
      batchBody(zenmlItem(decodedName(runSeg) ?? runSeg)).map((body) =>
        request({
          method: 'POST',
          url: `/compat/zenml/api/v1/runs/${runSeg}/events`,
          headers: headersOf(type, extra),
          payload: corrupt(body.text, how),
          dialect: 'zenml',
          sent: { type: 'zenml', items: body.items, exact: body.exact && intact(how) },
        }),
      ),
    );
}

const STATUS_VALUES = [...RUN_STATUSES, 'RUNNING', 'done', '', 'latest', 'cancelRequested'];

const metaJson = fc
  .array(fc.tuple(jsonKey, json), { maxLength: 4 })
  .map((entries) => `{${entries.map(([k, v]) => `${k}:${v}`).join(',')}}`);

const runPoolPath = fc.oneof(
  {
    weight: 6,
    arbitrary: fc
      .tuple(
        fc.constantFrom('fuzz.runs', 'fuzz.seeded'),
        fc.constantFrom('a', 'b', 'c', 'r1', 'r2'),
      )
      .map(([p, r]) => `${p}/runs/${r}`),
  },
  { weight: 1, arbitrary: runPath },
);

const putRunRequest: fc.Arbitrary<Req> = fc
  .record({
    path: runPoolPath,
    status: optional(field(fc.constantFrom(...STATUS_VALUES).map((s) => JSON.stringify(s))), 10),
    meta: optional(fc.oneof({ weight: 6, arbitrary: metaJson }, { weight: 1, arbitrary: json })),
    extras: fc.array(fc.tuple(extraKey, json), { maxLength: 1 }),
    how: corruption,
    type: contentType('application/json'),
    extra: bodyHeaders,
  })
  .map(({ path, status, meta, extras, how, type, extra }) =>
    request({
      method: 'PUT',
      url: `/api/v1/pipelines/${path}`,
      headers: headersOf(type, extra),
      payload: corrupt(object([['"status"', status], ['"meta"', meta], ...extras]), how),
      dialect: 'native',
      sent: {
        type: 'putRun',
        status: status === undefined ? undefined : tryParse(status),
        metaText: meta,
        exact: intact(how) && extras.length === 0,
      },
    }),
  );

const cancelRequest: fc.Arbitrary<Req> = fc
  .record({
    path: runPoolPath,
    body: optional(fc.oneof(json, fc.constant('x'.repeat(2000))), 2),
    type: contentType('application/json'),
  })
  .map(({ path, body, type }) =>
    request({
      method: 'POST',
      url: `/api/v1/pipelines/${path}/cancel`,
      headers: body === undefined ? {} : headersOf(type, {}),
      payload: body === undefined ? undefined : Buffer.from(body, 'utf8'),
      dialect: 'native',
    }),
  );

/**
 * A deploy as Freight names it: one id (a run's UUID or run id), or `{app}/{env}/{number}`,
 * the run {number} of the pipeline {app}.{env} (`fuzz/seeded/r1` is fuzz.seeded's r1).
 */
function deploySegments(ids: readonly string[], raw = true): fc.Arbitrary<string> {
  return fc.oneof(
    segment(ids, raw),
    fc
      .tuple(
        segment(['fuzz'], raw),
        segment(['seeded', 'other', 'runs'], raw),
        segment(['r1', 'r2', 'a', 'b', 'latest', 'nope'], raw),
      )
      .map((parts) => parts.join('/')),
  );
}

/** Freight's Cancel button: PUT {"status": "cancelled"} on a deploy, or some other body. */
function freightCancelRequest(f: Fuzzed): fc.Arbitrary<Req> {
  return fc
    .record({
      resource: fc.constantFrom('deploys', 'tasks'),
      deploy: deploySegments([...zenmlRunIds(f), 'a', 'b']),
      slash: fc.constantFrom('/', ''),
      body: fc.oneof(
        { weight: 4, arbitrary: fc.constant('{"status":"cancelled"}') },
        { weight: 1, arbitrary: fc.constant('{"status":"finished"}') },
        { weight: 1, arbitrary: json },
      ),
      how: corruption,
      type: contentType('application/json'),
    })
    .map(({ resource, deploy, slash, body, how, type }) =>
      request({
        method: 'PUT',
        url: `/compat/freight/api/0/${resource}/${deploy}${slash}`,
        headers: headersOf(type, {}),
        payload: corrupt(body, how),
        dialect: 'freight',
      }),
    );
}

/** Freight's deploy statuses, by the run status each stands for (docs/API.md, "Freight"). */
const FREIGHT_STATUS: Record<RunStatus, string> = {
  queued: 'pending',
  running: 'in_progress',
  success: 'finished',
  failed: 'failed',
  partialSuccess: 'failed',
  stopped: 'cancelled',
  cancelled: 'cancelled',
};
const DEPLOY_KEYS = [
  'id',
  'name',
  'app',
  'environment',
  'number',
  'status',
  'sha',
  'sha_url',
  'ref',
  'remote',
  'user',
  'duration',
  'estimatedDuration',
  'dateCreated',
  'dateStarted',
  'dateFinished',
];
const FREIGHT_DATE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

/** A deploy as Freight's UI reads it, held against the run it stands for. */
async function checkDeploy(f: Fuzzed, what: string, deploy: Record<string, unknown>) {
  expect(Object.keys(deploy).sort(), what).toEqual([...DEPLOY_KEYS].sort());
  const [run] = (await f.t.store.findRuns(deploy['id'] as string)).filter(
    (r) => r.id === deploy['id'],
  );
  expect(run, what).toBeDefined();
  expect(deploy['status'], what).toBe(FREIGHT_STATUS[run!.status]);
  expect(deploy['number'], what).toBe(
    /^\d{1,15}$/.test(run!.runId) ? Number(run!.runId) : run!.runId,
  );
  expect(deploy['dateCreated'], what).toMatch(FREIGHT_DATE);
  for (const key of ['dateStarted', 'dateFinished']) {
    if (deploy[key] !== null) expect(deploy[key], what).toMatch(FREIGHT_DATE);
  }
  expect(deploy['dateFinished'] === null, what).toBe(run!.endedAt === null);
  return run!;
}

const pageQuery = queryString({
  limit: intish,
  after: fc.oneof(intish, anyName),
  status: fc.constantFrom(...STATUS_VALUES),
});

const listRequest: fc.Arbitrary<Req> = fc
  .tuple(
    fc.oneof(
      fc.constant('/api/v1/pipelines'),
      fc.constant('/api/v1/topics'),
      fc
        .oneof(fc.constantFrom('fuzz.runs', 'fuzz.seeded'), segment(FQNS))
        .map((p) => `/api/v1/pipelines/${p}/runs`),
    ),
    pageQuery,
  )
  .map(([path, { query }]) =>
    request({ method: 'GET', url: `${path}${query}`, headers: {}, dialect: 'native' }),
  );

const getRunRequest: fc.Arbitrary<Req> = runPoolPath.map((path) =>
  request({ method: 'GET', url: `/api/v1/pipelines/${path}`, headers: {}, dialect: 'native' }),
);

/** Reads whose stream the test knows, so a 200 page can be held against the store. */
const KNOWN_READS: ReadonlyArray<{ path: string; key: StreamKey }> = [
  { path: '/api/v1/pipelines/fuzz.seeded/runs/r1', key: runKey('fuzz.seeded', 'r1') },
  { path: '/api/v1/pipelines/fuzz.seeded/runs/r2', key: runKey('fuzz.seeded', 'r2') },
  { path: '/api/v1/pipelines/fuzz.other/runs/r1', key: runKey('fuzz.other', 'r1') },
  { path: '/api/v1/pipelines/zenml/runs/zr1', key: runKey('zenml', 'zr1') },
];

const readRunTarget: fc.Arbitrary<{ path: string; key?: StreamKey | undefined }> = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...KNOWN_READS) },
  { weight: 1, arbitrary: runPath.map((p) => ({ path: `/api/v1/pipelines/${p}` })) },
);

const entriesQuery = queryString({ after: intish, since: intish, limit: intish, kinds: kindList });
const logQuery = queryString({ offset: intish, limit: intish });

/** A read, or now and then the same as HEAD (which Fastify answers for every GET route). */
function readRequest(f: Fuzzed): fc.Arbitrary<Req> {
  return fc
    .tuple(readGetRequest(f), fc.integer({ min: 0, max: 9 }))
    .map(([req, dice]) => (dice === 0 ? request({ ...req, method: 'HEAD' }) : req));
}

function readGetRequest(f: Fuzzed): fc.Arbitrary<Req> {
  const omSegment = segment([
    'fuzz.seeded',
    'fuzz.other',
    'zenml',
    f.names.pipelineUuid,
    f.names.pipelineUuid.toUpperCase(),
  ]);
  return fc.oneof(
    fc.tuple(readRunTarget, entriesQuery).map(([target, { query }]) =>
      request({
        method: 'GET',
        url: `${target.path}/entries${query}`,
        headers: {},
        dialect: 'native',
        key: target.key,
      }),
    ),
    fc.tuple(topicSegment, entriesQuery).map(([topic, { query }]) =>
      request({
        method: 'GET',
        url: `/api/v1/topics/${topic}/entries${query}`,
        headers: {},
        dialect: 'native',
        key: TOPICS.includes(topic) ? topicKey(topic) : undefined,
      }),
    ),
    fc.tuple(readRunTarget, logQuery).map(([target, { query }]) =>
      request({
        method: 'GET',
        url: `${target.path}/log${query}`,
        headers: {},
        dialect: 'native',
        key: target.key,
      }),
    ),
    readRunTarget.map((target) =>
      request({
        method: 'GET',
        url: `${target.path}/log.txt`,
        headers: {},
        dialect: 'native',
        key: target.key,
      }),
    ),
    fc
      .tuple(
        fc.constantFrom('tasks', 'deploys'),
        deploySegments(zenmlRunIds(f).concat('nope')),
        fc.constantFrom('/log/', '/log', '/', ''),
        logQuery,
      )
      .map(([resource, id, tail, { query }]) =>
        request({
          method: 'GET',
          url: `/compat/freight/api/0/${resource}/${id}${tail}${query}`,
          headers: {},
          dialect: 'freight',
        }),
      ),
    fc
      .tuple(omSegment, queryString({ after: intish, limit: intish }), fc.boolean())
      .map(([fqn, { query }, download]) =>
        request({
          method: 'GET',
          url: `/compat/openmetadata/api/v1/services/ingestionPipelines/logs/${fqn}/last${download ? '/download' : ''}${query}`,
          headers: {},
          dialect: 'openmetadata',
        }),
      ),
  );
}

// ---- 200 pages, against the store ------------------------------------------------------------

function decodable(query: string): boolean {
  return query.split(/[&=]/).every((part) => {
    try {
      decodeURIComponent(part);
      return true;
    } catch {
      return false;
    }
  });
}

function single(query: URLSearchParams, name: string): string | undefined {
  return query.get(name) ?? undefined;
}

async function checkReadAnswer(f: Fuzzed, req: Req, res: LightMyRequestResponse): Promise<void> {
  if (res.statusCode !== 200 || req.method === 'HEAD') return;
  const what = describeReq(req);
  const url = new URL(req.url, 'http://localhost');
  const path = url.pathname;
  if (req.dialect === 'freight' && !/\/log\/?$/.test(f.route ?? '')) {
    await checkDeploy(f, what, res.json() as Record<string, unknown>);
  } else if (path.endsWith('/entries')) {
    const page = res.json() as { entries: Entry[]; next: number; hasMore: boolean };
    expect(Object.keys(page).sort(), what).toEqual(['entries', 'hasMore', 'next']);
    const after = Number(
      single(url.searchParams, 'after') ?? single(url.searchParams, 'since') ?? 0,
    );
    const limit = Number(single(url.searchParams, 'limit') || 100);
    const kinds = url.searchParams
      .getAll('kinds')
      .flatMap((k) => k.split(','))
      .map((k) => k.trim())
      .filter(Boolean);
    const seqs = page.entries.map((e) => e.seq);
    expect(seqs.length, what).toBeLessThanOrEqual(limit);
    seqs.forEach((seq, i) => expect(seq, what).toBeGreaterThan(i === 0 ? after : seqs[i - 1]!));
    if (kinds.length > 0) for (const e of page.entries) expect(kinds, what).toContain(e.kind);
    expect(page.next, what).toBe(seqs[seqs.length - 1] ?? after);
    // A query value that is not valid percent-encoding reaches the route undecoded (`%2C` and
    // all): the server's `kinds` are then not the ones URLSearchParams reads.
    if (req.key && decodable(url.search.slice(1))) {
      const stored = await f.t.store.readEntries(req.key, {
        afterSeq: after,
        limit,
        ...(kinds.length > 0 ? { kinds } : {}),
      });
      expect(seqs, what).toEqual(stored.map((e) => e.seq));
      expect(
        page.entries.map((e) => e.text),
        what,
      ).toEqual(stored.map((e) => e.text));
    }
  } else if (path.endsWith('/log') || path.endsWith('/log/')) {
    const page = res.json() as {
      chunks: Array<{ offset: number; size: number; text: string }>;
      nextOffset: number;
    };
    const offset = Number(single(url.searchParams, 'offset') || 0) + 0; // -0 is 0
    // The native log's page is 1 MiB by default; Freight's, without limit or with 0, is the rest.
    const limitParam = Number(single(url.searchParams, 'limit') || 0);
    const limit =
      req.dialect === 'freight'
        ? limitParam || Number.POSITIVE_INFINITY
        : limitParam || 1024 * 1024;
    page.chunks.forEach((chunk, i) => {
      expect(chunk.size, what).toBe(Buffer.byteLength(chunk.text, 'utf8'));
      if (i > 0)
        expect(chunk.offset, what).toBe(page.chunks[i - 1]!.offset + page.chunks[i - 1]!.size);
      if (offset >= 0) {
        expect(chunk.offset, what).toBeGreaterThanOrEqual(offset);
        expect(chunk.offset, what).toBeLessThan(offset + limit);
      }
    });
    const last = page.chunks[page.chunks.length - 1];
    expect(page.nextOffset, what).toBe(last ? last.offset + last.size : offset);
    if (req.dialect === 'freight') {
      const link = String(res.headers['link']);
      expect(link, what).toMatch(/^<\/compat\/freight\/api\/0\/.*>; rel="next"$/);
      // The next page: from nextOffset, with the same limit (none when none was given).
      const next = new URL(link.slice(1, link.indexOf('>')), 'http://localhost').searchParams;
      expect(next.get('offset'), what).toBe(String(page.nextOffset));
      expect(next.get('cursor'), what).toBe(String(page.nextOffset));
      expect(next.get('limit'), what).toBe(limitParam ? String(limitParam) : null);
    }
  } else if (path.endsWith('/log.txt')) {
    expect(res.headers['content-type'], what).toMatch(/^text\/plain/);
    expect(res.headers['content-disposition'], what).toMatch(
      /^attachment; filename="[A-Za-z0-9_.-]*"; filename\*=UTF-8''/,
    );
    if (req.key) {
      const logs = (await readAll(f.t, req.key)).filter((e) => e.kind === 'log');
      expect(res.body, what).toBe(logs.map((e) => e.text).join(''));
    }
  } else if (path.endsWith('/last')) {
    const page = res.json() as Record<string, unknown>;
    expect(typeof page['ingestion_task'], what).toBe('string');
    expect(page['total'], what).toMatch(/^\d+$/);
    if ('after' in page) expect(page['after'], what).toMatch(/^\d+$/);
  }
}

// ---- streams over a real socket ---------------------------------------------------------------

interface StreamAnswer extends Answer {
  headers: IncomingHttpHeaders;
  raw: Buffer;
}

/** A URL as a request line can carry it: what Node's client refuses raw, percent-encoded. */
function requestTarget(url: string): string {
  return url.replace(/[^\x21-\x7e]/gu, (c) => pctEncode(c));
}

/**
 * Opens a stream and lets it go after its first bytes (or a moment, for a stream with nothing
 * to say yet); an error answer is read whole. Either must come within the answer timeout.
 */
function openStream(base: string, req: Req): Promise<StreamAnswer> {
  const { port } = new URL(base);
  return withTimeout(
    describeReq(req),
    new Promise<StreamAnswer>((resolve, reject) => {
      const outgoing = httpRequest(
        {
          host: '127.0.0.1',
          port,
          path: requestTarget(req.url),
          method: req.method,
          headers: req.headers,
          agent: false,
        },
        (res) => {
          const chunks: Buffer[] = [];
          const status = res.statusCode ?? 0;
          const finish = () => {
            clearTimeout(timer);
            outgoing.destroy();
            res.destroy();
            const raw = Buffer.concat(chunks);
            resolve({
              status,
              headers: res.headers,
              type: String(res.headers['content-type'] ?? ''),
              body: raw.toString('utf8'),
              raw,
            });
          };
          // A stream is let go soon after it opened; an error answer must end by itself.
          const timer = setTimeout(finish, status === 200 ? 150 : ANSWER_TIMEOUT_MS + 1000);
          res.on('data', (chunk: Buffer) => {
            chunks.push(chunk);
            if (status === 200) setTimeout(finish, 5);
          });
          res.on('end', finish);
          res.on('error', finish);
        },
      );
      outgoing.on('error', reject);
      outgoing.end();
    }),
  );
}

/**
 * Sends a request's body over a real socket in pieces cut at `cuts` (byte offsets), chunked,
 * each piece written after the one before was flushed and a turn of the event loop, so that the
 * server reads them as separate pieces.
 */
function sendInPieces(base: string, req: Req, cuts: readonly number[]): Promise<Answer> {
  const { port } = new URL(base);
  const body = req.payload ?? Buffer.alloc(0);
  const at = [...new Set(cuts.map((c) => c % (body.length + 1)))].sort((a, b) => a - b);
  const pieces = [0, ...at, body.length]
    .slice(1)
    .map((end, i, ends) => body.subarray(i === 0 ? 0 : ends[i - 1]!, end))
    .filter((piece) => piece.length > 0);
  return withTimeout(
    describeReq(req),
    new Promise<Answer>((resolve, reject) => {
      const outgoing = httpRequest(
        {
          host: '127.0.0.1',
          port,
          path: requestTarget(req.url),
          method: req.method,
          // Chunked, so any Content-Length the request had would make it malformed HTTP.
          headers: {
            ...Object.fromEntries(
              Object.entries(req.headers).filter(([name]) => name !== 'content-length'),
            ),
            'transfer-encoding': 'chunked',
          },
          agent: false,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () =>
            resolve({
              status: res.statusCode ?? 0,
              type: String(res.headers['content-type'] ?? ''),
              body: Buffer.concat(chunks).toString('utf8'),
            }),
          );
          res.on('error', reject);
        },
      );
      // The server may answer (and close) before the last piece: that is an answer, not an error.
      outgoing.on('error', (error: NodeJS.ErrnoException) => {
        if (error.code !== 'EPIPE' && error.code !== 'ECONNRESET') reject(error);
      });
      void (async () => {
        for (const piece of pieces) {
          if (outgoing.destroyed) return;
          await new Promise<void>((done) => outgoing.write(piece, () => done()));
          await new Promise((done) => setTimeout(done, 1));
        }
        outgoing.end();
      })();
    }),
  );
}

function replaceBytes(buffer: Buffer, from: string, to: string): Buffer {
  const pattern = Buffer.from(from, 'utf8');
  const parts: Buffer[] = [];
  let start = 0;
  for (let at = buffer.indexOf(pattern); at >= 0; at = buffer.indexOf(pattern, start)) {
    parts.push(buffer.subarray(start, at), Buffer.from(to, 'utf8'));
    start = at + pattern.length;
  }
  parts.push(buffer.subarray(start));
  return Buffer.concat(parts);
}

/** An entry as it reads, without its time (two writes of the same body are made at two times). */
function content(entry: Entry): string {
  return JSON.stringify([
    entry.seq,
    entry.kind,
    entry.offset,
    entry.text,
    entry[RAW_DATA],
    entry.step,
    entry.correlationId,
    entry.id,
    entry.extra,
  ]);
}

const SSE_LINE = /^(?:|:.*|(?:id|event|data|retry)(?:: ?.*)?)$/;

function checkSse(req: Req, answer: StreamAnswer): void {
  const what = `${describeReq(req)} → ${answer.body.slice(0, 300)}`;
  expect(answer.type, what).toMatch(/^text\/event-stream/);
  expect(answer.headers['cache-control'], what).toMatch(/no-cache/);
  const end = answer.raw.lastIndexOf(0x0a);
  if (end < 0) return;
  const complete = answer.raw.subarray(0, end);
  expect(isUtf8(complete), what).toBe(true);
  for (const line of complete.toString('utf8').split('\n')) {
    expect(line, what).toMatch(SSE_LINE);
  }
}

/** The events of the complete frames of a stream's first bytes, as an SSE parser reads them. */
function sseEvents(raw: Buffer): SseEvent[] {
  const events: SseEvent[] = [];
  const parser = createParser({
    onEvent: (message) =>
      events.push({ id: message.id, event: message.event ?? 'message', data: message.data }),
  });
  const end = raw.lastIndexOf('\n\n');
  if (end >= 0) parser.feed(raw.subarray(0, end + 2).toString('utf8'));
  return events;
}

/** The seeded Iceberg topic: seq 1 has the producer id `snap-1`, seq 2 none (its id `seq:2`). */
const ICEBERG_IDS = new Set(['snap-1', 'seq:0', 'seq:1', 'seq:2']);

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/**
 * A Last-Event-ID as the server reads it: HTTP strips the spaces and tabs around it, and its
 * bytes are read as UTF-8 when they are that (a browser sends the id it was given as UTF-8),
 * else as Latin-1.
 */
function lastEventIdAsRead(req: Req): string | undefined {
  const header = req.headers['last-event-id']?.replace(/^[ \t]+|[ \t]+$/g, '');
  if (header === undefined) return undefined;
  try {
    return UTF8.decode(Buffer.from(header, 'latin1'));
  } catch {
    return header;
  }
}

/**
 * Whether a stream's Last-Event-ID is one the server cannot place: for the native and ZenML
 * streams anything but digits (the header is trimmed as a cursor is), for Iceberg an id its
 * topic does not hold, and for OpenMetadata anything but digits (a byte offset; digits may
 * still not be placeable).
 */
function unplaceableLastEventId(req: Req): boolean {
  const header = lastEventIdAsRead(req);
  if (header === undefined || header === '') return false;
  if (req.dialect === 'iceberg') return !ICEBERG_IDS.has(header);
  const trimmed = header.trim();
  return trimmed !== '' && !/^\d{1,15}$/.test(trimmed);
}

/**
 * A stream with a Last-Event-ID it cannot place starts (after the frames its dialect opens
 * with) by saying so, then follows from its start (docs/API.md, "Streaming"): `gap reset` on
 * the native, ZenML and Iceberg streams, the truncated notice on OpenMetadata's, whose only other
 * first frame is an `error` (a run id it cannot take). Never a 400: an EventSource would stop.
 */
function checkUnplaceableStart(req: Req, answer: StreamAnswer): void {
  if (!unplaceableLastEventId(req)) return;
  const what = `${describeReq(req)} → ${answer.body.slice(0, 300)}`;
  const events = sseEvents(answer.raw).filter((e) => e.event !== 'connected');
  const first = events[0];
  if (first === undefined) return;
  if (req.dialect === 'openmetadata') {
    const data = JSON.parse(first.data) as Record<string, unknown>;
    if (data['eventType'] === 'error') return;
    expect({ id: first.id, data }, what).toEqual({
      id: undefined,
      data: {
        eventType: 'logs',
        runId: expect.any(String) as unknown,
        logs: '',
        replay: true,
        truncated: true,
      },
    });
  } else {
    expect({ event: first.event, data: first.data }, what).toEqual({
      event: 'gap',
      data: '{"reason":"reset"}',
    });
  }
}

const LAST_EVENT_IDS = [
  '',
  ' ',
  '0',
  '1',
  '3',
  '-1',
  '999999999999999',
  '9999999999999999',
  '1e3',
  'abc',
  'seq:1',
  'seq:0',
  'seq:999999999999999',
  'seq:abc',
  'snap-1',
  'snap-2',
  ' 2 ',
  '2, 3',
  '0x1',
  '%31',
  '１',
  '\t5',
  'é',
  '1718000000000-0',
  'x',
];

const lastEventId = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...LAST_EVENT_IDS) },
  { weight: 1, arbitrary: text },
  { weight: 1, arbitrary: fc.integer({ min: -5, max: 60 }).map(String) },
);

function streamRequest(f: Fuzzed): fc.Arbitrary<Req> {
  const nativeQuery = queryString({
    after: intish,
    since: intish,
    from: fc.constantFrom('latest', 'start', 'end', ''),
    tail: intish,
    kinds: kindList,
    steps: fc.oneof(anyName, kindList),
    correlationIds: anyName,
  });
  const enc = (s: string) => segment([s], false);
  const path: fc.Arbitrary<readonly [string, Dialect]> = fc.oneof(
    fc
      .tuple(readRunTarget, nativeQuery)
      .map(([t, { query }]) => [`${t.path}/stream${query}`, 'native'] as const),
    fc
      .tuple(fc.oneof(fc.constantFrom(...TOPICS), segment(TOPICS, false)), nativeQuery)
      .map(([t, { query }]) => [`/api/v1/topics/${t}/stream${query}`, 'native'] as const),
    fc
      .tuple(
        queryString({
          pipeline: fc.oneof(fc.constantFrom(...FQNS), anyName),
          after: intish,
          kinds: kindList,
        }),
      )
      .map(([{ query }]) => [`/api/v1/runs/stream${query}`, 'native'] as const),
    fc
      .tuple(
        segment(zenmlRunIds(f), false),
        queryString({
          since: intish,
          kinds: kindList,
          step_names: anyName,
          correlation_ids: anyName,
        }),
      )
      .map(
        ([r, { query }]) =>
          [`/compat/zenml/api/v1/runs/${r}/events/stream${query}`, 'zenml'] as const,
      ),
    fc
      .tuple(
        fc.oneof(enc('fuzz.seeded'), enc(f.names.pipelineUuid), segment(FQNS, false)),
        segment(RUN_IDS, false),
        queryString({ after: intish }),
      )
      .map(
        ([p, r, { query }]) =>
          [
            `/compat/openmetadata/api/v1/services/ingestionPipelines/logs/${p}/stream/${r}${query}`,
            'openmetadata',
          ] as const,
      ),
    fc.constant(['/compat/iceberg/events', 'iceberg'] as const),
  );
  return fc
    .record({ path, lastEventId: optional(lastEventId, 2) })
    .map(({ path: [url, dialect], lastEventId: id }) =>
      request({
        method: 'GET',
        url,
        headers: id === undefined ? {} : { 'last-event-id': headerValue(id) },
        dialect,
      }),
    );
}

// ---- Origin and Host ----------------------------------------------------------------------------

const LOOPBACK_HOSTS = [
  'localhost',
  'localhost:8585',
  '127.0.0.1',
  '127.0.0.1:80',
  '127.9.9.9:1',
  '[::1]:8585',
  'LOCALHOST',
  'app.localhost',
  'localhost.',
];
const FOREIGN_HOSTS = [
  'evil.example',
  'evil.example:8585',
  'localhost.evil.example',
  '127.0.0.1.nip.io',
  '[::2]',
  '0.0.0.0',
  '10.0.0.1:8585',
  'localhost:80@evil.example',
];
const ALLOWED_ORIGINS = [
  'http://localhost:3000',
  'http://localhost',
  'http://127.0.0.1:8585',
  'http://[::1]:9',
  'http://LOCALHOST:5173',
];
const FOREIGN_ORIGINS = [
  'http://evil.example',
  'https://evil.example:8585',
  'null',
  'http://localhost.evil.example',
  'file://',
  'http://127.0.0.1.evil.example:80',
  'chrome-extension://abcdef',
  'http://[::2]:1',
  '',
];

type Category = 'allowed' | 'foreign' | 'unknown' | 'absent';
const ABSENT: [Category, string | undefined] = ['absent', undefined];

const hostHeader: fc.Arbitrary<[Category, string | undefined]> = fc.oneof(
  { weight: 3, arbitrary: fc.constant(['absent', undefined] as [Category, undefined]) },
  {
    weight: 3,
    arbitrary: fc.constantFrom(...LOOPBACK_HOSTS).map((h) => ['allowed', h] as [Category, string]),
  },
  {
    weight: 3,
    arbitrary: fc.constantFrom(...FOREIGN_HOSTS).map((h) => ['foreign', h] as [Category, string]),
  },
  { weight: 1, arbitrary: text.map((h) => ['unknown', headerValue(h)] as [Category, string]) },
);

const originHeader: fc.Arbitrary<[Category, string | undefined]> = fc.oneof(
  { weight: 3, arbitrary: fc.constant(['absent', undefined] as [Category, undefined]) },
  {
    weight: 3,
    arbitrary: fc.constantFrom(...ALLOWED_ORIGINS).map((o) => ['allowed', o] as [Category, string]),
  },
  {
    weight: 3,
    arbitrary: fc.constantFrom(...FOREIGN_ORIGINS).map((o) => ['foreign', o] as [Category, string]),
  },
  { weight: 1, arbitrary: text.map((o) => ['unknown', headerValue(o)] as [Category, string]) },
);

/**
 * What the Host and Origin of a request decide: a foreign Host is 421 whatever else, a foreign
 * Origin 403, an allowed one gets CORS headers (unless it is the page's own), and a request
 * refused so stores nothing. Headers the test cannot judge (`unknown`) may go either way.
 */
function checkOriginPolicy(
  f: Fuzzed,
  req: Req,
  answer: Answer & { headers?: IncomingHttpHeaders },
  code: string | undefined,
  sent: {
    host: [Category, string | undefined];
    origin: [Category, string | undefined];
    defaultHost: string;
  },
): void {
  const what = `${describeReq(req)} → ${answer.status} ${answer.body.slice(0, 200)}`;
  const [hostKind, host] = sent.host;
  const [originKind, origin] = sent.origin;
  // A HEAD answer has no body to name its code: its status says as much here.
  const refusal =
    code ??
    (req.method === 'HEAD'
      ? { 421: 'TW_MISDIRECTED', 403: 'TW_FORBIDDEN_ORIGIN' }[answer.status]
      : undefined);
  if (refusal === 'TW_MISDIRECTED' || refusal === 'TW_FORBIDDEN_ORIGIN') {
    expect(written(f), what).toEqual([]);
  }
  // Refused before any hook ran: by the router (a path that is not UTF-8, a name too long) or by
  // Node's HTTP parser (431 for headers too large). Nothing was read.
  if (answer.status >= 400 && f.byRouter) return;
  if (hostKind === 'foreign') {
    expect(refusal, what).toBe('TW_MISDIRECTED');
  } else if (hostKind === 'unknown') {
    return;
  } else if (originKind === 'foreign') {
    expect(refusal, what).toBe('TW_FORBIDDEN_ORIGIN');
  } else if (originKind === 'allowed' || originKind === 'absent') {
    expect(refusal, what).not.toBe('TW_FORBIDDEN_ORIGIN');
    expect(refusal, what).not.toBe('TW_MISDIRECTED');
  }
  if (originKind === 'allowed' && answer.headers && hostKind !== 'foreign') {
    // The page's own origin needs no CORS; any other allowed one gets it.
    const own = new URL(origin!).host === (host ?? sent.defaultHost).toLowerCase();
    expect(answer.headers['access-control-allow-origin'], what).toBe(own ? undefined : origin);
  }
}

// ---- the event loop ---------------------------------------------------------------------------

const loopMaxima: Array<[string, number]> = [];

/** proc(5)'s line for this process's main thread, the one that runs the event loop. */
const MAIN_THREAD_STAT = `/proc/self/task/${process.pid}/stat`;
const HAS_THREAD_STAT = existsSync(MAIN_THREAD_STAT);

/**
 * CPU time the event loop's thread has used, in ms: utime and stime of proc(5), in clock
 * ticks of 10 ms. Where there is no /proc, the whole process's (other threads counted too).
 */
function loopThreadCpuMs(): number {
  if (!HAS_THREAD_STAT) {
    const usage = process.cpuUsage();
    return (usage.user + usage.system) / 1000;
  }
  const stat = readFileSync(MAIN_THREAD_STAT, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/**
 * The most CPU time the event loop's thread spent between two of its turns (sampled every
 * 10 ms). A handler that holds the loop spends the hold in CPU; a machine too busy to run this
 * process lengthens the gap between turns, which monitorEventLoopDelay reports, but not this.
 */
function watchLoopHolds(): { stop(): number } {
  let last = loopThreadCpuMs();
  let max = 0;
  const timer = setInterval(() => {
    const now = loopThreadCpuMs();
    max = Math.max(max, now - last);
    last = now;
  }, 10);
  return {
    stop: () => {
      clearInterval(timer);
      return max;
    },
  };
}

/** Runs `fn` with the event loop watched; what held it longest must stay under the bound. */
async function measuringLoop(
  name: string,
  fn: () => Promise<void>,
  describe: () => string,
): Promise<void> {
  const histogram = monitorEventLoopDelay({ resolution: 10 });
  histogram.enable();
  const holds = watchLoopHolds();
  const started = performance.now();
  let holdMs = 0;
  try {
    await fn();
    // One more sample, so that a last stretch without a turn of the loop is counted too.
    await new Promise((resolve) => setTimeout(resolve, 20));
  } finally {
    histogram.disable();
    holdMs = holds.stop();
  }
  const maxMs = histogram.max / 1e6;
  loopMaxima.push([name, maxMs]);
  console.log(
    `[fuzz] ${name}: ${((performance.now() - started) / 1000).toFixed(1)} s; answers ${describe()}; event-loop delay max ` +
      `${maxMs.toFixed(1)} ms (p99 ${(histogram.percentile(99) / 1e6).toFixed(1)} ms; budget ${LOOP_DELAY_BUDGET_MS} ms); ` +
      `longest hold ${holdMs.toFixed(1)} ms of CPU (bound ${LOOP_HOLD_BOUND_MS} ms)`,
  );
  expect(holdMs, `CPU between two turns of the event loop during ${name}`).toBeLessThan(
    LOOP_HOLD_BOUND_MS,
  );
}

/** A property over a fresh seeded server, with the event loop watched throughout. */
function fuzzTest(
  name: string,
  body: (f: Fuzzed) => Promise<void>,
  overrides: PartialSettings = {},
): void {
  test(
    name,
    async () => {
      const f = await Fuzzed.create(overrides);
      try {
        await measuringLoop(
          name,
          () => body(f),
          () => f.describeTally(),
        );
        expect(await f.audit(), 'the final audit of every stream').toEqual([]);
      } finally {
        await f.close();
      }
    },
    TEST_TIMEOUT_MS,
  );
}

afterAll(() => {
  if (loopMaxima.length === 0) return;
  const [name, max] = loopMaxima.reduce((a, b) => (b[1] > a[1] ? b : a));
  console.log(`[fuzz] seed ${SEED}: largest event-loop delay ${max.toFixed(1)} ms, in "${name}"`);
});

// ---- the properties ----------------------------------------------------------------------------

describe('fuzzing every route family', () => {
  fuzzTest(
    'any body to an append route is a 2xx or a 4xx with the error body, and leaves every stream gapless',
    async (f) => {
      await fc.assert(
        fc.asyncProperty(fc.oneof(logRequest, eventsRequest), async (req) => {
          const { res } = await exchange(f, req);
          if (res.statusCode !== 200) return;
          if (req.url.endsWith('/logs')) checkLogAnswer(f, req, res);
          else checkEventsAnswer(f, req, res);
        }),
        fuzzOptions(),
      );
    },
  );

  fuzzTest(
    'a producer id sent again with the same content is acknowledged as a duplicate, and with other content is 409 TW_ID_CONFLICT storing nothing',
    async (f) => {
      let counter = 0;
      const label = fc.stringMatching(/^[A-Za-z0-9._~-]{1,12}$/);
      const data = jsonValue.filter((d) => Buffer.byteLength(d, 'utf8') <= 900);
      const event = fc.record({
        kind: validKind,
        data,
        step: optional(label),
        correlationId: optional(label),
        idSuffix: label,
      });
      await fc.assert(
        fc.asyncProperty(
          fc.record({
            target: fc.constantFrom(
              '/api/v1/pipelines/fuzz.seeded/runs/r1',
              '/api/v1/pipelines/fuzz.ids/runs/new',
              '/api/v1/topics/builds',
              '/api/v1/topics/ids',
            ),
            event,
            other: event,
            change: fc.constantFrom('data', 'kind', 'step', 'correlationId'),
            logText: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 40 }),
          }),
          async ({ target, event: e, other, change, logText }) => {
            const ids = [1, 2, 3, 4].map((n) => `id-${(counter += 1)}-${n}-${e.idSuffix}`);
            const eventText = (id: string, ev: typeof e) =>
              object([
                ['"kind"', JSON.stringify(ev.kind)],
                ['"data"', ev.data],
                ['"step"', ev.step === undefined ? undefined : JSON.stringify(ev.step)],
                [
                  '"correlationId"',
                  ev.correlationId === undefined ? undefined : JSON.stringify(ev.correlationId),
                ],
                ['"id"', JSON.stringify(id)],
              ]);
            const changed: typeof e = {
              ...e,
              ...(change === 'data' ? { data: `[${e.data}]` } : {}),
              ...(change === 'kind' ? { kind: e.kind.length < 64 ? `${e.kind}x` : 'other' } : {}),
              ...(change === 'step' ? { step: `${e.step ?? 's'}-2` } : {}),
              ...(change === 'correlationId'
                ? { correlationId: `${e.correlationId ?? 'c'}-2` }
                : {}),
            };
            const post = async (items: string[]) => {
              const req = request({
                method: 'POST',
                url: `${target}/events`,
                headers: { 'content-type': 'application/json' },
                payload: Buffer.from(`{"events":[${items.join(',')}]}`, 'utf8'),
                dialect: 'native',
              });
              const { res, code } = await exchange(f, req);
              return {
                req,
                res,
                code,
                answer:
                  res.statusCode === 200
                    ? (res.json() as { seqs: number[]; duplicates: number })
                    : undefined,
              };
            };
            const first = await post([eventText(ids[0]!, e)]);
            expect(first.res.statusCode, describeReq(first.req)).toBe(200);
            expect(first.answer!.duplicates).toBe(0);
            const seq = first.answer!.seqs[0]!;

            // The same bytes again: acknowledged with the original seq, nothing stored.
            const again = await post([eventText(ids[0]!, e), eventText(ids[0]!, e)]);
            expect(again.res.statusCode, describeReq(again.req)).toBe(200);
            expect(again.answer).toMatchObject({ duplicates: 2, seqs: [seq, seq] });
            expect(written(f), describeReq(again.req)).toEqual([]);

            // Other content under the same id: a conflict, and the whole batch is refused.
            const conflict = await post([eventText(ids[1]!, other), eventText(ids[0]!, changed)]);
            expect([conflict.res.statusCode, conflict.code], describeReq(conflict.req)).toEqual([
              409,
              'TW_ID_CONFLICT',
            ]);
            const inBatch = await post([eventText(ids[2]!, e), eventText(ids[2]!, changed)]);
            expect([inBatch.res.statusCode, inBatch.code], describeReq(inBatch.req)).toEqual([
              409,
              'TW_ID_CONFLICT',
            ]);

            // Twins within one batch are one event.
            const twins = await post([eventText(ids[3]!, e), eventText(ids[3]!, e)]);
            expect(twins.res.statusCode, describeReq(twins.req)).toBe(200);
            expect(twins.answer!.duplicates).toBe(1);
            expect(twins.answer!.seqs[0]).toBe(twins.answer!.seqs[1]);

            if (!target.includes('/pipelines/')) return;
            const log = async (body: object) => {
              const req = request({
                method: 'POST',
                url: `${target}/logs`,
                headers: { 'content-type': 'application/json' },
                payload: Buffer.from(JSON.stringify(body), 'utf8'),
                dialect: 'native',
              });
              return { req, ...(await exchange(f, req)) };
            };
            const logId = `log-${ids[0]}`;
            const original = await log({ text: logText, id: logId });
            expect(original.res.statusCode, describeReq(original.req)).toBe(200);
            const retry = await log({ text: logText, id: logId });
            expect(retry.res.json(), describeReq(retry.req)).toEqual({
              ...(original.res.json() as object),
              duplicate: true,
            });
            expect(written(f)).toEqual([]);
            const otherText = await log({ text: `${logText}!`, id: logId });
            expect([otherText.res.statusCode, otherText.code], describeReq(otherText.req)).toEqual([
              409,
              'TW_ID_CONFLICT',
            ]);
          },
        ),
        fuzzOptions(Math.max(10, Math.round(RUNS / 3))),
      );
    },
  );

  fuzzTest(
    "any run request (put, cancel, Freight's cancel, read, list) is a 2xx or a 4xx with the error body, and a finished run never runs again",
    async (f) => {
      await fc.assert(
        fc.asyncProperty(
          fc.oneof(
            { weight: 4, arbitrary: putRunRequest },
            { weight: 2, arbitrary: cancelRequest },
            { weight: 1, arbitrary: getRunRequest },
            { weight: 2, arbitrary: listRequest },
            { weight: 2, arbitrary: freightCancelRequest(f) },
          ),
          async (req) => {
            const { res } = await exchange(f, req);
            const what = describeReq(req);
            if (res.statusCode >= 300) return;
            const answer = res.json() as Record<string, unknown>;
            if (req.dialect === 'freight') {
              // Cancel was requested of a deploy that had not ended; it answers the deploy.
              const run = await checkDeploy(f, what, answer);
              expect(run.cancelRequested, what).toBe(true);
              expect(['pending', 'in_progress'], what).toContain(answer['status']);
              return;
            }
            const sent = req.sent;
            if (req.method === 'PUT' && sent?.type === 'putRun' && sent.exact) {
              expect(answer['status'], what).toBe(sent.status);
              const meta =
                sent.metaText === undefined ? undefined : (JSON.parse(sent.metaText) as object);
              // A top-level `__proto__` key is dropped today: the regression test below says so.
              if (meta !== undefined && !Object.hasOwn(meta, '__proto__')) {
                // meta reads back as sent (as JSON.parse reads it: meta is not kept exact).
                const expected = JSON.stringify(meta);
                expect(JSON.stringify(answer['meta']), what).toBe(expected);
                const read = await f.inject(
                  request({ method: 'GET', url: req.url, headers: {}, dialect: 'native' }),
                );
                expect(JSON.stringify((read.json() as { meta: unknown }).meta), what).toBe(
                  expected,
                );
              }
            }
            if (req.url.endsWith('/cancel')) {
              expect(res.statusCode, what).toBe(202);
              expect(answer['cancelRequested'], what).toBe(true);
            }
            if (req.method === 'GET' && !/\/runs\/[^/]+$/.test(req.url.split('?')[0]!)) {
              const list = Object.values(answer).find(Array.isArray) as unknown[];
              const limit = new URL(req.url, 'http://x').searchParams.get('limit');
              expect(list.length, what).toBeLessThanOrEqual(Number(limit || 1000));
              if ('next' in answer) expect(typeof answer['next'], what).toBe('string');
            }
          },
        ),
        fuzzOptions(),
      );
    },
  );

  fuzzTest(
    'any query string to a read route is a 2xx or a 4xx with the error body, and a 200 page is what the store holds',
    async (f) => {
      await fc.assert(
        fc.asyncProperty(readRequest(f), async (req) => {
          const { res } = await exchange(f, req);
          await checkReadAnswer(f, req, res);
        }),
        fuzzOptions(),
      );
    },
  );

  fuzzTest(
    'any name in a path, percent-encoded or mis-encoded, is a 2xx or a 4xx with the error body, and only well-formed names are stored',
    async (f) => {
      const templates: Array<{
        method: Method;
        url: (p: string, r: string, t: string) => string;
        body?: (r: string) => { type: string; text: string };
        dialect: Dialect;
      }> = [
        {
          method: 'PUT',
          url: (p, r) => `/api/v1/pipelines/${p}/runs/${r}`,
          body: () => ({ type: 'application/json', text: '{"status":"running"}' }),
          dialect: 'native',
        },
        { method: 'GET', url: (p, r) => `/api/v1/pipelines/${p}/runs/${r}`, dialect: 'native' },
        {
          method: 'POST',
          url: (p, r) => `/api/v1/pipelines/${p}/runs/${r}/cancel`,
          dialect: 'native',
        },
        {
          method: 'POST',
          url: (p, r) => `/api/v1/pipelines/${p}/runs/${r}/logs`,
          body: () => ({ type: 'text/plain', text: 'x\n' }),
          dialect: 'native',
        },
        {
          method: 'POST',
          url: (p, r) => `/api/v1/pipelines/${p}/runs/${r}/events`,
          body: () => ({ type: 'application/json', text: '{"events":[{"kind":"k","data":1}]}' }),
          dialect: 'native',
        },
        {
          method: 'GET',
          url: (p, r) => `/api/v1/pipelines/${p}/runs/${r}/entries`,
          dialect: 'native',
        },
        { method: 'GET', url: (p, r) => `/api/v1/pipelines/${p}/runs/${r}/log`, dialect: 'native' },
        {
          method: 'GET',
          url: (p, r) => `/api/v1/pipelines/${p}/runs/${r}/log.txt`,
          dialect: 'native',
        },
        { method: 'GET', url: (p) => `/api/v1/pipelines/${p}/runs`, dialect: 'native' },
        {
          method: 'POST',
          url: (_p, _r, t) => `/api/v1/topics/${t}/events`,
          body: () => ({ type: 'application/json', text: '{"events":[{"kind":"k"}]}' }),
          dialect: 'native',
        },
        { method: 'GET', url: (_p, _r, t) => `/api/v1/topics/${t}/entries`, dialect: 'native' },
        {
          method: 'POST',
          url: (_p, r) => `/compat/zenml/api/v1/runs/${r}/events`,
          body: (r) => ({
            type: 'application/json',
            text: `{"events":[{"pipeline_run_id":${JSON.stringify(decodedName(r) ?? r)},"payload":{}}]}`,
          }),
          dialect: 'zenml',
        },
        {
          method: 'GET',
          url: (_p, r) => `/compat/freight/api/0/tasks/${r}/log/`,
          dialect: 'freight',
        },
        {
          method: 'GET',
          url: (_p, r) => `/compat/freight/api/0/deploys/${r}/log`,
          dialect: 'freight',
        },
        {
          method: 'GET',
          url: (_p, r) => `/compat/freight/api/0/deploys/${r}/`,
          dialect: 'freight',
        },
        {
          method: 'GET',
          url: (_p, r) => `/compat/freight/api/0/tasks/fuzz/seeded/${r}/log`,
          dialect: 'freight',
        },
        {
          method: 'GET',
          url: (p) => `/compat/openmetadata/api/v1/services/ingestionPipelines/logs/${p}/last`,
          dialect: 'openmetadata',
        },
        {
          method: 'GET',
          url: (p) =>
            `/compat/openmetadata/api/v1/services/ingestionPipelines/logs/${p}/last/download`,
          dialect: 'openmetadata',
        },
        { method: 'DELETE', url: (p, r) => `/api/v1/pipelines/${p}/runs/${r}`, dialect: 'native' },
        { method: 'PATCH', url: (_p, _r, t) => `/api/v1/topics/${t}/events`, dialect: 'native' },
      ];
      await fc.assert(
        fc.asyncProperty(
          fc.constantFrom(
            ...templates.map((template) =>
              Object.assign(template, {
                [fc.toStringMethod]: () =>
                  `${template.method} ${template.url('{fqn}', '{runId}', '{topic}')}`,
              }),
            ),
          ),
          segment(FQNS),
          segment([...RUN_IDS, f.names.runUuid]),
          segment(TOPICS),
          async (template, p, r, t) => {
            const body = template.body?.(r);
            const req = request({
              method: template.method,
              url: template.url(p, r, t),
              headers: body ? { 'content-type': body.type } : {},
              payload: body ? Buffer.from(body.text, 'utf8') : undefined,
              dialect: template.dialect,
            });
            const { res } = await exchange(f, req);
            const what = describeReq(req);
            // A write to a run named by its path lands on that run, its name in NFC.
            if (
              res.statusCode < 300 &&
              template.dialect === 'native' &&
              template.method !== 'GET' &&
              req.url.startsWith('/api/v1/pipelines/')
            ) {
              const streams = written(f);
              const [fqn, runId] = [decodedName(p), decodedName(r)];
              if (
                streams.length > 0 &&
                fqn !== undefined &&
                runId !== undefined &&
                runId !== 'latest'
              ) {
                expect(
                  streams.map(([id]) => id),
                  what,
                ).toEqual([streamId(runKey(fqn, runId))]);
              }
            }
          },
        ),
        fuzzOptions(),
      );
    },
  );

  fuzzTest(
    'a foreign Origin is 403 TW_FORBIDDEN_ORIGIN and a foreign Host 421 TW_MISDIRECTED, on every route, and neither stores anything',
    async (f) => {
      const anyRequest = fc.oneof(
        logRequest,
        eventsRequest,
        putRunRequest,
        cancelRequest,
        listRequest,
        readRequest(f),
        zenmlPostRequest(f),
      );
      await fc.assert(
        fc.asyncProperty(
          anyRequest,
          hostHeader,
          originHeader,
          async (base, [hostKind, host], [originKind, origin]) => {
            const req = request({
              ...base,
              headers: {
                ...base.headers,
                ...(host === undefined ? {} : { host }),
                ...(origin === undefined ? {} : { origin }),
              },
            });
            const { res, code } = await exchange(f, req);
            // light-my-request sends Host: localhost:80 when none is given.
            checkOriginPolicy(f, req, answerOf(res), code, {
              host: [hostKind, host],
              origin: [originKind, origin],
              defaultHost: 'localhost:80',
            });
          },
        ),
        fuzzOptions(),
      );
    },
  );

  fuzzTest(
    'any ZenML batch is a 2xx or a 4xx with detail and the error body, and what it acknowledges is stored as sent',
    async (f) => {
      await fc.assert(
        fc.asyncProperty(zenmlPostRequest(f), async (req) => {
          const { res } = await exchange(f, req);
          if (res.statusCode === 200) checkZenmlAnswer(f, req, res);
        }),
        fuzzOptions(),
      );
    },
  );

  fuzzTest(
    'a body that arrives in any pieces over a socket is answered and stored exactly as the same body sent whole',
    async (f) => {
      const base = await f.t.listen();
      let n = 0;
      await fc.assert(
        fc.asyncProperty(
          fc.oneof(logRequest, eventsRequest, zenmlBatch(fc.constant('SPLIT_RUN'))),
          fc.array(fc.nat(), { minLength: 1, maxLength: 12 }),
          async (withLength, cuts) => {
            n += 1;
            // A chunked body has no Content-Length: neither copy gets the one generated.
            const template = request({
              ...withLength,
              headers: Object.fromEntries(
                Object.entries(withLength.headers).filter(([name]) => name !== 'content-length'),
              ),
            });
            // The same body to two fresh streams: whole through inject, in pieces through a socket.
            const to = (which: string): Req => {
              const name = `split-${n}-${which}`;
              const url = template.url.startsWith('/compat/zenml/')
                ? `/compat/zenml/api/v1/runs/${name}/events`
                : template.url.endsWith('/logs')
                  ? `/api/v1/pipelines/fuzz.split/runs/${name}/logs`
                  : `/api/v1/topics/${name}/events`;
              // A ZenML body names its run: the placeholder's name becomes this one, byte for byte.
              const payload =
                template.url.startsWith('/compat/zenml/') && template.payload
                  ? replaceBytes(template.payload, '"SPLIT_RUN"', JSON.stringify(name))
                  : template.payload;
              return request({ ...template, url, payload });
            };
            const whole = to('whole');
            const parts = to('parts');
            const { res } = await exchange(f, whole);
            const wholeKeys = [...f.delta.keys()];
            f.route = undefined;
            f.byRouter = true;
            const answer = await sendInPieces(base, parts, cuts);
            const code = checkAnswer(parts, answer, f.route);
            f.count(answer.status, code);
            await f.check(describeReq(parts), { mayWrite: answer.status < 400 });
            const what = `${describeReq(parts)} in pieces at ${JSON.stringify(cuts)}: ${answer.status} ${answer.body.slice(0, 200)}, whole: ${res.statusCode} ${res.body.slice(0, 200)}`;
            expect(answer.status < 400, what).toBe(res.statusCode < 400);
            if (res.statusCode >= 400) return;
            expect(answer.status, what).toBe(res.statusCode);
            const partsKeys = [...f.delta.keys()];
            expect(partsKeys.length, what).toBe(wholeKeys.length);
            const contents = async (ids: string[]) => {
              const out: string[][] = [];
              for (const id of ids.filter((i) => i.includes('split-'))) {
                out.push((await readAll(f.t, keyOfId(id))).map(content));
              }
              return out;
            };
            expect(await contents(partsKeys), what).toEqual(await contents(wholeKeys));
          },
        ),
        fuzzOptions(STREAM_RUNS),
      );
    },
  );

  fuzzTest(
    'a live viewer gets every entry exactly once and in order, as stored, while appends arrive concurrently, then end',
    async (f) => {
      const base = await f.t.listen();
      let n = 0;
      const CONTROL = new Set(['cursor', 'gap', 'end', 'error', 'connected']);
      const entryFrames = (events: readonly SseEvent[]) =>
        events.filter((e) => e.id !== undefined && !CONTROL.has(e.event));
      await fc.assert(
        fc.asyncProperty(
          // Groups of appends: the requests of a group are sent at once, groups one after another.
          fc.array(fc.array(fc.oneof(logRequest, eventsRequest), { minLength: 1, maxLength: 4 }), {
            minLength: 1,
            maxLength: 4,
          }),
          fc.nat(),
          validKind,
          async (groups, joinAt, kind) => {
            n += 1;
            const runId = `live-${n}`;
            const key = runKey('fuzz.live', runId);
            const path = `/api/v1/pipelines/fuzz.live/runs/${runId}`;
            const readers: SseReader[] = [];
            const open = async (url: string) => {
              const reader = await openSse(`${base}${url}`);
              readers.push(reader);
              expect(reader.status, url).toBe(200);
              return reader;
            };
            try {
              const put = await f.inject(
                request({
                  method: 'PUT',
                  url: path,
                  headers: { 'content-type': 'application/json' },
                  payload: Buffer.from('{"status":"running"}'),
                  dialect: 'native',
                }),
              );
              expect(put.statusCode, put.body).toBe(200);
              const uuid = (put.json() as { id: string }).id;
              const fromStart = await open(`${path}/stream`);
              const zenml = await open(`/compat/zenml/api/v1/runs/${uuid}/events/stream`);
              const filtered = await open(`${path}/stream?kinds=${kind},log`);
              let late: { reader: SseReader; after: number } | undefined;
              for (const [index, group] of groups.entries()) {
                await Promise.all(
                  group.map(async (template) => {
                    const req = request({
                      ...template,
                      url: `${path}/${template.url.endsWith('/logs') ? 'logs' : 'events'}`,
                    });
                    const res = await f.inject(req);
                    f.count(res.statusCode, checkAnswer(req, answerOf(res), f.route));
                  }),
                );
                await f.check(`group ${index} of appends to ${runId}`, { mayWrite: true });
                if (index === 0) {
                  // A viewer that joins with a cursor, in the middle of it all.
                  const after = joinAt % ((await f.t.store.bounds(key)).lastSeq + 1);
                  late = { reader: await open(`${path}/stream?after=${after}`), after };
                }
              }
              const done = await f.inject(
                request({
                  method: 'PUT',
                  url: path,
                  headers: { 'content-type': 'application/json' },
                  payload: Buffer.from('{"status":"success"}'),
                  dialect: 'native',
                }),
              );
              expect(done.statusCode, done.body).toBe(200);
              await f.check(`the end of ${runId}`, { mayWrite: true });
              const stored = await readAll(f.t, key);
              const lastSeq = stored[stored.length - 1]!.seq;
              const ended = (events: SseEvent[]) => events.some((e) => e.event === 'end');
              for (const reader of readers) await reader.waitFor(ended, ANSWER_TIMEOUT_MS);

              const what = `run ${runId}: ${stored.length} entries`;
              // A native frame's id is `<seq>-<epoch>`, the epoch the store's.
              const { epoch } = await f.t.store.bounds(key);
              const nativeIds = (entries: readonly Entry[]) =>
                entries.map((e) => `${e.seq}-${epoch}`);
              // From the start: every entry, once, in order, each frame the entry as stored.
              const frames = entryFrames(fromStart.events);
              expect(
                frames.map((e) => e.id),
                what,
              ).toEqual(nativeIds(stored));
              frames.forEach((frame, i) => {
                expect(frame.event, what).toBe(stored[i]!.kind);
                // SSE carries a line break in data as LF (the producer's JSON may hold CR LF).
                expect(frame.data, what).toBe(entryJson(stored[i]!).replace(/\r\n?/g, '\n'));
              });
              const end = JSON.parse(fromStart.events.find((e) => e.event === 'end')!.data) as {
                reason: string;
                lastSeq: number;
              };
              expect(end, what).toMatchObject({ reason: 'runFinished', lastSeq });
              // ZenML's viewer: the same entries, as StreamEvents.
              expect(
                entryFrames(zenml.events).map((e) => Number(e.id)),
                what,
              ).toEqual(stored.map((e) => e.seq));
              // Filtered: only those kinds, all of them.
              expect(
                entryFrames(filtered.events).map((e) => e.id),
                what,
              ).toEqual(nativeIds(stored.filter((e) => e.kind === kind || e.kind === 'log')));
              // Joined late: exactly what followed its cursor.
              expect(
                entryFrames(late!.reader.events).map((e) => e.id),
                what,
              ).toEqual(nativeIds(stored.filter((e) => e.seq > late!.after)));
            } finally {
              for (const reader of readers) reader.close();
            }
          },
        ),
        fuzzOptions(Math.max(10, Math.round(RUNS / 5))),
      );
      const deadline = Date.now() + 5000;
      while (f.t.hub.activeConnections > 0 && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(f.t.hub.activeConnections, 'viewers still open after every client left').toBe(0);
    },
    // Quick ends: a finished run ends its streams as soon as it is quiet.
    { pollSeconds: 0.05, runStatePollSeconds: 0.05, finishGraceSeconds: 0 },
  );

  fuzzTest(
    'any stream, native or dialect, with any Last-Event-ID, answers 200 with well-formed SSE or a 4xx with the error body, stores nothing and leaks no viewer',
    async (f) => {
      const base = await f.t.listen();
      await fc.assert(
        fc.asyncProperty(
          streamRequest(f),
          // Mostly without Host and Origin, so that most streams open.
          fc.oneof(
            { weight: 3, arbitrary: fc.constant(ABSENT) },
            { weight: 1, arbitrary: hostHeader },
          ),
          fc.oneof(
            { weight: 3, arbitrary: fc.constant(ABSENT) },
            { weight: 1, arbitrary: originHeader },
          ),
          async (plain, [hostKind, host], [originKind, origin]) => {
            const req = request({
              ...plain,
              headers: {
                ...plain.headers,
                ...(host === undefined ? {} : { host }),
                ...(origin === undefined ? {} : { origin }),
              },
            });
            f.route = undefined;
            f.byRouter = true;
            const answer = await openStream(base, req);
            const code = checkAnswer(req, answer, f.route);
            f.count(answer.status, code);
            if (answer.status === 200) {
              checkSse(req, answer);
              checkUnplaceableStart(req, answer);
            }
            await f.check(describeReq(req), { mayWrite: false });
            checkOriginPolicy(f, req, answer, code, {
              host: [hostKind, host],
              origin: [originKind, origin],
              defaultHost: new URL(base).host,
            });
          },
        ),
        fuzzOptions(STREAM_RUNS),
      );
      // Every viewer let go is released: none is left holding a connection slot.
      const deadline = Date.now() + 5000;
      while (f.t.hub.activeConnections > 0 && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(f.t.hub.activeConnections, 'viewers still open after every client left').toBe(0);
    },
  );
});

// ---- bugs the fuzzer found: each test fails until its bug is fixed -------------------------------

describe('regressions found by fuzzing', () => {
  // src/http/runs.ts validates meta with z.record(z.string(), z.unknown()); zod (4.6.7) skips a
  // `__proto__` key when it builds the record (so that it cannot replace the result's
  // prototype), and the run is stored and answered without it: 200, and a key the producer sent
  // is gone. Nested `__proto__` keys are kept; only the top level loses it.
  test('a meta key named __proto__ is stored as sent, or refused with 400, never silently dropped', async () => {
    const t = await createTestApp(SETTINGS);
    try {
      const meta = '{"__proto__":{"x":1},"b":2}';
      const url = '/api/v1/pipelines/p/runs/r';
      const res = await t.app.inject({
        method: 'PUT',
        url,
        headers: { 'content-type': 'application/json' },
        payload: `{"status":"running","meta":${meta}}`,
      });
      if (res.statusCode !== 200) {
        expect(res.statusCode).toBe(400);
        expect(await t.store.getRun('p', 'r')).toBeUndefined();
        return;
      }
      // JSON.parse keeps `__proto__` as a key of its own, so stringify writes it back.
      expect(JSON.stringify((res.json() as { meta: unknown }).meta)).toBe(meta);
      const read = await t.app.inject({ method: 'GET', url });
      expect(JSON.stringify((read.json() as { meta: unknown }).meta)).toBe(meta);
    } finally {
      await t.close();
    }
  });
});
