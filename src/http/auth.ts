import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { TailwaterError } from '../model/errors.js';
import type { Action } from '../model/scopes.js';
import { allows, pipelineResource, topicResource } from '../model/scopes.js';
import { RUNS_FEED_TOPIC } from '../store/store.js';
import { pipelineParam, topicParam } from './params.js';
import { AuthFailures } from './auth-failures.js';
import type { TokenHolder, VerifyToken } from './token-verifier.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The verified token of this request, when authentication is on. */
    tokenHolder?: TokenHolder | undefined;
  }
  interface FastifyContextConfig {
    /**
     * The resource a route acts on, for a route whose URL does not name it (a ZenML run id, a
     * Freight deploy): looked up after the token is verified, before any body is read.
     */
    resource?: (request: FastifyRequest) => Promise<string> | string;
    /** Any valid token may call it; the route shows only what the token may read. */
    listing?: boolean;
    /**
     * Any valid token may call it; the route checks each pipeline it writes to itself, as its
     * body, not its URL, names them (OTLP ingest).
     */
    checksOwnScopes?: boolean;
  }
}

/** The cookie the dashboard's sign-in keeps the token in (HttpOnly, SameSite=Strict). */
export const TOKEN_COOKIE = 'tailwater_token';

/**
 * What a route needs (docs/SECURITY.md, "Who may do what"), from its URL: a pipeline's routes
 * (`:fqn`) and a topic's (`:topic`) need `read` to GET and `write` to change, and `admin` to
 * DELETE; listings need any valid token and show only what it may read; health and the
 * dashboard's files need none. Every other route needs `admin` until it says otherwise, so a
 * route added without a rule here is closed, not open.
 */
type RouteNeed =
  { kind: 'public' } | { kind: 'listing' } | { kind: 'scope'; action: Action; resource: string };

// The OpenAPI document (openapi.ts) describes the API and holds no data.
const PUBLIC = new Set([
  '/healthz',
  '/readyz',
  '/api/v1/openapi.json',
  '/',
  '/ui',
  '/ui/',
  '/ui/*',
]);
const LISTINGS = new Set([
  '/api/v1/pipelines',
  '/api/v1/topics',
  '/api/v1/runs/stream',
  // Who is signed in: any valid token may ask about itself.
  '/api/v1/session',
]);

function needOf(request: FastifyRequest): RouteNeed | 'declared' {
  const url = request.routeOptions.url;
  const config = request.routeOptions.config;
  if (url !== undefined && PUBLIC.has(url)) return { kind: 'public' };
  // Signing in and out checks the token itself (session.ts).
  if (url === '/api/v1/session' && request.method !== 'GET') return { kind: 'public' };
  if ((url !== undefined && LISTINGS.has(url)) || config?.listing || config?.checksOwnScopes) {
    return { kind: 'listing' };
  }
  if (config?.resource) return 'declared';
  const params = (request.params ?? {}) as { fqn?: string; topic?: string };
  const action = actionOf(request.method);
  if (params.fqn !== undefined) {
    return { kind: 'scope', action, resource: pipelineResource(pipelineParam(params.fqn)) };
  }
  if (params.topic !== undefined) {
    const topic = topicParam(params.topic);
    // The runs feed names every pipeline's runs: read as a topic, only an admin may; others
    // read it through /api/v1/runs/stream, which shows each token only its own pipelines.
    if (topic === RUNS_FEED_TOPIC) return { kind: 'scope', action: 'admin', resource: '*' };
    return { kind: 'scope', action, resource: topicResource(topic) };
  }
  return { kind: 'scope', action: 'admin', resource: '*' };
}

/** Reading is GET; deleting needs admin; anything else changes something. */
function actionOf(method: string): Action {
  if (method === 'DELETE') return 'admin';
  return method === 'GET' || method === 'HEAD' ? 'read' : 'write';
}

/**
 * The request's token: `Authorization: Bearer`, else the `tailwater_token` cookie, else
 * `?access_token=` (an EventSource cannot set headers). Undefined when none is given.
 */
