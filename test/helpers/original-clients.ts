import { fetchEventSource } from '@microsoft/fetch-event-source';
import type { EventSourceMessage } from '@microsoft/fetch-event-source';
import { EventSource } from 'eventsource';
import type { FetchLike } from 'eventsource';

// The seed systems' own clients, re-implemented from how they behave, so that end-to-end tests
// can drive a real `tailwater serve` exactly as those clients would (docs/API.md, "Dialects for
// the seed systems' own clients"). Every loop here is bounded in count and in time.

/** A sleep that `wake()` (or an abort) cuts short. */
function wakeableSleep(ms: number, signal: AbortSignal): { done: Promise<void>; wake(): void } {
  let wake = () => {};
  const done = new Promise<void>((resolve) => {
    const finish = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', finish);
      resolve();
    };
    const timer = setTimeout(finish, ms);
    signal.addEventListener('abort', finish, { once: true });
    wake = finish;
  });
  return { done, wake };
}

const sleep = (ms: number, signal: AbortSignal) => wakeableSleep(ms, signal).done;

// ---- Freight's deploy page ----------------------------------------------------------------------

export type FreightStatus = 'pending' | 'in_progress' | 'finished' | 'failed' | 'cancelled';

/** The deploy JSON Freight's UI reads (the fields the tests look at). */
export interface FreightDeploy {
  id: string;
  name: string;
  app: { id: string; name: string };
  environment: string;
  number: number | string;
  status: FreightStatus;
  user: { id: string; name: string; dateCreated: string };
  duration: number | null;
  estimatedDuration: number | null;
  dateCreated: string;
  dateStarted: string | null;
  dateFinished: string | null;
}

export interface FreightLogChunk {
  text: string;
  date: string;
  offset: number;
  size: number;
}

export interface FreightLogRequest {
  url: string;
  httpStatus: number;
  /** Whether the deploy's terminal status was known when the request was sent. */
  sentAfterTerminal: boolean;
  chunks: number;
  nextOffset?: number;
}

/** Freight's UI: the deploy every 3 s, its log every second, 10 s after a failed request. */
export const FREIGHT_UI_INTERVALS = { detailsMs: 3000, logMs: 1000, errorMs: 10_000 };

const FREIGHT_TERMINAL: ReadonlySet<string> = new Set(['finished', 'failed', 'cancelled']);

export interface FreightDeployViewer {
  /** The raw concatenation of every chunk's text, in the order received. */
  readonly text: string;
  /** What the page shows: each chunk split on '\n', empty strings dropped. */
  readonly lines: readonly string[];
  /** Each deploy status seen, in order, without repeats. */
  readonly statuses: readonly FreightStatus[];
  /** The last deploy JSON received. */
  readonly deploy: FreightDeploy | undefined;
  readonly logRequests: readonly FreightLogRequest[];
  readonly detailsRequests: number;
  /** Resolves once both pollers stopped (after the final drain); rejects past its bounds. */
  readonly done: Promise<void>;
  /** The page's Cancel button: PUT the deploy `{"status": "cancelled"}`. */
  cancel(): Promise<Response>;
  /** Closes the page. */
  stop(): void;
}

export interface FreightViewerOptions {
  intervals?: Partial<typeof FREIGHT_UI_INTERVALS>;
  /** At most this many requests per poller (default 500). */
  maxRequests?: number;
  /** Give up after this long (default 60 s). */
  timeoutMs?: number;
}

/**
 * Freight's deploy page on `{base}/api/0/deploys/{app}/{env}/{number}/`, `base` being
 * `{server}/compat/freight` (docs/API.md, "Freight"). Its layout first reads the config and
 * the app list, which must hold the app. Then, at once, it asks for the deploy and for its
 * log from offset 0 (never with a `limit`). While the deploy is `pending` or `in_progress` it asks
 * again for the deploy every 3 s and for the log every second, each time from the `nextOffset` of
 * the previous answer; after a failed request it waits 10 s. Once the status is terminal, each
 * poller asks once more at once, and the log poller goes on asking at once while `nextOffset`
 * still moves (the final drain); then both stop.
 */
