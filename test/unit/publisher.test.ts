import { setTimeout as delay } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { TailwaterClient } from '../../src/client/http-client.js';
import type { Target } from '../../src/client/http-client.js';
import { Publisher } from '../../src/client/publisher.js';
import type { Entry } from '../../src/model/entry.js';
import { createTestApp } from '../helpers/app.js';
import type { TestApp } from '../helpers/app.js';
import { scriptedServer } from '../helpers/net.js';
import { startTcpProxy } from '../helpers/tcp-proxy.js';
import type { TcpProxy } from '../helpers/tcp-proxy.js';

/** Every entry of a run or topic, read back from the server's store. */
async function storedEntries(url: string, target: Target): Promise<Entry[]> {
  const client = new TailwaterClient({ server: url });
  const all: Entry[] = [];
  let after = 0;
  for (let page = 0; page < 1000; page += 1) {
    const { entries, next, hasMore } = await client.entries(target, after, 1000);
    all.push(...entries);
    if (!hasMore) return all;
    after = next;
  }
  throw new Error('more than 1000 pages');
}

/** Producer events only: a run's stream also holds the server's `status` entries. */
function producerEvents(entries: Entry[]): Entry[] {
  return entries.filter((entry) => entry.kind !== 'status');
}

/** A server-side slowdown on event appends: a gate that holds them, and/or a delay. */
interface Slowdown {
  delayMs: number;
  /** Sizes of the event batches the server received, in order. */
  batches: number[];
  hold(): void;
  release(): void;
}

/** Must be installed before `listen()` (Fastify takes hooks only before it starts). */
function slowDown(t: TestApp): Slowdown {
  let gate: Promise<void> | undefined;
  let open: () => void = () => {};
  const control: Slowdown = {
    delayMs: 0,
    batches: [],
    hold() {
      gate ??= new Promise<void>((resolve) => (open = resolve));
    },
    release() {
      gate = undefined;
      open();
    },
  };
  t.app.addHook('preHandler', async (request) => {
    if (request.method !== 'POST' || !request.url.endsWith('/events')) return;
    control.batches.push((request.body as { events: unknown[] }).events.length);
    if (gate) await gate;
    if (control.delayMs > 0) await delay(control.delayMs);
  });
  return control;
}

/** A plain node:http server answering every request with `status`, counting the requests. */
function answeringServer(status: number) {
  return scriptedServer((_n, request, response) => {
    request.resume();
    request.on('end', () => {
      response.writeHead(status, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ detail: 'Not Implemented' }));
    });
  });
}

const FAST_BACKOFF = { initialMs: 10, maxMs: 50 };

