import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { TailwaterError } from '../model/errors.js';
import type { Settings } from '../model/settings.js';

/**
 * Loopback is not a boundary by itself: a page the user visits may send requests to
 * 127.0.0.1:8585 (simple cross-site requests need no preflight), and DNS rebinding lets a page
 * of evil.example read from it under its own name. So every request is checked twice before its
 * route runs (docs/SECURITY.md):
 * - its Host must name this server (a loopback name, the address it listens on, or one of
 *   `allowedHosts`), else 421: a rebound name is refused whatever it resolves to;
 * - its Origin, when it has one, must be the server's own or one of `allowedOrigins`, else 403:
 *   a foreign page can neither write nor read. Allowed origins get CORS headers.
 */
export type OriginSettings = Pick<Settings, 'host' | 'allowedHosts' | 'allowedOrigins'>;

/**
 * Without authentication, pages on other loopback ports (a dashboard on a dev server) may call
 * the API. With it, none may unless named: SameSite cookies ignore ports, so any local page
 * would otherwise read with the signed-in user's session cookie.
 */
export const LOOPBACK_ORIGINS = ['http://localhost:*', 'http://127.0.0.1:*', 'http://[::1]:*'];

export function allowedOriginsOf(settings: OriginSettings, authOn: boolean): readonly string[] {
  return settings.allowedOrigins ?? (authOn ? [] : LOOPBACK_ORIGINS);
}

const WILDCARD_ADDRESSES = new Set(['0.0.0.0', '::', '[::]', '']);
const EXPOSED_HEADERS =
  'Link, Retry-After, Content-Disposition, Content-Range, Accept-Ranges, Tailwater-Log-Cursor, Tailwater-Log-Prefix, Tailwater-Log-Range, Tailwater-Log-Lines';
const ALLOWED_METHODS = 'GET, HEAD, POST, PUT, DELETE';

/** The host name of a Host header (no port, no brackets, lower case), or undefined. */
export function hostName(host: string | undefined): string | undefined {
  if (host === undefined || host === '') return undefined;
  const name = host.startsWith('[') ? host.slice(1, host.indexOf(']')) : host.replace(/:\d*$/, '');
  return name.toLowerCase().replace(/\.$/, '');
}

export function isLoopbackName(name: string): boolean {
  return (
    name === 'localhost' ||
    name.endsWith('.localhost') ||
    name === '::1' ||
    /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(name)
  );
}

/** Whether a Host header names this server. */
export function hostMatcher(settings: OriginSettings): (host: string | undefined) => boolean {
  const bound = hostName(settings.host) ?? '';
  const patterns = settings.allowedHosts.map((pattern) => pattern.toLowerCase());
  if (WILDCARD_ADDRESSES.has(settings.host) && patterns.length === 0) return () => true;
  return (host) => {
    // HTTP/1.0 requests may come without a Host; no browser sends one so.
    if (host === undefined) return true;
    const name = hostName(host);
    if (name === undefined) return false;
    if (isLoopbackName(name) || name === bound) return true;
    return patterns.some((pattern) =>
      pattern.startsWith('.')
        ? name === pattern.slice(1) || name.endsWith(pattern)
        : name === pattern,
    );
  };
}

/** Whether an origin (not the server's own) is allowed to call the API. */
export function originMatcher(allowed: readonly string[]): (origin: string) => boolean {
  const rules = allowed.map((pattern) => {
    if (pattern === '*') return () => true;
    const anyPort = /^(https?):\/\/(.+):\*$/.exec(pattern);
    if (anyPort) {
      const [, scheme, host] = anyPort;
      return (url: URL) => url.protocol === `${scheme}:` && url.hostname === host!.toLowerCase();
    }
    const exact = new URL(pattern).origin;
    return (url: URL) => url.origin === exact;
  });
  return (origin) => {
    let url: URL;
    try {
      url = new URL(origin);
    } catch {
      return false; // `null` (a sandboxed frame, a file://) and anything else unparseable
    }
    return rules.some((rule) => rule(url));
  };
}

/** Whether the Origin is the page's own: the same host and port as the request was sent to. */
function isSameOrigin(origin: string, host: string | undefined): boolean {
  if (host === undefined) return false;
  try {
    return new URL(origin).host === host.toLowerCase();
  } catch {
    return false;
  }
}

export function registerOriginPolicy(
  app: FastifyInstance,
  settings: OriginSettings,
  authOn: boolean,
): void {
  const hostAllowed = hostMatcher(settings);
  const allowed = allowedOriginsOf(settings, authOn);
  const originAllowed = originMatcher(allowed);
  const originNamed = originMatcher(allowed.filter((pattern) => pattern !== '*'));

  app.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
    const host = request.headers.host;
    if (!hostAllowed(host)) {
      throw new TailwaterError(
        'TW_MISDIRECTED',
        `This server does not answer to the host name "${hostName(host) ?? ''}"; add it to allowedHosts if it is one of its names.`,
      );
    }
    const origin = request.headers.origin;
    if (origin === undefined || isSameOrigin(origin, host)) return;
    if (!originAllowed(origin)) {
      throw new TailwaterError(
        'TW_FORBIDDEN_ORIGIN',
        `Requests from pages of ${origin} are not accepted; add the origin to allowedOrigins if they should be.`,
      );
    }
    // On the raw response, so that a stream (which writes its own head) carries them too.
    reply.raw.setHeader('Access-Control-Allow-Origin', origin);
    reply.raw.setHeader('Vary', 'Origin');
    reply.raw.setHeader('Access-Control-Expose-Headers', EXPOSED_HEADERS);
    // Cookies (a session token) go only to origins allowed by name, never to any by `*`.
    if (originNamed(origin)) reply.raw.setHeader('Access-Control-Allow-Credentials', 'true');
    const preflight = request.headers['access-control-request-method'];
    if (request.method === 'OPTIONS' && preflight !== undefined) {
      const headers = request.headers['access-control-request-headers'];
      reply.raw.setHeader('Access-Control-Allow-Methods', ALLOWED_METHODS);
      if (headers) reply.raw.setHeader('Access-Control-Allow-Headers', headers);
      reply.raw.setHeader('Access-Control-Max-Age', '600');
      return reply.code(204).send();
    }
  });
}
