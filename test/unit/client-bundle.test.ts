import { readdirSync, readFileSync } from 'node:fs';
import { isBuiltin } from 'node:module';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import vm from 'node:vm';
import { gzipSync } from 'node:zlib';
import ts from 'typescript';
import { build } from 'vite';
import type { Plugin, Rolldown } from 'vite';
import { describe, expect, it } from 'vitest';

// `tailwater/client` is the browser-safe SDK (docs/SDK.md, "In the browser"): bundled for the
// browser it must hold none of the server's dependencies and no Node built-in without a browser
// fallback. Vite (rolldown inside) bundles it here as an app's bundler would, in memory.

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CLIENT_ENTRY = join(ROOT, 'src/client/index.ts');
const SERVER_ENTRY = join(ROOT, 'src/index.ts');

/** Packages that must never reach a browser bundle: the server's storage, bus and HTTP stack. */
const FORBIDDEN_PACKAGE = /^(better-sqlite3|fastify|@fastify\/.+|pg|pg-.+|ioredis|@stomp\/.+)$/;

interface BrowserBundle {
  /** The ES module an app would get (minified). */
  es: Rolldown.OutputChunk;
  /** The same as a classic script (`var Tailwater = …`), to run in a bare context. */
  iife: Rolldown.OutputChunk;
  /** Every module of the graph, relative to the repository. */
  modules: string[];
  /** What must not be there: forbidden packages, built-ins without a fallback, externals. */
  leaks: string[];
}

/** The package a module id belongs to (the last `node_modules/` in its path), if any. */
function packageOf(id: string): string | undefined {
  const at = id.lastIndexOf('/node_modules/');
  if (at === -1) return undefined;
  const [scope, name] = id.slice(at + '/node_modules/'.length).split('/');
  return scope?.startsWith('@') ? `${scope}/${name}` : scope;
}

const shown = (id: string) => (id.startsWith('/') ? relative(ROOT, id) : id);

async function bundleForBrowser(entry: string): Promise<BrowserBundle> {
  const builtinImports: string[] = [];
  let graph: Array<{ id: string; importers: readonly string[] }> = [];
  const probe: Plugin = {
    name: 'tailwater-bundle-probe',
    enforce: 'pre',
    resolveId(source, importer) {
      // Only noted: Vite's resolver decides whether a browser fallback (the `events` package…)
      // stands in; one that does not leaves a `__vite-browser-external` module in the graph.
      if (isBuiltin(source)) builtinImports.push(`${source} (from ${shown(importer ?? '?')})`);
      return null;
    },
    generateBundle() {
      graph = [...this.getModuleIds()].map((id) => ({
        id,
        importers: this.getModuleInfo(id)?.importers ?? [],
      }));
    },
  };
  const result = await build({
    configFile: false,
    envFile: false,
    logLevel: 'silent',
    root: ROOT,
    plugins: [probe],
    build: {
      write: false,
      minify: true,
      // The browser build (Vite's default): `browser` conditions and fields, no Node target.
      ssr: false,
      lib: {
        entry,
        formats: ['es', 'iife'],
        name: 'Tailwater',
        fileName: (format) => `client.${format}.js`,
      },
    },
  });
  if (!Array.isArray(result)) throw new Error('vite build returned no outputs');
  const chunks = result.flatMap((output) =>
    output.output.filter((file): file is Rolldown.OutputChunk => file.type === 'chunk'),
  );
  const fileNames = new Set(result.flatMap((output) => output.output.map((file) => file.fileName)));
  const leaks: string[] = [];
  for (const { id, importers } of graph) {
    const from = `(from ${importers.map(shown).join(', ') || '?'})`;
    const pkg = packageOf(id);
    if (pkg !== undefined && FORBIDDEN_PACKAGE.test(pkg)) leaks.push(`${pkg}: ${shown(id)}`);
    else if (id.startsWith('__vite-browser-external')) {
      leaks.push(`a Node built-in without a browser fallback ${from}`);
    } else if (id.startsWith('__vite-optional-peer-dep')) leaks.push(`${id} ${from}`);
    else if (id.startsWith('node:') || isBuiltin(id)) leaks.push(`built-in ${id} ${from}`);
  }
  // A bare import left as an import of the output is a module the bundle would fetch at run time.
  for (const chunk of chunks) {
    for (const imported of [...chunk.imports, ...chunk.dynamicImports]) {
      if (!fileNames.has(imported)) leaks.push(`external import ${imported} in ${chunk.fileName}`);
    }
  }
  if (leaks.some((leak) => leak.includes('built-in'))) leaks.push(...builtinImports);
  const es = chunks.find((chunk) => chunk.fileName === 'client.es.js');
  const iife = chunks.find((chunk) => chunk.fileName === 'client.iife.js');
  if (!es || !iife) throw new Error(`no client chunks in ${[...fileNames].join(', ')}`);
  return { es, iife, modules: graph.map(({ id }) => shown(id)).sort(), leaks };
}

