import type { ChildProcess } from 'node:child_process';

/**
 * A process started with GC_ON_SIGNAL collects garbage on SIGUSR2 and prints its memory
 * (scripts/gc-signal.mjs): how the memory tests and benchmarks read a server's heap after a
 * full collection, with no endpoint of the server's own for it.
 */
export const GC_ON_SIGNAL = [
  '--expose-gc',
  '--import',
  new URL('../../scripts/gc-signal.mjs', import.meta.url).href,
];

export interface MemoryUsage {
  rss: number;
  heapTotal: number;
  heapUsed: number;
  external: number;
  arrayBuffers: number;
}

/** Asks a process started with GC_ON_SIGNAL to collect garbage; resolves with its memory. */
export function collectGarbage(child: ChildProcess, timeoutMs = 10_000): Promise<MemoryUsage> {
  const stdout = child.stdout!;
  return new Promise((resolve, reject) => {
    let out = '';
    const onData = (chunk: Buffer) => {
      out += chunk.toString();
      const match = /bench-gc (\{.*\})\n/.exec(out);
      if (match) {
        cleanup();
        resolve(JSON.parse(match[1]!) as MemoryUsage);
      }
    };
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`no bench-gc answer within ${timeoutMs} ms`));
    }, timeoutMs);
    const cleanup = () => {
      clearTimeout(timer);
      stdout.off('data', onData);
    };
    stdout.on('data', onData);
    child.kill('SIGUSR2');
  });
}
