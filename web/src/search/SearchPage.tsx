import { useEffect, useEffectEvent, useId, useState } from 'react';
import type { FormEvent } from 'react';
import { TailwaterClient } from '../../../src/client/index.js';
import type { SearchOptions } from '../../../src/client/index.js';
import type { SearchHit, SearchPage as SearchAnswer } from '../../../src/model/search-result.js';
import { NotAllowed, useAuth, useRetryAfterSignIn } from '../auth.js';
import { runHref } from '../format.js';
import { messageOf, statusOf } from '../session.js';
import { absorb, formatLag, groupByRun, hitHref, hitKey, NO_HITS, pieces } from './hits.js';
import type { HitSet, SearchParams } from './hits.js';

/** One page of `GET /api/v1/search` (docs/SEARCH.md): the SDK's, or a fake in tests. */
export type SearchFn = (q: string, options: SearchOptions) => Promise<SearchAnswer>;

export const defaultSearch: SearchFn = (q, options) =>
  new TailwaterClient({ server: window.location.origin }).search(q, options);

/** How often the open page asks for the first page again, for lines of running runs. */
export const LIVE_REFRESH_MS = 5000;

type Phase =
  | { phase: 'idle' }
  | { phase: 'loading' }
  | { phase: 'done' }
  | { phase: 'error'; message: string }
  /** 401: asked again once the viewer signed in. */
  | { phase: 'signIn' }
  | { phase: 'forbidden'; message: string };

function optionsOf(params: SearchParams, cursor?: string): SearchOptions {
  return {
    regex: params.regex ? true : undefined,
    pipeline: params.pipeline === '' ? undefined : params.pipeline,
    cursor,
  };
}

function Highlighted({ hit }: { hit: SearchHit }) {
  return (
    <span className="hit-text">
      {hit.truncated && hit.textStart > 0 ? '…' : null}
      {pieces(hit.text, hit.matches).map((piece, index) =>
        piece.match ? (
          <mark key={index} className="match">
            {piece.text}
          </mark>
        ) : (
          piece.text
        ),
      )}
      {hit.truncated ? '…' : null}
    </span>
  );
}

/**
 * Searching every run (docs/DASHBOARD.md, "Searching every run"): the hits of
 * `GET /api/v1/search` by run, each line linking to the run view at that line, "More results"
 * following `next`, and, while the page is open and visible, the first page asked for again
 * every few seconds so that new lines of running runs come in without moving what is shown.
 */
