import Fastify, { LogController } from 'fastify';
import type { FastifyInstance } from 'fastify';
import { appendRoutes } from './append.js';
import { registerBodyParsers } from './body.js';
import { limitConnectionsPerClient } from './client-connections.js';
import { isTrustedProxy, trustedProxies } from './trusted-proxies.js';
import { registerAuth } from './auth.js';
import { requestForLog } from './log-redaction.js';
import { sessionRoutes } from './session.js';
import { tlsOptions } from './tls.js';
import { limitAppendsPerToken } from './append-rate.js';
import { tokenVerifier } from './token-verifier.js';
import type { AppDeps } from './deps.js';
import { clientErrorHandler, registerErrorHandling, routerErrorOptions } from './errors.js';
import { healthRoutes } from './health.js';
import { dashboardRoutes } from './dashboard.js';
import { freightRoutes } from './freight.js';
import { icebergRoutes } from './iceberg.js';
import { metricsRoutes } from './metrics.js';
import { nativeStreamRoutes } from './native.js';
import { openMetadataRoutes } from './openmetadata.js';
import { registerOpenApi } from './openapi.js';
import { otlpRoutes } from './otlp.js';
import { OtlpStats } from './otlp-stats.js';
import { registerOriginPolicy } from './origin.js';
import { searchRoutes } from './search.js';
import { readRoutes } from './read.js';
import { runRoutes } from './runs.js';
import { registerSecurityHeaders } from './security-headers.js';
import { zenmlRoutes } from './zenml.js';

export interface BuildAppOptions {
  /** pino's level for the server log; 'silent' turns it off. */
  logLevel?: string;
  /** The built dashboard (default `dist/web` at the package root). */
  webRoot?: string;
}

/** The Fastify app, built from its dependencies and not yet listening (tests use inject()). */
export async function buildApp(
  deps: AppDeps,
  options: BuildAppOptions = {},
): Promise<FastifyInstance> {
  const { settings } = deps;
  const requestTimeoutMs = Math.round(settings.requestTimeoutSeconds * 1000);
  const proxies = trustedProxies(settings.trustProxy);
  const tls = tlsOptions(settings);
  const app = Fastify({
    ...(tls ? { https: tls } : {}),
    // Behind a trusted proxy, request.ip is the client X-Forwarded-For names (per-client limits).
    trustProxy: proxies.length > 0 ? proxies : false,
    logger:
      !options.logLevel || options.logLevel === 'silent'
        ? false
        : { level: options.logLevel, serializers: { req: requestForLog } },
    logController: new LogController({ disableRequestLogging: true }),
    // Idle keep-alive sockets close at once on shutdown; open streams are ended by the Hub.
    forceCloseConnections: 'idle',
    routerOptions: { maxParamLength: 1024, ...routerErrorOptions },
    // A request, headers and body, must arrive within requestTimeoutSeconds (408 and closed
    // otherwise); a stream's request has arrived once it opens, so streams are not cut.
    requestTimeout: requestTimeoutMs,
    keepAliveTimeout: Math.round(settings.keepAliveTimeoutSeconds * 1000),
    http: {
      headersTimeout: requestTimeoutMs,
      // How often Node looks for requests past their time (its default is 30 s).
      connectionsCheckingInterval: Math.max(50, Math.min(1000, Math.round(requestTimeoutMs / 4))),
    },
    // Routes that take a body say how much; any other takes next to nothing.
    bodyLimit: 16 * 1024,
    clientErrorHandler,
  });
  limitConnectionsPerClient(app.server, settings.maxConnectionsPerClient, isTrustedProxy(proxies));
  registerBodyParsers(app, settings.maxBodyBytesInFlight);
  registerErrorHandling(app);
  const verify = tokenVerifier(settings);
  registerOriginPolicy(app, settings, verify !== undefined);
  registerAuth(app, verify, {
    failuresPerMinute: settings.authFailuresPerMinute,
    metricsToken: settings.metricsToken,
  });
  if (verify && settings.appendsPerMinutePerToken > 0) {
    await limitAppendsPerToken(app, settings.appendsPerMinutePerToken);
  }
  registerSecurityHeaders(app);
  // Before the routes, so that it sees them all (docs/API.md, "OpenAPI").
  await registerOpenApi(app, { authentication: verify !== undefined });
  await app.register(healthRoutes, deps);
  const otlpStats = new OtlpStats();
  await app.register(metricsRoutes, { ...deps, otlpStats });
  await app.register(runRoutes, deps);
  await app.register(appendRoutes, deps);
  await app.register(readRoutes, deps);
  await app.register(nativeStreamRoutes, deps);
  await app.register(searchRoutes, deps);
  // OpenTelemetry's OTLP/HTTP logs ingest, on the same port.
  await app.register(otlpRoutes, { ...deps, otlpStats });
  // One plugin per seed system's dialect, each only an encoder over the same engine.
  await app.register(openMetadataRoutes, deps);
  await app.register(zenmlRoutes, deps);
  await app.register(freightRoutes, deps);
  await app.register(icebergRoutes, deps);
  await app.register(sessionRoutes, { verify });
  await app.register(dashboardRoutes, { webRoot: options.webRoot });
  return app;
}
