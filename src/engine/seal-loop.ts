import type { EventLoopUtilization } from 'node:perf_hooks';
import { performance } from 'node:perf_hooks';

/** What the loop drives: the store's sealer (a pass seals one segment; a sweep removes orphans). */
export interface Sealing {
  pass(): Promise<{ more: boolean }>;
  sweep(): Promise<unknown>;
}

/**
 * How busy the server has been: started at a moment, it returns a reading of the share of the
 * time since then that the event loop worked (0 to 1).
 */
export type LoadGauge = () => () => number;

/** This process's event loop, as performance.eventLoopUtilization measures it. */
export const eventLoopGauge: LoadGauge = () => {
  const since: EventLoopUtilization = performance.eventLoopUtilization();
  return () => performance.eventLoopUtilization(since).utilization;
};

export interface SealLoopOptions {
  intervalSeconds: number;
  onError?: ((error: unknown) => void) | undefined;
  /** What tells busy from idle (the event loop's utilization; a test gives its own). */
  gauge?: LoadGauge;
}

/** The share of the time sealing may take while it has a backlog, the server idle or busy. */
const IDLE_SHARE = 0.5;
const BUSY_SHARE = 0.05;
/** Busy: the event loop worked this share of the time since sealing began to wait (or more). */
const BUSY_UTILIZATION = 0.5;
/** How often a wait longer than an idle server's looks again at how busy the server is. */
const CHECK_MS = 1000;
const RETRY_MS = 5000;
/** How often files no record names are looked for (a seal or a deletion a crash cut short). */
const SWEEP_MS = 3_600_000;

/** After a pass of `took` ms: the wait an idle server gives, and the one a busy server gives. */
const waitsAfter = (took: number) => ({
  idle: (took * (1 - IDLE_SHARE)) / IDLE_SHARE,
  busy: (took * (1 - BUSY_SHARE)) / BUSY_SHARE,
});

/**
 * Seals finished runs in the background (docs/STORAGE.md, "Sealed segments"): a pass seals one
 * segment (its compression on a worker thread; its reads and writes in slices of the store), then
 * gives the server a turn. While more is waiting, sealing takes a share of the time that follows
 * the server's load: the next pass starts once the wait is as long as the pass if the event
 * loop has been mostly idle since it began (half the time), and otherwise once it is 19 times as
 * long (a twentieth), looking again every second; so heavy ingest keeps its pace and an idle
 * server seals its backlog fast. Once nothing is waiting, it looks every `intervalSeconds`. An
 * existing database's finished runs are so sealed a segment at a time after an upgrade, without
 * a pause in service. One server of a fleet runs it (the `seal` lease).
 */
export class SealLoop {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = true;
  private lastSweep = 0;

  constructor(
    private readonly sealer: Sealing,
    private readonly options: SealLoopOptions,
  ) {}

  start(): void {
    this.stopped = false;
    this.wait(0, 0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  /** Waits `idleMs` if the server stays mostly idle meanwhile, else up to `busyMs`; then a pass. */
  private wait(idleMs: number, busyMs: number): void {
    if (this.stopped) return;
    const utilization = (this.options.gauge ?? eventLoopGauge)();
    const started = performance.now();
    const check = () => {
      const waited = performance.now() - started;
      const idle = utilization() < BUSY_UTILIZATION;
      if (waited >= busyMs || (idle && waited >= idleMs)) {
        this.running = this.pass().finally(() => {
          this.running = undefined;
        });
        return;
      }
      this.later(check, Math.min(CHECK_MS, busyMs - waited));
    };
    this.later(check, idleMs);
  }

  private later(callback: () => void, ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(callback, Math.max(0, Math.ceil(ms)));
    this.timer.unref();
  }

  private async pass(): Promise<void> {
    try {
      const started = performance.now();
      const { more } = await this.sealer.pass();
      if (Date.now() - this.lastSweep >= SWEEP_MS) {
        this.lastSweep = Date.now();
        await this.sealer.sweep();
      }
      const interval = this.options.intervalSeconds * 1000;
      if (!more) return this.wait(interval, interval);
      const waits = waitsAfter(performance.now() - started);
      this.wait(waits.idle, waits.busy);
    } catch (error) {
      this.options.onError?.(error);
      const retry = Math.max(RETRY_MS, this.options.intervalSeconds * 1000);
      this.wait(retry, retry);
    }
  }
}
