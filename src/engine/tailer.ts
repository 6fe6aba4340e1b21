import type { Bus } from '../bus/bus.js';
import { TailwaterError } from '../model/errors.js';
import type { Entry } from '../model/entry.js';
import { RAW_DATA } from '../model/entry.js';
import type { StreamKey } from '../model/stream-key.js';
import { streamId } from '../model/stream-key.js';
import type { Store } from '../store/store.js';
import { payloadBytes } from '../store/store.js';
import type { EngineSettings } from './engine-settings.js';
import type { EndInfo } from './frames.js';
import { ReplayBuffer } from './replay-buffer.js';
import { SLICE_MS, TimeSlice } from '../model/time-slice.js';
import { RunStateProbe } from './run-state.js';
import type { EngineStats } from './stats.js';
import type { Subscription, SubscriptionWatcher } from './subscription.js';

/** Consecutive failed reads after which the store is taken to be down for this stream. */
const PERSISTENT_FAILURES = 3;

export interface TailerHooks {
  /** The last viewer left and the idle grace passed, or the tailer failed: drop it. */
  onRetire(tailer: Tailer): void;
  /** A subscription closed (the Hub keeps the connection count). */
  onSubscriptionClosed(subscription: Subscription): void;
}

/**
 * The one reader of one stream on this server. On every wake-up (a bus notification, or the
 * poll timer as a fallback) it reads the entries after `top` from the store once and fans them
 * out to every live viewer; viewers that are behind page from the store on their own until they
 * catch up, then join the live set. It reads nothing while nobody watches.
 */
export class Tailer implements SubscriptionWatcher {
  readonly name: string;
  /** The newest seq read from the store and fanned out. */
  top = 0;
  /** Store reads made by the shared reader (not by catching-up viewers). */
  sharedReads = 0;
  readonly ready: Promise<void>;

  private readonly buffer: ReplayBuffer;
  private readonly runState: RunStateProbe | undefined;
  private readonly subscriptions = new Set<Subscription>();
  private readonly live = new Set<Subscription>();
  /** Viewers on their way in (the Hub reserved their slot); they keep the tailer alive. */
  private reservations = 0;
  private lastEntryAt: number;
  private reading: Promise<void> | undefined;
  private readAgain = false;
  private stale = false;
  private failures = 0;
  private retired = false;
  private pollTimer: NodeJS.Timeout | undefined;
  private idleTimer: NodeJS.Timeout | undefined;
  private readonly unsubscribeBus: () => void;

  constructor(
    readonly key: StreamKey,
    private readonly store: Store,
    bus: Bus,
    private readonly settings: EngineSettings,
    private readonly hooks: TailerHooks,
    private readonly stats: EngineStats,
    private readonly now: () => number = Date.now,
  ) {
    this.name = streamId(key);
    this.buffer = new ReplayBuffer(settings.replayBufferBytes);
    this.lastEntryAt = now();
    if (key.type === 'run') {
      this.runState = new RunStateProbe(
        () => store.getRun(key.pipeline, key.runId),
        settings.runStatePollSeconds * 1000,
      );
    }
    const subscription = bus.subscribe(this.name, (seq) => {
      if (seq > this.top) this.wake();
    });
    this.unsubscribeBus = () => subscription.unsubscribe();
    // The store is read only once the bus would ring for what comes after that read.
    this.ready = subscription.ready
      .then(() => this.start())
      .catch((error: unknown) => {
        this.retire();
        throw error;
      });
  }

  /** Viewers, counting those on their way in. */
  get viewerCount(): number {
    return this.subscriptions.size + this.reservations;
  }

  /** Adds this stream's viewers to a snapshot. */
  snapshotInto(snapshot: {
    connections: number;
    pagingViewers: number;
    pendingBytes: number;
    maxPendingBytes: number;
  }): void {
    for (const subscription of this.subscriptions) {
      const pending = subscription.transport.pendingBytes;
      snapshot.connections += 1;
      snapshot.pendingBytes += pending;
      snapshot.maxPendingBytes = Math.max(snapshot.maxPendingBytes, pending);
      if (subscription.mode === 'paging') snapshot.pagingViewers += 1;
    }
  }

