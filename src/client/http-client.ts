import type { Entry, NewEvent } from '../model/entry.js';
import type { PipelineSummary, Run, RunStatus } from '../model/run.js';
import type { SearchPage } from '../model/search-result.js';
import { TailwaterClientError } from './errors.js';
import { envVar } from './portable.js';

export interface ClientOptions {
  /** Base URL of the server; default `TAILWATER_SERVER` or http://127.0.0.1:8585. */
  server?: string | undefined;
  /** Bearer token; default `TAILWATER_TOKEN`. */
  token?: string | undefined;
  /** Per-request timeout in milliseconds (default 30 s). */
  timeoutMs?: number | undefined;
}

/** Where events go: a pipeline run, or a topic. */
export type Target = { pipeline: string; runId: string } | { topic: string };

export interface AppendLogResult {
  seq: number;
  firstSeq: number;
  offset: number;
  size: number;
  duplicate: boolean;
}

export interface AppendEventsResult {
  first: number;
  last: number;
  duplicates: number;
  seqs: number[];
}

export function resolveServer(server?: string): string {
  return (server ?? envVar('TAILWATER_SERVER') ?? 'http://127.0.0.1:8585').replace(/\/+$/, '');
}

export function runPath(pipeline: string, runId: string): string {
  return `/api/v1/pipelines/${encodeURIComponent(pipeline)}/runs/${encodeURIComponent(runId)}`;
}

export function targetPath(target: Target): string {
  return 'topic' in target
    ? `/api/v1/topics/${encodeURIComponent(target.topic)}`
    : runPath(target.pipeline, target.runId);
}

/** What one pipeline's history holds (`GET /api/v1/stats`). */
export interface PipelineStats {
  pipeline: string;
  runs: number;
  logBytes: number;
}

/** Where the history's bytes are (`GET /api/v1/stats`, admin tokens; docs/STORAGE.md). */
export interface StorageStats {
  hotLogBytes: number;
  sealedRawBytes: number;
  sealedBytes: number;
  segments: number;
}

export interface SearchOptions {
  regex?: boolean | undefined;
  /** A glob over pipeline FQNs (`etl.*`). */
  pipeline?: string | undefined;
  status?: readonly RunStatus[] | undefined;
  /** Run start times: ISO-8601, or a span back from now (`7d`). */
  since?: string | undefined;
  until?: string | undefined;
  kind?: 'log' | 'event' | 'all' | undefined;
  limit?: number | undefined;
  cursor?: string | undefined;
}

/**
 * Thin typed calls over Tailwater's HTTP API. Every method resolves once the server answered
 * (for writes: once the data is durable) and throws a TailwaterClientError otherwise.
 */
export class TailwaterClient {
  readonly server: string;
  readonly token: string | undefined;
  private readonly timeoutMs: number;

  constructor(options: ClientOptions = {}) {
    this.server = resolveServer(options.server);
    this.token = options.token ?? envVar('TAILWATER_TOKEN') ?? undefined;
    this.timeoutMs = options.timeoutMs ?? 30_000;
  }

  /** Headers every request carries (the token, if any). */
  headers(extra: Record<string, string> = {}): Record<string, string> {
    return this.token ? { authorization: `Bearer ${this.token}`, ...extra } : extra;
  }

  appendLog(
    pipeline: string,
    runId: string,
    text: string,
    options: { step?: string | undefined; id?: string | undefined } = {},
  ): Promise<AppendLogResult> {
    return this.request('POST', `${runPath(pipeline, runId)}/logs`, { text, ...options });
  }

  appendEvents(target: Target, events: readonly NewEvent[]): Promise<AppendEventsResult> {
    return this.request('POST', `${targetPath(target)}/events`, { events });
  }

  setStatus(
    pipeline: string,
    runId: string,
    status: RunStatus,
    meta?: Record<string, unknown>,
  ): Promise<Run> {
    return this.request('PUT', runPath(pipeline, runId), meta ? { status, meta } : { status });
  }

  getRun(pipeline: string, runId: string): Promise<Run> {
    return this.request('GET', runPath(pipeline, runId));
  }

  cancel(pipeline: string, runId: string): Promise<Run> {
    return this.request('POST', `${runPath(pipeline, runId)}/cancel`);
  }

  /** Every pipeline, page after page. */
  async listPipelines(): Promise<PipelineSummary[]> {
    const pipelines: PipelineSummary[] = [];
    let after: string | undefined;
    do {
      const query = `?limit=1000${after === undefined ? '' : `&after=${encodeURIComponent(after)}`}`;
      const page = await this.request<{ pipelines: PipelineSummary[]; next?: string }>(
        'GET',
        `/api/v1/pipelines${query}`,
      );
      pipelines.push(...page.pipelines);
      after = page.next;
    } while (after !== undefined);
    return pipelines;
  }

  /** Runs and log bytes of every pipeline the token may read, page after page. */
  async pipelineStats(): Promise<PipelineStats[]> {
    return (await this.stats()).pipelines;
  }

  /** Every page of the statistics, and the storage figures (given to admin tokens). */
  async stats(): Promise<{ pipelines: PipelineStats[]; storage?: StorageStats }> {
    const pipelines: PipelineStats[] = [];
    let storage: StorageStats | undefined;
    let after: string | undefined;
    do {
      const query = `?limit=1000${after === undefined ? '' : `&after=${encodeURIComponent(after)}`}`;
      const page = await this.request<{
        pipelines: PipelineStats[];
        storage?: StorageStats;
        next?: string;
      }>('GET', `/api/v1/stats${query}`);
      pipelines.push(...page.pipelines);
      storage ??= page.storage;
      after = page.next;
    } while (after !== undefined);
    return storage === undefined ? { pipelines } : { pipelines, storage };
  }

