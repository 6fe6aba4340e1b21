import { Redis } from 'ioredis';
import type { RedisOptions } from 'ioredis';
import { SettingsError } from '../model/settings.js';
import type { Bus, BusHealth, BusListener, BusSubscription } from './bus.js';

export interface RedisBusOptions {
  /**
   * Keeps deployments that share one Redis apart: channels are `tailwater:<namespace>:<name>`.
   * Letters, digits, `_`, `.` and `-`. (The URL's database number does not: Redis's pub/sub
   * ignores databases.)
   */
  namespace?: string;
  /** The longest wait between two reconnection attempts; they start at 50 ms and double. */
  maxReconnectDelayMs?: number;
  /** How long `open()`/`connect()` wait for both connections before failing. */
  connectTimeoutMs?: number;
  /** The longest a subscription's `ready` waits for Redis to confirm it. */
  subscribeTimeoutMs?: number;
  /** Notifications sent and not yet acknowledged by Redis past which new ones are dropped. */
  maxPendingNotifications?: number;
}

export interface RedisTarget {
  host: string;
  port: number;
  db: number;
  username?: string;
  password?: string;
  /** The URL without its credentials, for messages. */
  display: string;
}

const NAMESPACE = /^[A-Za-z0-9_.-]{1,64}$/;
const RESOLVED: Promise<void> = Promise.resolve();
const USAGE = 'expected redis://host:port[/db]';

/** Reads `redis://[user:password@]host[:port][/db]`; anything else is a SettingsError. */
export function parseRedisUrl(url: string): RedisTarget {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    // Whatever stands before an `@` may be a password: it is not repeated.
    throw new SettingsError(`bus: "${url.replace(/\/\/[^/]*@/, '//…@')}" is not a URL; ${USAGE}`);
  }
  const display = `redis://${parsed.host}${parsed.pathname}`;
  if (parsed.protocol !== 'redis:') {
    throw new SettingsError(`bus: "${display}" is not a Redis URL; ${USAGE}`);
  }
  if (parsed.hostname === '') throw new SettingsError(`bus: "${display}" names no host; ${USAGE}`);
  if (parsed.search !== '' || parsed.hash !== '') {
    throw new SettingsError(`bus: "${display}" has a query or fragment; ${USAGE}`);
  }
  const db = /^\/?$/.test(parsed.pathname) ? 0 : Number(/^\/(\d{1,5})$/.exec(parsed.pathname)?.[1]);
  if (!Number.isInteger(db)) {
    throw new SettingsError(`bus: "${display}": the path must be a database number; ${USAGE}`);
  }
  return {
    // URL keeps the brackets of an IPv6 address; a socket wants it bare.
    host: parsed.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: parsed.port === '' ? 6379 : Number(parsed.port),
    db,
    username: parsed.username === '' ? undefined : decodeURIComponent(parsed.username),
    password: parsed.password === '' ? undefined : decodeURIComponent(parsed.password),
    display,
  };
}

/**
 * The channel of a stream name. The namespace has no `:` or `#`, so the prefix ends where the
 * name begins and any name maps to its own channel; Redis channels are binary-safe, so NUL, `/`,
 * spaces and glob characters are plain bytes. A name that is not well-formed UTF-16 (a lone
 * surrogate, which validated names never hold) would not survive UTF-8: it is spelled in hex
 * under a prefix of its own.
 */
export function redisChannel(namespace: string, name: string): string {
  if (name.isWellFormed()) return `tailwater:${namespace}:${name}`;
  let hex = '';
  for (let i = 0; i < name.length; i += 1) hex += name.charCodeAt(i).toString(16).padStart(4, '0');
  return `tailwater:${namespace}#${hex}`;
}

interface Channel {
  readonly listeners: Set<BusListener>;
  /** Settles when Redis confirmed the latest SUBSCRIBE of this channel (or could not). */
  ready: Promise<void>;
}

/**
 * The bus of a fleet: every replica publishes its appends' seqs to Redis and hears the others'.
 *
 * One publisher and one subscriber connection per process. Each stream watched here is its own
 * SUBSCRIBE (not one PSUBSCRIBE on the prefix): Redis then sends a replica only the doorbells of
 * the streams it has viewers for, which is what routing viewers by stream relies on, where a
 * pattern would send every append of the fleet to every replica to be thrown away; and glob
 * characters in names mean nothing. The price is a round trip when a stream gets its first viewer
 * here, which `ready` covers. The message is the seq in decimal.
 *
 * Losing Redis costs latency, never data (tailers poll the store): while a connection is down,
 * health is `degraded`, `notify` drops (nothing is queued offline, and at most
 * maxPendingNotifications wait for Redis's reply), and both connections reconnect with a capped
 * backoff. Subscriptions are restored here rather than by ioredis: the subscriber keeps no
 * offline queue and resends nothing, and on every new connection SUBSCRIBEs the channels that
 * have listeners now — so what was unsubscribed during an outage is not brought back, and what
 * was subscribed during it takes effect.
 *
 * Nothing connects until `connect()` (or `open()`), so the module can be imported at any time.
 */
