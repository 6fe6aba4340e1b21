import { describe, expect, test } from 'vitest';
import { LogBuffer, MARKER_END, MARKER_GROUP } from '../src/run/log-buffer.js';
import { levelMarks } from '../src/run/level-marks.js';
import { isMarked, parseMark, parseTime } from '../src/run/line-prefix.js';
import { lineRangeOf, lineHash } from '../src/run/line-links.js';
import {
  LEVEL_ERROR,
  LEVEL_NONE,
  LEVEL_WARNING,
  levelPatterns,
  storedLevelRules,
} from '../src/run/log-levels.js';
import { rowsOf, sectionsOf } from '../src/run/log-sections.js';
import type { Section } from '../src/run/log-sections.js';

const T0 = Date.UTC(2026, 10, 29, 8, 0, 0, 123);
const iso = (ms: number) => new Date(ms).toISOString();

const mark = (ms: number, step = '') => `\u0000${iso(ms)} ${encodeURIComponent(step)}\u0000`;

describe('history read with entry marks (log.txt?entries=true)', () => {
  test('each line keeps its text and gets the time and step of the mark before it', () => {
    const buffer = new LogBuffer();
    buffer.appendMarked(`${mark(T0, 'build')}make all\ncc a.c\n${mark(T0 + 5)}no step\n`);
    expect(buffer.toArray()).toEqual(['make all', 'cc a.c', 'no step']);
    expect([0, 1, 2].map((i) => buffer.timeOf(i))).toEqual([T0, T0, T0 + 5]);
    expect([0, 1, 2].map((i) => buffer.stepOf(i))).toEqual(['build', 'build', '']);
  });

  test('a line cut across entries and pages keeps its first entry’s time; a step is percent-decoded', () => {
    const buffer = new LogBuffer();
    buffer.appendMarked(`${mark(T0, 'test all')}😀 st`);
    // The next page begins with the same entry's mark again (the rest of it), then another.
    buffer.appendMarked(`${mark(T0, 'test all')}art\n${mark(T0 + 1000, 'test all')}do`);
    buffer.appendMarked(`${mark(T0 + 2000, 'test all')}ne\n`);
    expect(buffer.toArray()).toEqual(['😀 start', 'done']);
    expect(buffer.stepOf(0)).toBe('test all');
    expect([buffer.timeOf(0), buffer.timeOf(1)]).toEqual([T0, T0 + 1000]);
  });

  test('marks are not text: levels and markers are the lines’ own', () => {
    const buffer = new LogBuffer();
    buffer.appendMarked(`${mark(T0, 'ERROR')}fine\n${mark(T0, 'x')}::group::G\nan ERROR\n`);
    expect(buffer.toArray()).toEqual(['fine', '::group::G', 'an ERROR']);
    expect([0, 1, 2].map((i) => buffer.levelOf(i))).toEqual([LEVEL_NONE, LEVEL_NONE, LEVEL_ERROR]);
    expect(buffer.markerOf(1)).toBe(MARKER_GROUP);
  });

  test('a page read in ranges gives the lines, times, steps, levels and markers entries would', () => {
    // Seeded, so a failure is the same every run.
    let seed = 7;
    const random = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    const words = ['ok', 'ERROR x', 'WARN y', '::group::G', '::endgroup::', 'a b c', ''];
    const entries = Array.from({ length: 400 }, (_, n) => {
      const lines = Array.from({ length: 1 + random(3) }, () => words[random(words.length)]);
      // Some entries end mid-line: the next one goes on with it.
      const text = lines.join('\n') + (random(4) === 0 ? '' : '\n');
      return {
        text: text === '' ? 'z' : text,
        time: T0 + n,
        step: ['', 'ERROR', 'build'][random(3)]!,
      };
    });
    const expected = new LogBuffer();
    for (const entry of entries) expected.append(entry.text, entry);
    // The server's pages: byte ranges of the log, a mark before each entry that begins in one.
    const offsets: number[] = [];
    let length = 0;
    for (const entry of entries) {
      offsets.push(length);
      length += entry.text.length;
    }
    for (const pageChars of [1, 7, 64, 1000, length]) {
      const buffer = new LogBuffer();
      for (let from = 0; from < length; from += pageChars) {
        let page = '';
        entries.forEach((entry, n) => {
          const at = offsets[n]!;
          const start = Math.max(from, at);
          const end = Math.min(from + pageChars, at + entry.text.length);
          if (start >= end) return;
          if (start === at) page += mark(entry.time, entry.step);
          page += entry.text.slice(start - at, end - at);
        });
        buffer.appendMarked(page);
      }
      const all = (b: LogBuffer) =>
        b.toArray().map((line, i) => [line, b.timeOf(i), b.stepOf(i), b.levelOf(i), b.markerOf(i)]);
      expect(all(buffer), `pages of ${pageChars}`).toEqual(all(expected));
      const leveled = (b: LogBuffer) => {
        const found: number[][] = [];
        b.forEachLeveled((index, level) => found.push([index, level]));
        return found;
      };
      expect(leveled(buffer), `pages of ${pageChars}`).toEqual(leveled(expected));
      expect(buffer.errorCount).toBe(expected.errorCount);
    }
  });

  test('marked text read as it arrives, cut anywhere (inside marks too), reads as if whole', () => {
    const whole =
      `${mark(T0, 'build all')}make\nERROR x\n${mark(T0 + 1)}::group::G\nin` +
      `${mark(T0 + 2, 'test')} G\n::endgroup::\n${mark(T0 + 3)}${mark(T0 + 4, '%')}last`;
    const all = (b: LogBuffer) =>
      b.toArray().map((line, i) => [line, b.timeOf(i), b.stepOf(i), b.levelOf(i), b.markerOf(i)]);
    const expected = new LogBuffer();
    expected.appendMarked(whole);
    expect(expected.toArray()).toEqual([
      'make',
      'ERROR x',
      '::group::G',
      'in G',
      '::endgroup::',
      'last',
    ]);
    for (let size = 1; size <= whole.length; size += 1) {
      const buffer = new LogBuffer();
      for (let at = 0; at < whole.length; at += size)
        buffer.appendMarked(whole.slice(at, at + size));
      expect(all(buffer), `pieces of ${size}`).toEqual(all(expected));
      expect(buffer.errorCount).toBe(1);
    }
  });

  test('past its limit, a buffer of marked pages keeps the newest lines readable', () => {
    const line = (n: number) => `line ${String(n).padStart(5, '0')}`;
    const buffer = new LogBuffer(2000);
    for (let page = 0; page < 20; page += 1) {
      let text = '';
      for (let n = page * 50; n < page * 50 + 50; n += 1) {
        // Every tenth entry is cut in two, so some lines are pieces of their own.
        text +=
          n % 10 === 0
            ? `${mark(T0 + n)}${line(n).slice(0, 4)}${mark(T0 + n)}${line(n).slice(4)}\n`
            : `${mark(T0 + n)}${line(n)}\n`;
      }
      buffer.appendMarked(text);
    }
    expect(buffer.dropped).toBeGreaterThan(0);
    expect(buffer.dropped + buffer.length).toBe(1000);
    for (let i = 0; i < buffer.length; i += 1) {
      expect(buffer.line(i)).toBe(line(buffer.dropped + i));
      expect(buffer.timeOf(i)).toBe(T0 + buffer.dropped + i);
    }
  });

  test('a mark’s fields: the time read digit by digit as Date.parse reads it, the step decoded', () => {
    for (const ms of [0, T0, Date.UTC(1999, 11, 31, 23, 59, 59, 999)]) {
      const text = `x${iso(ms)}`;
      expect(parseTime(text, 1, text.length)).toBe(ms);
    }
    expect(parseTime('2026-11-29T08:00:00+01:00', 0, 25)).toBe(Date.UTC(2026, 10, 29, 7));
    const text = `${iso(T0)} a%20b`;
    expect(parseMark(text, 0, text.length)).toEqual({ time: T0, step: 'a b' });
    expect(parseMark(`${iso(T0)} `, 0, 25)).toEqual({ time: T0, step: '' });
  });

  test('Tailwater-Log-Prefix: entries means marks; none (an older server) is plain text', () => {
    expect(isMarked('entries')).toBe(true);
    expect(isMarked('timestamps,steps')).toBe(false);
    expect(isMarked(null)).toBe(false);
  });
});

