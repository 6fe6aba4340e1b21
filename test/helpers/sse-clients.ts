import { fetchEventSource } from '@microsoft/fetch-event-source';
import type { EventSourceMessage } from '@microsoft/fetch-event-source';
import { EventSource as EventSourcePackage } from 'eventsource';
import type { Page } from 'playwright-core';
import { Agent, EventSource as UndiciEventSource } from 'undici';
import type { Dispatcher } from 'undici';
import type { LogStreamEvent } from './original-clients.js';

// The SSE clients a user of Tailwater picks, each reading one stream as it would in an app and
// resuming by itself when its connection drops: the `eventsource` package, undici's
// EventSource, @microsoft/fetch-event-source, Chromium's own EventSource, and the seed
// systems' own UIs (OpenMetadata's log tail, which resumes with `?after=`, and Freight's log
// poller). Every reader records the frames it was handed, in order, across its connections, so
// a test can hold them against the store (docs/API.md, "Streaming" and the dialects).

/** One SSE frame as a client handed it over. `event` is `message` for an unnamed frame. */
export interface Frame {
  /** The frame's SSE id, when it had one. */
  id: string | undefined;
  event: string;
  data: string;
  /** Which of the client's connections delivered it: 1, 2… */
  connection: number;
}

/**
 * What a stream's frames mean to a reader: which are entries (counted, for the cut), and which
 * frame ends the read. Plain data, so Chromium's page applies the same rules.
 */
export interface FrameRules {
  /** Named frames that are not entries (`end`, `gap`, `connected`…). */
  control: readonly string[];
  /** When set, the entries are the unnamed frames whose JSON `eventType` is this (OpenMetadata). */
  entryEventType?: string;
  /** A frame of one of these events ends the read. */
  endEvents: readonly string[];
  /** So does an unnamed frame whose JSON `eventType` is one of these. */
  endEventTypes: readonly string[];
  /** So does this many entries, for a stream that never ends (Iceberg's). */
  endAfterEntries?: number;
}

export interface StreamRead {
  frames: Frame[];
  /** Connections that opened a stream (an HTTP 200 with text/event-stream). */
  opens: number;
  /** Entries received when the connection was cut (undefined: it was never cut). */
  cutAfter: number | undefined;
  /** The `Last-Event-ID` of each request that carried one, as the client sent it. */
  lastEventIds: string[];
  /** Connection errors the client reported (it reconnects after each). */
  errors: number;
  /** The read did not end within its time. */
  timedOut: boolean;
  /** Why the client gave up for good, if it did. */
  failure: string | undefined;
  /**
   * Messages with no data, no event and no id that the client handed over and the reader
   * skipped: @microsoft/fetch-event-source hands one over for a frame of only `retry:`, where
   * an EventSource dispatches nothing.
   */
  skipped: number;
  /** From the start of the read to its end. */
  elapsedMs: number;
}

export interface StreamPlan {
  url: string;
  /** The named events to listen for: an EventSource hands over only those it is asked for. */
  events: readonly string[];
  rules: FrameRules;
  /** Cut the connection once this many entries have arrived. */
  cutAt: number;
  cut(): void;
  timeoutMs: number;
}

export interface ClientHandle<T> {
  /** Resolves once the first connection is open (the read is under way). */
  opened: Promise<void>;
  result: Promise<T>;
}

/** Whether a frame is an entry and whether it ends the read, by `rules`. */
export function classify(
  rules: FrameRules,
  frame: Frame,
  entriesBefore: number,
): { entry: boolean; last: boolean } {
  let eventType: unknown;
  if (frame.event === 'message' && (rules.entryEventType || rules.endEventTypes.length > 0)) {
    try {
      eventType = (JSON.parse(frame.data) as { eventType?: unknown }).eventType;
    } catch {
      eventType = undefined;
    }
  }
  const entry = rules.entryEventType
    ? eventType === rules.entryEventType
    : !rules.control.includes(frame.event);
  const entries = entriesBefore + (entry ? 1 : 0);
  const last =
    rules.endEvents.includes(frame.event) ||
    (typeof eventType === 'string' && rules.endEventTypes.includes(eventType)) ||
    (rules.endAfterEntries !== undefined && entries >= rules.endAfterEntries);
  return { entry, last };
}

