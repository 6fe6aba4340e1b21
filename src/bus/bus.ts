/** Called with the newest seq known to the notifier; only a hint to read, never data. */
export type BusListener = (seq: number) => void;

/** One listener's subscription to one name. */
export interface BusSubscription {
  /**
   * Resolves once the subscription is in effect: a notification published after that is
   * delivered. It never rejects and never waits long: while the bus is not up it resolves at
   * once (nothing could be delivered anyway; the Tailer polls), and the subscription takes
   * effect when the bus is back.
   */
  readonly ready: Promise<void>;
  /** Stops delivery to this listener at once; calling it again does nothing. */
  unsubscribe(): void;
}

export interface BusHealth {
  /** `degraded`: notifications may be lost for now (tailers fall back to polling); `down`: closed. */
  state: 'up' | 'degraded' | 'down';
  detail?: string;
}

/**
 * The doorbell between writers and tailers. A notification says "stream `name` has entries up to
 * `seq`"; it may be late, coalesced or lost (the Redis bus during an outage), so a Tailer always
 * reads the store for the data and polls every pollSeconds as a fallback. Names are `streamId()`s.
 */
export interface Bus {
  /** Fire-and-forget: never throws, never waits, and drops the notification if it cannot go now. */
  notify(name: string, seq: number): void;
  subscribe(name: string, listener: BusListener): BusSubscription;
  health(): BusHealth;
  /** How many stream names have listeners on this bus (tests check that tailers unsubscribe). */
  readonly subscribedStreams: number;
  /** Stops every delivery and releases the bus's connections; calling it again does nothing. */
  close(): Promise<void>;
}
