import type { FastifyInstance } from 'fastify';
import type { Bus } from '../bus/bus.js';
import { Hub } from '../engine/hub.js';
import { Ingest } from '../engine/ingest.js';
import { buildApp } from '../http/app.js';
import type { Settings } from '../model/settings.js';
import { SettingsError } from '../model/settings.js';
import type { SourceConfig } from '../sources/config.js';
import { StompSource } from '../sources/stomp.js';
import { RetentionLoop } from '../store/retention.js';
import { openBus, openStore } from './backends.js';
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
  const store = await openStore(settings);
  let bus: Bus;
  try {
    bus = await openBus(settings);
  } catch (error) {
    await store.close();
    throw error;
  }
  const hub = new Hub(store, bus, settings);
  const ingest = new Ingest(store, bus, settings);
  const sources: StompSource[] = [];
  const app = await buildApp(
    {
      store,
      hub,
      ingest,
      settings,
      busHealth: () => bus.health(),
      sourceStatus: () => sources.map((source) => source.status()),
    },
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
