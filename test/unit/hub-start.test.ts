import { createParser } from 'eventsource-parser';
import { afterEach, describe, expect, it } from 'vitest';
import type { StartPosition } from '../../src/engine/hub.js';
import type { ViewerTransport } from '../../src/engine/viewer-transport.js';
import { NativeEncoder } from '../../src/http/native.js';
import type { StreamKey } from '../../src/model/stream-key.js';
import { runKey, topicKey } from '../../src/model/stream-key.js';
import { createTestApp } from '../helpers/app.js';
import type { TestApp } from '../helpers/app.js';
import { seqOfId } from '../helpers/sse.js';
import type { SseEvent } from '../helpers/sse.js';
import { until } from '../helpers/wait.js';

// Where the Hub starts a viewer for the two start positions a dialect's own cursor maps to
// (docs/API.md, "Iceberg dashboard" and "OpenMetadata"): just after the entry a producer id
// names, and just after the log chunk that ends at a byte offset. Anything it cannot place is
// `gap reset`, said out loud. Read through the native encoder, so every frame is visible.

let t: TestApp | undefined;

afterEach(async () => {
  await t?.close();
  t = undefined;
});

/** A viewer's socket: every frame the Hub writes, as an SSE parser reads them. */
function recordingTransport() {
  const events: SseEvent[] = [];
  const parser = createParser({
    onEvent: (message) =>
      events.push({ id: message.id, event: message.event ?? 'message', data: message.data }),
  });
  const transport: ViewerTransport = {
    write(chunk) {
      parser.feed(chunk.toString('utf8'));
      return true;
    },
    pendingBytes: 0,
    closed: false,
    attach: () => undefined,
    close: () => undefined,
  };
  return { transport, events };
}

/**
 * Subscribes at `start` and waits until the viewer has been sent `count` frames: a gap as
 * `gap <data>`, an entry as its seq when its id is exactly `<seq>-<the store's epoch>`, and as
 * `bad id <id>` when it is anything else.
 */
async function framesFrom(app: TestApp, key: StreamKey, start: StartPosition, count: number) {
  const { transport, events } = recordingTransport();
  await app.hub.subscribe({ key, start, encoder: new NativeEncoder(1000) }, () => transport);
  await until(() => events.length >= count, `${count} frames`);
  const { epoch } = await app.store.bounds(key);
  return events.map((e) => {
    if (e.event === 'gap') return `gap ${e.data}`;
    const seq = seqOfId(e.id);
    return e.id === `${seq}-${epoch}` ? String(seq) : `bad id ${e.id}`;
  });
}

const RESET = 'gap {"reason":"reset"}';

describe('a start after a producer id', () => {
  const TOPIC = topicKey('commits');

  /** seq 1 `snap-1`, seq 2 without an id (`seq:2`), seq 3 `snap-3`, seq 4 without. */
  async function seeded(): Promise<TestApp> {
    t = await createTestApp();
    await t.ingest.appendEvents(TOPIC, [
      { kind: 'commit', id: 'snap-1', data: undefined, dataJson: '{}' },
      { kind: 'commit', data: undefined, dataJson: '{}' },
      { kind: 'commit', id: 'snap-3', data: undefined, dataJson: '{}' },
      { kind: 'commit', data: undefined, dataJson: '{}' },
    ]);
    return t;
  }

  it('starts just after the entry that producer id names', async () => {
    const app = await seeded();
    const start = { type: 'afterProducerId', id: 'snap-1', tail: 1 } as const;
    expect(await framesFrom(app, TOPIC, start, 3)).toEqual(['2', '3', '4']);
  });

  it('starts just after seq N for the id seq:N of an entry stored without one', async () => {
    const app = await seeded();
    const start = { type: 'afterProducerId', id: 'seq:2', tail: 1 } as const;
    expect(await framesFrom(app, TOPIC, start, 2)).toEqual(['3', '4']);
  });

  it('answers an id the stream does not hold with gap reset, then its last `tail` entries', async () => {
    const app = await seeded();
    for (const id of ['snap-9', 'seq:', 'seq:x', '3']) {
      const start = { type: 'afterProducerId', id, tail: 2 } as const;
      expect(await framesFrom(app, TOPIC, start, 3), id).toEqual([RESET, '3', '4']);
    }
  });
});