  /** Holds a place for a viewer about to be added: the tailer will not retire meanwhile. */
  reserve(): void {
    this.reservations += 1;
    clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
  }

  cancelReservation(): void {
    this.reservations -= 1;
    this.retireWhenIdle();
  }

  get runStateLookups(): number {
    return this.runState?.lookups ?? 0;
  }

  private async start(): Promise<void> {
    const bounds = await this.store.bounds(this.key);
    this.top = bounds.lastSeq;
    if (bounds.lastSeq > 0) {
      const [last] = await this.store.readEntries(this.key, {
        afterSeq: bounds.lastSeq - 1,
        limit: 1,
      });
      if (last) {
        this.lastEntryAt = Date.parse(last.time);
        this.runState?.observe(last);
      }
    }
    await this.runState?.refresh(this.now());
    if (this.retired) return;
    this.pollTimer = setInterval(() => void this.tick(), this.settings.pollSeconds * 1000);
    this.pollTimer.unref();
  }

  /** Adds a viewer whose cursor is set; it catches up from the buffer or the store. */
  add(subscription: Subscription): void {
    this.reservations -= 1;
    if (subscription.transport.closed) {
      // The viewer left while its stream was being opened.
      subscription.close();
      this.hooks.onSubscriptionClosed(subscription);
      this.retireWhenIdle();
      return;
    }
    this.subscriptions.add(subscription);
    subscription.watch(this);
    if (this.stale) {
      this.stale = false;
      this.wake();
    }
    void this.catchUp(subscription);
  }

  /**
   * Brings `top` up to date with the store (after an idle spell nobody read, or up to
   * `storeLastSeq` when the store is known to hold more than the bus has rung for), so a new
   * viewer's start position and the end-of-stream rules see everything that was written.
   */
  async sync(storeLastSeq = 0): Promise<void> {
    if (this.stale || storeLastSeq > this.top) {
      this.stale = false;
      this.wake();
    }
    // The read in flight, then the one it chains to if the bus rang during it: that one starts
    // after this call, so it reads everything stored before it. Waiting until no read is in
    // flight at all would keep a viewer out for as long as appends land during every read,
    // which a busy stream with thousands of viewers does (docs/BENCHMARKS.md, fan-out at 10,000).
    for (let reads = 0; reads < 2 && this.reading; reads += 1) await this.reading;
  }

  /** A hint that the store has entries past `top`. Reads are coalesced: one at a time. */
  wake(): void {
    if (this.retired) return;
    if (this.viewerCount === 0) {
      // Nobody to read for; the next viewer triggers the read.
      this.stale = true;
      return;
    }
    if (this.reading) {
      this.readAgain = true;
      return;
    }
    // One turn of the event loop first, so that appends landing together (many producers,
    // or a burst of small requests) go out as one read and one write per viewer.
    this.reading = new Promise<void>((resolve) => setImmediate(resolve))
      .then(() => this.readNew())
      .finally(() => {
        this.reading = undefined;
        if (this.readAgain) {
          this.readAgain = false;
          this.wake();
        }
      });
  }

  /** Ends every viewer (server shutdown), then retires. */
  shutdown(): void {
    const now = this.now();
    for (const subscription of [...this.subscriptions]) {
      subscription.end(this.endInfo('shutdown', subscription), now);
    }
    this.retire();
  }

  /**
   * Reads what is new, page by page, and fans it out. Yields to the event loop between pages
   * and after maxBytesPerTick so sockets flush and other streams get their turn.
   */
  private async readNew(): Promise<void> {
    let tickBytes = 0;
    const slice = new TimeSlice(SLICE_MS);
    for (;;) {
      let entries: Entry[];
      const readAt = Date.now();
      const readStart = performance.now();
      try {
        entries = await this.store.readEntries(this.key, {
          afterSeq: this.top,
          limit: this.settings.readBatchEntries,
          maxBytes: this.settings.maxBytesPerTick,
        });
        this.sharedReads += 1;
        this.stats.sharedReads += 1;
        this.failures = 0;
      } catch (error) {
        this.onReadFailure(error);
        return;
      }
      if (entries.length === 0 || this.retired) return;
      tickBytes += this.accept(entries, readAt, performance.now() - readStart);
      // A page cut by neither the count nor the byte budget held everything there was: asking
      // again would read an empty page (what was appended since rang the bus, and reads again).
      if (
        entries.length < this.settings.readBatchEntries &&
        entries.reduce((sum, entry) => sum + payloadBytes(entry), 0) < this.settings.maxBytesPerTick
      ) {
        return;
      }
      if (tickBytes >= this.settings.maxBytesPerTick || slice.due) {
        tickBytes = 0;
        await slice.next();
      }
    }
  }

