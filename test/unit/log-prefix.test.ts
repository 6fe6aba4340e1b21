import type { LightMyRequestResponse } from 'fastify';
import { describe, expect, test } from 'vitest';
import type { Entry } from '../../src/model/entry.js';
import { runPath } from '../helpers/api.js';
import { loggedRun } from '../helpers/logged-run.js';

// `log.txt?timestamps=true&steps=true`: each line begins with its entry's time and step
// (docs/API.md, "Reading without streaming"), whole or by byte range.

const FQN = 'ingest.daily';
const RUN = runPath(FQN, 'r1');
/** A line cut over two entries, characters of 2, 3 and 4 bytes, a step with a space in it. */
const PIECES: { text: string; step?: string }[] = [
  { text: 'héllo\nwör', step: 'build' },
  { text: 'ld ✓\n' },
  { text: '😀 end\nlast\n', step: 'test all' },
];
const PLAIN = Buffer.from(PIECES.map((piece) => piece.text).join(''), 'utf8');

const { logTxt, logEntries } = loggedRun(RUN, PIECES);

/** The prefixed log as it must read, from the entries' own times and steps. */
async function expected(prefix: (entry: Entry) => string): Promise<string> {
  let text = '';
  let atLineStart = true;
  for (const entry of await logEntries()) {
    for (const part of (entry.text ?? '').split(/(?<=\n)/)) {
      text += (atLineStart ? prefix(entry) : '') + part;
      atLineStart = part.endsWith('\n');
    }
  }
  return text;
}

const iso = (entry: Entry) => new Date(entry.time).toISOString();

describe('log.txt with each line prefixed', () => {
  test('?timestamps=true puts the time of the entry a line began in before each line', async () => {
    const res = await logTxt('timestamps=true');
    expect(res.statusCode).toBe(200);
    expect(res.headers['tailwater-log-prefix']).toBe('timestamps');
    expect(res.body).toBe(await expected((entry) => `${iso(entry)} `));
    const lines = res.body.split('\n').slice(0, -1);
    expect(lines).toHaveLength(4);
    for (const line of lines) expect(line).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z /);
    // The line cut over two entries has the first one's time, once.
    const entries = await logEntries();
    expect(lines[1]).toBe(`${iso(entries[0]!)} wörld ✓`);
  });

  test('?steps=true adds the step, percent-encoded, and leaves it empty for an entry without one', async () => {
    const res = await logTxt('timestamps=true&steps=true');
    const body = await expected(
      (entry) => `${iso(entry)} ${encodeURIComponent(entry.step ?? '')} `,
    );
    expect(res.body).toBe(body);
    expect(res.headers['tailwater-log-prefix']).toBe('timestamps,steps');
    expect(res.body).toContain(' test%20all 😀 end\n');
    const stepsOnly = await logTxt('steps=1');
    expect(stepsOnly.body).toBe('build héllo\nbuild wörld ✓\ntest%20all 😀 end\ntest%20all last\n');
  });

  test('without the parameters (or with false) the log is its own text, Content-Length and all', async () => {
    for (const query of ['', 'timestamps=false&steps=0']) {
      const res = await logTxt(query);
      expect(res.rawPayload.equals(PLAIN)).toBe(true);
      expect(res.headers['content-length']).toBe(String(PLAIN.length));
      expect(res.headers['tailwater-log-prefix']).toBeUndefined();
    }
  });

  test('a range counts the log’s own bytes; its pages, joined, are the prefixed log byte for byte', async () => {
    const whole = (await logTxt('timestamps=true&steps=true')).rawPayload;
    for (let page = 1; page <= PLAIN.length; page += 1) {
      const parts: Buffer[] = [];
      let cursor: string | undefined;
      for (let from = 0; from < PLAIN.length; from += page) {
        const last = Math.min(from + page, PLAIN.length) - 1;
        const res: LightMyRequestResponse = await logTxt(
          `timestamps=true&steps=true&bytes=${from}-${from + page - 1}`,
        );
        expect(res.statusCode).toBe(200);
        expect(res.headers['tailwater-log-range']).toBe(`bytes ${from}-${last}/${PLAIN.length}`);
        expect(res.headers['content-range']).toBeUndefined();
        parts.push(res.rawPayload);
        cursor = res.headers['tailwater-log-cursor'] as string | undefined;
      }
      expect(Buffer.concat(parts).equals(whole), `pages of ${page} bytes`).toBe(true);
      // The last page ends where the last entry ends: it names it, prefixed or not.
      expect(cursor).toBe((await logTxt('')).headers['tailwater-log-cursor']);
    }
  });

  test('a Range header with prefixes or marks is 400 TW_BAD_QUERY naming ?bytes= (a 206 must hold only the range)', async () => {
    for (const query of ['timestamps=true', 'steps=1', 'entries=true', 'bytes=0-3']) {
      const res = await logTxt(query, { range: 'bytes=0-3' });
      expect(res.statusCode, query).toBe(400);
      const error = res.json<{ error: { code: string; message: string } }>().error;
      expect(error.code).toBe('TW_BAD_QUERY');
      expect(error.message).toContain('?bytes=');
    }
  });

  test('?bytes= of the plain log is 200 with exactly those bytes, its length and Tailwater-Log-Range', async () => {
    const res = await logTxt('bytes=2-9');
    expect(res.statusCode).toBe(200);
    expect(res.rawPayload.equals(PLAIN.subarray(2, 10))).toBe(true);
    expect(res.headers['content-length']).toBe('8');
    expect(res.headers['tailwater-log-range']).toBe(`bytes 2-9/${PLAIN.length}`);
    const suffix = await logTxt('bytes=-5');
    expect(suffix.rawPayload.equals(PLAIN.subarray(PLAIN.length - 5))).toBe(true);
    const past = await logTxt(`entries=true&bytes=${PLAIN.length}-`);
    expect(past.statusCode).toBe(416);
    expect(past.headers['tailwater-log-range']).toBe(`bytes */${PLAIN.length}`);
    expect(past.headers['tailwater-log-cursor']).toBe(
      (await logTxt('')).headers['tailwater-log-cursor'],
    );
  });

  test('a ?bytes= that is not a range is 400 TW_BAD_QUERY, and the log is unharmed', async () => {
    for (const bad of ['abc', '5-3', '-', '1-2-3', 'bytes=0-1']) {
      const res = await logTxt(`entries=true&bytes=${encodeURIComponent(bad)}`);
      expect(res.statusCode, bad).toBe(400);
      expect(res.json<{ error: { code: string } }>().error.code).toBe('TW_BAD_QUERY');
    }
    expect((await logTxt('')).rawPayload.equals(PLAIN)).toBe(true);
  });

  test('a value other than true/false/1/0 is 400 TW_BAD_QUERY', async () => {
    const res = await logTxt('timestamps=yes');
    expect(res.statusCode).toBe(400);
    expect(res.json<{ error: { code: string } }>().error.code).toBe('TW_BAD_QUERY');
  });
});

