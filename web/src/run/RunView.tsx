import { useCallback, useDeferredValue, useEffect, useMemo, useRef, useState } from 'react';
import { isTerminal, RUN_STATUSES, runPath, TailwaterClient } from '../../../src/client/index.js';
import type { Entry } from '../../../src/model/entry.js';
import type { Run, RunStatus } from '../../../src/model/run.js';
import { NotAllowed } from '../auth.js';
import { RelativeTime, useClock } from '../RelativeTime.js';
import { ConnectionStateBadge, quietConnection } from '../connection.js';
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
import { LevelGutter } from './LevelGutter.js';
import { levelMarks } from './level-marks.js';
import { lineHash } from './line-links.js';
import type { LineRange } from './line-links.js';
import { LEVEL_ERROR, levelPatterns, storedLevelRules } from './log-levels.js';
import { LogView } from './LogView.js';
import { useSections } from './use-sections.js';
import { TIMESTAMP_MODES, TIMESTAMPS_KEY, WRAP_KEY, useStoredChoice } from './view-settings.js';
import type { TimestampMode } from './view-settings.js';
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

/** A step's event that says it failed (`{"state": "failed"}` or `{"status": "failed"}`). */
function failedStepOf(entry: Entry): string | null {
  if (entry.kind !== 'step' || entry.step === undefined) return null;
  const data = entry.data as { state?: unknown; status?: unknown } | undefined;
  return data?.state === 'failed' || data?.status === 'failed' ? entry.step : null;
}

function browserStorage(): Storage | null {
  try {
    return window.localStorage;
  } catch {
    return null;
  }
}

const NO_FACTS: RunFacts = { status: null, startedAt: null, endedAt: null, progress: null };

function isRunStatus(value: unknown): value is RunStatus {
  return typeof value === 'string' && (RUN_STATUSES as readonly string[]).includes(value);
}

function logHref(pipeline: string, runId: string): string {
  return `${runPath(pipeline, runId)}/log.txt`;
}

/** Reads the run's summary (`GET …/runs/{runId}`). */
export type LoadRun = (pipeline: string, runId: string) => Promise<Run>;

const defaultLoadRun: LoadRun = (pipeline, runId) =>
  new TailwaterClient({ server: window.location.origin }).getRun(pipeline, runId);

/**
 * The facts the stream has not given yet, from the run's summary: the stream opens only once
 * the history is read, which for a long log is seconds in which the run would say "unknown".
 * What the stream gives wins, being as new or newer.
 */
function withSummary(facts: RunFacts, run: Run): RunFacts {
  if (facts.status !== null) return facts;
  return {
    ...facts,
    status: run.status,
    startedAt: facts.startedAt ?? run.startedAt ?? run.createdAt,
    endedAt: isTerminal(run.status) ? run.endedAt : null,
  };
}

/** When the run ended, relative to now; its own clock, so only it is drawn again as time passes. */
function EndedAt({ iso }: { iso: string | null }) {
  return <RelativeTime iso={iso} now={useClock()} />;
}

