import type { Bus, BusHealth, BusListener, BusSubscription } from './bus.js';

/** Delivery is synchronous, so a subscription is in effect as soon as it is made. */
const IN_EFFECT: Promise<void> = Promise.resolve();

/** The in-process bus: one server, no network. Listeners are called synchronously. */
export class MemoryBus implements Bus {
  private readonly listeners = new Map<string, Set<BusListener>>();

  notify(name: string, seq: number): void {
    const set = this.listeners.get(name);
    if (!set) return;
    for (const listener of set) listener(seq);
  }

  subscribe(name: string, listener: BusListener): BusSubscription {
    let set = this.listeners.get(name);
    if (!set) {
      set = new Set();
      this.listeners.set(name, set);
    }
    set.add(listener);
    return {
      ready: IN_EFFECT,
      unsubscribe: () => {
        set.delete(listener);
        if (set.size === 0 && this.listeners.get(name) === set) this.listeners.delete(name);
      },
    };
  }

  health(): BusHealth {
    return { state: 'up' };
  }

  /** How many streams have listeners: lets tests check that tailers unsubscribe. */
  get subscribedStreams(): number {
    return this.listeners.size;
  }

  async close(): Promise<void> {
    this.listeners.clear();
  }
}
