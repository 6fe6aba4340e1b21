import { createParser } from 'eventsource-parser';
import type { EventSourceMessage } from 'eventsource-parser';
import { describe, expect, it } from 'vitest';
import { IcebergEncoder } from '../../src/http/iceberg.js';
import { NativeEncoder } from '../../src/http/native.js';
import { OpenMetadataEncoder } from '../../src/http/openmetadata.js';
import { commentBytes, formatFrame, frameBytes } from '../../src/http/sse.js';
import { ZenmlEncoder } from '../../src/http/zenml.js';
import type { Entry } from '../../src/model/entry.js';
import { RAW_DATA } from '../../src/model/entry.js';

const text = (buffer: Buffer | null): string => {
  if (buffer === null) throw new Error('the encoder returned no bytes');
  return buffer.toString('utf8');
};

const logEntry: Entry = {
  seq: 42,
  time: '2026-11-29T08:00:00.123Z',
  kind: 'log',
  offset: 1024,
  text: 'line 1\nline 2\n',
  step: 'ingest',
};

const progressEntry: Entry = {
  seq: 43,
  time: '2026-11-29T08:00:00.456Z',
  kind: 'progress',
  step: 'train',
  correlationId: 'gen-42',
  id: 'c0ffee',
  data: { pct: 50 },
};

describe('formatFrame', () => {
  it('formats a frame with an event name and one data line exactly', () => {
    expect(formatFrame({ event: 'event', data: '{"a":1}' })).toBe(
      'event: event\ndata: {"a":1}\n\n',
    );
  });

  // A client that takes an id as soon as it reads the line, cut off inside the frame, must not
  // resume after an entry it never got (docs/API.md, "Streaming").
  it('puts the id line last, after the event line and the data lines', () => {
    expect(formatFrame({ id: 7, event: 'log', data: '{}' })).toBe(
      'event: log\ndata: {}\nid: 7\n\n',
    );
    expect(formatFrame({ id: 'abc', data: 'x' })).toBe('data: x\nid: abc\n\n');
    expect(formatFrame({ id: 1, data: 'a\nb' })).toBe('data: a\ndata: b\nid: 1\n\n');
  });

  it('writes only a data line when there is neither id nor event', () => {
    expect(formatFrame({ data: 'hello' })).toBe('data: hello\n\n');
  });

  it('refuses an event name holding CR or LF rather than letting it inject a frame', () => {
    expect(() => formatFrame({ event: 'log\nevent: end', data: '{}' })).toThrow(/CR or LF/);
    expect(() => formatFrame({ event: 'log\r', data: '{}' })).toThrow(/CR or LF/);
    expect(() => formatFrame({ event: 'a\r\nb', data: '{}' })).toThrow(/CR or LF/);
  });

  it('refuses an id holding CR or LF rather than letting it inject a frame', () => {
    expect(() => formatFrame({ id: '1\ndata: injected', data: '{}' })).toThrow(/CR or LF/);
    expect(() => formatFrame({ id: '1\r', data: '{}' })).toThrow(/CR or LF/);
  });

  it('splits data holding line breaks into one data line per line', () => {
    expect(formatFrame({ event: 'x', data: 'a\nb\r\nc\rd' })).toBe(
      'event: x\ndata: a\ndata: b\ndata: c\ndata: d\n\n',
    );
    expect(formatFrame({ data: 'trailing\n' })).toBe('data: trailing\ndata: \n\n');
  });

  it('encodes frameBytes as the UTF-8 bytes of formatFrame', () => {
    const frame = { id: 1, event: 'log', data: '{"text":"例 🚀"}' };
    const bytes = frameBytes(frame);
    expect(bytes.equals(Buffer.from(formatFrame(frame), 'utf8'))).toBe(true);
    expect(bytes.length).toBe(Buffer.byteLength(formatFrame(frame), 'utf8'));
  });

  it('formats a comment as a colon line followed by a blank line', () => {
    expect(text(commentBytes('heartbeat'))).toBe(': heartbeat\n\n');
  });

  it('refuses a comment holding CR or LF rather than letting it end early and inject a frame', () => {
    for (const comment of ['a\nb', 'ping\n\ndata: injected', 'a\rb', 'a\r\nb', '\n', '\r']) {
      expect(() => commentBytes(comment), JSON.stringify(comment)).toThrow(/CR or LF/);
    }
  });

  it('writes a retry-only frame as one retry line and no data line', () => {
    expect(formatFrame({ retry: 2000 })).toBe('retry: 2000\n\n');
    expect(formatFrame({ retry: 0 })).toBe('retry: 0\n\n');
  });

  it('puts the retry line after the event line, before the data lines and the id', () => {
    expect(formatFrame({ id: 3, event: 'log', retry: 500, data: 'x\ny' })).toBe(
      'event: log\nretry: 500\ndata: x\ndata: y\nid: 3\n\n',
    );
  });

  it.each([-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, Number.MAX_SAFE_INTEGER + 2])(
    'refuses a retry of %s, which is not a non-negative integer',
    (retry) => {
      expect(() => formatFrame({ retry })).toThrow(/retry/);
      expect(() => formatFrame({ retry, data: '{}' })).toThrow(/retry/);
    },
  );

  it('writes an id-only frame without a data line', () => {
    expect(formatFrame({ id: 'abc' })).toBe('id: abc\n\n');
  });

  it('starts a data line at every line ending: CRLF, LF and a lone CR, however they follow each other', () => {
    expect(formatFrame({ data: '' })).toBe('data: \n\n');
    expect(formatFrame({ data: 'a\r\n' })).toBe('data: a\ndata: \n\n');
    expect(formatFrame({ data: 'a\r\rb' })).toBe('data: a\ndata: \ndata: b\n\n');
    expect(formatFrame({ data: 'a\n\rb' })).toBe('data: a\ndata: \ndata: b\n\n');
    expect(formatFrame({ data: '\r\n\r\n' })).toBe('data: \ndata: \ndata: \n\n');
    // What follows each line break stays on its own line, a field name in it included.
    expect(formatFrame({ data: 'x\rid: 9\revent: end' })).toBe(
      'data: x\ndata: id: 9\ndata: event: end\n\n',
    );
  });

  it('refuses an id holding a lone CR, and a lone CR in an event name', () => {
    expect(() => formatFrame({ id: 'a\rb', data: '{}' })).toThrow(/CR or LF/);
    expect(() => formatFrame({ id: '\r' })).toThrow(/CR or LF/);
    expect(() => formatFrame({ event: '\rend', data: '{}' })).toThrow(/CR or LF/);
  });

  it.each([
    ['LF', 'one\ntwo\nthree'],
    ['CRLF', 'one\r\ntwo\r\nthree'],
    ['lone CR', 'one\rtwo\rthree'],
    ['mixed', 'one\r\ntwo\rthree'],
  ])(
    'has an SSE parser read data with %s line endings back as its lines joined by LF',
    (_what, data) => {
      const parsed = parseInChunks(frameBytes({ event: 'note', data }), () => 1);
      expect(parsed.events).toEqual([{ id: undefined, event: 'note', data: 'one\ntwo\nthree' }]);
    },
  );
});