export function SearchPage({
  params,
  onSearch,
  search = defaultSearch,
  refreshMs = LIVE_REFRESH_MS,
}: {
  params: SearchParams;
  /** Opens the page for other parameters (its address says them). */
  onSearch: (params: SearchParams) => void;
  search?: SearchFn;
  refreshMs?: number;
}) {
  const id = useId();
  const [text, setText] = useState(params.q);
  const [pipeline, setPipeline] = useState(params.pipeline);
  const [set, setSet] = useState<HitSet>(NO_HITS);
  const [next, setNext] = useState<string | undefined>(undefined);
  const [lag, setLag] = useState(0);
  const [phase, setPhase] = useState<Phase>(
    params.q === '' ? { phase: 'idle' } : { phase: 'loading' },
  );
  const [attempts, setAttempts] = useState(0);
  const [more, setMore] = useState<{ busy: boolean; error: string | null }>({
    busy: false,
    error: null,
  });
  const auth = useAuth();
  const signInNeeded = useEffectEvent(() => auth.signInNeeded('unauthenticated'));
  useRetryAfterSignIn(phase.phase === 'signIn' || phase.phase === 'forbidden', () => {
    setPhase({ phase: 'loading' });
    setAttempts((n) => n + 1);
  });

  // The first page.
  useEffect(() => {
    if (params.q === '') return;
    let stopped = false;
    search(params.q, optionsOf(params)).then(
      (page) => {
        if (stopped) return;
        setSet((previous) => absorb(previous, page.hits));
        setNext(page.next);
        setLag(page.index.lagSeconds);
        setPhase({ phase: 'done' });
      },
      (error: unknown) => {
        if (stopped) return;
        const status = statusOf(error);
        if (status === 401) {
          setPhase({ phase: 'signIn' });
          signInNeeded();
        } else if (status === 403) {
          setPhase({ phase: 'forbidden', message: messageOf(error) });
        } else {
          setPhase({ phase: 'error', message: messageOf(error) });
        }
      },
    );
    return () => {
      stopped = true;
    };
  }, [params, search, attempts]);

  // Live: the first page again, every `refreshMs` while the tab is visible, adding what is new.
  const live = phase.phase === 'done';
  useEffect(() => {
    if (!live) return;
    let stopped = false;
    let busy = false;
    const refresh = async () => {
      if (busy || document.visibilityState === 'hidden') return;
      busy = true;
      try {
        const page = await search(params.q, optionsOf(params));
        if (stopped) return;
        setSet((previous) => absorb(previous, page.hits));
        setLag(page.index.lagSeconds);
      } catch (error) {
        // The next refresh tries again; a 401 asks for a sign-in.
        if (!stopped && statusOf(error) === 401) signInNeeded();
      } finally {
        busy = false;
      }
    };
    const timer = setInterval(() => void refresh(), refreshMs);
    const onVisible = () => {
      if (document.visibilityState === 'visible') void refresh();
    };
    document.addEventListener('visibilitychange', onVisible);
    return () => {
      stopped = true;
      clearInterval(timer);
      document.removeEventListener('visibilitychange', onVisible);
    };
  }, [live, params, search, refreshMs]);

  const loadMore = async () => {
    if (next === undefined || more.busy) return;
    setMore({ busy: true, error: null });
    try {
      const page = await search(params.q, optionsOf(params, next));
      setSet((previous) => absorb(previous, page.hits));
      setNext(page.next);
      setLag(page.index.lagSeconds);
      setMore({ busy: false, error: null });
    } catch (error) {
      if (statusOf(error) === 401) auth.signInNeeded('unauthenticated');
      setMore({ busy: false, error: messageOf(error) });
    }
  };

  const submit = (event: FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    const q = text.trim();
    if (q !== '') onSearch({ q, regex: params.regex, pipeline: pipeline.trim() });
  };
  const setRegex = (regex: boolean) => {
    const q = text.trim();
    onSearch({ q: q === '' ? params.q : q, regex, pipeline: pipeline.trim() });
  };

  const groups = groupByRun(set);
  return (
    <section className="search-page" aria-labelledby={`${id}-title`}>
      <h1 id={`${id}-title`}>{params.q === '' ? 'Search every run' : `Search: ${params.q}`}</h1>
      <form className="search-form" role="search" aria-label="Every run" onSubmit={submit}>
        <label htmlFor={`${id}-q`}>Text</label>
        <input
          id={`${id}-q`}
          type="search"
          name="q"
          value={text}
          spellCheck={false}
          onChange={(event) => setText(event.target.value)}
        />
        <label className="search-regex">
          <input
            type="checkbox"
            checked={params.regex}
            onChange={(event) => setRegex(event.target.checked)}
          />{' '}
          Regular expression
        </label>
        <label htmlFor={`${id}-pipeline`}>Pipeline</label>
        <input
          id={`${id}-pipeline`}
          type="text"
          name="pipeline"
          placeholder="etl.* (all)"
          value={pipeline}
          spellCheck={false}
          onChange={(event) => setPipeline(event.target.value)}
        />
        <button type="submit">Search</button>
      </form>

      {lag > 0 ? (
        <p className="search-lag" role="note" data-testid="index-lag">
          The index is {formatLag(lag)} s behind; the newest lines may not be found yet.
        </p>
      ) : null}
      {phase.phase === 'idle' ? (
        <p>Type some text (3 characters at least) and press Enter to search every run’s log.</p>
      ) : null}
      {phase.phase === 'loading' ? <p role="status">Searching…</p> : null}
      {phase.phase === 'signIn' ? <p role="status">Waiting for you to sign in again…</p> : null}
      {phase.phase === 'forbidden' ? (
        <NotAllowed what="this search" detail={phase.message} />
      ) : null}
      {phase.phase === 'error' ? (
        <p className="search-error" role="alert" data-testid="search-error">
          {phase.message}
        </p>
      ) : null}
      {phase.phase === 'done' && set.hits.length === 0 && next === undefined ? (
        <p className="empty" data-testid="search-empty">
          No line of any run holds “{params.q}”.
        </p>
      ) : null}
      {phase.phase === 'done' && set.hits.length === 0 && next !== undefined ? (
        <p className="empty">Nothing found in the runs searched so far.</p>
      ) : null}

      {groups.map((group) => (
        <section
          key={group.key}
          className="search-run"
          aria-label={`${group.pipeline} / ${group.runId}`}
          data-testid="search-run"
        >
          <h2>
            <a href={runHref(group.pipeline, group.runId)}>
              {group.pipeline} / {group.runId}
            </a>{' '}
            <span className={`run-status run-status-${group.status}`}>{group.status}</span>{' '}
            <span className="search-run-started">
              started{' '}
              <time dateTime={group.createdAt}>{new Date(group.createdAt).toLocaleString()}</time>
            </span>
          </h2>
          <ol className="hits">
            {group.hits.map((hit) => (
              <li key={hitKey(hit)} className="hit" data-testid="hit">
                <a href={hitHref(hit)}>
                  <span className="hit-line">{hit.line === null ? hit.kind : hit.line}</span>
                  <Highlighted hit={hit} />
                </a>
              </li>
            ))}
          </ol>
        </section>
      ))}

      {phase.phase === 'done' && next !== undefined ? (
        <p>
          <button type="button" disabled={more.busy} onClick={() => void loadMore()}>
            {more.busy ? 'Loading…' : 'More results'}
          </button>
          {more.error ? (
            <span className="search-error" role="alert">
              {' '}
              {more.error}
            </span>
          ) : null}
        </p>
      ) : null}
    </section>
  );
}
