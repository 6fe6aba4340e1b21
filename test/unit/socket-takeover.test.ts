import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { cutConnections, takeSocket } from '../../src/http/socket-takeover.js';

/** A node:http server whose handler takes each socket after writing a head, as a stream does. */
async function takingServer(onTaken: (socket: Socket, res: http.ServerResponse) => void) {
  const server = http.createServer((_req, res) => {
    res.useChunkedEncodingByDefault = false;
    res.shouldKeepAlive = false;
    res.writeHead(200, { 'Content-Type': 'text/event-stream' });
    res.flushHeaders();
    onTaken(takeSocket(res), res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push(server);
  return { server, port: (server.address() as AddressInfo).port };
}

const servers: http.Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    cutConnections(server);
    await new Promise((resolve) => server.close(resolve));
  }
});

/** A raw client: sends `request`, collects everything, resolves its text when the server closes. */
function rawClient(port: number, request: string) {
  const socket = net.connect(port, '127.0.0.1');
  const chunks: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  socket.write(request);
  const closed = new Promise<string>((resolve) =>
    socket.on('close', () => resolve(Buffer.concat(chunks).toString('utf8'))),
  );
  return { socket, closed, text: () => Buffer.concat(chunks).toString('utf8') };
}

const GET = 'GET /stream HTTP/1.1\r\nHost: x\r\n\r\n';

describe('takeSocket', () => {
  it('leaves no node:http listener, parser or response on the socket', async () => {
    let taken: Socket | undefined;
    let response: http.ServerResponse | undefined;
    const { port } = await takingServer((socket, res) => {
      taken = socket;
      response = res;
      socket.end('data: x\n\n');
    });
    await rawClient(port, GET).closed;
    const socket = taken as Socket & { parser?: unknown; _httpMessage?: unknown };
    expect(socket.parser).toBeNull();
    expect(socket._httpMessage).toBeNull();
    expect(response!.socket).toBeNull();
    const names = socket
      .eventNames()
      .flatMap((event) => socket.listeners(event).map((listener) => listener.name));
    expect(names.filter((name) => /socketOn|onSocket|onServerResponse/.test(name))).toEqual([]);
  });

  it('writes the head through node:http, then what the owner writes goes straight after it', async () => {
    const { port } = await takingServer((socket) => {
      socket.write('data: one\n\n');
      socket.end('data: two\n\n');
    });
    const text = await rawClient(port, GET).closed;
    expect(text).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(text).toMatch(/\r\nConnection: close\r\n/i);
    expect(text).not.toMatch(/Transfer-Encoding/i);
    expect(text.slice(text.indexOf('\r\n\r\n') + 4)).toBe('data: one\n\ndata: two\n\n');
  });

  it('ignores a second request sent on the taken socket: node:http no longer parses it', async () => {
    let requests = 0;
    const server = http.createServer((_req, res) => {
      requests += 1;
      res.useChunkedEncodingByDefault = false;
      res.shouldKeepAlive = false;
      res.writeHead(200);
      res.flushHeaders();
      const socket = takeSocket(res);
      setTimeout(() => socket.end('done'), 200);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    servers.push(server);
    const client = rawClient((server.address() as AddressInfo).port, GET);
    client.socket.write(GET);
    const text = await client.closed;
    expect(requests).toBe(1);
    expect(text.match(/HTTP\/1\.1/g)).toHaveLength(1);
  });

  it('closes the socket when the client sends its FIN, and when the client resets it', async () => {
    const closed: string[] = [];
    const { port } = await takingServer((socket) => {
      socket.on('close', () => closed.push('closed'));
    });
    const ending = rawClient(port, GET);
    await until(() => ending.text().includes('\r\n\r\n'));
    ending.socket.end();
    await until(() => closed.length === 1);
    const resetting = rawClient(port, GET);
    await until(() => resetting.text().includes('\r\n\r\n'));
    resetting.socket.resetAndDestroy();
    await until(() => closed.length === 2);
    expect(closed).toEqual(['closed', 'closed']);
  });

  it('is cut by cutConnections, which node:http’s closeAllConnections alone would miss', async () => {
    const { server, port } = await takingServer(() => undefined);
    const client = rawClient(port, GET);
    await until(() => client.text().includes('\r\n\r\n'));
    server.closeAllConnections();
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(client.socket.destroyed).toBe(false);
    cutConnections(server);
    await client.closed;
  });
});

async function until(condition: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
