import { createHash } from 'node:crypto';
import pg from 'pg';
import type { Bus, BusHealth, BusListener, BusSubscription } from './bus.js';

export interface PostgresBusOptions {
  /** How long opening (and each reconnection) waits for the server; default 5000 ms. */
  connectTimeoutMs?: number;
  /** The longest wait between two reconnection attempts; default 5000 ms. */
  maxReconnectDelayMs?: number;
  /** Notifications sent and not yet acknowledged past which more are dropped; default 1000. */
  maxPendingNotifications?: number;
}

/** The `application_name` of the bus's connection, to tell it apart in `pg_stat_activity`. */
export const POSTGRES_BUS_APPLICATION = 'tailwater-bus';

/**
 * NOTIFY refuses a payload of 8000 bytes or more. The payload is JSON, so a name is at most 6
 * bytes per character (`\u0000`); a name too long for it is sent without its name, and every
 * listener on that channel takes it as a hint (a notification is only ever a hint to read).
 */
const MAX_PAYLOAD_BYTES = 7900;

/**
 * The LISTEN/NOTIFY channel of a stream name. A channel is an identifier (at most 63 bytes,
 * no NUL), and stream names are anything `text` holds, so the channel is a hash: `tw_` + the
 * SHA-1 of the name's UTF-16 code units (so a lone surrogate is hashed as itself, not as the
 * U+FFFD that UTF-8 would turn it into). Two names could share a channel; the name in each
 * payload keeps them apart.
 */
export function postgresChannel(name: string): string {
  return `tw_${createHash('sha1').update(name, 'utf16le').digest('hex')}`;
}

/** The payload of one notification: `[seq, name]`, or `[seq]` for a name too long to carry. */
export function postgresPayload(name: string, seq: number): string {
  const full = JSON.stringify([seq, name]);
  return Buffer.byteLength(full) < MAX_PAYLOAD_BYTES ? full : JSON.stringify([seq]);
}

/** Reads a payload back: undefined for anything this bus would not have sent. */
function parsePayload(payload: string | undefined): { seq: number; name?: string } | undefined {
  if (payload === undefined) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(payload);
  } catch {
    return undefined;
  }
  if (!Array.isArray(value) || value.length < 1 || value.length > 2) return undefined;
  const [seq, name] = value as unknown[];
  if (typeof seq !== 'number' || !Number.isSafeInteger(seq) || seq < 0) return undefined;
  if (value.length === 1) return { seq };
  if (typeof name !== 'string') return undefined;
  return { seq, name };
}

interface Channel {
  /** Stream names subscribed on this channel (more than one only on a hash collision). */
  names: number;
  /** Settles once the LISTEN sent for this channel was answered (or could not be). */
  listening: Promise<void>;
}

/**
 * The Bus on PostgreSQL's LISTEN/NOTIFY, for a deployment with no Redis: the replicas share the
 * store's database, and every notification reaches every session listening on its channel in
 * that database (docs/CONFIGURATION.md, `--bus postgres`).
 *
 * One dedicated connection (not from the store's pool: a pooled connection would lose its
 * LISTENs when handed back) both listens and notifies, so notifications of one name leave in
 * the order they were published. When it breaks, the bus is `degraded`, notify drops, and it
 * reconnects with capped exponential backoff and LISTENs again on every channel it had.
 */
export class PostgresBus implements Bus {
  /** Connects once, so that a bad URL or an unreachable server is an error at start. */
  static async open(url: string, options: PostgresBusOptions = {}): Promise<PostgresBus> {
    const bus = new PostgresBus(url, options);
    try {
      await bus.connect();
    } catch (error) {
      await bus.close();
      // A service out of reach, not a bad setting (exit 1, as the store's; docs/DEPLOYMENT.md).
      throw new Error(
        `Cannot connect to PostgreSQL (bus) at ${redactUrl(url)}: ${messageOf(error)}`,
        { cause: error },
      );
    }
    return bus;
  }

