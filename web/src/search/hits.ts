import type { SearchHit } from '../../../src/model/search-result.js';
import { runHref } from '../format.js';

/** What the search page asks for, as its address says it (`/ui/search?q=…&regex=true&pipeline=…`). */
export interface SearchParams {
  q: string;
  regex: boolean;
  /** A glob over pipeline FQNs, or '' for every pipeline. */
  pipeline: string;
}

export function searchParamsOf(search: string): SearchParams {
  const params = new URLSearchParams(search);
  return {
    q: params.get('q') ?? '',
    regex: params.get('regex') === 'true',
    pipeline: params.get('pipeline') ?? '',
  };
}

/** The search page's address for `params`. */
export function searchHref({ q, regex, pipeline }: SearchParams): string {
  const query = new URLSearchParams({ q });
  if (regex) query.set('regex', 'true');
  if (pipeline !== '') query.set('pipeline', pipeline);
  return `/ui/search?${query}`;
}

const runKeyOf = (hit: SearchHit) => `${hit.pipeline}\u0000${hit.runId}`;

/** One hit's identity: a run's line, or a run's event. */
export const hitKey = (hit: SearchHit) =>
  `${runKeyOf(hit)}\u0000${hit.kind}\u0000${hit.line ?? `seq ${hit.seq}`}`;

/** Where a hit opens: the run view at its line (`#L<n>`), or the run view for an event. */
export function hitHref(hit: SearchHit): string {
  const run = runHref(hit.pipeline, hit.runId);
  return hit.line === null ? run : `${run}#L${hit.line}`;
}

/** The hits shown so far, each once, and each run's latest status as the server said it. */
export interface HitSet {
  hits: readonly SearchHit[];
  keys: ReadonlySet<string>;
  statuses: ReadonlyMap<string, string>;
}

export const NO_HITS: HitSet = { hits: [], keys: new Set(), statuses: new Map() };

/** `set` with the hits of a page it does not hold yet; the runs' statuses from the page. */
export function absorb(set: HitSet, page: readonly SearchHit[]): HitSet {
  const fresh = page.filter((hit) => !set.keys.has(hitKey(hit)));
  const statuses = new Map(set.statuses);
  let statusChanged = false;
  for (const hit of page) {
    if (statuses.get(runKeyOf(hit)) !== hit.runStatus) {
      statuses.set(runKeyOf(hit), hit.runStatus);
      statusChanged = true;
    }
  }
  if (fresh.length === 0 && !statusChanged) return set;
  const keys = new Set(set.keys);
  for (const hit of fresh) keys.add(hitKey(hit));
  return { hits: [...set.hits, ...fresh], keys, statuses };
}

export interface RunGroup {
  key: string;
  pipeline: string;
  runId: string;
  status: string;
  createdAt: string;
  hits: SearchHit[];
}

/**
 * Hits by run: runs newest first, as the API gives them (by creation, then in the order first
 * seen), and within a run in the log's order (line ascending; events by seq among them).
 */
export function groupByRun(set: HitSet): RunGroup[] {
  const groups = new Map<string, RunGroup>();
  for (const hit of set.hits) {
    const key = runKeyOf(hit);
    let group = groups.get(key);
    if (!group) {
      group = {
        key,
        pipeline: hit.pipeline,
        runId: hit.runId,
        status: set.statuses.get(key) ?? hit.runStatus,
        createdAt: hit.runCreatedAt,
        hits: [],
      };
      groups.set(key, group);
    }
    group.hits.push(hit);
  }
  const list = [...groups.values()];
  // Stable: runs created at the same time keep the order the API gave them in.
  list.sort((a, b) => Date.parse(b.createdAt) - Date.parse(a.createdAt));
  for (const group of list) {
    group.hits.sort((a, b) => a.seq - b.seq || (a.line ?? 0) - (b.line ?? 0));
  }
  return list;
}

/** A hit's text as plain and matched pieces, from its `[start, end)` UTF-16 ranges. */
export function pieces(
  text: string,
  matches: readonly (readonly [number, number])[],
): { text: string; match: boolean }[] {
  const ranges = matches
    .map(([start, end]) => [Math.max(0, start), Math.min(text.length, end)] as const)
    .filter(([start, end]) => start < end)
    .sort((a, b) => a[0] - b[0]);
  const out: { text: string; match: boolean }[] = [];
  let at = 0;
  for (const [rangeStart, end] of ranges) {
    const start = Math.max(rangeStart, at);
    if (end <= start) continue;
    if (start > at) out.push({ text: text.slice(at, start), match: false });
    out.push({ text: text.slice(start, end), match: true });
    at = end;
  }
  if (at < text.length) out.push({ text: text.slice(at), match: false });
  return out;
}

/** `12`, `2.5`, `0.3`: seconds as the lag note says them. */
export function formatLag(seconds: number): string {
  return String(Number(seconds.toFixed(seconds < 10 ? 1 : 0)));
}
