import { useEffect, useState } from 'react';
import type { MouseEvent } from 'react';
import { RunsList } from './RunsList.js';
import { LatestRun } from './run/LatestRun.js';
import type { ResolveRun } from './run/LatestRun.js';
import { RunView } from './run/RunView.js';
import { TopicView } from './TopicView.js';
import type { TailFn } from './stream.js';

export type Route =
  | { view: 'runs' }
  | { view: 'run'; pipeline: string; runId: string }
  | { view: 'topic'; topic: string }
  | { view: 'notFound'; path: string };

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
  if (segments.length === 2 && first === 'topics' && second)
    return { view: 'topic', topic: second };
  return { view: 'notFound', path: pathname };
}

function titleOf(route: Route): string {
  switch (route.view) {
    case 'runs':
      return 'Runs';
    case 'run':
      return `${route.pipeline} / ${route.runId}`;
    case 'topic':
      return `Topic ${route.topic}`;
    case 'notFound':
      return 'Not found';
  }
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
 */
export function App({
  pathname: initialPath,
  tail,
  resolveRun,
}: {
  pathname: string;
  tail?: TailFn;
  resolveRun?: ResolveRun;
}) {
  const [pathname, setPathname] = useState(initialPath);
  const route = parseRoute(pathname);

  useEffect(() => {
    const onPopState = () => setPathname(window.location.pathname);
    window.addEventListener('popstate', onPopState);
    return () => window.removeEventListener('popstate', onPopState);
  }, []);
  useEffect(() => {
    document.title = `${titleOf(route)} · Tailwater`;
  });

  const onClick = (event: MouseEvent<HTMLElement>) => {
    const url = appLink(event);
    if (!url) return;
    event.preventDefault();
    if (url.pathname !== window.location.pathname) {
      window.history.pushState(null, '', url.pathname + url.search);
    }
    setPathname(url.pathname);
  };

  return (
    // Clicks on links bubble here: one handler routes every link of every view.
    <div className="app" onClick={onClick}>
      <header className="topbar">
        <a href="/ui/">Tailwater</a>
        <nav aria-label="Main">
          <a href="/ui/">Runs</a> <a href="/ui/topics/iceberg">Iceberg</a>
        </nav>
      </header>
      <main>
        {route.view === 'runs' ? <RunsList {...(tail ? { tail } : {})} /> : null}
        {route.view === 'run' && route.runId === 'latest' ? (
          <LatestRun
            key={`${route.pipeline}/latest`}
            pipeline={route.pipeline}
            tail={tail}
            resolveRun={resolveRun}
          />
        ) : null}
        {route.view === 'run' && route.runId !== 'latest' ? (
          <RunView
            key={`${route.pipeline}/${route.runId}`}
            pipeline={route.pipeline}
            runId={route.runId}
            {...(tail ? { tail } : {})}
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
      </main>
    </div>
  );
}
