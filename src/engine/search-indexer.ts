import type { IndexLimits, Store } from '../store/store.js';

/**
 * Keeps the search index up with what is stored (docs/SEARCH.md): a pass indexes a bounded
 * amount in one transaction, then gives the rest of the server a turn; while more is waiting
 * it takes at most BACKLOG_SHARE of the time, and once none is, it looks again every
 * `intervalSeconds`. Appends never wait for the index, only, now and then, for one pass of it;
 * what was stored but not yet indexed is the lag every search answer reports.
 */
export interface SearchIndexerOptions {
  intervalSeconds: number;
  limits?: IndexLimits | undefined;
  onError?: ((error: unknown) => void) | undefined;
}

/**
 * A pass: about 10 ms of indexing on this kind of machine, and rarely past 40 ms when the
 * full-text index merges its segments (docs/BENCHMARKS.md, "Search").
 */
export const DEFAULT_INDEX_LIMITS: IndexLimits = { maxEntries: 2000, maxBytes: 128 * 1024 };
/**
 * The share of the time the indexer may take while it has a backlog: after a pass of t ms it
 * waits t ms, so appends, which share the store's one writer with it, keep at least half.
 */
const BACKLOG_SHARE = 0.5;
/** After a failed pass (the store unreachable), the next try waits this long at least. */
const RETRY_MS = 1000;

export class SearchIndexer {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = true;
  /** Entries and documents indexed since start, for /metrics. */
  entries = 0;
  documents = 0;

  constructor(
    private readonly store: Store,
    private readonly options: SearchIndexerOptions,
  ) {}

  start(): void {
    this.stopped = false;
    this.schedule(0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  /** Indexes until nothing is waiting (tests, and a caller that wants the index current). */
  async catchUp(): Promise<void> {
    // A turn of the event loop between passes: a store's write resolves without one.
    while (await this.once()) await new Promise((resolve) => setImmediate(resolve));
  }

  /** One pass; whether more is waiting. */
  private async once(): Promise<boolean> {
    const result = await this.store.indexForSearch(this.options.limits ?? DEFAULT_INDEX_LIMITS);
    this.entries += result.entries;
    this.documents += result.documents;
    return result.more;
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    // setImmediate-like at 0: the server's other work runs between passes.
    this.timer = setTimeout(() => {
      this.running = this.pass().finally(() => {
        this.running = undefined;
      });
    }, ms);
    this.timer.unref();
  }

  private async pass(): Promise<void> {
    try {
      const started = performance.now();
      const more = await this.once();
      const took = performance.now() - started;
      this.schedule(
        more
          ? Math.ceil((took * (1 - BACKLOG_SHARE)) / BACKLOG_SHARE)
          : this.options.intervalSeconds * 1000,
      );
    } catch (error) {
      this.options.onError?.(error);
      this.schedule(Math.max(RETRY_MS, this.options.intervalSeconds * 1000));
    }
  }
}