  /**
   * Takes new entries into `top`, the buffer and the run state, and fans them out; tells the
   * stats where the batch's time went (read at `readAt`, in `readMs`).
   */
  private accept(entries: readonly Entry[], readAt: number, readMs: number): number {
    const oldest = entries.find((entry) => entry.seq > this.top);
    let bytes = 0;
    for (const entry of entries) {
      if (entry.seq <= this.top) continue;
      // Retention removed entries nobody had read: the buffer must stay contiguous.
      if (entry.seq > this.top + 1) this.buffer.clear();
      const weight = entryWeight(entry);
      bytes += weight;
      this.buffer.push(entry, weight);
      this.runState?.observe(entry);
      this.top = entry.seq;
    }
    const last = entries[entries.length - 1];
    if (last) this.lastEntryAt = Math.max(this.lastEntryAt, Date.parse(last.time));
    const now = this.now();
    const writeStart = performance.now();
    for (const subscription of this.live) {
      subscription.deliver(entries, now);
      this.checkLimits(subscription, now);
    }
    if (oldest && this.live.size > 0) {
      this.stats.onLiveDelivery?.({
        queuedMs: Math.max(0, readAt - Date.parse(oldest.time)),
        readMs,
        writeMs: performance.now() - writeStart,
      });
    }
    return bytes;
  }

  /** After a write: the byte limit ends a viewer, the pending cap sends it back to paging. */
  private checkLimits(subscription: Subscription, now: number): void {
    if (subscription.closed) return;
    if (subscription.overByteLimit) {
      subscription.end(this.endInfo('maxBytes', subscription), now);
    } else if (subscription.overPendingCap && subscription.mode === 'live') {
      this.live.delete(subscription);
      subscription.mode = 'paging';
      this.stats.slowViewerDemotions += 1;
      void this.catchUp(subscription);
    }
  }

  /**
   * Brings a viewer from its cursor to `top`: from the replay buffer when it covers the cursor,
   * else page by page from the store, waiting for its socket to drain between pages so memory
   * stays bounded. Then it joins the live fan-out, with no gap and no duplicate: `deliver` skips
   * anything at or below the cursor, and everything here runs between awaits, atomically.
   */
  private async catchUp(subscription: Subscription): Promise<void> {
    let failures = 0;
    // A viewer whose filter matches little writes little, so its socket never pushes back:
    // without a turn now and then, catching up on a long stream would hold the event loop.
    const slice = new TimeSlice(SLICE_MS);
    while (!subscription.closed && !this.retired) {
      if (slice.due) {
        await slice.next();
        continue;
      }
      const now = this.now();
      if (subscription.overByteLimit) {
        subscription.end(this.endInfo('maxBytes', subscription), now);
        return;
      }
      if (subscription.overPendingCap) {
        await subscription.drained();
        continue;
      }
      if (subscription.cursor >= this.top) {
        this.goLive(subscription, now);
        return;
      }
      if (this.buffer.covers(subscription.cursor)) {
        subscription.deliver(this.buffer.after(subscription.cursor), now);
        continue;
      }
      let page: Entry[];
      try {
        const { kinds, logThroughSeq } = subscription.reads;
        if (kinds || (logThroughSeq !== undefined && subscription.cursor < logThroughSeq)) {
          await this.catchUpSparse(subscription, kinds, logThroughSeq);
          this.stats.catchUpReads += 1;
          failures = 0;
          continue;
        }
        page = await this.store.readEntries(this.key, {
          afterSeq: subscription.cursor,
          limit: this.settings.readBatchEntries,
          maxBytes: this.settings.maxBytesPerTick,
        });
        this.stats.catchUpReads += 1;
        failures = 0;
      } catch (error) {
        if (!storeUnavailable(error)) failures += 1;
        if (failures >= PERSISTENT_FAILURES) {
          subscription.fail('TW_STORE_UNAVAILABLE', describeFailure(error), this.now());
          return;
        }
        await delay(this.settings.pollSeconds * 1000);
        continue;
      }
      if (page.length === 0) {
        // The store has nothing past the cursor although `top` is ahead: retention removed it
        // all. Say so now (a quiet topic may not write again for a long time), then go live.
        subscription.gap(
          { reason: 'retention', fromSeq: subscription.cursor + 1, toSeq: this.top },
          this.now(),
        );
        subscription.cursor = this.top;
        this.goLive(subscription, this.now());
        return;
      }
      subscription.deliver(page, this.now());
    }
  }

