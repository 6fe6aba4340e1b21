import { useCallback, useEffect, useMemo, useState } from 'react';
import type { MouseEvent } from 'react';
import { AuthProvider, SignInDialog, SignInPage } from './auth.js';
import type { Auth, SignInReason } from './auth.js';
import { PipelinePage } from './pipeline/PipelinePage.js';
import type { ListRunsPage } from './pipeline/PipelinePage.js';
import { RunsList } from './RunsList.js';
import type { ListPipelines } from './RunsList.js';
import { LatestRun } from './run/LatestRun.js';
import type { ResolveRun } from './run/LatestRun.js';
import { RunView } from './run/RunView.js';
import { TopicView } from './TopicView.js';
import { HeaderSearch } from './search/HeaderSearch.js';
import { searchHref, searchParamsOf } from './search/hits.js';
import { lineRangeOf } from './run/line-links.js';
import { SearchPage } from './search/SearchPage.js';
import type { SearchFn } from './search/SearchPage.js';
import { messageOf, serverSession, statusOf } from './session.js';
import type { SessionApi, SessionInfo } from './session.js';
import type { TailFn } from './stream.js';
import { ThemeToggle } from './theme/ThemeToggle.js';

export type Route =
  | { view: 'runs' }
  | { view: 'pipeline'; pipeline: string }
  | { view: 'run'; pipeline: string; runId: string }
  | { view: 'topic'; topic: string }
  | { view: 'search' }
  | { view: 'notFound'; path: string };

/** Where the app is: the address's path, query and fragment. */
interface Place {
  pathname: string;
  search: string;
  hash: string;
}

function placeOf(href: string): Place {
  const url = new URL(href, 'http://dashboard.invalid');
  return { pathname: url.pathname, search: url.search, hash: url.hash };
}

/**
 * The line a run view's address points at (`#L1234`, or the first of `#L1234-L1240`,
 * docs/DASHBOARD.md), or null.
 */
export function targetLineOf(hash: string): number | null {
  return lineRangeOf(hash)?.first ?? null;
}

function decode(segment: string): string | null {
  try {
    return decodeURIComponent(segment);
  } catch {
    return null;
  }
}

/** The dashboard's routes (docs/DASHBOARD.md), from a path under /ui/. */
export function parseRoute(pathname: string): Route {
  const rest = pathname.replace(/^\/ui\/?/, '').replace(/\/+$/, '');
  if (rest === '') return { view: 'runs' };
  const segments = rest.split('/').map(decode);
  if (segments.some((segment) => segment === null || segment === '')) {
    return { view: 'notFound', path: pathname };
  }
  const [first, second, third, fourth] = segments as string[];
  if (segments.length === 4 && first === 'pipelines' && third === 'runs' && second && fourth) {
    return { view: 'run', pipeline: second, runId: fourth };
  }
  if (segments.length === 2 && first === 'pipelines' && second) {
    return { view: 'pipeline', pipeline: second };
  }
  if (segments.length === 2 && first === 'topics' && second)
    return { view: 'topic', topic: second };
  if (segments.length === 1 && first === 'search') return { view: 'search' };
  return { view: 'notFound', path: pathname };
}

function titleOf(route: Route, search: string): string {
  switch (route.view) {
    case 'search': {
      const { q } = searchParamsOf(search);
      return q === '' ? 'Search' : `Search: ${q}`;
    }
    case 'runs':
      return 'Runs';
    case 'pipeline':
      return `Pipeline ${route.pipeline}`;
    case 'run':
      return `${route.pipeline} / ${route.runId}`;
    case 'topic':
      return `Topic ${route.topic}`;
    case 'notFound':
      return 'Not found';
  }
}

/** Where the app stands with the server's sign-in. */
type Session =
  | { phase: 'checking' }
  /** Authentication is off (or the server could not say): the views, as ever. */
  | { phase: 'open' }
  | { phase: 'signedIn'; subject: string | null }
  /** The sign-in page instead of the views. */
  | { phase: 'signedOut'; notice: string | null };

function sessionOf(info: SessionInfo): Session {
  return info.authentication ? { phase: 'signedIn', subject: info.subject } : { phase: 'open' };
}

