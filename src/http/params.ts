import type { IncomingHttpHeaders } from 'node:http';
import type { StartPosition } from '../engine/hub.js';
import type { EntryFilter } from '../engine/filter.js';
import { isStreamCursor, parseCursor, parseStreamCursor } from '../model/cursor.js';
import { TailwaterError } from '../model/errors.js';
import { validateFqn, validateLabel, validateRunId, validateTopic } from '../model/names.js';
import { parseTimeSpec } from '../model/time-spec.js';
import type { Run } from '../model/run.js';
import type { PageRequest, Store } from '../store/store.js';
import { z } from 'zod';

type Query = Record<string, string | string[] | undefined>;

export function pipelineParam(value: string): string {
  return validateFqn(value);
}

export function topicParam(value: string): string {
  return validateTopic(value);
}

/** `latest` names the pipeline's newest run; any other run id is taken as it is (in NFC). */
export async function resolveRunId(store: Store, fqn: string, runId: string): Promise<string> {
  const id = validateRunId(runId);
  if (id !== 'latest') return id;
  const latest = await store.latestRun(fqn);
  if (!latest) throw new TailwaterError('TW_RUN_NOT_FOUND', `Pipeline ${fqn} has no runs.`);
  return latest.runId;
}

/**
 * A run named without its pipeline (ZenML, Freight): by the UUID the server gave it, or by a
 * run id that only one pipeline has. A run id that several pipelines have is refused (409)
 * rather than guessed, so a client never reads or writes the wrong run.
 */
export async function findRunAnywhere(store: Store, runIdOrId: string): Promise<Run | undefined> {
  const name = validateRunId(runIdOrId);
  const runs = await store.findRuns(name);
  const byId = runs.find((run) => run.id === name);
  if (byId) return byId;
  if (runs.length > 1) {
    const pipelines = [...new Set(runs.map((run) => run.pipeline))].join(', ');
    throw new TailwaterError(
      'TW_AMBIGUOUS_RUN',
      `The run id ${name} names runs of several pipelines (${pipelines}); name the run by its UUID (the run's "id").`,
    );
  }
  return runs[0];
}

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The `Last-Event-ID` a client sent. Node reads header bytes as Latin-1, while a browser sends
 * the id it was given as UTF-8, so an id such as `commit-é-😀` arrives as mojibake: its bytes
 * are read again as UTF-8 when they are that, and taken as Latin-1 otherwise.
 */
export function lastEventId(headers: IncomingHttpHeaders): string | undefined {
  const raw = headers['last-event-id'];
  const value = Array.isArray(raw) ? raw[0] : raw;
  if (value === undefined || !/[\x80-\xff]/.test(value)) return value;
  try {
    return UTF8.decode(Buffer.from(value, 'latin1'));
  } catch {
    return value;
  }
}

/** The most values a list parameter takes (each is an index lookup). */
const MAX_LIST_VALUES = 32;

/**
 * A repeatable, comma-separable list parameter: `kinds=a,b&kinds=c` → [a, b, c]. With `commas`
 * false it is repeatable only, each value whole: a pipeline's FQN may hold a comma.
 */
export function parseList(query: Query, name: string, commas = true): string[] | undefined {
  const raw = query[name];
  if (raw === undefined) return undefined;
  const values = (Array.isArray(raw) ? raw : [raw])
    .flatMap((value) => (commas ? value.split(',') : [value]))
    .map((value) => (commas ? value.trim() : value))
    .filter((value) => value.length > 0);
  if (values.length > MAX_LIST_VALUES) {
    throw new TailwaterError(
      'TW_BAD_QUERY',
      `${name} takes at most ${MAX_LIST_VALUES} values (was ${values.length}).`,
    );
  }
  return values.length > 0 ? values : undefined;
}

/** A list of step names or correlation ids, in NFC as they are stored. */
export function parseLabelList(query: Query, name: string): string[] | undefined {
  return parseList(query, name)?.map((value) => validateLabel(name, value));
}

export function single(query: Query, name: string): string | undefined {
  const raw = query[name];
  if (Array.isArray(raw)) {
    throw new TailwaterError('TW_BAD_QUERY', `The query parameter ${name} may be given once.`);
  }
  return raw;
}

/** An integer query parameter within [min, max], or its default; out of range is 400. */
export function intParam(
  query: Query,
  name: string,
  options: { min: number; max: number; default: number },
): number {
  const raw = single(query, name);
  if (raw === undefined || raw === '') return options.default;
  if (!/^-?\d+$/.test(raw.trim())) {
    throw new TailwaterError('TW_BAD_QUERY', `${name} must be an integer (was "${raw}").`);
  }
  const value = Number(raw);
  if (value < options.min || value > options.max) {
    throw new TailwaterError(
      'TW_BAD_QUERY',
      `${name} must be between ${options.min} and ${options.max} (was ${value}).`,
    );
  }
  return value;
}

