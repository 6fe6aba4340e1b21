import { useVirtualizer } from '@tanstack/react-virtual';
import { useCallback, useLayoutEffect, useRef, useState } from 'react';
import type { UIEvent } from 'react';
import { AnsiLine } from './ansi.js';
import { ConnectionBadge, defaultTail, useTail } from './stream.js';
import type { TailEvent, TailFn } from './stream.js';

/** How close to the bottom (px) still counts as "at the bottom" for follow mode. */
const BOTTOM_SLACK = 24;
const LINE_HEIGHT = 20;

interface LogState {
  lines: string[];
  /** The last line has no newline yet: the next chunk continues it. */
  open: boolean;
}

function appendText(state: LogState, text: string): LogState {
  const pieces = text.split('\n');
  const lines = state.lines.slice();
  const first = pieces.shift() ?? '';
  if (state.open && lines.length > 0) lines[lines.length - 1] += first;
  else lines.push(first);
  lines.push(...pieces);
  // A chunk ending in '\n' leaves an empty, open line: drop it until text arrives for it.
  const open = !text.endsWith('\n');
  if (!open) lines.pop();
  return { lines, open };
}

/** One run: its log, live, virtualized, with line numbers, ANSI colours and follow mode. */
export function RunView({
  pipeline,
  runId,
  tail = defaultTail,
}: {
  pipeline: string;
  runId: string;
  tail?: TailFn;
}) {
  const [log, setLog] = useState<LogState>({ lines: [], open: false });
  const [runStatus, setRunStatus] = useState<string | null>(null);
  const [follow, setFollow] = useState(true);
  const scrollRef = useRef<HTMLDivElement>(null);

  const onEvent = useCallback((event: TailEvent) => {
    if (event.type === 'gap' && event.gap.reason === 'reset') setLog({ lines: [], open: false });
    if (event.type === 'end' && event.end.status) setRunStatus(event.end.status);
    if (event.type !== 'entry') return;
    const { entry } = event;
    if (entry.kind === 'log' && typeof entry.text === 'string') {
      const text = entry.text;
      setLog((previous) => appendText(previous, text));
    } else if (entry.kind === 'status') {
      const status = (entry.data as { status?: unknown } | undefined)?.status;
      if (typeof status === 'string') setRunStatus(status);
    }
  }, []);
  const { status, error } = useTail(
    tail,
    `run:${pipeline}\u0000${runId}`,
    { target: { pipeline, runId } },
    onEvent,
  );

  const virtualizer = useVirtualizer({
    count: log.lines.length,
    getScrollElement: () => scrollRef.current,
    estimateSize: () => LINE_HEIGHT,
    overscan: 20,
  });

  // Follow mode: keep the newest line in view as lines arrive.
  useLayoutEffect(() => {
    const element = scrollRef.current;
    if (follow && element) element.scrollTop = element.scrollHeight;
  }, [follow, log]);

  const onScroll = (event: UIEvent<HTMLDivElement>) => {
    const element = event.currentTarget;
    const atBottom =
      element.scrollTop + element.clientHeight >= element.scrollHeight - BOTTOM_SLACK;
    setFollow(atBottom);
  };

  const jumpToLatest = () => {
    setFollow(true);
    const element = scrollRef.current;
    if (element) element.scrollTop = element.scrollHeight;
  };

  const digits = String(Math.max(log.lines.length, 1)).length;

  return (
    <section className="run-view">
      <h1>
        {pipeline} / {runId}
      </h1>
      <div className="run-meta">
        <span
          data-testid="run-status"
          className={`run-status run-status-${runStatus ?? 'unknown'}`}
        >
          {runStatus ?? 'unknown'}
        </span>
        <ConnectionBadge status={status} error={error} />
        <span data-testid="follow-state">{follow ? 'Following' : 'Paused'}</span>
        {follow ? null : (
          <button type="button" onClick={jumpToLatest}>
            Jump to latest
          </button>
        )}
      </div>
      <div
        ref={scrollRef}
        className="log"
        data-testid="log"
        role="log"
        aria-label="Run log"
        aria-live="off"
        onScroll={onScroll}
      >
        <div style={{ height: virtualizer.getTotalSize(), position: 'relative', width: '100%' }}>
          {virtualizer.getVirtualItems().map((item) => (
            <div
              key={item.key}
              className="log-line"
              data-index={item.index}
              style={{
                position: 'absolute',
                top: 0,
                left: 0,
                width: '100%',
                height: item.size,
                transform: `translateY(${item.start}px)`,
              }}
            >
              <span className="line-number" aria-hidden="true">
                {String(item.index + 1).padStart(digits, ' ')}
              </span>
              <span className="line-text">
                <AnsiLine text={log.lines[item.index] ?? ''} />
              </span>
            </div>
          ))}
        </div>
      </div>
    </section>
  );
}
