import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Entry } from '../../src/model/entry.js';
import { defaultSettings, loadSettings, SettingsError } from '../../src/model/settings.js';
import type { StreamKey } from '../../src/model/stream-key.js';
import { streamId, topicKey } from '../../src/model/stream-key.js';
import type { RetentionSettings } from '../../src/store/retention.js';
import { RetentionLoop, retentionPolicy } from '../../src/store/retention.js';
import { SqliteStore } from '../../src/store/sqlite.js';
import { RUNS_FEED_TOPIC } from '../../src/store/store.js';
import { topicStreamPath } from '../helpers/api.js';
import { liveApps } from '../helpers/app.js';
import { hasSeq, range, seqOfId } from '../helpers/sse.js';
import type { SseEvent } from '../helpers/sse.js';
import { sleep, until } from '../helpers/wait.js';

// Topic retention (src/store/retention.ts, Store.trimTopic) and what viewers are told of it:
// `gap {"reason":"retention","fromSeq","toSeq"}`, then what remains, with no other loss.

const cleanups: Array<() => Promise<void> | void> = [];
const { start, open, closeAll } = liveApps({ pollSeconds: 0.05 });

afterEach(async () => {
  vi.restoreAllMocks();
  await closeAll();
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

// ---- helpers ----------------------------------------------------------------------------

function retentionSettings(overrides: Partial<RetentionSettings> = {}): RetentionSettings {
  const { topicMaxEntries, topicMaxAgeSeconds, retentionIntervalSeconds, retention, runRetention } =
    defaultSettings();
  return {
    topicMaxEntries,
    topicMaxAgeSeconds,
    retentionIntervalSeconds,
    retention,
    runRetention,
    ...overrides,
  };
}

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tailwater-retention-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function tempStore(): SqliteStore {
  const store = new SqliteStore(join(tempDir(), 'tailwater.db'));
  cleanups.push(() => store.close());
  return store;
}

/** Appends `count` events whose data are their seqs (from `from`), in batches of 1000. */
async function fill(
  store: { appendEvents: SqliteStore['appendEvents'] },
  key: StreamKey,
  count: number,
  from = 1,
): Promise<void> {
  for (let done = 0; done < count; done += 1000) {
    const size = Math.min(1000, count - done);
    await store.appendEvents(
      key,
      Array.from({ length: size }, (_, i) => ({ kind: 'tick', data: from + done + i })),
    );
  }
}

async function seqsOf(store: SqliteStore, key: StreamKey): Promise<number[]> {
  return (await store.readEntries(key, { afterSeq: 0, limit: 100_000 })).map((e) => e.seq);
}

/** The frames as short labels: an entry by its seq, a gap by its range, a cursor by its seq. */
function frames(events: readonly SseEvent[]): string[] {
  return events.map((event) => {
    if (event.event === 'gap') {
      const gap = JSON.parse(event.data) as { reason: string; fromSeq?: number; toSeq?: number };
      return `gap ${gap.reason} ${gap.fromSeq}-${gap.toSeq}`;
    }
    if (event.event === 'cursor') return `cursor ${seqOfId(event.id)}`;
    return event.id === undefined ? event.event : String(seqOfId(event.id));
  });
}

const labels = (from: number, to: number) => range(from, to).map(String);

// ---- the policy -------------------------------------------------------------------------

describe('retentionPolicy', () => {
  const NOW = 1_800_000_000_000;

  it('uses the defaults for a topic without an override: 1,000,000 entries and no age limit', () => {
    expect(retentionPolicy('prices', retentionSettings(), NOW)).toEqual({
      maxEntries: 1_000_000,
      olderThanMs: undefined,
    });
    const aged = retentionSettings({ topicMaxEntries: 50, topicMaxAgeSeconds: 3600 });
    expect(retentionPolicy('prices', aged, NOW)).toEqual({
      maxEntries: 50,
      olderThanMs: NOW - 3_600_000,
    });
  });

  it("lets a topic's override beat the defaults, field by field", () => {
    const settings = retentionSettings({
      topicMaxEntries: 1000,
      topicMaxAgeSeconds: 600,
      retention: {
        iceberg: { maxEntries: 100_000, maxAgeSeconds: 604_800 },
        counted: { maxEntries: 7 },
        aged: { maxAgeSeconds: 30 },
      },
    });
    expect(retentionPolicy('iceberg', settings, NOW)).toEqual({
      maxEntries: 100_000,
      olderThanMs: NOW - 604_800_000,
    });
    // What the override leaves out comes from the defaults.
    expect(retentionPolicy('counted', settings, NOW)).toEqual({
      maxEntries: 7,
      olderThanMs: NOW - 600_000,
    });
    expect(retentionPolicy('aged', settings, NOW)).toEqual({
      maxEntries: 1000,
      olderThanMs: NOW - 30_000,
    });
    // An override names one topic only.
    expect(retentionPolicy('icebergs', settings, NOW)).toEqual({
      maxEntries: 1000,
      olderThanMs: NOW - 600_000,
    });
  });

  it('reads 0 as no limit, and an override of 0 lifts a default limit', () => {
    const unlimited = retentionSettings({ topicMaxEntries: 0, topicMaxAgeSeconds: 0 });
    expect(retentionPolicy('prices', unlimited, NOW)).toEqual({
      maxEntries: 0,
      olderThanMs: undefined,
    });
    const settings = retentionSettings({
      topicMaxEntries: 10,
      topicMaxAgeSeconds: 60,
      retention: { audit: { maxEntries: 0, maxAgeSeconds: 0 } },
    });
    expect(retentionPolicy('audit', settings, NOW)).toEqual({
      maxEntries: 0,
      olderThanMs: undefined,
    });
  });
});

// ---- the loop ---------------------------------------------------------------------------

describe('RetentionLoop', () => {
  it('trims every topic by its own policy in one pass, the runs feed included, and keeps the runs', async () => {
    const store = tempStore();
    await fill(store, topicKey('plain'), 10);
    await fill(store, topicKey('small'), 10);
    await fill(store, topicKey('keep'), 10);
    await fill(store, topicKey('aged'), 4);
    const lastOld = (await store.readEntries(topicKey('aged'), { afterSeq: 3, limit: 1 }))[0]!;
    await until(() => Date.now() > Date.parse(lastOld.time), 'the clock to move on');
    await fill(store, topicKey('aged'), 3, 5);
    const firstNew = (await store.readEntries(topicKey('aged'), { afterSeq: 4, limit: 1 }))[0]!;
    for (let i = 1; i <= 7; i += 1) await store.putRun('etl.daily', `r${i}`, { status: 'running' });

    // "now" is one minute after the first new `aged` entry: with a 60 s limit it is the oldest kept.
    const now = Date.parse(firstNew.time) + 60_000;
    const settings = retentionSettings({
      topicMaxEntries: 5,
      retention: {
        small: { maxEntries: 2 },
        keep: { maxEntries: 0 },
        aged: { maxEntries: 0, maxAgeSeconds: 60 },
      },
    });
    const loop = new RetentionLoop(store, settings, undefined, () => now);

    expect(await loop.runOnce()).toBe(5 + 8 + 0 + 4 + 2);
    expect(await seqsOf(store, topicKey('plain'))).toEqual(range(6, 10));
    expect(await seqsOf(store, topicKey('small'))).toEqual([9, 10]);
    expect(await seqsOf(store, topicKey('keep'))).toEqual(range(1, 10));
    expect(await seqsOf(store, topicKey('aged'))).toEqual([5, 6, 7]);
    expect(await seqsOf(store, topicKey(RUNS_FEED_TOPIC))).toEqual(range(3, 7));
    for (const [topic, firstSeq] of [
      ['plain', 6],
      ['small', 9],
      ['keep', 1],
      ['aged', 5],
      [RUNS_FEED_TOPIC, 3],
    ] as const) {
      expect(await store.bounds(topicKey(topic)), topic).toMatchObject({ firstSeq });
    }
    expect((await store.bounds(topicKey('aged'))).lastSeq).toBe(7);
    // Runs are never trimmed.
    expect((await store.listRuns('etl.daily', { limit: 10 })).items).toHaveLength(7);
    expect(await store.getRun('etl.daily', 'r1')).toMatchObject({ status: 'running' });

    // A second pass finds nothing more to remove.
    expect(await loop.runOnce()).toBe(0);
  });

  it('skips the store entirely for a topic whose policy sets no limit', async () => {
    const store = tempStore();
    await fill(store, topicKey('forever'), 3);
    await fill(store, topicKey('bounded'), 3);
    const trims = vi.spyOn(store, 'trimTopic');
    const loop = new RetentionLoop(
      store,
      retentionSettings({ topicMaxEntries: 0, retention: { bounded: { maxEntries: 1 } } }),
    );
    expect(await loop.runOnce()).toBe(2);
    expect(trims.mock.calls.map(([topic]) => topic)).toEqual(['bounded']);
  });

  it('runs one pass at a time: a call during a pass shares it', async () => {
    const store = tempStore();
    await fill(store, topicKey('a'), 4);
    await fill(store, topicKey('b'), 4);
    const trims = vi.spyOn(store, 'trimTopic');
    const loop = new RetentionLoop(store, retentionSettings({ topicMaxEntries: 1 }));
    const first = loop.runOnce();
    const second = loop.runOnce();
    expect(second).toBe(first);
    expect(await first).toBe(6);
    expect(trims).toHaveBeenCalledTimes(2);
    // Once a pass is over, the next call starts a new one.
    await fill(store, topicKey('a'), 2, 5);
    expect(await loop.runOnce()).toBe(2);
    expect(trims).toHaveBeenCalledTimes(4);
  });

  it('rejects a pass the store fails, and the next pass runs afresh', async () => {
    const store = tempStore();
    await fill(store, topicKey('a'), 4);
    vi.spyOn(store, 'listTopics').mockRejectedValueOnce(new Error('database is locked'));
    const loop = new RetentionLoop(store, retentionSettings({ topicMaxEntries: 1 }));
    await expect(loop.runOnce()).rejects.toThrow('database is locked');
    expect(await loop.runOnce()).toBe(3);
  });

  it('a pass whose store throws synchronously rejects, and the next pass runs afresh', async () => {
    // The Store port returns promises, but nothing stops an implementation from throwing before
    // it returns one; that must not leave the loop answering every later pass with the old error.
    const store = tempStore();
    await fill(store, topicKey('a'), 4);
    const listTopics = store.listTopics.bind(store);
    vi.spyOn(store, 'listTopics')
      .mockImplementationOnce(() => {
        throw new Error('the database connection is not open');
      })
      .mockImplementation(listTopics);
    const loop = new RetentionLoop(store, retentionSettings({ topicMaxEntries: 1 }));
    await expect(loop.runOnce()).rejects.toThrow('the database connection is not open');
    expect(await loop.runOnce()).toBe(3);
  });

  it('trims on its own every retentionIntervalSeconds once started, reports failures, and stops', async () => {
    const store = tempStore();
    await fill(store, topicKey('a'), 10);
    const errors: unknown[] = [];
    const loop = new RetentionLoop(
      store,
      retentionSettings({ topicMaxEntries: 3, retentionIntervalSeconds: 0.05 }),
      (error) => errors.push(error),
    );
    loop.start();
    cleanups.push(() => loop.stop());
    let firstSeq = 1;
    const watch = setInterval(() => {
      void store.bounds(topicKey('a')).then((b) => (firstSeq = b.firstSeq));
    }, 10);
    cleanups.push(() => clearInterval(watch));
    await until(() => firstSeq === 8, 'the loop to trim topic a');

    // New entries are trimmed by a later pass, with no call from outside.
    await fill(store, topicKey('a'), 5, 11);
    await until(() => firstSeq === 13, 'the loop to trim the new entries');

    // A failing pass goes to onError; the loop keeps going.
    vi.spyOn(store, 'listTopics').mockRejectedValueOnce(new Error('disk I/O error'));
    await until(() => errors.length > 0, 'the failure to be reported');
    expect(String(errors[0])).toContain('disk I/O error');
    await fill(store, topicKey('a'), 3, 16);
    await until(() => firstSeq === 16, 'the loop to carry on after the failure');

    await loop.stop();
    const trims = vi.spyOn(store, 'trimTopic');
    await fill(store, topicKey('a'), 5, 19);
    await sleep(300); // six intervals: a stopped loop must not trim
    expect(trims).not.toHaveBeenCalled();
    expect((await store.bounds(topicKey('a'))).firstSeq).toBe(16);
  });
});

// ---- trimming a big backlog ------------------------------------------------------------------

describe('SqliteStore.trimTopic on a big backlog', () => {
  it('trims in small transactions that let an append to the topic in between, rather than in one go', async () => {
    // sqlite.ts: "Small transactions, so appends to the topic are never held up for long."
    // better-sqlite3 is synchronous: unless the trim yields between its transactions, nothing
    // else runs on the event loop (appends, reads, heartbeats) until the whole trim is done.
    const store = tempStore();
    const key = topicKey('busy');
    await fill(store, key, 30_000);

    let trimDone = false;
    let appendedWhileTrimming: boolean | undefined;
    setImmediate(() => {
      void store.appendEvents(key, [{ kind: 'tick', data: 'during' }]).then(() => {
        appendedWhileTrimming = !trimDone;
      });
    });
    const result = await store.trimTopic('busy', { maxEntries: 10 });
    trimDone = true;
    await until(() => appendedWhileTrimming !== undefined, 'the append');

    expect(appendedWhileTrimming).toBe(true);
    // The entry appended meanwhile is kept, and what remains is gapless up to it: the newest
    // 10 entries as they stood when the trim began (or as they stand after the append).
    expect([29_991, 29_992]).toContain(result.firstSeq);
    expect(result.removed).toBe(result.firstSeq - 1);
    expect(await store.bounds(key)).toEqual({
      firstSeq: result.firstSeq,
      lastSeq: 30_001,
      logBytes: 0,
      logLines: 0,
      epoch: expect.stringMatching(/^[0-9a-f]{8}$/),
    });
    expect(await seqsOf(store, key)).toEqual(range(result.firstSeq, 30_001));
  });
});

// ---- settings ---------------------------------------------------------------------------

describe('retention settings', () => {
  it('defaults to 1,000,000 entries per topic, no age limit, a pass every 60 s and no overrides', () => {
    const settings = loadSettings({ env: {} });
    expect(settings).toMatchObject({
      topicMaxEntries: 1_000_000,
      topicMaxAgeSeconds: 0,
      retentionIntervalSeconds: 60,
      retention: {},
    });
  });

  it('reads the defaults and the per-topic overrides from TAILWATER_* variables, TAILWATER_RETENTION as JSON', () => {
    const settings = loadSettings({
      env: {
        TAILWATER_TOPIC_MAX_ENTRIES: '500',
        TAILWATER_TOPIC_MAX_AGE_SECONDS: '86400',
        TAILWATER_RETENTION_INTERVAL_SECONDS: '5',
        TAILWATER_RETENTION: JSON.stringify({
          iceberg: { maxEntries: 100_000, maxAgeSeconds: 604_800 },
          audit: { maxEntries: 0 },
        }),
      },
    });
    expect(settings).toMatchObject({
      topicMaxEntries: 500,
      topicMaxAgeSeconds: 86_400,
      retentionIntervalSeconds: 5,
      retention: {
        iceberg: { maxEntries: 100_000, maxAgeSeconds: 604_800 },
        audit: { maxEntries: 0 },
      },
    });
    expect(retentionPolicy('iceberg', settings, 1e12)).toEqual({
      maxEntries: 100_000,
      olderThanMs: 1e12 - 604_800_000,
    });
    expect(retentionPolicy('audit', settings, 1e12)).toEqual({
      maxEntries: 0,
      olderThanMs: 1e12 - 86_400_000,
    });
  });

  it('reads the same settings from a config file', () => {
    const file = join(tempDir(), 'tailwater.json');
    writeFileSync(
      file,
      JSON.stringify({
        topicMaxEntries: 0,
        topicMaxAgeSeconds: 3600,
        retentionIntervalSeconds: 30,
        retention: { prices: { maxEntries: 1000 }, _runs: { maxAgeSeconds: 86_400 } },
      }),
    );
    const settings = loadSettings({ configFile: file, env: {} });
    expect(settings).toMatchObject({
      topicMaxEntries: 0,
      topicMaxAgeSeconds: 3600,
      retentionIntervalSeconds: 30,
      retention: { prices: { maxEntries: 1000 }, _runs: { maxAgeSeconds: 86_400 } },
    });
    // The config file can also be named by TAILWATER_CONFIG.
    expect(loadSettings({ env: { TAILWATER_CONFIG: file } }).retention).toEqual(settings.retention);
  });

  it('lets TAILWATER_RETENTION replace the overrides of the config file', () => {
    const file = join(tempDir(), 'tailwater.json');
    writeFileSync(file, JSON.stringify({ retention: { prices: { maxEntries: 1000 } } }));
    const settings = loadSettings({
      configFile: file,
      env: { TAILWATER_RETENTION: '{"trades":{"maxAgeSeconds":60}}' },
    });
    expect(settings.retention).toEqual({ trades: { maxAgeSeconds: 60 } });
  });

  it('refuses TAILWATER_RETENTION that is not JSON, naming the variable', () => {
    expect(() => loadSettings({ env: { TAILWATER_RETENTION: '{prices: 5}' } })).toThrow(
      SettingsError,
    );
    expect(() => loadSettings({ env: { TAILWATER_RETENTION: '{prices: 5}' } })).toThrow(
      /TAILWATER_RETENTION: expected JSON/,
    );
  });

  it.each([
    ['a negative maxEntries', { t: { maxEntries: -1 } }],
    ['a fractional maxEntries', { t: { maxEntries: 1.5 } }],
    ['a negative maxAgeSeconds', { t: { maxAgeSeconds: -5 } }],
    ['an unknown field', { t: { maxEntrys: 5 } }],
    ['a number instead of an object', { t: 5 }],
    ['a list', [{ maxEntries: 5 }]],
  ])(
    'refuses retention overrides with %s, from the environment or a config file',
    (_what, value) => {
      expect(() => loadSettings({ env: { TAILWATER_RETENTION: JSON.stringify(value) } })).toThrow(
        /TAILWATER_RETENTION/,
      );
      const file = join(tempDir(), 'tailwater.json');
      writeFileSync(file, JSON.stringify({ retention: value }));
      expect(() => loadSettings({ configFile: file, env: {} })).toThrow(SettingsError);
      expect(() => loadSettings({ configFile: file, env: {} })).toThrow(/config file .*retention/);
    },
  );

  it('refuses a negative topicMaxEntries or topicMaxAgeSeconds and a retentionIntervalSeconds of 0', () => {
    for (const env of [
      { TAILWATER_TOPIC_MAX_ENTRIES: '-1' },
      { TAILWATER_TOPIC_MAX_AGE_SECONDS: '-1' },
      { TAILWATER_RETENTION_INTERVAL_SECONDS: '0' },
    ]) {
      expect(() => loadSettings({ env }), JSON.stringify(env)).toThrow(SettingsError);
    }
  });
});

// ---- what viewers are told ----------------------------------------------------------------

describe('gap retention on a stream', () => {
  it('tells a viewer whose cursor points into trimmed entries with gap retention, then sends what remains', async () => {
    const t = await start();
    await fill(t.ingest, topicKey('prices'), 20);
    expect(await t.store.trimTopic('prices', { maxEntries: 5 })).toEqual({
      removed: 15,
      firstSeq: 16,
    });

    const byHeader = await open(t, topicStreamPath('prices'), { 'Last-Event-ID': '3' });
    const byQuery = await open(t, topicStreamPath('prices', 'after=3'));
    for (const reader of [byHeader, byQuery]) {
      await reader.waitFor(hasSeq(20));
      expect(reader.events[0]).toEqual({
        id: undefined,
        event: 'gap',
        data: '{"reason":"retention","fromSeq":4,"toSeq":15}',
      });
      expect(frames(reader.events)).toEqual(['gap retention 4-15', ...labels(16, 20)]);
    }
    expect(JSON.parse(byHeader.events[1]!.data)).toMatchObject({ seq: 16, data: 16 });

    // Then live, with nothing twice.
    await fill(t.ingest, topicKey('prices'), 1, 21);
    for (const reader of [byHeader, byQuery]) {
      await reader.waitFor(hasSeq(21));
      expect(frames(reader.events)).toEqual(['gap retention 4-15', ...labels(16, 21)]);
    }
  });

  it('sends no gap to a viewer whose cursor is at or past the oldest entry kept, nor for ?tail=', async () => {
    const t = await start();
    await fill(t.ingest, topicKey('prices'), 20);
    await t.store.trimTopic('prices', { maxEntries: 5 });

    const justBefore = await open(t, topicStreamPath('prices'), { 'Last-Event-ID': '15' });
    const inside = await open(t, topicStreamPath('prices'), { 'Last-Event-ID': '17' });
    const tail = await open(t, topicStreamPath('prices', 'tail=10'));
    for (const reader of [justBefore, inside, tail]) await reader.waitFor(hasSeq(20));
    expect(frames(justBefore.events)).toEqual(labels(16, 20));
    expect(frames(inside.events)).toEqual(labels(18, 20));
    expect(frames(tail.events)).toEqual(labels(16, 20));
  });

  it('tells a viewer of a topic trimmed to nothing of the whole removed range, then follows it live', async () => {
    const t = await start();
    await fill(t.ingest, topicKey('prices'), 8);
    await t.store.trimTopic('prices', { maxEntries: 0, olderThanMs: Date.now() + 60_000 });

    const behind = await open(t, topicStreamPath('prices'), { 'Last-Event-ID': '2' });
    const upToDate = await open(t, topicStreamPath('prices'), { 'Last-Event-ID': '8' });
    await behind.waitFor((events) => events.some((e) => e.event === 'gap'));
    await fill(t.ingest, topicKey('prices'), 2, 9);
    await behind.waitFor(hasSeq(10));
    await upToDate.waitFor(hasSeq(10));
    expect(frames(behind.events)).toEqual(['gap retention 3-8', '9', '10']);
    expect(frames(upToDate.events)).toEqual(['9', '10']);
  });

  it.each([
    ['Store.trimTopic', 'store'],
    ['a RetentionLoop pass', 'loop'],
  ] as const)(
    'tells a viewer catching up from the store of a trim made mid-way (%s), then sends the rest once each',
    async (_how, via) => {
      const t = await start({ readBatchEntries: 10, replayBufferBytes: 0 });
      const key = topicKey('iceberg');
      await fill(t.ingest, key, 300);
      const loop = new RetentionLoop(
        t.store,
        retentionSettings({ topicMaxEntries: 0, retention: { iceberg: { maxEntries: 100 } } }),
      );

      // Trim right after the viewer's first page: its next page starts past the hole.
      const read = t.store.readEntries.bind(t.store);
      const pages: number[] = [];
      let trimmed: unknown;
      vi.spyOn(t.store, 'readEntries').mockImplementation(async (k, options) => {
        const page = await read(k, options);
        // The viewer's pages: readBatchEntries at a time, behind the stream's newest entry.
        if (streamId(k) === streamId(key) && options.limit === 10 && options.afterSeq < 300) {
          pages.push(options.afterSeq);
          if (pages.length === 1) {
            trimmed =
              via === 'store'
                ? await t.store.trimTopic('iceberg', { maxEntries: 100 })
                : await loop.runOnce();
          }
        }
        return page;
      });

      const reader = await open(t, topicStreamPath('iceberg'));
      await reader.waitFor(hasSeq(300));
      expect(trimmed).toEqual(via === 'store' ? { removed: 200, firstSeq: 201 } : 200);
      expect(pages[0]).toBe(0);
      expect(pages.length).toBeGreaterThan(2); // it really paged, 10 at a time
      expect(reader.events[10]).toEqual({
        id: undefined,
        event: 'gap',
        data: '{"reason":"retention","fromSeq":11,"toSeq":200}',
      });
      expect(frames(reader.events)).toEqual([
        ...labels(1, 10),
        'gap retention 11-200',
        ...labels(201, 300),
      ]);
      const sent = reader.events.filter((e) => e.event === 'tick');
      expect(sent.map((e) => (JSON.parse(e.data) as Entry).data)).toEqual([
        ...range(1, 10),
        ...range(201, 300),
      ]);

      // It then goes live, still with nothing lost or twice.
      await fill(t.ingest, key, 2, 301);
      await reader.waitFor(hasSeq(302));
      expect(frames(reader.events)).toEqual([
        ...labels(1, 10),
        'gap retention 11-200',
        ...labels(201, 302),
      ]);
    },
  );

  it('tells a filtered viewer catching up of a mid-way trim, and still skips what its filter drops', async () => {
    const t = await start({ readBatchEntries: 10, replayBufferBytes: 0 });
    const key = topicKey('mixed');
    // Odd seqs are `keep`, even seqs `drop`.
    for (let seq = 1; seq <= 60; seq += 1) {
      await t.ingest.appendEvents(key, [{ kind: seq % 2 ? 'keep' : 'drop', data: seq }]);
    }
    const read = t.store.readEntries.bind(t.store);
    let calls = 0;
    vi.spyOn(t.store, 'readEntries').mockImplementation(async (k, options) => {
      const page = await read(k, options);
      const viewerPage = options.limit === 10 && options.afterSeq < 60;
      if (streamId(k) === streamId(key) && viewerPage && ++calls === 1) {
        await t.store.trimTopic('mixed', { maxEntries: 25 }); // keeps 36…60
      }
      return page;
    });

    const reader = await open(t, topicStreamPath('mixed', 'kinds=keep'));
    await reader.waitFor((events) => events.some((e) => seqOfId(e.id) === 59));
    await fill(t.ingest, key, 1, 61); // kind `tick`: filtered out, sent as a cursor frame
    await reader.waitFor((events) => events.some((e) => seqOfId(e.id) === 61));
    // A filtered viewer reads by kind: its first page is the first ten `keep` entries (1…19),
    // read just before the trim; the next look finds 20…35 gone and says so.
    expect(frames(reader.events)).toEqual([
      ...range(1, 19)
        .filter((seq) => seq % 2 === 1)
        .map(String),
      'gap retention 20-35',
      ...range(37, 59)
        .filter((seq) => seq % 2 === 1)
        .map(String),
      'cursor 60',
      'cursor 61',
    ]);
  });

  it('tells a live viewer of entries that retention removed before the stream reader read them', async () => {
    // No poll: the reader reads only when the bus rings, so entries written behind its back
    // can be trimmed before it sees them.
    const t = await start({ pollSeconds: 60 });
    const key = topicKey('prices');
    await fill(t.ingest, key, 5);
    const reader = await open(t, topicStreamPath('prices'));
    await reader.waitFor(hasSeq(5));

    await fill(t.store, key, 20, 6); // 6…25, the bus not told
    await t.store.trimTopic('prices', { maxEntries: 5 }); // keeps 21…25
    t.bus.notify(streamId(key), 25);
    await reader.waitFor(hasSeq(25));
    expect(frames(reader.events)).toEqual([
      ...labels(1, 5),
      'gap retention 6-20',
      ...labels(21, 25),
    ]);

    // A viewer joining now with a cursor in what remains gets the rest, without a gap.
    const late = await open(t, topicStreamPath('prices'), { 'Last-Event-ID': '21' });
    await late.waitFor(hasSeq(25));
    expect(frames(late.events)).toEqual(labels(22, 25));

    await fill(t.ingest, key, 1, 26);
    await reader.waitFor(hasSeq(26));
    await late.waitFor(hasSeq(26));
    expect(frames(reader.events)).toEqual([
      ...labels(1, 5),
      'gap retention 6-20',
      ...labels(21, 26),
    ]);
    expect(frames(late.events)).toEqual(labels(22, 26));
  });
});
