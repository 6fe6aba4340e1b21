import type { Bus } from '../bus/bus.js';
import { TailwaterError } from '../model/errors.js';
import { SERVER_ID_PREFIX } from '../model/names.js';
import type { StreamKey } from '../model/stream-key.js';
import { streamId } from '../model/stream-key.js';
import type { Store } from '../store/store.js';
import type { EngineSettings } from './engine-settings.js';
import type { EntryFilter } from './filter.js';
import { compileFilter } from './filter.js';
import type { FrameEncoder, GapInfo } from './frames.js';
import { PerKeyCount } from './per-key-count.js';
import { EngineStats } from './stats.js';
import type { ViewerSnapshot } from './stats.js';
import { READ_EVERYTHING, Subscription } from './subscription.js';
import type { CatchUpReads } from './subscription.js';
import { Tailer } from './tailer.js';
import type { ViewerTransport } from './viewer-transport.js';

/** Where a new viewer starts. */
export type StartPosition =
  /** After `seq`; with the store epoch the cursor was handed out under, when it says. */
  | { type: 'after'; seq: number; epoch?: string | undefined }
  | { type: 'latest' }
  | { type: 'tail'; count: number }
  /**
   * A cursor from elsewhere that this server cannot place: `gap reset`, then the stream from
   * its start, or its last `tail` entries.
   */
  | { type: 'unplaceable'; tail?: number }
  /**
   * Just after the entry a producer id names (or `seq:<seq>`, the id of an entry stored without
   * one); an id this stream does not hold is `unplaceable` with `tail`.
   */
  | { type: 'afterProducerId'; id: string; tail: number }
  /**
   * Just after the log chunk that ends at byte `offset` of a run's log (0: the start), for a
   * dialect whose cursor is a place in the log text; any other offset is `unplaceable`.
   */
  | { type: 'afterLogOffset'; offset: number };

export interface SubscribeRequest {
  key: StreamKey;
  start: StartPosition;
  filter?: EntryFilter | undefined;
  encoder: FrameEncoder;
  /** Who asks (a remote address): each client holds at most maxStreamsPerClient streams. */
  client?: string | undefined;
  /** The token it asks with, by a name of it: each holds at most maxStreamsPerToken streams. */
  token?: string | undefined;
  /** When the viewer's token expires (ms since the epoch): `end tokenExpired` then. */
  expiresAt?: number | undefined;
}

const RETRY_AFTER = { 'Retry-After': '5' };

/**
 * Every stream watched on this server: one Tailer per stream key, created by the first viewer
 * and retired after the last one leaves. It enforces the server's limits, refusing (503, never
 * queueing) before a stream opens.
 */
export class Hub {
  private readonly tailers = new Map<string, Tailer>();
  private connections = 0;
  private readonly perClient: PerKeyCount;
  private readonly perToken: PerKeyCount;
  private closing = false;
  readonly stats = new EngineStats();

  constructor(
    private readonly store: Store,
    private readonly bus: Bus,
    private readonly settings: EngineSettings,
    private readonly now: () => number = Date.now,
  ) {
    this.perClient = new PerKeyCount(settings.maxStreamsPerClient);
    this.perToken = new PerKeyCount(settings.maxStreamsPerToken);
  }

  get activeConnections(): number {
    return this.connections;
  }

  get activeStreams(): number {
    let count = 0;
    for (const tailer of this.tailers.values()) if (tailer.viewerCount > 0) count += 1;
    return count;
  }

  /** What every viewer holds right now (for /metrics). */
  snapshot(): ViewerSnapshot {
    const snapshot = {
      connections: 0,
      activeStreams: this.activeStreams,
      pagingViewers: 0,
      pendingBytes: 0,
      maxPendingBytes: 0,
    };
    for (const tailer of this.tailers.values()) tailer.snapshotInto(snapshot);
    return snapshot;
  }

  /** The tailer of a stream, if one is running (tests and metrics look at it). */
  tailer(key: StreamKey): Tailer | undefined {
    return this.tailers.get(streamId(key));
  }

