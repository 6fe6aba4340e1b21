import { execFile, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { isBuiltin } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { promisify } from 'node:util';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../helpers/net.js';
import { ROOT } from '../helpers/browser.js';
import { sleep } from '../helpers/wait.js';

// The package as a user gets it: `npm pack`, installed into an empty folder, then
// `npx tailwater serve --demo` from there, and `tailwater/client` (docs/SDK.md). Needs
// `npm run build` first (`npm test` runs it): the tarball is dist/.
//
// No network but loopback: npm installs from its cache alone (`--offline`), and every proxy
// setting points at a closed loopback port, so a download anyone tries (npm, better-sqlite3's
// prebuild-install, node-gyp fetching headers) fails the install instead of leaving the machine.
// better-sqlite3's binary comes as prebuild-install takes it from a release, here from a local
// prebuild (`npm_config_better_sqlite3_local_prebuilds`): a tarball of the binary this
// repository's own install has, for the same version, Node ABI and platform. Building it again
// from source here took a minute and a half of the suite.
//
// Without a lockfile npm 11 resolves every dependency from its full registry document, and
// `npm ci` caches only the abbreviated ones, so an offline install needs a lockfile: the folder
// gets the production part of the repository's package-lock.json (the versions the repository
// is tested with) and the repository's `overrides`, which a lockfile without them would break.

const execFileAsync = promisify(execFile);

const INSTALL_TIMEOUT = 420_000;
const START_TIMEOUT = 30_000;
const STOP_TIMEOUT = 10_000;
const DEMO_PIPELINE = 'demo.nightly_etl';
/** Packages that must not load in a process that only imports `tailwater/client`. */
const SERVER_PACKAGES = /node_modules\/(better-sqlite3|fastify|@fastify|pg|ioredis|@stomp)\//;

interface RepoPackage {
  name: string;
  version: string;
  license: string;
  bin: Record<string, string>;
  engines: Record<string, string>;
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
  overrides?: Record<string, string>;
}

interface LockEntry {
  name?: string;
  version?: string;
  resolved?: string;
  dev?: boolean;
  devOptional?: boolean;
  link?: boolean;
}

interface PackResult {
  filename: string;
  integrity: string;
  files: Array<{ path: string }>;
}

const repoPackage = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as RepoPackage;

/** The environment of every npm and tailwater process here: no TAILWATER_*, no way out. */
function isolatedEnv(deadProxy: string, prebuilds = ''): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (name.startsWith('TAILWATER_') || /^(https?_proxy|no_proxy|npm_config_.*proxy)$/i.test(name))
      continue;
    env[name] = value;
  }
  return {
    ...env,
    npm_config_update_notifier: 'false',
    npm_config_better_sqlite3_local_prebuilds: prebuilds,
    npm_config_proxy: deadProxy,
    npm_config_https_proxy: deadProxy,
    HTTP_PROXY: deadProxy,
    HTTPS_PROXY: deadProxy,
    http_proxy: deadProxy,
    https_proxy: deadProxy,
  };
}

/**
 * The lockfile of a folder that depends on the tarball alone: the tarball's entry, then every
 * entry of the repository's lockfile that a production install has, with its registry URL
 * spelled out (this repository's npm config omits it) so that npm takes the tarball from the
 * cache without asking for the package's document.
 */
function consumerLockfile(tarball: string, integrity: string, registry: string) {
  const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, LockEntry>;
  };
  const dependencies = { tailwater: `file:${tarball}` };
  const packages: Record<string, unknown> = {
    '': { name: 'empty-folder', version: '1.0.0', dependencies },
    'node_modules/tailwater': {
      version: repoPackage.version,
      resolved: `file:${tarball}`,
      integrity,
      license: repoPackage.license,
      dependencies: repoPackage.dependencies,
      bin: repoPackage.bin,
      engines: repoPackage.engines,
    },
  };
  for (const [path, entry] of Object.entries(lock.packages)) {
    if (path === '' || entry.dev || entry.devOptional || entry.link) continue;
    const name =
      entry.name ?? path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length);
    const base = name.split('/').at(-1)!;
    packages[path] = {
      ...entry,
      resolved:
        entry.resolved ?? `${registry.replace(/\/$/, '')}/${name}/-/${base}-${entry.version}.tgz`,
    };
  }
  return {
    packageJson: {
      name: 'empty-folder',
      version: '1.0.0',
      private: true,
      dependencies,
      ...(repoPackage.overrides ? { overrides: repoPackage.overrides } : {}),
    },
    lockfile: {
      name: 'empty-folder',
      version: '1.0.0',
      lockfileVersion: 3,
      requires: true,
      packages,
    },
  };
}

