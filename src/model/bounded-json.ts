import { isUtf8 } from 'node:buffer';
import { TailwaterError } from './errors.js';
import { SLICE_MS, TimeSlice } from './time-slice.js';

/**
 * JSON read within a budget. `JSON.parse` of a hostile body is unbounded work on the event loop
 * (20 MB of `{}` is seconds and gigabytes), and it cannot stop early, nor tell where a value's
 * text lies. So a body is first walked as it arrives by a small structural scanner that keeps
 * the budget (nesting depth, how many values, how many items in a list and how big each is)
 * and notes where each list item and its raw field lie, checking UTF-8 chunk by chunk; only
 * then is it parsed, in pieces the budget has already bounded, a few milliseconds of them per
 * turn of the event loop. The body is never copied whole: pieces are cut from its chunks.
 *
 * The scanner is not a validator. Soundness comes from composition: it checks the separators of
 * the list itself; every other byte is parsed by `JSON.parse`, either in the skeleton (the body
 * with its list emptied) or in one item, which holds its raw field. If each of those is valid
 * JSON, so is the body; a raw field's text is a value of an item that parsed, so it is JSON.
 */

/** Nesting no producer needs; deeper data would overflow the stack of JSON.stringify. */
export const MAX_JSON_DEPTH = 64;

/** What a route accepts. */
export interface JsonLimits {
  /** Deepest nesting of arrays and objects; the top level is depth 1. */
  maxDepth: number;
  /** Most values in the body outside its list items. */
  maxValues: number;
  /**
   * The body is an object whose `key` is a list of items (a batch of events): each item is cut
   * out and parsed on its own, so the number and size of items is checked before any is parsed.
   */
  list?: ListLimits | undefined;
}

export interface ListLimits {
  key: string;
  maxItems: number;
  /** An item's size in bytes of JSON, as sent. */
  maxItemBytes: number;
  /** A field of each item that is kept as its JSON text (a `RawJson`), never turned into values. */
  rawField?: string | undefined;
  tooManyItems(count: number): TailwaterError;
  itemTooLarge(index: number, bytes: number): TailwaterError;
}

/**
 * A value kept as the JSON text the producer sent: numbers past 2^53 and long decimals stay
 * exact, and nothing is built from it. Its text is valid JSON.
 */
export class RawJson {
  constructor(readonly text: string) {}
}

const enum Mode {
  /** After `[`: a value or `]`. */
  FirstValue,
  /** At the top, after `,` in an array, after `:`: a value. */
  Value,
  AfterValue,
  /** After `{`: a key or `}`. */
  FirstKey,
  /** After `,` in an object: a key. */
  Key,
  /** After a key: `:`. */
  AfterKey,
  String,
  StringEscape,
  /** A number, `true`, `false` or `null`: read to its end, judged by JSON.parse. */
  Literal,
  Done,
  /**
   * Inside an object or array that is a raw field's value: only nesting and string bounds
   * matter there (JSON.parse judges the text whole), so a tight loop walks it (`skip`).
   */
  Skip,
  SkipString,
  SkipEscape,
}

const OBJECT = 1;
const ARRAY = 2;
/** Keys longer than this are never the list's key or the raw field: they are not kept. */
const MAX_KEY_BYTES = 256;

