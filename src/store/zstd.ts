import { createRequire } from 'node:module';
import * as zstd from 'zstd-napi';
import { EvalWorker } from './eval-worker.js';

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
 * The compression worker's program (eval-worker.ts): it loads the binding by the path the
 * parent resolved, and answers each [id, level, bytes] with [id, compressed].
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

/** Compresses on one worker thread, in the order asked; started on first use. */
export class Compressor {
  private readonly worker = new EvalWorker('zstd', WORKER_SOURCE, { binding: zstdBinding() });

  async compress(data: Uint8Array, level: number): Promise<Buffer> {
    // A copy: the worker takes ownership of what it is sent, and `data` may be a view of a
    // larger buffer the caller still uses.
    const bytes = new Uint8Array(data);
    const out = await this.worker.call<Uint8Array>([level, bytes], [bytes.buffer]);
    return Buffer.from(out.buffer, out.byteOffset, out.byteLength);
  }

  close(): Promise<void> {
    return this.worker.close();
  }
}

/** Where the binding is, for a worker to load it (workers have no import.meta of ours). */
export function zstdBinding(): string {
  return createRequire(import.meta.url).resolve('zstd-napi');
}