  /**
   * One page for a viewer that leaves entries unread: one that keeps only some kinds reads only
   * those (by index), and one that has the log's text up to `logThroughSeq` reads, up to there,
   * every entry but log text (by index), so catching up costs what it finds, not the length of
   * the stream (or of its log). A page that is not full holds every such entry up to `top` (or
   * `logThroughSeq`); a full one, those up to its last entry. Retention is checked first, as the
   * entries read say nothing of what was deleted.
   */
  private async catchUpSparse(
    subscription: Subscription,
    kinds: readonly string[] | undefined,
    logThroughSeq: number | undefined,
  ): Promise<void> {
    const { firstSeq } = await this.store.bounds(this.key);
    if (subscription.cursor < firstSeq - 1) {
      subscription.gap(
        { reason: 'retention', fromSeq: subscription.cursor + 1, toSeq: firstSeq - 1 },
        this.now(),
      );
      subscription.cursor = firstSeq - 1;
    }
    // A viewer that names kinds reads by kind all the way; the log it skips is then a filter.
    const bound =
      kinds || logThroughSeq === undefined ? this.top : Math.min(logThroughSeq, this.top);
    const limit = this.settings.readBatchEntries;
    const read = await this.store.readEntries(this.key, {
      afterSeq: subscription.cursor,
      limit,
      maxBytes: this.settings.maxBytesPerTick,
      kinds,
      withoutLog: !kinds,
    });
    const bytes = read.reduce((sum, entry) => sum + payloadBytes(entry), 0);
    const full = read.length >= limit || bytes >= this.settings.maxBytesPerTick;
    // Past the bound come log entries this viewer must be sent: they are read in full next.
    const page = kinds ? read : read.filter((entry) => entry.seq <= bound);
    const last = page[page.length - 1]?.seq ?? 0;
    const through = full && page.length === read.length ? last : Math.max(bound, last);
    subscription.deliverSparse(page, through, this.now());
  }

  private goLive(subscription: Subscription, now: number): void {
    subscription.mode = 'live';
    this.live.add(subscription);
    const end = this.streamEnd(now, subscription);
    if (end) subscription.end(end, now);
  }

  /** The poll: read (the fallback for a silent bus), then heartbeats, lifetimes, and ends. */
  private async tick(): Promise<void> {
    if (this.subscriptions.size === 0 || this.retired) return;
    this.wake();
    await this.reading;
    await this.runState?.refresh(this.now());
    if (this.retired) return;
    const now = this.now();
    const heartbeatMs = this.settings.heartbeatSeconds * 1000;
    const maxDurationMs = this.settings.maxStreamSeconds * 1000;
    for (const subscription of [...this.subscriptions]) {
      const end = subscription.mode === 'live' ? this.streamEnd(now, subscription) : undefined;
      if (subscription.tokenExpired(now)) {
        // The client comes back with a fresh token and its cursor (docs/API.md, "Streaming").
        subscription.end(this.endInfo('tokenExpired', subscription), now);
      } else if (now - subscription.openedAt >= maxDurationMs) {
        subscription.end(this.endInfo('maxDuration', subscription), now);
      } else if (end) {
        subscription.end(end, now);
      } else if (now - subscription.lastWriteAt >= heartbeatMs && !subscription.overPendingCap) {
        subscription.heartbeat(now);
      }
    }
  }

