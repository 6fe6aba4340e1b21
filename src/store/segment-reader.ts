import { TailwaterError } from '../model/errors.js';
import type { StreamKey } from '../model/stream-key.js';
import { describeStream } from '../model/stream-key.js';
import type { BlockInfo, DecodedBlock, SegmentFooter } from './segment-format.js';
import {
  SEGMENT_TRAILER_BYTES,
  SegmentCorrupt,
  decodeBlock,
  parseFooter,
  parseTrailer,
} from './segment-format.js';
import type { SegmentStore } from './segment-store.js';
import { BlockDecoder } from './block-decoder.js';
import { SegmentMissing } from './segment-store.js';

/**
 * Reads sealed segments through bounded caches: footers (small, kept for many segments),
 * decoded blocks (their bytes, about a megabyte each: the ones viewers catching up and
 * searches are walking) and filters (all of a segment's in one read, for searches). Any failure to read or verify
 * is TW_SEGMENT_UNREADABLE naming the stream, never text that might be wrong.
 */
export interface SegmentReaderLimits {
  footers: number;
  blockBytes: number;
  filterBytes: number;
  /** Compressed bytes of the spans read ahead for readers walking segments in order. */
  spanBytes: number;
}

export const DEFAULT_READER_LIMITS: SegmentReaderLimits = {
  footers: 4096,
  blockBytes: 64 * 1024 * 1024,
  filterBytes: 64 * 1024 * 1024,
  spanBytes: 16 * 1024 * 1024,
};

/**
 * A reader walking a segment in order (a catch-up) reads its compressed blocks SPAN_BLOCKS at a
 * time, in spans aligned on multiples of it so that viewers walking the same run share them:
 * one read of the file for several blocks. Opening and closing the file once per block was a
 * tenth of a sealed catch-up's event loop (docs/BENCHMARKS.md, "Catch-up"). Only the
 * compressed bytes are read ahead; blocks are decoded when asked for.
 */
const SPAN_BLOCKS = 8;

/** Up to SPAN_BLOCKS consecutive compressed blocks of a segment, read at once from `start`. */
interface Span {
  start: number;
  bytes: Buffer;
}

/** A map that forgets its least recently used entries past a total weight. */
class Lru<V> {
  private readonly map = new Map<string, { value: V; weight: number }>();
  private total = 0;

  constructor(private readonly limit: number) {}

  get(key: string): V | undefined {
    const found = this.map.get(key);
    if (!found) return undefined;
    this.map.delete(key);
    this.map.set(key, found);
    return found.value;
  }

  set(key: string, value: V, weight: number): void {
    const old = this.map.get(key);
    if (old) this.total -= old.weight;
    this.map.delete(key);
    this.map.set(key, { value, weight });
    this.total += weight;
    for (const [oldest, entry] of this.map) {
      if (this.total <= this.limit || this.map.size <= 1) break;
      this.map.delete(oldest);
      this.total -= entry.weight;
    }
  }

  deletePrefix(prefix: string): void {
    for (const [key, entry] of this.map) {
      if (!key.startsWith(prefix)) continue;
      this.map.delete(key);
      this.total -= entry.weight;
    }
  }
}

export class SegmentReader {
  private readonly footers: Lru<Promise<SegmentFooter>>;
  private readonly blocks: Lru<Promise<DecodedBlock>>;
  private readonly filters: Lru<Promise<Uint8Array[]>>;
  private readonly spans: Lru<Promise<Span>>;
  private readonly decoder = new BlockDecoder();

  constructor(
    readonly segments: SegmentStore,
    limits: SegmentReaderLimits = DEFAULT_READER_LIMITS,
  ) {
    this.footers = new Lru(limits.footers);
    this.blocks = new Lru(limits.blockBytes);
    this.filters = new Lru(limits.filterBytes);
    this.spans = new Lru(limits.spanBytes);
  }

  footer(key: StreamKey, name: string): Promise<SegmentFooter> {
    let found = this.footers.get(name);
    if (!found) {
      found = this.guard(key, name, async () => {
        const { footerLength, crc } = parseTrailer(
          await this.segments.read(name, -SEGMENT_TRAILER_BYTES, SEGMENT_TRAILER_BYTES),
        );
        const compressed = await this.segments.read(
          name,
          -(SEGMENT_TRAILER_BYTES + footerLength),
          footerLength,
        );
        return parseFooter(compressed, crc);
      });
      this.remember(this.footers, name, found, 1);
    }
    return found;
  }

