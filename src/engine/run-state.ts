import type { Entry } from '../model/entry.js';
import type { RunStatus } from '../model/run.js';
import { isRunStatus, isTerminal } from '../model/run.js';

/** OpenMetadata's three states: a terminal status, anything else, or no run row at all. */
export type RunState = 'running' | 'finished' | 'unknown';

export type RunLookup = () => Promise<{ status: RunStatus } | undefined>;

/**
 * What a Tailer knows of its run's state. It learns at once from the `status` entries it reads,
 * and otherwise looks the run up at most once per `intervalMs`; once finished it never looks
 * again. A failed lookup counts as running, so a flaky store never ends a stream early.
 */
export class RunStateProbe {
  state: RunState = 'unknown';
  status: RunStatus | undefined;
  private lastLookupAt = Number.NEGATIVE_INFINITY;
  private inFlight: Promise<void> | undefined;
  /** How many lookups were made (tests check they are sparing). */
  lookups = 0;

  constructor(
    private readonly lookup: RunLookup,
    private readonly intervalMs: number,
  ) {}

  observe(entry: Entry): void {
    if (entry.kind !== 'status') return;
    const status = (entry.data as { status?: unknown } | undefined)?.status;
    if (isRunStatus(status)) this.set(status);
  }

  /** Looks the run up if it is not finished and the last lookup is old enough. */
  refresh(now: number): Promise<void> {
    if (this.state === 'finished') return Promise.resolve();
    if (this.inFlight) return this.inFlight;
    if (now - this.lastLookupAt < this.intervalMs) return Promise.resolve();
    this.lastLookupAt = now;
    this.lookups += 1;
    this.inFlight = this.lookup()
      .then((run) => {
        if (run) this.set(run.status);
        else if (this.state === 'unknown') this.status = undefined;
      })
      .catch(() => {
        if (this.state === 'unknown') this.state = 'running';
      })
      .finally(() => {
        this.inFlight = undefined;
      });
    return this.inFlight;
  }

  private set(status: RunStatus): void {
    if (this.state === 'finished') {
      this.status = status;
      return;
    }
    this.status = status;
    this.state = isTerminal(status) ? 'finished' : 'running';
  }
}
