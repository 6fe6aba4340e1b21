/**
 * Failed authentications per client address, in fixed one-minute windows: past `max` in a
 * window, the address is answered 429 until the window ends, before any token is looked at, so
 * guessing tokens or hammering with expired ones costs the guesser, not the server
 * (docs/SECURITY.md, "Limits and timeouts"). Memory is bounded: at most MAX_CLIENTS addresses
 * are remembered, the oldest windows dropped first.
 */
export class AuthFailures {
  private readonly windows = new Map<string, { count: number; endsAt: number }>();

  constructor(
    private readonly max: number,
    private readonly windowMs = 60_000,
    private readonly now: () => number = Date.now,
  ) {}

  /** Seconds until `client` may try again, or 0 if it may now. */
  retryAfter(client: string): number {
    const window = this.windows.get(client);
    if (!window) return 0;
    const now = this.now();
    if (now >= window.endsAt) {
      this.windows.delete(client);
      return 0;
    }
    return window.count >= this.max ? Math.ceil((window.endsAt - now) / 1000) : 0;
  }

  record(client: string): void {
    const now = this.now();
    const window = this.windows.get(client);
    if (window && now < window.endsAt) {
      window.count += 1;
      return;
    }
    if (this.windows.size >= MAX_CLIENTS) this.prune(now);
    this.windows.set(client, { count: 1, endsAt: now + this.windowMs });
  }

  private prune(now: number): void {
    for (const [client, window] of this.windows) {
      if (now >= window.endsAt) this.windows.delete(client);
    }
    // Still full: the oldest windows (first inserted) go.
    for (const client of this.windows.keys()) {
      if (this.windows.size < MAX_CLIENTS) break;
      this.windows.delete(client);
    }
  }
}

const MAX_CLIENTS = 10_000;