describe('Publisher', () => {
  let t: TestApp | undefined;
  let proxy: TcpProxy | undefined;
  let publisher: Publisher | undefined;
  const cleanups: Array<() => Promise<void>> = [];

  afterEach(async () => {
    await publisher?.close(0);
    publisher = undefined;
    await proxy?.close();
    proxy = undefined;
    for (const cleanup of cleanups.splice(0)) await cleanup();
    await t?.close();
    t = undefined;
  });

  it('delivers events in order, each with a producer id, in batches of at most batchSize', async () => {
    t = await createTestApp();
    const slow = slowDown(t);
    const url = await t.listen();
    const target = { pipeline: 'pub.order', runId: 'r1' };
    publisher = new Publisher({ server: url, target, batchSize: 7 });

    for (let n = 0; n < 50; n += 1) {
      publisher.publish(
        'progress',
        { n },
        n % 2 === 0 ? { step: 'train' } : { correlationId: 'c' },
      );
      // Let the background loop send a few batches while events keep coming.
      if (n % 10 === 9) await delay(1);
    }
    expect(await publisher.flush(10_000)).toBe(true);

    expect(publisher.sent).toBe(50);
    expect(publisher.dropped).toBe(0);
    expect(publisher.pending).toBe(0);
    expect(slow.batches.length).toBeGreaterThanOrEqual(Math.ceil(50 / 7));
    expect(Math.max(...slow.batches)).toBeLessThanOrEqual(7);
    expect(slow.batches.reduce((a, b) => a + b, 0)).toBe(50);

    const events = producerEvents(await storedEntries(url, target));
    expect(events.map((e) => (e.data as { n: number }).n)).toEqual(
      Array.from({ length: 50 }, (_, n) => n),
    );
    expect(events.every((e) => e.kind === 'progress')).toBe(true);
    expect(events[0]!.step).toBe('train');
    expect(events[1]!.correlationId).toBe('c');
    const ids = events.map((e) => e.id);
    expect(ids.every((id) => typeof id === 'string' && id.length > 0)).toBe(true);
    expect(new Set(ids).size).toBe(50);
  });

  it('flush resolves true once everything was delivered, and at once when nothing is pending', async () => {
    t = await createTestApp();
    const url = await t.listen();
    publisher = new Publisher({ server: url, target: { topic: 'pub-flush' } });

    expect(await publisher.flush(1)).toBe(true);
    for (let n = 0; n < 10; n += 1) publisher.publish('tick', n);
    expect(publisher.pending).toBe(10);
    expect(await publisher.flush(10_000)).toBe(true);
    expect(publisher.pending).toBe(0);
    expect(publisher.sent).toBe(10);
    const events = await storedEntries(url, { topic: 'pub-flush' });
    expect(events.map((e) => e.data)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  });

  it('test_drop_oldest_under_queue_pressure', async () => {
    t = await createTestApp();
    const slow = slowDown(t);
    const url = await t.listen();
    const target = { topic: 'pub-pressure' };
    slow.hold();
    publisher = new Publisher({ server: url, target, queueSize: 10, batchSize: 5 });

    const total = 50;
    for (let n = 1; n <= total; n += 1) publisher.publish('tick', { n });
    // The server holds every append: at most one batch is out, the queue keeps the newest 10.
    expect(publisher.sent).toBe(0);
    expect(publisher.pending).toBeLessThanOrEqual(10 + 5);
    expect(publisher.dropped).toBeGreaterThanOrEqual(total - 10 - 5);
    expect(publisher.dropped + publisher.pending).toBe(total);

    slow.release();
    expect(await publisher.flush(10_000)).toBe(true);
    expect(publisher.sent + publisher.dropped).toBe(total);

    const stored = (await storedEntries(url, target)).map((e) => (e.data as { n: number }).n);
    expect(stored).toHaveLength(publisher.sent);
    // The newest were kept (all of the last queueSize), in order; what is missing is the oldest.
    expect(stored.slice(-10)).toEqual([41, 42, 43, 44, 45, 46, 47, 48, 49, 50]);
    expect(stored).toEqual([...stored].sort((a, b) => a - b));
    const missing = Array.from({ length: total }, (_, i) => i + 1).filter(
      (n) => !stored.includes(n),
    );
    expect(missing).toHaveLength(publisher.dropped);
    expect(Math.max(...missing)).toBeLessThan(41);
  });

  it('test_flush_returns_false_on_timeout', async () => {
    t = await createTestApp();
    const slow = slowDown(t);
    const url = await t.listen();
    const target = { topic: 'pub-timeout' };
    // The server holds every append until released: nothing can be delivered within the flush.
    slow.hold();
    publisher = new Publisher({ server: url, target });

    for (let n = 0; n < 5; n += 1) publisher.publish('tick', n);
    const started = performance.now();
    expect(await publisher.flush(200)).toBe(false);
    const waited = performance.now() - started;
    expect(waited).toBeGreaterThanOrEqual(190);
    // Its own timeout, not a multiple of it (the timer may fire late on a busy machine).
    expect(waited).toBeLessThan(2500);
    expect(publisher.pending).toBeGreaterThan(0);

    // Still delivered afterwards, once.
    slow.release();
    expect(await publisher.flush(15_000)).toBe(true);
    expect((await storedEntries(url, target)).map((e) => e.data)).toEqual([0, 1, 2, 3, 4]);
  });

  it('test_not_implemented_disables_publisher', async () => {
    const server = await answeringServer(501);
    cleanups.push(server.close);
    const errors: number[] = [];
    publisher = new Publisher({
      server: server.url,
      target: { topic: 'pub-501' },
      onError: (error) => errors.push(error.status),
    });

    publisher.publish('tick', 1);
    publisher.publish('tick', 2);
    expect(await publisher.flush(10_000)).toBe(true);
    expect(publisher.disabled).toBe(true);
    expect(errors).toEqual([501]);
    expect(server.requests).toBe(1);
    expect(publisher.dropped).toBe(2);
    expect(publisher.sent).toBe(0);

    // Disabled: publish() queues nothing, so nothing is ever sent.
    for (let n = 0; n < 100; n += 1) publisher.publish('tick', n);
    expect(publisher.pending).toBe(0);
    expect(await publisher.flush(1000)).toBe(true);
    expect(server.requests).toBe(1);
  });

  it('refuses reserved or malformed kinds and data over 64 KiB locally, without a request', async () => {
    const server = await answeringServer(200);
    cleanups.push(server.close);
    publisher = new Publisher({ server: server.url, target: { topic: 'pub-local' } });

    for (const kind of ['end', 'gap', 'error', 'cursor', 'status', 'system', 'connected']) {
      expect(() => publisher!.publish(kind, {}), kind).toThrow(/reserved/);
    }
    expect(() => publisher!.publish('not a kind', {})).toThrow(/Kind must match/);
    expect(() => publisher!.publish('', {})).toThrow(/Kind must match/);
    // JSON-encoded, a string of 65,535 characters is 65,537 bytes: over the limit.
    expect(() => publisher!.publish('big', 'x'.repeat(65_535))).toThrow(/exceeds 65536 bytes/);
    expect(() => publisher!.publish('big', { blob: 'é'.repeat(40_000) })).toThrow(RangeError);

    expect(publisher.pending).toBe(0);
    expect(await publisher.flush(1000)).toBe(true);
    expect(server.requests).toBe(0);
  });

  it('accepts data of exactly 64 KiB encoded, which the server stores', async () => {
    t = await createTestApp();
    const url = await t.listen();
    publisher = new Publisher({ server: url, target: { topic: 'pub-edge' } });
    const data = 'x'.repeat(64 * 1024 - 2); // plus two quotes: 65,536 bytes
    publisher.publish('big', data);
    expect(await publisher.flush(10_000)).toBe(true);
    expect(publisher.sent).toBe(1);
    const [entry] = await storedEntries(url, { topic: 'pub-edge' });
    expect(entry!.data).toBe(data);
  });

  it('does not duplicate a batch whose first attempt was stored but never acknowledged', async () => {
    t = await createTestApp();
    let appends = 0;
    t.app.addHook('preHandler', async (request) => {
      if (request.method === 'POST' && request.url.endsWith('/events')) appends += 1;
    });
    const url = await t.listen();
    proxy = await startTcpProxy(url);
    const target = { pipeline: 'pub.retry', runId: 'r1' };
    const errors: string[] = [];
    publisher = new Publisher({
      server: proxy.url,
      target,
      batchSize: 10,
      backoff: FAST_BACKOFF,
      onError: (error) => errors.push(error.message),
    });

    // The first two connections deliver their request but lose the answer.
    proxy.dropNextResponses(2);
    for (let n = 0; n < 25; n += 1) publisher.publish('tick', { n });
    expect(await publisher.flush(15_000)).toBe(true);

    expect(proxy.droppedResponses).toBe(2);
    expect(errors).toHaveLength(2);
    // Every batch reached the server, and the two unanswered attempts were sent again.
    expect(appends).toBeGreaterThanOrEqual(Math.ceil(25 / 10) + 2);
    expect(publisher.sent).toBe(25);
    expect(publisher.dropped).toBe(0);
    const events = producerEvents(await storedEntries(url, target));
    expect(events.map((e) => (e.data as { n: number }).n)).toEqual(
      Array.from({ length: 25 }, (_, n) => n),
    );
    expect(new Set(events.map((e) => e.id)).size).toBe(25);
  });

  it('a burst of 100,000 events against a slow server: drops counted, flush bounded, no duplicates', async () => {
    t = await createTestApp();
    const slow = slowDown(t);
    const url = await t.listen();
    const target = { topic: 'pub-burst' };
    slow.delayMs = 100;
    publisher = new Publisher({ server: url, target, backoff: FAST_BACKOFF });

    const total = 100_000;
    const started = process.cpuUsage();
    for (let n = 0; n < total; n += 1) publisher.publish('tick', { n });
    // publish() never blocks, and dropping the oldest costs little: 100,000 calls take well
    // under 5 s of CPU (CPU time: a busy machine that keeps this process waiting does not count).
    const used = process.cpuUsage(started);
    expect((used.user + used.system) / 1000).toBeLessThan(5000);
    expect(publisher.pending).toBeLessThanOrEqual(4096 + 64);
    expect(publisher.dropped).toBeGreaterThanOrEqual(total - 4096 - 64);

    // Held while it flushes: what is queued cannot all be delivered within the timeout.
    slow.hold();
    const flushStarted = performance.now();
    expect(await publisher.flush(300)).toBe(false);
    const waited = performance.now() - flushStarted;
    expect(waited).toBeGreaterThanOrEqual(290);
    expect(waited).toBeLessThan(3000);

    slow.release();
    slow.delayMs = 0;
    expect(await publisher.flush(60_000)).toBe(true);
    expect(publisher.sent + publisher.dropped).toBe(total);

    const stored = await storedEntries(url, target);
    expect(stored).toHaveLength(publisher.sent);
    expect(new Set(stored.map((e) => e.id)).size).toBe(stored.length);
    const ns = stored.map((e) => (e.data as { n: number }).n);
    expect(new Set(ns).size).toBe(ns.length);
    expect(ns).toEqual([...ns].sort((a, b) => a - b));
    expect(ns.at(-1)).toBe(total - 1);
  });
});
