import { RunsList } from './RunsList.js';
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

/** The dashboard's routes (PROTOCOL.md, "Dashboard routes"), from a path under /ui/. */
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

export function App({ pathname, tail }: { pathname: string; tail?: TailFn }) {
  const route = parseRoute(pathname);
  return (
    <>
      <header className="topbar">
        <a href="/ui/">Tailwater</a>
        <nav aria-label="Main">
          <a href="/ui/">Runs</a> <a href="/ui/topics/iceberg">Iceberg</a>
        </nav>
      </header>
      <main>
        {route.view === 'runs' ? <RunsList {...(tail ? { tail } : {})} /> : null}
        {route.view === 'run' ? (
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
    </>
  );
}