describe('lines of live entries', () => {
  test('take their entry’s time and step; a line an entry continues keeps its first entry’s', () => {
    const buffer = new LogBuffer();
    buffer.append('one\ntw', { time: T0, step: 'build' });
    buffer.append('o\nthree\n', { time: T0 + 9, step: 'test' });
    expect(buffer.toArray()).toEqual(['one', 'two', 'three']);
    expect([0, 1, 2].map((i) => buffer.timeOf(i))).toEqual([T0, T0, T0 + 9]);
    expect([0, 1, 2].map((i) => buffer.stepOf(i))).toEqual(['build', 'build', 'test']);
  });

  test('keep their metadata when the oldest lines are let go', () => {
    const buffer = new LogBuffer(100);
    for (let n = 0; n < 40; n += 1) {
      buffer.append(`line ${n} ${n % 7 === 0 ? 'ERROR' : 'ok'}\n`, { time: T0 + n, step: `s${n}` });
    }
    expect(buffer.dropped).toBeGreaterThan(0);
    for (let i = 0; i < buffer.length; i += 1) {
      const n = buffer.dropped + i;
      expect(buffer.line(i)).toBe(`line ${n} ${n % 7 === 0 ? 'ERROR' : 'ok'}`);
      expect(buffer.timeOf(i)).toBe(T0 + n);
      expect(buffer.stepOf(i)).toBe(`s${n}`);
      expect(buffer.levelOf(i)).toBe(n % 7 === 0 ? LEVEL_ERROR : LEVEL_NONE);
    }
    // The count and the gutter's list of errors let go of the lines let go, too.
    const held = Array.from({ length: buffer.length }, (_, i) => buffer.dropped + i);
    expect(buffer.errorCount).toBe(held.filter((n) => n % 7 === 0).length);
    expect(levelMarks(buffer, 1e6).map((mark) => buffer.dropped + mark.line)).toEqual(
      held.filter((n) => n % 7 === 0),
    );
  });
});