export function tokenOf(request: FastifyRequest): string | undefined {
  const header = request.headers.authorization;
  if (header !== undefined) {
    const match = /^Bearer +(\S+) *$/i.exec(header);
    if (!match) {
      throw new TailwaterError(
        'TW_UNAUTHENTICATED',
        'The Authorization header must be "Bearer <token>".',
        {
          'WWW-Authenticate': 'Bearer realm="tailwater"',
        },
      );
    }
    return match[1];
  }
  const cookie = cookieValue(request.headers.cookie, TOKEN_COOKIE);
  if (cookie !== undefined) return cookie;
  const query = (request.query ?? {}) as Record<string, unknown>;
  const fromQuery = query['access_token'];
  if (typeof fromQuery === 'string') return fromQuery;
  if (Array.isArray(fromQuery)) {
    throw new TailwaterError('TW_UNAUTHENTICATED', 'Give access_token once.', {
      'WWW-Authenticate': 'Bearer realm="tailwater"',
    });
  }
  return undefined;
}

function cookieValue(header: string | undefined, name: string): string | undefined {
  if (header === undefined) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq !== -1 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/**
 * Authenticates every request that needs it and authorises it by its route, before any body is
 * read or any stream opens: 401 without a valid token, 403 without the scope.
 */
export function registerAuth(
  app: FastifyInstance,
  verify: VerifyToken | undefined,
  options: { failuresPerMinute: number; metricsToken: string },
): void {
  if (!verify) return;
  const failures = new AuthFailures(options.failuresPerMinute);
  const isMetricsToken = fixedTokenMatcher(options.metricsToken);
  app.addHook('onRequest', async (request) => {
    const found = needOf(request);
    if (found !== 'declared' && found.kind === 'public') return;
    const wait = failures.retryAfter(request.ip);
    if (wait > 0) {
      throw new TailwaterError(
        'TW_TOO_MANY_AUTH_FAILURES',
        `Too many failed authentications from this address; retry in ${wait} s.`,
        { 'Retry-After': String(wait) },
      );
    }
    // After the lock-out check, so a locked-out address cannot go on guessing this one either.
    if (request.routeOptions.url === METRICS_ROUTE && isMetricsToken(request)) return;
    const token = tokenOf(request);
    if (token === undefined) {
      throw new TailwaterError(
        'TW_UNAUTHENTICATED',
        'This server needs a token: send "Authorization: Bearer <token>" (or ?access_token= on a stream).',
        { 'WWW-Authenticate': 'Bearer realm="tailwater"' },
      );
    }
    // A token that does not verify counts against its address (a request with none does not:
    // it guesses nothing).
    let holder: TokenHolder;
    try {
      holder = await verify(token);
    } catch (error) {
      failures.record(request.ip);
      throw error;
    }
    request.tokenHolder = holder;
    await authorize(request, found, holder);
  });
}

const METRICS_ROUTE = '/metrics';

/**
 * Whether the request's bearer token is the configured fixed token (never, when none is). Both
 * sides are hashed first so the comparison takes the same time whatever the guess.
 */
function fixedTokenMatcher(fixed: string): (request: FastifyRequest) => boolean {
  if (fixed === '') return () => false;
  const digest = (text: string) => createHash('sha256').update(text).digest();
  const expected = digest(fixed);
  return (request) => {
    const match = /^Bearer +(\S+) *$/i.exec(request.headers.authorization ?? '');
    return match !== null && timingSafeEqual(digest(match[1]!), expected);
  };
}

/** 403 unless the token's grants allow what the route needs. */
async function authorize(
  request: FastifyRequest,
  found: RouteNeed | 'declared',
  holder: TokenHolder,
): Promise<void> {
  const need: RouteNeed =
    found === 'declared'
      ? {
          kind: 'scope',
          action: actionOf(request.method),
          resource: await request.routeOptions.config.resource!(request),
        }
      : found;
  if (need.kind === 'scope' && !allows(holder.grants, need.action, need.resource)) {
    throw new TailwaterError(
      'TW_FORBIDDEN',
      need.action === 'admin'
        ? 'This token may not do this: it needs admin.'
        : found === 'declared'
          ? // The URL did not name the pipeline (a ZenML run id, a Freight deploy): neither does this.
            `This token may not ${need.action} this.`
          : `This token may not ${need.action} ${need.resource}.`,
    );
  }
}

/** Whether the request may read `resource` (always, with authentication off). */
export function mayRead(request: FastifyRequest, resource: string): boolean {
  return request.tokenHolder === undefined || allows(request.tokenHolder.grants, 'read', resource);
}

/** Whether the request may write to `resource` (always, with authentication off). */
export function mayWrite(request: FastifyRequest, resource: string): boolean {
  return request.tokenHolder === undefined || allows(request.tokenHolder.grants, 'write', resource);
}

/** Whether the request may do what needs admin (always, with authentication off). */
export function isAdmin(request: FastifyRequest): boolean {
  return request.tokenHolder === undefined || allows(request.tokenHolder.grants, 'admin', '*');
}
