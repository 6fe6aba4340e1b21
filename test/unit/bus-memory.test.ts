import { MemoryBus } from '../../src/bus/memory.js';
import { describeBusContract } from './bus.contract.js';

describeBusContract('MemoryBus', async () => {
  // One process, one bus: the "other replicas" of the in-process bus are the bus itself.
  const bus = new MemoryBus();
  return {
    open: async () => bus,
    subscriptions: async () => bus.subscribedStreams,
    // Delivery is synchronous: what was published has been delivered when notify returned.
    settle: async () => undefined,
    cleanup: () => bus.close(),
  };
});
