// What the SDK needs from its host, written for Node.js 20 and browsers alike: the client entry
// (`tailwater/client`) is bundled for the browser, where there is no `process`, no `Buffer` and
// no `node:` module (docs/SDK.md, "In the browser").

interface ProcessLike {
  env?: Record<string, string | undefined>;
}

/** An environment variable; always undefined in a browser, which has no `process`. */
export function envVar(name: string): string | undefined {
  const host = globalThis as { process?: ProcessLike };
  return host.process?.env?.[name];
}

const encoder = new TextEncoder();

/** The length of `text` encoded as UTF-8, in bytes (what `Buffer.byteLength` counts). */
export function utf8Length(text: string): number {
  return encoder.encode(text).byteLength;
}

/**
 * A random (version 4) UUID. Browsers offer `crypto.randomUUID` only in secure contexts (HTTPS,
 * localhost); elsewhere one is made from `crypto.getRandomValues`, which every context has.
 */
export function randomId(): string {
  const { crypto } = globalThis;
  if (typeof crypto.randomUUID === 'function') return crypto.randomUUID();
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  // RFC 9562, section 5.4: the version (4) and the variant (0b10) bits.
  bytes[6] = (bytes[6]! & 0x0f) | 0x40;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  const hex = Array.from(bytes, (byte) => byte.toString(16).padStart(2, '0')).join('');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/**
 * A response body's chunks. Node's and most browsers' ReadableStream are async-iterable; Safari's
 * is not yet, so there it is read with a reader, cancelled (closing the connection) when the
 * iteration stops early, as `for await` over the stream itself would.
 */
export function chunksOf(body: ReadableStream<Uint8Array>): AsyncIterable<Uint8Array> {
  // Asked at run time: the type says every ReadableStream is async-iterable, Safari's is not.
  const iterable = (body as Partial<AsyncIterable<Uint8Array>>)[Symbol.asyncIterator];
  if (typeof iterable === 'function') return body as AsyncIterable<Uint8Array>;
  return (async function* () {
    const reader = body.getReader();
    let finished = false;
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) {
          finished = true;
          return;
        }
        yield value;
      }
    } finally {
      if (!finished) await reader.cancel().catch(() => undefined);
      reader.releaseLock();
    }
  })();
}
