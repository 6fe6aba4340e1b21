import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import * as zstd from 'zstd-napi';

/**
 * zstd for sealed segments (docs/STORAGE.md, "Sealed segments"). Decompression is quick (about
 * 3 ms a megabyte here) and runs where it is asked for; compression at the levels that pay
 * (9 and up: about 30 ms a megabyte) runs on a worker thread of its own, so sealing never holds
 * the event loop that serves viewers and appends.
 */

const decompressor = new zstd.Decompressor();

export function decompress(data: Uint8Array): Buffer {
  return decompressor.decompress(data);
}

/**
 * The worker's whole program, run with `eval` so it needs no file of its own (the same code
 * then works from the TypeScript sources and the built package): it loads the binding by the
 * path the parent resolved, and answers each [id, level, bytes] with [id, compressed].
 */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const zstd = require(workerData.binding);
const compressors = new Map();
parentPort.on('message', ([id, level, bytes]) => {
  try {
    let compressor = compressors.get(level);
    if (!compressor) {
      compressor = new zstd.Compressor();
      compressor.setParameters({ compressionLevel: level });
      compressors.set(level, compressor);
    }
    const out = compressor.compress(bytes);
    parentPort.postMessage([id, out, null], [out.buffer]);
  } catch (error) {
    parentPort.postMessage([id, null, String(error && error.message || error)]);
  }
});
`;

type Pending = { resolve: (out: Buffer) => void; reject: (error: Error) => void };

/** Compresses on one worker thread, in the order asked; started on first use. */
export class Compressor {
  private worker: Worker | undefined;
  private next = 0;
  private readonly pending = new Map<number, Pending>();

  async compress(data: Uint8Array, level: number): Promise<Buffer> {
    const worker = this.start();
    const id = this.next++;
    // A copy: the worker takes ownership of what it is sent, and `data` may be a view of a
    // larger buffer the caller still uses.
    const bytes = new Uint8Array(data);
    return new Promise<Buffer>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      if (this.pending.size === 1) worker.ref();
      worker.postMessage([id, level, bytes], [bytes.buffer]);
    });
  }

  async close(): Promise<void> {
    const worker = this.worker;
    this.worker = undefined;
    if (worker) await worker.terminate();
  }

  private start(): Worker {
    if (this.worker) return this.worker;
    const binding = createRequire(import.meta.url).resolve('zstd-napi');
    const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { binding } });
    worker.on('message', ([id, out, error]: [number, Uint8Array | null, string | null]) => {
      const waiting = this.pending.get(id);
      this.pending.delete(id);
      if (this.pending.size === 0) worker.unref();
      if (!waiting) return;
      if (out) waiting.resolve(Buffer.from(out.buffer, out.byteOffset, out.byteLength));
      else waiting.reject(new Error(`zstd: ${error ?? 'compression failed'}`));
    });
    worker.on('error', (error) => this.failAll(error));
    worker.on('exit', () => {
      if (this.worker === worker) this.worker = undefined;
      this.failAll(new Error('zstd: the compression worker stopped'));
    });
    // Idle, it does not keep the process alive.
    worker.unref();
    this.worker = worker;
    return worker;
  }

  private failAll(error: Error): void {
    for (const waiting of this.pending.values()) waiting.reject(error);
    this.pending.clear();
  }
}
