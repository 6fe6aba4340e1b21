import type { LightMyRequestResponse } from 'fastify';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import type { Entry } from '../../src/model/entry.js';
import { runPath } from '../helpers/api.js';
import { createTestApp } from '../helpers/app.js';
import type { TestApp } from '../helpers/app.js';
import { endOf, entryEvents, openSse } from '../helpers/sse.js';

// `log.txt` by byte range, and the stream that takes over where its text ends (docs/API.md,
// "Reading without streaming" and "Streaming").

const FQN = 'ingest.daily';
const RUN = runPath(FQN, 'r1');
const TEXT = { 'content-type': 'text/plain; charset=utf-8' };
/** Three entries, with characters of 2, 3 and 4 bytes: ranges fall inside characters too. */
const PIECES = ['héllo\n', 'wörld ✓\n', '😀 end\n'];
const WHOLE = Buffer.from(PIECES.join(''), 'utf8');

let t: TestApp;

beforeEach(async () => {
  t = await createTestApp({ finishGraceSeconds: 0.2 });
});

afterEach(async () => {
  await t.close();
});

async function append(text: string): Promise<{ seq: number }> {
  const res = await t.app.inject({
    method: 'POST',
    url: `${RUN}/logs`,
    headers: TEXT,
    payload: Buffer.from(text, 'utf8'),
  });
  expect(res.statusCode).toBe(200);
  return res.json<{ seq: number }>();
}

async function event(kind: string): Promise<void> {
  const res = await t.app.inject({
    method: 'POST',
    url: `${RUN}/events`,
    payload: { events: [{ kind, data: {} }] },
  });
  expect(res.statusCode).toBe(200);
}

function logTxt(headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
  return t.app.inject({ method: 'GET', url: `${RUN}/log.txt`, headers });
}

async function epoch(): Promise<string> {
  return (await t.store.bounds({ type: 'run', pipeline: FQN, runId: 'r1' })).epoch;
}

describe('log.txt by byte range', () => {
  test('the whole log says it takes ranges and names the entry its text ends with', async () => {
    const seqs = [];
    for (const piece of PIECES) seqs.push((await append(piece)).seq);
    const res = await logTxt();
    expect(res.statusCode).toBe(200);
    expect(res.headers['accept-ranges']).toBe('bytes');
    expect(res.headers['content-length']).toBe(String(WHOLE.length));
    expect(res.headers['tailwater-log-cursor']).toBe(`${seqs[2]}-${await epoch()}`);
    expect(res.rawPayload.equals(WHOLE)).toBe(true);
  });

  test('every range bytes=a-b of a log is 206 with exactly those bytes and its Content-Range', async () => {
    for (const piece of PIECES) await append(piece);
    for (let first = 0; first < WHOLE.length; first += 1) {
      for (let last = first; last < WHOLE.length + 2; last += 1) {
        const res = await logTxt({ range: `bytes=${first}-${last}` });
        const end = Math.min(last, WHOLE.length - 1);
        expect(res.statusCode).toBe(206);
        expect(res.headers['content-range']).toBe(`bytes ${first}-${end}/${WHOLE.length}`);
        expect(res.rawPayload.equals(WHOLE.subarray(first, end + 1))).toBe(true);
      }
    }
  });

  test('bytes=a- reads to the end and bytes=-n the last n bytes', async () => {
    for (const piece of PIECES) await append(piece);
    const open = await logTxt({ range: 'bytes=3-' });
    expect(open.statusCode).toBe(206);
    expect(open.headers['content-range']).toBe(`bytes 3-${WHOLE.length - 1}/${WHOLE.length}`);
    expect(open.rawPayload.equals(WHOLE.subarray(3))).toBe(true);
    const suffix = await logTxt({ range: 'bytes=-5' });
    expect(suffix.statusCode).toBe(206);
    expect(suffix.rawPayload.equals(WHOLE.subarray(WHOLE.length - 5))).toBe(true);
    const more = await logTxt({ range: 'bytes=-1000' });
    expect(more.headers['content-range']).toBe(`bytes 0-${WHOLE.length - 1}/${WHOLE.length}`);
    expect(more.rawPayload.equals(WHOLE)).toBe(true);
  });

  test('a range past the end, bytes=-0, or any range of an empty log is 416 with bytes */length', async () => {
    await t.app.inject({ method: 'PUT', url: RUN, payload: { status: 'running' } });
    const empty = await logTxt({ range: 'bytes=0-99' });
    expect(empty.statusCode).toBe(416);
    expect(empty.headers['content-range']).toBe('bytes */0');
    expect(empty.headers['tailwater-log-cursor']).toBe(`0-${await epoch()}`);
    for (const piece of PIECES) await append(piece);
    for (const range of [`bytes=${WHOLE.length}-`, `bytes=${WHOLE.length + 5}-9999`, 'bytes=-0']) {
      const res = await logTxt({ range });
      expect(res.statusCode, range).toBe(416);
      expect(res.headers['content-range'], range).toBe(`bytes */${WHOLE.length}`);
      expect(res.json<{ error: { code: string } }>().error.code).toBe('TW_RANGE_NOT_SATISFIABLE');
    }
  });

  test('several ranges, another unit, a malformed range or an If-Range get the whole log', async () => {
    for (const piece of PIECES) await append(piece);
    const asked: Record<string, string>[] = [
      { range: 'bytes=0-1,4-5' },
      { range: 'lines=0-1' },
      { range: 'bytes=5-2' },
      { range: 'bytes=x-' },
      { range: 'bytes=0-3', 'if-range': '"some-etag"' },
    ];
    for (const headers of asked) {
      const res = await logTxt(headers);
      expect(res.statusCode, JSON.stringify(headers)).toBe(200);
      expect(res.rawPayload.equals(WHOLE)).toBe(true);
    }
  });

  test('a range ending where an entry ends names that entry; one ending inside an entry names none', async () => {
    const seqs = [];
    for (const piece of PIECES) seqs.push((await append(piece)).seq);
    const firstEnd = Buffer.byteLength(PIECES[0]!);
    const atEdge = await logTxt({ range: `bytes=0-${firstEnd - 1}` });
    expect(atEdge.headers['tailwater-log-cursor']).toBe(`${seqs[0]}-${await epoch()}`);
    const inside = await logTxt({ range: `bytes=0-${firstEnd}` });
    expect(inside.statusCode).toBe(206);
    expect(inside.headers['tailwater-log-cursor']).toBeUndefined();
  });

  test('a range of a log of several megabytes crosses its pages and entries byte for byte', async () => {
    // Lines of 70,001 bytes of 3-byte characters: entries of up to 64 KiB across every MiB.
    const line = (i: number) => `${i} ${'例'.repeat(23_330)}\n`;
    let whole = '';
    for (let i = 0; i < 50; i += 1) {
      whole += line(i);
      await append(line(i));
    }
    const bytes = Buffer.from(whole, 'utf8');
    const res = await logTxt({ range: 'bytes=1000001-3500000' });
    expect(res.statusCode).toBe(206);
    expect(res.rawPayload.equals(bytes.subarray(1_000_001, 3_500_001))).toBe(true);
  });
});