const kib = (bytes: number) => `${(bytes / 1024).toFixed(1)} KiB`;

/**
 * What a page offers a script, and no more: no `process`, `Buffer`, `require` or module loader.
 * `crypto` has `getRandomValues` only, as on a page served over plain HTTP (no `randomUUID`
 * outside secure contexts).
 */
function browserLikeContext(fetch: (url: string | URL, init?: RequestInit) => Promise<unknown>) {
  return vm.createContext({
    fetch,
    URL,
    URLSearchParams,
    TextEncoder,
    TextDecoder,
    AbortController,
    AbortSignal,
    Headers,
    setTimeout,
    clearTimeout,
    console,
    crypto: {
      getRandomValues: (array: Uint8Array) => crypto.getRandomValues(array),
    },
  });
}

interface SdkInContext {
  TailwaterClient: new (options?: object) => { server: string; token: string | undefined };
  Publisher: new (options: object) => {
    publish(kind: string, data: unknown): void;
    flush(timeoutMs: number): Promise<boolean>;
    sent: number;
  };
  tail: (options: object) => AsyncGenerator<{ type: string; entry?: { seq: number } }>;
}

describe('tailwater/client in the browser', () => {
  it('bundles for the browser without server dependencies or Node built-ins, and reports its size', async ({
    annotate,
  }) => {
    const bundle = await bundleForBrowser(CLIENT_ENTRY);
    expect(bundle.leaks).toEqual([]);
    expect(bundle.modules).toContain('src/client/index.ts');
    expect(bundle.es.exports).toEqual(
      expect.arrayContaining(['TailwaterClient', 'Publisher', 'tail', 'TailwaterClientError']),
    );
    const raw = Buffer.byteLength(bundle.es.code);
    const gzip = gzipSync(bundle.es.code).byteLength;
    const size = `tailwater/client browser bundle: ${kib(raw)} minified, ${kib(gzip)} gzip (${bundle.modules.length} modules)`;
    console.log(size);
    await annotate(size);
    // Not a budget: a bound far above today's size that only an accident (a dependency's whole
    // tree pulled in) crosses.
    expect(raw).toBeLessThan(256 * 1024);
  });

  it('runs in a context with only browser globals: no process, Buffer or crypto.randomUUID', async () => {
    const { iife } = await bundleForBrowser(CLIENT_ENTRY);
    const requests: Array<{ url: string; body: string | undefined }> = [];
    const frames = 'id: 1-0000abcd\ndata: {"seq":1,"kind":"log","text":"hi\\n"}\n\n';
    const context = browserLikeContext(async (input, init) => {
      // tail() passes a URL, the client's calls a string.
      const url = String(input);
      requests.push({ url, body: init?.body as string | undefined });
      if (url.endsWith('/events')) {
        return {
          ok: true,
          status: 200,
          headers: new Headers(),
          text: async () => '{"first":1,"last":1,"duplicates":0,"seqs":[1]}',
        };
      }
      // Safari's ReadableStream: readable with a reader, not async-iterable.
      let sent = false;
      const body = {
        getReader: () => ({
          read: async () =>
            sent
              ? { done: true, value: undefined }
              : ((sent = true), { done: false, value: new TextEncoder().encode(frames) }),
          cancel: async () => undefined,
          releaseLock: () => undefined,
        }),
      };
      return { ok: true, status: 200, headers: new Headers(), body };
    });
    vm.runInContext(iife.code, context);
    const sdk = vm.runInContext('Tailwater', context) as SdkInContext;

    const client = new sdk.TailwaterClient();
    expect(client.server).toBe('http://127.0.0.1:8585');
    expect(client.token).toBeUndefined();

    const publisher = new sdk.Publisher({
      server: 'http://tailwater.test',
      target: { pipeline: 'etl.daily', runId: 'r1' },
    });
    expect(() => publisher.publish('progress', { text: 'é'.repeat(40_000) })).toThrow(/exceeds/);
    publisher.publish('progress', { pct: 40 });
    expect(await publisher.flush(5000)).toBe(true);
    expect(publisher.sent).toBe(1);
    const sentEvents = JSON.parse(requests[0]!.body!) as { events: Array<{ id: string }> };
    expect(sentEvents.events[0]!.id).toMatch(
      /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}-1$/,
    );

    const seen: string[] = [];
    for await (const event of sdk.tail({
      server: 'http://tailwater.test',
      target: { pipeline: 'etl.daily', runId: 'r1' },
      maxRetries: 0,
    })) {
      seen.push(event.type === 'entry' ? `entry ${event.entry?.seq}` : event.type);
      if (event.type === 'entry') break;
    }
    expect(seen).toEqual(['open', 'entry 1']);
    expect(requests[1]!.url).toBe(
      'http://tailwater.test/api/v1/pipelines/etl.daily/runs/r1/stream',
    );
  });

  it('would fail for a module that reaches the server: src/index.ts pulls in forbidden modules', async () => {
    const { leaks } = await bundleForBrowser(SERVER_ENTRY);
    const text = leaks.join('\n');
    expect(text).toMatch(/^better-sqlite3: /m);
    expect(text).toMatch(/^fastify: /m);
    expect(text).toMatch(/^pg: /m);
    expect(text).toMatch(/^ioredis: /m);
    expect(text).toMatch(/^@stomp\/stompjs: /m);
    expect(text).toMatch(/a Node built-in without a browser fallback/);
  });
});