export class RedisBus implements Bus {
  /** Connects, waiting for both connections; an error naming the URL if Redis does not answer in time. */
  static async open(url: string, options: RedisBusOptions = {}): Promise<RedisBus> {
    const bus = new RedisBus(url, options);
    try {
      await bus.connect();
    } catch (error) {
      await bus.close();
      throw error;
    }
    return bus;
  }

  readonly url: string;
  readonly namespace: string;
  private readonly publisher: Redis;
  private readonly subscriber: Redis;
  private readonly connectTimeoutMs: number;
  private readonly subscribeTimeoutMs: number;
  private readonly maxPending: number;
  private readonly channels = new Map<string, Channel>();
  /** Releases the `ready` promises still waiting for Redis (the connection closed, or we did). */
  private readonly waiting = new Set<() => void>();
  /** Publishes sent on the current publisher connection and not yet answered. */
  private pending = 0;
  private publisherEpoch = 0;
  private subscriberEpoch = 0;
  /** A new subscriber connection's SUBSCRIBE of every channel is not confirmed yet. */
  private restoring = false;
  private dropped = 0;
  private lastError: string | undefined;
  private closing: Promise<void> | undefined;

  constructor(url: string, options: RedisBusOptions = {}) {
    const target = parseRedisUrl(url);
    const namespace = options.namespace ?? 'default';
    if (!NAMESPACE.test(namespace)) {
      throw new SettingsError(
        `bus: namespace "${namespace}" must be 1 to 64 letters, digits, "_", "." or "-".`,
      );
    }
    this.url = target.display;
    this.namespace = namespace;
    this.connectTimeoutMs = options.connectTimeoutMs ?? 5000;
    this.subscribeTimeoutMs = options.subscribeTimeoutMs ?? 2000;
    this.maxPending = options.maxPendingNotifications ?? 10_000;
    const maxDelay = options.maxReconnectDelayMs ?? 2000;
    const common: RedisOptions = {
      host: target.host,
      port: target.port,
      db: target.db,
      username: target.username,
      password: target.password,
      lazyConnect: true,
      // Commands are sent only while a connection is ready; nothing waits offline.
      enableOfflineQueue: false,
      // Commands in flight when a connection drops are not sent again on the next one.
      autoResendUnfulfilledCommands: false,
      disableClientInfo: true,
      connectTimeout: this.connectTimeoutMs,
      // A peer that does not close its side when we close ours is cut off after this.
      disconnectTimeout: 500,
      retryStrategy: (attempt) => Math.min(50 * 2 ** Math.min(attempt - 1, 16), maxDelay),
    };
    this.publisher = new Redis({ ...common, connectionName: 'tailwater-bus-publisher' });
    this.subscriber = new Redis({
      ...common,
      connectionName: 'tailwater-bus-subscriber',
      autoResubscribe: false,
    });
    for (const client of [this.publisher, this.subscriber]) {
      client.on('error', (error: Error) => {
        this.lastError = error.message;
      });
    }
    this.publisher.on('close', () => {
      // What was in flight on that connection will never be answered.
      this.publisherEpoch += 1;
      this.pending = 0;
    });
    this.subscriber.on('ready', () => this.restore());
    this.subscriber.on('close', () => {
      this.restoring = false;
      this.releaseWaiting();
    });
    this.subscriber.on('message', (channel: string, message: string) =>
      this.deliver(channel, message),
    );
  }

  /** Starts both connections and waits until both are ready, or fails after connectTimeoutMs. */
  async connect(): Promise<void> {
    if (this.closing) throw new Error(`bus: Redis ${this.url}: the bus is closed`);
    const clients = [this.publisher, this.subscriber];
    const detach: (() => void)[] = [];
    let timer: NodeJS.Timeout | undefined;
    try {
      await new Promise<void>((resolve, reject) => {
        const check = () => {
          if (clients.every((client) => client.status === 'ready')) resolve();
        };
        for (const client of clients) {
          client.on('ready', check);
          detach.push(() => client.off('ready', check));
          if (client.status === 'wait') client.connect().catch(() => undefined);
        }
        timer = setTimeout(() => {
          const why = this.lastError ? ` (${this.lastError})` : '';
          // A service out of reach, not a bad setting: the same URL may work in a minute.
          reject(
            new Error(
              `Cannot connect to Redis at ${this.url}: no answer within ${this.connectTimeoutMs} ms${why}.`,
            ),
          );
        }, this.connectTimeoutMs);
        check();
      });
    } finally {
      clearTimeout(timer);
      for (const off of detach) off();
    }
  }

  notify(name: string, seq: number): void {
    if (this.closing || this.publisher.status !== 'ready' || this.pending >= this.maxPending) {
      this.dropped += 1;
      return;
    }
    this.pending += 1;
    const epoch = this.publisherEpoch;
    const settle = () => {
      if (epoch === this.publisherEpoch) this.pending -= 1;
    };
    this.publisher.publish(redisChannel(this.namespace, name), String(seq)).then(settle, settle);
  }