/** The link a click should follow inside the app, or null to leave it to the browser. */
function appLink(event: MouseEvent<HTMLElement>): URL | null {
  if (event.defaultPrevented || event.button !== 0) return null;
  if (event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return null; // new tab…
  const anchor = (event.target as Element).closest('a');
  if (!anchor || anchor.target || anchor.hasAttribute('download')) return null;
  const url = new URL(anchor.href, window.location.href);
  const inApp = url.pathname === '/ui' || url.pathname.startsWith('/ui/');
  return url.origin === window.location.origin && inApp ? url : null;
}

/**
 * The dashboard. Links inside it change the view without reloading the page (the view being
 * left closes its stream); Back and Forward work, and every view has its own address.
 *
 * It first asks the server who is signed in (`GET /api/v1/session`). With authentication on and
 * no valid cookie, the sign-in page stands in for the views until a token is accepted; then the
 * page asked for opens. A 401 or an expired token later opens the sign-in dialog over the view,
 * which keeps its state; its streams resume from their cursor after the sign-in.
 */
export function App({
  pathname: initialPath,
  tail,
  resolveRun,
  session: sessionApi,
  search: searchFn,
  listRunsPage,
  listPipelines,
}: {
  /** The address the app opens at: a path under /ui/, with its query and fragment if any. */
  pathname: string;
  tail?: TailFn;
  resolveRun?: ResolveRun;
  /** The sign-in endpoints (default: the server that served the page). */
  session?: SessionApi;
  /** The search API (default: the server that served the page). */
  search?: SearchFn;
  /** A pipeline's runs a page at a time (default: the server that served the page). */
  listRunsPage?: ListRunsPage;
  /** Pipelines a page at a time (default: the server that served the page). */
  listPipelines?: ListPipelines;
}) {
  const [place, setPlace] = useState<Place>(() => placeOf(initialPath));
  // Bumped by every move (a link, Back, a new fragment): the run view goes to `#L…` again.
  const [moves, setMoves] = useState(0);
  const { pathname } = place;
  const route = parseRoute(pathname);
  const [api] = useState(() => sessionApi ?? serverSession());
  const [session, setSession] = useState<Session>({ phase: 'checking' });
  const [dialog, setDialog] = useState<SignInReason | null>(null);
  const [signIns, setSignIns] = useState(0);
  const [signOutError, setSignOutError] = useState<string | null>(null);

  useEffect(() => {
    let stopped = false;
    api.check().then(
      (info) => {
        if (!stopped) setSession(sessionOf(info));
      },
      (error: unknown) => {
        if (stopped) return;
        // Anything but a 401 (an older server without the endpoint, a network failure) leaves
        // the views as they were: their streams say what is wrong.
        setSession(
          statusOf(error) === 401 ? { phase: 'signedOut', notice: null } : { phase: 'open' },
        );
      },
    );
    return () => {
      stopped = true;
    };
  }, [api]);

  const signInNeeded = useCallback((reason: SignInReason) => {
    setDialog((open) => open ?? reason);
  }, []);
  const auth = useMemo<Auth>(() => ({ signInNeeded, signIns }), [signInNeeded, signIns]);

  const signIn = async (token: string): Promise<string | null> => {
    try {
      await api.signIn(token);
    } catch (error) {
      return messageOf(error);
    }
    let info: SessionInfo;
    try {
      info = await api.check();
    } catch (error) {
      if (statusOf(error) !== 401) return messageOf(error);
      return 'The server took the token, but this browser is not signed in: the token may have expired already, or the browser refused the cookie. Mint a new token and try again.';
    }
    setSession(sessionOf(info));
    setSignOutError(null);
    setDialog(null);
    setSignIns((n) => n + 1);
    return null;
  };

  const signOut = async () => {
    try {
      await api.signOut();
    } catch (error) {
      setSignOutError(`Could not sign out: ${messageOf(error)}`);
      return;
    }
    setSignOutError(null);
    setDialog(null);
    setSession({ phase: 'signedOut', notice: 'You signed out.' });
  };

  useEffect(() => {
    const onMove = () => {
      const { pathname: path, search, hash } = window.location;
      setPlace({ pathname: path, search, hash });
      setMoves((n) => n + 1);
    };
    window.addEventListener('popstate', onMove);
    window.addEventListener('hashchange', onMove);
    return () => {
      window.removeEventListener('popstate', onMove);
      window.removeEventListener('hashchange', onMove);
    };
  }, []);
  useEffect(() => {
    document.title = `${session.phase === 'signedOut' ? 'Sign in' : titleOf(route, place.search)} · Tailwater`;
  });

  const navigate = (href: string) => {
    const next = placeOf(href);
    const { pathname: path, search, hash } = window.location;
    const address = next.pathname + next.search + next.hash;
    if (address !== path + search + hash) window.history.pushState(null, '', address);
    setPlace(next);
    setMoves((n) => n + 1);
  };

  // A view's filters, kept in the address as they change; replaced, not pushed, so typing in a
  // filter does not fill the history.
  const replaceSearch = (search: string) => {
    const { pathname: path, hash } = window.location;
    window.history.replaceState(null, '', path + search + hash);
    setPlace((p) => ({ ...p, search }));
  };

  const onClick = (event: MouseEvent<HTMLElement>) => {
    const url = appLink(event);
    if (!url) return;
    event.preventDefault();
    navigate(url.pathname + url.search + url.hash);
  };

  const searchParams = route.view === 'search' ? searchParamsOf(place.search) : null;
  const targetRange = route.view === 'run' ? lineRangeOf(place.hash) : null;
  const targetLine = targetRange?.first ?? null;
  const targetLastLine = targetRange?.last ?? null;

  const views = (
    <>
      {route.view === 'runs' ? (
        <RunsList
          // Opened again by each move (the Runs link included), with the address's filters.
          key={moves}
          {...(tail ? { tail } : {})}
          {...(listPipelines ? { listPipelines } : {})}
          search={place.search}
          onSearch={replaceSearch}
        />
      ) : null}
      {route.view === 'pipeline' ? (
        <PipelinePage
          key={`${route.pipeline}\u0000${moves}`}
          pipeline={route.pipeline}
          {...(tail ? { tail } : {})}
          {...(listRunsPage ? { listRunsPage } : {})}
          search={place.search}
          onSearch={replaceSearch}
        />
      ) : null}
      {route.view === 'run' && route.runId === 'latest' ? (
        <LatestRun
          key={`${route.pipeline}/latest`}
          pipeline={route.pipeline}
          tail={tail}
          resolveRun={resolveRun}
          targetLine={targetLine}
          targetLastLine={targetLastLine}
          targetMove={moves}
        />
      ) : null}
      {route.view === 'run' && route.runId !== 'latest' ? (
        <RunView
          key={`${route.pipeline}/${route.runId}`}
          pipeline={route.pipeline}
          runId={route.runId}
          {...(tail ? { tail } : {})}
          targetLine={targetLine}
          targetLastLine={targetLastLine}
          targetMove={moves}
        />
      ) : null}
      {searchParams ? (
        <SearchPage
          key={searchHref(searchParams)}
          params={searchParams}
          onSearch={(params) => navigate(searchHref(params))}
          {...(searchFn ? { search: searchFn } : {})}
        />
      ) : null}
      {route.view === 'topic' ? (
        <TopicView key={route.topic} topic={route.topic} {...(tail ? { tail } : {})} />
      ) : null}
      {route.view === 'notFound' ? (
        <p>
          Nothing at {route.path}. <a href="/ui/">Back to the runs</a>.
        </p>
      ) : null}
    </>
  );

  return (
    // Clicks on links bubble here: one handler routes every link of every view.
    <div className="app" onClick={onClick}>
      {/* Inert under the sign-in dialog: nothing behind it takes the focus or a click. */}
      <div className="app-page" inert={dialog !== null}>
        <header className="topbar">
          <a href="/ui/">Tailwater</a>
          {session.phase === 'signedOut' ? null : (
            <nav aria-label="Main">
              <a href="/ui/">Runs</a> <a href="/ui/topics/iceberg">Iceberg</a>
            </nav>
          )}
          {session.phase === 'signedOut' ? null : (
            <HeaderSearch
              // A new search page shows its own text; elsewhere the box starts empty.
              key={searchParams ? searchHref(searchParams) : ''}
              initial={searchParams?.q ?? ''}
              onSearch={(q) =>
                // On the search page its filters stay; elsewhere a plain search.
                navigate(searchHref({ regex: false, pipeline: '', ...searchParams, q }))
              }
            />
          )}
          <ThemeToggle />
          {session.phase === 'signedIn' ? (
            <div className="session">
              <span data-testid="signed-in-as">
                {session.subject ? `Signed in as ${session.subject}` : 'Signed in'}
              </span>
              <button type="button" onClick={() => void signOut()}>
                Sign out
              </button>
              {signOutError ? (
                <span className="session-error" role="alert">
                  {signOutError}
                </span>
              ) : null}
            </div>
          ) : null}
        </header>
        <main>
          {session.phase === 'checking' ? <p role="status">Checking sign-in…</p> : null}
          {session.phase === 'signedOut' ? (
            <SignInPage onSignIn={signIn} notice={session.notice} />
          ) : null}
          {session.phase === 'open' || session.phase === 'signedIn' ? (
            <AuthProvider value={auth}>{views}</AuthProvider>
          ) : null}
        </main>
      </div>
      {dialog !== null && session.phase !== 'signedOut' ? (
        <SignInDialog reason={dialog} onSignIn={signIn} />
      ) : null}
    </div>
  );
}
