import { stat } from 'node:fs/promises';
import { dirname, extname, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

export interface DashboardOptions {
  /** The built web app (`vite build` output). Default: `dist/web` at the package root. */
  webRoot?: string | undefined;
}

/** `dist/web` at the package root, from both `src/http` (tests) and `dist/http` (built). */
export const DEFAULT_WEB_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../dist/web');

/** Vite puts content-hashed files under `assets/`: they never change, so they cache forever. */
const IMMUTABLE = 'public, max-age=31536000, immutable';

async function isFile(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile();
  } catch {
    return false;
  }
}

/**
 * The dashboard: `/` redirects to `/ui/`; `/ui/…` serves the built app's files, and every other
 * `/ui/…` path answers `index.html` so that deep links survive a reload. Without a build the
 * `/ui/` paths answer 503 with a JSON error.
 */
export async function dashboardRoutes(
  app: FastifyInstance,
  options: DashboardOptions,
): Promise<void> {
  const root = resolve(options.webRoot ?? DEFAULT_WEB_ROOT);
  const indexPath = resolve(root, 'index.html');

  app.get('/', (_request, reply) => reply.redirect('/ui/'));
  app.get('/ui', (_request, reply) => reply.redirect('/ui/'));

  function setHeaders(reply: FastifyReply, path: string): void {
    // RFC 9239 made text/javascript the one JavaScript type; @fastify/send's mime@3 still says
    // application/javascript.
    if (extname(path) === '.js' || extname(path) === '.mjs') {
      void reply.header('content-type', 'text/javascript; charset=utf-8');
    }
    const cacheControl =
      path === indexPath
        ? 'no-cache'
        : relative(root, path).startsWith(`assets${sep}`)
          ? IMMUTABLE
          : 'public, max-age=300';
    void reply.header('cache-control', cacheControl);
  }

  /** Any /ui/ path without a file: the app (deep links), a 404 for assets, or 503 unbuilt. */
  async function fallback(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
    const path = request.url.split('?')[0] ?? '';
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      return reply.code(404).send({
        error: { code: 'TW_NOT_FOUND', message: `No route ${request.method} ${path}.` },
      });
    }
    // A missing hashed asset is a stale page asking for an old build: the HTML would only
    // fail to parse as script or style.
    if (path.startsWith('/ui/assets/')) {
      return reply.code(404).send({
        error: { code: 'TW_NOT_FOUND', message: `No dashboard asset ${path.slice(4)}.` },
      });
    }
    // Checked first: sendFile on a missing file re-enters the 404 handler, where Fastify gives up
    // with a bare 404 instead of the 503 that tells people to build.
    if (!(await isFile(indexPath))) {
      return reply.code(503).send({
        error: {
          code: 'TW_DASHBOARD_NOT_BUILT',
          message: `The dashboard is not built (no ${indexPath}): run \`npm run build\`.`,
        },
      });
    }
    return reply.code(200).sendFile('index.html');
  }

  // A prefixed context of its own, so that its 404 handler (the app fallback) owns only `/ui/…`.
  await app.register(
    async (ui) => {
      await ui.register(fastifyStatic, {
        root,
        prefix: '/',
        cacheControl: false,
        // Not part of a Vite build; never expose an editor's or tool's stray dotfile.
        dotfiles: 'ignore',
        setHeaders,
      });

      // @fastify/static hands every path it has no file for to the 404 handler.
      ui.setNotFoundHandler(fallback);
      // It refuses some paths outright (403: `//`, a `..` it will not resolve). A /ui/ path is
      // still the app's, which says there is nothing there; other errors go up to the app's handler.
      ui.setErrorHandler(async (error: { statusCode?: number }, request, reply) => {
        if (error.statusCode === 403) return fallback(request, reply);
        throw error;
      });
    },
    { prefix: '/ui' },
  );
}