  subscribe(name: string, listener: BusListener): BusSubscription {
    if (this.closing) return { ready: RESOLVED, unsubscribe: () => undefined };
    const key = redisChannel(this.namespace, name);
    let channel = this.channels.get(key);
    if (!channel) {
      channel = { listeners: new Set(), ready: RESOLVED };
      this.channels.set(key, channel);
      // Not ready: the next connection's restore() subscribes it.
      if (this.subscriber.status === 'ready') {
        channel.ready = this.confirmed(this.subscriber.subscribe(key));
      }
    }
    const own = channel;
    own.listeners.add(listener);
    let active = true;
    return {
      ready: own.ready,
      unsubscribe: () => {
        if (!active) return;
        active = false;
        own.listeners.delete(listener);
        if (own.listeners.size > 0 || this.channels.get(key) !== own) return;
        this.channels.delete(key);
        // Not ready: the next connection starts with no subscription at all.
        if (this.subscriber.status === 'ready' && !this.closing) {
          this.subscriber.unsubscribe(key).catch(() => undefined);
        }
      },
    };
  }

  health(): BusHealth {
    if (this.closing) return { state: 'down', detail: `Redis ${this.url}: the bus is closed` };
    const publisher = this.publisher.status;
    const subscriber = this.subscriber.status;
    if (publisher === 'ready' && subscriber === 'ready' && !this.restoring) return { state: 'up' };
    const restoring = this.restoring ? ' (restoring subscriptions)' : '';
    const why = this.lastError ? `; last error: ${this.lastError}` : '';
    return {
      state: 'degraded',
      detail: `Redis ${this.url}: publisher ${publisher}, subscriber ${subscriber}${restoring}${why}; tailers poll the store meanwhile`,
    };
  }

  /** Notifications dropped because Redis was not reachable or too far behind. */
  get droppedNotifications(): number {
    return this.dropped;
  }

  /** How many stream names have listeners on this bus. */
  get subscribedStreams(): number {
    return this.channels.size;
  }

  /** Quits both connections (or drops them, if not connected); stops every delivery at once. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.channels.clear();
      this.restoring = false;
      this.releaseWaiting();
      await Promise.all([quit(this.publisher), quit(this.subscriber)]);
    })();
    return this.closing;
  }

  /** A new subscriber connection: subscribe what has listeners now (it starts with nothing). */
  private restore(): void {
    this.subscriberEpoch += 1;
    const keys = [...this.channels.keys()];
    if (this.closing || keys.length === 0) return;
    const epoch = this.subscriberEpoch;
    this.restoring = true;
    const acknowledged = this.subscriber.subscribe(...keys);
    const ready = this.confirmed(acknowledged);
    for (const channel of this.channels.values()) channel.ready = ready;
    acknowledged.then(
      () => {
        if (epoch === this.subscriberEpoch) this.restoring = false;
      },
      () => undefined,
    );
  }

  /**
   * Resolves when Redis confirms a SUBSCRIBE, or when it cannot: the connection closed (ioredis
   * would never settle the command), the bus closed, or subscribeTimeoutMs passed.
   */
  private confirmed(acknowledged: Promise<unknown>): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.waiting.delete(done);
        resolve();
      };
      const timer = setTimeout(done, this.subscribeTimeoutMs);
      this.waiting.add(done);
      acknowledged.then(done, done);
    });
  }

  private releaseWaiting(): void {
    for (const done of [...this.waiting]) done();
  }

  private deliver(key: string, message: string): void {
    if (this.closing) return;
    const channel = this.channels.get(key);
    if (!channel) return;
    const seq = Number(message);
    // Another publisher's message on our channel is not a seq: ignore it.
    if (!Number.isSafeInteger(seq) || seq < 0 || String(seq) !== message) return;
    for (const listener of [...channel.listeners]) {
      try {
        listener(seq);
      } catch {
        // A doorbell listener that throws must not take the connection or the others down;
        // the Tailer's poll covers whatever it missed.
      }
    }
  }
}

/** QUIT when connected (Redis closes the connection), else just stop; resolves once ended. */
async function quit(client: Redis): Promise<void> {
  if (client.status === 'end') return;
  if (client.status === 'reconnecting' || client.status === 'close') {
    // No socket, only the timer of the next attempt: disconnect() clears it (and emits no `end`).
    client.disconnect();
    return;
  }
  const ended = new Promise<void>((resolve) => {
    client.once('end', () => resolve());
  });
  if (client.status === 'ready') {
    await client.quit().catch(() => client.disconnect());
  } else {
    client.disconnect();
  }
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    ended,
    new Promise<void>((resolve) => {
      // ioredis destroys the socket after disconnectTimeout; this only bounds the wait.
      timer = setTimeout(resolve, 3000);
    }),
  ]);
  clearTimeout(timer);
}