/** Every import declaration (and `export … from`) of a TypeScript file, with its kind. */
function importsOf(file: string): Array<{ specifier: string; typeOnly: boolean }> {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest);
  const found: Array<{ specifier: string; typeOnly: boolean }> = [];
  for (const statement of source.statements) {
    if (ts.isImportDeclaration(statement) && ts.isStringLiteral(statement.moduleSpecifier)) {
      found.push({
        specifier: statement.moduleSpecifier.text,
        typeOnly: statement.importClause?.isTypeOnly ?? false,
      });
    } else if (
      ts.isExportDeclaration(statement) &&
      statement.moduleSpecifier &&
      ts.isStringLiteral(statement.moduleSpecifier)
    ) {
      found.push({ specifier: statement.moduleSpecifier.text, typeOnly: statement.isTypeOnly });
    }
  }
  return found;
}

describe('the dashboard and the SDK', () => {
  it('the dashboard (web/src) reaches src/ only through the client entry, and the model for types', () => {
    const webSrc = join(ROOT, 'web/src');
    const files = readdirSync(webSrc, { recursive: true, encoding: 'utf8' })
      .filter((name) => /\.tsx?$/.test(name))
      .map((name) => join(webSrc, name));
    expect(files.length).toBeGreaterThan(0);
    const offending: string[] = [];
    for (const file of files) {
      for (const { specifier, typeOnly } of importsOf(file)) {
        if (!specifier.includes('/src/')) continue;
        const target = relative(ROOT, join(file, '..', specifier));
        if (target === 'src/client/index.js') continue;
        if (typeOnly && target.startsWith('src/model/')) continue;
        offending.push(`${relative(ROOT, file)}: ${typeOnly ? 'import type' : 'import'} ${target}`);
      }
    }
    expect(offending).toEqual([]);
  });
});
