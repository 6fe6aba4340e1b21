import { useCallback, useDeferredValue, useMemo, useRef, useState } from 'react';
import { isTerminal, RUN_STATUSES, runPath } from '../../../src/client/index.js';
import type { Entry } from '../../../src/model/entry.js';
import type { RunStatus } from '../../../src/model/run.js';
import { NotAllowed } from '../auth.js';
import { ConnectionStateBadge } from '../connection.js';
import { formatBytes, formatDuration, pipelineHref } from '../format.js';
import { defaultTail, useTail } from '../stream.js';
import type { TailEvent, TailFn } from '../stream.js';
import { EventsPanel } from './EventsPanel.js';
import { useFrameVersion, useNow, useSlashToFocus } from '../hooks.js';
import { DEFAULT_MAX_CHARS, LogBuffer } from './log-buffer.js';
import { IncrementalSearch } from './log-search.js';
import { tailAfterHistory } from './history-tail.js';
import { rangedLogHistory } from './log-history.js';
import type { LogHistoryFn } from './log-history.js';
import { LogView } from './LogView.js';
import { ProgressBar, progressOf } from './ProgressBar.js';
import type { Progress } from './ProgressBar.js';
import { SearchBar } from './SearchBar.js';

/** Events the view keeps (newest first); the log itself is kept whole. */
export const EVENTS_KEPT = 1000;

interface RunFacts {
  status: string | null;
  /** When the run's first entry was written. */
  startedAt: string | null;
  /** When its terminal status was written. */
  endedAt: string | null;
  progress: Progress | null;
}

const NO_FACTS: RunFacts = { status: null, startedAt: null, endedAt: null, progress: null };

function isRunStatus(value: unknown): value is RunStatus {
  return typeof value === 'string' && (RUN_STATUSES as readonly string[]).includes(value);
}

function logHref(pipeline: string, runId: string): string {
  return `${runPath(pipeline, runId)}/log.txt`;
}

/** The log history from the server that served the page, read before the stream opens. */
const defaultHistory: LogHistoryFn = (target, onText, signal) =>
  rangedLogHistory(window.location.origin)(target, onText, signal);

/**
 * One run, live: its status, elapsed time and progress, the connection state, the log (follows
 * like `tail -f`, searchable, downloadable) and its events with kind and step filters. On a
 * `gap reset` (the server's store was replaced) it clears everything and shows the stream again
 * from its start, which is what the server sends next.
 */
