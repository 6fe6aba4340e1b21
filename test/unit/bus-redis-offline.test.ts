import { createServer } from 'node:net';
import type { Server, Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { parseRedisUrl, RedisBus } from '../../src/bus/redis.js';
import { SettingsError } from '../../src/model/settings.js';
import { eventually } from './bus.contract.js';

// What the Redis bus does before it talks to any Redis: no service needed.

describe('parseRedisUrl', () => {
  it('reads host, port and database, with 6379 and database 0 by default', () => {
    expect(parseRedisUrl('redis://127.0.0.1:6380/2')).toMatchObject({
      host: '127.0.0.1',
      port: 6380,
      db: 2,
      display: 'redis://127.0.0.1:6380/2',
    });
    expect(parseRedisUrl('redis://localhost')).toMatchObject({
      host: 'localhost',
      port: 6379,
      db: 0,
    });
    expect(parseRedisUrl('redis://[::1]:7000/')).toMatchObject({ host: '::1', port: 7000, db: 0 });
  });

  it('takes credentials from the URL and never shows the password', () => {
    const target = parseRedisUrl('redis://tail%40water:s%3Acret@127.0.0.1:6379/1');
    expect(target).toMatchObject({ username: 'tail@water', password: 's:cret' });
    expect(target.display).toBe('redis://127.0.0.1:6379/1');
  });

  it.each([
    ['not a url', /is not a URL/],
    ['http://127.0.0.1:6379', /is not a Redis URL/],
    ['rediss://127.0.0.1:6379', /is not a Redis URL/],
    ['redis://127.0.0.1:6379/zero', /database number/],
    ['redis://127.0.0.1:6379/1/2', /database number/],
    ['redis://127.0.0.1:6379/?db=1', /query or fragment/],
  ])('refuses %s with a SettingsError', (url, message) => {
    expect(() => parseRedisUrl(url)).toThrow(SettingsError);
    expect(() => parseRedisUrl(url)).toThrow(message);
  });

  it('does not repeat a password of a URL it cannot read', () => {
    expect(() => parseRedisUrl('redis://user:hunter2@host:port')).toThrow(SettingsError);
    expect(() => parseRedisUrl('redis://user:hunter2@host:port')).not.toThrow(/hunter2/);
  });
});

describe('RedisBus before it connects', () => {
  let server: Server | undefined;
  const sockets: Socket[] = [];
  let bus: RedisBus | undefined;

  afterEach(async () => {
    await bus?.close();
    bus = undefined;
    for (const socket of sockets.splice(0)) socket.destroy();
    await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
    server = undefined;
  });

  /** A TCP listener that counts connections (it answers nothing). */
  async function listener(): Promise<{ port: number; connections: () => number }> {
    let count = 0;
    server = createServer((socket) => {
      count += 1;
      sockets.push(socket);
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    if (typeof address !== 'object' || !address) throw new Error('no port');
    return { port: address.port, connections: () => count };
  }

  it('refuses a namespace that could run into the stream name', () => {
    expect(() => new RedisBus('redis://127.0.0.1:6379', { namespace: 'a:b' })).toThrow(
      SettingsError,
    );
    expect(() => new RedisBus('redis://127.0.0.1:6379', { namespace: '' })).toThrow(SettingsError);
  });

  it('constructing it opens no connection; connect() opens the publisher and the subscriber', async () => {
    const { port, connections } = await listener();
    bus = new RedisBus(`redis://127.0.0.1:${port}`, { connectTimeoutMs: 300 });
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(connections()).toBe(0);
    await expect(bus.connect()).rejects.toThrow(/no answer within 300 ms/);
    expect(connections()).toBe(2);
  });

  it('until connected, health is degraded, notify drops without throwing, and ready resolves at once', async () => {
    const { port } = await listener();
    bus = new RedisBus(`redis://127.0.0.1:${port}`);
    expect(bus.health().state).toBe('degraded');
    expect(() => bus!.notify('s', 1)).not.toThrow();
    expect(bus.droppedNotifications).toBe(1);
    await bus.subscribe('s', () => undefined).ready;
    expect(bus.subscribedStreams).toBe(1);
  });

  it('after close, health is down and close may be called again', async () => {
    const { port } = await listener();
    bus = new RedisBus(`redis://127.0.0.1:${port}`);
    await bus.close();
    await bus.close();
    expect(bus.health().state).toBe('down');
    await eventually(() => bus!.subscribedStreams, 0);
  });
});
