import net from 'node:net';
import type { AddressInfo } from 'node:net';

export interface TcpProxy {
  /** Base URL of the proxy (`http://127.0.0.1:<port>`). */
  url: string;
  /** Client connections open right now. */
  readonly open: number;
  /** Connections accepted so far. */
  readonly connections: number;
  /** Answers dropped by `dropNextResponses` so far. */
  readonly droppedResponses: number;
  /** Cuts every open connection (both sides). */
  cutAll(): void;
  /**
   * The next `n` connections forward their request to the server, which handles it, but are cut
   * as soon as its answer starts arriving: the client never sees the answer.
   */
  dropNextResponses(n: number): void;
  close(): Promise<void>;
}

/** A loopback TCP proxy in front of `target` whose connections a test can cut. */
export async function startTcpProxy(target: string): Promise<TcpProxy> {
  const upstreamUrl = new URL(target);
  const sockets = new Set<net.Socket>();
  const clients = new Set<net.Socket>();
  let connections = 0;
  let toDrop = 0;
  let droppedResponses = 0;
  const server = net.createServer((client) => {
    connections += 1;
    clients.add(client);
    client.on('close', () => clients.delete(client));
    const upstream = net.connect(Number(upstreamUrl.port), upstreamUrl.hostname);
    const pair = [client, upstream];
    const cut = () => pair.forEach((socket) => socket.destroy());
    let dropThis = false;
    if (toDrop > 0) {
      toDrop -= 1;
      dropThis = true;
    }
    client.on('data', (chunk) => upstream.write(chunk));
    upstream.on('data', (chunk) => {
      if (dropThis) {
        droppedResponses += 1;
        cut();
        return;
      }
      client.write(chunk);
    });
    client.on('end', () => upstream.end());
    upstream.on('end', () => client.end());
    for (const socket of pair) {
      sockets.add(socket);
      socket.on('error', cut);
      socket.on('close', () => {
        sockets.delete(socket);
        cut();
      });
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    get open() {
      return clients.size;
    },
    get connections() {
      return connections;
    },
    get droppedResponses() {
      return droppedResponses;
    },
    cutAll() {
      for (const socket of sockets) socket.destroy();
    },
    dropNextResponses(n: number) {
      toDrop += n;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