describe("every dialect's frames come from the one frame writer", () => {
  it("writes Iceberg's connected frame byte for byte as the seed's server did", () => {
    const bytes = text(new IcebergEncoder('iceberg-mutation').open());
    const match = /^event: connected\ndata: \{"clientId": "([0-9a-f-]{36})"\}\n\n$/.exec(bytes);
    expect(match, bytes).not.toBeNull();
    expect(bytes).toBe(`event: connected\ndata: {"clientId": "${match![1]!}"}\n\n`);
  });

  it('writes the native retry frame as before: one retry line', () => {
    expect(text(new NativeEncoder(2000).open('0badcafe'))).toBe('retry: 2000\n\n');
  });

  it('reads back every dialect as its frames were meant, through an SSE parser', () => {
    const entry: Entry = {
      seq: 9,
      time: '2026-11-29T08:00:02.000Z',
      kind: 'log',
      offset: 10,
      text: 'tab\there\r\nand 例\n',
    };
    const om = new OpenMetadataEncoder('run-1', 10);
    const zenml = new ZenmlEncoder('run-1');
    const bytes = Buffer.concat([
      om.entry(entry, false)!,
      om.gap(),
      om.error('', 'refused'),
      om.heartbeat(),
      zenml.entry({ ...entry, kind: 'token', text: undefined, data: { a: 1 } }),
      zenml.heartbeat(),
    ]);
    const parsed = parseInChunks(bytes, () => 3);
    expect(parsed.events.map((e) => [e.id, e.event])).toEqual([
      [String(10 + Buffer.byteLength(entry.text!, 'utf8')), undefined],
      [undefined, undefined],
      [undefined, undefined],
      ['9', 'token'],
    ]);
    expect(JSON.parse(parsed.events[0]!.data)).toMatchObject({ logs: entry.text });
    expect(JSON.parse(parsed.events[1]!.data)).toMatchObject({ truncated: true, logs: '' });
    expect(JSON.parse(parsed.events[2]!.data)).toEqual({
      eventType: 'error',
      runId: 'run-1',
      message: 'refused',
    });
    expect(parsed.comments).toEqual(['heartbeat', 'ping']);
  });
});