/** `true`/`1` or `false`/`0` (or nothing: false); anything else is 400. */
export function booleanParam(query: Query, name: string): boolean {
  const raw = single(query, name);
  if (raw === undefined || raw === '' || raw === 'false' || raw === '0') return false;
  if (raw === 'true' || raw === '1') return true;
  throw new TailwaterError('TW_BAD_QUERY', `${name} must be true or false (was "${raw}").`);
}

/** A boolean query parameter (`booleanParam`). */
export function booleanQuery(name: string, description: string) {
  return queryParam(name, (query) => booleanParam(query, name), {
    type: 'boolean',
    description: `${description} Default false.`,
  });
}

/** The most entries `?tail=N` replays (an index walk of N). */
export const MAX_TAIL = 100_000;

/**
 * A query parameter as a zod schema. Routes name it in `schema.querystring`, so the OpenAPI
 * document shows it, and their handlers read it with `queryValue` where its turn comes (a run is
 * found before its query is read; `Last-Event-ID` wins over `?after=`, which is then not read at
 * all), so every check stays where docs/API.md puts it. `read` is one of the helpers above, so a
 * refusal is theirs, code and message; `doc` is what the document says of the parameter, made
 * from the same options the check uses.
 */
export function queryParam<T>(
  name: string,
  read: (query: Query) => T,
  doc: Record<string, unknown>,
  options: { required?: boolean } = {},
) {
  const input = options.required ? z.unknown() : z.unknown().optional();
  return input
    .transform((raw, ctx): T => {
      try {
        return read({ [name]: raw as string | string[] | undefined });
      } catch (error) {
        if (!(error instanceof TailwaterError)) throw error;
        ctx.addIssue({ code: 'custom', message: error.message, params: { error } });
        return z.NEVER;
      }
    })
    .meta(doc);
}

/** The value of one parameter of a route's query schema, or the refusal of its check. */
export function queryValue<S extends z.ZodObject, K extends keyof S['shape'] & string>(
  schema: S,
  query: Query,
  name: K,
): z.output<S['shape'][K]> {
  const field = schema.shape[name] as z.ZodType<z.output<S['shape'][K]>>;
  const result = field.safeParse(query[name]);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const error = (issue as { params?: { error?: unknown } } | undefined)?.params?.error;
  if (error instanceof TailwaterError) throw error;
  throw new TailwaterError('TW_BAD_QUERY', `${name}: ${issue?.message ?? 'not valid'}.`);
}

/** An integer in [min, max], or its default (`intParam`). */
export function intQuery(
  name: string,
  options: { min: number; max: number; default: number },
  description: string,
) {
  return queryParam(name, (query) => intParam(query, name, options), {
    type: 'integer',
    minimum: options.min,
    maximum: options.max,
    description: `${description} Default ${options.default}.`,
  });
}

/** A repeatable, comma-separable list (`parseList`, or `parseLabelList` for names). */
/**
 * A list parameter: values as `parseList` takes them; `labels`: step names or correlation ids;
 * `fqns`: pipeline FQNs, each value one FQN, commas and all, never split.
 */
export function listQuery(
  name: string,
  description: string,
  options: { labels?: boolean; fqns?: boolean } = {},
) {
  const parse = (query: Query) => {
    if (options.fqns) return parseList(query, name, false)?.map((value) => validateFqn(value));
    return options.labels ? parseLabelList(query, name) : parseList(query, name);
  };
  const form = options.fqns
    ? 'Repeatable (each value is one FQN, commas and all)'
    : 'Repeatable or comma-separated';
  return queryParam(name, parse, {
    type: 'array',
    items: { type: 'string' },
    maxItems: MAX_LIST_VALUES,
    description: `${description} ${form}, at most ${MAX_LIST_VALUES} values.`,
  });
}

/** `?after=<cursor>&limit=N` of a listing, `limit` in [1, max]. */
export function pageQuery(limit: { default: number; max: number }) {
  return z.object({
    after: queryParam(
      'after',
      (query) => {
        const after = single(query, 'after');
        if (after !== undefined && after.length === 0) {
          throw new TailwaterError(
            'TW_BAD_CURSOR',
            'after must be the `next` of the previous page.',
          );
        }
        return after;
      },
      { type: 'string', description: 'The `next` of the previous page.' },
    ),
    limit: intQuery('limit', { min: 1, ...limit }, 'Items per page.'),
  });
}

export const TIME_SPEC =
  'An ISO-8601 time (`2026-11-30T08:00:00Z`) or a span back from now (`90s`, `30m`, `24h`, `7d`, `2w`).';

/** A time bound, checked as `timeParam` checks it; its value is taken against the request's `now`. */
export function timeQuery(name: string, description: string) {
  return queryParam(
    name,
    (query) => {
      timeParam(query, name, Date.now());
      const raw = single(query, name);
      return raw === '' ? undefined : raw;
    },
    { type: 'string', description },
  );
}

/** A time as `parseTimeSpec` reads one (epoch ms), or undefined when not given. */
export function timeParam(query: Query, name: string, now: number): number | undefined {
  const raw = single(query, name);
  if (raw === undefined || raw === '') return undefined;
  const time = parseTimeSpec(raw, now);
  if (time === undefined) {
    throw new TailwaterError(
      'TW_BAD_QUERY',
      `${name} must be an ISO-8601 time (2026-11-30T08:00:00Z) or a span back from now (30m, 24h, 7d) (was "${raw}").`,
    );
  }
  return time;
}