// Bytes that can continue a number or a literal (`true`, `-1.5e+3`).
const LITERAL = new Uint8Array(256);
for (const c of '0123456789+-.abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ') {
  LITERAL[c.charCodeAt(0)] = 1;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

const isSpace = (c: number) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

interface ItemSpan {
  start: number;
  end: number;
  /** Where the raw field's value lies in the body; -1 when the item has none. */
  fieldStart: number;
  fieldEnd: number;
}

function syntax(message: string, at: number): TailwaterError {
  return new TailwaterError('TW_BAD_JSON', `Malformed JSON at byte ${at}: ${message}.`);
}

/**
 * Walks a JSON body chunk by chunk, keeping the budget, and throws a TailwaterError as soon as
 * the body breaks it; `finish()` then parses it. Depths: the top-level value's container is 1,
 * the list (an array in the top object) is 2, its items are at 3.
 */
export class BoundedJsonReader {
  private readonly chunks: Buffer[] = [];
  /** Where each chunk starts in the body. */
  private readonly starts: number[] = [];
  /** The end of a chunk that may cut a UTF-8 character, checked with the next chunk. */
  private utf8Carry: Buffer | undefined;
  private pos = 0;
  private mode = Mode.Value;
  private readonly stack: Uint8Array;
  private depth = 0;
  private values = 0;

  private stringIsKey = false;
  private capturing = false;
  private keyBytes: number[] = [];
  private keyEscaped = false;
  private keyTooLong = false;
  /** The key whose value is being read, in the top object and in the current item. */
  private topKey: string | undefined;
  private itemKey: string | undefined;
  private listKeySeen = false;

  /** Nesting within a raw field's value, while skipping it. */
  private skipDepth = 0;
  private inList = false;
  private listOpen = -1;
  private listClose = -1;
  private item: ItemSpan | undefined;
  private readonly items: ItemSpan[] = [];
  private inField = false;

  /** The keys that matter: the list's at the top, the raw field in an item. */
  private readonly wantedKeys: ReadonlyArray<{ name: string; bytes: Buffer }>;

  constructor(private readonly limits: JsonLimits) {
    this.stack = new Uint8Array(limits.maxDepth + 2);
    const names = [limits.list?.key, limits.list?.rawField].filter(
      (name): name is string => name !== undefined,
    );
    this.wantedKeys = names.map((name) => ({ name, bytes: Buffer.from(name, 'utf8') }));
  }

  /** Takes the next piece of the body. */
  feed(chunk: Buffer): void {
    this.checkUtf8(chunk);
    this.chunks.push(chunk);
    this.starts.push(this.pos);
    const base = this.pos;
    for (let i = 0; i < chunk.length; i += 1) {
      const c = chunk[i]!;
      const at = base + i;
      switch (this.mode) {
        case Mode.String:
          if (c === QUOTE) this.endString(at);
          else if (c === BACKSLASH) this.mode = Mode.StringEscape;
          else if (this.capturing) this.keep(c);
          // Most strings are short: look a few bytes ahead here; a long one, indexOf jumps.
          else i = stringEnd(chunk, i) - 1;
          break;
        case Mode.StringEscape:
          this.mode = Mode.String;
          if (this.capturing) {
            this.keep(BACKSLASH);
            this.keep(c);
            this.keyEscaped = true;
          }
          break;
        case Mode.Literal:
          if (LITERAL[c]) break;
          this.endValue(at);
          i -= 1; // the byte after a literal is read again, in the mode that follows it
          break;
        case Mode.FirstValue:
          if (isSpace(c)) break;
          if (c === 0x5d) this.close(c, at);
          else this.startValue(c, at);
          break;
        case Mode.Value:
          if (!isSpace(c)) this.startValue(c, at);
          break;
        case Mode.AfterValue:
          if (isSpace(c)) break;
          if (c === 0x2c) this.mode = this.stack[this.depth] === OBJECT ? Mode.Key : Mode.Value;
          else if (c === 0x7d || c === 0x5d) this.close(c, at);
          else throw syntax(`expected "," or a closing bracket, not ${describe(c)}`, at);
          break;
        case Mode.FirstKey:
        case Mode.Key:
          if (isSpace(c)) break;
          if (c === QUOTE) this.startString(true);
          else if (c === 0x7d && this.mode === Mode.FirstKey) this.close(c, at);
          else throw syntax(`expected a key in double quotes, not ${describe(c)}`, at);
          break;
        case Mode.AfterKey:
          if (isSpace(c)) break;
          if (c !== 0x3a) throw syntax(`expected ":" after a key, not ${describe(c)}`, at);
          this.mode = Mode.Value;
          break;
        case Mode.Done:
          if (!isSpace(c)) throw syntax('unexpected text after the JSON value', at);
          break;
        case Mode.Skip:
        case Mode.SkipString:
        case Mode.SkipEscape:
          i = this.skip(chunk, i, base);
          break;
      }
    }
    this.pos = base + chunk.length;
    // An item that is still open but already too big is refused before the rest arrives.
    if (this.item) this.checkItemSize(this.pos);
  }

  /**
   * The body parsed. List items are parsed one at a time, with a turn of the event loop every
   * few milliseconds, so that even a full batch never holds the loop for long.
   */
  async finish(): Promise<unknown> {
    if (this.mode === Mode.Literal) this.endValue(this.pos);
    if (this.mode === Mode.Value && this.depth === 0) {
      throw new TailwaterError('TW_BAD_JSON', 'The JSON body is empty.');
    }
    if (this.mode !== Mode.Done) throw syntax('the body ends before its JSON value does', this.pos);
    if (this.utf8Carry) throw badUtf8();
    const list = this.limits.list;
    if (!list || this.listOpen < 0) return parse(this.text(0, this.pos), 0);
    const skeleton = this.text(0, this.listOpen + 1) + this.text(this.listClose, this.pos);
    const value = parse(skeleton, 0) as Record<string, unknown>;
    const parsed: unknown[] = [];
    const slice = new TimeSlice(SLICE_MS);
    for (const span of this.items) {
      const item = parse(this.text(span.start, span.end), span.start);
      if (list.rawField !== undefined && span.fieldStart >= 0) {
        // Parsing the whole item checked the field's text too; what it built of it is let go.
        (item as Record<string, unknown>)[list.rawField] = new RawJson(
          this.text(span.fieldStart, span.fieldEnd),
        );
      }
      parsed.push(item);
      if (slice.due) await slice.next();
    }
    value[list.key] = parsed;
    return value;
  }

  /**
   * The body's bytes [from, to) as text, cut from the chunks as they came: the body is never
   * copied whole (a full batch is 65 MB), only a piece that straddles two chunks.
   */
  private text(from: number, to: number): string {
    let index = this.chunkAt(from);
    const chunk = this.chunks[index]!;
    const start = this.starts[index]!;
    if (to <= start + chunk.length) return chunk.toString('utf8', from - start, to - start);
    const pieces: Buffer[] = [];
    for (let at = from; at < to; index += 1) {
      const piece = this.chunks[index]!;
      const pieceStart = this.starts[index]!;
      pieces.push(piece.subarray(at - pieceStart, Math.min(piece.length, to - pieceStart)));
      at = pieceStart + piece.length;
    }
    return Buffer.concat(pieces).toString('utf8');
  }

  /** The chunk holding byte `at`: a binary search over where the chunks start. */
  private chunkAt(at: number): number {
    let lo = 0;
    let hi = this.starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.starts[mid]! <= at) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }

  /**
   * Checks a chunk is UTF-8 as it arrives, so the whole body is never checked at once. A chunk
   * may end inside a character: the bytes of an unfinished one are carried over and checked
   * with the chunk that follows.
   */
  private checkUtf8(chunk: Buffer): void {
    const bytes = this.utf8Carry ? Buffer.concat([this.utf8Carry, chunk]) : chunk;
    this.utf8Carry = undefined;
    const cut = unfinishedTail(bytes);
    if (!isUtf8(cut === 0 ? bytes : bytes.subarray(0, bytes.length - cut))) throw badUtf8();
    if (cut > 0) this.utf8Carry = Buffer.from(bytes.subarray(bytes.length - cut));
  }

  private keep(c: number): void {
    if (this.keyBytes.length < MAX_KEY_BYTES) this.keyBytes.push(c);
    else this.keyTooLong = true;
  }

  private startValue(c: number, at: number): void {
    if (this.inList && this.depth === 2) {
      this.startItem(at);
    } else if (!this.item) {
      this.values += 1;
      if (this.values > this.limits.maxValues) {
        throw new TailwaterError(
          'TW_BODY_TOO_LARGE',
          `The JSON body holds more than ${this.limits.maxValues} values.`,
        );
      }
    }
    if (this.item && this.depth === 3 && this.itemKey !== undefined) {
      if (this.itemKey === this.limits.list?.rawField) {
        this.inField = true;
        this.item.fieldStart = at;
        if (c === 0x7b || c === 0x5b) {
          this.skipDepth = 1;
          this.checkDepth(this.depth + 1);
          this.mode = Mode.Skip;
          return;
        }
      }
    }
    if (c === 0x7b) this.open(OBJECT, at);
    else if (c === 0x5b) this.open(ARRAY, at);
    else if (c === QUOTE) this.startString(false);
    else if (LITERAL[c]) this.mode = Mode.Literal;
    else throw syntax(`unexpected ${describe(c)}`, at);
  }

  private checkDepth(depth: number): void {
    if (depth > this.limits.maxDepth) {
      throw new TailwaterError(
        'TW_BAD_JSON',
        `The JSON body nests deeper than ${this.limits.maxDepth} levels.`,
      );
    }
  }

  /**
   * Walks a raw field's object or array from `from` to its end (or the chunk's), tracking only
   * nesting and strings; a bracket of the wrong kind is left for JSON.parse of the field to find.
   * Returns the index of the last byte it took.
   */
  private skip(chunk: Buffer, from: number, base: number): number {
    let mode = this.mode;
    let depth = this.skipDepth;
    for (let i = from; i < chunk.length; i += 1) {
      const c = chunk[i]!;
      if (mode === Mode.Skip) {
        if (c === QUOTE) {
          mode = Mode.SkipString;
        } else if (c === 0x7b || c === 0x5b) {
          depth += 1;
          this.checkDepth(this.depth + depth);
        } else if (c === 0x7d || c === 0x5d) {
          depth -= 1;
          if (depth === 0) {
            this.skipDepth = 0;
            this.endValue(base + i + 1);
            return i;
          }
        }
      } else if (mode === Mode.SkipString) {
        if (c === QUOTE) mode = Mode.Skip;
        else if (c === BACKSLASH) mode = Mode.SkipEscape;
      } else {
        mode = Mode.SkipString;
      }
    }
    this.mode = mode;
    this.skipDepth = depth;
    return chunk.length - 1;
  }

  private open(type: number, at: number): void {
    this.depth += 1;
    this.checkDepth(this.depth);
    this.stack[this.depth] = type;
    if (
      type === ARRAY &&
      this.depth === 2 &&
      this.stack[1] === OBJECT &&
      this.limits.list !== undefined &&
      this.topKey === this.limits.list.key
    ) {
      this.inList = true;
      this.listOpen = at;
    }
    if (type === OBJECT && this.depth === 3 && this.item) this.itemKey = undefined;
    this.mode = type === OBJECT ? Mode.FirstKey : Mode.FirstValue;
  }

  private close(c: number, at: number): void {
    const type = this.stack[this.depth];
    if ((c === 0x7d) !== (type === OBJECT)) throw syntax(`unexpected ${describe(c)}`, at);
    if (this.inList && this.depth === 2) {
      this.inList = false;
      this.listClose = at;
    }
    this.depth -= 1;
    this.endValue(at + 1);
  }

  private startString(isKey: boolean): void {
    this.mode = Mode.String;
    this.stringIsKey = isKey;
    this.capturing = isKey && (this.depth === 1 || (this.depth === 3 && this.item !== undefined));
    if (this.capturing) {
      this.keyBytes = [];
      this.keyEscaped = false;
      this.keyTooLong = false;
    }
  }

  private endString(at: number): void {
    if (!this.stringIsKey) {
      this.endValue(at + 1);
      return;
    }
    this.mode = Mode.AfterKey;
    if (!this.capturing) return;
    this.capturing = false;
    const key = this.keyTooLong ? undefined : this.decodeKey(at);
    if (this.depth === 1) {
      const listKey = this.limits.list?.key;
      if (key !== undefined && key === listKey) {
        if (this.listKeySeen) throw syntax(`"${listKey}" is given twice`, at);
        this.listKeySeen = true;
      }
      this.topKey = key;
    } else {
      const field = this.limits.list?.rawField;
      if (key !== undefined && key === field && this.item!.fieldStart >= 0) {
        throw syntax(`"${field}" is given twice in one item`, at);
      }
      this.itemKey = key;
    }
  }

  /**
   * The key just read if it is one the reader looks for (the list's, or the raw field), else ''.
   * Compared byte for byte; only a key spelt with escapes is decoded first.
   */
  private decodeKey(at: number): string {
    if (this.keyEscaped) {
      const key = parse(`"${Buffer.from(this.keyBytes).toString('utf8')}"`, at);
      return this.wantedKeys.find((wanted) => wanted.name === key)?.name ?? '';
    }
    for (const wanted of this.wantedKeys) {
      if (wanted.bytes.length !== this.keyBytes.length) continue;
      let same = true;
      for (let i = 0; i < wanted.bytes.length && same; i += 1) {
        same = wanted.bytes[i] === this.keyBytes[i];
      }
      if (same) return wanted.name;
    }
    return '';
  }

  /** A value ended just before `end`; `depth` is that of the container holding it. */
  private endValue(end: number): void {
    if (this.inField && this.depth === 3) {
      this.item!.fieldEnd = end;
      this.inField = false;
    }
    if (this.item && this.depth === 2) this.endItem(end);
    if (this.depth === 1) this.topKey = undefined;
    if (this.depth === 3) this.itemKey = undefined;
    this.mode = this.depth === 0 ? Mode.Done : Mode.AfterValue;
  }

  private startItem(at: number): void {
    const list = this.limits.list!;
    if (this.items.length >= list.maxItems) throw list.tooManyItems(this.items.length + 1);
    this.item = { start: at, end: -1, fieldStart: -1, fieldEnd: -1 };
  }

  private endItem(end: number): void {
    this.checkItemSize(end);
    this.item!.end = end;
    this.items.push(this.item!);
    this.item = undefined;
  }

  private checkItemSize(end: number): void {
    const list = this.limits.list!;
    const bytes = end - this.item!.start;
    if (bytes > list.maxItemBytes) throw list.itemTooLarge(this.items.length, bytes);
  }
}

