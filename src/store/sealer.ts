import { randomBytes } from 'node:crypto';
import type { StreamKey } from '../model/stream-key.js';
import type { RunToSeal, SealCatalog, SealRow, SegmentRecord } from './seal-catalog.js';
import { DOCUMENTS_PER_RUN, documentId } from './search-documents.js';
import type { SealedDocument } from './segment-format.js';
import {
  DEFAULT_SEGMENT_OPTIONS,
  buildSegment,
  decodeBlock,
  parseFooter,
  parseTrailer,
  SEGMENT_TRAILER_BYTES,
} from './segment-format.js';
import type { SegmentStore } from './segment-store.js';
import type { Store } from './store.js';
import { Compressor } from './zstd.js';

/**
 * Seals finished runs (docs/STORAGE.md, "Sealed segments"), a segment at a time:
 *
 * 1. read the run's next hot rows (up to `segmentBytes` of bodies) and its search documents;
 * 2. build the segment (compression on a worker thread) and put it: written, fsynced, renamed;
 * 3. read it back whole and check every block against the rows it was made of;
 * 4. record it in the catalog: the commit point, refused if the run moved on meanwhile;
 * 5. `graceMs` later, remove the hot rows and search documents it replaces, a slice at a time.
 *
 * A crash before 4 leaves a file no record names (swept later) and the hot rows as they were;
 * a crash after 4 leaves rows the catalog already routes past, dropped on the next pass. So
 * nothing is lost and nothing is read twice, whichever step a crash interrupts.
 */
export interface SealerOptions {
  /** Bytes of entry bodies per segment: a long run is sealed in several. */
  segmentBytes: number;
  blockBytes: number;
  /** zstd level. */
  level: number;
  /** How long after a run ends it is sealed (late appends land hot). */
  settleMs: number;
  /** How long after a segment is recorded its hot rows are removed. */
  graceMs: number;
  /** Test hook: called after each step of sealing, where a test makes the process stop. */
  onStep?: ((step: SealStep) => void | Promise<void>) | undefined;
}

export type SealStep = 'read' | 'written' | 'verified' | 'recorded' | 'dropped';

/** Rows read from the hot store at a time (each read is one statement: kept short). */
const ROWS_PER_READ = 2000;

type HotStore = Store & SealCatalog;

export interface PassResult {
  sealed: number;
  dropped: number;
  /** Whether more is waiting now. */
  more: boolean;
}

export class Sealer {
  static readonly defaults: SealerOptions = {
    segmentBytes: 16 * 1024 * 1024,
    blockBytes: DEFAULT_SEGMENT_OPTIONS.blockBytes,
    level: DEFAULT_SEGMENT_OPTIONS.level,
    settleMs: 60_000,
    graceMs: 30_000,
  };

  private readonly compressor = new Compressor();
  /** Segments sealed and hot rows dropped since start, and their bytes (for /metrics). */
  readonly totals = { segments: 0, rawBytes: 0, bytes: 0, dropped: 0 };

  constructor(
    private readonly hot: HotStore,
    private readonly segments: SegmentStore,
    private readonly options: SealerOptions,
    private readonly invalidate: (key: StreamKey) => void,
  ) {}

  /** One pass: drops what has waited its grace, then seals one segment of one run. */
  async pass(now = Date.now()): Promise<PassResult> {
    let dropped = 0;
    for (const record of await this.hot.segmentsToDrop(now - this.options.graceMs, 4)) {
      await this.drop(record);
      dropped += 1;
    }
    const [run] = await this.hot.runsToSeal(1, now - this.options.settleMs);
    const sealed = run ? await this.sealSegment(run) : 0;
    const more =
      (await this.hot.runsToSeal(1, now - this.options.settleMs)).length > 0 ||
      (await this.hot.segmentsToDrop(now - this.options.graceMs, 1)).length > 0;
    return { sealed, dropped, more };
  }

  /** Seals and drops until nothing is waiting (tests; `tailwater seal`). */
  async catchUp(now?: () => number): Promise<void> {
    while ((await this.pass(now?.())).more) await new Promise((r) => setImmediate(r));
  }