export function freightDeployViewer(
  baseUrl: string,
  app: string,
  env: string,
  number: number | string,
  options: FreightViewerOptions = {},
): FreightDeployViewer {
  const intervals = { ...FREIGHT_UI_INTERVALS, ...options.intervals };
  const maxRequests = options.maxRequests ?? 500;
  const timeoutMs = options.timeoutMs ?? 60_000;
  const deadline = Date.now() + timeoutMs;
  const controller = new AbortController();
  const signal = controller.signal;
  // A request that hangs is cut at the deadline too.
  const deadlineTimer = setTimeout(
    () => controller.abort(new Error(`the deploy page ran out of time (${timeoutMs} ms)`)),
    timeoutMs,
  );
  const deployUrl = `${baseUrl}/api/0/deploys/${[app, env, String(number)].map(encodeURIComponent).join('/')}/`;

  let text = '';
  const lines: string[] = [];
  const statuses: FreightStatus[] = [];
  const logRequests: FreightLogRequest[] = [];
  let deploy: FreightDeploy | undefined;
  let detailsRequests = 0;
  let terminalKnown = false;
  let wakeLogPoller: (() => void) | undefined;

  const checkBounds = (what: string, count: number) => {
    if (signal.aborted) throw new Error(`the ${what} poller was stopped`);
    if (count >= maxRequests) throw new Error(`the ${what} poller made ${count} requests`);
    if (Date.now() > deadline) throw new Error(`the ${what} poller ran out of time`);
  };

  const pollDetails = async () => {
    let finalRequestMade = false;
    for (let count = 0; ; count += 1) {
      checkBounds('deploy', count);
      detailsRequests += 1;
      const response = await fetch(deployUrl, { signal });
      if (!response.ok) {
        await response.body?.cancel();
        await sleep(intervals.errorMs, signal);
        continue;
      }
      deploy = (await response.json()) as FreightDeploy;
      if (statuses.at(-1) !== deploy.status) statuses.push(deploy.status);
      if (FREIGHT_TERMINAL.has(deploy.status)) {
        if (!terminalKnown) {
          terminalKnown = true;
          wakeLogPoller?.();
        }
        if (finalRequestMade) return;
        finalRequestMade = true;
        continue;
      }
      await sleep(intervals.detailsMs, signal);
    }
  };

  const pollLog = async () => {
    let offset = 0;
    for (let count = 0; ; count += 1) {
      checkBounds('log', count);
      const sentAfterTerminal = terminalKnown;
      const url = `${deployUrl}log/?offset=${offset}`;
      const response = await fetch(url, { signal });
      const request: FreightLogRequest = {
        url,
        httpStatus: response.status,
        sentAfterTerminal,
        chunks: 0,
      };
      logRequests.push(request);
      let wait = intervals.logMs;
      if (response.ok) {
        const page = (await response.json()) as { nextOffset: number; chunks: FreightLogChunk[] };
        request.chunks = page.chunks.length;
        request.nextOffset = page.nextOffset;
        for (const chunk of page.chunks) {
          text += chunk.text;
          lines.push(...chunk.text.split('\n').filter((line) => line !== ''));
        }
        const moved = page.nextOffset !== offset;
        offset = page.nextOffset;
        if (terminalKnown) {
          if (!moved && sentAfterTerminal) return;
          continue;
        }
      } else {
        await response.body?.cancel();
        wait = intervals.errorMs;
      }
      const pause = wakeableSleep(wait, signal);
      wakeLogPoller = pause.wake;
      await pause.done;
      wakeLogPoller = undefined;
    }
  };

  // Freight's layout asks for its config, then the app list, and shows the deploy page only
  // once both answered; the page looks its app up in that list (it fails without it).
  const loadLayout = async () => {
    const config = await fetch(`${baseUrl}/api/0/config/`, { signal });
    if (!config.ok) throw new Error(`Freight's config answered ${config.status}`);
    await config.json();
    const apps = await fetch(`${baseUrl}/api/0/apps/`, { signal });
    if (!apps.ok) throw new Error(`Freight's app list answered ${apps.status}`);
    const list = (await apps.json()) as { name: string; lockedReason: string | null }[];
    const entry = list.find((candidate) => candidate.name === app);
    if (!entry) throw new Error(`the app ${app} is not in Freight's app list`);
    if (entry.lockedReason !== null) throw new Error(`the app ${app} is locked`);
  };

  const done = loadLayout()
    .then(() => Promise.all([pollDetails(), pollLog()]))
    .then(
      () => undefined,
      (error: unknown) => {
        controller.abort();
        throw error;
      },
    )
    .finally(() => clearTimeout(deadlineTimer));
  // A caller that never awaits `done` must not see an unhandled rejection.
  done.catch(() => {});

  return {
    get text() {
      return text;
    },
    lines,
    statuses,
    get deploy() {
      return deploy;
    },
    logRequests,
    get detailsRequests() {
      return detailsRequests;
    },
    done,
    cancel: () =>
      fetch(deployUrl, {
        method: 'PUT',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ status: 'cancelled' }),
      }),
    stop: () => controller.abort(),
  };
}

