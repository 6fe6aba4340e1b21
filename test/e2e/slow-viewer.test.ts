import { createHash } from 'node:crypto';
import net from 'node:net';
import { createParser } from 'eventsource-parser';
import { afterAll, describe, expect, it } from 'vitest';
import { sendLog } from '../helpers/api.js';
import { createTestApp } from '../helpers/app.js';
import type { TestApp } from '../helpers/app.js';

const MiB = 1024 * 1024;
const CAP = 2 * MiB;
const APPENDS = 50;
const RUN = '/api/v1/pipelines/slow.viewer/runs/r1';

/** Follows the log entries of a stream: checks seq order and hashes the text as it goes. */
class LogFollower {
  readonly hash = createHash('sha256');
  lastSeq = 0;
  bytes = 0;
  outOfOrder = 0;
  ended = false;
  private readonly parser = createParser({
    onEvent: (event) => {
      if (event.event === 'end') this.ended = true;
      if (event.event !== 'log') return;
      const entry = JSON.parse(event.data) as { seq: number; text: string };
      if (entry.seq <= this.lastSeq) this.outOfOrder += 1;
      this.lastSeq = entry.seq;
      this.hash.update(entry.text);
      this.bytes += Buffer.byteLength(entry.text);
    },
  });
  private readonly decoder = new TextDecoder();
  private headerDone = false;
  private head = '';

  /** Feeds raw bytes of an HTTP/1.1 response (headers, then chunked or plain body). */
  feedRaw(chunk: Buffer): void {
    let text = this.decoder.decode(chunk, { stream: true });
    if (!this.headerDone) {
      this.head += text;
      const end = this.head.indexOf('\r\n\r\n');
      if (end < 0) return;
      this.headerDone = true;
      text = this.head.slice(end + 4);
    }
    this.feed(text);
  }

  feed(text: string): void {
    this.parser.feed(text);
  }
}

/** Memory the process holds once garbage is collected: V8 heap plus Buffers and other external memory. */
function retainedBytes(): number {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('run with --expose-gc (the e2e project sets it)');
  gc();
  gc();
  const usage = process.memoryUsage();
  return usage.heapUsed + usage.external;
}

function logText(append: number): string {
  const lines: string[] = [];
  let size = 0;
  for (let n = 0; size < MiB - 200; n += 1) {
    const line = `append ${append} line ${n} ${'.'.repeat(60)} 例\n`;
    lines.push(line);
    size += Buffer.byteLength(line);
  }
  return lines.join('');
}

describe('a slow viewer', () => {
  let t: TestApp | undefined;
  afterAll(async () => t?.close());

  it('gets everything with bounded memory while a fast viewer is not slowed', async () => {
    // The server runs in this process so that its memory can be measured after a full GC.
    t = await createTestApp({
      maxPendingBytesPerViewer: CAP,
      pollSeconds: 0.1,
      // The whole 50 MB run on one connection (the default would end it at 32 MiB).
      maxStreamBytes: 256 * MiB,
    });
    const base = await t.listen();
    const hub = t.hub;
    const post = async (text: string) => {
      const res = await sendLog(base, RUN, text);
      expect(res.status).toBe(200);
    };
    // Warm up: the run exists and the server has touched every code path once.
    const expected = createHash('sha256');
    const warm = logText(-1);
    await post(warm);
    expected.update(warm);

    // The slow viewer: a raw socket that stops reading once the stream has opened.
    const slow = new LogFollower();
    const socket = net.connect(Number(new URL(base).port), '127.0.0.1');
    socket.write(
      `GET ${RUN}/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n`,
    );
    await new Promise<void>((resolve) => {
      socket.once('data', (chunk: Buffer) => {
        slow.feedRaw(chunk);
        socket.pause();
        resolve();
      });
    });
    socket.on('data', (chunk: Buffer) => slow.feedRaw(chunk));

    // The fast viewer reads as it comes.
    const fast = new LogFollower();
    const controller = new AbortController();
    const response = await fetch(`${base}${RUN}/stream`, { signal: controller.signal });
    const fastReading = (async () => {
      const decoder = new TextDecoder();
      try {
        for await (const chunk of response.body!)
          fast.feed(decoder.decode(chunk as Uint8Array, { stream: true }));
      } catch {
        // aborted at the end of the test
      }
    })();

    await new Promise((resolve) => setTimeout(resolve, 300));
    const before = retainedBytes();
    let pendingPeak = 0;
    const sampler = setInterval(() => {
      pendingPeak = Math.max(pendingPeak, hub.snapshot().maxPendingBytes);
    }, 20);

    let total = Buffer.byteLength(warm);
    for (let i = 0; i < APPENDS; i += 1) {
      const text = logText(i);
      await post(text);
      expected.update(text);
      total += Buffer.byteLength(text);
    }
    // The fast viewer gets the whole run while the slow one is still not reading.
    const deadline = Date.now() + 60_000;
    while (fast.bytes < total && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(fast.bytes).toBe(total);
    expect(slow.bytes).toBeLessThan(total);
    // Let the server settle with the slow viewer stuck (what it holds for the viewer the same
    // over half a second, however long that takes), then look at what it holds.
    let pending = -1;
    for (let round = 0; round < 100 && hub.snapshot().maxPendingBytes !== pending; round += 1) {
      pending = hub.snapshot().maxPendingBytes;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    clearInterval(sampler);
    const held = retainedBytes() - before;
    const demotions = hub.stats.slowViewerDemotions;

    // The slow viewer reads again and gets every byte, in order.
    socket.resume();
    while (slow.bytes < total && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    socket.destroy();
    controller.abort();
    await fastReading;

    const digest = expected.digest('hex');
    expect(fast.hash.digest('hex')).toBe(digest);
    expect(slow.bytes).toBe(total);
    expect(slow.outOfOrder).toBe(0);
    expect(fast.outOfOrder).toBe(0);
    expect(slow.hash.digest('hex')).toBe(digest);
    expect(demotions).toBeGreaterThanOrEqual(1);
    // What the server held for the stuck viewer: its cap plus one page of at most
    // maxBytesPerTick (1 MiB) and one frame.
    expect(pendingPeak).toBeLessThanOrEqual(CAP + MiB + 256 * 1024);
    // And the whole process, after a full GC, while the viewer was stuck: the cap, one page,
    // the replay buffer and a small constant, against the ~50 MB an unbounded queue would hold.
    console.log(
      `held ${(held / MiB).toFixed(1)} MiB while stuck; pending peak ${(pendingPeak / MiB).toFixed(2)} MiB`,
    );
    expect(held).toBeLessThanOrEqual(CAP + 2 * MiB + 4 * MiB);
  });
});