/** The log history from the server that served the page, read before the stream opens. */
const defaultHistory: LogHistoryFn = (target, onText, signal, near) =>
  rangedLogHistory(window.location.origin)(target, onText, signal, near);

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
  loadRun = tail === defaultTail ? defaultLoadRun : null,
  latest = false,
  maxLogChars,
  targetLine = null,
  targetLastLine = null,
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
  /**
   * Reads the run's summary when the view opens, for its status and times until the stream
   * gives them; null waits for the stream. By default the server's, with the default `tail`.
   */
  loadRun?: LoadRun | null;
  /** Opened as the pipeline's latest run: say so beside its id. */
  latest?: boolean;
  /** Log text the view keeps before letting the oldest lines go (default 256 Mi characters). */
  maxLogChars?: number;
  /**
   * The line of the log to show (`#L1234`, docs/DASHBOARD.md): once loaded it is brought to the
   * middle of the view and highlighted, and follow stops so that it stays there.
   */
  targetLine?: number | null;
  /** The last line of a range (`#L120-L140`): the lines from `targetLine` to it are highlighted. */
  targetLastLine?: number | null;
  /** Changes with each move to `targetLine` (a click on a link to it again goes there again). */
  targetMove?: number;
}) {
  // Appended in place (see LogBuffer); `version` says when it changed.
  const [buffer] = useState(
    () => new LogBuffer(maxLogChars, levelPatterns(storedLevelRules(browserStorage()))),
  );
  const [searcher] = useState(() => new IncrementalSearch());
  const [version, bumpVersion] = useFrameVersion();
  const [events, setEvents] = useState<Entry[]>([]);
  const [facts, setFacts] = useState<RunFacts>(NO_FACTS);
  const [notices, setNotices] = useState<string[]>([]);
  const [follow, setFollow] = useState(targetLine === null);
  // A new target stops follow at once, so the log waits where it is until the line arrives.
  const target = `${targetLine}:${targetMove}`;
  const [seenTarget, setSeenTarget] = useState(target);
  const addressed = (): LineRange | null =>
    targetLine === null
      ? null
      : {
          first: Math.min(targetLine, targetLastLine ?? targetLine),
          last: Math.max(targetLine, targetLastLine ?? targetLine),
        };
  // The lines highlighted: the address's, then the ones clicked.
  const [selection, setSelection] = useState<LineRange | null>(addressed);
  // Where the log is to be scrolled to (a line number of the log), once per move: `a…` for an
  // address, `j…` for a jump to an error.
  const [goTo, setGoTo] = useState<{ line: number; move: string } | null>(
    targetLine === null ? null : { line: targetLine, move: `a${targetMove}` },
  );
  if (target !== seenTarget) {
    setSeenTarget(target);
    if (targetLine !== null) setFollow(false);
    setSelection(addressed());
    setGoTo(targetLine === null ? null : { line: targetLine, move: `a${targetMove}` });
  }
  const anchor = useRef<number | null>(targetLine);
  const [copied, setCopied] = useState('');
  const [timestamps, setTimestamps] = useStoredChoice<TimestampMode>(
    TIMESTAMPS_KEY,
    TIMESTAMP_MODES,
    'off',
  );
  const [wrap, setWrap] = useStoredChoice(WRAP_KEY, ['off', 'on'] as const, 'off');
  const [failedSteps, setFailedSteps] = useState<ReadonlySet<string>>(new Set());
  const [query, setQuery] = useState('');
  const [active, setActive] = useState(0);
  const searchInput = useRef<HTMLInputElement>(null);
  useSlashToFocus(searchInput);

  // History as text, then the stream for what follows it; made once, like the buffer it feeds,
  // and again to read the whole log when it was read from near a linked line.
  const makeSource = (near: number | null) => {
    if (history === null) return null;
    let given = false;
    return tailAfterHistory(
      (options) => tail(options),
      history,
      { pipeline, runId },
      {
        onText: (text, marked) => {
          given = true;
          if (marked) buffer.appendMarked(text);
          else buffer.append(text);
          bumpVersion();
        },
        onAbandon: () => {
          if (!given && buffer.skipped === 0) return;
          given = false;
          buffer.clear();
          bumpVersion();
        },
        ...(near === null
          ? {}
          : {
              near: {
                line: near,
                onStart: (line) => {
                  buffer.startAt(line);
                  bumpVersion();
                },
              },
            }),
      },
    );
  };
  const [reading, setReading] = useState(() => ({ source: makeSource(targetLine), opened: 0 }));
  const { source } = reading;
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
          setFailedSteps(new Set());
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
        buffer.append(entry.text ?? '', { time: Date.parse(entry.time), step: entry.step });
        bumpVersion();
        return;
      }
      setEvents((previous) => [entry, ...previous.slice(0, EVENTS_KEPT - 1)]);
      const failedStep = failedStepOf(entry);
      if (failedStep !== null) setFailedSteps((previous) => new Set(previous).add(failedStep));
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
  useEffect(() => {
    if (!loadRun) return;
    let current = true;
    loadRun(pipeline, runId).then(
      (run) => {
        if (current) setFacts((previous) => withSummary(previous, run));
      },
      // Only the early facts are lost: the stream gives them, and says why it cannot open.
      () => {},
    );
    return () => {
      current = false;
    };
  }, [loadRun, pipeline, runId]);
  const { state, resume } = useTail(
    source?.tail ?? tail,
    `run:${pipeline}\u0000${runId}\u0000${reading.opened}`,
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
  /** The log was read from near a linked line: read it all, from the start, and the stream anew. */
  const readWholeLog = () => {
    buffer.clear();
    bumpVersion();
    setEvents([]);
    setFacts(NO_FACTS);
    setFailedSteps(new Set());
    setReading((last) => ({ source: makeSource(null), opened: last.opened + 1 }));
  };

  const now = useNow(facts.startedAt !== null && facts.endedAt === null);
  // A finished run's header says so (its end, how long it took), not the stream's "Live".
  const finished = facts.endedAt !== null;
  const elapsed = facts.startedAt
    ? formatDuration(
        (facts.endedAt ? Date.parse(facts.endedAt) : now) - Date.parse(facts.startedAt),
      )
    : '—';

  // `lines[i]` is line `dropped + i + 1` of the log.
  const indexOf = (line: number) => line - 1 - buffer.dropped;
  const targetIndex = targetLine === null ? null : indexOf(targetLine);
  const goToIndex = goTo === null ? null : indexOf(goTo.line);
  const activeLine = search.matches[shown]?.line;
  const reveal = [activeLine, goToIndex].filter(
    (line): line is number => line !== undefined && line !== null && line >= 0,
  );
  const log = useSections(buffer, version, {
    finished: facts.endedAt !== null,
    failedSteps,
    reveal,
  });
  // Like the sections: the buffer's version and length stand for its contents.
  const lineCount = buffer.length;
  // eslint-disable-next-line react-hooks/exhaustive-deps
  const marks = useMemo(() => levelMarks(buffer), [buffer, version, lineCount]);
  const errors = buffer.errorCount;

  const jumps = useRef(0);
  const jumpTo = (index: number) => {
    jumps.current += 1;
    setFollow(false);
    setGoTo({ line: buffer.dropped + index + 1, move: `j${jumps.current}` });
  };
  const onErrorStep = (direction: 1 | -1) => {
    const from = goToIndex ?? (direction === 1 ? -1 : buffer.length);
    let next = buffer.findLevel(from + direction, direction, LEVEL_ERROR);
    // Past the last (or before the first): round again from the other end.
    if (next === -1) {
      next = buffer.findLevel(direction === 1 ? 0 : buffer.length - 1, direction, LEVEL_ERROR);
    }
    if (next !== -1) jumpTo(next);
  };
  const onLineClick = (index: number, extend: boolean) => {
    const line = buffer.dropped + index + 1;
    const from = extend && anchor.current !== null ? anchor.current : line;
    if (!extend) anchor.current = line;
    const range = { first: Math.min(from, line), last: Math.max(from, line) };
    setSelection(range);
    setFollow(false);
    // The address says it, for a reload or a copy of it; the view is not moved.
    const { pathname, search: query } = window.location;
    window.history.replaceState(window.history.state, '', pathname + query + lineHash(range));
  };
  const onCopyLink = (index: number) => {
    const line = buffer.dropped + index + 1;
    const range =
      selection && line >= selection.first && line <= selection.last
        ? selection
        : { first: line, last: line };
    const { origin, pathname, search: query } = window.location;
    const url = origin + pathname + query + lineHash(range);
    const said =
      range.first === range.last ? `line ${range.first}` : `lines ${range.first}–${range.last}`;
    const clipboard = navigator.clipboard as Clipboard | undefined;
    if (!clipboard) {
      setCopied(`Could not copy the link to ${said}: no clipboard here.`);
      return;
    }
    clipboard.writeText(url).then(
      () => setCopied(`Copied the link to ${said}.`),
      () => setCopied(`Could not copy the link to ${said}.`),
    );
  };
  const startTime = facts.startedAt ? Date.parse(facts.startedAt) : buffer.timeOf(0);

  const runBody = (
    <>
      {/* A finished run's last progress is history, not where it stands. */}
      {facts.progress && !finished ? <ProgressBar progress={facts.progress} /> : null}
      {buffer.skipped > 0 ? (
        <p className="notice" role="note">
          This log is long: to show line {targetLine?.toLocaleString('en-US')} at once, it was read
          from line {(buffer.skipped + 1).toLocaleString('en-US')}.{' '}
          <button type="button" onClick={readWholeLog}>
            Read the whole log
          </button>
        </p>
      ) : null}
      {targetIndex !== null && targetIndex < 0 && buffer.skipped === 0 ? (
        <p className="notice" role="note">
          Line {targetLine?.toLocaleString('en-US')} is no longer held by this view: it is in the{' '}
          <a href={logHref(pipeline, runId)}>whole log</a>.
        </p>
      ) : null}
      {buffer.dropped > buffer.skipped ? (
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
            <span className="error-nav">
              <span data-testid="error-count">
                {errors === 1 ? '1 error' : `${errors.toLocaleString('en-US')} errors`}
              </span>
              <button
                type="button"
                aria-label="Previous error"
                disabled={errors === 0}
                onClick={() => onErrorStep(-1)}
              >
                ↑ error
              </button>
              <button
                type="button"
                aria-label="Next error"
                disabled={errors === 0}
                onClick={() => onErrorStep(1)}
              >
                ↓ error
              </button>
            </span>
            <label>
              Times{' '}
              <select
                aria-label="Timestamps"
                value={timestamps}
                onChange={(event) => setTimestamps(event.target.value as TimestampMode)}
              >
                <option value="off">off</option>
                <option value="clock">wall clock</option>
                <option value="elapsed">since start</option>
              </select>
            </label>
            <label>
              <input
                type="checkbox"
                checked={wrap === 'on'}
                onChange={(event) => setWrap(event.target.checked ? 'on' : 'off')}
              />{' '}
              Wrap lines
            </label>
            <span data-testid="follow-state">{follow ? 'Following' : 'Paused'}</span>
            {follow ? null : (
              <button type="button" onClick={jumpToLatest}>
                Jump to latest
              </button>
            )}
          </div>
          <span className="copied" role="status">
            {copied}
          </span>
          <div className="log-frame">
            <LogView
              lines={buffer}
              firstLine={buffer.dropped}
              version={version}
              follow={follow}
              onFollowChange={setFollow}
              matches={search.matches}
              active={shown}
              target={goToIndex}
              targetMove={goTo?.move ?? ''}
              rows={log.rows}
              sections={log.sections}
              folded={log.folded}
              onToggle={log.toggle}
              info={buffer}
              timestamps={timestamps}
              startTime={startTime}
              wrap={wrap === 'on'}
              highlight={
                selection
                  ? { first: indexOf(selection.first), last: indexOf(selection.last) }
                  : null
              }
              focus={goTo?.move.startsWith('j') ? goToIndex : null}
              onLineClick={onLineClick}
              onCopyLink={onCopyLink}
            />
            <LevelGutter marks={marks} firstLine={buffer.dropped} onJump={jumpTo} />
          </div>
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
        {finished ? (
          <span data-testid="run-ended">
            Ended <EndedAt iso={facts.endedAt} /> · took{' '}
            <span data-testid="elapsed">{elapsed}</span>
          </span>
        ) : (
          <span>
            Elapsed <span data-testid="elapsed">{elapsed}</span>
          </span>
        )}
        {finished && quietConnection(state) ? null : (
          <ConnectionStateBadge state={state} onResume={resume} />
        )}
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