// ---- OpenMetadata's live log hook ---------------------------------------------------------------

/** `LogStreamEvent`, the JSON of every frame (docs/API.md, "OpenMetadata"). */
export interface LogStreamEvent {
  eventType: 'logs' | 'complete' | 'error';
  runId?: string;
  logs?: string;
  after?: string;
  replay?: boolean;
  truncated?: boolean;
  reason?: string;
  message?: string;
}

/** The stream of a run's live log, both names URL-encoded. */
export function openMetadataStreamUrl(server: string, fqn: string, runId: string): string {
  return `${server}/compat/openmetadata/api/v1/services/ingestionPipelines/logs/${encodeURIComponent(fqn)}/stream/${encodeURIComponent(runId)}`;
}

export interface LiveLogConnection {
  url: string;
  /** The `after` the connection asked from, if any. */
  after: string | undefined;
  /** How long the hook waited before opening it. */
  delayMs: number;
  /** The HTTP status of the answer, if one came. */
  httpStatus?: number;
  /** How it ended: a `complete` reason, `error`, or what went wrong. */
  outcome?: string;
}

export type LiveLogHealth = 'connecting' | 'live' | 'unavailable' | 'stopped';

export interface LiveLogResult {
  /** Why the hook stopped for good. */
  stoppedBy: 'complete' | 'error' | 'unavailable' | 'aborted' | 'limit';
  /** The `complete` reason it stopped on. */
  reason?: string;
  /** The message shown as an error, if any. */
  error?: string;
}

export interface OpenMetadataLiveLog {
  readonly text: string;
  readonly truncated: boolean;
  readonly cursor: string | undefined;
  readonly health: LiveLogHealth;
  readonly connections: readonly LiveLogConnection[];
  /** Every `complete` reason received, in order. */
  readonly completes: readonly string[];
  /** Frames whose data was not JSON (ignored). */
  readonly malformedFrames: number;
  readonly done: Promise<LiveLogResult>;
  stop(): void;
}

export interface LiveLogOptions {
  token: string;
  /** The fetch the page's requests go through (default: the global one). */
  fetch?: typeof fetch;
  /** At most this many connections (default 50). */
  maxConnections?: number;
  /** Give up after this long (default 60 s). */
  timeoutMs?: number;
}

/** fetch-event-source touches `window` and `document` (timers, visibility); Node has neither. */
let browserGlobalUsers = 0;
let addedGlobals: string[] = [];

function acquireBrowserGlobals(): void {
  browserGlobalUsers += 1;
  if (browserGlobalUsers > 1) return;
  const global = globalThis as Record<string, unknown>;
  const shims: Record<string, unknown> = {
    window: {
      setTimeout,
      clearTimeout,
      fetch: (...args: Parameters<typeof fetch>) => fetch(...args),
    },
    document: { hidden: false, addEventListener() {}, removeEventListener() {} },
  };
  addedGlobals = Object.keys(shims).filter((name) => global[name] === undefined);
  for (const name of addedGlobals) global[name] = shims[name];
}

function releaseBrowserGlobals(): void {
  browserGlobalUsers -= 1;
  if (browserGlobalUsers > 0) return;
  const global = globalThis as Record<string, unknown>;
  for (const name of addedGlobals) delete global[name];
  addedGlobals = [];
}

class FatalError extends Error {}
class RetriableError extends Error {}

/** How one connection ended, as the hook's outer loop sees it. */
type ConnectionEnd =
  { next: 'reconnectNow' } | { next: 'retry' } | { next: 'stop'; result: LiveLogResult };

/**
 * OpenMetadata's live-log hook over `@microsoft/fetch-event-source` (docs/API.md,
 * "OpenMetadata"). It sends `Authorization: Bearer <token>`; a 2xx opens the stream, a 503 means
 * the server cannot stream (it stops for good, health `unavailable`), any other status is retried.
 * The library never retries by itself: its `onerror` rethrows and the hook's own loop decides.
 * Each connection asks `?after=<cursor>` once a cursor is known; every frame with a truthy `after`
 * moves the cursor. `logs` frames append their text verbatim and latch `truncated`; `complete`
 * with `idleTimeout` or `maxDuration` reconnects at once, any other reason stops for good (its
 * message shown as an error), as does an `error` frame. A body that ends without either, or a
 * network error, is retried after min(1000·2^(attempt−1), 30000) ms, the attempt count going back
 * to 0 on every successful open; it never gives up on those. Frames that are not JSON are ignored.
 */