/** The page a listing asks for, read from its `pageQuery`. */
export function pageParams(schema: ReturnType<typeof pageQuery>, query: Query): PageRequest {
  return { after: queryValue(schema, query, 'after'), limit: queryValue(schema, query, 'limit') };
}

/** A seq cursor (`?after=`, alias `?since=`): a non-negative integer. */
function seqCursorQuery(name: 'after' | 'since') {
  return queryParam(
    name,
    (query) => {
      const raw = single(query, name);
      return raw === undefined ? undefined : parseCursor(raw, 'after cursor');
    },
    {
      type: 'string',
      pattern: '^\\s*[0-9]+\\s*$',
      description:
        name === 'after'
          ? 'Entries after this seq. Default 0.'
          : 'The same as `after` (which wins).',
    },
  );
}

/** `?after=` (alias `?since=`) of a read. */
export const seqAfterQuery = z.object({
  after: seqCursorQuery('after'),
  since: seqCursorQuery('since'),
});

/** `?after=` (alias `?since=`) as a cursor; absent means 0. */
export function afterParam(query: Query): number {
  return (
    queryValue(seqAfterQuery, query, 'after') ?? queryValue(seqAfterQuery, query, 'since') ?? 0
  );
}

/** A stream cursor: `<seq>` or `<seq>-<epoch>` (the native `id:`). */
function streamCursorQuery(name: 'after' | 'since') {
  return queryParam(
    name,
    (query) => {
      const raw = single(query, name);
      return raw === undefined ? undefined : parseStreamCursor(raw, 'after cursor');
    },
    {
      type: 'string',
      description:
        name === 'after'
          ? 'Start after this id (`<seq>-<epoch>`, or a bare seq). `Last-Event-ID` wins over it.'
          : 'The same as `after` (which wins).',
    },
  );
}

/** Where a native stream starts, by query (read by `parseStart`). */
export const streamStartQuery = z.object({
  after: streamCursorQuery('after'),
  since: streamCursorQuery('since'),
  from: queryParam(
    'from',
    (query) => {
      const from = single(query, 'from');
      if (from !== undefined && from !== 'latest' && from !== 'start') {
        throw new TailwaterError(
          'TW_BAD_QUERY',
          `from must be "latest" or "start" (was "${from}").`,
        );
      }
      return from;
    },
    {
      type: 'string',
      enum: ['latest', 'start'],
      description: '`latest`: with the next new entry.',
    },
  ),
  tail: queryParam(
    'tail',
    (query) =>
      query['tail'] === undefined
        ? undefined
        : intParam(query, 'tail', { min: 0, max: MAX_TAIL, default: 0 }),
    {
      type: 'integer',
      minimum: 0,
      maximum: MAX_TAIL,
      description: 'Start with the last N entries (of the `kinds` asked for, if any).',
    },
  ),
});

/**
 * Where a stream starts: `Last-Event-ID` wins over `?after=` / `?since=`; else `?from=latest`,
 * else `?tail=N`, else the start of the stream. A Last-Event-ID that is not a cursor of ours (a
 * browser moved over from another server sends that server's ids, such as a Redis stream id) is
 * a position this server cannot place: `gap reset` and the stream from its start. A 400 would
 * stop an EventSource for good, since it reconnects only after a 200; a malformed `?after=`,
 * which a person typed, is still a precise 400 (docs/API.md, "Streaming").
 */
export function parseStart(header: string | undefined, query: Query): StartPosition {
  if (header !== undefined && header.trim() !== '') {
    return isStreamCursor(header)
      ? { type: 'after', ...parseStreamCursor(header) }
      : { type: 'unplaceable' };
  }
  const after =
    queryValue(streamStartQuery, query, 'after') ?? queryValue(streamStartQuery, query, 'since');
  if (after !== undefined) return { type: 'after', ...after };
  if (queryValue(streamStartQuery, query, 'from') === 'latest') return { type: 'latest' };
  const tail = queryValue(streamStartQuery, query, 'tail');
  if (tail !== undefined) return { type: 'tail', count: tail };
  return { type: 'after', seq: 0 };
}

/** What a native stream shows (read by `parseFilter`); any value within one matches. */
export const streamFilterQuery = z.object({
  kinds: listQuery('kinds', 'Only entries of these kinds.'),
  steps: listQuery('steps', 'Only entries of these steps.', { labels: true }),
  correlationIds: listQuery('correlationIds', 'Only entries with these correlation ids.', {
    labels: true,
  }),
});

export function parseFilter(query: Query): EntryFilter {
  return {
    kinds: queryValue(streamFilterQuery, query, 'kinds'),
    steps: queryValue(streamFilterQuery, query, 'steps'),
    correlationIds: queryValue(streamFilterQuery, query, 'correlationIds'),
  };
}
