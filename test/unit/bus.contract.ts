import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Bus, BusListener } from '../../src/bus/bus.js';

export interface BusUnderTest {
  /**
   * Another bus on the same backend, as one more replica would open it. The in-process bus has
   * no backend to share between instances, so its factory answers the same bus every time.
   */
  open(): Promise<Bus>;
  /** How many stream names the backend holds a subscription for, over every bus opened here. */
  subscriptions(): Promise<number>;
  /**
   * Waits long enough for a notification published before the call to have been delivered, if
   * it ever will be (for a negative assertion where no later notification can be awaited).
   */
  settle(): Promise<void>;
  /** Closes every bus opened here (close is called again on buses already closed). */
  cleanup(): Promise<void>;
}

/** Every seq a listener was called with, and a way to wait for the next ones. */
export interface Recorder {
  readonly listener: BusListener;
  readonly seqs: number[];
  /** Resolves once `seq` was received; rejects after `ms`. */
  received(seq: number, ms?: number): Promise<void>;
}

export function recorder(): Recorder {
  const seqs: number[] = [];
  const waiters: { seq: number; resolve: () => void }[] = [];
  return {
    seqs,
    listener: (seq) => {
      seqs.push(seq);
      for (const waiter of waiters.filter((w) => w.seq === seq)) waiter.resolve();
    },
    received(seq, ms = 5000) {
      if (seqs.includes(seq)) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`seq ${seq} not received within ${ms} ms (got ${seqs.join()})`)),
          ms,
        );
        waiters.push({
          seq,
          resolve: () => {
            clearTimeout(timer);
            resolve();
          },
        });
      });
    },
  };
}

/** Polls `probe` every 20 ms until it answers `expected`, for at most `ms`. */
export async function eventually<T>(probe: () => Promise<T> | T, expected: T, ms = 5000) {
  const deadline = Date.now() + ms;
  let last = await probe();
  while (last !== expected && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    last = await probe();
  }
  expect(last).toBe(expected);
}

/** Names a backend could confuse: separators, glob characters, spaces, NUL, non-ASCII. */
export const AWKWARD_NAMES = [
  'a',
  'a:b',
  'a:b:c',
  'tailwater:default:a',
  'x/y',
  'x/y/',
  'with space',
  ' with space',
  '*',
  'a*',
  'a?',
  '[ab]',
  'run\u0000pipe\u0000r-1',
  'topic\u0000pipe',
  'ünïcødé ✓',
  '\u00fcnicode',
  'u\u0308nicode',
  '日本語',
  '🦆',
];

/**
 * The guarantees of the `Bus` port (src/bus/bus.ts), run against every implementation through a
 * factory that gives each test a fresh backend (or a namespace of its own on a shared one).
 */