  private async drop(record: SegmentRecord): Promise<void> {
    await this.hot.dropHotRows(record);
    this.totals.dropped += 1;
    await this.options.onStep?.('dropped');
  }

  /** Seals the run's next segment; 1 when one was recorded. */
  private async sealSegment(run: RunToSeal): Promise<number> {
    const { rows, lookahead } = await this.readRows(run);
    if (rows.length === 0) return 0;
    const previous = (await this.hot.segmentsOf(run.key)).at(-1);
    const firstLog = [...rows, ...lookahead].find((row) => row.log_offset !== null);
    const bounds = await this.hot.bounds(run.key);
    const logOffset = previous?.logEnd ?? firstLog?.log_offset ?? bounds.logBytes;
    const logLine = previous?.logLinesEnd ?? firstLog?.log_line ?? bounds.logLines;
    let logEnd = logOffset;
    let logLinesEnd = logLine;
    for (const row of rows) {
      if (row.log_offset === null) continue;
      logEnd = row.log_offset + Buffer.byteLength(row.body, 'utf8');
      logLinesEnd = (row.log_line ?? 0) + feeds(row.body);
    }
    const lastSeq = rows.at(-1)!.seq;
    const docs = (await this.hot.documentsToSeal(...runIds(run.position))).filter((doc) =>
      doc.kind === 'log'
        ? doc.offset! >= logOffset && doc.offset! < logEnd
        : doc.seq! >= rows[0]!.seq && doc.seq! <= lastSeq,
    );
    const log = logText([...rows, ...lookahead], logOffset);
    const bySeq = new Map(rows.map((row) => [row.seq, row]));
    const { file, footer } = await buildSegment(
      {
        rows,
        logLine,
        logOffset,
        docs,
        textOf: (doc: SealedDocument) =>
          doc.kind === 'event'
            ? (bySeq.get(doc.seq!)?.body ?? '')
            : log.toString('utf8', doc.offset! - logOffset, doc.offset! - logOffset + doc.bytes),
      },
      { blockBytes: this.options.blockBytes, level: this.options.level },
      this.compressor,
    );
    await this.options.onStep?.('read');
    const name = `${run.streamId}/${rows[0]!.seq}-${lastSeq}-${randomBytes(4).toString('hex')}.tws`;
    await this.segments.put(name, file);
    await this.options.onStep?.('written');
    await this.verify(name, file.length, rows);
    await this.options.onStep?.('verified');
    const recorded = await this.hot.recordSegment({
      streamId: run.streamId,
      position: run.position,
      name,
      firstSeq: rows[0]!.seq,
      lastSeq,
      logOffset,
      logEnd,
      logLinesEnd,
      lastDocumentId: docs.length === 0 ? undefined : Math.max(...docs.map((doc) => doc.id)),
      bytes: file.length,
      rawBytes: footer.rawBytes,
      sealedAt: Date.now(),
    });
    if (!recorded) {
      await this.segments.remove(name);
      return 0;
    }
    this.invalidate(run.key);
    this.totals.segments += 1;
    this.totals.rawBytes += footer.rawBytes;
    this.totals.bytes += file.length;
    await this.options.onStep?.('recorded');
    return 1;
  }

