import { useVirtualizer } from '@tanstack/react-virtual';
import { useEffect, useLayoutEffect, useMemo, useRef } from 'react';
import type { UIEvent } from 'react';
import { AnsiLine } from '../ansi.js';
import type { Mark } from '../ansi.js';
import type { LogLines } from './log-buffer.js';
import type { Match } from './log-search.js';

/** How close to the bottom (px) still counts as "at the bottom" for follow mode. */
const BOTTOM_SLACK = 24;
const LINE_HEIGHT = 20;

/**
 * The log, virtualized (only the rows in view are in the DOM), with line numbers, ANSI colours
 * and search matches. While `follow` is on it keeps the newest line in view like `tail -f`;
 * scrolling away from the bottom turns it off, scrolling back to the bottom turns it on.
 */
export function LogView({
  lines,
  firstLine = 0,
  version,
  follow,
  onFollowChange,
  matches,
  active,
  target = null,
  targetMove = 0,
}: {
  lines: LogLines;
  /** Lines of the log before `lines.line(0)` that the view let go (they are numbered on from there). */
  firstLine?: number;
  /** Changes whenever `lines` (appended in place) changes. */
  version: number;
  follow: boolean;
  onFollowChange: (follow: boolean) => void;
  matches: readonly Match[];
  /** The index in `matches` of the match to show, or -1. */
  active: number;
  /** The index in `lines` of the line to bring to the middle and highlight (`#L…`), or null. */
  target?: number | null;
  /** Changes with each move to `target`: it is scrolled to again. */
  targetMove?: number;
}) {
  const scrollRef = useRef<HTMLDivElement>(null);
  // The virtualizer returns functions that change without their identity changing, which the
  // React Compiler cannot memoize; this app is not compiled, so there is nothing to lose.
  // eslint-disable-next-line react-hooks/incompatible-library
  const virtualizer = useVirtualizer({
    count: lines.length,
    getScrollElement: () => scrollRef.current,
    estimateSize: () => LINE_HEIGHT,
    overscan: 20,
  });

  const marksByLine = useMemo(() => {
    const byLine = new Map<number, Mark[]>();
    matches.forEach((match, index) => {
      const marks = byLine.get(match.line) ?? [];
      marks.push({ start: match.start, end: match.end, active: index === active });
      byLine.set(match.line, marks);
    });
    return byLine;
  }, [matches, active]);

  // Where the log was last scrolled to, by the user or by following.
  const lastScrollTop = useRef(0);

  // `lines` grows in place, so a render for any reason may show more of it than the last
  // `version`: follow what was rendered, not what was announced.
  const count = lines.length;
  useLayoutEffect(() => {
    const element = scrollRef.current;
    if (!follow || !element) return;
    element.scrollTop = element.scrollHeight;
    lastScrollTop.current = element.scrollTop;
  }, [follow, count, version]);

  // Lines let go above the view: keep what the user is reading where it is.
  const previousFirstLine = useRef(firstLine);
  useLayoutEffect(() => {
    const letGo = firstLine - previousFirstLine.current;
    previousFirstLine.current = firstLine;
    const element = scrollRef.current;
    if (letGo <= 0 || follow || !element) return;
    element.scrollTop = Math.max(0, element.scrollTop - letGo * LINE_HEIGHT);
    lastScrollTop.current = element.scrollTop;
  }, [firstLine, follow]);

  const activeLine = matches[active]?.line;
  useEffect(() => {
    if (activeLine !== undefined) virtualizer.scrollToIndex(activeLine, { align: 'center' });
  }, [activeLine, active, virtualizer]);

  // The target line, once it is loaded (history may still be arriving): to the middle, once per
  // move, so that scrolling away from it afterwards is the user's to do.
  const scrolledTo = useRef<string | null>(null);
  useEffect(() => {
    if (target === null || target < 0 || target >= count) return;
    const move = `${targetMove}:${target}`;
    if (scrolledTo.current === move) return;
    scrolledTo.current = move;
    virtualizer.scrollToIndex(target, { align: 'center' });
  }, [target, targetMove, count, virtualizer]);
  // While a target is waited for or was just shown, reaching the bottom (a short log, a target
  // near the end) does not resume follow: only the user's own scrolling does, or Jump to latest.
  const pinned = useRef(false);
  useLayoutEffect(() => {
    if (target !== null) pinned.current = true;
  }, [target, targetMove]);
  const unpin = () => {
    pinned.current = false;
  };

  // Only a move up pauses follow: while text pours in, a scroll event can arrive after the log
  // grew and before it was scrolled to its new end, which is not the user leaving the bottom.
  const onScroll = (event: UIEvent<HTMLDivElement>) => {
    const element = event.currentTarget;
    const movedUp = element.scrollTop < lastScrollTop.current;
    lastScrollTop.current = element.scrollTop;
    const atBottom =
      element.scrollTop + element.clientHeight >= element.scrollHeight - BOTTOM_SLACK;
    if (follow && movedUp && !atBottom) onFollowChange(false);
    else if (!follow && atBottom && !pinned.current) onFollowChange(true);
  };

  const digits = String(Math.max(firstLine + lines.length, 1)).length;
  return (
    <div
      ref={scrollRef}
      className="log"
      data-testid="log"
      role="log"
      aria-label="Run log"
      aria-live="off"
      // Focusable, so the keyboard can scroll it.
      tabIndex={0}
      onScroll={onScroll}
      onWheel={unpin}
      onKeyDown={unpin}
      onPointerDown={unpin}
      onTouchStart={unpin}
    >
      <div style={{ height: virtualizer.getTotalSize(), position: 'relative', width: '100%' }}>
        {virtualizer.getVirtualItems().map((item) => (
          <div
            key={item.key}
            className={item.index === target ? 'log-line line-target' : 'log-line'}
            data-index={item.index}
            data-line={firstLine + item.index + 1}
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
              {String(firstLine + item.index + 1).padStart(digits, ' ')}
            </span>
            <span className="line-text">
              <AnsiLine text={lines.line(item.index)} marks={marksByLine.get(item.index)} />
            </span>
          </div>
        ))}
      </div>
    </div>
  );
}
