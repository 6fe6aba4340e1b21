/** Called with the newest seq known to the notifier; only a hint to read, never data. */
export type BusListener = (seq: number) => void;

/**
 * The doorbell between writers and tailers. A notification says "stream `name` has entries up to
 * `seq`"; it may be late, coalesced or lost (the Redis bus during an outage), so a Tailer always
 * reads the store for the data and polls every pollSeconds as a fallback. Names are `streamId()`s.
 */
export interface Bus {
  notify(name: string, seq: number): void;
  /** Returns the function that unsubscribes. */
  subscribe(name: string, listener: BusListener): () => void;
  close(): Promise<void>;
}
