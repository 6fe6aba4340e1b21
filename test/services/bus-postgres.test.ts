import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { PostgresBusOptions } from '../../src/bus/postgres.js';
import {
  POSTGRES_BUS_APPLICATION,
  PostgresBus,
  postgresChannel,
  postgresPayload,
} from '../../src/bus/postgres.js';
import { openBus } from '../../src/cli/backends.js';
import { loadSettings, SettingsError } from '../../src/model/settings.js';
import type { PartialSettings } from '../../src/model/settings.js';
import { freePort } from '../helpers/net.js';
import { freshDatabase, pgAdmin } from '../helpers/postgres.js';
import { describeBusContract, eventually, recorder } from '../unit/bus.contract.js';

// `--bus postgres`: LISTEN/NOTIFY on the store's database (docs/CONFIGURATION.md). NOTIFY is
// scoped to one database, so each test gets a fresh database: a backend of its own.

/** Buses opened on one fresh database in a test, and how to close them and drop it. */
async function busesOnFreshDatabase(options: PostgresBusOptions = {}) {
  const db = await freshDatabase();
  const buses: PostgresBus[] = [];
  return {
    db,
    async open(extra: PostgresBusOptions = {}): Promise<PostgresBus> {
      const bus = await PostgresBus.open(db.url, { ...options, ...extra });
      buses.push(bus);
      return bus;
    },
    /** Every channel listened on, over every bus opened here. */
    async channels(): Promise<string[]> {
      const lists = await Promise.all(buses.map((bus) => bus.listeningChannels()));
      return lists.flat().sort();
    },
    /** Runs SQL on the test database as an administrator would. */
    admin<T>(sql: string, params: unknown[] = []): Promise<T[]> {
      return pgAdmin(async (client) => (await client.query(sql, params)).rows as T[], db.name);
    },
    /** The backend pids of the buses' connections to the test database. */
    async busPids(): Promise<number[]> {
      const rows = await pgAdmin(
        (client) =>
          client.query<{ pid: number }>(
            'SELECT pid FROM pg_stat_activity WHERE datname = $1 AND application_name = $2 ORDER BY pid',
            [db.name, POSTGRES_BUS_APPLICATION],
          ),
        'postgres',
      );
      return rows.rows.map((row) => row.pid);
    },
    /** Ends the buses' connections from the server's side, as a restart or an admin would. */
    async killBusConnections(): Promise<number> {
      const { rows } = await pgAdmin(
        (client) =>
          client.query<{ killed: boolean }>(
            'SELECT pg_terminate_backend(pid) AS killed FROM pg_stat_activity WHERE datname = $1 AND application_name = $2',
            [db.name, POSTGRES_BUS_APPLICATION],
          ),
        'postgres',
      );
      return rows.filter((row) => row.killed).length;
    },
    async setConnectionsAllowed(allowed: boolean): Promise<void> {
      await pgAdmin(
        (client) => client.query(`ALTER DATABASE ${db.name} WITH ALLOW_CONNECTIONS ${allowed}`),
        'postgres',
      );
    },
    async cleanup(): Promise<void> {
      await Promise.all(buses.splice(0).map((bus) => bus.close()));
      await db.drop();
    },
  };
}

describeBusContract('PostgresBus', async () => {
  const on = await busesOnFreshDatabase();
  return {
    open: () => on.open(),
    subscriptions: async () => (await on.channels()).length,
    // Loopback delivers in a few milliseconds; this is ample for a negative assertion.
    settle: () => new Promise((resolve) => setTimeout(resolve, 300)),
    cleanup: () => on.cleanup(),
  };
});

