/**
 * Long work done in slices: it checks `due` as it goes and, once the slice has run its time,
 * gives the event loop a turn (`next()`), so that other requests, heartbeats and fan-out carry on
 * however much work there is. Synchronous work that only awaits promises never yields by
 * itself: a resolved promise resumes before any I/O or timer.
 */
export class TimeSlice {
  private start = performance.now();

  constructor(private readonly ms: number) {}

  get due(): boolean {
    return performance.now() - this.start >= this.ms;
  }

  /** A turn of the event loop, then a new slice. */
  async next(): Promise<void> {
    await new Promise((resolve) => setImmediate(resolve));
    this.start = performance.now();
  }
}

/** How long a slice of work runs before the event loop gets a turn. */
export const SLICE_MS = 8;