  /**
   * Whether the whole stream is over, checked when nothing new came in: a run that went
   * terminal and quiet for finishGraceSeconds, a run with no row quiet for unknownRunGrace, or
   * a run silent for maxIdleSeconds without a terminal status. Topics never end. A finished
   * run's quiet counts from its last entry, so a viewer of an old run gets `end` as soon as it
   * has caught up; a run still going (or with no row yet) is given its full grace from when the
   * viewer came, so opening a stalled run does not end at once.
   */
  private streamEnd(now: number, subscription: Subscription): EndInfo | undefined {
    if (!this.runState || this.reading || this.readAgain || this.stale) return undefined;
    const { state } = this.runState;
    if (state === 'finished') {
      return now - this.lastEntryAt >= this.settings.finishGraceSeconds * 1000
        ? this.endInfo('runFinished', subscription)
        : undefined;
    }
    const quietMs = now - Math.max(this.lastEntryAt, subscription.openedAt);
    if (state === 'unknown' && quietMs >= this.settings.unknownRunGraceSeconds * 1000) {
      return this.endInfo('runFinished', subscription);
    }
    if (quietMs >= this.settings.maxIdleSeconds * 1000) {
      return this.endInfo('idleTimeout', subscription);
    }
    return undefined;
  }

  /** `lastSeq` is the viewer's own cursor: where it resumes from. */
  private endInfo(reason: EndInfo['reason'], subscription: Subscription): EndInfo {
    return { reason, status: this.runState?.status, lastSeq: subscription.cursor };
  }

  private onReadFailure(error: unknown): void {
    // The poll timer tries again; viewers stay, with their heartbeats, until the store is back.
    if (storeUnavailable(error)) return;
    this.failures += 1;
    if (this.failures < PERSISTENT_FAILURES) return;
    const now = this.now();
    for (const subscription of [...this.subscriptions]) {
      subscription.fail('TW_STORE_UNAVAILABLE', describeFailure(error), now);
    }
    this.retire();
  }

  subscriptionClosed(subscription: Subscription): void {
    this.remove(subscription);
  }

  private remove(subscription: Subscription): void {
    if (subscription.endReason) this.stats.countEnd(subscription.endReason);
    this.subscriptions.delete(subscription);
    this.live.delete(subscription);
    this.hooks.onSubscriptionClosed(subscription);
    this.retireWhenIdle();
  }

  /** With nobody watching, keep the tailer for tailerIdleGraceSeconds, then retire it. */
  private retireWhenIdle(): void {
    if (this.viewerCount > 0 || this.retired || this.idleTimer) return;
    this.idleTimer = setTimeout(() => {
      this.idleTimer = undefined;
      if (this.viewerCount === 0) this.retire();
    }, this.settings.tailerIdleGraceSeconds * 1000);
    this.idleTimer.unref();
  }

  private retire(): void {
    if (this.retired) return;
    this.retired = true;
    clearInterval(this.pollTimer);
    clearTimeout(this.idleTimer);
    this.unsubscribeBus();
    this.buffer.clear();
    this.hooks.onRetire(this);
  }
}

/** What an entry costs in the replay buffer, roughly its encoded size (its data as stored). */
function entryWeight(entry: Entry): number {
  if (entry.text !== undefined) return entry.text.length + 96;
  return (entry[RAW_DATA]?.length ?? 0) + 128;
}

/**
 * The store says it cannot answer for now (PostgreSQL restarting, out of reach): a condition that
 * passes by itself, so a stream waits it out open and catches up after (docs/DEPLOYMENT.md),
 * where any other failure that repeats ends the stream with an `error` frame.
 */
function storeUnavailable(error: unknown): boolean {
  return error instanceof TailwaterError && error.code === 'TW_STORE_UNAVAILABLE';
}

function describeFailure(error: unknown): string {
  return `The store could not be read: ${error instanceof Error ? error.message : String(error)}`;
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
