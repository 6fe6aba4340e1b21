import type { FastifyInstance } from 'fastify';
import { search } from '../engine/search.js';
import { TailwaterError } from '../model/errors.js';
import { RUN_STATUSES, isRunStatus } from '../model/run.js';
import type { RunStatus } from '../model/run.js';
import { pipelineResource } from '../model/scopes.js';
import { planSearch } from '../model/search-query.js';
import { parseTimeSpec } from '../model/time-spec.js';
import type { SearchKind } from '../store/store.js';
import { mayRead } from './auth.js';
import type { AppDeps } from './deps.js';
import { intParam, parseList, single } from './params.js';

type Query = Record<string, string | string[] | undefined>;

/**
 * `GET /api/v1/search` (docs/SEARCH.md): every run's log lines and events that hold the text,
 * newest runs first, a page at a time. Any valid token may search; it finds only what it may
 * read, so a hit never tells it of a pipeline it cannot see.
 */
export async function searchRoutes(app: FastifyInstance, { store }: AppDeps): Promise<void> {
  app.get('/api/v1/search', { config: { listing: true } }, async (request) => {
    const query = request.query as Query;
    const q = single(query, 'q');
    if (q === undefined || q === '') {
      throw new TailwaterError('TW_BAD_QUERY', 'q: give the text to search for (?q=…).');
    }
    const now = Date.now();
    const page = await search(store, {
      plan: planSearch(q, booleanParam(query, 'regex')),
      kind: kindParam(query),
      pipeline: globParam(query),
      statuses: statusesParam(query),
      since: timeParam(query, 'since', now),
      until: timeParam(query, 'until', now),
      limit: intParam(query, 'limit', { min: 1, max: 500, default: 50 }),
      cursor: single(query, 'cursor') || undefined,
      mayRead: (pipeline) => mayRead(request, pipelineResource(pipeline)),
    });
    return {
      hits: page.hits,
      ...(page.next === undefined ? {} : { next: page.next }),
      index: page.index,
    };
  });
}

/** A pipeline glob: `*` any run of characters; as long as a name may be. */
function globParam(query: Query): string | undefined {
  const raw = single(query, 'pipeline');
  if (raw === undefined || raw === '' || raw === '*') return undefined;
  if (Buffer.byteLength(raw, 'utf8') > 256) {
    throw new TailwaterError('TW_BAD_QUERY', 'pipeline: a glob of 256 bytes at most.');
  }
  return raw.normalize('NFC');
}

function booleanParam(query: Query, name: string): boolean {
  const raw = single(query, name);
  if (raw === undefined || raw === '' || raw === 'false' || raw === '0') return false;
  if (raw === 'true' || raw === '1') return true;
  throw new TailwaterError('TW_BAD_QUERY', `${name} must be true or false (was "${raw}").`);
}

function kindParam(query: Query): SearchKind | undefined {
  const raw = single(query, 'kind');
  if (raw === undefined || raw === '' || raw === 'all') return undefined;
  if (raw === 'log' || raw === 'event') return raw;
  throw new TailwaterError('TW_BAD_QUERY', `kind must be log, event or all (was "${raw}").`);
}

function statusesParam(query: Query): RunStatus[] | undefined {
  const values = parseList(query, 'status');
  const bad = values?.find((value) => !isRunStatus(value));
  if (bad !== undefined) {
    throw new TailwaterError(
      'TW_BAD_QUERY',
      `status must be one of ${RUN_STATUSES.join(', ')} (was "${bad}").`,
    );
  }
  return values as RunStatus[] | undefined;
}

function timeParam(query: Query, name: string, now: number): number | undefined {
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
