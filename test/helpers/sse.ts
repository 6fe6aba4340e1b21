import { isStreamCursor, parseStreamCursor } from '../../src/model/cursor.js';
import { createParser } from 'eventsource-parser';
import type { EventSourceMessage } from 'eventsource-parser';

export interface SseEvent {
  id: string | undefined;
  event: string;
  data: string;
}

export interface SseReader {
  status: number;
  headers: Headers;
  /** Every frame received so far (event defaults to 'message'). */
  events: SseEvent[];
  /** Comments received (e.g. heartbeats). */
  comments: string[];
  /** The raw text received so far. */
  raw: string;
  /** Resolves when the server closes the body. */
  closed: Promise<void>;
  /** Waits until `predicate` holds for the events received, or fails after `timeoutMs`. */
  waitFor(predicate: (events: SseEvent[]) => boolean, timeoutMs?: number): Promise<void>;
  /** Aborts the request (a viewer going away). */
  close(): void;
}

/** Opens an SSE stream with fetch and parses it with eventsource-parser. */
export async function openSse(
  url: string,
  headers: Record<string, string> = {},
): Promise<SseReader> {
  const controller = new AbortController();
  const response = await fetch(url, { headers, signal: controller.signal });
  const events: SseEvent[] = [];
  const comments: string[] = [];
  const waiters = new Set<() => void>();
  const reader: SseReader = {
    status: response.status,
    headers: response.headers,
    events,
    comments,
    raw: '',
    closed: Promise.resolve(),
    waitFor(predicate, timeoutMs = 10_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (predicate(events)) {
            clearTimeout(timer);
            waiters.delete(check);
            resolve();
          }
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(
            new Error(
              `timed out; got ${events.length} events: ${JSON.stringify(events.slice(-3))}`,
            ),
          );
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    close: () => controller.abort(),
  };
  const parser = createParser({
    onEvent(message: EventSourceMessage) {
      events.push({ id: message.id, event: message.event ?? 'message', data: message.data });
      for (const waiter of [...waiters]) waiter();
    },
    onComment(comment) {
      comments.push(comment);
    },
  });
  reader.closed = (async () => {
    if (!response.body) return;
    const decoder = new TextDecoder();
    try {
      for await (const chunk of response.body) {
        const text = decoder.decode(chunk as Uint8Array, { stream: true });
        reader.raw += text;
        parser.feed(text);
      }
    } catch {
      // aborted by close()
    }
    for (const waiter of [...waiters]) waiter();
  })();
  return reader;
}

/** Waits for the server to close the body; fails after `timeoutMs`. */
export async function closedWithin(reader: SseReader, timeoutMs = 10_000): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('the stream did not close')), timeoutMs);
  });
  try {
    await Promise.race([reader.closed, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Whether the server has closed the body (as opposed to still streaming). */
export function watchClosed(reader: SseReader): { readonly closed: boolean } {
  const state = { closed: false };
  void reader.closed.then(() => {
    state.closed = true;
  });
  return state;
}

/** The frames of a native stream that are not entries. */
export const CONTROL_FRAMES: ReadonlySet<string> = new Set(['cursor', 'gap', 'end', 'error']);

/** The entry frames (everything but cursor, gap, end and error). */
export function entryEvents(events: readonly SseEvent[]): SseEvent[] {
  return events.filter((event) => !CONTROL_FRAMES.has(event.event));
}

/**
 * The seq an SSE id names: a native `<seq>-<epoch>` or a bare seq (ZenML's, an older server's);
 * NaN for anything else, so a malformed id fails the assertion that uses it.
 */
export function seqOfId(id: string | undefined): number {
  return id !== undefined && isStreamCursor(id) ? parseStreamCursor(id).seq : Number.NaN;
}

/** The store epoch a native SSE id carries, if it carries one. */
export function epochOfId(id: string | undefined): string | undefined {
  return id !== undefined && isStreamCursor(id) ? parseStreamCursor(id).epoch : undefined;
}

/** The seqs of the entry frames, in order. */
export function seqs(events: readonly SseEvent[]): number[] {
  return entryEvents(events).map((event) => seqOfId(event.id));
}

export const hasSeq = (seq: number) => (events: SseEvent[]) => seqs(events).includes(seq);
export const hasEvent = (name: string) => (events: SseEvent[]) =>
  events.some((e) => e.event === name);

/** The data of the `end` frame, if there is one. */
export function endOf(events: readonly SseEvent[]): Record<string, unknown> | undefined {
  const end = events.find((event) => event.event === 'end');
  return end && (JSON.parse(end.data) as Record<string, unknown>);
}

/** The whole numbers from `from` to `to`, both included (none if `to` < `from`). */
export const range = (from: number, to: number): number[] =>
  Array.from({ length: Math.max(0, to - from + 1) }, (_, i) => from + i);
