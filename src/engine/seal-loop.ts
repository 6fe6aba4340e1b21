import type { EventLoopUtilization } from 'node:perf_hooks';
import { performance } from 'node:perf_hooks';

/**
 * Seals finished runs in the background (docs/STORAGE.md, "Sealed segments"): a pass seals one
 * segment (its compression on a worker thread; its reads and writes in slices of the store), then
 * gives the server a turn. While more is waiting it takes a share of the time that depends on how
 * busy the rest of the server was while it waited: half of an idle server's, a twentieth of a
 * busy one's (so heavy ingest keeps 95 % of its pace, and an idle server seals its backlog fast).
 * Once nothing is waiting, it looks again every `intervalSeconds`. An existing database's finished runs are so sealed
 * a segment at a time after an upgrade, without a pause in service. One server of a fleet runs
 * it (the `seal` lease).
 */
/** What the loop drives: the store's sealer (a pass seals one segment; a sweep removes orphans). */
export interface Sealing {
  pass(): Promise<{ more: boolean }>;
  sweep(): Promise<unknown>;
}

export interface SealLoopOptions {
  intervalSeconds: number;
  onError?: ((error: unknown) => void) | undefined;
}

/** The share of the time sealing may take while it has a backlog, the server idle or busy. */
const IDLE_SHARE = 0.5;
const BUSY_SHARE = 0.05;
/** Busy: the event loop worked this share of the time sealing waited (or more). */
const BUSY_UTILIZATION = 0.5;
/** A wait shorter than this says too little of the server's load: the last share holds. */
const MIN_MEASURED_MS = 20;
const RETRY_MS = 5000;
/** How often files no record names are looked for (a seal or a deletion a crash cut short). */
const SWEEP_MS = 3_600_000;

export class SealLoop {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = true;
  private lastSweep = 0;
  /** The event loop's use when the wait before the next pass began. */
  private waitStarted: EventLoopUtilization | undefined;
  private share = BUSY_SHARE;

  constructor(
    private readonly sealer: Sealing,
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
    this.waitStarted = performance.eventLoopUtilization();
    this.timer = setTimeout(() => {
      this.running = this.pass().finally(() => {
        this.running = undefined;
      });
    }, ms);
    this.timer.unref();
  }

  private async pass(): Promise<void> {
    try {
      this.share = this.shareNow();
      const started = performance.now();
      const { more } = await this.sealer.pass();
      if (Date.now() - this.lastSweep >= SWEEP_MS) {
        this.lastSweep = Date.now();
        await this.sealer.sweep();
      }
      const took = performance.now() - started;
      this.schedule(
        more
          ? Math.ceil((took * (1 - this.share)) / this.share)
          : this.options.intervalSeconds * 1000,
      );
    } catch (error) {
      this.options.onError?.(error);
      this.schedule(Math.max(RETRY_MS, this.options.intervalSeconds * 1000));
    }
  }

  /** The share the next pass may take, from how busy the server was while sealing waited. */
  private shareNow(): number {
    if (!this.waitStarted) return this.share;
    const waited = performance.eventLoopUtilization(this.waitStarted);
    if (waited.idle + waited.active < MIN_MEASURED_MS) return this.share;
    return waited.utilization >= BUSY_UTILIZATION ? BUSY_SHARE : IDLE_SHARE;
  }
}