  /**
   * Block `index` of a segment. `forFrames`: decoded on the worker with its log texts quoted for
   * JSON (block-decoder.ts), for a reader that writes them into frames; a block already cached
   * is answered as it is.
   */
  block(key: StreamKey, name: string, index: number, forFrames = false): Promise<DecodedBlock> {
    const cacheKey = `${name}#${index}`;
    let found = this.blocks.get(cacheKey);
    if (!found) {
      found = this.guard(key, name, async () => {
        const info = (await this.footer(key, name)).blocks[index];
        if (!info) throw new SegmentCorrupt(`it has no block ${index}`);
        if (!forFrames)
          return decodeBlock(info, await this.segments.read(name, info.at, info.length));
        return this.decoder.decode(info, await this.spanBlock(key, name, index, info));
      });
      // Weighed by its bytes as decompressed, once known.
      this.remember(this.blocks, cacheKey, found, 1024 * 1024, (block) => block.weight);
    }
    return found;
  }

  /** Every block's filter of a segment, in block order. */
  blockFilters(key: StreamKey, name: string): Promise<Uint8Array[]> {
    let found = this.filters.get(name);
    if (!found) {
      found = this.guard(key, name, async () => {
        const footer = await this.footer(key, name);
        const blocks = footer.blocks;
        if (blocks.length === 0) return [];
        const start = blocks[0]!.filterAt;
        const last = blocks.at(-1)!;
        const region = await this.segments.read(
          name,
          start,
          last.filterAt + last.filterBits / 8 - start,
        );
        return blocks.map((info: BlockInfo) => {
          const at = info.filterAt - start;
          return new Uint8Array(region.buffer, region.byteOffset + at, info.filterBits / 8);
        });
      });
      this.remember(this.filters, name, found, 64 * 1024, (filters) =>
        filters.reduce((n, f) => n + f.length, 0),
      );
    }
    return found;
  }

  /**
   * Block `index`'s compressed bytes (`info` its footer entry), from the span that holds it,
   * read once for all of its blocks. Called within block's guard, which names the failure.
   */
  private async spanBlock(
    key: StreamKey,
    name: string,
    index: number,
    info: BlockInfo,
  ): Promise<Buffer> {
    const first = index - (index % SPAN_BLOCKS);
    const spanKey = `${name}@${first}`;
    let found = this.spans.get(spanKey);
    if (!found) {
      found = (async () => {
        const blocks = (await this.footer(key, name)).blocks.slice(first, first + SPAN_BLOCKS);
        const start = blocks[0]!.at;
        const last = blocks.at(-1)!;
        return {
          start,
          bytes: await this.segments.read(name, start, last.at + last.length - start),
        };
      })();
      this.remember(this.spans, spanKey, found, 1024 * 1024, (span) => span.bytes.length);
    }
    const span = await found;
    return span.bytes.subarray(info.at - span.start, info.at - span.start + info.length);
  }

  close(): Promise<void> {
    return this.decoder.close();
  }

  /** Forgets what is cached of a segment (it was removed). */
  forget(name: string): void {
    this.blocks.deletePrefix(`${name}#`);
    this.footers.deletePrefix(name);
    this.filters.deletePrefix(name);
    this.spans.deletePrefix(`${name}@`);
  }

  /**
   * Keeps a promise while it is pending or fulfilled, weighed by a guess and then by what it
   * holds; a rejected one is not kept, so the next read tries again.
   */
  private remember<V>(
    cache: Lru<Promise<V>>,
    key: string,
    value: Promise<V>,
    guess: number,
    weigh?: (value: V) => number,
  ) {
    cache.set(key, value, guess);
    value.then(
      (resolved) => {
        if (weigh && cache.get(key) === value) cache.set(key, value, weigh(resolved));
      },
      () => cache.deletePrefix(key),
    );
  }

  private async guard<T>(key: StreamKey, name: string, read: () => Promise<T>): Promise<T> {
    try {
      return await read();
    } catch (error) {
      if (error instanceof SegmentCorrupt || error instanceof SegmentMissing) {
        throw new TailwaterError(
          'TW_SEGMENT_UNREADABLE',
          `${describeStream(key)}: sealed segment ${name} cannot be read (${error.message}); its entries are not answered rather than answered wrong (docs/STORAGE.md, "Sealed segments").`,
        );
      }
      throw error;
    }
  }
}
