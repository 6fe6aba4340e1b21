import type { Lease, LeaseStore } from '../store/lease.js';

/** A task that must run on one server of a fleet at a time; it can be started again. */
export interface LedTask {
  start(): void | Promise<void>;
  stop(): Promise<void>;
}

/**
 * Runs a task on whichever server holds the lease `name` (docs/DEPLOYMENT.md, "One subscriber
 * per fleet"). The others try to take the lease every `retryMs`; the holder stops the task the
 * moment the lease is lost, so two servers never run it for longer than it takes the store to
 * notice a dead holder. The store's lease is what decides: on SQLite, the one process.
 */
export class Leadership {
  private lease: Lease | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private trying: Promise<void> | undefined;

  constructor(
    private readonly store: LeaseStore,
    private readonly name: string,
    private readonly task: LedTask,
    private readonly retryMs = 2_000,
    private readonly log: (message: string) => void = () => {},
  ) {}

  /** Whether this server runs the task now. */
  get leading(): boolean {
    return this.lease !== undefined;
  }

  start(): void {
    this.stopped = false;
    this.trying = this.attempt();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.trying;
    const lease = this.lease;
    this.lease = undefined;
    if (lease) {
      await this.task.stop();
      await lease.release();
    }
  }

  private async attempt(): Promise<void> {
    if (this.stopped) return;
    let lease: Lease | undefined;
    try {
      lease = await this.store.tryLease(this.name);
    } catch (error) {
      this.log(`${this.name}: cannot ask for the lease (${describe(error)}); trying again`);
    }
    if (this.stopped) {
      await lease?.release();
      return;
    }
    if (!lease) {
      this.schedule();
      return;
    }
    this.lease = lease;
    this.log(`${this.name}: this server holds the lease and runs it`);
    await this.task.start();
    void lease.lost.then(() => this.onLost(lease));
  }

  private async onLost(lease: Lease): Promise<void> {
    if (this.lease !== lease) return;
    this.lease = undefined;
    this.log(`${this.name}: the lease was lost; stopping until this server holds it again`);
    await this.task.stop();
    this.schedule();
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.trying = this.attempt();
    }, this.retryMs);
    this.timer.unref();
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