/** Runs a command to its end; never throws (the outcome is checked by the caller). */
async function run(
  command: string,
  args: string[],
  options: { cwd: string; env: NodeJS.ProcessEnv; timeout: number },
): Promise<{ code: number | string; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await execFileAsync(command, args, {
      ...options,
      maxBuffer: 64 * 1024 * 1024,
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as {
      code?: number | string;
      signal?: string;
      stdout?: string;
      stderr?: string;
    };
    return {
      code: failed.code ?? failed.signal ?? -1,
      stdout: failed.stdout ?? '',
      stderr: failed.stderr ?? '',
    };
  }
}

/** Runs a module script with `node --input-type=module -e` in `cwd` and parses its JSON output. */
async function nodeScript<T>(cwd: string, env: NodeJS.ProcessEnv, script: string): Promise<T> {
  const outcome = await run(process.execPath, ['--input-type=module', '-e', script], {
    cwd,
    env,
    timeout: 30_000,
  });
  if (outcome.code !== 0)
    throw new Error(`node script failed (${outcome.code}):\n${outcome.stderr}`);
  return JSON.parse(outcome.stdout) as T;
}

/** Bare module specifiers a compiled file imports (static, dynamic, re-exports). */
function bareImports(file: string): string[] {
  const { importedFiles } = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
  return importedFiles
    .map((imported) => imported.fileName)
    .filter((name) => !name.startsWith('.') && !name.startsWith('/'));
}

const packageName = (specifier: string) =>
  specifier.startsWith('@') ? specifier.split('/').slice(0, 2).join('/') : specifier.split('/')[0]!;

describe('npm pack: the package installs into an empty folder and runs', () => {
  let work = '';
  let app = '';
  let deadProxy = '';
  let pack: PackResult;
  let install: { code: number | string; stdout: string; stderr: string };
  let installMs = 0;

  beforeAll(async () => {
    for (const built of [
      'dist/index.js',
      'dist/client/index.js',
      'dist/cli/main.js',
      'dist/web/index.html',
    ]) {
      if (!existsSync(join(ROOT, built))) {
        throw new Error(`${built} is missing: run \`npm run build\` first (npm test does)`);
      }
    }
    deadProxy = `http://127.0.0.1:${await freePort()}`;
    work = mkdtempSync(join(tmpdir(), 'tailwater-pack-'));
    app = join(work, 'app');
    mkdirSync(join(work, 'pack'));
    mkdirSync(app);
    const prebuilds = join(work, 'prebuilds');
    mkdirSync(prebuilds);
    const sqlite = join(ROOT, 'node_modules/better-sqlite3');
    const { version } = JSON.parse(readFileSync(join(sqlite, 'package.json'), 'utf8')) as {
      version: string;
    };
    const prebuild = `better-sqlite3-v${version}-node-v${process.versions.modules}-${process.platform}-${process.arch}.tar.gz`;
    const tarred = await run(
      'tar',
      ['-czf', join(prebuilds, prebuild), '-C', sqlite, 'build/Release/better_sqlite3.node'],
      { cwd: work, env: process.env, timeout: 60_000 },
    );
    if (tarred.code !== 0) throw new Error(`tar of the prebuild failed:\n${tarred.stderr}`);
    const env = isolatedEnv(deadProxy, prebuilds);
    const packed = await run(
      'npm',
      ['pack', '--ignore-scripts', '--json', '--pack-destination', join(work, 'pack')],
      { cwd: ROOT, env, timeout: 120_000 },
    );
    if (packed.code !== 0) throw new Error(`npm pack failed (${packed.code}):\n${packed.stderr}`);
    pack = (JSON.parse(packed.stdout) as PackResult[])[0]!;

    const registry = (
      await run('npm', ['config', 'get', 'registry'], { cwd: app, env, timeout: 30_000 })
    ).stdout.trim();
    const { packageJson, lockfile } = consumerLockfile(
      relative(app, join(work, 'pack', pack.filename)),
      pack.integrity,
      registry || 'https://registry.npmjs.org/',
    );
    writeFileSync(join(app, 'package.json'), `${JSON.stringify(packageJson, null, 2)}\n`);
    writeFileSync(join(app, 'package-lock.json'), `${JSON.stringify(lockfile, null, 2)}\n`);
    const started = Date.now();
    install = await run(
      'npm',
      ['ci', '--offline', '--no-audit', '--no-fund', '--foreground-scripts'],
      { cwd: app, env, timeout: INSTALL_TIMEOUT },
    );
    installMs = Date.now() - started;
  }, INSTALL_TIMEOUT + 120_000);

  /** The installed folder; the tests after the install's own say why when there is none. */
  function installedApp(): string {
    if (install.code !== 0)
      throw new Error(`npm ci failed (${install.code}): see the install test`);
    return app;
  }

  afterAll(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('packs bin, dist with the dashboard, docs, README and package.json; no tests, no sources', () => {
    const files = pack.files.map((file) => file.path);
    expect(files).toEqual(
      expect.arrayContaining([
        'package.json',
        'README.md',
        'bin/tailwater',
        'dist/index.js',
        'dist/index.d.ts',
        'dist/cli/main.js',
        'dist/client/index.js',
        'dist/client/index.d.ts',
        'dist/web/index.html',
        'docs/SDK.md',
      ]),
    );
    expect(files.some((file) => /^dist\/web\/assets\/.+\.js$/.test(file))).toBe(true);
    expect(
      files.filter((file) =>
        /(^|\/)(test|tests|__tests__)\/|\.(test|spec)\.[cm]?[jt]sx?$/.test(file),
      ),
    ).toEqual([]);
    expect(
      files.filter((file) => /^(src|web|test|bench|scripts|node_modules)\//.test(file)),
    ).toEqual([]);
    // npm adds a LICENSE file by itself when the repository has one.
    const license = ['LICENSE', 'LICENSE.md', 'LICENSE.txt'].find((name) =>
      existsSync(join(ROOT, name)),
    );
    if (license) expect(files).toContain(license);
  });

  it("installs from the npm cache alone, takes better-sqlite3's prebuilt binary, and warns of no engine", () => {
    const output = `${install.stdout}\n${install.stderr}`;
    console.log(`npm ci of the packed tarball: ${(installMs / 1000).toFixed(0)} s`);
    expect(install.code, output.slice(-4000)).toBe(0);
    expect(output).not.toMatch(/EBADENGINE|Unsupported engine/);
    expect(
      existsSync(join(app, 'node_modules/better-sqlite3/build/Release/better_sqlite3.node')),
    ).toBe(true);
    // Unpacked, not compiled: node-gyp leaves its Makefile behind.
    expect(existsSync(join(app, 'node_modules/better-sqlite3/build/Makefile'))).toBe(false);
    expect(existsSync(join(app, 'node_modules/.bin/tailwater'))).toBe(true);
  });

  it('ships source maps whose sources are inside them, for every compiled file that names one', () => {
    const installed = join(installedApp(), 'node_modules/tailwater');
    const missing: string[] = [];
    for (const path of pack.files.map((file) => file.path)) {
      if (!path.endsWith('.js')) continue;
      const code = readFileSync(join(installed, path), 'utf8');
      const mapName = /\/\/# sourceMappingURL=(\S+)\s*$/.exec(code)?.[1];
      if (mapName === undefined || mapName.startsWith('data:')) continue;
      const mapPath = join(dirname(join(installed, path)), mapName);
      if (!existsSync(mapPath)) {
        missing.push(`${path}: no ${mapName}`);
        continue;
      }
      const map = JSON.parse(readFileSync(mapPath, 'utf8')) as {
        sources: string[];
        sourcesContent?: Array<string | null>;
      };
      map.sources.forEach((source, i) => {
        const inline = typeof map.sourcesContent?.[i] === 'string';
        if (!inline && !existsSync(join(dirname(mapPath), source)))
          missing.push(`${path}: ${source}`);
      });
    }
    expect(missing).toEqual([]);
  });

  it('imports at run time only its dependencies and Node built-ins, never a devDependency', () => {
    const installed = join(installedApp(), 'node_modules/tailwater');
    const dependencies = new Set(Object.keys(repoPackage.dependencies));
    const outside: string[] = [];
    for (const path of pack.files.map((file) => file.path)) {
      if (!/^(dist|bin)\//.test(path) || !/\.js$|^bin\//.test(path) || path.startsWith('dist/web/'))
        continue;
      for (const specifier of bareImports(join(installed, path))) {
        if (isBuiltin(specifier) || dependencies.has(packageName(specifier))) continue;
        const dev =
          packageName(specifier) in repoPackage.devDependencies ? ' (a devDependency)' : '';
        outside.push(`${path}: ${specifier}${dev}`);
      }
    }
    expect(outside).toEqual([]);
  });

  it('loads tailwater/client in Node without the server’s modules, and tailwater with them', async () => {
    const env = isolatedEnv(deadProxy);
    const loadedFile = join(work, 'loaded.txt');
    // A load hook (its own thread) writes down every module that loads.
    const hook = `import { appendFileSync } from 'node:fs';
      export async function load(url, context, next) {
        appendFileSync(${JSON.stringify(loadedFile)}, url + '\\n');
        return next(url, context);
      }`;
    const client = await nodeScript<{ resolved: string; exports: Record<string, string> }>(
      installedApp(),
      env,
      `import { register } from 'node:module';
      register('data:text/javascript,' + encodeURIComponent(${JSON.stringify(hook)}));
      const sdk = await import('tailwater/client');
      const exports = Object.fromEntries(Object.entries(sdk).map(([k, v]) => [k, typeof v]));
      console.log(JSON.stringify({ resolved: import.meta.resolve('tailwater/client'), exports }));`,
    );
    expect(client.resolved).toMatch(/\/node_modules\/tailwater\/dist\/client\/index\.js$/);
    expect(client.exports).toMatchObject({
      TailwaterClient: 'function',
      Publisher: 'function',
      tail: 'function',
      TailwaterClientError: 'function',
    });
    const loaded = readFileSync(loadedFile, 'utf8').split('\n').filter(Boolean);
    expect(loaded.some((url) => url.includes('/node_modules/tailwater/dist/client/'))).toBe(true);
    expect(loaded.filter((url) => SERVER_PACKAGES.test(url))).toEqual([]);
    expect(
      loaded.filter((url) =>
        /\/node_modules\/tailwater\/dist\/(store|http|bus|engine)\//.test(url),
      ),
    ).toEqual([]);

    const server = await nodeScript<Record<string, string>>(
      app,
      env,
      `const m = await import('tailwater');
      console.log(JSON.stringify(Object.fromEntries(Object.entries(m).map(([k, v]) => [k, typeof v]))));`,
    );
    expect(server).toMatchObject({
      startServer: 'function',
      SqliteStore: 'function',
      tail: 'function',
    });
  });

  it('type-checks `tailwater/client` for a browser project (DOM types, no @types/node)', async () => {
    writeFileSync(
      join(installedApp(), 'browser.ts'),
      `import { Publisher, tail, TailwaterClient } from 'tailwater/client';
import type { Run, TailEvent } from 'tailwater/client';
export const run: Promise<Run> = new TailwaterClient({ server: '/' }).getRun('p', 'latest');
new Publisher({ target: { topic: 't' } }).publish('progress', { pct: 1 });
export async function first(): Promise<TailEvent | undefined> {
  for await (const event of tail({ target: 'runs' })) return event;
  return undefined;
}
`,
    );
    writeFileSync(
      join(app, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2023',
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          noEmit: true,
          lib: ['ES2023', 'DOM', 'DOM.Iterable', 'DOM.AsyncIterable'],
          types: [],
        },
        files: ['browser.ts'],
      }),
    );
    const tsc = join(ROOT, 'node_modules/typescript/bin/tsc');
    const checked = await run(process.execPath, [tsc, '-p', 'tsconfig.json'], {
      cwd: app,
      env: isolatedEnv(deadProxy),
      timeout: 60_000,
    });
    expect(checked.code, checked.stdout + checked.stderr).toBe(0);
  });

  it('runs `npx tailwater serve --demo`: the demo run gets live logs, /ui/ serves the dashboard', async () => {
    const env = isolatedEnv(deadProxy);
    const help = await run('npx', ['--offline', 'tailwater', '--help'], {
      cwd: installedApp(),
      env,
      timeout: 30_000,
    });
    expect(help.code, help.stderr).toBe(0);
    expect(help.stdout).toMatch(/serve/);

    const port = await freePort();
    const data = join(work, 'data');
    // Its own process group: npx does not pass SIGTERM on to the server it started.
    const child: ChildProcess = spawn(
      'npx',
      [
        '--offline',
        'tailwater',
        'serve',
        '--demo',
        '--port',
        String(port),
        '--data',
        data,
        '--log-level',
        'warn',
      ],
      { cwd: app, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const pgid = child.pid!;
    let output = '';
    child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const groupAlive = () => {
      try {
        process.kill(-pgid, 0);
        return true;
      } catch {
        return false;
      }
    };
    const url = `http://127.0.0.1:${port}`;
    let stoppedCleanly = false;
    try {
      const startBy = Date.now() + START_TIMEOUT;
      for (;;) {
        const ready = await fetch(`${url}/readyz`).then(
          (r) => r.ok,
          () => false,
        );
        if (ready) break;
        if (!groupAlive() || Date.now() > startBy) {
          throw new Error(`the installed server did not become ready:\n${output}`);
        }
        await sleep(200);
      }
      expect(output).toContain(`Tailwater listening on ${url}`);

      const latest = `${url}/api/v1/pipelines/${DEMO_PIPELINE}/runs/latest`;
      const logBytes = async () => {
        const response = await fetch(latest);
        return response.ok ? ((await response.json()) as { logBytes: number }).logBytes : 0;
      };
      // The demo writes log lines every second: two reads apart show them arriving.
      let first = 0;
      for (let attempt = 0; attempt < 50 && first === 0; attempt += 1) {
        first = await logBytes();
        if (first === 0) await sleep(200);
      }
      expect(first).toBeGreaterThan(0);
      let second = first;
      for (let attempt = 0; attempt < 50 && second === first; attempt += 1) {
        await sleep(200);
        second = await logBytes();
      }
      expect(second).toBeGreaterThan(first);
      const run = (await (await fetch(latest)).json()) as { runId: string; status: string };
      expect(run.status).toBe('running');
      const entries = (await (
        await fetch(
          `${url}/api/v1/pipelines/${DEMO_PIPELINE}/runs/${encodeURIComponent(run.runId)}/entries?after=0&limit=100`,
        )
      ).json()) as { entries: Array<{ kind: string; text?: string }> };
      expect(
        entries.entries.some((entry) => entry.kind === 'log' && /rows/.test(entry.text ?? '')),
      ).toBe(true);

      const page = await fetch(`${url}/ui/`);
      expect(page.status).toBe(200);
      expect(page.headers.get('content-type')).toMatch(/^text\/html/);
      const html = await page.text();
      expect(html).toContain('<div id="root">');
      const script = /<script[^>]+src="(\/ui\/assets\/[^"]+\.js)"/.exec(html)?.[1];
      expect(script, html).toBeDefined();
      const asset = await fetch(`${url}${script!}`);
      expect(asset.status).toBe(200);
      expect(asset.headers.get('content-type')).toMatch(/^text\/javascript/);
      expect((await asset.text()).length).toBeGreaterThan(10_000);
    } finally {
      if (groupAlive()) process.kill(-pgid, 'SIGTERM');
      const stopBy = Date.now() + STOP_TIMEOUT;
      while (groupAlive() && Date.now() < stopBy) await sleep(50);
      stoppedCleanly = !groupAlive();
      if (!stoppedCleanly) process.kill(-pgid, 'SIGKILL');
    }
    expect(stoppedCleanly, `the server did not stop on SIGTERM:\n${output}`).toBe(true);
    expect(output).toContain('SIGTERM: ending streams and shutting down');
  });
});
