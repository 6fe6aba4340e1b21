import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Bus } from '../../src/bus/bus.js';
import { Hub } from '../../src/engine/hub.js';
import { Ingest } from '../../src/engine/ingest.js';
import { buildApp } from '../../src/http/app.js';
import type { PartialSettings, Settings } from '../../src/model/settings.js';
import { settingsSchema } from '../../src/model/settings.js';
import type { Store } from '../../src/store/store.js';
import type { BackendFactory } from './backends.js';
import { backendFromEnv } from './backends.js';
import { cutConnections } from '../../src/http/socket-takeover.js';
import { openSse } from './sse.js';
import type { SseReader } from './sse.js';

export interface TestApp {
  app: FastifyInstance;
  store: Store;
  bus: Bus;
  hub: Hub;
  ingest: Ingest;
  settings: Settings;
  dir: string;
  /** Base URL once `listen()` was called. */
  url: string;
  listen(): Promise<string>;
  close(): Promise<void>;
}

/**
 * A whole server in this process on a fresh, empty backend pair (SQLite and the memory bus
 * unless the run names another: test/helpers/backends.ts); `listen()` for real sockets.
 */
export async function createTestApp(
  overrides: PartialSettings = {},
  backend: BackendFactory = backendFromEnv().open,
): Promise<TestApp> {
  const dir = mkdtempSync(join(tmpdir(), 'tailwater-test-'));
  const settings = settingsSchema.parse({ data: dir, logLevel: 'silent', ...overrides });
  const { store, bus, cleanup } = await backend(dir, settings);
  const hub = new Hub(store, bus, settings);
  const ingest = new Ingest(store, bus, settings);
  const app = await buildApp({ store, hub, ingest, settings, busHealth: () => bus.health() });
  const testApp: TestApp = {
    app,
    store,
    bus,
    hub,
    ingest,
    settings,
    dir,
    url: '',
    async listen() {
      await app.listen({ host: '127.0.0.1', port: 0 });
      const address = app.server.address();
      if (typeof address !== 'object' || !address) throw new Error('not listening');
      testApp.url = `http://127.0.0.1:${address.port}`;
      return testApp.url;
    },
    async close() {
      hub.shutdown();
      // As the server's own close does (src/cli/server.ts): a client may hold a connection on
      // which it never sent a request (undici opens one as a stream it aborts goes), which
      // 'idle' closing does not count as idle; it is cut after a moment.
      const closed = app.close();
      const cut = setTimeout(() => cutConnections(app.server), 1000);
      cut.unref();
      await closed;
      clearTimeout(cut);
      await cleanup();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return testApp;
}

export interface LiveApps {
  /** A listening app with the pool's settings, then `overrides`. */
  start(overrides?: PartialSettings): Promise<TestApp>;
  /** An SSE reader on `path` of `t`. */
  open(t: TestApp, path: string, headers?: Record<string, string>): Promise<SseReader>;
  /** Has `closeAll()` close a reader opened some other way. */
  track(reader: SseReader): SseReader;
  /** Closes every reader, then every app (for an `afterEach`). */
  closeAll(): Promise<void>;
}

/** Listening apps started with `defaults`, and the SSE readers opened on them, closed together. */
export function liveApps(defaults: PartialSettings = {}): LiveApps {
  const apps: TestApp[] = [];
  const readers: SseReader[] = [];
  return {
    async start(overrides = {}) {
      const t = await createTestApp({ ...defaults, ...overrides });
      apps.push(t);
      await t.listen();
      return t;
    },
    async open(t, path, headers = {}) {
      const reader = await openSse(`${t.url}${path}`, headers);
      readers.push(reader);
      return reader;
    },
    track(reader) {
      readers.push(reader);
      return reader;
    },
    async closeAll() {
      for (const reader of readers.splice(0)) reader.close();
      for (const app of apps.splice(0)) {
        app.hub.shutdown();
        // The client may hold a spare keep-alive socket that would delay app.close() by seconds.
        cutConnections(app.app.server);
        await app.close();
      }
    },
  };
}

/** A running run with `lines` log entries `line 1\n`…: seq 1 is the status entry, the logs follow. */
export async function seedRunningRun(
  t: TestApp,
  pipeline: string,
  runId: string,
  lines: number,
): Promise<number> {
  await t.ingest.putRun(pipeline, runId, { status: 'running' });
  let last = 1;
  for (let i = 1; i <= lines; i += 1) {
    last = (await t.ingest.appendLog(pipeline, runId, { text: `line ${i}\n` })).seq;
  }
  return last;
}

/** Appends log text to a run through the ingest path; answers its seq. */
export async function appendLogLine(
  t: TestApp,
  pipeline: string,
  runId: string,
  text: string,
): Promise<number> {
  return (await t.ingest.appendLog(pipeline, runId, { text })).seq;
}