export function openMetadataLiveLog(
  streamUrl: string,
  options: LiveLogOptions,
): OpenMetadataLiveLog {
  const maxConnections = options.maxConnections ?? 50;
  const deadline = Date.now() + (options.timeoutMs ?? 60_000);
  const stopped = new AbortController();
  const deadlineTimer = setTimeout(() => stopped.abort(), options.timeoutMs ?? 60_000);
  let text = '';
  let truncated = false;
  let cursor: string | undefined;
  let health: LiveLogHealth = 'connecting';
  let malformedFrames = 0;
  const connections: LiveLogConnection[] = [];
  const completes: string[] = [];
  /** Consecutive failed connections; back to 0 on every successful open. */
  let attempt = 0;

  const connectOnce = async (connection: LiveLogConnection): Promise<ConnectionEnd> => {
    const controller = new AbortController();
    const abort = () => controller.abort();
    stopped.signal.addEventListener('abort', abort, { once: true });
    let end: ConnectionEnd | undefined;
    const finish = (value: ConnectionEnd, outcome: string) => {
      end = value;
      connection.outcome = outcome;
      controller.abort(); // stop reading: the hook is done with this connection
    };
    try {
      await fetchEventSource(connection.url, {
        headers: { Authorization: `Bearer ${options.token}` },
        signal: controller.signal,
        openWhenHidden: true,
        ...(options.fetch ? { fetch: options.fetch } : {}),
        onopen: async (response) => {
          connection.httpStatus = response.status;
          if (response.ok) {
            attempt = 0;
            health = 'live';
            return;
          }
          await response.body?.cancel();
          if (response.status === 503) throw new FatalError('The log stream is unavailable.');
          throw new RetriableError(`HTTP ${response.status}`);
        },
        onmessage: (message: EventSourceMessage) => {
          if (end) return;
          let event: LogStreamEvent;
          try {
            event = JSON.parse(message.data) as LogStreamEvent;
          } catch {
            malformedFrames += 1;
            return;
          }
          if (event.after) cursor = event.after;
          if (event.eventType === 'logs') {
            text += event.logs ?? '';
            if (event.truncated) truncated = true;
          } else if (event.eventType === 'complete') {
            completes.push(event.reason ?? '');
            if (event.reason === 'idleTimeout' || event.reason === 'maxDuration') {
              finish({ next: 'reconnectNow' }, `complete ${event.reason}`);
            } else {
              finish(
                {
                  next: 'stop',
                  result: {
                    stoppedBy: 'complete',
                    ...(event.reason ? { reason: event.reason } : {}),
                    ...(event.message ? { error: event.message } : {}),
                  },
                },
                `complete ${event.reason}`,
              );
            }
          } else if (event.eventType === 'error') {
            finish(
              { next: 'stop', result: { stoppedBy: 'error', error: event.message ?? 'error' } },
              'error',
            );
          }
        },
        onclose: () => {
          if (!end) throw new RetriableError('The stream ended without a terminal frame.');
        },
        onerror: (error: unknown) => {
          throw error;
        },
      });
    } catch (error) {
      if (error instanceof FatalError) {
        health = 'unavailable';
        connection.outcome = 'unavailable';
        return { next: 'stop', result: { stoppedBy: 'unavailable', error: error.message } };
      }
      connection.outcome = error instanceof Error ? error.message : String(error);
      return { next: 'retry' };
    } finally {
      stopped.signal.removeEventListener('abort', abort);
    }
    if (end) return end;
    // The library resolves without a terminal frame only when it was aborted from outside.
    connection.outcome ??= 'aborted';
    return { next: 'retry' };
  };

  const loop = async (): Promise<LiveLogResult> => {
    let delayMs = 0;
    for (let count = 0; count < maxConnections; count += 1) {
      if (delayMs > 0) await sleep(delayMs, stopped.signal);
      if (stopped.signal.aborted || Date.now() > deadline) return { stoppedBy: 'aborted' };
      const url = cursor ? `${streamUrl}?after=${encodeURIComponent(cursor)}` : streamUrl;
      const connection: LiveLogConnection = { url, after: cursor, delayMs };
      connections.push(connection);
      const end = await connectOnce(connection);
      if (stopped.signal.aborted) return { stoppedBy: 'aborted' };
      if (end.next === 'stop') return end.result;
      if (end.next === 'reconnectNow') {
        delayMs = 0;
      } else {
        health = 'connecting';
        attempt += 1;
        delayMs = Math.min(1000 * 2 ** (attempt - 1), 30_000);
      }
    }
    return { stoppedBy: 'limit' };
  };

  acquireBrowserGlobals();
  const done = loop().finally(() => {
    clearTimeout(deadlineTimer);
    if (health !== 'unavailable') health = 'stopped';
    releaseBrowserGlobals();
  });

  return {
    get text() {
      return text;
    },
    get truncated() {
      return truncated;
    },
    get cursor() {
      return cursor;
    },
    get health() {
      return health;
    },
    connections,
    completes,
    get malformedFrames() {
      return malformedFrames;
    },
    done,
    stop: () => stopped.abort(),
  };
}