  private readonly connectTimeoutMs: number;
  private readonly maxReconnectDelayMs: number;
  private readonly maxPending: number;
  private readonly listeners = new Map<string, Set<BusListener>>();
  private readonly channels = new Map<string, Channel>();
  /** The connection, once it is up; undefined while connecting, down or closed. */
  private client: pg.Client | undefined;
  /**
   * The end of the last query sent on `client`: each waits for the one before (pg runs one at
   * a time anyway), which keeps notifications and LISTEN/UNLISTEN in the order they were asked.
   */
  private queue: Promise<unknown> = Promise.resolve();
  private closed = false;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private attempts = 0;
  private downReason = 'connecting';
  private pending = 0;
  private dropped = 0;

  private constructor(
    private readonly url: string,
    options: PostgresBusOptions,
  ) {
    this.connectTimeoutMs = options.connectTimeoutMs ?? 5000;
    this.maxReconnectDelayMs = options.maxReconnectDelayMs ?? 5000;
    this.maxPending = options.maxPendingNotifications ?? 1000;
  }

  /** Notifications dropped so far: while down, past maxPendingNotifications, or refused. */
  get droppedNotifications(): number {
    return this.dropped;
  }

  get subscribedStreams(): number {
    return this.listeners.size;
  }

  /** The channels this bus's session listens on, as the server reports them (for tests). */
  async listeningChannels(): Promise<string[]> {
    const client = this.client;
    if (!client) return [];
    const result = await this.send<{ channel: string }>(
      client,
      'SELECT pg_listening_channels() AS channel',
    );
    return result.rows.map((row) => row.channel).sort();
  }

  notify(name: string, seq: number): void {
    const client = this.client;
    if (!client || this.pending >= this.maxPending) {
      this.dropped += 1;
      return;
    }
    this.pending += 1;
    this.send(client, 'SELECT pg_notify($1, $2)', [
      postgresChannel(name),
      postgresPayload(name, seq),
    ])
      .catch(() => {
        this.dropped += 1;
      })
      .finally(() => {
        this.pending -= 1;
      });
  }

  subscribe(name: string, listener: BusListener): BusSubscription {
    if (this.closed) return { ready: Promise.resolve(), unsubscribe: () => undefined };
    // Each subscription is its own entry, so one listener subscribed twice is two of them.
    const entry: BusListener = (seq) => listener(seq);
    let set = this.listeners.get(name);
    let ready: Promise<void>;
    if (set) {
      ready = this.channels.get(postgresChannel(name))?.listening ?? Promise.resolve();
    } else {
      set = new Set();
      this.listeners.set(name, set);
      const channelName = postgresChannel(name);
      const channel = this.channels.get(channelName);
      if (channel) {
        channel.names += 1;
        ready = channel.listening;
      } else {
        ready = this.listen(channelName);
        this.channels.set(channelName, { names: 1, listening: ready });
      }
    }
    set.add(entry);
    let done = false;
    return {
      ready,
      unsubscribe: () => {
        if (done) return;
        done = true;
        this.remove(name, entry);
      },
    };
  }

