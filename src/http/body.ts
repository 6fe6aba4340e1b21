import { isUtf8 } from 'node:buffer';
import type { IncomingMessage } from 'node:http';
import { promisify } from 'node:util';
import { gunzip } from 'node:zlib';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import { BoundedJsonReader, MAX_JSON_DEPTH } from '../model/bounded-json.js';
import type { JsonLimits } from '../model/bounded-json.js';
import { TailwaterError } from '../model/errors.js';

/** The body of a `text/plain` request, checked to be UTF-8. */
export class PlainText {
  constructor(readonly text: string) {}
}

/** The body of a route that takes bytes (BodyConfig.bytes), decompressed, with its type. */
export class RawBody {
  constructor(
    readonly bytes: Buffer,
    /** The media type without parameters, lower case (`application/x-protobuf`). */
    readonly mediaType: string,
  ) {}
}

const gunzipAsync = promisify(gunzip);

/** What a route says of the bodies it takes (its `config`). */
declare module 'fastify' {
  // A route's body budget, read by the JSON parser below.
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type -- declaration merging: it adds BodyConfig's members
  interface FastifyContextConfig extends BodyConfig {}
}

export interface BodyConfig {
  /** The budget of its JSON bodies; the default suits small ones. */
  json?: JsonLimits;
  /** An empty body, whatever its content type, is no body (a route that takes none). */
  emptyBody?: boolean;
  /**
   * The route decodes its own body (OTLP's protobuf or JSON): it gets a RawBody of at most
   * bodyLimit bytes, after `Content-Encoding: gzip` if sent, for these media types only.
   */
  bytes?: { mediaTypes: readonly string[] };
}

const DEFAULT_JSON_LIMITS: JsonLimits = { maxDepth: MAX_JSON_DEPTH, maxValues: 50_000 };

function checkCharset(contentType: string | undefined): void {
  const charset = /charset\s*=\s*"?([^";\s]+)/i.exec(contentType ?? '')?.[1];
  if (charset && !/^utf-?8$/i.test(charset)) {
    throw new TailwaterError(
      'TW_UNSUPPORTED_MEDIA_TYPE',
      `Only UTF-8 bodies are accepted (charset was ${charset}).`,
    );
  }
}

function checkUtf8(body: Buffer): void {
  if (!isUtf8(body)) {
    throw new TailwaterError(
      'TW_BAD_UTF8',
      'The body is not valid UTF-8; it was not stored (Tailwater never stores replacement characters).',
    );
  }
}

function tooLarge(limit: number): TailwaterError {
  return new TailwaterError(
    'TW_BODY_TOO_LARGE',
    `The body is larger than this endpoint takes (${limit} bytes).`,
  );
}

/**
 * The bytes of request bodies held at once, server-wide: each request's are counted as they
 * arrive and given back when its answer is sent (or it is abandoned), since the parsed body
 * lives that long.
 */
class BodyBudget {
  private inFlight = 0;
  private readonly held = new WeakMap<IncomingMessage, number>();

  constructor(private readonly max: number) {}

  take(raw: IncomingMessage, bytes: number): void {
    if (this.inFlight + bytes > this.max) {
      throw new TailwaterError(
        'TW_SERVER_BUSY',
        'The server is reading as much request data as it holds at once; retry shortly.',
        { 'Retry-After': '5' },
      );
    }
    this.inFlight += bytes;
    this.held.set(raw, (this.held.get(raw) ?? 0) + bytes);
  }

  release(raw: IncomingMessage): void {
    this.inFlight -= this.held.get(raw) ?? 0;
    this.held.delete(raw);
  }
}

/**
 * Reads a request body piece by piece, within the route's limit: a declared length over it is
 * refused before a byte is read, and a body that grows past it is refused as soon as it does.
 * `onChunk` may throw to stop early. What was not read is never read: the error handler closes
 * the connection (see errors.ts).
 */
function readBody(
  request: FastifyRequest,
  payload: IncomingMessage,
  budget: BodyBudget,
  onChunk: (chunk: Buffer) => void,
): Promise<number> {
  const limit = request.routeOptions.bodyLimit ?? 0;
  checkCharset(request.headers['content-type']);
  const encoding = request.headers['content-encoding'];
  const gzipAccepted = request.routeOptions.config.bytes !== undefined;
  if (
    encoding !== undefined &&
    encoding.toLowerCase() !== 'identity' &&
    !(gzipAccepted && encoding.toLowerCase() === 'gzip')
  ) {
    throw new TailwaterError(
      'TW_UNSUPPORTED_MEDIA_TYPE',
      `Content-Encoding ${encoding} is not accepted; send the body as it is.`,
    );
  }
  const declared = Number(request.headers['content-length'] ?? NaN);
  if (declared > limit) throw tooLarge(limit);
  return new Promise((resolve, reject) => {
    let received = 0;
    const stop = (error?: Error) => {
      payload.removeListener('data', onData);
      payload.removeListener('end', onEnd);
      payload.removeListener('error', onError);
      if (error) {
        // Read no more of it: the answer says why, and the connection closes after it.
        payload.pause();
        reject(error);
      } else {
        resolve(received);
      }
    };
    const onData = (chunk: Buffer) => {
      received += chunk.length;
      if (received > limit) return stop(tooLarge(limit));
      try {
        budget.take(request.raw, chunk.length);
        onChunk(chunk);
      } catch (error) {
        stop(error as Error);
      }
    };
    const onEnd = () => stop();
    const onError = (error: Error) =>
      stop(new TailwaterError('TW_BAD_REQUEST', `The body could not be read: ${error.message}`));
    payload.on('data', onData);
    payload.on('end', onEnd);
    payload.on('error', onError);
  });
}

