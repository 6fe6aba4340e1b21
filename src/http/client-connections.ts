import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { TailwaterError } from '../model/errors.js';
import { rawErrorResponse } from './errors.js';

/** How long a refused socket is given to read its answer before it is cut. */
const REFUSED_LINGER_MS = 1000;

/**
 * At most `max` open connections per remote address, loopback included: past it, a new
 * connection gets a 429 answer and is closed before a byte of its request is read, so one
 * client (a script opening sockets that never finish their requests) cannot use up the file
 * descriptors every other client needs. Counted when the socket opens, not when its request
 * arrives: a socket that never sends a request holds a descriptor all the same.
 */
export function limitConnectionsPerClient(
  server: Server,
  max: number,
  /**
   * A trusted proxy's sockets carry many clients, whose addresses are not known before their
   * requests arrive: they are not counted here. Each stream still counts against
   * maxActiveConnections, and against maxStreamsPerClient of the client X-Forwarded-For names.
   */
  trustedProxy: (address: string) => boolean = () => false,
): void {
  const open = new Map<string, number>();
  server.on('connection', (socket: Socket) => {
    const client = socket.remoteAddress ?? '';
    if (trustedProxy(client)) return;
    const count = (open.get(client) ?? 0) + 1;
    if (count > max) {
      refuse(socket, max);
      return;
    }
    open.set(client, count);
    socket.once('close', () => {
      const left = (open.get(client) ?? 1) - 1;
      if (left > 0) open.set(client, left);
      else open.delete(client);
    });
  });
}

function refuse(socket: Socket, max: number): void {
  // Node's HTTP parser is attached already; paused, it reads nothing, so no request of this
  // socket ever reaches a route. The answer goes out ahead of whatever the client sends.
  socket.pause();
  const error = new TailwaterError(
    'TW_TOO_MANY_CLIENT_CONNECTIONS',
    `This client already holds ${max} open connections, as many as one client may; close some, or retry shortly.`,
    { 'Retry-After': '5' },
  );
  socket.end(rawErrorResponse(error, 'Too Many Requests'));
  setTimeout(() => socket.destroy(), REFUSED_LINGER_MS).unref();
}