  health(): BusHealth {
    if (this.closed) return { state: 'down', detail: 'closed' };
    if (!this.client) return { state: 'degraded', detail: `listener ${this.downReason}` };
    return { state: 'up' };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.reconnectTimer);
    this.listeners.clear();
    this.channels.clear();
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }

  private remove(name: string, entry: BusListener): void {
    const set = this.listeners.get(name);
    if (!set?.delete(entry) || set.size > 0) return;
    this.listeners.delete(name);
    const channelName = postgresChannel(name);
    const channel = this.channels.get(channelName);
    if (!channel) return;
    channel.names -= 1;
    if (channel.names > 0) return;
    this.channels.delete(channelName);
    // Queued behind any LISTEN of this channel on the same connection, and before any later
    // one: the session's channels end up as the map says.
    if (this.client) this.send(this.client, `UNLISTEN "${channelName}"`).catch(() => undefined);
  }

  /** Sends LISTEN now if connected; settles when answered, or at once while down. */
  private listen(channelName: string): Promise<void> {
    const client = this.client;
    if (!client) return Promise.resolve();
    return this.send(client, `LISTEN "${channelName}"`).then(
      () => undefined,
      () => undefined,
    );
  }

  /** Sends `sql` on `client` once every query sent before it has been answered. */
  private send<R extends pg.QueryResultRow = pg.QueryResultRow>(
    client: pg.Client,
    sql: string,
    params?: unknown[],
  ): Promise<pg.QueryResult<R>> {
    const result = this.queue.then(() => client.query<R>(sql, params));
    this.queue = result.catch(() => undefined);
    return result;
  }

  private deliver(message: pg.Notification): void {
    const parsed = parsePayload(message.payload);
    if (!parsed) return;
    const names =
      parsed.name === undefined
        ? [...this.listeners.keys()].filter((name) => postgresChannel(name) === message.channel)
        : postgresChannel(parsed.name) === message.channel
          ? [parsed.name]
          : [];
    for (const name of names) {
      const set = this.listeners.get(name);
      if (!set) continue;
      for (const listener of [...set]) {
        // A listener unsubscribed by an earlier one in this loop is not called.
        if (set.has(listener)) listener(parsed.seq);
      }
    }
  }

  /** Opens the connection and LISTENs on every channel; rejects if it could not. */
  private async connect(): Promise<void> {
    const client = new pg.Client({
      connectionString: this.url,
      connectionTimeoutMillis: this.connectTimeoutMs,
      application_name: POSTGRES_BUS_APPLICATION,
      keepAlive: true,
    });
    let lost = false;
    const onLost = (reason: string) => {
      if (lost) return;
      lost = true;
      client.end().catch(() => undefined);
      if (this.client === client) this.client = undefined;
      this.downReason = `reconnecting (${reason})`;
      this.scheduleReconnect();
    };
    // Before connect: a connection that breaks later emits these (without a listener for
    // `error`, it would end the process).
    client.on('error', (error) => onLost(messageOf(error)));
    client.on('notification', (message) => this.deliver(message));
    try {
      await client.connect();
    } catch (error) {
      lost = true;
      await client.end().catch(() => undefined);
      throw error;
    }
    client.on('end', () => onLost('connection ended'));
    if (this.closed) {
      lost = true;
      await client.end().catch(() => undefined);
      return;
    }
    const initial = [...this.channels.keys()];
    try {
      for (const channelName of initial) await client.query(`LISTEN "${channelName}"`);
    } catch (error) {
      onLost(messageOf(error));
      throw error;
    }
    if (lost) return;
    if (this.closed) {
      lost = true;
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
    this.queue = Promise.resolve();
    this.attempts = 0;
    // Subscriptions made while connecting were answered at once (the bus was down): the
    // session now follows the channels as they are, adding those subscribed meanwhile and
    // dropping those left meanwhile.
    const listened = new Set(initial);
    for (const [channelName, channel] of this.channels) {
      if (!listened.has(channelName)) channel.listening = this.listen(channelName);
    }
    for (const channelName of initial) {
      if (!this.channels.has(channelName)) {
        this.send(client, `UNLISTEN "${channelName}"`).catch(() => undefined);
      }
    }
  }

  private scheduleReconnect(): void {
    if (this.closed || this.reconnectTimer) return;
    const delay = Math.min(this.maxReconnectDelayMs, 100 * 2 ** Math.min(this.attempts, 16));
    this.attempts += 1;
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      this.connect().catch((error: unknown) => {
        this.downReason = `reconnecting (${messageOf(error)})`;
        this.scheduleReconnect();
      });
    }, delay);
    this.reconnectTimer.unref();
  }
}

function messageOf(error: unknown): string {
  if (error instanceof AggregateError && error.errors.length > 0) {
    return error.errors.map(messageOf).join('; ');
  }
  return error instanceof Error ? error.message || String(error) : String(error);
}

/** The URL without its password, for messages. */
function redactUrl(url: string): string {
  return url.replace(/\/\/([^:/@]*):[^@/]*@/, '//$1:***@');
}