export function describeBusContract(name: string, factory: () => Promise<BusUnderTest>): void {
  describe(`Bus contract: ${name}`, () => {
    let t: BusUnderTest;

    beforeEach(async () => {
      t = await factory();
    });

    afterEach(async () => {
      await t.cleanup();
    });

    it('a notification published after subscribe resolved arrives with its seq', async () => {
      const bus = await t.open();
      const got = recorder();
      await bus.subscribe('stream', got.listener).ready;
      bus.notify('stream', 42);
      await got.received(42);
      expect(got.seqs).toEqual([42]);
    });

    it('notifications of one name arrive in the order they were published', async () => {
      const bus = await t.open();
      const got = recorder();
      await bus.subscribe('ordered', got.listener).ready;
      for (let seq = 1; seq <= 50; seq += 1) bus.notify('ordered', seq);
      await got.received(50);
      expect(got.seqs).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
    });

    it('a notification published through one bus reaches the subscribers of every bus on the backend', async () => {
      const replicaA = await t.open();
      const replicaB = await t.open();
      const writer = await t.open();
      const onA = recorder();
      const onB = recorder();
      await Promise.all([
        replicaA.subscribe('shared', onA.listener).ready,
        replicaB.subscribe('shared', onB.listener).ready,
      ]);
      writer.notify('shared', 7);
      await Promise.all([onA.received(7), onB.received(7)]);
      expect(onA.seqs).toEqual([7]);
      expect(onB.seqs).toEqual([7]);
    });

    it('two listeners of one name on one bus both receive each notification', async () => {
      const bus = await t.open();
      const first = recorder();
      const second = recorder();
      await bus.subscribe('twice', first.listener).ready;
      await bus.subscribe('twice', second.listener).ready;
      bus.notify('twice', 3);
      await Promise.all([first.received(3), second.received(3)]);
      expect(first.seqs).toEqual([3]);
      expect(second.seqs).toEqual([3]);
    });

    it('unsubscribe stops delivery to that listener at once and leaves the others subscribed', async () => {
      const bus = await t.open();
      const leaving = recorder();
      const staying = recorder();
      const subscription = bus.subscribe('s', leaving.listener);
      await subscription.ready;
      await bus.subscribe('s', staying.listener).ready;
      subscription.unsubscribe();
      bus.notify('s', 1);
      await staying.received(1);
      expect(leaving.seqs).toEqual([]);
      expect(await t.subscriptions()).toBe(1);
    });

    it('unsubscribing every listener stops delivery and leaves nothing subscribed', async () => {
      const bus = await t.open();
      const gone = recorder();
      const sentinel = recorder();
      const subscriptions = await Promise.all(
        ['one', 'two', 'one'].map(async (name) => {
          const subscription = bus.subscribe(name, gone.listener);
          await subscription.ready;
          return subscription;
        }),
      );
      await bus.subscribe('sentinel', sentinel.listener).ready;
      for (const subscription of subscriptions) subscription.unsubscribe();
      bus.notify('one', 1);
      bus.notify('two', 2);
      // Published after them through the same bus: once it is here, they would have been too.
      bus.notify('sentinel', 3);
      await sentinel.received(3);
      expect(gone.seqs).toEqual([]);
      await eventually(() => t.subscriptions(), 1);
    });

    it('unsubscribing twice does nothing more, even once the name is subscribed again', async () => {
      const bus = await t.open();
      const old = bus.subscribe('again', () => undefined);
      await old.ready;
      old.unsubscribe();
      const got = recorder();
      await bus.subscribe('again', got.listener).ready;
      old.unsubscribe();
      bus.notify('again', 9);
      await got.received(9);
      expect(got.seqs).toEqual([9]);
      expect(await t.subscriptions()).toBe(1);
    });

    it('names with separators, globs, spaces, NUL and non-ASCII characters are kept apart', async () => {
      const bus = await t.open();
      const recorders = AWKWARD_NAMES.map(() => recorder());
      await Promise.all(
        AWKWARD_NAMES.map((name, i) => bus.subscribe(name, recorders[i]!.listener).ready),
      );
      const sentinel = recorder();
      await bus.subscribe('sentinel', sentinel.listener).ready;
      AWKWARD_NAMES.forEach((name, i) => bus.notify(name, 100 + i));
      bus.notify('sentinel', 1);
      await sentinel.received(1);
      expect(recorders.map((r) => r.seqs)).toEqual(AWKWARD_NAMES.map((_, i) => [100 + i]));
      expect(await t.subscriptions()).toBe(AWKWARD_NAMES.length + 1);
    });

    it('a notification nobody subscribed to is harmless and the bus goes on working', async () => {
      const bus = await t.open();
      expect(() => bus.notify('nobody listens', 1)).not.toThrow();
      const got = recorder();
      await bus.subscribe('somebody', got.listener).ready;
      bus.notify('nobody listens', 2);
      bus.notify('somebody', 3);
      await got.received(3);
      expect(got.seqs).toEqual([3]);
    });

    it('close() stops delivery, may be called twice, and leaves notify harmless', async () => {
      const bus = await t.open();
      const got = recorder();
      await bus.subscribe('closing', got.listener).ready;
      await bus.close();
      await bus.close();
      const writer = await t.open();
      expect(() => writer.notify('closing', 1)).not.toThrow();
      expect(() => bus.notify('closing', 2)).not.toThrow();
      await t.settle();
      expect(got.seqs).toEqual([]);
    });

    it('a bus just opened is healthy', async () => {
      const bus = await t.open();
      expect(bus.health().state).toBe('up');
    });
  });
}