/**
 * The bookkeeping every Node reader shares: frames in order, the one cut after `cutAt`
 * entries, the end by the rules, and a time limit after which the read ends as it stands.
 */
class Recorder {
  readonly frames: Frame[] = [];
  opens = 0;
  errors = 0;
  entries = 0;
  cutAfter: number | undefined;
  finished = false;
  failure: string | undefined;
  skipped = 0;
  readonly lastEventIds: string[] = [];
  readonly opened: Promise<void>;
  readonly result: Promise<StreamRead>;
  private markOpened!: () => void;
  private resolve!: (read: StreamRead) => void;
  private readonly timer: NodeJS.Timeout;
  private readonly startedAt = Date.now();

  constructor(
    private readonly plan: StreamPlan,
    private readonly stop: () => void,
  ) {
    this.opened = new Promise((resolve) => (this.markOpened = resolve));
    this.result = new Promise((resolve) => (this.resolve = resolve));
    this.timer = setTimeout(() => this.finish(true), plan.timeoutMs);
  }

  open(): void {
    this.opens += 1;
    this.markOpened();
  }

  /** Takes a frame; answers whether the read is over (the caller then stops its client). */
  frame(received: Omit<Frame, 'connection'>): boolean {
    if (this.finished) return true;
    const frame = { ...received, connection: this.opens };
    this.frames.push(frame);
    const { entry, last } = classify(this.plan.rules, frame, this.entries);
    if (entry) this.entries += 1;
    if (this.cutAfter === undefined && this.entries >= this.plan.cutAt) {
      this.cutAfter = this.entries;
      this.plan.cut();
    }
    if (last) this.finish(false);
    return this.finished;
  }

  /** The client gave up for good (an EventSource that closed itself, say). */
  fail(why: string): void {
    this.failure ??= why;
    this.finish(false);
  }

  finish(timedOut: boolean): void {
    if (this.finished) return;
    this.finished = true;
    clearTimeout(this.timer);
    this.stop();
    this.resolve({
      frames: this.frames,
      opens: this.opens,
      cutAfter: this.cutAfter,
      lastEventIds: this.lastEventIds,
      errors: this.errors,
      timedOut,
      failure: this.failure,
      skipped: this.skipped,
      elapsedMs: Date.now() - this.startedAt,
    });
  }
}

/** A fetch that notes the `Last-Event-ID` each request carries. */
function fetchNotingLastEventId(recorder: Recorder): typeof fetch {
  return (input, init) => {
    const id = new Headers(init?.headers).get('last-event-id');
    if (id !== null) recorder.lastEventIds.push(id);
    return fetch(input, init);
  };
}

/** An EventSource's message event, as both Node EventSources hand it over. */
interface SseMessageEvent {
  data?: unknown;
  lastEventId?: string;
}

function frameOf(name: string, event: SseMessageEvent): Omit<Frame, 'connection'> | undefined {
  // A server `event: error` frame is a MessageEvent; a connection error is a plain event.
  if (typeof event.data !== 'string') return undefined;
  return { id: event.lastEventId || undefined, event: name, data: event.data };
}

/** The `eventsource` package (v4): an EventSource for Node on the global fetch. */
export function readWithEventsourcePackage(plan: StreamPlan): ClientHandle<StreamRead> {
  // The recorder closes the source only once a frame (or the time limit) ends the read.
  const recorder = new Recorder(plan, () => es.close());
  const es = new EventSourcePackage(plan.url, { fetch: fetchNotingLastEventId(recorder) });
  // The first request carries no Last-Event-ID: what is noted is the reconnects'.
  es.addEventListener('open', () => recorder.open());
  for (const name of new Set(['message', 'error', ...plan.events])) {
    es.addEventListener(name, (event) => {
      const frame = frameOf(name, event as SseMessageEvent);
      if (frame) recorder.frame(frame);
      else if (name === 'error') {
        recorder.errors += 1;
        if (es.readyState === es.CLOSED) recorder.fail('the EventSource closed itself');
      }
    });
  }
  return { opened: recorder.opened, result: recorder.result };
}