describe('NativeEncoder', () => {
  const epoch = '0badcafe';
  const encoder = new NativeEncoder(2000);
  encoder.open(epoch);

  it('opens a stream with the retry hint and nothing else', () => {
    expect(text(encoder.open(epoch))).toBe('retry: 2000\n\n');
    expect(text(new NativeEncoder(350).open(epoch))).toBe('retry: 350\n\n');
  });

  it('sends an entry as id seq-epoch, event kind and the entry as one line of JSON', () => {
    expect(text(encoder.entry(logEntry))).toBe(
      `event: log\ndata: ${JSON.stringify(logEntry)}\nid: 42-${epoch}\n\n`,
    );
    expect(text(encoder.entry(progressEntry))).toBe(
      `event: progress\ndata: ${JSON.stringify(progressEntry)}\nid: 43-${epoch}\n\n`,
    );
  });

  it('keeps log text with newlines inside a single data line, escaped by JSON', () => {
    const frame = text(encoder.entry(logEntry));
    expect(frame.split('\n').filter((line) => line.startsWith('data: '))).toHaveLength(1);
    expect(frame).toContain('"text":"line 1\\nline 2\\n"');
  });

  it('gives every viewer of an entry the same frame bytes', () => {
    const entry: Entry = { seq: 5, time: '2026-11-29T08:00:01.000Z', kind: 'log', text: 'x' };
    const first = encoder.entry(entry);
    const another = new NativeEncoder(10);
    another.open(epoch);
    expect(another.entry(entry)).toBe(first);
    // Under another epoch (renewed while the server runs) the frame is made anew, with its id.
    const renewed = new NativeEncoder(10);
    renewed.open('00c0ffee');
    expect(text(renewed.entry(entry))).toContain('\nid: 5-00c0ffee\n');
  });

  it('sends a cursor frame as the id of the filtered entry with an empty object', () => {
    expect(text(encoder.cursor(44))).toBe(`event: cursor\ndata: {}\nid: 44-${epoch}\n\n`);
  });

  it('sends a reset gap and a retention gap without an id', () => {
    expect(text(encoder.gap({ reason: 'reset' }))).toBe('event: gap\ndata: {"reason":"reset"}\n\n');
    expect(text(encoder.gap({ reason: 'retention', fromSeq: 3, toSeq: 9 }))).toBe(
      'event: gap\ndata: {"reason":"retention","fromSeq":3,"toSeq":9}\n\n',
    );
  });

  it('sends end with its reason, status and last seq, and leaves out an absent status', () => {
    expect(text(encoder.end({ reason: 'runFinished', status: 'success', lastSeq: 44 }))).toBe(
      'event: end\ndata: {"reason":"runFinished","status":"success","lastSeq":44}\n\n',
    );
    expect(text(encoder.end({ reason: 'shutdown', lastSeq: 0 }))).toBe(
      'event: end\ndata: {"reason":"shutdown","lastSeq":0}\n\n',
    );
  });

  it('sends error with its code and message', () => {
    expect(text(encoder.error('TW_STORE_UNAVAILABLE', 'The store could not be read: gone'))).toBe(
      'event: error\ndata: {"code":"TW_STORE_UNAVAILABLE","message":"The store could not be read: gone"}\n\n',
    );
  });

  it('sends a heartbeat as a comment', () => {
    expect(text(encoder.heartbeat())).toBe(': heartbeat\n\n');
  });
});

/** mulberry32: a small seeded generator, so a failing split can be replayed. */
function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Parsed {
  events: Array<{ id: string | undefined; event: string | undefined; data: string }>;
  comments: string[];
  retries: number[];
}

/** Feeds `bytes` to eventsource-parser in chunks of `nextSize()` bytes, decoding UTF-8 across splits. */
function parseInChunks(bytes: Buffer, nextSize: () => number): Parsed {
  const parsed: Parsed = { events: [], comments: [], retries: [] };
  const parser = createParser({
    onEvent(message: EventSourceMessage) {
      parsed.events.push({ id: message.id, event: message.event, data: message.data });
    },
    onComment(comment) {
      parsed.comments.push(comment);
    },
    onRetry(retry) {
      parsed.retries.push(retry);
    },
  });
  const decoder = new TextDecoder();
  let at = 0;
  while (at < bytes.length) {
    const size = nextSize();
    parser.feed(decoder.decode(bytes.subarray(at, at + size), { stream: true }));
    at += size;
  }
  parser.feed(decoder.decode());
  return parsed;
}

