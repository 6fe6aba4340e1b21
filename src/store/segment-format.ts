import { crc32 } from 'node:zlib';
import { controlCharacters } from '../model/json-text.js';
import type { EntryRow } from './entry-row.js';
import { buildFilter, filterBitsFor } from './trigram-filter.js';
import { decompress } from './zstd.js';
import type { Compressor } from './zstd.js';

/**
 * The sealed segment file (docs/STORAGE.md, "Sealed segments"). A segment holds consecutive
 * entries of one stream, in blocks of whole entries (~1 MB of text each, so whole lines: a log
 * entry ends where its append did), each compressed with zstd on its own so any block is read
 * alone. After the blocks come their search filters, then a compressed footer that says where
 * each block is and what it holds, then a fixed trailer:
 *
 *   block 0 … block n-1 | filter 0 … filter n-1 | footer (zstd JSON) | trailer (16 bytes)
 *
 * trailer = "TWSEG001" | footer length (u32 LE) | CRC-32 of the footer (u32 LE)
 *
 * A block, decompressed, is its columns as JSON (length-prefixed) followed by the entries'
 * bodies (log text or event data, UTF-8) end to end. Log offsets and line numbers are not
 * stored per entry: they follow from the block's first offset and line and the bodies.
 */

export const SEGMENT_MAGIC = 'TWSEG001';
const TRAILER_BYTES = 16;

/** A search document of the sealed run (search-documents.ts), without its text. */
export interface SealedDocument {
  id: number;
  kind: 'log' | 'event';
  seq: number | null;
  line: number | null;
  offset: number | null;
  lineOffset: number | null;
  column: number | null;
  /** A log document's length in UTF-8 bytes of the log (0 for an event's). */
  bytes: number;
}

export interface BlockInfo {
  firstSeq: number;
  lastSeq: number;
  /** Byte offset in the log of the block's first log text, and its bytes of log text. */
  logOffset: number;
  logBytes: number;
  /** Line feeds in the log before the block, and within it. */
  logLine: number;
  logLines: number;
  /** Entries of log text, and of each other kind. */
  logEntries: number;
  kinds: Record<string, number>;
  /** Entries with a producer id (a lookup by id skips a block with none). */
  ids: number;
  /** Where its compressed bytes are in the segment, their CRC-32, and the size decompressed. */
  at: number;
  length: number;
  crc: number;
  rawLength: number;
  /** Its filter: where in the segment, and its size in bits. */
  filterAt: number;
  filterBits: number;
  /** The search documents that start in it, by id. */
  docs: SealedDocument[];
}

export interface SegmentFooter {
  version: 1;
  firstSeq: number;
  lastSeq: number;
  /** Bytes of entry bodies, as the hot store held them. */
  rawBytes: number;
  blocks: BlockInfo[];
}

/** A segment that fails its checks: never answered as text. */
export class SegmentCorrupt extends Error {}

interface BlockColumns {
  /** Times: the first absolute, then differences. */
  t: number[];
  k: number[];
  kd: string[];
  /** Whether the entry is log text (1) or not (0). */
  g: number[];
  /** Body lengths in UTF-8 bytes. */
  l: number[];
  /** Steps (0: none, else 1 + the index in sd), and the optional text columns. */
  s?: number[];
  sd?: string[];
  c?: Array<string | null>;
  p?: Array<string | null>;
  x?: Array<string | null>;
  /**
   * Line feeds in each row's body (0 for a row that is not log text), and the control
   * characters the log texts hold (controlCharacters). Blocks sealed before these existed
   * lack them; a reader then counts and looks for itself.
   */
  n?: number[];
  e?: string;
}

export interface SegmentOptions {
  /** Bytes of entry bodies per block before it is cut. */
  blockBytes: number;
  level: number;
}

export const DEFAULT_SEGMENT_OPTIONS: SegmentOptions = { blockBytes: 1024 * 1024, level: 9 };

