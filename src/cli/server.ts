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
import { SearchIndexer } from '../engine/search-indexer.js';
import { SealLoop } from '../engine/seal-loop.js';
import { SealedStore } from '../store/sealed-store.js';
import { Leadership } from '../engine/leader.js';
import type { LedTask } from '../engine/leader.js';
import { canLease } from '../store/lease.js';
import { authEnabled } from '../http/token-verifier.js';
import { cutConnections } from '../http/socket-takeover.js';
import { openBus, openStore, schemeOf, storeSpec } from './backends.js';
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

/** How often a replica that does not hold a lease tries to take it. */
const LEASE_RETRY_MS = 2_000;

/** A task run on this server alone, for a store that cannot hand out leases. */
function runAlways(task: LedTask): Pick<Leadership, 'leading' | 'start' | 'stop'> {
  return {
    leading: true,
    start: () => void task.start(),
    stop: () => task.stop(),
  };
}

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|::1|localhost)$/;

/** Builds every part from the settings and starts listening. */
export async function startServer(
  settings: Settings,
  options: StartOptions = {},
): Promise<RunningServer> {
  if (!LOOPBACK.test(settings.host) && !settings.insecure && !authEnabled(settings)) {
    throw new SettingsError(
      `host: refusing to listen on ${settings.host} without authentication; set authSecret (or a public key, docs/SECURITY.md), or pass --insecure to do it anyway.`,
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
  let leading: (index: number) => boolean = () => false;
  const app = await buildApp(
    {
      store,
      hub,
      ingest,
      settings,
      busHealth: () => bus.health(),
      sourceStatus: () =>
        sources.map((source, index) => {
          const status = source.status();
          return leading(index) ? status : { ...status, state: 'standby' as const };
        }),
    },
    { logLevel: settings.logLevel },
  );
  // On a shared store, every replica runs the same sources: the one holding a source's lease
  // subscribes, under one client-id, so a replica taking over continues the same durable
  // subscription (docs/DEPLOYMENT.md, "One subscriber per fleet").
  const shared = schemeOf(storeSpec(settings)).startsWith('postgres');
  const info = (message: string) => app.log.info(message);
  for (const config of options.sources ?? []) {
    const name = config.name ?? config.topic;
    const clientId = config.clientId ?? (shared ? `tailwater-${name}` : undefined);
    sources.push(new StompSource({ ...config, clientId }, ingest, info, settings.maxEventBytes));
  }
  const retention = new RetentionLoop(
    store,
    settings,
    (error) => app.log.error({ err: error }, 'retention failed'),
    Date.now,
    (pipeline, runId) => ingest.deleteRun(pipeline, runId),
  );
  const indexer = new SearchIndexer(store, {
    intervalSeconds: settings.searchIndexSeconds,
    onError: (error) => app.log.error({ err: error }, 'search indexing failed'),
  });
  const sealing =
    store instanceof SealedStore
      ? new SealLoop(store.sealer, {
          intervalSeconds: 1,
          onError: (error) => app.log.error({ err: error }, 'sealing failed'),
        })
      : undefined;
  const led = [
    ...sources.map((source) => ({ name: `source:${source.name}`, task: source })),
    {
      name: 'retention',
      task: { start: () => retention.start(), stop: () => retention.stop() },
    },
    // One indexer per fleet: the index is in the shared store.
    { name: 'search-index', task: indexer },
    // One sealer per fleet: two would seal the same runs twice over (the catalog refuses the
    // second record, but the work is done twice).
    ...(sealing ? [{ name: 'seal', task: sealing }] : []),
  ].map(({ name, task }) =>
    canLease(store) ? new Leadership(store, name, task, LEASE_RETRY_MS, info) : runAlways(task),
  );
  leading = (index) => led[index]?.leading ?? false;
  await app.listen({ host: settings.host, port: settings.port });
  for (const leader of led) leader.start();
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
    url: `${settings.tlsCert ? 'https' : 'http'}://${host}:${port}`,
    close: () =>
      (closing ??= (async () => {
        await Promise.all(led.map((leader) => leader.stop()));
        hub.shutdown();
        // Streams were just ended; a client may still hold a connection it never used, which
        // 'idle' closing does not count as idle. Give the end frames a moment, then cut the rest.
        const closed = app.close();
        setTimeout(() => cutConnections(app.server), 1000).unref();
        await closed;
        await bus.close();
        await store.close();
      })()),
  };
}