describe('levels', () => {
  const levels = (text: string, buffer = new LogBuffer()) => {
    buffer.append(text);
    return Array.from({ length: buffer.length }, (_, i) => buffer.levelOf(i));
  };

  test('by default: ANSI red and yellow, ERROR, FATAL, Traceback, WARN/WARNING, ::error/::warning', () => {
    const text = [
      'all fine',
      '\u001b[31mred text\u001b[0m',
      '\u001b[1;91mbright red\u001b[0m',
      '\u001b[33myellow\u001b[0m',
      '2026 ERROR db: gone',
      'FATAL: no disk',
      'Traceback (most recent call last):',
      'WARN slow',
      'a WARNING here',
      '::error file=a.ts::broken',
      '::warning::careful',
      'errors are not ERRORS', // whole words only
      '\u001b[32mgreen\u001b[0m',
    ].join('\n');
    expect(levels(`${text}\n`)).toEqual([0, 2, 2, 1, 2, 2, 2, 1, 1, 2, 1, 0, 0]);
  });

  test('an error outranks a warning on the same line', () => {
    expect(levels('WARN then ERROR\n')).toEqual([LEVEL_ERROR]);
  });

  test('a line that goes on over entries is counted once, at the level of its whole text', () => {
    const buffer = new LogBuffer();
    buffer.append('ERR');
    buffer.append('OR here, ');
    buffer.append('ERROR again\nWARN\n');
    expect(buffer.errorCount).toBe(1);
    expect(levelMarks(buffer, 100).map((mark) => [mark.line, mark.level])).toEqual([
      [0, LEVEL_ERROR],
      [1, LEVEL_WARNING],
    ]);
  });

  test('rules of a browser’s own replace the defaults; a broken setting is ignored', () => {
    const storage = (value: string) => ({ getItem: () => value });
    const rules = storedLevelRules(storage('{"error":["boom"],"warning":["meh"]}'));
    expect(rules).toEqual({ error: ['boom'], warning: ['meh'] });
    const buffer = new LogBuffer(undefined, levelPatterns(rules));
    expect(levels('boom\nmeh\nERROR\n', buffer)).toEqual([LEVEL_ERROR, LEVEL_WARNING, 0]);
    expect(storedLevelRules(storage('not json')).error).toContain(String.raw`\bERROR\b`);
  });

  test('the gutter’s marks are placed by line fraction, an error winning its stretch', () => {
    const buffer = new LogBuffer();
    const lines = Array.from({ length: 100 }, (_, n) =>
      n === 10 ? 'WARN' : n === 11 ? 'ERROR' : n === 75 ? 'WARN' : `ok ${n}`,
    );
    buffer.append(`${lines.join('\n')}\n`);
    expect(levelMarks(buffer, 20)).toEqual([
      { line: 11, level: LEVEL_ERROR, fraction: 0.11 },
      { line: 75, level: LEVEL_WARNING, fraction: 0.75 },
    ]);
    expect(levelMarks(buffer, 1000)).toHaveLength(3);
  });
});

