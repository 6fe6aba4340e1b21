import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createTestApp, liveApps } from '../helpers/app.js';

// Behind nginx every client has nginx's address. With `trustProxy` naming the proxy, the
// per-client limits count the client its X-Forwarded-For names (docs/DEPLOYMENT.md).

const live = liveApps({ pollSeconds: 0.05 });
const sockets: Socket[] = [];
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  await live.closeAll();
});

const stream = (url: string, topic: string, forwardedFor?: string) =>
  fetch(`${url}/api/v1/topics/${topic}/stream`, {
    headers: forwardedFor ? { 'x-forwarded-for': forwardedFor } : {},
  });

describe('trustProxy', () => {
  it('counts streams per client by X-Forwarded-For from a trusted proxy', async () => {
    const t = await live.start({ maxStreamsPerClient: 1, trustProxy: '127.0.0.1' });
    const first = await stream(t.url, 'a', '203.0.113.7');
    const other = await stream(t.url, 'b', '203.0.113.8');
    const again = await stream(t.url, 'c', '203.0.113.7');
    expect([first.status, other.status, again.status]).toEqual([200, 200, 429]);
    expect(await again.json()).toMatchObject({ error: { code: 'TW_TOO_MANY_CLIENT_STREAMS' } });
    await Promise.all([first.body?.cancel(), other.body?.cancel()]);
  });

  it('ignores X-Forwarded-For from an address it does not trust, so a client cannot name itself another', async () => {
    const t = await live.start({ maxStreamsPerClient: 1, trustProxy: '10.0.0.0/8' });
    const first = await stream(t.url, 'a', '203.0.113.7');
    const spoofed = await stream(t.url, 'b', '203.0.113.8');
    expect([first.status, spoofed.status]).toEqual([200, 429]);
    await first.body?.cancel();
  });

  it("does not count a trusted proxy's connections against maxConnectionsPerClient", async () => {
    const open = async (port: number) => {
      const socket = connect(port, '127.0.0.1');
      sockets.push(socket);
      await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
      return socket;
    };
    const answerOf = (socket: Socket) =>
      new Promise<string>((resolve) => {
        let text = '';
        socket.on('data', (chunk: Buffer) => {
          text += chunk.toString();
        });
        socket.once('close', () => resolve(text));
        // One request per socket, then close: what is answered is what counts.
        socket.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n');
      });
    const trusting = await live.start({ maxConnectionsPerClient: 2, trustProxy: 'loopback' });
    const port = Number(new URL(trusting.url).port);
    const held = [await open(port), await open(port), await open(port)];
    const answers = await Promise.all(held.map(answerOf));
    expect(answers.map((answer) => answer.split('\r\n')[0])).toEqual([
      'HTTP/1.1 200 OK',
      'HTTP/1.1 200 OK',
      'HTTP/1.1 200 OK',
    ]);

    const strict = await live.start({ maxConnectionsPerClient: 2 });
    const strictPort = Number(new URL(strict.url).port);
    const strictHeld = [await open(strictPort), await open(strictPort), await open(strictPort)];
    const strictAnswers = await Promise.all(strictHeld.map(answerOf));
    expect(strictAnswers.filter((answer) => answer.startsWith('HTTP/1.1 429'))).toHaveLength(1);
  });

  it('refuses a trustProxy that is not a list of addresses at start, naming the setting', async () => {
    await expect(createTestApp({ trustProxy: 'not an address' })).rejects.toThrow(/^trustProxy: /);
  });
});