  async listRuns(
    pipeline: string,
    options: { status?: RunStatus; limit?: number } = {},
  ): Promise<Run[]> {
    const query = new URLSearchParams();
    if (options.status) query.set('status', options.status);
    if (options.limit) query.set('limit', String(options.limit));
    const suffix = query.size > 0 ? `?${query}` : '';
    return (
      await this.request<{ runs: Run[] }>(
        'GET',
        `/api/v1/pipelines/${encodeURIComponent(pipeline)}/runs${suffix}`,
      )
    ).runs;
  }

  /**
   * One page of a pipeline's runs, newest first; `after` is the last page's `next`. `since` and
   * `until` take an ISO-8601 time or a span back from now (`7d`), as the API does.
   */
  runsPage(pipeline: string, options: RunsPageOptions = {}): Promise<RunsPage> {
    return this.request(
      'GET',
      `/api/v1/pipelines/${encodeURIComponent(pipeline)}/runs${queryOf(options)}`,
    );
  }

  /** One page of pipelines by FQN; `name` is text the FQN holds, or a glob with `*`. */
  pipelinesPage(options: PipelinesPageOptions = {}): Promise<PipelinesPage> {
    return this.request('GET', `/api/v1/pipelines${queryOf(options)}`);
  }

  /** One page of a search across every run (docs/SEARCH.md); `cursor` is the last page's `next`. */
  search(q: string, options: SearchOptions = {}): Promise<SearchPage> {
    const query = new URLSearchParams({ q });
    for (const [name, value] of Object.entries(options)) {
      if (value === undefined) continue;
      query.set(name, Array.isArray(value) ? value.join(',') : String(value));
    }
    return this.request('GET', `/api/v1/search?${query}`);
  }

  async entries(
    target: Target,
    after = 0,
    limit = 1000,
  ): Promise<{ entries: Entry[]; next: number; hasMore: boolean }> {
    return this.request('GET', `${targetPath(target)}/entries?after=${after}&limit=${limit}`);
  }

  /**
   * The last `count` lines of a run's log (`log.txt?lines=-<count>`: as `tail -n` counts them,
   * a last line without a line feed included) and the cursor of the log's end as it stood:
   * stream the run with `after` set to it for everything written since, once.
   */
  async lastLogLines(
    pipeline: string,
    runId: string,
    count: number,
  ): Promise<{ text: string; cursor: string }> {
    const path = `${runPath(pipeline, runId)}/log.txt?lines=-${count}`;
    const { response, text } = await this.send('GET', path);
    // 416: the log has no lines (or none were asked for); its end is still named.
    if (!response.ok && response.status !== 416) throw errorFromResponse(response, text);
    const cursor = response.headers.get('tailwater-log-cursor');
    if (cursor === null) {
      throw new TailwaterClientError(
        `${this.server} answered GET ${path} without a Tailwater-Log-Cursor; is it an older Tailwater server?`,
        response.status,
      );
    }
    return { text: response.ok ? text : '', cursor };
  }

  async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    const { response, text } = await this.send(method, path, body);
    if (!response.ok) throw errorFromResponse(response, text);
    try {
      return (text ? JSON.parse(text) : undefined) as T;
    } catch {
      throw new TailwaterClientError(
        `${this.server} answered ${method} ${path} with something other than JSON; is it a Tailwater server?`,
        response.status,
      );
    }
  }

  /** One request and its whole answer; a connection that fails is an error of status 0. */
  private async send(
    method: string,
    path: string,
    body?: unknown,
  ): Promise<{ response: Response; text: string }> {
    let response: Response;
    try {
      response = await fetch(`${this.server}${path}`, {
        method,
        headers: this.headers(body === undefined ? {} : { 'content-type': 'application/json' }),
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (error) {
      throw new TailwaterClientError(
        `Cannot reach the Tailwater server at ${this.server}: ${describeFetchError(error)}`,
        0,
      );
    }
    let text: string;
    try {
      text = await response.text();
    } catch (error) {
      // The connection was cut (or timed out) while the answer was arriving.
      throw new TailwaterClientError(
        `Lost the connection to the Tailwater server at ${this.server}: ${describeFetchError(error)}`,
        0,
      );
    }
    return { response, text };
  }
}

export function errorFromResponse(response: Response, text: string): TailwaterClientError {
  let code: string | undefined;
  let message = `${response.status} ${response.statusText}`;
  try {
    const body = JSON.parse(text) as { error?: { code?: string; message?: string } };
    code = body.error?.code;
    if (body.error?.message) message = body.error.message;
  } catch {
    // not a Tailwater error body
  }
  const retryAfter = Number(response.headers.get('retry-after'));
  return new TailwaterClientError(
    message,
    response.status,
    code,
    Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter : undefined,
  );
}

export function describeFetchError(error: unknown): string {
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  return cause?.code ?? cause?.message ?? (error as Error).message ?? String(error);
}

export interface RunsPageOptions {
  status?: RunStatus | undefined;
  since?: string | undefined;
  until?: string | undefined;
  limit?: number | undefined;
  after?: string | undefined;
}

export interface RunsPage {
  runs: Run[];
  next?: string;
}

export interface PipelinesPageOptions {
  name?: string | undefined;
  status?: RunStatus | undefined;
  limit?: number | undefined;
  after?: string | undefined;
}

export interface PipelinesPage {
  pipelines: PipelineSummary[];
  next?: string;
}

/** `?a=1&b=2` of the options given (none: ''). */
function queryOf(options: object): string {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(options)) {
    if (value !== undefined && value !== '') query.set(name, String(value));
  }
  return query.size > 0 ? `?${query}` : '';
}
