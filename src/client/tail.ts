import { createParser } from 'eventsource-parser';
import type { EventSourceMessage } from 'eventsource-parser';
import { isStreamCursor } from '../model/cursor.js';
import type { Entry } from '../model/entry.js';
import type { BackoffOptions } from '../model/backoff.js';
import { backoffDelay, sleep } from '../model/backoff.js';
import { TailwaterClientError } from './errors.js';
import type { ClientOptions, Target } from './http-client.js';
import { chunksOf } from './portable.js';
import {
  describeFetchError,
  errorFromResponse,
  TailwaterClient,
  targetPath,
} from './http-client.js';

export interface EndFrame {
  reason: string;
  status?: string;
  lastSeq: number;
}

export type GapFrame =
  { reason: 'retention'; fromSeq: number; toSeq: number } | { reason: 'reset' };

/** What `tail()` yields: entries, and the two things a viewer must be told out loud. */
export type TailEvent =
  /** The server accepted the connection (first or after a reconnect); frames follow. */
  | { type: 'open' }
  /**
   * The next entry; `json` is its JSON text as the server sent it, exact where JSON.parse rounds
   * (integers past 2^53, long decimals): parse it losslessly when such numbers matter.
   * `cursor` is the place after it, to save and pass back as `after` (a seq and the store's
   * epoch, so that a cursor from a restored or replaced database is answered with `gap reset`).
   */
  | { type: 'entry'; entry: Entry; json: string; cursor: string }
  | { type: 'gap'; gap: GapFrame }
  | { type: 'end'; end: EndFrame }
  /** The stream was cut; `tail()` reconnects with its cursor after `delayMs`. */
  | { type: 'reconnecting'; attempt: number; delayMs: number; reason: string };

export interface TailOptions extends ClientOptions {
  /** A run (`latest` allowed as runId), a topic, or `'runs'` for the runs feed. */
  target: Target | 'runs';
  /** Start after this place: a saved `cursor` (or a bare seq). */
  after?: number | string | undefined;
  /** `latest`: only what is written from now on. Ignored when `after` is given. */
  from?: 'start' | 'latest' | undefined;
  /** Start with the last N entries. */
  tail?: number | undefined;
  /**
   * The runs feed only: just these pipelines' runs (`?pipeline=`, once per FQN: the server
   * takes each value whole, so an FQN may hold a comma).
   */
  pipelines?: readonly string[] | undefined;
  kinds?: readonly string[] | undefined;
  steps?: readonly string[] | undefined;
  correlationIds?: readonly string[] | undefined;
  /**
   * A run's stream only: leave out log entries up to this cursor, whose text the caller read
   * from `log.txt` (its `Tailwater-Log-Cursor` header); every other entry comes as usual.
   */
  logAfter?: string | undefined;
  signal?: AbortSignal | undefined;
  /**
   * A connection that brings nothing (not even a heartbeat) for this long is taken for dead and
   * replaced, with the cursor (default 60 s: the server sends a heartbeat every 25 s).
   */
  readTimeoutMs?: number | undefined;
  /** Consecutive failed connections before giving up (default 5). */
  maxRetries?: number | undefined;
  backoff?: BackoffOptions | undefined;
}

const DEFAULT_READ_TIMEOUT_MS = 60_000;

/**
 * An AbortSignal for one connection: aborted with the caller's signal, or once `timeoutMs` pass
 * while waiting on the network (between `alive()` and `pause()`) with nothing arriving: a
 * connection that went silent without closing.
 */
function connectionSignal(outer: AbortSignal | undefined, timeoutMs: number) {
  const controller = new AbortController();
  let silent = false;
  const onAbort = () => controller.abort();
  outer?.addEventListener('abort', onAbort, { once: true });
  let timer = setTimeout(expire, timeoutMs);
  function expire() {
    silent = true;
    controller.abort();
  }
  return {
    signal: controller.signal,
    get silent() {
      return silent;
    },
    /** Waiting for the network again: the silence starts counting. */
    alive() {
      clearTimeout(timer);
      timer = setTimeout(expire, timeoutMs);
    },
    /** The consumer has the entries: its time is not the connection's silence. */
    pause() {
      clearTimeout(timer);
    },
    dispose() {
      clearTimeout(timer);
      outer?.removeEventListener('abort', onAbort);
    },
  };
}

/** `end` reasons after which the API says to reconnect with the cursor rather than stop. */
const RESUMABLE_END_REASONS: ReadonlySet<string> = new Set(['shutdown', 'maxDuration', 'maxBytes']);

