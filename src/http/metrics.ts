import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { IntervalHistogram } from 'node:perf_hooks';
import type { FastifyInstance } from 'fastify';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { PipelineStats, SearchIndexStatus, StorageBytes } from '../store/store.js';
import { z } from 'zod';
import type { AppDeps } from './deps.js';
import type { OtlpStats } from './otlp-stats.js';
import { errors, media } from './schemas/api.js';

/**
 * GET /metrics in Prometheus' text format: the engine's counts and what its viewers hold, read
 * at scrape time, plus the process's own (RSS, heap, event-loop lag). One registry per app, so
 * several apps in one process (the tests) do not collide.
 */
export async function metricsRoutes(
  app: FastifyInstance,
  { hub, store, otlpStats }: AppDeps & { otlpStats: OtlpStats },
): Promise<void> {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'tailwater_' });

  const counter = (name: string, help: string, read: () => number) =>
    new Counter({
      name,
      help,
      registers: [registry],
      collect() {
        this.reset();
        this.inc(read());
      },
    });
  const gauge = (name: string, help: string, read: () => number) =>
    new Gauge({
      name,
      help,
      registers: [registry],
      collect() {
        this.set(read());
      },
    });

  counter(
    'tailwater_store_shared_reads_total',
    'Store reads by the one reader of each stream.',
    () => hub.stats.sharedReads,
  );
  counter(
    'tailwater_store_catch_up_reads_total',
    'Store reads by viewers catching up.',
    () => hub.stats.catchUpReads,
  );
  counter(
    'tailwater_slow_viewer_demotions_total',
    'Live viewers sent back to paging from the store because their unsent bytes passed the cap.',
    () => hub.stats.slowViewerDemotions,
  );
  new Counter({
    name: 'tailwater_stream_ends_total',
    help: 'Streams ended by the server, by reason.',
    labelNames: ['reason'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [reason, count] of hub.stats.ends) this.inc({ reason }, count);
    },
  });
  new Counter({
    name: 'tailwater_otlp_log_records_total',
    help: 'OpenTelemetry log records received at /v1/logs: stored, already stored (an exporter retry), or rejected.',
    labelNames: ['outcome'],
    registers: [registry],
    collect() {
      this.reset();
      this.inc({ outcome: 'stored' }, otlpStats.stored);
      this.inc({ outcome: 'duplicate' }, otlpStats.duplicates);
      this.inc({ outcome: 'rejected' }, otlpStats.rejected);
    },
  });
  const delivery = new Histogram({
    name: 'tailwater_live_delivery_seconds',
    help: 'Where new entries spend their time from the store to the live viewers, per batch fanned out (its oldest entry): queued (stored → read: commit, bus, one coalescing turn), read (the store read), write (encoding and writing to every live viewer).',
    labelNames: ['phase'],
    buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2],
    registers: [registry],
  });
  hub.stats.onLiveDelivery = ({ queuedMs, readMs, writeMs }) => {
    delivery.observe({ phase: 'queued' }, queuedMs / 1000);
    delivery.observe({ phase: 'read' }, readMs / 1000);
    delivery.observe({ phase: 'write' }, writeMs / 1000);
  };
  gauge('tailwater_stream_connections', 'Open stream connections.', () => hub.activeConnections);
  gauge('tailwater_active_streams', 'Streams with at least one viewer.', () => hub.activeStreams);
  gauge(
    'tailwater_viewers_paging',
    'Viewers being fed from the store rather than live.',
    () => hub.snapshot().pagingViewers,
  );
  gauge(
    'tailwater_viewer_pending_bytes',
    'Bytes written to viewers but not yet sent, in all.',
    () => hub.snapshot().pendingBytes,
  );
  gauge(
    'tailwater_viewer_pending_bytes_max',
    'The most bytes any one viewer has written but not yet sent.',
    () => hub.snapshot().maxPendingBytes,
  );

  // How far search is behind what is stored (docs/SEARCH.md), read from the store at scrape
  // time, so every replica reports the fleet's one index. A store out of reach leaves the last
  // value rather than failing the whole scrape.
  const searchGauge = (name: string, help: string, read: (status: SearchIndexStatus) => number) =>
    new Gauge({
      name,
      help,
      registers: [registry],
      async collect() {
        const status = await store.searchIndexStatus().catch(() => undefined);
        if (status) this.set(read(status));
      },
    });
  searchGauge(
    'tailwater_search_index_lag_seconds',
    'Age of the oldest entry stored but not yet searchable (0 when the index is current).',
    (status) =>
      status.oldestPendingAt === null ? 0 : Math.max(0, Date.now() - status.oldestPendingAt) / 1000,
  );
  searchGauge(
    'tailwater_search_index_pending_entries',
    'Entries stored but not yet searchable.',
    (status) => status.pendingEntries,
  );

  // Runs and log bytes per pipeline, read at most every 30 s: a scrape every few seconds must not
  // sum every run's bytes each time.
  let stats: { at: number; items: PipelineStats[] } | undefined;
  const pipelineStats = async (): Promise<PipelineStats[]> => {
    if (stats && Date.now() - stats.at < 30_000) return stats.items;
    const items: PipelineStats[] = [];
    let after: string | undefined;
    do {
      const page = await store.pipelineStats({ after, limit: 1000 });
      items.push(...page.items);
      after = page.next;
    } while (after !== undefined);
    stats = { at: Date.now(), items };
    return items;
  };
  const perPipeline = (name: string, help: string, read: (item: PipelineStats) => number) =>
    new Gauge({
      name,
      help,
      labelNames: ['pipeline'],
      registers: [registry],
      async collect() {
        const items = await pipelineStats().catch(() => undefined);
        if (!items) return;
        this.reset();
        for (const item of items) this.set({ pipeline: item.pipeline }, read(item));
      },
    });
  perPipeline('tailwater_pipeline_runs', 'Runs kept, per pipeline.', (item) => item.runs);
  perPipeline(
    'tailwater_pipeline_log_bytes',
    'Bytes of log text its runs hold, per pipeline.',
    (item) => item.logBytes,
  );

  // Where the history is kept (docs/STORAGE.md), read at most every 30 s like the above.
  let storage: { at: number; bytes: Promise<StorageBytes> } | undefined;
  const storageBytes = (): Promise<StorageBytes> => {
    if (!storage || Date.now() - storage.at >= 30_000) {
      storage = { at: Date.now(), bytes: store.storageBytes() };
      storage.bytes.catch(() => (storage = undefined));
    }
    return storage.bytes;
  };
  const storageGauge = (name: string, help: string, read: (bytes: StorageBytes) => number) =>
    new Gauge({
      name,
      help,
      registers: [registry],
      async collect() {
        const bytes = await storageBytes().catch(() => undefined);
        if (bytes) this.set(read(bytes));
      },
    });
  storageGauge(
    'tailwater_storage_hot_log_bytes',
    'Log text in the hot store, not yet sealed.',
    (b) => b.hotLogBytes,
  );
  storageGauge(
    'tailwater_storage_sealed_raw_bytes',
    'Entries sealed into segments, as the hot store held them.',
    (b) => b.sealedRawBytes,
  );
  storageGauge(
    'tailwater_storage_sealed_bytes',
    'Bytes of the segment files.',
    (b) => b.sealedBytes,
  );
  storageGauge('tailwater_storage_segments', 'Sealed segments.', (b) => b.segments);

  const blocks = new LoopBlockWatch();
  app.addHook('onClose', async () => blocks.stop());
  gauge(
    'tailwater_event_loop_block_seconds',
    'The longest the event loop was held in the last 10 to 20 seconds (scrapes do not reset it).',
    () => blocks.longestSeconds(),
  );

  const scrape = {
    summary: 'Prometheus metrics',
    description: 'With authentication on: an admin token, or the fixed `metricsToken`.',
    tags: ['health'],
    response: {
      200: media('Prometheus text format.', 'text/plain', z.string()),
      ...errors(401, 403),
    },
  };
  app.get('/metrics', { schema: scrape }, async (_request, reply) =>
    reply.type(registry.contentType).send(await registry.metrics()),
  );
}

/**
 * The longest event-loop block of the last 10–20 s. prom-client's own lag maximum is reset at
 * each scrape, and a reset forgets the monitor's last tick, so a block that starts just after a
 * scrape can go unseen. Here two monitors (10 ms resolution) are reset in turn every 10 s, each
 * covering 20 s: whenever one was just reset, the other still holds the last 10 s.
 */
class LoopBlockWatch {
  private readonly monitors: [IntervalHistogram, IntervalHistogram] = [
    monitorEventLoopDelay({ resolution: 10 }),
    monitorEventLoopDelay({ resolution: 10 }),
  ];
  private next = 0;
  private readonly timer: NodeJS.Timeout;

  constructor() {
    for (const monitor of this.monitors) monitor.enable();
    this.timer = setInterval(() => {
      this.monitors[this.next]!.reset();
      this.next = 1 - this.next;
    }, 10_000);
    this.timer.unref();
  }

  longestSeconds(): number {
    return Math.max(...this.monitors.map((monitor) => monitor.max)) / 1e9;
  }

  stop(): void {
    clearInterval(this.timer);
    for (const monitor of this.monitors) monitor.disable();
  }
}