// ---- OpenMetadata's log pager -------------------------------------------------------------------

export interface LogPage {
  ingestion_task: string;
  after?: string;
  total: string;
}

export interface PagedLog {
  text: string;
  pages: Array<{ url: string; after: string | undefined; total: string; bytes: number }>;
}

/**
 * OpenMetadata's log viewer paging a pipeline's latest run: `…/logs/{fqn}/last`, then
 * `?after=<after>` until the page is the tail (`!after || Number(after) >= Number(total)`),
 * never with a `limit`; the pages' `ingestion_task` joined with no separator (docs/API.md,
 * "OpenMetadata").
 */
export async function openMetadataLogPager(
  server: string,
  fqn: string,
  maxPages = 1000,
): Promise<PagedLog> {
  const base = `${server}/compat/openmetadata/api/v1/services/ingestionPipelines/logs/${encodeURIComponent(fqn)}/last`;
  const pages: PagedLog['pages'] = [];
  let text = '';
  let after: string | undefined;
  for (let count = 0; count < maxPages; count += 1) {
    const url = after === undefined ? base : `${base}?after=${encodeURIComponent(after)}`;
    const response = await fetch(url, { signal: AbortSignal.timeout(30_000) });
    if (!response.ok) throw new Error(`${url}: HTTP ${response.status} ${await response.text()}`);
    const page = (await response.json()) as LogPage;
    pages.push({
      url,
      after: page.after,
      total: page.total,
      bytes: Buffer.byteLength(page.ingestion_task, 'utf8'),
    });
    text += page.ingestion_task;
    const isTail = !page.after || Number(page.after) >= Number(page.total);
    if (isTail) return { text, pages };
    after = page.after;
  }
  throw new Error(`the log had more than ${maxPages} pages`);
}

// ---- ZenML's browser EventSource ----------------------------------------------------------------

export interface ReceivedEvent {
  type: string;
  id: string;
  data: string;
}

export interface ZenmlSubscriber {
  /** Every event received, of the kinds listened for and `gap` / `end`, in order. */
  readonly received: readonly ReceivedEvent[];
  readonly opens: number;
  /** Resolves on `end` (the EventSource is then closed); rejects after `timeoutMs`. */
  readonly done: Promise<void>;
  close(): void;
}

/**
 * A browser's EventSource on ZenML's run stream (docs/API.md, "ZenML"), listening with
 * addEventListener for the given kinds and for `gap`, and closing on `end`. `movedLastEventId`
 * is the id the browser last saw from the server it was connected to before (ZenML's are Redis
 * stream ids): it sends it as `Last-Event-ID` on its first request, as a browser whose server
 * was swapped under the same URL would; later requests carry the EventSource's own.
 */
export function zenmlBrowserEventSource(
  streamUrl: string,
  options: { kinds: readonly string[]; movedLastEventId?: string; timeoutMs?: number },
): ZenmlSubscriber {
  const fetchWithMovedId: FetchLike = (url, init) =>
    fetch(url, {
      ...init,
      headers: {
        ...(options.movedLastEventId ? { 'Last-Event-ID': options.movedLastEventId } : {}),
        ...init.headers,
      },
    });
  const source = new EventSource(streamUrl, { fetch: fetchWithMovedId });
  const received: ReceivedEvent[] = [];
  let opens = 0;
  source.addEventListener('open', () => (opens += 1));
  const record = (type: string) => (event: MessageEvent) =>
    received.push({ type, id: event.lastEventId, data: String(event.data) });
  for (const kind of [...options.kinds, 'gap']) source.addEventListener(kind, record(kind));
  const done = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      source.close();
      reject(new Error(`no end within ${options.timeoutMs ?? 30_000} ms`));
    }, options.timeoutMs ?? 30_000);
    source.addEventListener('end', (event) => {
      record('end')(event);
      source.close();
      clearTimeout(timer);
      resolve();
    });
  });
  done.catch(() => {});
  return {
    received,
    get opens() {
      return opens;
    },
    done,
    close: () => source.close(),
  };
}
