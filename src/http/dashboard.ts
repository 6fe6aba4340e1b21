import { readFile, stat } from 'node:fs/promises';
import { dirname, extname, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply } from 'fastify';

export interface DashboardOptions {
  /** The built web app (`vite build` output). Default: `dist/web` at the package root. */
  webRoot?: string | undefined;
}

/** `dist/web` at the package root, from both `src/http` (tests) and `dist/http` (built). */
export const DEFAULT_WEB_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../dist/web');

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
};

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

  async function sendIndex(reply: FastifyReply): Promise<FastifyReply> {
    let html: Buffer;
    try {
      html = await readFile(indexPath);
    } catch {
      return reply.code(503).send({
        error: {
          code: 'TW_DASHBOARD_NOT_BUILT',
          message: `The dashboard is not built (no ${indexPath}): run \`npm run build\`.`,
        },
      });
    }
    return reply
      .header('content-type', CONTENT_TYPES['.html'])
      .header('cache-control', 'no-cache')
      .send(html);
  }

  app.get<{ Params: { '*': string } }>('/ui/*', async (request, reply) => {
    const rest = request.params['*'];
    let relative: string;
    try {
      relative = decodeURIComponent(rest.split('?')[0] ?? '');
    } catch {
      relative = '';
    }
    const file = resolve(root, relative);
    const inside = file.startsWith(root + sep);
    if (inside && file !== indexPath && extname(file) !== '' && (await isFile(file))) {
      const body = await readFile(file);
      return reply
        .header('content-type', CONTENT_TYPES[extname(file)] ?? 'application/octet-stream')
        .header('cache-control', relative.startsWith('assets/') ? IMMUTABLE : 'public, max-age=300')
        .send(body);
    }
    if (relative.startsWith('assets/')) {
      return reply.code(404).send({
        error: { code: 'TW_NOT_FOUND', message: `No dashboard asset ${relative}.` },
      });
    }
    return sendIndex(reply);
  });
}
