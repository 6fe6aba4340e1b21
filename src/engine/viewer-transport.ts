/** What a transport tells the viewer it carries. */
export interface TransportListener {
  /** The socket took what was waiting: it can take more. */
  transportDrained(): void;
  /** The connection is gone. */
  transportClosed(): void;
}

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
  /**
   * Tells `listener` of drains and of the close, for the life of the transport. One listener
   * per transport, held as an object rather than closures: an idle viewer costs what it holds.
   */
  attach(listener: TransportListener): void;
  /** Ends the response after what was written. */
  close(): void;
}
