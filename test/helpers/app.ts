import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { MemoryBus } from '../../src/bus/memory.js';
import { Hub } from '../../src/engine/hub.js';
import { Ingest } from '../../src/engine/ingest.js';
import { buildApp } from '../../src/http/app.js';
import type { PartialSettings, Settings } from '../../src/model/settings.js';
import { settingsSchema } from '../../src/model/settings.js';
import { SqliteStore } from '../../src/store/sqlite.js';

export interface TestApp {
  app: FastifyInstance;
  store: SqliteStore;
  bus: MemoryBus;
  hub: Hub;
  ingest: Ingest;
  settings: Settings;
  dir: string;
  /** Base URL once `listen()` was called. */
  url: string;
  listen(): Promise<string>;
  close(): Promise<void>;
}

/** A whole server in this process on a fresh SQLite file; `listen()` for real sockets. */
export async function createTestApp(overrides: PartialSettings = {}): Promise<TestApp> {
  const dir = mkdtempSync(join(tmpdir(), 'tailwater-test-'));
  const settings = settingsSchema.parse({ data: dir, logLevel: 'silent', ...overrides });
  const store = new SqliteStore(join(dir, 'tailwater.db'));
  const bus = new MemoryBus();
  const hub = new Hub(store, bus, settings);
  const ingest = new Ingest(store, bus, settings);
  const app = await buildApp({ store, hub, ingest, settings });
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
      await app.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return testApp;
}