  /**
   * Opens a viewer. Limits are checked and the slot reserved before anything awaits, so a burst
   * of requests cannot overshoot them. `openTransport` is called only once the stream will
   * open: until then an error is still a plain HTTP error.
   */
  async subscribe(
    request: SubscribeRequest,
    openTransport: () => ViewerTransport,
  ): Promise<Subscription> {
    if (this.closing) {
      throw new TailwaterError('TW_SHUTTING_DOWN', 'The server is shutting down.', RETRY_AFTER);
    }
    if (this.connections >= this.settings.maxActiveConnections) {
      throw new TailwaterError(
        'TW_TOO_MANY_CONNECTIONS',
        `The server is already serving the maximum number of stream connections (${this.settings.maxActiveConnections}). Retry shortly.`,
        RETRY_AFTER,
      );
    }
    const name = streamId(request.key);
    const existing = this.tailers.get(name);
    // A stream whose reader idles with no viewer becomes active again: it counts against the cap.
    if (!existing || existing.viewerCount === 0) {
      if (this.activeStreams >= this.settings.maxActiveStreams) {
        throw new TailwaterError(
          'TW_TOO_MANY_STREAMS',
          `The server is already streaming the maximum number of streams (${this.settings.maxActiveStreams}). Retry shortly.`,
          RETRY_AFTER,
        );
      }
    } else if (existing.viewerCount >= this.settings.maxSubscribersPerStream) {
      throw new TailwaterError(
        'TW_TOO_MANY_SUBSCRIBERS',
        `This stream has reached its subscriber cap (${this.settings.maxSubscribersPerStream}); retry shortly or close an existing subscriber.`,
        RETRY_AFTER,
      );
    }
    // The server's own limits come first; then one client, or one token, may not take all.
    const { client, token } = request;
    if (this.perClient.full(client)) {
      throw new TailwaterError(
        'TW_TOO_MANY_CLIENT_STREAMS',
        `This client already holds ${this.perClient.max} open streams, as many as one client may; close one, or retry shortly.`,
        RETRY_AFTER,
      );
    }
    if (this.perToken.full(token)) {
      throw new TailwaterError(
        'TW_TOO_MANY_CLIENT_STREAMS',
        `This token already holds ${this.perToken.max} open streams, as many as one token may; close one, or retry shortly.`,
        RETRY_AFTER,
      );
    }
    const tailer = existing ?? this.createTailer(request.key);
    this.connections += 1;
    this.perClient.add(client);
    this.perToken.add(token);
    tailer.reserve();
    let opened = false;
    try {
      await tailer.ready;
      await tailer.sync();
      const { cursor, gap, epoch, storeLastSeq } = await this.resolveStart(
        tailer,
        request.start,
        request.filter?.kinds,
      );
      // A bus across servers may ring after this viewer came for entries the store already
      // holds: read them now, or a finished run would be ended for it without them.
      if (storeLastSeq > tailer.top) await tailer.sync(storeLastSeq);
      if (this.closing) {
        throw new TailwaterError('TW_SHUTTING_DOWN', 'The server is shutting down.', RETRY_AFTER);
      }
      const transport = openTransport();
      const now = this.now();
      const subscription = new Subscription(
        request.encoder,
        transport,
        cursor,
        compileFilter(request.filter ?? {}),
        {
          maxStreamBytes: this.settings.maxStreamBytes,
          maxPendingBytes: this.settings.maxPendingBytesPerViewer,
          expiresAt: request.expiresAt,
        },
        now,
        { client, token },
        catchUpReads(request.filter),
      );
      opened = true;
      subscription.open(now, epoch);
      if (gap) subscription.gap(gap, now);
      tailer.add(subscription);
      return subscription;
    } finally {
      if (!opened) {
        this.connections -= 1;
        this.perClient.release(client);
        this.perToken.release(token);
        tailer.cancelReservation();
      }
    }
  }

  /** Ends every viewer with `end {"reason":"shutdown"}` and refuses new ones. */
  shutdown(): void {
    this.closing = true;
    for (const tailer of [...this.tailers.values()]) tailer.shutdown();
  }

  private createTailer(key: StreamKey): Tailer {
    const tailer = new Tailer(
      key,
      this.store,
      this.bus,
      this.settings,
      {
        onRetire: (retired) => {
          if (this.tailers.get(retired.name) === retired) this.tailers.delete(retired.name);
        },
        onSubscriptionClosed: (subscription) => {
          this.connections -= 1;
          this.perClient.release(subscription.owner.client);
          this.perToken.release(subscription.owner.token);
        },
      },
      this.stats,
      this.now,
    );
    this.tailers.set(tailer.name, tailer);
    // A failed start retires the tailer; the subscriber awaiting `ready` reports the error.
    tailer.ready.catch(() => undefined);
    return tailer;
  }

