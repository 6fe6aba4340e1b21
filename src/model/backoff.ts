export interface BackoffOptions {
  /** First delay in milliseconds (default 250). */
  initialMs?: number;
  /** Largest delay in milliseconds (default 10 s). */
  maxMs?: number;
}

/**
 * Capped exponential backoff with jitter: attempt n waits between half and all of
 * min(max, initial × 2ⁿ), at random, so many clients cut off at once do not return at once.
 */
export function backoffDelay(attempt: number, options: BackoffOptions = {}): number {
  const initial = options.initialMs ?? 250;
  const max = options.maxMs ?? 10_000;
  const ceiling = Math.min(max, initial * 2 ** Math.min(attempt, 30));
  return Math.round(ceiling / 2 + (Math.random() * ceiling) / 2);
}

/** Resolves after `ms`, or at once when `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}
