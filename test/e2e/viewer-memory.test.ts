import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { putStatus, runPath } from '../helpers/api.js';
import { collectGarbage as collectChildGarbage, GC_ON_SIGNAL } from '../helpers/gc-signal.js';
import { startServerProcess } from '../helpers/server-process.js';
import type { ServerProcess } from '../helpers/server-process.js';
import { sleep } from '../helpers/wait.js';

const VIEWERS = 10_000;
const RUNS = 100;
const PARALLEL = 250;
const MiB = 1024 * 1024;

let server: ServerProcess;
let dataDir: string;
let port: number;

/** A full collection in the server (scripts/gc-signal.mjs), then its memory. */
const collectGarbage = () => collectChildGarbage(server.child);

/** Polls /metrics until `name` reads `value`. */
async function gaugeReaches(name: string, value: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while ((await gauge(name)) !== value) {
    if (Date.now() > deadline) throw new Error(`${name} did not reach ${value}`);
    await sleep(100);
  }
}

async function gauge(name: string): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const match = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
  if (!match) throw new Error(`${name} is not in /metrics`);
  return Number(match[1]);
}

/** Opens a run's stream on a raw socket; resolves once the head and the first frame are in. */
function openViewer(run: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let received = '';
    const onData = (chunk: Buffer) => {
      received += chunk.toString('latin1');
      if (!received.includes('\r\n\r\n')) return;
      if (!received.startsWith('HTTP/1.1 200 ')) reject(new Error(received.slice(0, 200)));
      else if (received.includes('retry:')) {
        socket.off('data', onData);
        socket.resume();
        resolve(socket);
      }
    };
    socket.on('data', onData);
    socket.on('error', reject);
    socket.write(
      `GET ${runPath('memory.pipeline', `r${run}`)}/stream HTTP/1.1\r\n` +
        `Host: 127.0.0.1:${port}\r\nAccept: text/event-stream\r\n\r\n`,
    );
  });
}

async function openViewers(count: number): Promise<net.Socket[]> {
  const sockets: net.Socket[] = [];
  for (let i = 0; i < count; i += PARALLEL) {
    const batch = Array.from({ length: Math.min(PARALLEL, count - i) }, (_, j) =>
      openViewer((i + j) % RUNS),
    );
    sockets.push(...(await Promise.all(batch)));
  }
  return sockets;
}

async function closeViewers(sockets: net.Socket[]): Promise<void> {
  for (const socket of sockets) socket.destroy();
  await gaugeReaches('tailwater_stream_connections', 0, 60_000);
}

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'tw-viewer-memory-'));
  server = await startServerProcess(['--data', dataDir], {
    NODE_OPTIONS: GC_ON_SIGNAL.join(' '),
    TAILWATER_MAX_ACTIVE_CONNECTIONS: '20000',
    TAILWATER_MAX_SUBSCRIBERS_PER_STREAM: '20000',
    TAILWATER_MAX_CONNECTIONS_PER_CLIENT: '20000',
    TAILWATER_MAX_STREAMS_PER_CLIENT: '20000',
    TAILWATER_HEARTBEAT_SECONDS: '3600',
    // Readers of streams nobody watches retire at once, so "after" holds none of them.
    TAILWATER_TAILER_IDLE_GRACE_SECONDS: '1',
  });
  port = Number(new URL(server.url).port);
  for (let run = 0; run < RUNS; run += 1) {
    await putStatus(server.url, runPath('memory.pipeline', `r${run}`), 'running');
  }
}, 60_000);

afterAll(async () => {
  await server?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

describe('10,000 viewers that open and then leave', () => {
  it('leave the server holding what it held before, and none of them', async () => {
    // A first round warms every code path (and V8's compiled code) before "before".
    await closeViewers(await openViewers(1000));
    await gaugeReaches('tailwater_active_streams', 0, 30_000);
    const before = await collectGarbage();

    const sockets = await openViewers(VIEWERS);
    expect(await gauge('tailwater_stream_connections')).toBe(VIEWERS);
    const open = await collectGarbage();

    await closeViewers(sockets);
    await gaugeReaches('tailwater_active_streams', 0, 30_000);
    const after = await collectGarbage();

    const held = open.heapUsed - before.heapUsed;
    const left = after.heapUsed - before.heapUsed;
    console.log(
      `V8 heap: ${(before.heapUsed / MiB).toFixed(1)} MiB before, ${(open.heapUsed / MiB).toFixed(1)} MiB ` +
        `with ${VIEWERS} viewers (${(held / VIEWERS).toFixed(0)} B each), ${(after.heapUsed / MiB).toFixed(1)} MiB after; ` +
        `RSS ${(before.rss / MiB).toFixed(0)} → ${(open.rss / MiB).toFixed(0)} → ${(after.rss / MiB).toFixed(0)} MiB`,
    );
    // The measurement can see viewers at all: 10,000 of them hold megabytes while open.
    expect(held).toBeGreaterThan(5 * MiB);
    // And once they are gone, what they held is free again: at most 2 % of it (or 1 MiB,
    // V8's own bookkeeping) is left, where a leak of one object per viewer would leave more.
    expect(left).toBeLessThan(Math.max(MiB, held * 0.02));
  }, 300_000);
});