/**
 * Follows a stream as an async iterator. Built on fetch and eventsource-parser, so it can send
 * `Authorization`. When the connection is cut it reconnects with `Last-Event-ID` (capped
 * exponential backoff, honouring Retry-After) and the stream resumes exactly where it was; it
 * gives up, throwing, after `maxRetries` consecutive failures. An `end` the server sends only to
 * make the viewer come back (`shutdown`, `maxDuration`, `maxBytes`: the API says to reconnect with
 * the cursor) is followed the same way, as a `reconnecting` event; any other `end` is yielded and
 * the iteration finishes.
 */
export async function* tail(options: TailOptions): AsyncGenerator<TailEvent, void, undefined> {
  const client = new TailwaterClient(options);
  const path =
    options.target === 'runs' ? '/api/v1/runs/stream' : `${targetPath(options.target)}/stream`;
  const maxRetries = options.maxRetries ?? 5;
  const readTimeoutMs = options.readTimeoutMs ?? DEFAULT_READ_TIMEOUT_MS;
  let cursor = options.after === undefined ? undefined : String(options.after);
  // Dropped once the stream starts over (`gap reset`): the text it named is another log's.
  let logAfter = options.logAfter;
  let failures = 0;

  while (!options.signal?.aborted) {
    const url = new URL(`${client.server}${path}`);
    for (const [name, values] of [
      ['kinds', options.kinds],
      ['steps', options.steps],
      ['correlationIds', options.correlationIds],
    ] as const) {
      if (values && values.length > 0) url.searchParams.set(name, values.join(','));
    }
    for (const pipeline of options.pipelines ?? []) url.searchParams.append('pipeline', pipeline);
    if (logAfter !== undefined) url.searchParams.set('logAfter', logAfter);
    const headers = client.headers({ accept: 'text/event-stream' });
    if (cursor !== undefined) headers['last-event-id'] = cursor;
    else if (options.tail !== undefined) url.searchParams.set('tail', String(options.tail));
    else if (options.from === 'latest') url.searchParams.set('from', 'latest');

    let failure: string;
    let retryAfterMs: number | undefined;
    let progressed = false;
    const connection = connectionSignal(options.signal, readTimeoutMs);
    try {
      const response = await fetch(url, { headers, signal: connection.signal });
      if (!response.ok) {
        const error = errorFromResponse(response, await response.text());
        if (!error.retryable) throw error;
        retryAfterMs = error.retryAfter === undefined ? undefined : error.retryAfter * 1000;
        failure = error.message;
      } else {
        connection.pause();
        yield { type: 'open' };
        const pending: EventSourceMessage[] = [];
        const parser = createParser({ onEvent: (message) => pending.push(message) });
        const decoder = new TextDecoder();
        let closing = false;
        failure = 'the stream was cut';
        connection.alive();
        for await (const chunk of chunksOf(response.body as ReadableStream<Uint8Array>)) {
          connection.pause();
          parser.feed(decoder.decode(chunk, { stream: true }));
          for (const message of pending.splice(0)) {
            progressed = true;
            if (message.id !== undefined && isStreamCursor(message.id)) cursor = message.id;
            const event = message.event ?? 'message';
            if (event === 'cursor') continue;
            if (event === 'end') {
              const end = JSON.parse(message.data) as EndFrame;
              if (RESUMABLE_END_REASONS.has(end.reason)) {
                // Not the end of the run: the server asks the viewer to come back with its cursor.
                failure = `the server ended the stream (${end.reason})`;
                closing = true;
                break;
              }
              yield { type: 'end', end };
              return;
            }
            if (event === 'gap') {
              const gap = JSON.parse(message.data) as GapFrame;
              if (gap.reason === 'reset') logAfter = undefined;
              yield { type: 'gap', gap };
              continue;
            }
            if (event === 'error') {
              failure =
                (JSON.parse(message.data) as { message?: string }).message ?? 'stream error';
              closing = true;
              break;
            }
            const entry = JSON.parse(message.data) as Entry;
            yield { type: 'entry', entry, json: message.data, cursor: cursor ?? String(entry.seq) };
          }
          if (closing) break;
          connection.alive();
        }
      }
    } catch (error) {
      if (error instanceof TailwaterClientError) throw error;
      if (options.signal?.aborted) return;
      failure = connection.silent
        ? `nothing arrived for ${readTimeoutMs / 1000} s (the connection went silent)`
        : describeFetchError(error);
    } finally {
      connection.dispose();
    }
    failures = progressed ? 1 : failures + 1;
    if (failures > maxRetries) {
      throw new TailwaterClientError(
        `Gave up following the stream after ${maxRetries} failed attempts: ${failure}`,
        0,
      );
    }
    const delayMs = retryAfterMs ?? backoffDelay(failures - 1, options.backoff);
    yield { type: 'reconnecting', attempt: failures, delayMs, reason: failure };
    await sleep(delayMs, options.signal);
  }
}
