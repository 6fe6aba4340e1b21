import type { Bus, BusListener } from './bus.js';

/** The in-process bus: one server, no network. Listeners are called synchronously. */
export class MemoryBus implements Bus {
  private readonly listeners = new Map<string, Set<BusListener>>();

  notify(name: string, seq: number): void {
    const set = this.listeners.get(name);
    if (!set) return;
    for (const listener of set) listener(seq);
  }

  subscribe(name: string, listener: BusListener): () => void {
    let set = this.listeners.get(name);
    if (!set) {
      set = new Set();
      this.listeners.set(name, set);
    }
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0) this.listeners.delete(name);
    };
  }

  /** How many streams have listeners: lets tests check that tailers unsubscribe. */
  get subscribedStreams(): number {
    return this.listeners.size;
  }

  async close(): Promise<void> {
    this.listeners.clear();
  }
}
