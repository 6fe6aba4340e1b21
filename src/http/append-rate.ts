import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { TailwaterError } from '../model/errors.js';

/**
 * At most `perMinute` writes (appends, status changes, cancels) per token per minute, with
 * authentication on: past it, 429 TW_TOO_MANY_APPENDS with Retry-After (docs/SECURITY.md,
 * "Limits and timeouts"). Reads and streams are not counted; their caps are the stream limits.
 * The token is known by its `sub`, else by a hash of itself (TokenHolder.key).
 */
export async function limitAppendsPerToken(app: FastifyInstance, perMinute: number): Promise<void> {
  await app.register(rateLimit, {
    max: perMinute,
    timeWindow: 60_000,
    keyGenerator: (request) => tokenKey(request),
    allowList: (request) =>
      request.tokenHolder === undefined || request.method === 'GET' || request.method === 'HEAD',
    errorResponseBuilder: (_request, context) => {
      const seconds = Math.max(1, Math.ceil(context.ttl / 1000));
      return new TailwaterError(
        'TW_TOO_MANY_APPENDS',
        `This token made ${context.max} writes this minute, as many as one token may; retry in ${seconds} s.`,
        { 'Retry-After': String(seconds) },
      );
    },
  });
}

// Only requests with a token are counted (the allow list lets the others through).
const tokenKey = (request: FastifyRequest): string => request.tokenHolder?.key ?? '';
