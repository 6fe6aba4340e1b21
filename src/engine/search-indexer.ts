import type { IndexLimits, Store } from '../store/store.js';

/**
 * Keeps the search index up with what is stored (docs/SEARCH.md): a pass indexes a bounded
 * amount in one transaction, then gives the rest of the server a turn; while more is waiting
 * the next pass follows at once, and once none is, the indexer looks again every
 * `intervalSeconds`. Indexing is off the append path, so appends go as fast as without search;
 * what was stored but not yet indexed is the lag every search answer reports.
 */
export interface SearchIndexerOptions {
  intervalSeconds: number;
  limits?: IndexLimits | undefined;
  onError?: ((error: unknown) => void) | undefined;
}

/** About 10 ms of indexing per pass on this kind of machine (docs/BENCHMARKS.md, "Search"). */
export const DEFAULT_INDEX_LIMITS: IndexLimits = { maxEntries: 2000, maxBytes: 256 * 1024 };
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
    while (await this.once());
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
      this.schedule((await this.once()) ? 0 : this.options.intervalSeconds * 1000);
    } catch (error) {
      this.options.onError?.(error);
      this.schedule(Math.max(RETRY_MS, this.options.intervalSeconds * 1000));
    }
  }
}
