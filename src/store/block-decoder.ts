import { quoteLatin1, quoteText } from '../model/json-text.js';
import { EvalWorker } from './eval-worker.js';
import type { BlockInfo, DecodedBlock } from './segment-format.js';
import { blockFromRaw, checkBlock, decodeBlock } from './segment-format.js';
import { zstdBinding } from './zstd.js';

/**
 * The decoding worker's program (eval-worker.ts): it decompresses a block and quotes each log
 * row's text as JSON, and hands both back without a copy. A block that says which control
 * characters its texts hold (the `e` column) is quoted byte for byte (quoteLatin1): no text is
 * decoded from UTF-8 or encoded back, and only those characters are looked for. An older block
 * is quoted as text (quoteText). Each function's source runs there. Buffers that share memory
 * with others (Node's pool) are copied before they go.
 */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const zstd = require(workerData.binding);
const decompressor = new zstd.Decompressor();
const quoteText = ${quoteText.toString()};
const quoteLatin1 = ${quoteLatin1.toString()};
const own = (b) => (b.byteOffset === 0 && b.byteLength === b.buffer.byteLength ? b : new Uint8Array(b));
parentPort.on('message', ([id, compressed]) => {
  try {
    const raw = decompressor.decompress(compressed);
    const at = 4 + raw.readUInt32LE(0);
    const columns = JSON.parse(raw.toString('utf8', 4, at));
    const ends = new Uint32Array(columns.l.length);
    const parts = [];
    let start = at;
    let size = 0;
    for (let i = 0; i < columns.l.length; i += 1) {
      const end = start + columns.l[i];
      if (columns.g[i] === 1) {
        const quoted = typeof columns.e === 'string'
          ? quoteLatin1(raw.toString('latin1', start, end), columns.e)
          : Buffer.from(quoteText(raw.toString('utf8', start, end)), 'utf8');
        parts.push(quoted);
        size += quoted.length;
      }
      ends[i] = size;
      start = end;
    }
    const texts = Buffer.allocUnsafeSlow(size);
    let to = 0;
    for (const part of parts) {
      to += typeof part === 'string' ? texts.write(part, to, 'latin1') : part.copy(texts, to);
    }
    const out = [own(raw), texts, ends];
    parentPort.postMessage([id, out, null], out.map((b) => b.buffer));
  } catch (error) {
    parentPort.postMessage([id, null, String((error && error.message) || error)]);
  }
});
`;

/**
 * Decodes sealed blocks for a catch-up on a worker thread: decompressing a block and escaping
 * its megabyte of log text for JSON is most of what a viewer reading sealed history costs, and
 * on the event loop it would run between the writes to that viewer's socket. With the next
 * blocks decoded ahead (sealed-store.ts), the event loop only copies bytes into frames
 * (docs/STORAGE.md, "Reading sealed history").
 */
export class BlockDecoder {
  private readonly worker = new EvalWorker('block decoder', WORKER_SOURCE, {
    binding: zstdBinding(),
  });

  async decode(info: BlockInfo, compressed: Uint8Array): Promise<DecodedBlock> {
    checkBlock(info, compressed);
    // A copy: the worker takes ownership of what it is sent.
    const bytes = new Uint8Array(compressed);
    let out: [Uint8Array, Uint8Array, Uint32Array];
    try {
      out = await this.worker.call([bytes], [bytes.buffer]);
    } catch {
      // Corrupt bytes (or a worker that failed) are decoded here, which says which it was.
      return decodeBlock(info, compressed);
    }
    const [raw, quoted, ends] = out;
    return blockFromRaw(info, asBuffer(raw), { bytes: asBuffer(quoted), ends });
  }

  close(): Promise<void> {
    return this.worker.close();
  }
}

function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}
