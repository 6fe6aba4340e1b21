import { isUtf8 } from 'node:buffer';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import { TailwaterError } from '../model/errors.js';
import { parseJsonBody } from './exact-json.js';

/** The body of a `text/plain` request, checked to be UTF-8. */
export class PlainText {
  constructor(readonly text: string) {}
}

function checkCharset(contentType: string | undefined): void {
  const charset = /charset\s*=\s*"?([^";\s]+)/i.exec(contentType ?? '')?.[1];
  if (charset && !/^utf-?8$/i.test(charset)) {
    throw new TailwaterError(
      'TW_UNSUPPORTED_MEDIA_TYPE',
      `Only UTF-8 bodies are accepted (charset was ${charset}).`,
    );
  }
}

function decodeUtf8(body: Buffer): string {
  if (!isUtf8(body)) {
    throw new TailwaterError(
      'TW_BAD_UTF8',
      'The body is not valid UTF-8; it was not stored (Tailwater never stores replacement characters).',
    );
  }
  return body.toString('utf8');
}

/**
 * Replaces Fastify's body parsers so that broken UTF-8 is refused instead of silently turned
 * into U+FFFD, and malformed JSON gets Tailwater's own error code.
 */
export function registerBodyParsers(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(
    'application/json',
    { parseAs: 'buffer' },
    (request: FastifyRequest, body: Buffer, done) => {
      try {
        checkCharset(request.headers['content-type']);
        const text = decodeUtf8(body);
        if (text.trim() === '') throw new TailwaterError('TW_BAD_JSON', 'The JSON body is empty.');
        let value: unknown;
        try {
          value = parseJsonBody(text);
        } catch (error) {
          throw new TailwaterError('TW_BAD_JSON', `Malformed JSON: ${(error as Error).message}`);
        }
        done(null, value);
      } catch (error) {
        done(error as Error, undefined);
      }
    },
  );
  app.addContentTypeParser(
    'text/plain',
    { parseAs: 'buffer' },
    (request: FastifyRequest, body: Buffer, done) => {
      try {
        checkCharset(request.headers['content-type']);
        done(null, new PlainText(decodeUtf8(body)));
      } catch (error) {
        done(error as Error, undefined);
      }
    },
  );
}

/** Validates a parsed JSON body; the first problem is reported with its path. */
export function parseBody<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  if (body === undefined || body instanceof PlainText) {
    throw new TailwaterError('TW_UNSUPPORTED_MEDIA_TYPE', 'This endpoint takes application/json.');
  }
  const result = schema.safeParse(body);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const path = issue.path
    .map((part, index) =>
      typeof part === 'number' ? `[${part}]` : `${index === 0 ? '' : '.'}${String(part)}`,
    )
    .join('');
  throw new TailwaterError('TW_BAD_REQUEST', `${path ? `${path}: ` : ''}${issue.message}`);
}