/** The value of a header in the forms undici hands a dispatcher (an object or name/value pairs). */
function headerOf(
  headers: Dispatcher.DispatchOptions['headers'],
  name: string,
): string | undefined {
  if (!headers) return undefined;
  const pairs: Array<[string, unknown]> = Array.isArray(headers)
    ? Array.from({ length: headers.length / 2 }, (_, i) => [headers[2 * i]!, headers[2 * i + 1]])
    : Symbol.iterator in headers
      ? [...(headers as Iterable<[string, unknown]>)]
      : Object.entries(headers);
  const value = pairs.find(([key]) => key.toLowerCase() === name)?.[1];
  return typeof value === 'string' ? value : undefined;
}

/** An undici Agent that notes the `Last-Event-ID` of each request it sends. */
class LastEventIdNotingAgent extends Agent {
  constructor(private readonly note: (id: string) => void) {
    super();
  }

  override dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler) {
    const id = headerOf(options.headers, 'last-event-id');
    if (id !== undefined) this.note(id);
    return super.dispatch(options, handler);
  }
}

/** undici's EventSource (the undici package, v7), with the Agent above as its dispatcher. */
export function readWithUndici(plan: StreamPlan): ClientHandle<StreamRead> {
  const agent = new LastEventIdNotingAgent((id) => recorder.lastEventIds.push(id));
  const recorder = new Recorder(plan, () => {
    es.close();
    void agent.close();
  });
  const es = new UndiciEventSource(plan.url, { node: { dispatcher: agent } });
  es.addEventListener('open', () => recorder.open());
  for (const name of new Set(['message', 'error', ...plan.events])) {
    es.addEventListener(name, (event) => {
      const frame = frameOf(name, event as unknown as SseMessageEvent);
      if (frame) recorder.frame(frame);
      else if (name === 'error') {
        recorder.errors += 1;
        if (es.readyState === es.CLOSED) recorder.fail('the EventSource closed itself');
      }
    });
  }
  return { opened: recorder.opened, result: recorder.result };
}

// @microsoft/fetch-event-source is written for a page: it calls window.setTimeout,
// window.clearTimeout and document.removeEventListener (and, unless openWhenHidden,
// document.addEventListener and document.hidden). This is all of it, for Node, while a reader
// runs; it is taken away again when the last one ends. (The eventsource package, reading
// meanwhile, then asks fetch for `credentials: 'same-origin'`, which changes nothing here.)
let pageShimUsers = 0;

function installPageShim(): () => void {
  const scope = globalThis as Record<string, unknown>;
  if (pageShimUsers === 0) {
    if ('window' in scope || 'document' in scope) {
      throw new Error('window or document already exist: this is not plain Node');
    }
    scope['window'] = { setTimeout, clearTimeout, fetch };
    scope['document'] = {
      hidden: false,
      addEventListener: () => undefined,
      removeEventListener: () => undefined,
    };
  }
  pageShimUsers += 1;
  let removed = false;
  return () => {
    if (removed) return;
    removed = true;
    pageShimUsers -= 1;
    if (pageShimUsers === 0) {
      delete scope['window'];
      delete scope['document'];
    }
  };
}

class RetriableClose extends Error {}
class FatalAnswer extends Error {}

/**
 * @microsoft/fetch-event-source as its README has it used: `openWhenHidden`, an `onopen` that
 * refuses anything but a 200 event stream, an `onclose` that throws when the body ended before
 * the stream did (so the library retries), and an `onerror` that answers the retry delay. The
 * library keeps the last id itself and sends it as Last-Event-ID on each retry.
 */
export function readWithFetchEventSource(
  plan: StreamPlan,
  retryMs: number,
): ClientHandle<StreamRead> {
  const controller = new AbortController();
  const removeShim = installPageShim();
  const recorder = new Recorder(plan, () => {
    controller.abort();
    removeShim();
  });
  void fetchEventSource(plan.url, {
    signal: controller.signal,
    openWhenHidden: true,
    fetch: fetchNotingLastEventId(recorder),
    async onopen(response) {
      const type = response.headers.get('content-type') ?? '';
      if (response.status !== 200 || !type.startsWith('text/event-stream')) {
        throw new FatalAnswer(`HTTP ${response.status} ${type}`);
      }
      recorder.open();
    },
    onmessage(message: EventSourceMessage) {
      // A frame of only `retry:` comes as an empty message, which an app must skip.
      if (message.data === '' && message.event === '' && message.id === '') {
        recorder.skipped += 1;
        return;
      }
      recorder.frame({
        id: message.id || undefined,
        event: message.event || 'message',
        data: message.data,
      });
    },
    onclose() {
      if (!recorder.finished) throw new RetriableClose('the body ended before the stream did');
    },
    onerror(error) {
      if (error instanceof FatalAnswer) throw error;
      recorder.errors += 1;
      return retryMs;
    },
  }).catch((error: unknown) => recorder.fail(`fetchEventSource gave up: ${String(error)}`));
  return { opened: recorder.opened, result: recorder.result };
}