function optionalColumn(rows: readonly EntryRow[], pick: (row: EntryRow) => string | null) {
  const values = rows.map(pick);
  return values.every((value) => value === null) ? undefined : values;
}

function dictionary(values: readonly string[]): { dict: string[]; index: number[] } {
  const dict: string[] = [];
  const seen = new Map<string, number>();
  const index = values.map((value) => {
    let at = seen.get(value);
    if (at === undefined) {
      at = dict.length;
      dict.push(value);
      seen.set(value, at);
    }
    return at;
  });
  return { dict, index };
}

function encodeColumns(rows: readonly EntryRow[]): {
  raw: Buffer;
  bodies: Buffer[];
  feeds: number[];
} {
  const bodies = rows.map((row) => Buffer.from(row.body, 'utf8'));
  const kinds = dictionary(rows.map((row) => row.kind));
  const isLog = (row: EntryRow) => row.log_offset !== null;
  const feeds = bodies.map((body, i) =>
    isLog(rows[i]!) ? countFeedBytes(body, 0, body.length) : 0,
  );
  const controls = new Set(
    rows.flatMap((row) => (isLog(row) ? [...controlCharacters(row.body)] : [])),
  );
  const columns: BlockColumns = {
    t: rows.map((row, i) => (i === 0 ? row.time : row.time - rows[i - 1]!.time)),
    k: kinds.index,
    kd: kinds.dict,
    g: rows.map((row) => (isLog(row) ? 1 : 0)),
    l: bodies.map((body) => body.length),
    n: feeds,
    e: [...controls].sort().join(''),
  };
  if (rows.some((row) => row.step !== null)) {
    const steps = dictionary(rows.flatMap((row) => (row.step === null ? [] : [row.step])));
    let next = 0;
    columns.s = rows.map((row) => (row.step === null ? 0 : 1 + steps.index[next++]!));
    columns.sd = steps.dict;
  }
  const c = optionalColumn(rows, (row) => row.correlation_id);
  const p = optionalColumn(rows, (row) => row.producer_id);
  const x = optionalColumn(rows, (row) => row.extra);
  if (c) columns.c = c;
  if (p) columns.p = p;
  if (x) columns.x = x;
  const json = Buffer.from(JSON.stringify(columns), 'utf8');
  const prefix = Buffer.alloc(4);
  prefix.writeUInt32LE(json.length);
  return { raw: Buffer.concat([prefix, json, ...bodies]), bodies, feeds };
}

export interface SegmentInput {
  /** Consecutive entries of one stream, in seq order. */
  rows: readonly EntryRow[];
  /** Line feeds in the log before the first row. */
  logLine: number;
  /** The log offset the segment's text starts at (the first log row's, or where it would be). */
  logOffset: number;
  /** The run's search documents that start within these rows. */
  docs: readonly SealedDocument[];
  /** The text of a document (a log document may run on past the segment's end). */
  textOf(doc: SealedDocument): string;
}

/** Cuts rows into blocks of about `blockBytes` of bodies, never inside an entry. */
function cutBlocks(rows: readonly EntryRow[], blockBytes: number): EntryRow[][] {
  const blocks: EntryRow[][] = [];
  let current: EntryRow[] = [];
  let bytes = 0;
  for (const row of rows) {
    current.push(row);
    // Length in UTF-16 units: close enough to cut by, and free.
    bytes += row.body.length;
    if (bytes >= blockBytes) {
      blocks.push(current);
      current = [];
      bytes = 0;
    }
  }
  if (current.length > 0) blocks.push(current);
  return blocks;
}

