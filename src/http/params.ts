import type { IncomingHttpHeaders } from 'node:http';
import type { StartPosition } from '../engine/hub.js';
import type { EntryFilter } from '../engine/filter.js';
import { isStreamCursor, parseCursor, parseStreamCursor } from '../model/cursor.js';
import { TailwaterError } from '../model/errors.js';
import { validateFqn, validateLabel, validateRunId, validateTopic } from '../model/names.js';
import type { Run } from '../model/run.js';
import type { PageRequest, Store } from '../store/store.js';

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

/** A repeatable, comma-separable list parameter: `kinds=a,b&kinds=c` → [a, b, c]. */
export function parseList(query: Query, name: string): string[] | undefined {
  const raw = query[name];
  if (raw === undefined) return undefined;
  const values = (Array.isArray(raw) ? raw : [raw])
    .flatMap((value) => value.split(','))
    .map((value) => value.trim())
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

/** `?after=<cursor>&limit=N` of a listing. */
export function pageParams(query: Query, options: { default: number; max: number }): PageRequest {
  const after = single(query, 'after');
  if (after !== undefined && after.length === 0) {
    throw new TailwaterError('TW_BAD_CURSOR', 'after must be the `next` of the previous page.');
  }
  return { after, limit: intParam(query, 'limit', { min: 1, ...options }) };
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

/** `?after=` (alias `?since=`) as a cursor; absent means 0. */
export function afterParam(query: Query): number {
  const raw = single(query, 'after') ?? single(query, 'since');
  return raw === undefined ? 0 : parseCursor(raw, 'after cursor');
}

/** The most entries `?tail=N` replays (an index walk of N). */
export const MAX_TAIL = 100_000;

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
  const after = single(query, 'after') ?? single(query, 'since');
  if (after !== undefined) return { type: 'after', ...parseStreamCursor(after, 'after cursor') };
  const from = single(query, 'from');
  if (from !== undefined) {
    if (from !== 'latest' && from !== 'start') {
      throw new TailwaterError('TW_BAD_QUERY', `from must be "latest" or "start" (was "${from}").`);
    }
    if (from === 'latest') return { type: 'latest' };
  }
  if (query['tail'] !== undefined) {
    return { type: 'tail', count: intParam(query, 'tail', { min: 0, max: MAX_TAIL, default: 0 }) };
  }
  return { type: 'after', seq: 0 };
}

export function parseFilter(query: Query): EntryFilter {
  return {
    kinds: parseList(query, 'kinds'),
    steps: parseLabelList(query, 'steps'),
    correlationIds: parseLabelList(query, 'correlationIds'),
  };
}
