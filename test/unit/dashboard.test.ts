import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify from 'fastify';
import type { FastifyInstance } from 'fastify';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { dashboardRoutes } from '../../src/http/dashboard.js';
import { registerErrorHandling } from '../../src/http/errors.js';
import { createTestApp } from '../helpers/app.js';

// The dashboard's routes (docs/DASHBOARD.md): the built app at /ui/, deep links
// answered with index.html, `/` redirecting, and a clear 503 without a build.

const INDEX =
  '<!doctype html><div id="root"></div><script src="/ui/assets/app-abc123.js"></script>';

let dir: string;
let app: FastifyInstance;

async function dashboard(webRoot: string): Promise<FastifyInstance> {
  const instance = Fastify();
  registerErrorHandling(instance);
  await instance.register(dashboardRoutes, { webRoot });
  return instance;
}

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tailwater-web-'));
  mkdirSync(join(dir, 'assets'));
  writeFileSync(join(dir, 'index.html'), INDEX);
  writeFileSync(join(dir, 'assets', 'app-abc123.js'), 'console.log("app");');
  writeFileSync(join(dir, 'favicon.svg'), '<svg/>');
  app = await dashboard(dir);
});

afterEach(async () => {
  await app.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('dashboard routes', () => {
  test('/ and /ui redirect to /ui/', async () => {
    for (const url of ['/', '/ui']) {
      const response = await app.inject({ url });
      expect(response.statusCode).toBe(302);
      expect(response.headers['location']).toBe('/ui/');
    }
  });

  test('/ui/ answers the app, not cached', async () => {
    const response = await app.inject({ url: '/ui/' });
    expect(response.statusCode).toBe(200);
    expect(response.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(response.headers['cache-control']).toBe('no-cache');
    expect(response.body).toBe(INDEX);
  });

  test('deep links answer index.html so they survive a reload', async () => {
    for (const url of [
      '/ui/pipelines/ingest.daily/runs/latest',
      '/ui/pipelines/a%2Fb/runs/run-1',
      '/ui/topics/iceberg',
      '/ui/topics/iceberg?x=1',
      '/ui/no/such/page',
      '/ui/index.html',
      // Paths the file server refuses outright are still the app's (it says there is nothing).
      '/ui//topics/iceberg',
      '/ui/topics//iceberg',
    ]) {
      const response = await app.inject({ url });
      expect(response.statusCode, url).toBe(200);
      expect(response.headers['content-type'], url).toBe('text/html; charset=utf-8');
      expect(response.body, url).toBe(INDEX);
    }
  });

  test('hashed assets are served with long-lived caching', async () => {
    const response = await app.inject({ url: '/ui/assets/app-abc123.js' });
    expect(response.statusCode).toBe(200);
    expect(response.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect(response.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect(response.body).toBe('console.log("app");');

    const icon = await app.inject({ url: '/ui/favicon.svg' });
    expect(icon.statusCode).toBe(200);
    expect(icon.headers['content-type']).toBe('image/svg+xml');
    expect(icon.headers['cache-control']).toBe('public, max-age=300');
  });

  test('a missing asset is a 404, not the app', async () => {
    const response = await app.inject({ url: '/ui/assets/gone-000.js' });
    expect(response.statusCode).toBe(404);
    expect(response.json().error.code).toBe('TW_NOT_FOUND');
  });

  test('paths cannot escape the web root', async () => {
    writeFileSync(join(dir, '..', 'secret.txt'), 'TOP-SECRET-CONTENT');
    try {
      for (const url of ['/ui/../secret.txt', '/ui/%2e%2e/secret.txt', '/ui/..%2fsecret.txt']) {
        const response = await app.inject({ url });
        expect(response.body, url).not.toContain('TOP-SECRET-CONTENT');
      }
    } finally {
      rmSync(join(dir, '..', 'secret.txt'), { force: true });
    }
  });

  test('assets carry an ETag and Last-Modified, and a revalidation answers 304', async () => {
    const first = await app.inject({ url: '/ui/assets/app-abc123.js' });
    const etag = first.headers['etag'];
    expect(etag).toEqual(expect.any(String));
    expect(first.headers['last-modified']).toEqual(expect.any(String));

    const again = await app.inject({
      url: '/ui/assets/app-abc123.js',
      headers: { 'if-none-match': String(etag) },
    });
    expect(again.statusCode).toBe(304);
    expect(again.body).toBe('');
    expect(again.headers['cache-control']).toBe('public, max-age=31536000, immutable');
  });

  test('index.html revalidates with a 304 from any deep link', async () => {
    const index = await app.inject({ url: '/ui/' });
    const again = await app.inject({
      url: '/ui/pipelines/ingest.daily/runs/latest',
      headers: { 'if-none-match': String(index.headers['etag']) },
    });
    expect(again.statusCode).toBe(304);
    expect(again.headers['cache-control']).toBe('no-cache');
  });

  test('a Range request answers 206 with the slice', async () => {
    const response = await app.inject({
      url: '/ui/assets/app-abc123.js',
      headers: { range: 'bytes=0-6' },
    });
    expect(response.statusCode).toBe(206);
    expect(response.headers['content-range']).toBe('bytes 0-6/19');
    expect(response.body).toBe('console');
  });

  test('encoded traversal does not leak files above the web root', async () => {
    // dist/web two levels down, so ../../package.json names a real file.
    const top = mkdtempSync(join(tmpdir(), 'tailwater-pkg-'));
    const webRoot = join(top, 'dist', 'web');
    mkdirSync(join(webRoot, 'assets'), { recursive: true });
    writeFileSync(join(webRoot, 'index.html'), INDEX);
    writeFileSync(join(top, 'package.json'), '{"name":"TOP-SECRET-PACKAGE"}');
    const nested = await dashboard(webRoot);
    try {
      for (const url of [
        '/ui/..%2f..%2fpackage.json',
        '/ui/..%2F..%2Fpackage.json',
        '/ui/%2e%2e%2f%2e%2e%2fpackage.json',
        '/ui/..%5c..%5cpackage.json',
        '/ui/assets/..%2f..%2f..%2fpackage.json',
        '/ui/pipelines/..%2f..%2f..%2fpackage.json',
      ]) {
        const response = await nested.inject({ url });

        expect(response.body, url).not.toContain('TOP-SECRET-PACKAGE');
      }
    } finally {
      await nested.close();
      rmSync(top, { recursive: true, force: true });
    }
  });

  test('dotfiles in the build are never served', async () => {
    writeFileSync(join(dir, '.env'), 'TOKEN=DOTFILE-SECRET');
    const response = await app.inject({ url: '/ui/.env' });
    expect(response.body).not.toContain('DOTFILE-SECRET');
    expect(response.body).toBe(INDEX);
  });

  test('other methods on /ui/ paths are a 404, not the app', async () => {
    const response = await app.inject({ method: 'POST', url: '/ui/topics/iceberg' });
    expect(response.statusCode).toBe(404);
    expect(response.json().error.code).toBe('TW_NOT_FOUND');
  });

  test('without a build, /ui/ paths answer 503 with a clear JSON error', async () => {
    const unbuilt = await dashboard(join(dir, 'missing'));
    try {
      for (const url of ['/ui/', '/ui/topics/iceberg']) {
        const response = await unbuilt.inject({ url });
        expect(response.statusCode, url).toBe(503);
        const body = response.json();
        expect(body.error.code).toBe('TW_DASHBOARD_NOT_BUILT');
        expect(body.error.message).toContain('npm run build');
      }
      // The redirect does not need the build.
      expect((await unbuilt.inject({ url: '/' })).statusCode).toBe(302);
    } finally {
      await unbuilt.close();
    }
  });

  test('the server registers the dashboard without disturbing the API', async () => {
    const t = await createTestApp();
    try {
      const root = await t.app.inject({ url: '/' });
      expect(root.statusCode).toBe(302);
      expect(root.headers['location']).toBe('/ui/');
      // 200 after `npm run build`, 503 without it: either way the dashboard answers.
      const ui = await t.app.inject({ url: '/ui/pipelines/p/runs/latest' });
      expect([200, 503]).toContain(ui.statusCode);
      expect((await t.app.inject({ url: '/healthz' })).statusCode).toBe(200);
      expect((await t.app.inject({ url: '/nope' })).statusCode).toBe(404);
    } finally {
      await t.close();
    }
  });
});
