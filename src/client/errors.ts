/** A refusal or failure the server reported, or a server that could not be reached. */
export class TailwaterClientError extends Error {
  override name = 'TailwaterClientError';

  constructor(
    message: string,
    /** The HTTP status, or 0 when the server could not be reached. */
    readonly status: number,
    /** Tailwater's error code (e.g. `TW_RUN_NOT_FOUND`), when the server gave one. */
    readonly code?: string,
    /** Seconds the server asked to wait (`Retry-After`), for 429/503. */
    readonly retryAfter?: number,
  ) {
    super(message);
  }

  /** Worth retrying: the server was unreachable, busy, or failed on its side. */
  get retryable(): boolean {
    return this.status === 0 || this.status === 429 || this.status >= 500;
  }
}