  /**
   * The run's next rows, up to a segment's worth, and after them the rows a document that
   * starts among them runs on into (its text is in the segment's filter), or the first log row
   * when they hold none (where the segment's log begins).
   */
  private async readRows(run: RunToSeal): Promise<{ rows: SealRow[]; lookahead: SealRow[] }> {
    const rows: SealRow[] = [];
    let bytes = 0;
    let after = run.afterSeq;
    const next = async (): Promise<SealRow[]> => {
      if (after >= run.lastSeq) return [];
      const page = (await this.hot.rowsToSeal(run.streamId, after, ROWS_PER_READ)).filter(
        (row) => row.seq <= run.lastSeq,
      );
      after = page.at(-1)?.seq ?? run.lastSeq;
      await new Promise((resolve) => setImmediate(resolve));
      return page;
    };
    let page = await next();
    let rest: SealRow[] = [];
    while (page.length > 0) {
      let cut = page.length;
      for (let i = 0; i < page.length; i += 1) {
        rows.push(page[i]!);
        bytes += page[i]!.body.length;
        if (bytes >= this.options.segmentBytes) {
          cut = i + 1;
          break;
        }
      }
      if (cut < page.length || bytes >= this.options.segmentBytes) {
        rest = page.slice(cut);
        break;
      }
      page = await next();
    }
    // A document is cut at the first line feed past 32 KiB and never runs past 256 KiB
    // (search-documents.ts): reading on to that much more log text covers it.
    const lookahead: SealRow[] = [...rest];
    const needLog = !rows.some((row) => row.log_offset !== null);
    let more = lookaheadBytes(lookahead);
    while (
      (more < 512 * 1024 || (needLog && !lookahead.some((r) => r.log_offset !== null))) &&
      after < run.lastSeq
    ) {
      const extra = await next();
      if (extra.length === 0) break;
      lookahead.push(...extra);
      more = lookaheadBytes(lookahead);
    }
    return { rows, lookahead };
  }

  /** Reads the segment back whole and checks it holds exactly the rows. */
  private async verify(name: string, bytes: number, rows: readonly SealRow[]) {
    const size = await this.segments.size(name);
    if (size !== bytes) throw new Error(`seal: ${name} is ${size} bytes, not ${bytes}`);
    const file = await this.segments.read(name, 0, size);
    const { footerLength, crc } = parseTrailer(file.subarray(size - SEGMENT_TRAILER_BYTES));
    const read = parseFooter(
      file.subarray(size - SEGMENT_TRAILER_BYTES - footerLength, size - SEGMENT_TRAILER_BYTES),
      crc,
    );
    let at = 0;
    for (const info of read.blocks) {
      const block = decodeBlock(info, file.subarray(info.at, info.at + info.length));
      for (const row of block.rows()) {
        const source = rows[at++];
        if (!source || !sameRow(source, row)) {
          throw new Error(`seal: ${name} does not read back as written (seq ${row.seq})`);
        }
      }
    }
    if (at !== rows.length) throw new Error(`seal: ${name} holds ${at} rows, not ${rows.length}`);
  }

  /**
   * Removes segment files no record names (a seal interrupted before its record, or a deleted
   * run's files a crash left), older than `olderThanMs` so none still being sealed is touched.
   */
  async sweep(olderThanMs = 3_600_000): Promise<number> {
    let removed = 0;
    let after: string | undefined;
    for (;;) {
      const listed = await this.segments.list('', after);
      for (const { name, modifiedAt } of listed) {
        after = name;
        if (Date.now() - modifiedAt < olderThanMs || (await this.hot.knowsSegment(name))) continue;
        await this.segments.remove(name);
        removed += 1;
      }
      if (listed.length < 1000) return removed;
    }
  }

  async close(): Promise<void> {
    await this.compressor.close();
  }
}

function runIds(position: number): [number, number] {
  return [documentId(position, 0), documentId(position, DOCUMENTS_PER_RUN)];
}

function feeds(text: string): number {
  let count = 0;
  for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) count += 1;
  return count;
}

function lookaheadBytes(rows: readonly SealRow[]): number {
  let bytes = 0;
  for (const row of rows) if (row.log_offset !== null) bytes += row.body.length;
  return bytes;
}

/** The log text of rows from `offset` on, end to end. */
function logText(rows: readonly SealRow[], offset: number): Buffer {
  const texts = rows.flatMap((row) =>
    row.log_offset !== null && row.log_offset >= offset ? [row.body] : [],
  );
  return Buffer.from(texts.join(''), 'utf8');
}

function sameRow(a: SealRow, b: SealRow | { [K in keyof SealRow]?: SealRow[K] }): boolean {
  return (
    a.seq === b.seq &&
    a.time === b.time &&
    a.kind === b.kind &&
    a.step === b.step &&
    a.correlation_id === b.correlation_id &&
    a.producer_id === b.producer_id &&
    a.log_offset === b.log_offset &&
    a.body === b.body &&
    a.extra === b.extra
  );
}