/** A Chromium EventSource as the page sees it (the test's TypeScript has no DOM types). */
interface PageEventSource {
  readonly readyState: number;
  addEventListener(
    type: string,
    listener: (event: { data?: unknown; lastEventId?: string }) => void,
  ): void;
  close(): void;
}

interface PageReadArgs {
  url: string;
  events: readonly string[];
  rules: FrameRules;
  cutAt: number;
  timeoutMs: number;
}

type PageRead = Omit<StreamRead, 'lastEventIds' | 'elapsedMs'>;

/**
 * Runs in the page: an EventSource on `url`, recording every frame, asking the test to cut the
 * connection after `cutAt` entries, and closing itself at the end of the stream (an EventSource
 * otherwise reconnects for ever). Self-contained, since Playwright sends it as source text.
 */
function readInPage(args: PageReadArgs): Promise<PageRead> {
  const page = globalThis as unknown as {
    EventSource: new (url: string) => PageEventSource;
    twOpened(): Promise<void>;
    twCut(): Promise<void>;
  };
  return new Promise((resolve) => {
    const frames: Frame[] = [];
    let opens = 0;
    let errors = 0;
    let entries = 0;
    let cutAfter: number | undefined;
    let finished = false;
    const source = new page.EventSource(args.url);
    const finish = (timedOut: boolean, failure?: string) => {
      if (finished) return;
      finished = true;
      source.close();
      clearTimeout(timer);
      resolve({ frames, opens, cutAfter, errors, timedOut, failure, skipped: 0 });
    };
    const timer = setTimeout(() => finish(true), args.timeoutMs);
    source.addEventListener('open', () => {
      opens += 1;
      if (opens === 1) void page.twOpened();
    });
    const rules = args.rules;
    const names = Array.from(new Set(['message', 'error', ...args.events]));
    for (const name of names) {
      source.addEventListener(name, (event) => {
        if (finished) return;
        if (typeof event.data !== 'string') {
          if (name === 'error') errors += 1;
          // readyState CLOSED: the EventSource gave up for good.
          if (name === 'error' && source.readyState === 2) finish(false, 'the EventSource closed');
          return;
        }
        const frame = {
          id: event.lastEventId || undefined,
          event: name,
          data: event.data,
          connection: opens,
        };
        frames.push(frame);
        // The same rules as classify() in Node.
        let eventType: unknown;
        if (name === 'message' && (rules.entryEventType || rules.endEventTypes.length > 0)) {
          try {
            eventType = (JSON.parse(frame.data) as { eventType?: unknown }).eventType;
          } catch {
            eventType = undefined;
          }
        }
        const entry = rules.entryEventType
          ? eventType === rules.entryEventType
          : !rules.control.includes(name);
        if (entry) entries += 1;
        if (cutAfter === undefined && entries >= args.cutAt) {
          cutAfter = entries;
          void page.twCut();
        }
        if (
          rules.endEvents.includes(name) ||
          (typeof eventType === 'string' && rules.endEventTypes.includes(eventType)) ||
          (rules.endAfterEntries !== undefined && entries >= rules.endAfterEntries)
        ) {
          finish(false);
        }
      });
    }
  });
}

/**
 * Chromium's own EventSource, in a page of the stream's origin (the proxy's: the page is the
 * server's /healthz answer, fetched through it), so the stream is same-origin and the page's
 * Content-Security-Policy (connect-src 'self') allows it. The test cuts on the page's word;
 * the Last-Event-ID of each reconnect is read off the requests Chromium makes.
 */