  /**
   * Turns a start position into a cursor. A cursor past the stream's last seq, or from another
   * store epoch, means the store was wiped or restored or the viewer came from elsewhere: `gap
   * reset`, and the stream follows from its start. A cursor into entries retention removed:
   * `gap retention` and what remains.
   */
  private async resolveStart(
    tailer: Tailer,
    start: StartPosition,
    kinds: readonly string[] | undefined,
  ): Promise<{ cursor: number; epoch: string; gap?: GapInfo; storeLastSeq: number }> {
    // Where a cursor this dialect cannot place leads: the latest few entries, or the start.
    let fallbackTail: number | undefined;
    if (start.type === 'afterProducerId') {
      fallbackTail = start.tail;
      const seq = await this.seqOfProducerId(tailer.key, start.id);
      start =
        seq === undefined ? { type: 'unplaceable', tail: start.tail } : { type: 'after', seq };
    } else if (start.type === 'afterLogOffset') {
      const seq = await this.seqEndingAtLogOffset(tailer.key, start.offset);
      start = seq === undefined ? { type: 'unplaceable' } : { type: 'after', seq };
    }
    const bounds = await this.store.bounds(tailer.key);
    const { epoch } = bounds;
    const storeLastSeq = bounds.lastSeq;
    const last = Math.max(bounds.lastSeq, tailer.top);
    // Whatever was stored before this viewer came, known to the reader yet or not: a bus that
    // rings across machines may not have told it of the newest entries.
    if (start.type === 'latest') return { cursor: last, epoch, storeLastSeq };
    // The last N entries the viewer will see: counted among the kinds it asked for.
    const tail = async (count: number) => {
      if (count === 0) return last;
      const nth = await this.store.nthLatestSeq(tailer.key, count, kinds);
      return nth === undefined ? bounds.firstSeq - 1 : nth - 1;
    };
    const reset = { reason: 'reset' } as const;
    if (start.type === 'tail') return { cursor: await tail(start.count), epoch, storeLastSeq };
    if (start.type === 'unplaceable' && start.tail !== undefined) {
      return { cursor: await tail(start.tail), epoch, storeLastSeq, gap: reset };
    }
    if (start.type === 'after' && start.seq > last && fallbackTail !== undefined) {
      return { cursor: await tail(fallbackTail), epoch, storeLastSeq, gap: reset };
    }
    // A cursor handed out under another epoch numbers entries of a database that is gone (replaced
    // or restored from a backup): its seq may name a different entry here.
    const otherEpoch = start.type === 'after' && start.epoch !== undefined && start.epoch !== epoch;
    if (start.type === 'unplaceable' || otherEpoch || start.seq > last) {
      return { cursor: bounds.firstSeq - 1, epoch, storeLastSeq, gap: reset };
    }
    if (start.seq < bounds.firstSeq - 1) {
      return {
        cursor: bounds.firstSeq - 1,
        epoch,
        storeLastSeq,
        gap: { reason: 'retention', fromSeq: start.seq + 1, toSeq: bounds.firstSeq - 1 },
      };
    }
    return { cursor: start.seq, epoch, storeLastSeq };
  }

  private async seqEndingAtLogOffset(key: StreamKey, offset: number): Promise<number | undefined> {
    if (offset === 0) return 0;
    const chunk = await this.store.logChunkAt(key, offset - 1);
    return chunk && chunk.offset + chunk.size === offset ? chunk.seq : undefined;
  }

  /**
   * A `seq:` id is a position whatever became of its entry (resolveStart says `gap` if retention
   * removed what follows it, or if it is past the end); a producer id is looked up.
   */
  private async seqOfProducerId(key: StreamKey, id: string): Promise<number | undefined> {
    const digits = id.slice(SERVER_ID_PREFIX.length);
    if (id.startsWith(SERVER_ID_PREFIX) && /^\d{1,15}$/.test(digits)) return Number(digits);
    return this.store.seqOfProducerId(key, id);
  }
}

/** What a viewer's catching up may leave unread, from its filter; the shared empty one if nothing. */
function catchUpReads(filter: EntryFilter | undefined): CatchUpReads {
  const kinds = filter?.kinds && filter.kinds.length > 0 ? filter.kinds : undefined;
  const logThroughSeq = filter?.logThroughSeq;
  return kinds || logThroughSeq !== undefined ? { kinds, logThroughSeq } : READ_EVERYTHING;
}
