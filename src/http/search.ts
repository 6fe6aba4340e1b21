import type { FastifyInstance } from 'fastify';
import { search } from '../engine/search.js';
import { TailwaterError } from '../model/errors.js';
import { RUN_STATUSES, isRunStatus } from '../model/run.js';
import type { RunStatus } from '../model/run.js';
import { pipelineResource } from '../model/scopes.js';
import { planSearch } from '../model/search-query.js';
import type { SearchKind } from '../store/store.js';
import { z } from 'zod';
import { mayRead } from './auth.js';
import type { AppDeps } from './deps.js';
import {
  TIME_SPEC,
  booleanParam,
  intQuery,
  parseList,
  queryParam,
  queryValue,
  single,
  timeParam,
  timeQuery,
} from './params.js';
import { errors, json, searchPage } from './schemas/api.js';

type Query = Record<string, string | string[] | undefined>;

/** The parameters of a search (docs/SEARCH.md), each checked as its turn comes. */
const searchQuery = z.object({
  q: queryParam(
    'q',
    (query) => {
      const q = single(query, 'q');
      if (q === undefined || q === '') {
        throw new TailwaterError('TW_BAD_QUERY', 'q: give the text to search for (?q=…).');
      }
      return q;
    },
    { type: 'string', description: 'The text (3 to 1,024 characters), or an RE2 expression.' },
    { required: true },
  ),
  regex: queryParam('regex', (query) => booleanParam(query, 'regex'), {
    type: 'boolean',
    description: '`true`: `q` is a regular expression (RE2, case-insensitive).',
  }),
  kind: queryParam('kind', kindParam, {
    type: 'string',
    enum: ['log', 'event', 'all'],
    description: 'Log lines, events, or both (default).',
  }),
  pipeline: queryParam('pipeline', globParam, {
    type: 'string',
    description: 'Only pipelines this glob matches (`*` is any run of characters).',
  }),
  status: queryParam('status', statusesParam, {
    type: 'array',
    items: { type: 'string', enum: RUN_STATUSES },
    description: 'Only runs with these statuses (comma-separated).',
  }),
  since: timeQuery('since', `Only runs created at or after this. ${TIME_SPEC}`),
  until: timeQuery('until', `Only runs created before this. ${TIME_SPEC}`),
  limit: intQuery('limit', { min: 1, max: 500, default: 50 }, 'Hits per page.'),
  cursor: queryParam('cursor', (query) => single(query, 'cursor') || undefined, {
    type: 'string',
    description: 'The `next` of the page before.',
  }),
});

const searchSchema = {
  summary: "Search every run's log lines and events",
  tags: ['search'],
  querystring: searchQuery,
  response: { 200: json('A page of hits, newest runs first.', searchPage), ...errors(400) },
};

/**
 * `GET /api/v1/search` (docs/SEARCH.md): every run's log lines and events that hold the text,
 * newest runs first, a page at a time. Any valid token may search; it finds only what it may
 * read, so a hit never tells it of a pipeline it cannot see.
 */
export async function searchRoutes(app: FastifyInstance, { store }: AppDeps): Promise<void> {
  app.get(
    '/api/v1/search',
    { config: { listing: true }, schema: searchSchema },
    async (request) => {
      const query = request.query as Query;
      const param = <K extends keyof typeof searchQuery.shape & string>(name: K) =>
        queryValue(searchQuery, query, name);
      const q = param('q');
      const now = Date.now();
      const at = (spec: string | undefined) =>
        spec === undefined ? undefined : timeParam({ spec }, 'spec', now);
      const page = await search(store, {
        plan: planSearch(q, param('regex')),
        kind: param('kind'),
        pipeline: param('pipeline'),
        statuses: param('status'),
        since: at(param('since')),
        until: at(param('until')),
        limit: param('limit'),
        cursor: param('cursor'),
        mayRead: (pipeline) => mayRead(request, pipelineResource(pipeline)),
      });
      return {
        hits: page.hits,
        ...(page.next === undefined ? {} : { next: page.next }),
        index: page.index,
      };
    },
  );
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