describe('native frames of data kept as the producer wrote it', () => {
  // A producer's own JSON text is kept byte for byte, its line breaks included: those frames
  // must still be split into data lines, while JSON.stringify's text goes out in one.
  const pretty = '{\n  "rows": 3,\r\n  "table": "db.t"\n}';
  const raw: Entry = {
    seq: 7,
    time: '2026-11-29T08:00:02.000Z',
    kind: 'commit',
    data: JSON.parse(pretty) as unknown,
    [RAW_DATA]: pretty,
  };
  const plain: Entry = { ...progressEntry, seq: 8 };
  const readBack = (bytes: Buffer) => {
    const events: EventSourceMessage[] = [];
    createParser({ onEvent: (event) => events.push(event) }).feed(bytes.toString('utf8'));
    return events.map((event) => JSON.parse(event.data) as Entry);
  };

  it('splits an entry whose kept text has line breaks, alone or in a batch, and it parses back', () => {
    const encoder = new NativeEncoder(2000);
    encoder.open('0badcafe');
    const one = text(encoder.entry(raw));
    expect(one).not.toMatch(/\r/);
    expect(one.match(/^data: /gm)).toHaveLength(4);
    const batch = new NativeEncoder(2000);
    batch.open('0badcafe');
    const both = batch.entries([raw, plain]);
    expect(readBack(both).map((entry) => entry.seq)).toEqual([7, 8]);
    expect(readBack(both)[0]!.data).toEqual({ rows: 3, table: 'db.t' });
  });

  it('joins a batch byte for byte the same whether or not some of its entries were sent alone first', () => {
    const make = (seq: number): Entry => ({
      ...progressEntry,
      seq,
      data: { pct: seq, note: 'é✓' },
    });
    const fresh = [make(1), make(2), make(3), make(4)];
    const seen = [make(1), make(2), make(3), make(4)];
    const encoder = new NativeEncoder(2000);
    encoder.open('0badcafe');
    const expected = encoder.entries(fresh);
    // Entries 2 and 4 went to a viewer one at a time: their frames are kept, and reused.
    encoder.entry(seen[1]!);
    encoder.entry(seen[3]!);
    const joined = encoder.entries(seen);
    expect(joined.equals(expected)).toBe(true);
    expect(readBack(joined).map((entry) => entry.seq)).toEqual([1, 2, 3, 4]);
  });

  it('writes an entry of JSON.stringify text as one data line', () => {
    const encoder = new NativeEncoder(2000);
    encoder.open('0badcafe');
    expect(text(encoder.entry(plain)).match(/^data: /gm)).toHaveLength(1);
  });
});

describe('native frames read back by an SSE parser', () => {
  const epoch = '0badcafe';
  const encoder = new NativeEncoder(2000);
  const multiByte: Entry = {
    seq: 44,
    time: '2026-11-29T08:00:01.000Z',
    kind: 'log',
    offset: 1038,
    text: '例'.repeat(20) + ' 🚀 done\r\n',
  };
  const frames = [
    encoder.open(epoch),
    encoder.entry(logEntry),
    encoder.heartbeat(),
    encoder.entry(progressEntry),
    encoder.cursor(45),
    encoder.gap({ reason: 'reset' }),
    encoder.entry(multiByte),
    Buffer.from(formatFrame({ event: 'note', data: 'two\nlines' })),
    encoder.error('TW_STORE_UNAVAILABLE', 'gone'),
    encoder.end({ reason: 'runFinished', status: 'success', lastSeq: 45 }),
  ];
  const bytes = Buffer.concat(frames.map((frame) => frame ?? Buffer.alloc(0)));
  const expected: Parsed = {
    events: [
      { id: `42-${epoch}`, event: 'log', data: JSON.stringify(logEntry) },
      { id: `43-${epoch}`, event: 'progress', data: JSON.stringify(progressEntry) },
      { id: `45-${epoch}`, event: 'cursor', data: '{}' },
      { id: undefined, event: 'gap', data: '{"reason":"reset"}' },
      { id: `44-${epoch}`, event: 'log', data: JSON.stringify(multiByte) },
      { id: undefined, event: 'note', data: 'two\nlines' },
      {
        id: undefined,
        event: 'error',
        data: '{"code":"TW_STORE_UNAVAILABLE","message":"gone"}',
      },
      {
        id: undefined,
        event: 'end',
        data: '{"reason":"runFinished","status":"success","lastSeq":45}',
      },
    ],
    comments: ['heartbeat'],
    retries: [2000],
  };

  it('reads back the same events when the bytes arrive whole', () => {
    expect(parseInChunks(bytes, () => bytes.length)).toEqual(expected);
  });

  it('reads back the same events when the bytes arrive one at a time', () => {
    expect(parseInChunks(bytes, () => 1)).toEqual(expected);
  });

  it.each([1, 2, 3, 42, 1234, 99991])(
    'reads back the same events when the bytes arrive in random chunks (seed %i)',
    (seed) => {
      const random = seededRandom(seed);
      const parsed = parseInChunks(bytes, () => 1 + Math.floor(random() * 23));
      expect(parsed).toEqual(expected);
      expect(JSON.parse(parsed.events[4]!.data)).toEqual(multiByte);
    },
  );
});
