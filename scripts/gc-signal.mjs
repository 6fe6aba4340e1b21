/**
 * Preloaded (`node --expose-gc --import <this file> …`) into the server processes of the idle
 * memory benchmark: on SIGUSR2 it runs a full garbage collection and prints
 * `bench-gc {"rss",…}` (process.memoryUsage()), so memory is compared without the garbage a
 * burst of connections left behind. Plain JavaScript so it needs no loader in the server.
 */
process.on('SIGUSR2', () => {
  const gc = globalThis.gc;
  if (typeof gc === 'function') {
    gc();
    gc();
  }
  process.stdout.write(`bench-gc ${JSON.stringify(process.memoryUsage())}\n`);
});
