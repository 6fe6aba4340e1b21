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
