/**
 * Leases: one holder at a time, among every server on one store, of a named task that must not
 * run twice at once (the STOMP subscription of a source, the retention pass). An optional
 * ability of a Store (docs/DEPLOYMENT.md, "One subscriber per fleet").
 */
export interface Lease {
  /** Resolves when the lease is lost without release() (the holder's connection died). */
  readonly lost: Promise<void>;
  release(): Promise<void>;
}

export interface LeaseStore {
  /**
   * Takes the lease `name` if nobody holds it, without waiting; undefined if someone does.
   * Rejects if the store cannot be asked (it is unavailable): try again later.
   */
  tryLease(name: string): Promise<Lease | undefined>;
}

/** Whether a store can hand out leases across servers. */
export function canLease(store: object): store is LeaseStore {
  return typeof (store as Partial<LeaseStore>).tryLease === 'function';
}

/**
 * The leases of a store only one process opens (SQLite): held in this process, so one holder
 * per store object. Never lost.
 */
export class LocalLeases implements LeaseStore {
  private readonly held = new Set<string>();

  async tryLease(name: string): Promise<Lease | undefined> {
    if (this.held.has(name)) return undefined;
    this.held.add(name);
    return {
      lost: new Promise<void>(() => {}),
      release: async () => {
        this.held.delete(name);
      },
    };
  }
}