/**
 * Replaces Fastify's body parsers. Every body is read within its route's limit and budget
 * before anything is built from it (docs/SECURITY.md); broken UTF-8 is refused instead of
 * silently turned into U+FFFD; malformed JSON gets Tailwater's own error code.
 */
export function registerBodyParsers(app: FastifyInstance, maxBodyBytesInFlight: number): void {
  const budget = new BodyBudget(maxBodyBytesInFlight);
  const release = async (request: FastifyRequest) => budget.release(request.raw);
  app.addHook('onResponse', release);
  app.addHook('onRequestAbort', release);
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(
    'application/json',
    async (request: FastifyRequest, payload: IncomingMessage) => {
      const config = request.routeOptions.config;
      if (config.bytes) return readRawBody(request, payload, budget);
      const reader = new BoundedJsonReader(config.json ?? DEFAULT_JSON_LIMITS);
      const bytes = await readBody(request, payload, budget, (chunk) => reader.feed(chunk));
      if (bytes === 0 && config.emptyBody) return undefined;
      return reader.finish();
    },
  );
  app.addContentTypeParser(
    'text/plain',
    async (request: FastifyRequest, payload: IncomingMessage) => {
      const chunks: Buffer[] = [];
      await readBody(request, payload, budget, (chunk) => chunks.push(chunk));
      const body = Buffer.concat(chunks);
      checkUtf8(body);
      return new PlainText(body.toString('utf8'));
    },
  );
  // Only a route that decodes its own bytes takes protobuf; any other answers 415.
  app.addContentTypeParser(
    'application/x-protobuf',
    async (request: FastifyRequest, payload: IncomingMessage) => {
      if (!request.routeOptions.config.bytes) {
        throw new TailwaterError(
          'TW_UNSUPPORTED_MEDIA_TYPE',
          'Unsupported content type: use application/json (or text/plain for log text).',
        );
      }
      return readRawBody(request, payload, budget);
    },
  );
}

/**
 * A body as bytes, for a route that decodes its own: gzip is undone with the same limit on
 * what it inflates to as on what was sent, so a small bomb cannot become a large body.
 */
async function readRawBody(
  request: FastifyRequest,
  payload: IncomingMessage,
  budget: BodyBudget,
): Promise<RawBody> {
  const mediaType = (request.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  const accepted = request.routeOptions.config.bytes!.mediaTypes;
  if (!accepted.includes(mediaType)) {
    throw new TailwaterError(
      'TW_UNSUPPORTED_MEDIA_TYPE',
      `Unsupported content type: this endpoint takes ${accepted.join(' or ')}.`,
    );
  }
  const chunks: Buffer[] = [];
  await readBody(request, payload, budget, (chunk) => chunks.push(chunk));
  const sent = Buffer.concat(chunks);
  if (request.headers['content-encoding']?.toLowerCase() !== 'gzip') {
    return new RawBody(sent, mediaType);
  }
  const limit = request.routeOptions.bodyLimit ?? 0;
  let inflated: Buffer;
  try {
    inflated = await gunzipAsync(sent, { maxOutputLength: limit });
  } catch (error) {
    if ((error as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE') throw tooLarge(limit);
    throw new TailwaterError(
      'TW_BAD_REQUEST',
      `The body is not valid gzip: ${(error as Error).message}`,
    );
  }
  budget.take(request.raw, inflated.length);
  return new RawBody(inflated, mediaType);
}

/** Validates a parsed JSON body; the first problem is reported with its path. */
export function parseBody<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  if (body === undefined || body instanceof PlainText) {
    throw new TailwaterError('TW_UNSUPPORTED_MEDIA_TYPE', 'This endpoint takes application/json.');
  }
  const result = schema.safeParse(body);
  if (result.success) return result.data;
  throw validationError(result.error);
}

/** The first issue of a failed validation, as a 400 with its path (`events[3].kind: …`). */
export function validationError(error: z.ZodError, prefix = ''): TailwaterError {
  const issue = error.issues[0]!;
  const path = issue.path
    .map((part, index) =>
      typeof part === 'number'
        ? `[${part}]`
        : `${index === 0 && !prefix ? '' : '.'}${String(part)}`,
    )
    .join('');
  const where = `${prefix}${path}`;
  return new TailwaterError('TW_BAD_REQUEST', `${where ? `${where}: ` : ''}${issue.message}`);
}
