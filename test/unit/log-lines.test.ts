import { describe, expect, test } from 'vitest';
import type { Entry } from '../../src/model/entry.js';
import { runPath } from '../helpers/api.js';
import { loggedRun } from '../helpers/logged-run.js';

// `log.txt?lines=`: lines of the log by number (docs/API.md, "Reading without streaming"), on
// every backend pair.

const FQN = 'ingest.daily';
const RUN = runPath(FQN, 'r1');
/** Lines cut over entries, an empty line, characters of 2, 3 and 4 bytes, no last line feed. */
const PIECES: { text: string; step?: string }[] = [
  { text: 'héllo\nwör', step: 'build' },
  { text: 'ld ✓\n\n' },
  { text: '😀 end\nthree\nfour\nla', step: 'test all' },
  { text: 'st' },
];
const TEXT = PIECES.map((piece) => piece.text).join('');
/** The log's lines as a reader numbers them: 1 is the first. */
const LINES = TEXT.split('\n');
const TOTAL = Buffer.byteLength(TEXT, 'utf8');

// Not spread: `t` is a getter that only answers inside a test.
const run = loggedRun(RUN, PIECES);
const { logTxt, logEntries } = run;

/** Lines first..last (1-based) as the log holds them, line feeds and all. */
function linesText(first: number, last: number): string {
  return LINES.slice(first - 1, last).join('\n') + (last < LINES.length ? '\n' : '');
}

const bytesBefore = (line: number) =>
  line === 1 ? 0 : Buffer.byteLength(linesText(1, line - 1), 'utf8');

describe('log.txt by line number (?lines=)', () => {
  test('every range first-last is 200 with exactly those lines, and says their bytes and numbers', async () => {
    expect(LINES).toHaveLength(7);
    for (let first = 1; first <= LINES.length; first += 1) {
      for (let last = first; last <= LINES.length; last += 1) {
        const res = await logTxt(`lines=${first}-${last}`);
        const label = `lines=${first}-${last}`;
        expect(res.statusCode, label).toBe(200);
        expect(res.body, label).toBe(linesText(first, last));
        const end = last === LINES.length ? TOTAL : bytesBefore(last + 1);
        expect(res.headers['tailwater-log-range'], label).toBe(
          `bytes ${bytesBefore(first)}-${end - 1}/${TOTAL}`,
        );
        expect(res.headers['tailwater-log-lines'], label).toBe(`lines ${first}-${last}/7`);
        expect(res.headers['content-range']).toBeUndefined();
      }
    }
  });

  test('first- reads to the end and names the entry it ends with; -count reads the last lines', async () => {
    const whole = await logTxt('');
    const rest = await logTxt('lines=4-');
    expect(rest.body).toBe(linesText(4, 7));
    expect(rest.headers['tailwater-log-lines']).toBe('lines 4-7/7');
    expect(rest.headers['tailwater-log-cursor']).toBe(whole.headers['tailwater-log-cursor']);
    const tail = await logTxt('lines=-2');
    expect(tail.body).toBe('four\nlast');
    expect(tail.headers['tailwater-log-lines']).toBe('lines 6-7/7');
    // More lines than the log has: all of them.
    expect((await logTxt('lines=-100')).body).toBe(TEXT);
    expect((await logTxt('lines=3-900')).headers['tailwater-log-lines']).toBe('lines 3-7/7');
  });

  test('a log that ends with a line feed has no line after it', async () => {
    await run.t.app.inject({ method: 'POST', url: `${RUN}/logs`, payload: { text: '\n' } });
    expect((await logTxt('lines=-1')).body).toBe('last\n');
    const past = await logTxt('lines=8-');
    expect(past.statusCode).toBe(416);
    expect(past.headers['tailwater-log-lines']).toBe('lines */7');
  });

  test('lines the log does not have are 416 TW_RANGE_NOT_SATISFIABLE with the number it has', async () => {
    for (const query of ['lines=8-', 'lines=8-9', 'lines=-0']) {
      const res = await logTxt(query);
      expect(res.statusCode, query).toBe(416);
      expect(res.headers['tailwater-log-lines'], query).toBe('lines */7');
      expect(res.headers['tailwater-log-range'], query).toBe(`bytes */${TOTAL}`);
      expect(res.json<{ error: { code: string } }>().error.code).toBe('TW_RANGE_NOT_SATISFIABLE');
    }
    // A run with no log has no lines at all.
    const empty = runPath(FQN, 'empty');
    await run.t.app.inject({ method: 'PUT', url: empty, payload: { status: 'running' } });
    const none = await run.t.app.inject({ method: 'GET', url: `${empty}/log.txt?lines=1-` });
    expect(none.statusCode).toBe(416);
    expect(none.headers['tailwater-log-lines']).toBe('lines */0');
  });

  test('what is not a line range is 400 TW_BAD_QUERY, and the log is unharmed', async () => {
    const bad = ['0-1', '0-', '5-3', 'abc', '-', '1-2-3', '01-2', '1.5-2', 'lines=1-2'];
    for (const query of bad) {
      const res = await logTxt(`lines=${encodeURIComponent(query)}`);
      expect(res.statusCode, query).toBe(400);
      expect(res.json<{ error: { code: string } }>().error.code).toBe('TW_BAD_QUERY');
    }
    const both = await logTxt('lines=1-2&bytes=0-3');
    expect(both.statusCode).toBe(400);
    const withRange = await logTxt('lines=1-2', { range: 'bytes=0-3' });
    expect(withRange.statusCode).toBe(400);
    expect((await logTxt('')).body).toBe(TEXT);
  });

  test('with ?entries=true the first line is marked with its entry though the entry began before it', async () => {
    const entries = await logEntries();
    const mark = (entry: Entry) =>
      `\u0000${new Date(entry.time).toISOString()} ${encodeURIComponent(entry.step ?? '')}\u0000`;
    // Line 2 begins inside the first entry ('héllo\nwör'), line 5 inside the third.
    const two = await logTxt('entries=true&lines=2-3');
    expect(two.headers['tailwater-log-prefix']).toBe('entries');
    expect(two.body).toBe(`${mark(entries[0]!)}wör${mark(entries[1]!)}ld ✓\n\n`);
    const five = await logTxt('entries=true&lines=5-');
    expect(five.body).toBe(`${mark(entries[2]!)}three\nfour\nla${mark(entries[3]!)}st`);
  });

  test('with ?timestamps=true each line of the range is prefixed', async () => {
    const res = await logTxt('timestamps=true&lines=2-3');
    expect(res.statusCode).toBe(200);
    const lines = res.body.split('\n');
    expect(lines[0]).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z wörld ✓$/);
    expect(lines[1]).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z $/);
    expect(res.headers['tailwater-log-lines']).toBe('lines 2-3/7');
  });
});