describe('PostgresBus on one database', () => {
  let on: Awaited<ReturnType<typeof busesOnFreshDatabase>>;
  beforeEach(async () => {
    on = await busesOnFreshDatabase({ maxReconnectDelayMs: 200 });
  });
  afterEach(() => on.cleanup());

  it('two buses on one database hear each other both ways', async () => {
    const a = await on.open();
    const b = await on.open();
    const onA = recorder();
    const onB = recorder();
    await a.subscribe('run\u0000pipe\u0000r-1', onA.listener).ready;
    await b.subscribe('run\u0000pipe\u0000r-1', onB.listener).ready;
    a.notify('run\u0000pipe\u0000r-1', 1);
    b.notify('run\u0000pipe\u0000r-1', 2);
    await Promise.all([onA.received(2), onB.received(2), onA.received(1), onB.received(1)]);
    expect(onA.seqs.sort()).toEqual([1, 2]);
    expect(onB.seqs.sort()).toEqual([1, 2]);
  });

  it('listens on tw_ + the SHA-1 of the name, a valid identifier, and sends [seq, name] as the payload', async () => {
    const bus = await on.open();
    await bus.subscribe('a:b', () => undefined).ready;
    const channel = postgresChannel('a:b');
    expect(channel).toMatch(/^tw_[0-9a-f]{40}$/);
    expect(Buffer.byteLength(channel)).toBeLessThan(63);
    expect(await bus.listeningChannels()).toEqual([channel]);
    expect(postgresPayload('a:b', 17)).toBe('[17,"a:b"]');
  });

  it('a notification on a name’s channel that carries another name, or no seq, is ignored', async () => {
    const bus = await on.open();
    const got = recorder();
    await bus.subscribe('s', got.listener).ready;
    const channel = postgresChannel('s');
    for (const junk of ['[1,"t"]', 'hello', '', '[-1,"s"]', '[1.5,"s"]', '["2","s"]', '[3,4]']) {
      await on.admin('SELECT pg_notify($1, $2)', [channel, junk]);
    }
    // A name on the wrong channel is refused too: only its own channel's payloads count.
    await on.admin('SELECT pg_notify($1, $2)', [postgresChannel('t'), '[5,"s"]']);
    await on.admin('SELECT pg_notify($1, $2)', [channel, '[8,"s"]']);
    await got.received(8);
    expect(got.seqs).toEqual([8]);
  });

  it('a name too long for a NOTIFY payload is still notified, without its name', async () => {
    const bus = await on.open();
    const long = '\u0000'.repeat(2000);
    const got = recorder();
    await bus.subscribe(long, got.listener).ready;
    expect(postgresPayload(long, 4)).toBe('[4]');
    bus.notify(long, 4);
    await got.received(4);
    expect(got.seqs).toEqual([4]);
  });

  it('a lone surrogate and U+FFFD get channels of their own', async () => {
    const bus = await on.open();
    const lone = recorder();
    const replaced = recorder();
    await bus.subscribe('a\ud800', lone.listener).ready;
    await bus.subscribe('a\ufffd', replaced.listener).ready;
    bus.notify('a\ud800', 1);
    bus.notify('a\ufffd', 2);
    await Promise.all([lone.received(1), replaced.received(2)]);
    expect([lone.seqs, replaced.seqs]).toEqual([[1], [2]]);
    expect(await bus.listeningChannels()).toHaveLength(2);
  });

  it('one connection per bus, named tailwater-bus, and close() ends it', async () => {
    const bus = await on.open();
    await bus.subscribe('s', () => undefined).ready;
    expect(await on.busPids()).toHaveLength(1);
    await bus.close();
    await eventually(async () => (await on.busPids()).length, 0);
    expect(bus.health()).toEqual({ state: 'down', detail: 'closed' });
  });

  it('its connection killed: degraded, then up again, and a listener from before still gets notifications', async () => {
    const subscriber = await on.open();
    const publisher = await on.open();
    const got = recorder();
    await subscriber.subscribe('kept', got.listener).ready;
    const pidsBefore = await on.busPids();
    expect(pidsBefore).toHaveLength(2);

    expect(await on.killBusConnections()).toBe(2);
    await eventually(() => subscriber.health().state, 'degraded', 2000);
    await eventually(() => subscriber.health().state, 'up', 10_000);
    await eventually(() => publisher.health().state, 'up', 10_000);
    const pidsAfter = await on.busPids();
    expect(pidsAfter).toHaveLength(2);
    expect(pidsAfter.filter((pid) => pidsBefore.includes(pid))).toEqual([]);

    expect(await subscriber.listeningChannels()).toEqual([postgresChannel('kept')]);
    publisher.notify('kept', 5);
    await got.received(5);
    expect(got.seqs).toEqual([5]);
  });

  it('while the database refuses connections: degraded, notify neither throws nor queues, subscribing does not wait; once back, the subscriptions are as asked', async () => {
    const subscriber = await on.open();
    const publisher = await on.open();
    const before = recorder();
    const during = recorder();
    await subscriber.subscribe('before', before.listener).ready;
    const gone = subscriber.subscribe('gone', () => undefined);
    await gone.ready;

    await on.setConnectionsAllowed(false);
    try {
      await on.killBusConnections();
      await eventually(() => subscriber.health().state, 'degraded', 2000);
      await eventually(() => publisher.health().state, 'degraded', 2000);
      expect(publisher.health().detail).toMatch(/^listener reconnecting/);

      const dropped = publisher.droppedNotifications;
      expect(() => {
        for (let seq = 1000; seq < 2000; seq += 1) publisher.notify('before', seq);
      }).not.toThrow();
      expect(publisher.droppedNotifications - dropped).toBe(1000);

      // Ready while the database still refuses connections: it did not wait for one.
      await subscriber.subscribe('during', during.listener).ready;
      expect(subscriber.health().state).toBe('degraded');
      gone.unsubscribe();
    } finally {
      await on.setConnectionsAllowed(true);
    }

    await eventually(() => subscriber.health().state, 'up', 10_000);
    await eventually(() => publisher.health().state, 'up', 10_000);
    publisher.notify('before', 2);
    publisher.notify('during', 3);
    await Promise.all([before.received(2), during.received(3)]);
    // Nothing published during the outage was kept to be sent later.
    expect(before.seqs).toEqual([2]);
    expect(during.seqs).toEqual([3]);
    expect(await subscriber.listeningChannels()).toEqual(
      [postgresChannel('before'), postgresChannel('during')].sort(),
    );
  });

  it('a bus closed while a LISTEN is being answered resolves its ready', async () => {
    const bus = await on.open();
    const subscription = bus.subscribe('s', () => undefined);
    await bus.close();
    await subscription.ready;
    expect(bus.health().state).toBe('down');
  });

  it('past maxPendingNotifications unanswered, notify drops instead of queueing', async () => {
    const bus = await on.open({ maxPendingNotifications: 10 });
    const got = recorder();
    await bus.subscribe('burst', got.listener).ready;
    for (let seq = 1; seq <= 100; seq += 1) bus.notify('burst', seq);
    expect(bus.droppedNotifications).toBe(90);
    await got.received(10);
    bus.notify('burst', 101);
    await got.received(101);
    expect(got.seqs).toEqual([...Array.from({ length: 10 }, (_, i) => i + 1), 101]);
  });
});

