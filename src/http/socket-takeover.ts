import { createRequire } from 'node:module';
import type { Server, ServerResponse } from 'node:http';
import type { Server as NetServer, Socket } from 'node:net';

/**
 * node:http's own helper for letting go of a connection's parser, which it calls when a request
 * upgrades. `_http_common` is one of Node's built-in modules, but @types/node leaves it out.
 */
const { freeParser } = createRequire(import.meta.url)('_http_common') as {
  freeParser(parser: unknown, req: unknown, socket: unknown): void;
};

/**
 * The listeners node:http puts on a server socket (lib/_http_server.js, connectionListener),
 * by name: bound ones read "bound socketOnData" and so on. test/unit/socket-takeover.test.ts
 * checks, on the Node that runs the tests, that none is left after a takeover: a Node whose
 * names differ fails that test rather than leaking the objects.
 */
const HTTP_LISTENERS = new Set([
  'bound socketOnData',
  'bound socketOnEnd',
  'bound socketOnClose',
  'bound socketOnDrain',
  'socketOnError',
  'socketOnTimeout',
  'onSocketResume',
  'onSocketPause',
]);
const HTTP_EVENTS = ['data', 'end', 'close', 'drain', 'error', 'timeout', 'resume', 'pause'];

/** The parts of node:http's per-connection state a takeover clears (not in @types/node). */
interface HttpSocket extends Socket {
  parser?: unknown;
  /** Set by node:net on every socket a server accepts. */
  server?: NetServer;
}

/** Each server's taken sockets: node:http no longer knows them, so its closeAllConnections misses them. */
const taken = new WeakMap<NetServer, Set<Socket>>();

function forget(this: HttpSocket): void {
  if (this.server) taken.get(this.server)?.delete(this);
}

interface HttpParser {
  onIncoming: (...args: unknown[]) => unknown;
}

/** A request parsed after the takeover: nobody answers it. */
function ignoreRequest(): boolean {
  return false;
}

/** A socket that has left node:http: an error or the viewer's FIN just ends it. */
function destroyOwned(this: Socket): void {
  this.destroy();
}

/**
 * Takes a response's socket out of node:http once the response head has been written, as
 * node:http itself does for an `Upgrade` request (the WebSocket case): its parser is freed (and
 * leaves the server's list of connections), its listeners go, and the response lets go of the
 * socket. What is left is a plain socket: the request, the response and Fastify's request and
 * reply are garbage as soon as the handler returns, so an idle stream costs a socket and what
 * its owner keeps (docs/BENCHMARKS.md, "Idle memory"). The socket carries no more requests.
 */
export function takeSocket(res: ServerResponse): Socket {
  const socket = res.socket as HttpSocket | null;
  if (!socket) throw new Error('The response has no socket to take.');
  res.detachSocket(socket);
  for (const event of HTTP_EVENTS) {
    for (const listener of socket.listeners(event)) {
      if (HTTP_LISTENERS.has(listener.name)) {
        socket.removeListener(event, listener as (...args: unknown[]) => void);
      }
    }
  }
  // The handler may run inside the parser's own execution (it does for a synchronous one): a
  // parser freed there would be called again before the stack unwinds. So any request still
  // in the bytes being parsed goes nowhere now, and the parser is freed (its handle unconsumed,
  // the parser back in node:http's pool, socket.parser cleared) once the stack has unwound.
  const parser = socket.parser as HttpParser | null | undefined;
  if (parser) parser.onIncoming = ignoreRequest;
  process.nextTick(freeParser, parser, res.req, socket);
  socket.setTimeout(0);
  socket.on('error', destroyOwned);
  socket.on('end', destroyOwned);
  if (socket.server) {
    let sockets = taken.get(socket.server);
    if (!sockets) taken.set(socket.server, (sockets = new Set()));
    sockets.add(socket);
    socket.on('close', forget);
  }
  // Reading resumes: the viewer's FIN (or a reset) must reach 'end' even though nothing else it
  // sends means anything now.
  socket.resume();
  return socket;
}

/**
 * Cuts every connection of `server` at once, the taken ones (streams) included: the end of a
 * shutdown's grace, for viewers whose last frames could not be flushed.
 */
export function cutConnections(server: Server): void {
  server.closeAllConnections();
  for (const socket of taken.get(server) ?? []) socket.destroy();
}
