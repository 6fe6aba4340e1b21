import type { StartPosition } from '../engine/hub.js';
import type { EntryFilter } from '../engine/filter.js';
import { parseCursor } from '../model/cursor.js';
import { TailwaterError } from '../model/errors.js';
import { validateFqn, validateRunId, validateTopic } from '../model/names.js';
import type { Store } from '../store/store.js';

type Query = Record<string, string | string[] | undefined>;

export function pipelineParam(value: string): string {
  return validateFqn(value);
}

export function topicParam(value: string): string {
  return validateTopic(value);
}

/** `latest` names the pipeline's newest run; any other run id is taken as it is. */
export async function resolveRunId(store: Store, fqn: string, runId: string): Promise<string> {
  validateRunId(runId);
  if (runId !== 'latest') return runId;
  const latest = await store.latestRun(fqn);
  if (!latest) throw new TailwaterError('TW_RUN_NOT_FOUND', `Pipeline ${fqn} has no runs.`);
  return latest.runId;
}

/**
 * A run named without its pipeline (ZenML, Freight): by run id across pipelines, or by the UUID
 * the server gave it; the newest match wins.
 */
export async function findRunAnywhere(store: Store, runIdOrId: string) {
  validateRunId(runIdOrId);
  return (await store.findRuns(runIdOrId))[0];
}

/** A repeatable, comma-separable list parameter: `kinds=a,b&kinds=c` → [a, b, c]. */
export function parseList(query: Query, name: string): string[] | undefined {
  const raw = query[name];
  if (raw === undefined) return undefined;
  const values = (Array.isArray(raw) ? raw : [raw])
    .flatMap((value) => value.split(','))
    .map((value) => value.trim())
    .filter((value) => value.length > 0);
  return values.length > 0 ? values : undefined;
}

function single(query: Query, name: string): string | undefined {
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

/**
 * Where a stream starts: `Last-Event-ID` wins over `?after=` / `?since=`; else `?from=latest`,
 * else `?tail=N`, else the start of the stream.
 */
export function parseStart(
  lastEventId: string | string[] | undefined,
  query: Query,
): StartPosition {
  const header = Array.isArray(lastEventId) ? lastEventId[0] : lastEventId;
  if (header !== undefined && header.trim() !== '') {
    return { type: 'after', seq: parseCursor(header, 'Last-Event-ID') };
  }
  const after = single(query, 'after') ?? single(query, 'since');
  if (after !== undefined) return { type: 'after', seq: parseCursor(after, 'after cursor') };
  const from = single(query, 'from');
  if (from !== undefined) {
    if (from !== 'latest' && from !== 'start') {
      throw new TailwaterError('TW_BAD_QUERY', `from must be "latest" or "start" (was "${from}").`);
    }
    if (from === 'latest') return { type: 'latest' };
  }
  if (query['tail'] !== undefined) {
    return { type: 'tail', count: intParam(query, 'tail', { min: 0, max: 1_000_000, default: 0 }) };
  }
  return { type: 'after', seq: 0 };
}

export function parseFilter(query: Query): EntryFilter {
  return {
    kinds: parseList(query, 'kinds'),
    steps: parseList(query, 'steps'),
    correlationIds: parseList(query, 'correlationIds'),
  };
}
