import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { RedisBusOptions } from '../../src/bus/redis.js';
import { RedisBus, redisChannel } from '../../src/bus/redis.js';
import { SettingsError } from '../../src/model/settings.js';
import { freePort } from '../helpers/net.js';
import { PrivateRedis, SHARED_REDIS_URL } from '../helpers/redis-server.js';
import { describeBusContract, eventually, recorder } from '../unit/bus.contract.js';

const namespace = () => `test-${randomBytes(6).toString('hex')}`;

/** The channels of `ns` that have a subscriber on the Redis behind `admin`. */
async function channelsOf(admin: Redis, ns: string): Promise<string[]> {
  const [plain, escaped] = await Promise.all([
    admin.pubsub('CHANNELS', `tailwater:${ns}:*`),
    admin.pubsub('CHANNELS', `tailwater:${ns}#*`),
  ]);
  return [...(plain as string[]), ...(escaped as string[])].sort();
}

/** Buses opened in a test and closed after it, with one plain connection for looking at Redis. */
function busesOn(url: () => string, options: RedisBusOptions = {}) {
  const buses: RedisBus[] = [];
  let admin: Redis | undefined;
  return {
    async open(extra: RedisBusOptions = {}): Promise<RedisBus> {
      const bus = await RedisBus.open(url(), { ...options, ...extra });
      buses.push(bus);
      return bus;
    },
    admin(): Redis {
      admin ??= new Redis(url(), { lazyConnect: false, maxRetriesPerRequest: 1 });
      return admin;
    },
    async closeAll(): Promise<void> {
      await Promise.all(buses.splice(0).map((bus) => bus.close()));
      await admin?.quit().catch(() => undefined);
      admin = undefined;
    },
  };
}

describeBusContract('RedisBus', async () => {
  const ns = namespace();
  const on = busesOn(() => SHARED_REDIS_URL, { namespace: ns });
  return {
    open: () => on.open(),
    subscriptions: async () => (await channelsOf(on.admin(), ns)).length,
    // Loopback delivers in well under a millisecond; this is ample for a negative assertion.
    settle: () => new Promise((resolve) => setTimeout(resolve, 200)),
    cleanup: () => on.closeAll(),
  };
});

describe('RedisBus on the shared Redis', () => {
  const ns = namespace();
  const on = busesOn(() => SHARED_REDIS_URL, { namespace: ns });
  afterEach(() => on.closeAll());

  it('publishes the seq in decimal on tailwater:<namespace>:<stream name>', async () => {
    const bus = await on.open();
    const name = 'run\u0000pipe\u0000r-1';
    const listener = on.admin().duplicate();
    try {
      const messages: [string, string][] = [];
      listener.on('message', (channel: string, message: string) =>
        messages.push([channel, message]),
      );
      await listener.subscribe(`tailwater:${ns}:${name}`);
      bus.notify(name, 17);
      await eventually(() => messages.length, 1);
      expect(messages).toEqual([[`tailwater:${ns}:${name}`, '17']]);
    } finally {
      await listener.quit();
    }
  });

  it('a message on a stream channel that is not a seq is ignored', async () => {
    const bus = await on.open();
    const got = recorder();
    await bus.subscribe('s', got.listener).ready;
    const channel = redisChannel(ns, 's');
    for (const junk of ['hello', '-1', '1.5', '', '07', '1e3', '9007199254740993']) {
      await on.admin().publish(channel, junk);
    }
    await on.admin().publish(channel, '8');
    await got.received(8);
    expect(got.seqs).toEqual([8]);
  });

  it('a name that is not well-formed UTF-16 gets a channel of its own, apart from its look-alikes', async () => {
    const bus = await on.open();
    const lone = recorder();
    const replaced = recorder();
    await bus.subscribe('a\ud800', lone.listener).ready;
    await bus.subscribe('a\ufffd', replaced.listener).ready;
    bus.notify('a\ud800', 1);
    bus.notify('a\ufffd', 2);
    await Promise.all([lone.received(1), replaced.received(2)]);
    expect([lone.seqs, replaced.seqs]).toEqual([[1], [2]]);
    expect(await channelsOf(on.admin(), ns)).toEqual(
      [`tailwater:${ns}#0061d800`, `tailwater:${ns}:a\ufffd`].sort(),
    );
  });

  it('buses in different namespaces do not hear each other', async () => {
    const mine = await on.open();
    const theirs = await on.open({ namespace: namespace() });
    const got = recorder();
    await mine.subscribe('s', got.listener).ready;
    theirs.notify('s', 1);
    mine.notify('s', 2);
    await got.received(2);
    expect(got.seqs).toEqual([2]);
  });

  it('a bus closed while a subscription is being confirmed resolves its ready', async () => {
    const bus = await on.open();
    const subscription = bus.subscribe('s', () => undefined);
    await bus.close();
    await subscription.ready;
    expect(bus.health().state).toBe('down');
  });
});