export function readInChromium(page: Page, plan: StreamPlan): ClientHandle<StreamRead> {
  let markOpened!: () => void;
  const opened = new Promise<void>((resolve) => (markOpened = resolve));
  const result = (async (): Promise<StreamRead> => {
    const startedAt = Date.now();
    // In the order of the requests, whatever order their headers are read in.
    const headerReads: Array<Promise<string | undefined>> = [];
    page.on('request', (request) => {
      if (request.url() !== plan.url) return;
      headerReads.push(request.allHeaders().then((headers) => headers['last-event-id']));
    });
    await page.exposeFunction('twOpened', () => markOpened());
    await page.exposeFunction('twCut', () => plan.cut());
    await page.goto(`${new URL(plan.url).origin}/healthz`);
    const read = await page.evaluate(readInPage, {
      url: plan.url,
      events: plan.events,
      rules: plan.rules,
      cutAt: plan.cutAt,
      timeoutMs: plan.timeoutMs,
    });
    const lastEventIds = (await Promise.all(headerReads)).filter((id) => id !== undefined);
    return { ...read, lastEventIds, elapsedMs: Date.now() - startedAt };
  })();
  // A page that fails before it opens must not leave the test waiting for `opened`.
  result.catch(() => markOpened());
  return { opened, result };
}

export type { LogStreamEvent };

export interface OpenMetadataTailPlan {
  /** The stream URL, without `?after=`. */
  url: string;
  /** Cut the connection once this many `logs` events have arrived. */
  cutAt: number;
  cut(): void;
  /** The wait before reconnecting after the body ended without `complete`. */
  retryMs: number;
  maxConnections: number;
  timeoutMs: number;
}

export interface OpenMetadataTailRead {
  events: LogStreamEvent[];
  /** Which connection delivered each event: 1, 2… */
  eventConnections: number[];
  opens: number;
  cutAfter: number | undefined;
  /** The `?after=` of each reconnect. */
  afters: string[];
  errors: number;
  timedOut: boolean;
  elapsedMs: number;
}

/**
 * OpenMetadata's own browser reader (the seed's live-log tail): fetch, a reader, TextDecoder,
 * split('\n'), the `data: ` prefix, `cursor = event.after ?? cursor`. It reads no SSE ids.
 * When the body ends without `complete`, or `complete` says idleTimeout or maxDuration, it
 * tails again, and a tail sends the cursor as `?after=`; any other `complete`, or an `error`,
 * ends the read.
 */
export function tailLikeOpenMetadataUi(
  plan: OpenMetadataTailPlan,
): ClientHandle<OpenMetadataTailRead> {
  let markOpened!: () => void;
  const opened = new Promise<void>((resolve) => (markOpened = resolve));
  const result = (async (): Promise<OpenMetadataTailRead> => {
    const startedAt = Date.now();
    const deadline = startedAt + plan.timeoutMs;
    const events: LogStreamEvent[] = [];
    const eventConnections: number[] = [];
    const afters: string[] = [];
    let opens = 0;
    let errors = 0;
    let logs = 0;
    let cutAfter: number | undefined;
    let cursor: string | undefined;
    let complete = false;
    let resume = false;
    for (let connection = 0; connection < plan.maxConnections && !complete; connection += 1) {
      if (Date.now() > deadline) break;
      const controller = new AbortController();
      const timer = setTimeout(() => controller.abort(), Math.max(0, deadline - Date.now()));
      try {
        const url = new URL(plan.url);
        if (cursor) {
          url.searchParams.set('after', cursor);
          afters.push(cursor);
        }
        const response = await fetch(url, { signal: controller.signal });
        if (response.status !== 200 || !response.body) {
          throw new Error(`HTTP ${response.status}`);
        }
        opens += 1;
        markOpened();
        const reader = response.body.getReader();
        const decoder = new TextDecoder();
        let buffer = '';
        resume = false;
        while (!complete && !resume) {
          const { done, value } = await reader.read();
          if (done) break;
          buffer += decoder.decode(value, { stream: true });
          const lines = buffer.split('\n');
          buffer = lines.pop() ?? '';
          for (const line of lines) {
            if (!line.startsWith('data: ')) continue; // ids, heartbeats, blank lines
            const event = JSON.parse(line.slice(6)) as LogStreamEvent;
            events.push(event);
            eventConnections.push(opens);
            cursor = event.after ?? cursor;
            if (event.eventType === 'logs') {
              logs += 1;
              if (cutAfter === undefined && logs >= plan.cutAt) {
                cutAfter = logs;
                plan.cut();
              }
            } else if (event.reason === 'idleTimeout' || event.reason === 'maxDuration') {
              resume = true; // the UI tails again at once
              break;
            } else {
              complete = true; // any other `complete`, or `error`: the UI stops
              break;
            }
          }
        }
        if (complete || resume) controller.abort();
      } catch {
        if (controller.signal.aborted && !complete) break; // out of time
        errors += 1;
      } finally {
        clearTimeout(timer);
      }
      if (!complete && !resume) await new Promise((resolve) => setTimeout(resolve, plan.retryMs));
    }
    return {
      events,
      eventConnections,
      opens,
      cutAfter,
      afters,
      errors,
      timedOut: !complete,
      elapsedMs: Date.now() - startedAt,
    };
  })();
  result.catch(() => markOpened());
  return { opened, result };
}

