import type { ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ErrorCode } from '../model/errors.js';
import { ERROR_STATUS, TailwaterError } from '../model/errors.js';

/** Fastify's own errors, in Tailwater's terms. */
const FASTIFY_CODES: Record<string, ErrorCode> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'TW_UNSUPPORTED_MEDIA_TYPE',
  FST_ERR_CTP_BODY_TOO_LARGE: 'TW_BODY_TOO_LARGE',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'TW_BAD_JSON',
  FST_ERR_CTP_INVALID_JSON_BODY: 'TW_BAD_JSON',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'TW_BAD_REQUEST',
  FST_ERR_CTP_EMPTY_TYPE: 'TW_UNSUPPORTED_MEDIA_TYPE',
  FST_ERR_BAD_URL: 'TW_BAD_REQUEST',
  FST_ERR_MAX_PARAM_LENGTH: 'TW_BAD_NAME',
};

/**
 * An error answer written straight to a socket, for refusals that happen before HTTP has a
 * request to answer (a connection over its client's cap, a request that timed out).
 */
export function rawErrorResponse(
  error: TailwaterError,
  reason: string,
  headers: Record<string, string> = {},
): string {
  const body = JSON.stringify(tailwaterErrorBody(error));
  const extra = Object.entries({ ...error.headers, ...headers })
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');
  return (
    `HTTP/1.1 ${ERROR_STATUS[error.code]} ${reason}\r\n` +
    'Content-Type: application/json; charset=utf-8\r\n' +
    `Content-Length: ${Buffer.byteLength(body)}\r\n${extra}Connection: close\r\n\r\n${body}`
  );
}

const CLIENT_ERRORS: Record<string, [TailwaterError, string]> = {
  ERR_HTTP_REQUEST_TIMEOUT: [
    new TailwaterError(
      'TW_REQUEST_TIMEOUT',
      'The request did not arrive whole in time (requestTimeoutSeconds); it was not processed.',
    ),
    'Request Timeout',
  ],
  HPE_HEADER_OVERFLOW: [
    new TailwaterError('TW_HEADERS_TOO_LARGE', 'The request headers are too large.'),
    'Request Header Fields Too Large',
  ],
};

/** Node's HTTP parser gave up on a connection (slow, oversized or malformed request). */
export function clientErrorHandler(error: Error & { code?: string }, socket: Duplex): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const [answer, reason] = CLIENT_ERRORS[error.code ?? ''] ?? [
    new TailwaterError('TW_BAD_REQUEST', 'The request is not well-formed HTTP.'),
    'Bad Request',
  ];
  if (socket.writable) socket.write(rawErrorResponse(answer, reason));
  socket.destroy();
}

/**
 * For the router's own refusals, which happen before Fastify's reply exists. An answer to HEAD
 * has no body, as Fastify's own answers to HEAD have none.
 */
export function sendRawError(res: ServerResponse, error: TailwaterError, method?: string): void {
  res.writeHead(ERROR_STATUS[error.code], { 'content-type': 'application/json; charset=utf-8' });
  res.end(method === 'HEAD' ? undefined : JSON.stringify(tailwaterErrorBody(error)));
}

const methodOf = (req: unknown) => (req as { method?: string } | undefined)?.method;

/** Router hooks: a malformed percent-encoding or an over-long path segment is a 400 like any other. */
export const routerErrorOptions = {
  onBadUrl: (path: string, req: unknown, res: ServerResponse) =>
    sendRawError(
      res,
      new TailwaterError('TW_BAD_REQUEST', `The path is not valid percent-encoded UTF-8: ${path}`),
      methodOf(req),
    ),
  onMaxParamLength: (_path: string, req: unknown, res: ServerResponse) =>
    sendRawError(
      res,
      new TailwaterError('TW_BAD_NAME', 'A name in the path is too long (at most 256 bytes).'),
      methodOf(req),
    ),
};

