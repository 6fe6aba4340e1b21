import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';
import helmet from 'helmet';

/**
 * Security headers on every answer (the dashboard, downloads and the API alike), by helmet: a
 * Content-Security-Policy that lets the dashboard load only its own files and talk only to its
 * own server, no framing by other sites (clickjacking), no MIME sniffing (a log download is
 * never run as a page), no referrer. Left out: HSTS and upgrade-insecure-requests, which belong
 * to the TLS proxy in front (the server itself speaks plain HTTP on loopback).
 *
 * helmet itself rather than @fastify/helmet: the plugin builds helmet's middleware again on
 * every request, policy parsing and all, which cost about 9 % of the server's CPU under small
 * requests (docs/BENCHMARKS.md). The headers do not depend on the request, so helmet is asked
 * for them once, and each response gets the list. They are set on the raw response, so a stream,
 * which writes its own head, carries them too.
 */
export function registerSecurityHeaders(app: FastifyInstance): void {
  const headers = SECURITY_HEADERS;
  app.addHook('onRequest', (_request, reply, done) => {
    for (const [name, value] of headers) reply.raw.setHeader(name, value);
    done();
  });
}

/** What helmet's middleware sets, recorded once from a response that only takes note. */
function headersOf(middleware: ReturnType<typeof helmet>): ReadonlyArray<[string, string]> {
  const set: Array<[string, string]> = [];
  const recorder = {
    setHeader: (name: string, value: string | number | readonly string[]) => {
      set.push([name, String(value)]);
    },
    removeHeader: () => undefined,
  };
  middleware({} as IncomingMessage, recorder as unknown as ServerResponse, () => undefined);
  return set;
}

const SECURITY_HEADERS = headersOf(
  helmet({
    contentSecurityPolicy: {
      useDefaults: false,
      directives: {
        defaultSrc: ["'self'"],
        scriptSrc: ["'self'"],
        styleSrc: ["'self'"],
        imgSrc: ["'self'", 'data:'],
        fontSrc: ["'self'"],
        connectSrc: ["'self'"],
        objectSrc: ["'none'"],
        baseUri: ["'none'"],
        formAction: ["'self'"],
        frameAncestors: ["'none'"],
      },
    },
    frameguard: { action: 'deny' },
    referrerPolicy: { policy: 'no-referrer' },
    strictTransportSecurity: false,
  }),
);
