import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { EventSource } from 'eventsource';
import { afterEach, describe, expect, it } from 'vitest';
import { createTestApp } from '../helpers/app.js';
import type { TestApp } from '../helpers/app.js';

/** A loopback TCP proxy whose connections the test can cut at will. */
async function cuttingProxy(target: URL) {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    client.pipe(upstream).pipe(client);
    const pair = [client, upstream];
    for (const socket of pair) {
      sockets.add(socket);
      socket.on('error', () => pair.forEach((s) => s.destroy()));
      socket.on('close', () => {
        sockets.delete(socket);
        pair.forEach((s) => s.destroy());
      });
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    get open() {
      return sockets.size;
    },
    cutAll() {
      for (const socket of sockets) socket.destroy();
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

const TOTAL = 10_000;
const PER_BATCH = 20;
const CUTS = 50;

describe('a viewer cut off 50 times during a run of 10,000 entries', () => {
  let t: TestApp | undefined;
  afterEach(async () => t?.close());

  it('ends with every entry exactly once, in order, resuming by Last-Event-ID', async () => {
    t = await createTestApp({ retryMillis: 5, pollSeconds: 0.05, finishGraceSeconds: 0.2 });
    const base = new URL(await t.listen());
    const proxy = await cuttingProxy(base);
    const run = '/api/v1/pipelines/reconnect.test/runs/r1';
    await fetch(`${base.origin}${run}`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ status: 'running' }),
    });

    const seen: number[] = [];
    let connections = 0;
    let openSinceCut = false;
    const source = new EventSource(`${proxy.url}${run}/stream`);
    source.addEventListener('open', () => {
      connections += 1;
      openSinceCut = true;
    });
    const onEntry = (event: MessageEvent) => seen.push(Number(event.lastEventId));
    source.addEventListener('log', onEntry);
    source.addEventListener('status', onEntry);
    source.addEventListener('progress', onEntry);
    const ended = new Promise<{ reason: string; lastSeq: number }>((resolve) =>
      source.addEventListener('end', (event) => {
        source.close();
        resolve(JSON.parse((event as MessageEvent).data));
      }),
    );

    // The producer: 10,000 entries in batches, paced so the cuts land during the run.
    const producing = (async () => {
      for (let sent = 0; sent < TOTAL; sent += PER_BATCH) {
        const events = Array.from({ length: PER_BATCH }, (_, i) => ({
          kind: 'progress',
          data: { n: sent + i },
        }));
        const res = await fetch(`${base.origin}${run}/events`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ events }),
        });
        expect(res.status).toBe(200);
        await new Promise((resolve) => setTimeout(resolve, 6));
      }
    })();

    // 50 cuts at random moments, each of a connection that had opened (so each is a resume).
    let cuts = 0;
    let seed = 42;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    while (cuts < CUTS) {
      await new Promise((resolve) => setTimeout(resolve, 10 + random() * 40));
      if (openSinceCut && proxy.open > 0) {
        openSinceCut = false;
        proxy.cutAll();
        cuts += 1;
      }
    }
    await producing;
    await fetch(`${base.origin}${run}`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ status: 'success' }),
    });
    const end = await ended;
    await proxy.close();

    expect(cuts).toBe(CUTS);
    expect(connections).toBeGreaterThan(CUTS);
    expect(end.reason).toBe('runFinished');
    // status running, 10,000 events, status success: every seq once, in order.
    const lastSeq = TOTAL + 2;
    expect(end.lastSeq).toBe(lastSeq);
    expect(seen).toEqual(Array.from({ length: lastSeq }, (_, i) => i + 1));
  });
});