describe('RedisBus when Redis is unreachable or goes away', () => {
  let redis: PrivateRedis;
  const on = busesOn(() => redis.url, { maxReconnectDelayMs: 200 });

  beforeAll(async () => {
    redis = await PrivateRedis.start();
  });
  afterEach(async () => {
    await on.closeAll();
    // A test that stopped its Redis leaves it started for the next.
    await redis.start().catch(() => undefined);
  });
  afterAll(async () => {
    await redis.dispose();
  });

  it('opening a Redis nobody listens on fails within connectTimeoutMs, naming the URL', async () => {
    const port = await freePort();
    const started = Date.now();
    const opening = RedisBus.open(`redis://127.0.0.1:${port}`, { connectTimeoutMs: 500 });
    // Out of reach is not a bad setting (serve exits 1 for it, 2 for a bad setting).
    await expect(opening).rejects.not.toThrow(SettingsError);
    await expect(opening).rejects.toThrow(
      new RegExp(`Cannot connect to Redis at redis://127\\.0\\.0\\.1:${port}.*ECONNREFUSED`),
    );
    expect(Date.now() - started).toBeLessThan(3000);
  });

  it('Redis stopped: health degrades within seconds, notify neither throws nor queues, and subscribing does not wait', async () => {
    const subscriber = await on.open();
    const publisher = await on.open();
    const before = recorder();
    await subscriber.subscribe('before', before.listener).ready;
    publisher.notify('before', 1);
    await before.received(1);

    await redis.stop();
    await eventually(() => subscriber.health().state, 'degraded');
    await eventually(() => publisher.health().state, 'degraded');
    expect(publisher.health().detail).toMatch(/publisher (reconnecting|connecting|connect|close)/);

    const dropped = publisher.droppedNotifications;
    expect(() => {
      for (let seq = 1000; seq < 2000; seq += 1) publisher.notify('before', seq);
    }).not.toThrow();
    expect(publisher.droppedNotifications - dropped).toBe(1000);

    // Ready while Redis is still down: it did not wait for a connection.
    await subscriber.subscribe('during', () => undefined).ready;
    expect(subscriber.health().state).toBe('degraded');
  });

  it('Redis back: health is up again, the subscriptions from before the outage deliver again, and those made or dropped meanwhile are as asked', async () => {
    const subscriber = await on.open();
    const publisher = await on.open();
    const before = recorder();
    const during = recorder();
    await subscriber.subscribe('before', before.listener).ready;
    const gone = subscriber.subscribe('gone', () => undefined);
    await gone.ready;
    publisher.notify('before', 1);
    await before.received(1);

    await redis.stop();
    await eventually(() => subscriber.health().state, 'degraded');
    for (let seq = 1000; seq < 1100; seq += 1) publisher.notify('before', seq);
    await subscriber.subscribe('during', during.listener).ready;
    gone.unsubscribe();

    await redis.start();
    await eventually(() => subscriber.health().state, 'up', 10_000);
    await eventually(() => publisher.health().state, 'up', 10_000);
    publisher.notify('before', 2);
    publisher.notify('during', 3);
    await Promise.all([before.received(2), during.received(3)]);
    // Nothing published during the outage was kept to be sent later.
    expect(before.seqs).toEqual([1, 2]);
    expect(during.seqs).toEqual([3]);
    expect(await channelsOf(on.admin(), subscriber.namespace)).toEqual([
      redisChannel(subscriber.namespace, 'before'),
      redisChannel(subscriber.namespace, 'during'),
    ]);
  });

  it("the subscriber's connection killed: the new connection has the same subscriptions", async () => {
    const subscriber = await on.open();
    const got = recorder();
    await subscriber.subscribe('kept', got.listener).ready;
    const idsBefore = await pubsubClientIds(on.admin());
    expect(idsBefore).toHaveLength(1);
    await on.admin().client('KILL', 'TYPE', 'pubsub');
    await eventually(async () => {
      const ids = await pubsubClientIds(on.admin());
      return ids.length === 1 && ids[0] !== idsBefore[0];
    }, true);
    await eventually(() => subscriber.health().state, 'up');
    const publisher = await on.open();
    publisher.notify('kept', 5);
    await got.received(5);
    expect(got.seqs).toEqual([5]);
  });

  it('close() quits both connections', async () => {
    const bus = await on.open();
    await bus.subscribe('s', () => undefined).ready;
    expect(await busClientNames(on.admin())).toEqual([
      'tailwater-bus-publisher',
      'tailwater-bus-subscriber',
    ]);
    await bus.close();
    await eventually(async () => (await busClientNames(on.admin())).length, 0);
    expect(bus.health().state).toBe('down');
  });
});

/** The ids of the connections in pub/sub mode (with a subscription). */
async function pubsubClientIds(admin: Redis): Promise<string[]> {
  const list = (await admin.call('CLIENT', 'LIST', 'TYPE', 'pubsub')) as string;
  return list
    .split('\n')
    .filter((line) => / sub=[1-9]/.test(line))
    .map((line) => /(?:^| )id=(\d+)/.exec(line)?.[1] ?? '');
}

/** The names of the bus's connections to the Redis behind `admin`. */
async function busClientNames(admin: Redis): Promise<string[]> {
  const list = (await admin.client('LIST')) as string;
  return list
    .split('\n')
    .map((line) => / name=(\S*)/.exec(line)?.[1] ?? '')
    .filter((name) => name.startsWith('tailwater-bus-'))
    .sort();
}