/** Where a string's plain run starting at `i` ends: the next quote or backslash, or the end. */
function stringEnd(chunk: Buffer, i: number): number {
  const stop = Math.min(chunk.length, i + 32);
  let j = i + 1;
  while (j < stop) {
    const c = chunk[j]!;
    if (c === QUOTE || c === BACKSLASH) return j;
    j += 1;
  }
  return j === chunk.length ? j : nextSpecial(chunk, j);
}

/** The index of the next quote or backslash at or after `i` (or the chunk's end). */
function nextSpecial(chunk: Buffer, i: number): number {
  const quote = chunk.indexOf(QUOTE, i);
  const slash = chunk.indexOf(BACKSLASH, i);
  const end = quote < 0 ? chunk.length : quote;
  return slash < 0 ? end : Math.min(end, slash);
}

function describe(c: number): string {
  return c >= 0x20 && c < 0x7f ? `"${String.fromCharCode(c)}"` : `byte 0x${c.toString(16)}`;
}

function parse(text: string, offset: number): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    const message = (error as Error).message;
    throw new TailwaterError(
      'TW_BAD_JSON',
      offset > 0 ? `Malformed JSON near byte ${offset}: ${message}` : `Malformed JSON: ${message}`,
    );
  }
}

function badUtf8(): TailwaterError {
  return new TailwaterError(
    'TW_BAD_UTF8',
    'The body is not valid UTF-8; it was not stored (Tailwater never stores replacement characters).',
  );
}

/**
 * How many bytes at the end of `bytes` start a character that is not finished (0 to 3): the
 * last lead byte, if the bytes after it are fewer than its character needs.
 */
function unfinishedTail(bytes: Buffer): number {
  for (let back = 1; back <= Math.min(3, bytes.length); back += 1) {
    const byte = bytes[bytes.length - back]!;
    if ((byte & 0xc0) === 0x80) continue; // a continuation byte: look further back
    const needs = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc0 ? 2 : 1;
    return needs > back ? back : 0;
  }
  return 0;
}