export function toTailwaterError(error: unknown): TailwaterError {
  if (error instanceof TailwaterError) return error;
  const fastifyError = error as Partial<FastifyError>;
  const code = fastifyError.code && FASTIFY_CODES[fastifyError.code];
  if (code) {
    const message =
      code === 'TW_UNSUPPORTED_MEDIA_TYPE'
        ? 'Unsupported content type: use application/json (or text/plain for log text).'
        : (fastifyError.message ?? 'Bad request.');
    return new TailwaterError(code, message);
  }
  if (fastifyError.statusCode && fastifyError.statusCode >= 400 && fastifyError.statusCode < 500) {
    return new TailwaterError('TW_BAD_REQUEST', fastifyError.message ?? 'Bad request.');
  }
  return new TailwaterError('TW_INTERNAL', 'Internal server error.');
}

/** How long, and how much, what is left of a refused body is still read, and thrown away. */
const LINGER_MS = 2000;
const LINGER_BYTES = 64 * 1024 * 1024;

/**
 * A request refused before its body was all read (too large, over its budget): the connection
 * cannot carry another request, so it is closed after the answer. Closed at once, the bytes the
 * client is still sending would make the kernel answer with a reset, which can wipe out the
 * answer before the client reads it (a client would see "connection reset", not its 413). So
 * the connection lingers, as nginx's does: the answer and a FIN go out, and what still comes in
 * is read and dropped for at most LINGER_MS before the socket is destroyed. Past LINGER_BYTES
 * read after the answer, reading stops instead (a full window holds the client back until the
 * deadline): the socket is never destroyed early, and never before its answer is written, which
 * a kernel buffer already holding megabytes of the body once made happen.
 */
export function closeIfBodyUnread(request: FastifyRequest, reply: FastifyReply): void {
  if (request.raw.complete) return;
  void reply.header('connection', 'close');
  const socket = request.raw.socket;
  let answered = false;
  let drainedAfterAnswer = 0;
  request.raw.on('data', (chunk: Buffer) => {
    if (!answered) return;
    drainedAfterAnswer += chunk.length;
    if (drainedAfterAnswer > LINGER_BYTES) request.raw.pause();
  });
  request.raw.resume();
  // Node ends a `Connection: close` response's socket with destroySoon(), which destroys it
  // as soon as the answer is written; here it only half-closes, and the client's FIN, or the
  // deadline, ends it.
  socket.destroySoon = () => {
    answered = true;
    socket.end();
    socket.once('end', () => socket.destroy());
    setTimeout(() => socket.destroy(), LINGER_MS).unref();
  };
}

/** What an error answer's body says: each dialect speaks its original's error shape. */
export type ErrorBody = (error: TailwaterError) => object;

/** Tailwater's own: `{"error": {"code", "message"}}`. */
export const tailwaterErrorBody: ErrorBody = (error) => ({
  error: { code: error.code, message: error.message },
});

/**
 * Every error of the routes of `app` (a plugin's scope) leaves with the status of its code and
 * the body `body` makes of it; a plugin that does not set its own inherits Tailwater's.
 */
export function registerErrorHandler(app: FastifyInstance, body: ErrorBody): void {
  app.setErrorHandler((error, request, reply) => {
    const tailwaterError = toTailwaterError(error);
    if (tailwaterError.code === 'TW_INTERNAL') request.log.error({ err: error }, 'request failed');
    if (reply.sent || reply.raw.headersSent) return;
    closeIfBodyUnread(request, reply);
    void reply
      .code(ERROR_STATUS[tailwaterError.code])
      .headers(tailwaterError.headers)
      .send(body(tailwaterError));
  });
}

/** Tailwater's error shape for every route, and for a path no route serves. */
export function registerErrorHandling(app: FastifyInstance): void {
  registerErrorHandler(app, tailwaterErrorBody);
  app.setNotFoundHandler((request, reply) => {
    void reply
      .code(404)
      .send(
        tailwaterErrorBody(
          new TailwaterError('TW_NOT_FOUND', `No route ${request.method} ${request.url}.`),
        ),
      );
  });
}
