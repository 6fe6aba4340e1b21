// The SDK's tail() iterates `response.body` with `for await`; Safari's ReadableStream is not
// async-iterable yet, so give it the standard iterator there.
const proto = ReadableStream.prototype as unknown as Record<symbol, unknown>;
if (typeof proto[Symbol.asyncIterator] !== 'function') {
  proto[Symbol.asyncIterator] = async function* (this: ReadableStream<unknown>) {
    const reader = this.getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        yield value;
      }
    } finally {
      reader.releaseLock();
    }
  };
}
