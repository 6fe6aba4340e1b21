import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { TailwaterError } from '../model/errors.js';
import type { FastifyReply } from 'fastify';
import type { FrameEncoder } from '../engine/frames.js';
import type { Hub, StartPosition, SubscribeRequest } from '../engine/hub.js';
import type { TransportListener, ViewerTransport } from '../engine/viewer-transport.js';
import type { StreamKey } from '../model/stream-key.js';
import { takeSocket } from './socket-takeover.js';

export const SSE_HEADERS = {
  'Content-Type': 'text/event-stream; charset=utf-8',
  'Cache-Control': 'no-cache, no-store, no-transform',
  'X-Accel-Buffering': 'no',
} as const;

const LINE_BREAK = /[\r\n]/;

export interface SseFrame {
  id?: string | number | undefined;
  event?: string | undefined;
  /** The event's data; every line ending in it (CRLF, LF or a lone CR) starts a `data:` line. */
  data?: string | undefined;
  /** The reconnection delay the client should use, in milliseconds. */
  retry?: number | undefined;
}

/**
 * The bytes of one SSE frame: every frame of every dialect is written here, never by hand. An
 * `id` or `event` holding CR or LF would let a value inject frames, so it is refused (as Hono's
 * writer does); `data` is split on every line ending, so a client that reassembles it with LF
 * gets the text back whatever its line endings were. The `id` comes last: a client that takes
 * an id as soon as it reads the line (@microsoft/fetch-event-source does), cut off inside the
 * frame, would otherwise resume after an entry it never got (docs/API.md, "Streaming").
 * `dataIsStringified`: the data is JSON.stringify's output, which has no line break to split on.
 */
export function formatFrame(frame: SseFrame, dataIsStringified = false): string {
  let out = '';
  if (frame.event !== undefined) {
    if (LINE_BREAK.test(frame.event)) throw new Error('An SSE event must not contain CR or LF.');
    out += `event: ${frame.event}\n`;
  }
  if (frame.retry !== undefined) {
    if (!Number.isSafeInteger(frame.retry) || frame.retry < 0) {
      throw new Error('An SSE retry must be a non-negative integer.');
    }
    out += `retry: ${frame.retry}\n`;
  }
  if (frame.data !== undefined) {
    // JSON.stringify never writes a raw line break (`dataIsStringified`: a frame of a
    // megabyte of log text is not scanned for one); other data is split only if it has one.
    if (dataIsStringified || !LINE_BREAK.test(frame.data)) out += `data: ${frame.data}\n`;
    else for (const line of frame.data.split(/\r\n|\r|\n/)) out += `data: ${line}\n`;
  }
  if (frame.id !== undefined) {
    const id = String(frame.id);
    if (LINE_BREAK.test(id)) throw new Error('An SSE id must not contain CR or LF.');
    out += `id: ${id}\n`;
  }
  return `${out}\n`;
}

export function frameBytes(frame: SseFrame): Buffer {
  return Buffer.from(formatFrame(frame), 'utf8');
}

/** A comment (a heartbeat): one line, so a line break in it is refused as in a field. */
export function commentBytes(text: string): Buffer {
  if (LINE_BREAK.test(text)) throw new Error('An SSE comment must not contain CR or LF.');
  return Buffer.from(`: ${text}\n\n`, 'utf8');
}

const LISTENER = Symbol('tailwater.viewer');

/** A viewer's socket knows its listener, so one pair of functions serves every socket. */
interface ViewerSocket extends Socket {
  [LISTENER]?: TransportListener;
}

function onViewerDrain(this: ViewerSocket): void {
  this[LISTENER]?.transportDrained();
}

function onViewerClose(this: ViewerSocket): void {
  this[LISTENER]?.transportClosed();
}

/**
 * A hijacked HTTP response as the engine's byte sink: node:http writes the head, then the
 * socket is taken from it (socket-takeover.ts) and frames go straight to the socket.
 */
export class HttpViewerTransport implements ViewerTransport {
  private readonly socket: Socket;

  constructor(res: ServerResponse) {
    // An SSE body ends only when the connection does, so it needs no chunked framing: without
    // it, each write is one piece for the socket instead of four (size, CRLF, data, CRLF), which
    // more than triples fan-out throughput (docs/BENCHMARKS.md). The connection closes at the end.
    res.useChunkedEncodingByDefault = false;
    res.shouldKeepAlive = false;
    res.writeHead(200, SSE_HEADERS);
    // The stream is committed at once, even if the first frame takes a while.
    res.flushHeaders();
    this.socket = takeSocket(res);
    // Frames are small and latency matters more than packet count.
    this.socket.setNoDelay(true);
  }

  write(chunk: Buffer): boolean {
    return this.socket.write(chunk);
  }

  get pendingBytes(): number {
    return this.socket.writableLength;
  }

  get closed(): boolean {
    return this.socket.destroyed || this.socket.writableEnded;
  }

  attach(listener: TransportListener): void {
    (this.socket as ViewerSocket)[LISTENER] = listener;
    this.socket.on('drain', onViewerDrain);
    this.socket.on('close', onViewerClose);
  }

  close(): void {
    if (this.socket.writableEnded) return;
    // What was written goes out, then the FIN; the socket is let go once it has.
    this.socket.end(() => this.socket.destroy());
  }
}

/**
 * Subscribes and, once the Hub accepts, hijacks the reply into an SSE stream. A refusal thrown
 * by the Hub happens before the hijack, so it is an ordinary error response of the dialect.
 */
export async function streamTo(
  hub: Hub,
  reply: FastifyReply,
  key: StreamKey,
  start: StartPosition,
  filter: SubscribeRequest['filter'],
  encoder: FrameEncoder,
): Promise<void> {
  const { ip: client, tokenHolder } = reply.request;
  const expiresAt = tokenHolder?.expiresAt;
  // Requests allow for clocks past exp; a stream does not: it would end at once, and a client
  // that reconnects with the same token would open and end streams until the allowance ran out.
  if (expiresAt !== undefined && expiresAt <= Date.now()) {
    throw new TailwaterError(
      'TW_UNAUTHENTICATED',
      'The token has expired; open the stream with a fresh token and the last cursor.',
      { 'WWW-Authenticate': 'Bearer realm="tailwater", error="invalid_token"' },
    );
  }
  const token = tokenHolder?.key;
  await hub.subscribe({ key, start, filter, encoder, client, token, expiresAt }, () => {
    reply.hijack();
    return new HttpViewerTransport(reply.raw);
  });
}