describe('log.txt with a mark before each entry (?entries=true)', () => {
  const mark = (entry: Entry) =>
    `\u0000${iso(entry)} ${encodeURIComponent(entry.step ?? '')}\u0000`;

  test('each entry’s text comes after U+0000, its time, a space, its step, U+0000', async () => {
    const res = await logTxt('entries=true');
    expect(res.statusCode).toBe(200);
    expect(res.headers['tailwater-log-prefix']).toBe('entries');
    const entries = await logEntries();
    expect(res.body).toBe(entries.map((entry) => mark(entry) + (entry.text ?? '')).join(''));
    expect(res.body).toContain(' test%20all\u0000😀 end\n'); // the step, percent-encoded
  });

  test('a range counts the log’s own bytes; each entry that begins in a page is marked there', async () => {
    const entries = await logEntries();
    const bytes = entries.map((entry) => Buffer.from(entry.text ?? '', 'utf8'));
    for (let page = 1; page <= PLAIN.length; page += 1) {
      let text = Buffer.alloc(0);
      for (let from = 0; from < PLAIN.length; from += page) {
        const res = await logTxt(`entries=true&bytes=${from}-${from + page - 1}`);
        expect(res.statusCode).toBe(200);
        expect(res.headers['tailwater-log-range']).toBe(
          `bytes ${from}-${Math.min(from + page, PLAIN.length) - 1}/${PLAIN.length}`,
        );
        // Without its marks, a page is exactly its bytes of the log.
        const body = res.rawPayload;
        const unmarked = Buffer.from(
          body
            .toString('latin1')
            .split('\u0000')
            .filter((_, index) => index % 2 === 0)
            .join(''),
          'latin1',
        );
        expect(unmarked.equals(PLAIN.subarray(from, from + page)), `${from}+${page}`).toBe(true);
        text = Buffer.concat([text, body]);
      }
      // Each mark is its entry's, and comes before that entry's bytes.
      let at = 0;
      const whole = text.toString('latin1');
      for (const [index, entry] of entries.entries()) {
        const head = Buffer.from(mark(entry), 'utf8').toString('latin1');
        const found = whole.indexOf(head, at);
        expect(found, `entry ${index}, pages of ${page}`).toBeGreaterThanOrEqual(0);
        at = found + head.length;
        expect(bytes[index]!.length).toBeGreaterThan(0);
      }
    }
  });
});
