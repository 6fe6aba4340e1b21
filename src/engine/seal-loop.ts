import type { SealedStore } from '../store/sealed-store.js';

/**
 * Seals finished runs in the background (docs/STORAGE.md, "Sealed segments"): a pass seals one
 * segment (its compression on a worker thread; its reads and writes in slices of the store), then
 * gives the server a turn; while more is waiting it takes at most half the time, and once none
 * is, it looks again every `intervalSeconds`. An existing database's finished runs are so sealed
 * a segment at a time after an upgrade, without a pause in service. One server of a fleet runs
 * it (the `seal` lease).
 */
export interface SealLoopOptions {
  intervalSeconds: number;
  onError?: ((error: unknown) => void) | undefined;
}

/** The share of the time sealing may take while it has a backlog. */
const BACKLOG_SHARE = 0.5;
const RETRY_MS = 5000;
/** How often files no record names are looked for (a seal or a deletion a crash cut short). */
const SWEEP_MS = 3_600_000;

export class SealLoop {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = true;
  private lastSweep = 0;

  constructor(
    private readonly store: SealedStore,
    private readonly options: SealLoopOptions,
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

  private schedule(ms: number): void {
    if (this.stopped) return;
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
      const { more } = await this.store.sealer.pass();
      if (Date.now() - this.lastSweep >= SWEEP_MS) {
        this.lastSweep = Date.now();
        await this.store.sealer.sweep();
      }
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