export function RunView({
  pipeline,
  runId,
  tail = defaultTail,
  history = tail === defaultTail ? defaultHistory : null,
  latest = false,
  maxLogChars,
  targetLine = null,
  targetMove = 0,
}: {
  pipeline: string;
  runId: string;
  tail?: TailFn;
  /**
   * Reads the log's text before the stream opens (docs/API.md: `log.txt` by range, then the
   * stream with `logAfter`); null streams the whole log. By default the server's, with the
   * default `tail`; a `tail` of the caller's own (a test's fake stream) comes without one.
   */
  history?: LogHistoryFn | null;
  /** Opened as the pipeline's latest run: say so beside its id. */
  latest?: boolean;
  /** Log text the view keeps before letting the oldest lines go (default 256 Mi characters). */
  maxLogChars?: number;
  /**
   * The line of the log to show (`#L1234`, docs/DASHBOARD.md): once loaded it is brought to the
   * middle of the view and highlighted, and follow stops so that it stays there.
   */
  targetLine?: number | null;
  /** Changes with each move to `targetLine` (a click on a link to it again goes there again). */
  targetMove?: number;
}) {
  // Appended in place (see LogBuffer); `version` says when it changed.
  const [buffer] = useState(() => new LogBuffer(maxLogChars));
  const [searcher] = useState(() => new IncrementalSearch());
  const [version, bumpVersion] = useFrameVersion();
  const [events, setEvents] = useState<Entry[]>([]);
  const [facts, setFacts] = useState<RunFacts>(NO_FACTS);
  const [notices, setNotices] = useState<string[]>([]);
  const [follow, setFollow] = useState(targetLine === null);
  // A new target stops follow at once, so the log waits where it is until the line arrives.
  const target = `${targetLine}:${targetMove}`;
  const [seenTarget, setSeenTarget] = useState(target);
  if (target !== seenTarget) {
    setSeenTarget(target);
    if (targetLine !== null) setFollow(false);
  }
  const [query, setQuery] = useState('');
  const [active, setActive] = useState(0);
  const searchInput = useRef<HTMLInputElement>(null);
  useSlashToFocus(searchInput);

  // History as text, then the stream for what follows it; made once, like the buffer it feeds.
  const [source] = useState(() => {
    if (history === null) return null;
    let given = false;
    return tailAfterHistory(
      (options) => tail(options),
      history,
      { pipeline, runId },
      {
        onText: (text) => {
          given = true;
          buffer.append(text);
          bumpVersion();
        },
        onAbandon: () => {
          if (!given) return;
          given = false;
          buffer.clear();
          bumpVersion();
        },
      },
    );
  });
  const onEvent = useCallback(
    (event: TailEvent) => {
      if (event.type === 'gap') {
        if (event.gap.reason === 'reset') {
          // The stream starts over with the whole log, the text read before it included.
          source?.startedOver();
          buffer.clear();
          bumpVersion();
          setEvents([]);
          setFacts(NO_FACTS);
          setNotices(['The server no longer had this view’s position; the run was reloaded.']);
        } else {
          const { fromSeq, toSeq } = event.gap;
          setNotices((previous) => [
            ...previous,
            `Entries ${fromSeq}–${toSeq} were deleted by retention before they could be shown.`,
          ]);
        }
        return;
      }
      if (event.type === 'end') {
        const { status } = event.end;
        if (status) setFacts((previous) => ({ ...previous, status }));
        return;
      }
      if (event.type !== 'entry') return;
      const { entry } = event;
      setFacts((previous) =>
        previous.startedAt ? previous : { ...previous, startedAt: entry.time },
      );
      if (entry.kind === 'log') {
        buffer.append(entry.text ?? '');
        bumpVersion();
        return;
      }
      setEvents((previous) => [entry, ...previous.slice(0, EVENTS_KEPT - 1)]);
      if (entry.kind === 'status') {
        const status = (entry.data as { status?: unknown } | undefined)?.status;
        if (isRunStatus(status)) {
          setFacts((previous) => ({
            ...previous,
            status,
            endedAt: isTerminal(status) ? entry.time : null,
          }));
        }
      } else if (entry.kind === 'progress') {
        const progress = progressOf(entry.data, entry.step);
        if (progress) setFacts((previous) => ({ ...previous, progress }));
      }
    },
    [buffer, bumpVersion, source],
  );
  const { state, resume } = useTail(
    source?.tail ?? tail,
    `run:${pipeline}\u0000${runId}`,
    { target: { pipeline, runId } },
    onEvent,
  );

  const deferredQuery = useDeferredValue(query);
  // `version` stands for the buffer's contents, which change in place.
  const search = useMemo(
    () => searcher.find(buffer, deferredQuery),
    // eslint-disable-next-line react-hooks/exhaustive-deps
    [buffer, searcher, deferredQuery, version],
  );
  const count = search.matches.length;
  const shown = count === 0 ? -1 : Math.min(active, count - 1);

  const onQueryChange = (next: string) => {
    setQuery(next);
    setActive(0);
    // Showing a match means leaving the bottom of the log.
    if (next !== '') setFollow(false);
  };
  const onStep = (direction: 1 | -1) => {
    if (count === 0) return;
    setFollow(false);
    setActive((shown + direction + count) % count);
  };
  const jumpToLatest = () => setFollow(true);

  const now = useNow(facts.startedAt !== null && facts.endedAt === null);
  const elapsed = facts.startedAt
    ? formatDuration(
        (facts.endedAt ? Date.parse(facts.endedAt) : now) - Date.parse(facts.startedAt),
      )
    : '—';

  // `lines[i]` is line `dropped + i + 1` of the log.
  const targetIndex = targetLine === null ? null : targetLine - 1 - buffer.dropped;

  const runBody = (
    <>
      {facts.progress ? <ProgressBar progress={facts.progress} /> : null}
      {targetIndex !== null && targetIndex < 0 ? (
        <p className="notice" role="note">
          Line {targetLine?.toLocaleString('en-US')} is no longer held by this view: it is in the{' '}
          <a href={logHref(pipeline, runId)}>whole log</a>.
        </p>
      ) : null}
      {buffer.dropped > 0 ? (
        <p className="notice" role="note">
          This view keeps about the last {formatBytes(maxLogChars ?? DEFAULT_MAX_CHARS)} of the log:
          its first {buffer.dropped.toLocaleString('en-US')} lines are in the{' '}
          <a href={logHref(pipeline, runId)}>whole log</a>.
        </p>
      ) : null}
      {notices.map((notice) => (
        <p key={notice} className="notice" role="note">
          {notice}
        </p>
      ))}
      <div className="run-body">
        <div className="log-pane">
          <div className="log-toolbar">
            <SearchBar
              query={query}
              onQueryChange={onQueryChange}
              count={count}
              truncated={search.truncated}
              active={shown}
              onStep={onStep}
              inputRef={searchInput}
            />
            <span data-testid="follow-state">{follow ? 'Following' : 'Paused'}</span>
            {follow ? null : (
              <button type="button" onClick={jumpToLatest}>
                Jump to latest
              </button>
            )}
          </div>
          <LogView
            lines={buffer}
            firstLine={buffer.dropped}
            version={version}
            follow={follow}
            onFollowChange={setFollow}
            matches={search.matches}
            active={shown}
            target={targetIndex}
            targetMove={targetMove}
          />
        </div>
        <EventsPanel events={events} kept={EVENTS_KEPT} />
      </div>
    </>
  );

  return (
    <section className="run-view">
      <h1>
        <a href={pipelineHref(pipeline)}>{pipeline}</a> / {runId}
        {latest ? <span className="latest-tag"> (latest)</span> : null}
      </h1>
      <div className="run-meta">
        <span
          data-testid="run-status"
          className={`run-status run-status-${facts.status ?? 'unknown'}`}
        >
          {facts.status ?? 'unknown'}
        </span>
        <span>
          Elapsed <span data-testid="elapsed">{elapsed}</span>
        </span>
        <ConnectionStateBadge state={state} onResume={resume} />
        {state.phase === 'forbidden' ? null : (
          <a href={logHref(pipeline, runId)} download={`${pipeline}-${runId}.log`}>
            Download log
          </a>
        )}
      </div>
      {state.phase === 'forbidden' ? (
        <NotAllowed what={`pipeline ${pipeline}`} detail={state.error} />
      ) : (
        runBody
      )}
    </section>
  );
}