describe('opening a PostgresBus', () => {
  it('a server nobody listens on fails within connectTimeoutMs with an error naming the URL, not a bad setting', async () => {
    const port = await freePort();
    const started = Date.now();
    const opening = PostgresBus.open(`postgres://postgres:secret@127.0.0.1:${port}/db`, {
      connectTimeoutMs: 500,
    });
    await expect(opening).rejects.not.toThrow(SettingsError);
    await expect(opening).rejects.toThrow(
      new RegExp(
        `Cannot connect to PostgreSQL \\(bus\\) at postgres://postgres:\\*\\*\\*@127\\.0\\.0\\.1:${port}/db.*ECONNREFUSED`,
      ),
    );
    expect(Date.now() - started).toBeLessThan(3000);
  });

  it('--bus postgres opens on the --store database, up', async () => {
    const db = await freshDatabase();
    try {
      const bus = await openBus(settings({ store: db.url, bus: 'postgres' }));
      try {
        expect(bus.health().state).toBe('up');
        const got = recorder();
        await bus.subscribe('s', got.listener).ready;
        bus.notify('s', 1);
        await got.received(1);
      } finally {
        await bus.close();
      }
    } finally {
      await db.drop();
    }
  });

  it('--bus postgres with a store that is not PostgreSQL is a SettingsError that says why', async () => {
    await expect(openBus(settings({ bus: 'postgres' }))).rejects.toThrow(SettingsError);
    await expect(openBus(settings({ bus: 'postgres' }))).rejects.toThrow(/store is SQLite/);
    await expect(openBus(settings({ bus: 'postgres', store: 'sqlite:/tmp/x.db' }))).rejects.toThrow(
      /store is SQLite/,
    );
  });
});

function settings(flags: PartialSettings) {
  return loadSettings({ flags, env: {} });
}