describe('sections', () => {
  const buffered = (text: string, meta?: { time?: number; step?: string }) => {
    const buffer = new LogBuffer();
    buffer.append(text, meta);
    return buffer;
  };

  test('::group:: … ::endgroup:: and ##[group] … ##[endgroup], nested, with titles and lines', () => {
    const buffer = buffered(
      [
        'before',
        '::group::Install deps',
        'npm ci',
        '##[group]Nested',
        'inner',
        '##[endgroup]',
        'added 12 packages',
        '::endgroup::',
        'after',
        '::endgroup::', // no group open: an ordinary line
      ].join('\n') + '\n',
    );
    expect([1, 3].map((i) => buffer.markerOf(i))).toEqual([MARKER_GROUP, MARKER_GROUP]);
    expect(buffer.markerOf(7)).toBe(MARKER_END);
    const sections = sectionsOf(buffer);
    expect(
      sections.map(({ title, first, last, depth, lines, open }) => ({
        title,
        first,
        last,
        depth,
        lines,
        open,
      })),
    ).toEqual([
      { title: 'Install deps', first: 1, last: 7, depth: 0, lines: 5, open: false },
      { title: 'Nested', first: 3, last: 5, depth: 1, lines: 1, open: false },
    ]);
  });

  test('a group not closed yet runs to the last line; a log without markers or steps has none', () => {
    expect(sectionsOf(buffered('::group::Build\nmake\n')).map((s) => [s.last, s.open])).toEqual([
      [1, true],
    ]);
    expect(sectionsOf(buffered('a\nb\n'))).toEqual([]);
  });

  test('lines of one step are its section; a step change ends the groups open in the last', () => {
    const buffer = new LogBuffer();
    buffer.append('checkout\n::group::Fetch\ngit fetch\n', { time: T0, step: 'setup' });
    buffer.append('make\nERROR: broke\n', { time: T0 + 2500, step: 'build' });
    const sections = sectionsOf(buffer);
    expect(sections.map((s) => [s.kind, s.title, s.first, s.last, s.lines, s.error])).toEqual([
      ['step', 'setup', 0, 2, 3, false],
      ['group', 'Fetch', 1, 2, 1, false],
      ['step', 'build', 3, 4, 2, true],
    ]);
    // Duration: from its first line's time to its last's.
    expect(sections[0]!.durationMs).toBe(0);
    expect(sections.map((s) => s.key)).toEqual(['step:1', 'group:2', 'step:4']);
  });

  test('an error line marks every section it is in', () => {
    const buffer = buffered(
      '::group::A\n::group::B\nERROR\n::endgroup::\n::endgroup::\n::group::C\nok\n',
    );
    expect(sectionsOf(buffer).map((s) => [s.title, s.error])).toEqual([
      ['A', true],
      ['B', true],
      ['C', false],
    ]);
  });

  test('rows: a folded section is its header row alone, lines keep their indices', () => {
    const buffer = new LogBuffer();
    buffer.append('a\n', { step: 'one' });
    buffer.append('::group::G\nb\nc\n::endgroup::\nd\n', { step: 'two' });
    const sections = sectionsOf(buffer);
    const all = (folded: (s: Section) => boolean) => {
      const rows = rowsOf(buffer.length, sections, folded);
      return Array.from({ length: rows.length }, (_, row) => rows.at(row));
    };
    // Step headers are -1 - their section's index: one (0), two (1); the group is a line (1).
    expect(all(() => false)).toEqual([-1, 0, -2, 1, 2, 3, 4, 5]);
    expect(all((s) => s.kind === 'group')).toEqual([-1, 0, -2, 1, 5]);
    expect(all((s) => s.title === 'two')).toEqual([-1, 0, -2]);
    const rows = rowsOf(buffer.length, sections, (s) => s.kind === 'group');
    // A hidden line's row is the header that hides it.
    expect([1, 2, 3, 4, 5].map((line) => rows.rowOf(line))).toEqual([3, 3, 3, 3, 4]);
  });
});

describe('line links', () => {
  test('#L120 and #L120-L140 (either order); anything else is none', () => {
    expect(lineRangeOf('#L120')).toEqual({ first: 120, last: 120 });
    expect(lineRangeOf('#L140-L120')).toEqual({ first: 120, last: 140 });
    expect(lineRangeOf('#L0')).toBeNull();
    expect(lineRangeOf('#L12-')).toBeNull();
    expect(lineRangeOf('#top')).toBeNull();
    expect(lineHash({ first: 3, last: 3 })).toBe('#L3');
    expect(lineHash({ first: 3, last: 9 })).toBe('#L3-L9');
  });
});
