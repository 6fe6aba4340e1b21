import type { Entry } from '../model/entry.js';
import type { RunStatus } from '../model/run.js';
import type { EntryPredicate } from './filter.js';
import type { EndInfo, FrameEncoder, GapInfo } from './frames.js';
import type { TransportListener, ViewerTransport } from './viewer-transport.js';

const DRAIN_RECHECK_MS = 100;

/**
 * How a viewer is fed. `paging`: it is behind (just joined with an old cursor, or its socket
 * fell behind) and reads pages from the store as its socket drains. `live`: it is up to date and
 * receives the Tailer's fan-out. `closed`: done.
 */
export type SubscriptionMode = 'paging' | 'live' | 'closed';

export interface SubscriptionLimits {
  maxStreamBytes: number;
  maxPendingBytes: number;
  /** When the viewer's token stops being valid (ms since the epoch): the stream ends then. */
  expiresAt?: number | undefined;
}

/** Who is told when a subscription closes (its Tailer). */
export interface SubscriptionWatcher {
  subscriptionClosed(subscription: Subscription): void;
}

/** Shared by every viewer whose filter lets nothing be left unread (most of them). */
export const READ_EVERYTHING: CatchUpReads = Object.freeze({});

/** The part of a viewer's filter that lets catching up read less from the store. */
export interface CatchUpReads {
  /** The kinds its filter keeps, if it names some: catching up reads only those. */
  readonly kinds?: readonly string[] | undefined;
  /** Log entries up to this seq are filtered out: catching up to it reads the other entries. */
  readonly logThroughSeq?: number | undefined;
}

/**
 * One viewer of one stream: its cursor, filter, encoder and socket. It writes frames and keeps
 * the counts the limits need; the Tailer decides what it is sent and when. It holds no closure
 * of its own while idle: ten thousand of them are ten thousand of these objects and their
 * sockets (docs/BENCHMARKS.md, "Idle memory").
 */
export class Subscription implements TransportListener {
  mode: SubscriptionMode = 'paging';
  /** The seq of the last entry handed to the socket (as a frame or a cursor frame). */
  cursor: number;
  /** Bytes written to this viewer since it opened. */
  bytesSent = 0;
  /** Why the server ended this stream (undefined if the viewer left on its own). */
  endReason: EndInfo['reason'] | 'error' | undefined;
  readonly openedAt: number;
  lastWriteAt: number;
  private watcher: SubscriptionWatcher | undefined;
  /** Made when someone first waits for a drain. */
  private drainWaiters: Array<() => void> | undefined;

  constructor(
    readonly encoder: FrameEncoder,
    readonly transport: ViewerTransport,
    cursor: number,
    private readonly predicate: EntryPredicate | undefined,
    private readonly limits: SubscriptionLimits,
    now: number,
    /** Who opened it: its address and token (the Hub counts each one's streams). */
    readonly owner: { client?: string | undefined; token?: string | undefined } = {},
    /** What catching up may leave unread, from its filter (see CatchUpReads). */
    readonly reads: CatchUpReads = READ_EVERYTHING,
  ) {
    this.cursor = cursor;
    this.openedAt = now;
    this.lastWriteAt = now;
    transport.attach(this);
  }

  transportDrained(): void {
    this.wakeDrainWaiters();
  }

  transportClosed(): void {
    this.markClosed();
  }

  get closed(): boolean {
    return this.mode === 'closed';
  }

  /** Whether the viewer's token has expired by `now`. */
  tokenExpired(now: number): boolean {
    return this.limits.expiresAt !== undefined && now >= this.limits.expiresAt;
  }

  /** Past its pending-byte cap the viewer must stop taking live pushes. */
  get overPendingCap(): boolean {
    return this.transport.pendingBytes > this.limits.maxPendingBytes;
  }

  get overByteLimit(): boolean {
    return this.bytesSent >= this.limits.maxStreamBytes;
  }

  /**
   * Sends the entries after the cursor, in order, each exactly once. Entries the filter drops
   * advance the cursor; if the last of them is dropped, one cursor frame carries its seq so a
   * reconnect does not replay it. Entries come contiguous from the store, so a jump past the
   * cursor can only be retention having deleted them: it is said with a `gap` frame.
   */
  deliver(entries: readonly Entry[], now: number): void {
    if (this.deliverBatch(entries, now)) return;
    this.deliverEach(entries, now, false);
  }

  /**
   * Sends entries read by kind: they are the only entries of (cursor, through] that the filter
   * may keep, so the jumps between them are entries filtered out, not deleted ones. The cursor
   * ends at `through`, with a cursor frame for what was skipped after the last one sent.
   */
  deliverSparse(entries: readonly Entry[], through: number, now: number): void {
    this.deliverEach(entries, now, true);
    if (this.closed || this.overByteLimit || through <= this.cursor) return;
    this.cursor = through;
    this.send(this.encoder.cursor(through), now);
  }

