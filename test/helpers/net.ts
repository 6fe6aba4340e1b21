import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';

/** A loopback port nothing listens on (it was just released). */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** A plain node:http server whose handler sees the request number (1, 2, …). */
export async function scriptedServer(
  handler: (n: number, request: http.IncomingMessage, response: http.ServerResponse) => void,
) {
  let requests = 0;
  const server = http.createServer((request, response) => handler(++requests, request, response));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    get requests() {
      return requests;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
