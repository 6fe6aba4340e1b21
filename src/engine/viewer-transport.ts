/**
 * The byte sink of one viewer (an HTTP response, in practice). The engine counts what it has
 * handed over but the socket has not yet sent (`pendingBytes`) to bound each viewer's memory.
 */
export interface ViewerTransport {
  /** Returns false when the socket's buffer is full: wait for `drain`. */
  write(chunk: Buffer): boolean;
  /** Bytes written but not yet flushed to the network. */
  readonly pendingBytes: number;
  readonly closed: boolean;
  onDrain(listener: () => void): void;
  onClose(listener: () => void): void;
  /** Ends the response after what was written. */
  close(): void;
}