  private deliverEach(entries: readonly Entry[], now: number, sparse: boolean): void {
    let skippedTo = 0;
    for (const entry of entries) {
      if (entry.seq <= this.cursor) continue;
      if (this.closed || this.overByteLimit) break;
      if (isTombstone(entry)) {
        this.buried(entry, now);
        break;
      }
      if (entry.seq > this.cursor + 1 && !sparse) {
        this.gap({ reason: 'retention', fromSeq: this.cursor + 1, toSeq: entry.seq - 1 }, now);
      }
      if (this.predicate && !this.predicate(entry)) {
        skippedTo = entry.seq;
        this.cursor = entry.seq;
        continue;
      }
      skippedTo = 0;
      let frame: Buffer | null;
      try {
        frame = this.encoder.entry(entry, this.mode !== 'live');
      } catch (error) {
        // A frame the dialect cannot encode must not take the stream's reader (and every other
        // viewer) down with it: this viewer is told, and the others carry on.
        this.fail(
          'TW_INTERNAL',
          `Entry ${entry.seq} could not be encoded: ${(error as Error).message}`,
          now,
        );
        return;
      }
      this.send(frame, now);
      this.cursor = entry.seq;
    }
    if (skippedTo > 0) this.send(this.encoder.cursor(skippedTo), now);
  }

  /**
   * The fast path of the fan-out: a whole batch as one write, when every entry is wanted (no
   * filter), it follows the cursor exactly, and it fits within the byte limit.
   */
  private deliverBatch(entries: readonly Entry[], now: number): boolean {
    const first = entries[0];
    const last = entries[entries.length - 1];
    if (!this.encoder.entries || this.predicate || this.closed || entries.length < 2) return false;
    if (!first || !last || first.seq !== this.cursor + 1) return false;
    let frame: Buffer | null;
    try {
      frame = this.encoder.entries(entries, this.mode !== 'live');
    } catch {
      return false; // the entry-by-entry path finds and reports the culprit
    }
    if (frame && this.bytesSent + frame.length > this.limits.maxStreamBytes) return false;
    this.send(frame, now);
    this.cursor = last.seq;
    return true;
  }

  /**
   * The run was deleted (store/rules.ts, tombstoneBody): what the viewer had not seen is gone,
   * the tombstone included, and the stream is over.
   */
  private buried(tombstone: Entry, now: number): void {
    this.gap({ reason: 'retention', fromSeq: this.cursor + 1, toSeq: tombstone.seq }, now);
    this.cursor = tombstone.seq;
    const status = (tombstone.data as { status?: RunStatus }).status;
    this.end({ reason: 'runDeleted', status, lastSeq: tombstone.seq }, now);
  }

  gap(gap: GapInfo, now: number): void {
    this.send(this.encoder.gap(gap), now);
  }

  heartbeat(now: number): void {
    this.send(this.encoder.heartbeat(), now);
  }

  /** `epoch`: the store epoch the stream's cursors are handed out under. */
  open(now: number, epoch: string): void {
    this.send(this.encoder.open(epoch), now);
  }

  /** Sends `end` and closes. */
  end(info: EndInfo, now: number): void {
    if (this.closed) return;
    this.endReason = info.reason;
    this.send(this.encoder.end(info), now);
    this.close();
  }

  /** Sends `error` and closes. */
  fail(code: string, message: string, now: number): void {
    if (this.closed) return;
    this.endReason = 'error';
    this.send(this.encoder.error(code, message), now);
    this.close();
  }

  close(): void {
    if (this.closed) return;
    this.transport.close();
    this.markClosed();
  }

  /** `watcher` is told once, when this subscription closes (one watcher: its Tailer). */
  watch(watcher: SubscriptionWatcher): void {
    this.watcher = watcher;
  }

  /**
   * Resolves when the socket drains or the viewer is gone; the caller re-checks its state. A
   * timer backs up the `drain` event, which a socket only emits after a refused write.
   */
  drained(): Promise<void> {
    if (this.closed || this.transport.pendingBytes === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, DRAIN_RECHECK_MS);
      (this.drainWaiters ??= []).push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  private wakeDrainWaiters(): void {
    const waiters = this.drainWaiters;
    if (!waiters) return;
    this.drainWaiters = undefined;
    for (const wake of waiters) wake();
  }

  private send(frame: Buffer | null, now: number): void {
    if (!frame || this.closed) return;
    this.transport.write(frame);
    this.bytesSent += frame.length;
    this.lastWriteAt = now;
  }

  private markClosed(): void {
    if (this.mode === 'closed') return;
    this.mode = 'closed';
    this.wakeDrainWaiters();
    const watcher = this.watcher;
    this.watcher = undefined;
    watcher?.subscriptionClosed(this);
  }
}

/** A deleted run's last entry: `status` with `deleted: true`. */
export function isTombstone(entry: Entry): boolean {
  return entry.kind === 'status' && (entry.data as { deleted?: unknown } | null)?.deleted === true;
}