/** Which block a document starts in: by its byte offset (log) or its seq (event). */
function blockOfDocument(doc: SealedDocument, infos: readonly BlockInfo[]): number {
  let lo = 0;
  let hi = infos.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    const info = infos[mid]!;
    const starts = doc.kind === 'log' ? doc.offset! >= info.logOffset : doc.seq! >= info.firstSeq;
    if (starts) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/** Builds a segment file. */
export async function buildSegment(
  input: SegmentInput,
  options: SegmentOptions,
  compressor: Compressor,
): Promise<{ file: Buffer; footer: SegmentFooter }> {
  const parts: Buffer[] = [];
  const infos: BlockInfo[] = [];
  let at = 0;
  let logOffset = input.logOffset;
  let logLine = input.logLine;
  let rawBytes = 0;
  const blocks = cutBlocks(input.rows, options.blockBytes);
  for (const rows of blocks) {
    const { raw, bodies, feeds } = encodeColumns(rows);
    const compressed = await compressor.compress(raw, options.level);
    const kinds: Record<string, number> = {};
    let logBytes = 0;
    let logLines = 0;
    let logEntries = 0;
    rows.forEach((row, i) => {
      rawBytes += bodies[i]!.length;
      if (row.log_offset === null) {
        kinds[row.kind] = (kinds[row.kind] ?? 0) + 1;
      } else {
        if (row.log_offset !== logOffset + logBytes) {
          throw new Error(`seal: log offsets are not contiguous at seq ${row.seq}`);
        }
        logEntries += 1;
        logBytes += bodies[i]!.length;
        logLines += feeds[i]!;
      }
    });
    infos.push({
      firstSeq: rows[0]!.seq,
      lastSeq: rows.at(-1)!.seq,
      logOffset,
      logBytes,
      logLine,
      logLines,
      logEntries,
      kinds,
      ids: rows.filter((row) => row.producer_id !== null).length,
      at,
      length: compressed.length,
      crc: crc32(compressed),
      rawLength: raw.length,
      filterAt: 0,
      filterBits: filterBitsFor(compressed.length),
      docs: [],
    });
    parts.push(compressed);
    at += compressed.length;
    logOffset += logBytes;
    logLine += logLines;
  }
  for (const doc of input.docs) infos[blockOfDocument(doc, infos)]?.docs.push(doc);
  for (const info of infos) {
    info.docs.sort((a, b) => a.id - b.id);
    const filter = buildFilter(
      info.docs.map((doc) => input.textOf(doc)),
      info.filterBits,
    );
    info.filterAt = at;
    parts.push(Buffer.from(filter.buffer, filter.byteOffset, filter.byteLength));
    at += filter.byteLength;
  }
  const footer: SegmentFooter = {
    version: 1,
    firstSeq: infos[0]?.firstSeq ?? 0,
    lastSeq: infos.at(-1)?.lastSeq ?? 0,
    rawBytes,
    blocks: infos,
  };
  const compressedFooter = await compressor.compress(Buffer.from(JSON.stringify(footer)), 19);
  const trailer = Buffer.alloc(TRAILER_BYTES);
  trailer.write(SEGMENT_MAGIC, 0, 'latin1');
  trailer.writeUInt32LE(compressedFooter.length, 8);
  trailer.writeUInt32LE(crc32(compressedFooter), 12);
  parts.push(compressedFooter, trailer);
  const file = Buffer.concat(parts);
  return { file, footer };
}

/** Reads the trailer's footer location: the bytes to read from the end of the file. */
export function parseTrailer(trailer: Uint8Array): { footerLength: number; crc: number } {
  const bytes = Buffer.from(trailer.buffer, trailer.byteOffset, trailer.byteLength);
  if (bytes.length !== TRAILER_BYTES || bytes.toString('latin1', 0, 8) !== SEGMENT_MAGIC) {
    throw new SegmentCorrupt('not a sealed segment (its trailer is missing or wrong)');
  }
  return { footerLength: bytes.readUInt32LE(8), crc: bytes.readUInt32LE(12) };
}

export const SEGMENT_TRAILER_BYTES = TRAILER_BYTES;

export function parseFooter(compressed: Uint8Array, crc: number): SegmentFooter {
  if (crc32(compressed) !== crc) throw new SegmentCorrupt('its footer fails its checksum');
  let footer: SegmentFooter;
  try {
    footer = JSON.parse(decompress(compressed).toString('utf8')) as SegmentFooter;
  } catch {
    throw new SegmentCorrupt('its footer does not decompress');
  }
  if (footer.version !== 1) throw new SegmentCorrupt(`unknown version ${String(footer.version)}`);
  return footer;
}

/**
 * Each log row's text as JSON would quote it (quoteText), end to end in UTF-8: `ends[i]` is
 * where row i's ends (a row that is not log text has none). A catch-up copies these bytes into
 * its frames instead of escaping megabytes of text on the event loop (block-decoder.ts).
 */
export interface QuotedTexts {
  bytes: Buffer;
  ends: Uint32Array;
}

/**
 * A block read back and checked: its decompressed bytes, from which each row is made as the
 * hot store held it when asked for. The rows' strings are the caller's, not the block's: a
 * cached block is then bytes outside the JS heap, and a viewer's page of strings dies young
 * with the page. Kept as strings, tens of megabytes of cached blocks were promoted and swept
 * again and again, a fifth of a sealed catch-up's time (docs/BENCHMARKS.md, "Catch-up").
 */
export class DecodedBlock {
  constructor(
    readonly info: BlockInfo,
    private readonly raw: Buffer,
    private readonly columns: BlockColumns,
    /** Where each row's body starts in `raw`, and where the last one ends. */
    private readonly starts: readonly number[],
    /** Line feeds in the log before each row (meaningful for log rows). */
    readonly lines: readonly number[],
    private readonly quoted?: QuotedTexts,
  ) {}

  get count(): number {
    return this.starts.length - 1;
  }

  /** How many bytes it holds outside the JS heap, and about what its columns take on it. */
  get weight(): number {
    return this.raw.length + (this.quoted?.bytes.length ?? 0) + 64 * this.count;
  }

  /** Row `i`'s log text as a JSON string literal in UTF-8, if the block was decoded with them. */
  quotedText(i: number): Buffer | undefined {
    const quoted = this.quoted;
    if (!quoted || i < 0 || i >= this.count || this.columns.g[i] !== 1) return undefined;
    return quoted.bytes.subarray(i === 0 ? 0 : quoted.ends[i - 1], quoted.ends[i]);
  }

  /** Row `i` (0 is the block's first seq), or undefined past its last. */
  row(i: number): EntryRow | undefined {
    if (i < 0 || i >= this.count) return undefined;
    const columns = this.columns;
    const step = columns.s?.[i] ?? 0;
    const isLog = columns.g[i] === 1;
    return {
      seq: this.info.firstSeq + i,
      time: this.times[i]!,
      kind: columns.kd[columns.k[i]!]!,
      step: step === 0 ? null : columns.sd![step - 1]!,
      correlation_id: columns.c?.[i] ?? null,
      producer_id: columns.p?.[i] ?? null,
      log_offset: isLog ? this.offsets[i]! : null,
      body: this.raw.toString('utf8', this.starts[i], this.starts[i + 1]),
      extra: columns.x?.[i] ?? null,
    };
  }

  /** Its rows from row `from` on. */
  rows(from = 0): EntryRow[] {
    const out: EntryRow[] = [];
    for (let i = Math.max(from, 0); i < this.count; i += 1) out.push(this.row(i)!);
    return out;
  }

  /** Its log rows' text end to end, as UTF-8 (one view of the block's bytes per run of them). */
  logBytes(): Buffer {
    const parts: Buffer[] = [];
    for (let i = 0; i < this.count; i += 1) {
      if (this.columns.g[i] !== 1) continue;
      let end = i + 1;
      while (end < this.count && this.columns.g[end] === 1) end += 1;
      parts.push(this.raw.subarray(this.starts[i], this.starts[end]));
      i = end;
    }
    return parts.length === 1 ? parts[0]! : Buffer.concat(parts);
  }

  private get times(): number[] {
    return (this.decodedTimes ??= cumulative(this.columns.t));
  }

  private get offsets(): number[] {
    if (!this.logOffsets) {
      const offsets: number[] = [];
      let offset = this.info.logOffset;
      for (let i = 0; i < this.count; i += 1) {
        offsets.push(offset);
        if (this.columns.g[i] === 1) offset += this.starts[i + 1]! - this.starts[i]!;
      }
      this.logOffsets = offsets;
    }
    return this.logOffsets;
  }

  private decodedTimes: number[] | undefined;
  private logOffsets: number[] | undefined;
}

/** Running sums: the times column holds the first time, then differences. */
function cumulative(deltas: readonly number[]): number[] {
  const out: number[] = [];
  let sum = 0;
  for (let i = 0; i < deltas.length; i += 1) {
    sum = i === 0 ? deltas[0]! : sum + deltas[i]!;
    out.push(sum);
  }
  return out;
}

/** Line feeds in bytes [from, to) of `raw`. */
function countFeedBytes(raw: Buffer, from: number, to: number): number {
  let count = 0;
  for (let i = raw.indexOf(0x0a, from); i !== -1 && i < to; i = raw.indexOf(0x0a, i + 1)) {
    count += 1;
  }
  return count;
}

/** The CRC-32 and length check of a block's compressed bytes against its footer entry. */
export function checkBlock(info: BlockInfo, compressed: Uint8Array): void {
  if (compressed.length !== info.length || crc32(compressed) !== info.crc) {
    throw new SegmentCorrupt(`${blockName(info)} fails its checksum`);
  }
}

function blockName(info: BlockInfo): string {
  return `block of seqs ${info.firstSeq}–${info.lastSeq}`;
}

/** Decodes a block from its compressed bytes, checked against its footer entry. */
export function decodeBlock(info: BlockInfo, compressed: Uint8Array): DecodedBlock {
  checkBlock(info, compressed);
  let raw: Buffer;
  try {
    raw = decompress(compressed);
  } catch {
    throw new SegmentCorrupt(`${blockName(info)} does not decompress`);
  }
  return blockFromRaw(info, raw);
}

/**
 * A block from its decompressed bytes (and, when a worker made them, its log texts quoted as
 * JSON: QuotedTexts), checked to be whole.
 */
export function blockFromRaw(info: BlockInfo, raw: Buffer, quoted?: QuotedTexts): DecodedBlock {
  const whole = blockName(info);
  let columns: BlockColumns;
  let at: number;
  try {
    const jsonLength = raw.readUInt32LE(0);
    at = 4 + jsonLength;
    columns = JSON.parse(raw.toString('utf8', 4, at)) as BlockColumns;
  } catch {
    throw new SegmentCorrupt(`${whole} has no readable columns`);
  }
  const count = columns.t.length;
  const starts: number[] = [];
  const lines: number[] = [];
  let line = info.logLine;
  for (let i = 0; i < count; i += 1) {
    const length = columns.l[i]!;
    starts.push(at);
    lines.push(line);
    if (columns.g[i] === 1) line += columns.n?.[i] ?? countFeedBytes(raw, at, at + length);
    at += length;
  }
  starts.push(at);
  const wholeLines = line - info.logLine === info.logLines;
  if (count !== info.lastSeq - info.firstSeq + 1 || at !== raw.length || !wholeLines) {
    throw new SegmentCorrupt(`${whole} is not whole`);
  }
  if (quoted && quoted.ends.length !== count) {
    throw new SegmentCorrupt(`${whole} was quoted for ${quoted.ends.length} rows`);
  }
  return new DecodedBlock(info, raw, columns, starts, lines, quoted);
}