describe('a start after a log offset', () => {
  const RUN = runKey('etl.daily', 'r1');

  /** Log chunks `a\n` (bytes 0–2), `例\n` (2–6), `c\n` (6–8), with events between them. */
  async function seeded(): Promise<TestApp> {
    t = await createTestApp();
    await t.ingest.putRun('etl.daily', 'r1', { status: 'running' }); // seq 1
    for (const text of ['a\n', '例\n', 'c\n']) {
      await t.ingest.appendLog('etl.daily', 'r1', { text });
      await t.ingest.appendEvents(RUN, [{ kind: 'progress', data: undefined, dataJson: '{}' }]);
    }
    return t; // seqs: 2 a, 3 progress, 4 例, 5 progress, 6 c, 7 progress
  }

  it('starts at the start of the stream for offset 0', async () => {
    const app = await seeded();
    const frames = await framesFrom(app, RUN, { type: 'afterLogOffset', offset: 0 }, 7);
    expect(frames).toEqual(['1', '2', '3', '4', '5', '6', '7']);
  });

  it.each([
    [2, ['3', '4', '5', '6', '7']],
    [6, ['5', '6', '7']],
    [8, ['7']],
  ])('starts just after the chunk that ends at byte %i', async (offset, expected) => {
    const app = await seeded();
    const frames = await framesFrom(app, RUN, { type: 'afterLogOffset', offset }, expected.length);
    expect(frames).toEqual(expected);
  });

  it.each([1, 3, 5, 7, 9, 1000])(
    'answers byte %i, which no chunk ends at, with gap reset and the whole stream',
    async (offset) => {
      const app = await seeded();
      const frames = await framesFrom(app, RUN, { type: 'afterLogOffset', offset }, 8);
      expect(frames).toEqual([RESET, '1', '2', '3', '4', '5', '6', '7']);
    },
  );
});

describe('a viewer joining a stream whose reader is never idle', () => {
  const RUN = runKey('etl.busy', 'r1');

  it('is let in after the reads in flight, not once the appends stop', async () => {
    t = await createTestApp();
    const app = t;
    await app.ingest.putRun('etl.busy', 'r1', { status: 'running' });
    // A live viewer whose every write takes 30 ms stands for a fan-out to thousands of sockets.
    const slow = recordingTransport();
    const write = slow.transport.write.bind(slow.transport);
    slow.transport.write = (chunk) => {
      const until = performance.now() + 30;
      while (performance.now() < until);
      return write(chunk);
    };
    await app.hub.subscribe(
      { key: RUN, start: { type: 'after', seq: 0 }, encoder: new NativeEncoder(1000) },
      () => slow.transport,
    );
    let appending = true;
    // Four producers, each sending its next append as soon as the last is stored: one always
    // lands while a read is under way, so there is always another read to do.
    const appends = Promise.all(
      Array.from({ length: 4 }, async () => {
        while (appending) {
          await app.ingest.appendEvents(RUN, [
            { kind: 'progress', data: undefined, dataJson: '{}' },
          ]);
          await new Promise((resolve) => setImmediate(resolve));
        }
      }),
    );
    try {
      await new Promise((resolve) => setTimeout(resolve, 200));
      const joiner = recordingTransport();
      const joined = app.hub
        .subscribe(
          { key: RUN, start: { type: 'after', seq: 0 }, encoder: new NativeEncoder(1000) },
          () => joiner.transport,
        )
        .then(() => 'joined');
      const timeout = new Promise((resolve) => setTimeout(resolve, 2000, 'still waiting'));
      expect(await Promise.race([joined, timeout])).toBe('joined');
      await until(() => joiner.events.length >= 3, 'the joiner catching up');
    } finally {
      appending = false;
      await appends;
    }
  });
});
