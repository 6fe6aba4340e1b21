import { resolve } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Bus } from '../bus/bus.js';
import { MemoryBus } from '../bus/memory.js';
import { Hub } from '../engine/hub.js';
import { Ingest } from '../engine/ingest.js';
import { buildApp } from '../http/app.js';
import type { Settings } from '../model/settings.js';
import { SettingsError } from '../model/settings.js';
import type { SourceConfig } from '../sources/config.js';
import { StompSource } from '../sources/stomp.js';
import { RetentionLoop } from '../store/retention.js';
import { SqliteStore } from '../store/sqlite.js';
import type { Store } from '../store/store.js';

export interface StartOptions {
  /** Ingest adapters that are not HTTP (the config file's `sources`). */
  sources?: SourceConfig[];
}

export interface RunningServer {
  app: FastifyInstance;
  store: Store;
  bus: Bus;
  hub: Hub;
  ingest: Ingest;
  sources: StompSource[];
  url: string;
  /** Ends every stream with `end shutdown`, stops listening and closes the store. */
  close(): Promise<void>;
}

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|::1|localhost)$/;

export function openStore(settings: Settings): Store {
  const spec = settings.store || `sqlite:${resolve(settings.data, 'tailwater.db')}`;
  if (spec.startsWith('sqlite:')) {
    return new SqliteStore(spec.slice('sqlite:'.length), {
      synchronous: settings.sqliteSynchronous,
    });
  }
  throw new SettingsError(
    `store: "${spec}" is not supported by this build (use sqlite:<path>; PostgreSQL is not available yet).`,
  );
}

export function openBus(settings: Settings): Bus {
  if (settings.bus === 'memory') return new MemoryBus();
  throw new SettingsError(
    `bus: "${settings.bus}" is not supported by this build (use memory; Redis is not available yet).`,
  );
}

/** Builds every part from the settings and starts listening. */
export async function startServer(
  settings: Settings,
  options: StartOptions = {},
): Promise<RunningServer> {
  if (!LOOPBACK.test(settings.host) && !settings.insecure) {
    throw new SettingsError(
      `host: refusing to listen on ${settings.host} without authentication; pass --insecure to do it anyway.`,
    );
  }
  const store = openStore(settings);
  const bus = openBus(settings);
  const hub = new Hub(store, bus, settings);
  const ingest = new Ingest(store, bus, settings);
  const sources: StompSource[] = [];
  const app = await buildApp(
    { store, hub, ingest, settings, sourceStatus: () => sources.map((source) => source.status()) },
    { logLevel: settings.logLevel },
  );
  for (const config of options.sources ?? []) {
    sources.push(
      new StompSource(config, ingest, (message) => app.log.info(message), settings.maxEventBytes),
    );
  }
  const retention = new RetentionLoop(store, settings, (error) =>
    app.log.error({ err: error }, 'retention failed'),
  );
  await app.listen({ host: settings.host, port: settings.port });
  retention.start();
  for (const source of sources) source.start();
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : settings.port;
  const host = settings.host.includes(':') ? `[${settings.host}]` : settings.host;
  let closing: Promise<void> | undefined;
  return {
    app,
    store,
    bus,
    hub,
    ingest,
    sources,
    url: `http://${host}:${port}`,
    close: () =>
      (closing ??= (async () => {
        await Promise.all(sources.map((source) => source.stop()));
        hub.shutdown();
        await retention.stop();
        // Streams were just ended; a client may still hold a connection it never used, which
        // 'idle' closing does not count as idle. Give the end frames a moment, then cut the rest.
        const closed = app.close();
        setTimeout(() => app.server.closeAllConnections(), 1000).unref();
        await closed;
        await bus.close();
        await store.close();
      })()),
  };
}
