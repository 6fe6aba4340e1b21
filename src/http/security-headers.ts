import fastifyHelmet from '@fastify/helmet';
import type { FastifyInstance } from 'fastify';

/**
 * Security headers on every answer (the dashboard, downloads and the API alike), by
 * @fastify/helmet: a Content-Security-Policy that lets the dashboard load only its own files and
 * talk only to its own server, no framing by other sites (clickjacking), no MIME sniffing (a log
 * download is never run as a page), no referrer. Left out: HSTS and upgrade-insecure-requests,
 * which belong to the TLS proxy in front (the server itself speaks plain HTTP on loopback).
 */
export async function registerSecurityHeaders(app: FastifyInstance): Promise<void> {
  await app.register(fastifyHelmet, {
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
  });
}