/** One chunk of Freight's log answer (docs/API.md, "Freight"). */
export interface FreightChunk {
  text: string;
  date: string;
  offset: number;
  size: number;
}

export interface FreightPollPlan {
  /** `…/api/0/deploys/{app}/{env}/{number}`, without the trailing slash. */
  deployUrl: string;
  intervalMs: number;
  /** Cut once this many bytes of log have arrived. */
  cutAtBytes: number;
  cut(): void;
  maxPolls: number;
  timeoutMs: number;
}

export interface FreightPollRead {
  chunks: FreightChunk[];
  polls: number;
  /** Polls (of the log or the deploy) that failed; the next tick asks again. */
  failedPolls: number;
  /** Bytes received when the connection was cut. */
  cutAfter: number | undefined;
  /** The deploy's status at the last poll. */
  status: string | undefined;
  timedOut: boolean;
  elapsedMs: number;
}

/**
 * Freight's UI on a running deploy: every `intervalMs` it asks for the log from the
 * `nextOffset` of the previous answer (no limit: the whole rest), and for the deploy's status.
 * A poll that fails is asked again at the next tick from the same offset. Once the status has
 * left pending/in_progress, the first log answer with no chunks is the end.
 */
export function pollLikeFreightUi(plan: FreightPollPlan): ClientHandle<FreightPollRead> {
  let markOpened!: () => void;
  const opened = new Promise<void>((resolve) => (markOpened = resolve));
  const result = (async (): Promise<FreightPollRead> => {
    const startedAt = Date.now();
    const deadline = startedAt + plan.timeoutMs;
    const chunks: FreightChunk[] = [];
    let nextOffset = 0;
    let bytes = 0;
    let polls = 0;
    let failedPolls = 0;
    let cutAfter: number | undefined;
    let status: string | undefined;
    let over = false;
    for (; polls < plan.maxPolls && !over && Date.now() < deadline; polls += 1) {
      if (polls > 0) await new Promise((resolve) => setTimeout(resolve, plan.intervalMs));
      const finishedBefore = status !== undefined && !['pending', 'in_progress'].includes(status);
      try {
        const log = await fetch(`${plan.deployUrl}/log/?offset=${nextOffset}`, {
          signal: AbortSignal.timeout(Math.max(1, deadline - Date.now())),
        });
        if (log.status !== 200) throw new Error(`HTTP ${log.status}`);
        const page = (await log.json()) as { nextOffset: number; chunks: FreightChunk[] };
        markOpened();
        chunks.push(...page.chunks);
        for (const chunk of page.chunks) bytes += chunk.size;
        nextOffset = page.nextOffset;
        if (finishedBefore && page.chunks.length === 0) over = true;
        const deploy = await fetch(`${plan.deployUrl}/`, {
          signal: AbortSignal.timeout(Math.max(1, deadline - Date.now())),
        });
        if (deploy.status !== 200) throw new Error(`HTTP ${deploy.status}`);
        status = ((await deploy.json()) as { status: string }).status;
      } catch {
        failedPolls += 1;
      }
      if (cutAfter === undefined && bytes >= plan.cutAtBytes) {
        cutAfter = bytes;
        plan.cut();
      }
    }
    return {
      chunks,
      polls,
      failedPolls,
      cutAfter,
      status,
      timedOut: !over,
      elapsedMs: Date.now() - startedAt,
    };
  })();
  result.catch(() => markOpened());
  return { opened, result };
}