describe('the stream after a log.txt read (?logAfter=)', () => {
  /** The run's stream read to its end: its entries. */
  async function streamed(query: string): Promise<Entry[]> {
    await t.app.inject({ method: 'PUT', url: RUN, payload: { status: 'success' } });
    const url = await t.listen();
    const reader = await openSse(`${url}/api/v1/pipelines/${FQN}/runs/r1/stream?${query}`);
    await reader.closed;
    expect(endOf(reader.events)?.['reason']).toBe('runFinished');
    return entryEvents(reader.events).map((frame) => JSON.parse(frame.data) as Entry);
  }

  test('brings every event from the start but only the log written after the text read', async () => {
    await event('progress');
    await append('one\n');
    await event('metric');
    await append('two\n');
    const read = await logTxt();
    const cursor = String(read.headers['tailwater-log-cursor']);
    // Written while the text was being shown: the stream must bring these, and only these.
    await append('three\n');
    await event('late');
    const entries = await streamed(`logAfter=${encodeURIComponent(cursor)}`);
    const log = entries.filter((entry) => entry.kind === 'log').map((entry) => entry.text);
    expect(read.body + log.join('')).toBe('one\ntwo\nthree\n');
    expect(entries.filter((entry) => entry.kind !== 'log').map((entry) => entry.kind)).toEqual([
      'status',
      'progress',
      'metric',
      'late',
      'status',
    ]);
  });

  test('reads from the store none of the log it leaves out, however long that log is', async () => {
    for (let i = 0; i < 300; i += 1) await append(`line ${i}\n`);
    await event('metric');
    const read = await logTxt();
    const cursor = String(read.headers['tailwater-log-cursor']);
    await append('after\n');
    const logsRead: string[] = [];
    const readEntries = t.store.readEntries.bind(t.store);
    t.store.readEntries = async (key, options) => {
      const entries = await readEntries(key, options);
      for (const entry of entries) if (entry.kind === 'log') logsRead.push(entry.text ?? '');
      return entries;
    };
    const entries = await streamed(`logAfter=${encodeURIComponent(cursor)}`);
    expect(entries.filter((entry) => entry.kind === 'log').map((entry) => entry.text)).toEqual([
      'after\n',
    ]);
    expect(entries.map((entry) => entry.kind)).toContain('metric');
    // The 300 lines the viewer had were never read for it: only what followed the cursor.
    expect(logsRead).toEqual(['after\n']);
  });

  test('a logAfter cursor of another store epoch is not trusted: the whole log comes', async () => {
    await append('one\n');
    const { seq } = await append('two\n');
    const entries = await streamed(`logAfter=${seq}-00000000`);
    expect(entries.filter((entry) => entry.kind === 'log').map((entry) => entry.text)).toEqual([
      'one\n',
      'two\n',
    ]);
  });

  test('a malformed logAfter is 400 TW_BAD_CURSOR', async () => {
    await append('one\n');
    const res = await t.app.inject({ method: 'GET', url: `${RUN}/stream?logAfter=soon` });
    expect(res.statusCode).toBe(400);
    expect(res.json<{ error: { code: string } }>().error.code).toBe('TW_BAD_CURSOR');
  });
});
