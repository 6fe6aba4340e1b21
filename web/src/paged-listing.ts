import { useCallback, useEffect, useEffectEvent, useState } from 'react';
import { useAuth, useRetryAfterSignIn } from './auth.js';
import { messageOf, statusOf } from './session.js';

/** One page of a listing, as the API gives it: its items and the cursor of the next page. */
export interface ListingPage<T> {
  items: T[];
  next?: string | undefined;
}

export interface PagedListing<T> {
  /** The page's items; null until the first answer. */
  items: T[] | null;
  /** A page was asked for and has not come yet (`items` are the page before's). */
  loading: boolean;
  error: string | null;
  /** 403: what the server said. */
  forbidden: string | null;
  /** 1 for the first page. */
  page: number;
  hasNext: boolean;
  next(): void;
  previous(): void;
  /** Changes the items shown (live updates), without asking the server. */
  update(change: (items: T[]) => T[]): void;
  /** Asks for the page shown again. */
  reload(): void;
}

/**
 * A listing read a page at a time by cursor (`?after=<next>`), with Older/Newer moves: the
 * cursors of the pages before are kept, so going back asks for exactly the page seen. A new
 * `key` (other filters) starts again at the first page. A 401 asks for a sign-in and the page
 * is asked for again after it; a 403 is `forbidden`.
 */
export function usePagedListing<T>(
  key: string,
  fetchPage: (after: string | undefined) => Promise<ListingPage<T>>,
): PagedListing<T> {
  const [state, setState] = useState<{
    key: string;
    cursors: (string | undefined)[];
    loads: number;
  }>({ key, cursors: [undefined], loads: 0 });
  const [answer, setAnswer] = useState<{
    of: string;
    page: ListingPage<T> | null;
    error: string | null;
    forbidden: string | null;
  } | null>(null);
  // Other filters: back to the first page, in this render already (React's way of resetting
  // state from a prop), so no request for the old cursor under the new filters is ever made.
  const current = state.key === key ? state : { key, cursors: [undefined], loads: 0 };
  if (current !== state) setState(current);
  const cursor = current.cursors[current.cursors.length - 1];
  const of = `${current.loads}\u0000${current.cursors.length}\u0000${cursor ?? ''}\u0000${key}`;
  const auth = useAuth();
  const load = useEffectEvent((after: string | undefined) => fetchPage(after));
  const signInNeeded = useEffectEvent(() => auth.signInNeeded('unauthenticated'));

  useEffect(() => {
    let stopped = false;
    load(cursor).then(
      (page) => {
        if (!stopped) setAnswer({ of, page, error: null, forbidden: null });
      },
      (error: unknown) => {
        if (stopped) return;
        const status = statusOf(error);
        if (status === 401) signInNeeded();
        setAnswer({
          of,
          page: null,
          error: status === 403 ? null : messageOf(error),
          forbidden: status === 403 ? messageOf(error) : null,
        });
      },
    );
    return () => {
      stopped = true;
    };
  }, [of, cursor]);

  const reload = useCallback(() => setState((s) => ({ ...s, loads: s.loads + 1 })), []);
  const update = useCallback(
    (change: (items: T[]) => T[]) =>
      setAnswer((a) => (a?.page ? { ...a, page: { ...a.page, items: change(a.page.items) } } : a)),
    [],
  );
  const waiting = answer?.of === of && (answer.forbidden !== null || answer.error !== null);
  useRetryAfterSignIn(waiting, reload);

  const shown = answer?.of === of ? answer : null;
  const page = shown?.page ?? null;
  return {
    // While another page is asked for, the last one stays in view rather than blinking out.
    items: page?.items ?? (shown ? null : (answer?.page?.items ?? null)),
    loading: shown === null,
    error: shown?.error ?? null,
    forbidden: shown?.forbidden ?? null,
    page: current.cursors.length,
    hasNext: page?.next !== undefined,
    next: () => {
      const after = page?.next;
      if (after !== undefined) setState((s) => ({ ...s, cursors: [...s.cursors, after] }));
    },
    previous: () =>
      setState((s) => (s.cursors.length > 1 ? { ...s, cursors: s.cursors.slice(0, -1) } : s)),
    update,
    reload,
  };
}
